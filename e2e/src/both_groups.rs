//! A devcluster whose controller drives both API groups: the nodewright.nvidia.com CRDs are
//! served before the controller starts (it looks at start for the groups it drives).

use devcluster::DevCluster;
use skyhook_devcluster::InstallOptions;

use crate::apply::apply_nodewright_crds;
use crate::cluster::{Installed, Setup, install_controller, start_cluster};

/// [`crate::install_with`] on a cluster serving the nodewright.nvidia.com CRDs before the
/// controller starts, so that it drives NodeWrights beside Skyhooks.
pub async fn install_serving_both_groups(setup: Setup) -> anyhow::Result<Installed> {
    let (cluster, options) = start_serving_both_groups(setup).await?;
    install_controller(cluster, options).await
}

/// The cluster of [`install_serving_both_groups`] before the controller starts, with the
/// controller's install options for [`crate::install_controller`]: for a test that lays down
/// what another operator left before ours takes over.
pub async fn start_serving_both_groups(
    setup: Setup,
) -> anyhow::Result<(DevCluster, InstallOptions)> {
    crate::build_binaries()?;
    let (cluster, options) = start_cluster(setup).await?;
    apply_nodewright_crds(&cluster.client()?).await?;
    Ok((cluster, options))
}
