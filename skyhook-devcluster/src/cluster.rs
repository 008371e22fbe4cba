//! Installing Skyhook into a [`DevCluster`] from a test: its CRDs, namespace and LimitRange and
//! `skyhook-controller` ([`crate::install`]), and `skyhook-webhook` ([`crate::webhook`]). The
//! cluster itself is devcluster's general-purpose simulator; this uses only its public API (the
//! state directory and [`DevCluster::client`]).

use devcluster::DevCluster;
use devcluster::state::StateDir;

use crate::error::InstallError;
use crate::install::{self, ControllerProcess, InstallOptions};
use crate::webhook::{self, WebhookError, WebhookOptions, WebhookProcess};

/// Skyhook's installers as methods of a [`DevCluster`].
#[allow(async_fn_in_trait)] // Called from tests on one runtime; no Send bound is wanted.
pub trait SkyhookInstall {
    /// Applies the skyhook CRDs, the `skyhook` namespace and its LimitRange, and starts
    /// `skyhook-controller` against this cluster; returns once the controller is ready. The
    /// controller stops when the returned handle is dropped (drop it before the cluster).
    async fn install(&self, options: InstallOptions) -> Result<ControllerProcess, InstallError>;

    /// Starts one more `skyhook-controller` against this cluster, without applying anything
    /// (see [`InstallOptions::replica`] for a second replica next to the installed one).
    async fn start_controller(
        &self,
        options: InstallOptions,
    ) -> Result<ControllerProcess, InstallError>;

    /// Registers upstream's webhook configurations and starts `skyhook-webhook` against this
    /// cluster (after [`SkyhookInstall::install`]: it needs the CRDs and the namespace); returns
    /// once the API server gets answers through it. The webhook stops when the handle is dropped
    /// (drop it before the cluster).
    async fn install_webhook(
        &self,
        options: WebhookOptions,
    ) -> Result<WebhookProcess, WebhookError>;
}

impl SkyhookInstall for DevCluster {
    async fn install(&self, options: InstallOptions) -> Result<ControllerProcess, InstallError> {
        install::install(&client(self)?, &state(self), &options).await
    }

    async fn start_controller(
        &self,
        options: InstallOptions,
    ) -> Result<ControllerProcess, InstallError> {
        install::start_controller(&state(self), &options).await
    }

    async fn install_webhook(
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
