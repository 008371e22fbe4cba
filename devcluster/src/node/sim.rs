//! Starting, running and stopping the simulated nodes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch};
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::boot::{mount_root, new_boot_id};
use super::command_shims::{JOURNAL_FILE, REQUESTS_FIFO};
use super::context::{
    NodePaths, NodeRecord, Power, ProcessRuntime, SimContext, SimNode, patch_params, post_params,
};
use super::error::NodeError;
use super::handle::NodeHandle;
use super::holder::{self, Holder};
use super::object::{self, LEASE_NAMESPACE, NodeFacts, is_settled};
use super::options::NodeSimOptions;
use super::size::{self, NodeSize};
use super::{heartbeat, power};
use crate::PathIoError;
use crate::isolation;
use crate::kubelet::Kubelet;
use crate::kubelet::admission::Allocatable;
use crate::kubelet::api::KubeletApi;
use crate::kubelet::quantity;
use crate::network::NodeBridges;

/// The running simulator. Dropping it aborts everything (containers are killed, node roots
/// disappear with the holder); [`NodeSim::shutdown`] does the same in order.
#[derive(Debug)]
pub struct NodeSim {
    ctx: Arc<SimContext>,
    nodes: Vec<Arc<SimNode>>,
    kubelet: Arc<Kubelet>,
    /// The kubelet's pod watch, which owns the pod workers.
    kubelet_task: JoinSet<()>,
    /// Heartbeats and power request readers.
    tasks: JoinSet<()>,
    holder: Option<Holder>,
    /// Serves the nodes' kubelet API; stopped with them.
    kubelet_api: Option<KubeletApi>,
    /// Removed once the pods (and their veth pairs) are gone.
    bridges: Option<NodeBridges>,
}

/// Starts `opts.count` nodes: host roots (unless light), Node and Lease objects, heartbeats,
/// and the kubelet that runs pods bound to them. Returns once every Node object exists.
pub async fn start_nodes(client: kube::Client, opts: NodeSimOptions) -> Result<NodeSim, NodeError> {
    std::fs::create_dir_all(&opts.state_dir).map_err(PathIoError::of("create", &opts.state_dir))?;
    let state_dir = std::fs::canonicalize(&opts.state_dir)
        .map_err(PathIoError::of("resolve", &opts.state_dir))?;
    if let Some(pid) = holder::running_holder(&state_dir) {
        return Err(NodeError::AlreadyRunning { state_dir, pid });
    }
    let opts = NodeSimOptions { state_dir, ..opts };
    let facts = machine_facts(&opts);
    let allocatable = Allocatable {
        cpu_millis: quantity::cpu_millis(&opts.cpu).unwrap_or(8000),
        memory: quantity::units(&opts.memory).unwrap_or(16 << 30),
        pods: quantity::units(&opts.max_pods).unwrap_or(110),
    };

    let (holder, processes) = if opts.light {
        (None, None)
    } else {
        let devcluster_bin = isolation::devcluster_binary()?;
        let holder = Holder::start(&devcluster_bin, &opts.state_dir).await?;
        let processes = ProcessRuntime {
            devcluster_bin,
            holder_pid: holder.pid,
        };
        (Some(holder), Some(processes))
    };
    let bridges = match opts.pod_network.filter(|_| !opts.light) {
        Some(network) => Some(NodeBridges::create(network, &opts.state_dir, opts.count).await?),
        None => None,
    };
    let (node_store, node_store_writer) = reflector::store();
    let ctx = Arc::new(SimContext {
        node_store,
        client,
        writes: Semaphore::new(opts.write_concurrency.max(1)),
        facts,
        allocatable,
        processes,
        opts,
        network: bridges.as_ref().map(|b| b.network),
    });

    let nodes = create_local_nodes(&ctx).await?;
    register_nodes(&ctx, &nodes).await?;

    let kubelet = Kubelet::new(ctx.clone(), &nodes);
    let mut kubelet_task = JoinSet::new();
    kubelet_task.spawn(kubelet.clone().run());
    let mut tasks = JoinSet::new();
    tasks.spawn(watch_nodes(ctx.client.clone(), node_store_writer));
    tasks.spawn(heartbeat::run(ctx.clone(), nodes.clone()));
    for node in nodes.iter().filter(|n| !n.light) {
        tasks.spawn(power::serve_requests(ctx.clone(), node.clone()));
    }
    tracing::info!(
        count = nodes.len(),
        light = ctx.opts.light,
        "simulated nodes started"
    );
    Ok(NodeSim {
        ctx,
        nodes,
        kubelet,
        kubelet_task,
        tasks,
        holder,
        kubelet_api: None,
        bridges,
    })
}

impl NodeSim {
    pub fn nodes(&self) -> Vec<NodeHandle> {
        self.nodes
            .iter()
            .map(|n| NodeHandle::in_process(self.ctx.clone(), n.clone()))
            .collect()
    }

    /// Waits until every simulated node is Ready in the API and kube-controller-manager has
    /// taken its lifecycle taints off (see [`is_settled`]), as the nodes of an established
    /// cluster are. It does not time out by itself: callers bound it (thousands of nodes take a
    /// while).
    pub async fn wait_ready(&self) -> Result<(), NodeError> {
        let mut pending: BTreeSet<String> = self.nodes.iter().map(|n| n.name.clone()).collect();
        let api: Api<Node> = Api::all(self.ctx.client.clone());
        let stream = watcher(api, watcher::Config::default()).applied_objects();
        futures::pin_mut!(stream);
        while !pending.is_empty() {
            let node = stream
                .try_next()
                .await
                .map_err(|e| NodeError::Watch {
                    reason: e.to_string(),
                })?
                .ok_or_else(|| NodeError::Watch {
                    reason: "the watch ended".to_owned(),
                })?;
            if is_settled(&node)
                && let Some(name) = &node.metadata.name
            {
                pending.remove(name);
            }
        }
        Ok(())
    }

    /// Stops the kubelets (killing every container), the heartbeats and the node roots.
    /// Hands over the server of the nodes' kubelet API, to be stopped with them.
    pub(crate) fn serve_kubelet_api(&mut self, api: KubeletApi) {
        self.kubelet_api = Some(api);
    }

    pub async fn shutdown(mut self) -> Result<(), NodeError> {
        if let Some(api) = self.kubelet_api.take() {
            api.stop().await;
        }
        self.kubelet.stop();
        while self.kubelet_task.join_next().await.is_some() {}
        self.tasks.shutdown().await;
        if let Some(holder) = self.holder.take() {
            holder.stop().await;
        }
        if let Some(bridges) = self.bridges.take() {
            bridges.remove().await;
        }
        tracing::info!("simulated nodes stopped");
        Ok(())
    }
}

/// Retry delays of the Node watch: 0.5 s doubling to 5 s. A kubelet reads its Node at every
/// status update (10 s), so after an API outage the watch must be back well within that, where
/// kube's default back-off grows to 30 s.
#[derive(Debug, Clone, Copy, Default)]
struct NodeWatchBackoff {
    failures: u32,
}

impl Iterator for NodeWatchBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<Self::Item> {
        let delay = std::time::Duration::from_millis(500)
            .saturating_mul(2u32.saturating_pow(self.failures))
            .min(std::time::Duration::from_secs(5));
        self.failures = self.failures.saturating_add(1);
        Some(delay)
    }
}

impl kube::runtime::utils::Backoff for NodeWatchBackoff {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// Keeps `store` in step with the API server's Node objects for as long as the simulator runs.
async fn watch_nodes(client: kube::Client, store: reflector::store::Writer<Node>) {
    let api: Api<Node> = Api::all(client);
    let events = reflector::reflector(store, watcher(api, watcher::Config::default()))
        .backoff(NodeWatchBackoff::default())
        .touched_objects();
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        if let Err(error) = event {
            tracing::warn!(%error, "node watch failed; retrying");
        }
    }
}

fn machine_facts(opts: &NodeSimOptions) -> NodeFacts {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| "Linux".to_owned());
    NodeFacts {
        kubelet_version: opts.kubelet_version.clone(),
        kernel_version: kernel.trim().to_owned(),
        os_image: format!("devcluster simulated node on {os}"),
        architecture: object::kube_arch(std::env::consts::ARCH).to_owned(),
        cpu: opts.cpu.clone(),
        memory: opts.memory.clone(),
        pods: opts.max_pods.clone(),
        kubelet_port: opts.kubelet_port,
    }
}

/// Local state of every node: directories, boot IDs, control FIFOs, node roots.
async fn create_local_nodes(ctx: &Arc<SimContext>) -> Result<Vec<Arc<SimNode>>, NodeError> {
    let opts = &ctx.opts;
    let mut nodes = Vec::with_capacity(opts.count);
    for index in 1..=opts.count {
        let name = opts.node_name(index);
        let paths = NodePaths::new(&opts.state_dir, &name);
        // A new node is a new machine: nothing of an earlier run's node survives.
        if paths.dir.exists() {
            std::fs::remove_dir_all(&paths.dir).map_err(PathIoError::of("remove", &paths.dir))?;
        }
        std::fs::create_dir_all(&paths.dir).map_err(PathIoError::of("create", &paths.dir))?;
        let boot_id = new_boot_id()?;
        std::fs::write(&paths.boot_id, &boot_id)
            .map_err(PathIoError::of("write", &paths.boot_id))?;
        let record = NodeRecord {
            name: name.clone(),
            index,
            light: opts.light,
        };
        let record_path = paths.dir.join("node.json");
        let json = serde_json::to_vec(&record).map_err(|e| {
            NodeError::Io(PathIoError {
                action: "encode",
                path: record_path.clone(),
                source: std::io::Error::other(e),
            })
        })?;
        std::fs::write(&record_path, json).map_err(PathIoError::of("write", &record_path))?;
        if !opts.light {
            prepare_control_dir(&paths)?;
            isolation::prepare_node_upper(&paths.upper)?;
        }
        nodes.push(Arc::new(SimNode {
            labels: object::node_labels(&name, &ctx.facts, &size_labels(opts, index)),
            name,
            index,
            light: opts.light,
            paths,
            power: watch::Sender::new(Power::Up),
            live_containers: watch::Sender::new(0),
            rebooting: AtomicBool::new(false),
            held_down: AtomicBool::new(false),
            power_lock: tokio::sync::Mutex::new(()),
            last_status_post: Mutex::new(None),
            boot_id: Mutex::new(boot_id),
            admitted: Mutex::new(HashMap::new()),
            pod_ip_slots: Mutex::new(BTreeSet::new()),
        }));
    }
    if let Some(processes) = &ctx.processes {
        // Mounting spawns a process per node; the machine has few cores.
        futures::stream::iter(nodes.iter().map(|node| mount_root(processes, node)))
            .buffer_unordered(4)
            .try_collect::<Vec<()>>()
            .await?;
    }
    Ok(nodes)
}

fn prepare_control_dir(paths: &NodePaths) -> Result<(), NodeError> {
    std::fs::create_dir_all(&paths.control).map_err(PathIoError::of("create", &paths.control))?;
    let fifo = paths.control.join(REQUESTS_FIFO);
    if std::fs::symlink_metadata(&fifo).is_err() {
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).map_err(
            |e| {
                NodeError::Io(PathIoError {
                    action: "create the request FIFO",
                    path: fifo.clone(),
                    source: std::io::Error::from(e),
                })
            },
        )?;
    }
    let journal = paths.control.join(JOURNAL_FILE);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&journal)
        .map_err(PathIoError::of("create", &journal))?;
    Ok(())
}

/// The labels of node `index` besides the kubelet's: those of its size, then the configured ones.
fn size_labels(opts: &NodeSimOptions, index: usize) -> BTreeMap<String, String> {
    let mut labels = match opts.size {
        NodeSize::Small => BTreeMap::new(),
        NodeSize::Realistic => size::extra_labels(index),
    };
    labels.extend(opts.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels
}

/// Creates the Node and Lease objects, or refreshes existing ones, with bounded concurrency.
async fn register_nodes(ctx: &Arc<SimContext>, nodes: &[Arc<SimNode>]) -> Result<(), NodeError> {
    futures::stream::iter(nodes.iter().map(|node| register_node(ctx, node)))
        .buffer_unordered(ctx.opts.write_concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

async fn register_node(ctx: &SimContext, node: &SimNode) -> Result<(), NodeError> {
    let api_error = |action: &'static str| {
        let name = node.name.clone();
        move |source| NodeError::Api {
            action,
            node: name,
            source,
        }
    };
    let now = Timestamp::now();
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let mut desired = object::build_node(
        &node.name,
        node.index,
        node.labels.clone(),
        &ctx.facts,
        &node.boot_id(),
        now,
    );
    if ctx.opts.size == NodeSize::Realistic {
        size::dress(&mut desired, node.index, now);
    }
    if let Some(network) = ctx.network {
        let cidr = network.pod_cidr(node.index);
        desired.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            pod_cidr: Some(cidr.clone()),
            pod_cidrs: Some(vec![cidr]),
            ..Default::default()
        });
    }
    let created = nodes.create(&post_params(), &desired).await;
    match created {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {
            // Left from an earlier run: take the labels and status again, keep the rest.
            let params = patch_params();
            let labels = serde_json::json!({"metadata": {"labels": node.labels}});
            nodes
                .patch(&node.name, &params, &Patch::Merge(labels))
                .await
                .map_err(api_error("label"))?;
            let status = serde_json::json!({"status": desired.status});
            nodes
                .patch_status(&node.name, &params, &Patch::Merge(status))
                .await
                .map_err(api_error("update the status of"))?;
        }
        Err(e) => return Err(api_error("create")(e)),
    }
    // The registration posted the status: the next report is due a report interval from now.
    if let Ok(mut last) = node.last_status_post.lock() {
        *last = Some(std::time::Instant::now());
    }
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), LEASE_NAMESPACE);
    match leases
        .create(
            &post_params(),
            &object::build_lease(&node.name, now, ctx.opts.heartbeat),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => leases
            .patch(
                &node.name,
                &patch_params(),
                &Patch::Merge(object::lease_renewal(now)),
            )
            .await
            .map(|_| ())
            .map_err(api_error("renew the lease of")),
        Err(e) => Err(api_error("create the lease of")(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::utils::Backoff;

    #[test]
    fn the_node_watch_retries_within_a_status_update() {
        let mut backoff = NodeWatchBackoff::default();
        let delays: Vec<u64> = backoff
            .by_ref()
            .take(6)
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 5000, 5000]);
        backoff.reset();
        assert_eq!(backoff.next(), Some(std::time::Duration::from_millis(500)));
    }
}
