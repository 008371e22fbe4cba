//! Skyhook on a devcluster: what is Skyhook's beside devcluster's general-purpose simulator.
//!
//! - [`images`]: Skyhook's image-map entries (the agent as a host binary, package images, the
//!   chart's images) and the [`agentless`] test image the simulated kubelet plays.
//! - [`install`] and [`webhook`]: Skyhook's CRDs, namespace and LimitRange, and
//!   `skyhook-controller` and `skyhook-webhook` running against a cluster ([`SkyhookInstall`]
//!   for tests).
//! - [`cli`]: Skyhook's verbs of the one `devcluster` command (`install`, and what `status` and
//!   `down` say of the controller and the webhook).

pub mod agentless;
pub mod background;
pub mod cli;
pub mod cluster;
pub mod error;
pub mod images;
pub mod install;
pub mod webhook;

pub use cluster::SkyhookInstall;
pub use error::InstallError;
pub use images::images;
pub use install::{ControllerProcess, InstallOptions};
pub use webhook::{WebhookError, WebhookOptions, WebhookProcess};
