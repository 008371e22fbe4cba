//! What is specific to Skyhook: installing its CRDs, namespace and LimitRange and running
//! `skyhook-controller` ([`install`]) and `skyhook-webhook` ([`webhook`]) against a devcluster.
//!
//! The rest of the crate is a general-purpose cluster simulator (control plane, simulated nodes,
//! kubelet) and knows nothing of Skyhook; this module uses only its public API (the state
//! directory, process records, the binaries' locations, [`DevCluster::client`]). The `devcluster`
//! command's `install`, `status` and `down` call it.

pub mod background;
pub mod install;
pub mod webhook;

use crate::DevCluster;
use crate::state::StateDir;
use install::{ControllerProcess, InstallError, InstallOptions};
use webhook::{WebhookError, WebhookOptions, WebhookProcess};

impl DevCluster {
    /// Applies the skyhook CRDs, the `skyhook` namespace and its LimitRange, and starts
    /// `skyhook-controller` against this cluster; returns once the controller is ready. The
    /// controller stops when the returned handle is dropped (drop it before the cluster).
    pub async fn install(
        &self,
        options: InstallOptions,
    ) -> Result<ControllerProcess, InstallError> {
        install::install(&client(self)?, &state(self), &options).await
    }

    /// Starts one more `skyhook-controller` against this cluster, without applying anything
    /// (see [`InstallOptions::replica`] for a second replica next to the installed one).
    pub async fn start_controller(
        &self,
        options: InstallOptions,
    ) -> Result<ControllerProcess, InstallError> {
        install::start_controller(&state(self), &options).await
    }

    /// Registers upstream's webhook configurations and starts `skyhook-webhook` against this
    /// cluster (after [`DevCluster::install`]: it needs the CRDs and the namespace); returns once
    /// the API server gets answers through it. The webhook stops when the handle is dropped (drop
    /// it before the cluster).
    pub async fn install_webhook(
        &self,
        options: WebhookOptions,
    ) -> Result<WebhookProcess, WebhookError> {
        webhook::install_webhook(&client(self)?, &state(self), &options).await
    }
}

fn client(cluster: &DevCluster) -> Result<kube::Client, InstallError> {
    cluster
        .client()
        .map_err(|error| InstallError::Client(error.to_string()))
}

fn state(cluster: &DevCluster) -> StateDir {
    StateDir::new(cluster.state_dir())
}
