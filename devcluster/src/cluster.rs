//! [`DevCluster`]: the handle tests and the `devcluster` command hold on a running cluster.
//!
//! The cluster runs on a thread of its own with its own tokio runtime, so it works the same from a
//! `#[tokio::test]`, from plain sync code and from the daemon, and dropping the caller's runtime
//! cannot break it. The control-plane processes are spawned from that thread, which lives exactly
//! as long as the cluster: their parent-death signal fires if the whole process dies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use crate::controlplane::flags::Component;
use crate::controlplane::ports::Ports;
use crate::controlplane::{
    ControlPlane, ControlPlaneError, ControlPlaneSettings, Timeouts, binary,
};
use crate::images::{ImageExtensions, ImageMap};
use crate::kubelet::api::{ApiNode, KubeletApi, KubeletApiError};
use crate::network::{ClaimedNetwork, ClusterNetwork, ServiceRange};
use crate::node::object::node_address;
use crate::node::{
    Heartbeat, NodeError, NodeHandle, NodeSim, NodeSimOptions, NodeSize, start_nodes,
};
use crate::services::ServiceProxy;
use crate::state::{ClusterRecord, StateDir, repository_root};

/// How often the cluster thread looks for control-plane components that exited by themselves.
const CRASH_CHECK_PERIOD: Duration = Duration::from_secs(1);

/// Receives one human-readable line per startup milestone.
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// What to start. `DevClusterOptions::default()` is a control plane without nodes in a temporary
/// state directory.
#[derive(Clone)]
pub struct DevClusterOptions {
    pub nodes: usize,
    /// Nodes without overlay mounts (no root needed, scales to thousands).
    pub light: bool,
    /// `None`: a temporary directory, removed on drop unless `keep_state` is set or the thread
    /// is panicking (a failing test keeps its logs).
    pub state_dir: Option<PathBuf>,
    pub keep_state: bool,
    /// Labels every node gets.
    pub node_labels: BTreeMap<String, String>,
    /// How much each Node object carries (realistic Nodes for memory and watch-cost figures).
    pub node_size: NodeSize,
    /// How long a simulated reboot keeps a node down.
    pub reboot_delay: Duration,
    /// Lease renewals of the nodes and the node lifecycle controller's grace period.
    pub heartbeat: Heartbeat,
    pub timeouts: Timeouts,
    /// `None`: milestones are logged with `tracing`.
    pub progress: Option<Progress>,
    /// A user image map (the format of `devcluster/images.yaml`) whose entries are tried before
    /// the built-in ones.
    pub image_map: Option<PathBuf>,
    /// Image-map entries and played programs a project registers (tried after `image_map`,
    /// before the built-in entries).
    pub images: ImageExtensions,
    /// Full nodes give their pods network namespaces on a pod network, and the API server
    /// serves on an address pods reach (see `devcluster::network`). Needs root.
    pub pod_network: bool,
}

impl Default for DevClusterOptions {
    fn default() -> Self {
        Self {
            nodes: 0,
            light: false,
            state_dir: None,
            keep_state: false,
            node_labels: BTreeMap::new(),
            node_size: NodeSize::Small,
            reboot_delay: Duration::from_secs(2),
            heartbeat: Heartbeat::KUBELET,
            timeouts: Timeouts::default(),
            progress: None,
            image_map: None,
            images: ImageExtensions::default(),
            pod_network: false,
        }
    }
}

impl std::fmt::Debug for DevClusterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevClusterOptions")
            .field("nodes", &self.nodes)
            .field("light", &self.light)
            .field("state_dir", &self.state_dir)
            .field("keep_state", &self.keep_state)
            .field("node_labels", &self.node_labels)
            .field("node_size", &self.node_size)
            .field("reboot_delay", &self.reboot_delay)
            .field("heartbeat", &self.heartbeat)
            .field("timeouts", &self.timeouts)
            .field("progress", &self.progress.as_ref().map(|_| "callback"))
            .field("image_map", &self.image_map)
            .field("images", &self.images)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DevClusterError {
    #[error(transparent)]
    ControlPlane(#[from] ControlPlaneError),
    #[error("simulated nodes: {0}")]
    Nodes(#[from] NodeError),
    #[error("{count} nodes not Ready after {waited:?}; node logs are in {logs}")]
    NodesNotReady {
        count: usize,
        waited: Duration,
        logs: PathBuf,
    },
    #[error(
        "a cluster is already running in {state_dir} (process {owner_pid}); stop it with \
         `devcluster down --state-dir {state_dir}` or use another state directory"
    )]
    AlreadyRunning { state_dir: PathBuf, owner_pid: u32 },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("starting the cluster's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the cluster thread ended without reporting (it panicked?); logs are in {0}")]
    ThreadGone(PathBuf),
    #[error("the cluster has stopped; {action} {component} needs a running cluster")]
    Stopped {
        action: &'static str,
        component: &'static str,
    },
    #[error("node {node} is not a node of this cluster")]
    UnknownNode { node: String },
    #[error("building a Kubernetes client for {server}: {source}")]
    Client { server: String, source: kube::Error },
    #[error("the nodes' kubelet API: {0}")]
    KubeletApi(#[from] KubeletApiError),
    #[error("locating the devcluster binary (it serves the kubelet API): {0}")]
    DevclusterBinary(#[from] crate::isolation::IsolationError),
}

/// A running cluster; stopped (processes ended, node mounts removed) on drop.
#[derive(Debug)]
pub struct DevCluster {
    state: StateDir,
    temp_dir: Option<tempfile::TempDir>,
    keep_state: bool,
    config: kube::Config,
    server: String,
    ports: Ports,
    runtime: tokio::runtime::Handle,
    nodes: Vec<NodeHandle>,
    shutdown: Option<oneshot::Sender<()>>,
    faults: mpsc::UnboundedSender<FaultRequest>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a fault-injection call asks the cluster thread to do to one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ComponentAction {
    Stop,
    Start,
    Restart,
    Pause,
    Resume,
}

impl ComponentAction {
    fn verb(self) -> &'static str {
        match self {
            Self::Stop => "stopping",
            Self::Start => "starting",
            Self::Restart => "restarting",
            Self::Pause => "pausing",
            Self::Resume => "resuming",
        }
    }
}

/// Component actions run on the cluster thread: its processes must be spawned there (see
/// [`crate::controlplane::process`]), and it owns the control plane.
struct FaultRequest {
    action: ComponentAction,
    component: Component,
    reply: oneshot::Sender<Result<(), ControlPlaneError>>,
}

/// What the cluster thread reports once everything is ready.
struct Started {
    config: kube::Config,
    server: String,
    ports: Ports,
    runtime: tokio::runtime::Handle,
    nodes: Vec<NodeHandle>,
}

type ReadySender = oneshot::Sender<Result<Started, DevClusterError>>;

struct Pending {
    ready: oneshot::Receiver<Result<Started, DevClusterError>>,
    parts: Parts,
}

/// Everything of a cluster being started except its outcome.
struct Parts {
    state: StateDir,
    temp_dir: Option<tempfile::TempDir>,
    keep_state: bool,
    shutdown: oneshot::Sender<()>,
    faults: mpsc::UnboundedSender<FaultRequest>,
    thread: std::thread::JoinHandle<()>,
}

impl DevCluster {
    /// Starts a cluster and returns once the API server is ready, the namespace controllers have
    /// run and every node is Ready.
    pub async fn start(options: DevClusterOptions) -> Result<Self, DevClusterError> {
        let Pending { ready, parts } = Self::launch(options)?;
        let started = ready
            .await
            .unwrap_or_else(|_| Err(DevClusterError::ThreadGone(parts.state.logs())));
        Self::finish(started, parts)
    }

    /// [`DevCluster::start`] for code without a tokio runtime; blocks the calling thread.
    /// Do not call it from async code (use `start` there).
    pub fn start_blocking(options: DevClusterOptions) -> Result<Self, DevClusterError> {
        let Pending { ready, parts } = Self::launch(options)?;
        let started = ready
            .blocking_recv()
            .unwrap_or_else(|_| Err(DevClusterError::ThreadGone(parts.state.logs())));
        Self::finish(started, parts)
    }

    fn launch(options: DevClusterOptions) -> Result<Pending, DevClusterError> {
        let (state, temp_dir) = match &options.state_dir {
            Some(dir) => (StateDir::new(dir.clone()), None),
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("devcluster-")
                    .tempdir()
                    .map_err(|source| DevClusterError::Io {
                        action: "creating a temporary state directory in",
                        path: std::env::temp_dir(),
                        source,
                    })?;
                (StateDir::new(temp.path()), Some(temp))
            }
        };
        prepare_state_dir(&state)?;
        let (ready_tx, ready) = oneshot::channel();
        let (shutdown, shutdown_rx) = oneshot::channel();
        let (faults, faults_rx) = mpsc::unbounded_channel();
        let keep_state = options.keep_state;
        let thread_state = state.clone();
        let thread = std::thread::Builder::new()
            .name("devcluster".to_string())
            .spawn(move || run_cluster(thread_state, options, ready_tx, shutdown_rx, faults_rx))
            .map_err(DevClusterError::Runtime)?;
        Ok(Pending {
            ready,
            parts: Parts {
                state,
                temp_dir,
                keep_state,
                shutdown,
                faults,
                thread,
            },
        })
    }

    fn finish(
        started: Result<Started, DevClusterError>,
        parts: Parts,
    ) -> Result<Self, DevClusterError> {
        match started {
            Ok(started) => Ok(Self {
                state: parts.state,
                temp_dir: parts.temp_dir,
                keep_state: parts.keep_state,
                config: started.config,
                server: started.server,
                ports: started.ports,
                runtime: started.runtime,
                nodes: started.nodes,
                shutdown: Some(parts.shutdown),
                faults: parts.faults,
                thread: Some(parts.thread),
            }),
            Err(error) => {
                // The thread has cleaned up after the failure; its logs are what explains it.
                let _joined = parts.thread.join();
                if let Some(temp) = parts.temp_dir {
                    let kept = temp.keep();
                    tracing::warn!(state_dir = %kept.display(), "cluster failed to start; keeping its state directory for the logs");
                }
                Err(error)
            }
        }
    }

    pub fn kubeconfig_path(&self) -> PathBuf {
        self.state.kubeconfig()
    }

    pub fn state_dir(&self) -> &Path {
        self.state.root()
    }

    /// The API server's URL (`https://127.0.0.1:<port>`).
    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// A cluster-admin client. In async code it runs on the caller's runtime; called outside any
    /// runtime, it runs on the cluster's.
    pub fn client(&self) -> Result<kube::Client, DevClusterError> {
        let _entered = tokio::runtime::Handle::try_current()
            .is_err()
            .then(|| self.runtime.enter());
        kube::Client::try_from(self.config.clone()).map_err(|source| DevClusterError::Client {
            server: self.server.clone(),
            source,
        })
    }

    /// The simulated nodes, `node-1` .. `node-N`.
    pub fn nodes(&self) -> &[NodeHandle] {
        &self.nodes
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeHandle> {
        self.nodes.iter().find(|node| node.name() == name)
    }

    /// Restarts one control-plane component: stops it (SIGTERM, SIGKILL after 15 s, reaped) and
    /// starts it again on the same ports, certificates and data; returns once it is ready (etcd:
    /// healthy and the API server ready again; kube-controller-manager and kube-scheduler:
    /// `/healthz` ok).
    pub async fn restart(&self, component: Component) -> Result<(), DevClusterError> {
        self.fault(ComponentAction::Restart, component).await
    }

    /// Stops one control-plane component and leaves it stopped (an outage); the others keep
    /// running. [`DevCluster::start_component`] brings it back.
    pub async fn stop_component(&self, component: Component) -> Result<(), DevClusterError> {
        self.fault(ComponentAction::Stop, component).await
    }

    /// Starts a component stopped by [`DevCluster::stop_component`] (or one that exited) as it
    /// ran before; returns once it is ready, as [`DevCluster::restart`] does.
    pub async fn start_component(&self, component: Component) -> Result<(), DevClusterError> {
        self.fault(ComponentAction::Start, component).await
    }

    /// Freezes one component (SIGSTOP): it keeps its sockets but answers nothing, as a stalled
    /// etcd disk or a hung process. [`DevCluster::resume`] thaws it.
    pub async fn pause(&self, component: Component) -> Result<(), DevClusterError> {
        self.fault(ComponentAction::Pause, component).await
    }

    /// Thaws a component frozen by [`DevCluster::pause`] (SIGCONT).
    pub async fn resume(&self, component: Component) -> Result<(), DevClusterError> {
        self.fault(ComponentAction::Resume, component).await
    }

    /// Freezes `component` for `duration`, then thaws it (e.g. etcd stalled for 20 s).
    pub async fn stall(
        &self,
        component: Component,
        duration: Duration,
    ) -> Result<(), DevClusterError> {
        self.pause(component).await?;
        // The stall itself is the fault being injected, not a wait for something.
        tokio::time::sleep(duration).await;
        self.resume(component).await
    }

    /// Takes node `name` down as a dead machine ([`NodeHandle::down`]).
    pub async fn node_down(&self, name: &str) -> Result<(), DevClusterError> {
        Ok(self.known_node(name)?.down().await?)
    }

    /// Boots node `name` after [`DevCluster::node_down`] ([`NodeHandle::up`]).
    pub async fn node_up(&self, name: &str) -> Result<(), DevClusterError> {
        Ok(self.known_node(name)?.up().await?)
    }

    fn known_node(&self, name: &str) -> Result<&NodeHandle, DevClusterError> {
        self.node(name).ok_or_else(|| DevClusterError::UnknownNode {
            node: name.to_owned(),
        })
    }

    async fn fault(
        &self,
        action: ComponentAction,
        component: Component,
    ) -> Result<(), DevClusterError> {
        let stopped = || DevClusterError::Stopped {
            action: action.verb(),
            component: component.name(),
        };
        let (reply, outcome) = oneshot::channel();
        self.faults
            .send(FaultRequest {
                action,
                component,
                reply,
            })
            .map_err(|_| stopped())?;
        Ok(outcome.await.map_err(|_| stopped())??)
    }

    /// Client configuration for the cluster-admin user (for clients other than `kube::Client`).
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// Stops the cluster now (what drop does), waiting until every process has ended.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            // The thread also stops when the sender is dropped; sending just says it explicitly.
            let _sent = shutdown.send(());
        }
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!(state_dir = %self.state.root().display(), "the cluster thread panicked while stopping");
        }
        if let Some(temp) = self.temp_dir.take()
            && (self.keep_state || std::thread::panicking())
        {
            let kept = temp.keep();
            eprintln!(
                "devcluster: kept the state directory {} (logs in its logs/)",
                kept.display()
            );
        }
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Refuses a directory whose cluster still runs, and clears what a stopped one left behind.
fn prepare_state_dir(state: &StateDir) -> Result<(), DevClusterError> {
    let io = |action, path: &Path, source| DevClusterError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(state.root()).map_err(|source| io("creating", state.root(), source))?;
    let record_path = state.cluster_info();
    let record =
        ClusterRecord::read(&record_path).map_err(|source| io("reading", &record_path, source))?;
    if let Some(record) = record
        && crate::controlplane::process::is_alive(record.owner_pid)
    {
        return Err(DevClusterError::AlreadyRunning {
            state_dir: state.root().to_path_buf(),
            owner_pid: record.owner_pid,
        });
    }
    for entry in state.previous_run_entries() {
        let removed = if entry.is_dir() {
            std::fs::remove_dir_all(&entry)
        } else {
            std::fs::remove_file(&entry)
        };
        match removed {
            Ok(()) => {}
            Err(source) if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(io("removing", &entry, source)),
        }
    }
    Ok(())
}

fn run_cluster(
    state: StateDir,
    options: DevClusterOptions,
    ready: ReadySender,
    shutdown: oneshot::Receiver<()>,
    faults: mpsc::UnboundedReceiver<FaultRequest>,
) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("devcluster-worker")
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            let _unheard = ready.send(Err(DevClusterError::Runtime(error)));
            return;
        }
    };
    runtime.block_on(serve(state, options, ready, shutdown, faults));
    runtime.shutdown_timeout(Duration::from_secs(10));
}

/// Runs on the cluster thread: start, report, wait for the shutdown request, stop.
async fn serve(
    state: StateDir,
    options: DevClusterOptions,
    ready: ReadySender,
    shutdown: oneshot::Receiver<()>,
    faults: mpsc::UnboundedReceiver<FaultRequest>,
) {
    let progress: Progress = options
        .progress
        .clone()
        .unwrap_or_else(|| Arc::new(|line: &str| tracing::info!(target: "devcluster", "{line}")));
    let (mut plane, nodes, network) = match start_cluster(&state, &options, &*progress).await {
        Ok(started) => started,
        Err(error) => {
            let _unheard = ready.send(Err(error));
            return;
        }
    };
    let (record, started) = record_started(&state, &options, &plane, nodes.as_ref());
    if started.is_ok() {
        progress(&format!(
            "cluster ready; kubeconfig: {}",
            state.kubeconfig().display()
        ));
    }
    if ready.send(started).is_ok() {
        run_until_shutdown(&mut plane, record, &state, shutdown, faults).await;
    }
    if let Some(nodes) = nodes
        && let Err(error) = nodes.shutdown().await
    {
        tracing::error!(error = %crate::isolation::error_chain(&error), "stopping the simulated nodes");
    }
    // kube-apiserver waits for open watches before it ends on SIGTERM (up to the 15 s grace):
    // the proxy's watches end first.
    let claim = match network {
        Some(network) => {
            network.services.stop().await;
            Some(network.claim)
        }
        None => None,
    };
    plane.stop().await;
    // The API server's address and the ClusterIPs go with the pod network, once nothing serves
    // on them.
    drop(claim);
    match std::fs::remove_file(state.cluster_info()) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            tracing::warn!(path = %state.cluster_info().display(), %error, "removing the cluster record")
        }
    }
}

/// A cluster's pod network while it runs: its claim (the API server's address and the Service
/// range) and the proxy that routes its ClusterIPs. Fields drop in order: the proxy first.
struct PodNetwork {
    services: ServiceProxy,
    claim: ClaimedNetwork,
}

/// Claims the pod network if asked for, starts the control plane (and on the pod network the
/// Service proxy), then the simulated nodes; stops the control plane again if the nodes fail to
/// start.
async fn start_cluster(
    state: &StateDir,
    options: &DevClusterOptions,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<(ControlPlane, Option<NodeSim>, Option<PodNetwork>), DevClusterError> {
    let claim = match options.pod_network && !options.light && options.nodes > 0 {
        true => Some(
            ClaimedNetwork::claim(state.root())
                .await
                .map_err(NodeError::from)?,
        ),
        false => None,
    };
    let cluster_network = claim.as_ref().map(ClaimedNetwork::network);
    let plane = start_control_plane(state, options, cluster_network, progress).await?;
    let network = match claim {
        Some(claim) => match service_proxy(&plane, state) {
            Ok(services) => Some(PodNetwork { services, claim }),
            Err(error) => {
                plane.stop().await;
                return Err(error);
            }
        },
        None => None,
    };
    match start_simulated_nodes(state, options, &plane, cluster_network, progress).await {
        Ok(nodes) => Ok((plane, nodes, network)),
        Err(error) => {
            plane.stop().await;
            Err(error)
        }
    }
}

fn service_proxy(plane: &ControlPlane, state: &StateDir) -> Result<ServiceProxy, DevClusterError> {
    let client = kube::Client::try_from(plane.config().clone()).map_err(|source| {
        DevClusterError::Client {
            server: plane.server().to_string(),
            source,
        }
    })?;
    let record = crate::services::routes_file(state.root());
    Ok(ServiceProxy::start(client, record))
}

/// Writes the cluster record (how `devcluster` commands find the running cluster) and says
/// what started, or why the record could not be written.
fn record_started(
    state: &StateDir,
    options: &DevClusterOptions,
    plane: &ControlPlane,
    nodes: Option<&NodeSim>,
) -> (ClusterRecord, Result<Started, DevClusterError>) {
    let node_handles = nodes.map(NodeSim::nodes).unwrap_or_default();
    let record = ClusterRecord {
        owner_pid: std::process::id(),
        server: plane.server().to_string(),
        kubeconfig: state.kubeconfig(),
        ports: plane.ports(),
        components: component_pids(plane),
        nodes: node_handles
            .iter()
            .map(|node| node.name().to_string())
            .collect(),
        light: options.light,
    };
    let started = match record.write(&state.cluster_info()) {
        Ok(()) => Ok(Started {
            config: plane.config().clone(),
            server: plane.server().to_string(),
            ports: plane.ports(),
            runtime: tokio::runtime::Handle::current(),
            nodes: node_handles,
        }),
        Err(source) => Err(DevClusterError::Io {
            action: "writing",
            path: state.cluster_info(),
            source,
        }),
    };
    (record, started)
}

/// Applies fault requests and restarts crashed components, keeping the record's pids current,
/// until shutdown is requested or the handle is dropped.
async fn run_until_shutdown(
    plane: &mut ControlPlane,
    mut record: ClusterRecord,
    state: &StateDir,
    mut shutdown: oneshot::Receiver<()>,
    mut faults: mpsc::UnboundedReceiver<FaultRequest>,
) {
    let mut crash_check = tokio::time::interval(CRASH_CHECK_PERIOD);
    crash_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // Either an explicit request or the handle being dropped means stop.
            _requested = &mut shutdown => break,
            Some(request) = faults.recv() => {
                let outcome = apply_fault(plane, request.action, request.component).await;
                // Recorded before answering: the caller may read the new pids at once.
                update_record(&mut record, plane, state);
                let _unheard = request.reply.send(outcome);
            }
            _ = crash_check.tick() => {
                if !plane.restart_crashed().is_empty() {
                    update_record(&mut record, plane, state);
                }
            }
        }
    }
}

fn update_record(record: &mut ClusterRecord, plane: &ControlPlane, state: &StateDir) {
    record.components = component_pids(plane);
    if let Err(error) = record.write(&state.cluster_info()) {
        tracing::warn!(path = %state.cluster_info().display(), %error, "updating the cluster record");
    }
}

fn component_pids(plane: &ControlPlane) -> BTreeMap<String, u32> {
    plane
        .pids()
        .into_iter()
        .map(|(component, pid)| (component.name().to_string(), pid))
        .collect()
}

async fn apply_fault(
    plane: &mut ControlPlane,
    action: ComponentAction,
    component: Component,
) -> Result<(), ControlPlaneError> {
    tracing::info!(component = component.name(), ?action, "fault injection");
    match action {
        ComponentAction::Stop => {
            plane.stop_component(component).await;
            Ok(())
        }
        ComponentAction::Start => plane.start_component(component).await,
        ComponentAction::Restart => plane.restart_component(component).await,
        ComponentAction::Pause => plane.pause(component),
        ComponentAction::Resume => plane.resume(component),
    }
}

async fn start_control_plane(
    state: &StateDir,
    options: &DevClusterOptions,
    network: Option<ClusterNetwork>,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<ControlPlane, DevClusterError> {
    let binary = binary::locate().map_err(ControlPlaneError::from)?;
    let settings = ControlPlaneSettings {
        timeouts: options.timeouts,
        node_monitor_grace_period: options.heartbeat.node_monitor_grace_period,
        apiserver_address: network.map_or(std::net::Ipv4Addr::LOCALHOST, |n| n.apiserver_address()),
        service_range: network.map_or(ServiceRange::WITHOUT_POD_NETWORK, |n| n.service_range()),
    };
    Ok(ControlPlane::start(&binary, state, settings, progress).await?)
}

/// Starts the nodes and returns once all are Ready, reporting how many are as they come up.
async fn start_simulated_nodes(
    state: &StateDir,
    options: &DevClusterOptions,
    plane: &ControlPlane,
    network: Option<ClusterNetwork>,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<Option<NodeSim>, DevClusterError> {
    if options.nodes == 0 {
        return Ok(None);
    }
    let started = std::time::Instant::now();
    let kind = if options.light { "light " } else { "" };
    progress(&format!("starting {} {kind}nodes", options.nodes));
    let client = kube::Client::try_from(plane.config().clone()).map_err(|source| {
        DevClusterError::Client {
            server: plane.server().to_string(),
            source,
        }
    })?;
    let workspace_root = repository_root(Path::new(env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."));
    let image_map = ImageMap::load(
        &workspace_root,
        options.image_map.as_deref(),
        &options.images,
    )
    .map_err(NodeError::from)?;
    let mut sim_options = NodeSimOptions::new(options.nodes, state.nodes(), workspace_root)?;
    sim_options.image_map = image_map;
    sim_options.light = options.light;
    sim_options.labels = options.node_labels.clone();
    sim_options.size = options.node_size;
    sim_options.reboot_delay = options.reboot_delay;
    sim_options.heartbeat = options.heartbeat;
    sim_options.pod_network = network;
    sim_options.apiserver_url = Some(plane.server().to_string());
    // Light nodes run no processes, and thousands of them would each need a listener and a
    // certificate: 1,000 light nodes took 6.5 s longer to start (debug build) and the server
    // 105 MB.
    let kubelet_api = match options.light {
        true => None,
        false => Some(start_kubelet_api(state, &sim_options).await?),
    };
    if let Some(api) = &kubelet_api {
        sim_options.kubelet_port = api.port();
    }
    let mut sim = start_nodes(client.clone(), sim_options).await?;
    if let Some(api) = kubelet_api {
        sim.serve_kubelet_api(api);
    }

    let outcome = {
        let all_ready = async {
            match tokio::time::timeout(options.timeouts.nodes, sim.wait_ready()).await {
                Ok(result) => result.map_err(DevClusterError::from),
                Err(_) => Err(DevClusterError::NodesNotReady {
                    count: options.nodes,
                    waited: started.elapsed(),
                    logs: state.nodes(),
                }),
            }
        };
        let report = report_ready_nodes(client, options.nodes, progress);
        tokio::pin!(all_ready, report);
        tokio::select! {
            outcome = &mut all_ready => outcome,
            () = &mut report => all_ready.await,
        }
    };
    match outcome {
        Ok(()) => {
            progress(&format!(
                "{n}/{n} nodes Ready ({:.1} s)",
                started.elapsed().as_secs_f64(),
                n = options.nodes
            ));
            Ok(Some(sim))
        }
        Err(error) => {
            if let Err(stop_error) = sim.shutdown().await {
                tracing::error!(error = %crate::isolation::error_chain(&stop_error), "stopping the simulated nodes");
            }
            Err(error)
        }
    }
}

/// Starts the kubelet API of the nodes `sim_options` will create (before they register, so their
/// Node objects carry its port).
async fn start_kubelet_api(
    state: &StateDir,
    sim_options: &NodeSimOptions,
) -> Result<KubeletApi, DevClusterError> {
    let nodes_dir = state.nodes();
    let io = |action| {
        let path = nodes_dir.clone();
        move |source| DevClusterError::Io {
            action,
            path,
            source,
        }
    };
    std::fs::create_dir_all(&nodes_dir).map_err(io("creating"))?;
    let nodes_dir = std::fs::canonicalize(&nodes_dir).map_err(io("resolving"))?;
    let nodes: Vec<ApiNode> = (1..=sim_options.count)
        .map(|index| {
            let name = sim_options.node_name(index);
            ApiNode {
                address: node_address(index),
                dir: nodes_dir.join(&name),
                name,
            }
        })
        .collect();
    let binary = binary::locate().map_err(ControlPlaneError::from)?;
    let devcluster = crate::isolation::devcluster_binary()?;
    Ok(KubeletApi::start(&binary, &devcluster, state, &nodes).await?)
}

/// Reports "k/N nodes Ready" whenever k changes, until all are. Only informs: readiness itself is
/// decided by [`NodeSim::wait_ready`].
async fn report_ready_nodes(
    client: kube::Client,
    expected: usize,
    progress: &(dyn Fn(&str) + Send + Sync),
) {
    let nodes: Api<Node> = Api::all(client);
    let mut last_reported = None;
    loop {
        if let Ok(list) = nodes.list(&kube::api::ListParams::default()).await {
            let ready = list
                .items
                .iter()
                .filter(|node| crate::node::object::is_settled(node))
                .count();
            if ready >= expected {
                // The caller reports completion, with the time it took.
                return;
            }
            if last_reported != Some(ready) {
                progress(&format!("{ready}/{expected} nodes Ready"));
                last_reported = Some(ready);
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
