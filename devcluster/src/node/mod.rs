//! Simulated nodes: Node objects kept fresh (status, leases, boot ID), a host root per node (an
//! overlay of the machine's `/` in a private mount namespace), reboots, the service journal, and
//! the simulated kubelet that runs the pods bound to them (`crate::kubelet`).
//!
//! Layout under `state_dir` (`<cluster state>/nodes`):
//!
//! ```text
//! holder.pid                       the process holding the mount namespace of node roots
//! <node>/node.json                 name, index, light
//! <node>/boot_id                   the current boot ID (also /proc/sys/kernel/random/boot_id inside)
//! <node>/upper, work, root         the root overlay (root is mounted only in the namespace)
//! <node>/control/requests, journal the FIFO the command shims write to, and the service journal
//! <node>/logs/<ns>_<pod>_<uid>/<container>/<restart>.log
//! <node>/pods/<uid>/               volumes and container specs of a pod
//! ```

pub mod command_shims;
mod handle;
mod heartbeat;
mod holder;
pub mod object;
mod power;
pub(crate) mod sim;
pub mod size;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

pub use handle::NodeHandle;
pub use sim::{NodeSim, start_nodes};
pub use size::NodeSize;

use crate::PathIoError;
use crate::images::{ImageExtensions, ImageMap, ImageMapError};
use crate::kubelet::backoff::BackoffPolicy;

/// The Kubernetes version the simulated kubelets report (the control plane's version).
pub const DEFAULT_KUBELET_VERSION: &str = "v1.36.3";

/// The kubelet's own port; a cluster uses another when it serves the kubelet API, so that
/// clusters side by side (whose nodes have the same addresses) do not collide.
pub const DEFAULT_KUBELET_PORT: u16 = 10250;

/// How often the simulated kubelets renew their node Leases, and how long the node lifecycle
/// controller waits for a renewal before it taints a node `unreachable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub lease_renew_interval: Duration,
    pub node_monitor_grace_period: Duration,
}

impl Heartbeat {
    /// What a kubelet and kube-controller-manager do by default: renew every 10 s (a quarter of
    /// the 40 s lease), unreachable after 50 s without a renewal.
    pub const KUBELET: Self = Self {
        lease_renew_interval: Duration::from_secs(10),
        node_monitor_grace_period: Duration::from_secs(50),
    };
    /// For thousands of light nodes on one machine, where 5,000 kubelets renewing every 10 s
    /// (500 writes/s) would take most of the API server: renew every 60 s, unreachable after
    /// 300 s (five missed renewals, as with the defaults).
    pub const RELAXED: Self = Self {
        lease_renew_interval: Duration::from_secs(60),
        node_monitor_grace_period: Duration::from_secs(300),
    };

    /// The `leaseDurationSeconds` a kubelet renewing this often writes (four renewals).
    pub fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_renew_interval.as_secs().saturating_mul(4)).unwrap_or(i32::MAX)
    }
}

impl Default for Heartbeat {
    fn default() -> Self {
        Self::KUBELET
    }
}

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

/// Errors of the node simulator.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    ImageMap(#[from] ImageMapError),
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("failed to {action} node {node}")]
    Api {
        action: &'static str,
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Isolation(#[from] crate::isolation::IsolationError),
    #[error("failed to start the mount namespace holder ({binary}): {reason}")]
    Holder { binary: PathBuf, reason: String },
    #[error("failed to mount the root of node {node}: {reason}")]
    NodeRoot { node: String, reason: String },
    #[error("node {node} is a light node: it has no host root")]
    LightNode { node: String },
    #[error("node {node} is not known in {state_dir} (is the cluster up?)")]
    UnknownNode { node: String, state_dir: PathBuf },
    #[error(
        "the simulator of node {node} is not running (no reader on {path}); start the cluster first"
    )]
    NotRunning { node: String, path: PathBuf },
    #[error(
        "simulated nodes already run from {state_dir} (namespace holder process {pid}); stop that cluster first"
    )]
    AlreadyRunning { state_dir: PathBuf, pid: i32 },
    #[error(
        "node {node} is simulated by another process; bring it {action} through that process \
         (`devcluster node {action} {node}` for a cluster started by `devcluster up`)"
    )]
    NotInProcess { node: String, action: &'static str },
    #[error("failed to set up the pod network of the nodes")]
    Network(#[from] crate::network::NetworkError),
    #[error("failed to watch nodes until they are Ready: {reason}")]
    Watch { reason: String },
}
