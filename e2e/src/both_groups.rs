//! A devcluster whose controller drives both API groups: the nodewright.nvidia.com CRDs are
//! served before the controller starts (it looks at start for the groups it drives).

use crate::apply::apply_nodewright_crds;
use crate::cluster::{Installed, Setup, install_controller, start_cluster};

/// [`crate::install_with`] on a cluster serving the nodewright.nvidia.com CRDs before the
/// controller starts, so that it drives NodeWrights beside Skyhooks.
pub async fn install_serving_both_groups(setup: Setup) -> anyhow::Result<Installed> {
    crate::build_binaries()?;
    let (cluster, options) = start_cluster(setup).await?;
    apply_nodewright_crds(&cluster.client()?).await?;
    install_controller(cluster, options).await
}
