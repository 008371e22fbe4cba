//! How to simulate the nodes, with a kubelet's defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::error::NodeError;
use super::heartbeat_timing::Heartbeat;
use super::size::NodeSize;
use crate::images::{ImageExtensions, ImageMap};
use crate::kubelet::backoff::BackoffPolicy;

/// The Kubernetes version the simulated kubelets report (the control plane's version).
pub const DEFAULT_KUBELET_VERSION: &str = "v1.36.3";

/// The kubelet's own port; a cluster uses another when it serves the kubelet API, so that
/// clusters side by side (whose nodes have the same addresses) do not collide.
pub const DEFAULT_KUBELET_PORT: u16 = 10250;

/// How to simulate the nodes.
#[derive(Debug, Clone)]
pub struct NodeSimOptions {
    pub count: usize,
    /// No host roots and no processes: only pause, sleep and played images run.
    pub light: bool,
    /// Nodes are `<prefix>1` .. `<prefix>N`.
    pub name_prefix: String,
    /// Extra labels on every node.
    pub labels: BTreeMap<String, String>,
    /// How much each Node object carries besides what the simulation needs.
    pub size: NodeSize,
    /// How long a rebooting node stays down.
    pub reboot_delay: Duration,
    /// `<cluster state>/nodes`.
    pub state_dir: PathBuf,
    pub image_map: ImageMap,
    /// The repository root (package directories of the image map are relative to it).
    pub workspace_root: PathBuf,
    pub kubelet_version: String,
    /// Capacity (and allocatable) of every node.
    pub cpu: String,
    pub memory: String,
    pub max_pods: String,
    /// How often the kubelets renew their leases (the lease lasts four renewals).
    pub heartbeat: Heartbeat,
    /// How often each kubelet computes its node's status and posts it when it differs from
    /// what the API server holds (say kube-controller-manager set Ready to Unknown, or the boot ID
    /// is stale): the kubelet's `nodeStatusUpdateFrequency`, 10 s. Comparing costs no API call
    /// (one shared watch of the Nodes), so it suits thousands of light nodes too.
    pub status_update_interval: Duration,
    /// The kubelet re-posts an unchanged node status every 5 minutes
    /// (`nodeStatusReportFrequency`).
    pub status_report_interval: Duration,
    /// Container restart and image pull back-off.
    pub backoff: BackoffPolicy,
    /// At most this many API writes in flight (node creation, leases, pod status).
    pub write_concurrency: usize,
    /// The API server URL as containers should reach it (`KUBERNETES_SERVICE_HOST`/`_PORT`).
    pub apiserver_url: Option<String>,
    /// How long a rebooting node waits for its processes after SIGTERM before SIGKILL.
    pub shutdown_grace: Duration,
    /// The port every node's kubelet API listens on, at the node's InternalIP.
    pub kubelet_port: u16,
    /// Full nodes only: each pod that is not `hostNetwork` gets its own network namespace on
    /// its node's bridge in this claimed network, with an address from the node's `podCIDR`
    /// (see `crate::network`). `None`: pods share the machine's network with loopback pod IPs.
    pub pod_network: Option<crate::network::ClusterNetwork>,
}

impl NodeSimOptions {
    /// Defaults as a kubelet has them, with the built-in image map.
    pub fn new(
        count: usize,
        state_dir: PathBuf,
        workspace_root: PathBuf,
    ) -> Result<Self, NodeError> {
        Ok(Self {
            count,
            light: false,
            name_prefix: "node-".to_owned(),
            labels: BTreeMap::new(),
            size: NodeSize::Small,
            reboot_delay: Duration::from_secs(5),
            state_dir,
            image_map: ImageMap::builtin(&workspace_root, &ImageExtensions::default())?,
            workspace_root,
            kubelet_version: DEFAULT_KUBELET_VERSION.to_owned(),
            cpu: "8".to_owned(),
            memory: "16Gi".to_owned(),
            max_pods: "110".to_owned(),
            heartbeat: Heartbeat::KUBELET,
            status_update_interval: Duration::from_secs(10),
            status_report_interval: Duration::from_secs(300),
            backoff: BackoffPolicy::default(),
            write_concurrency: 32,
            apiserver_url: None,
            shutdown_grace: Duration::from_secs(5),
            kubelet_port: DEFAULT_KUBELET_PORT,
            pod_network: None,
        })
    }

    /// The name of the node numbered `index` (from 1).
    pub fn node_name(&self, index: usize) -> String {
        format!("{}{index}", self.name_prefix)
    }
}
