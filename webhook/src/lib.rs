//! skyhook-webhook: admission for Skyhooks and DeploymentPolicies. The decisions
//! ([`admit`], [`review`]) are pure; [`server`], [`tls`] and [`cache`] are the thin I/O around
//! them and [`run`] wires them together.

pub mod admit;
pub mod cache;
pub mod cert_plan;
pub mod cert_sync;
pub mod endpoint;
pub mod issue;
pub mod lookups;
pub mod metrics;
pub mod review;
pub mod run;
pub mod server;
pub mod telemetry;
pub mod tls;
