//! skyhook-controller: rolls the packages of `Skyhook` resources through the cluster's nodes.
//!
//! The decisions are pure functions over plain data, each in its own module and table-tested;
//! the I/O layers around them are thin.
//!
//! * [`config`]: settings from upstream's environment variables or flags, checked at start.
//! * [`names`]: names, labels and owner identity of everything the controller creates.
//! * [`pods`]: package pods and interrupt pods, in upstream's exact shape.
//! * [`configmaps`]: package ConfigMaps and node-metadata ConfigMaps.
//! * [`pod_match`]: whether a running pod still belongs to the spec and the node state.
//! * [`pod_outcome`]: what a pod's status means (success, failure, reboot in flight).
//! * [`job_outcome`]: what a stage Job and its attempts mean; [`last_logs`]: what a Job stuck
//!   at `FailureTarget` keeps of its stuck container's log.
//! * [`drain`]: which pods leave a node before an interrupt, which block it, what blocks a drain.
//! * [`metrics`]: upstream's Prometheus gauges computed from a Skyhook's status, and reconcile metrics.
//! * [`metrics_auth`]: who may read `/metrics` when served securely (TokenReview, SubjectAccessReview).
//! * [`duration`]: Go duration strings (`DEFAULT_INTERVAL`, `gracefulShutdown`).
//! * [`api_requests`]: the verb and resource of each API request the controller sends, counted.
//! * [`telemetry`]: JSON or console logs with upstream's log settings.
//! * [`reconcile`]: one reconcile as a pipeline: observe, snapshot, the pure
//!   [`reconcile::plan::plan`] of every write, apply, report.
//!
//! I/O around them: [`cache`] (reflector caches and the change trigger), [`leader`] (Lease-based
//! leader election), [`server`] (`/metrics`, `/healthz`, `/readyz`) and [`run`] (start-up and the
//! one-at-a-time reconcile loop).
pub mod api_requests;
pub mod cache;
pub mod config;
pub mod configmaps;
pub mod drain;
pub mod job_outcome;
pub mod jobs;
pub use skyhook_api::duration;
pub mod last_logs;
pub mod leader;
pub mod metrics;
pub mod metrics_auth;
pub mod names;
pub mod node_view;
pub mod pod_match;
pub mod pod_outcome;
pub mod pods;
pub mod pre_pull;
pub mod reconcile;
pub mod run;
pub mod server;
pub mod telemetry;
