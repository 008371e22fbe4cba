//! The state every part of the node simulator shares: the simulator's context, each node's
//! state, and how the simulator names itself in its API writes.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use k8s_openapi::api::core::v1::Node;
use kube::api::{PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef};
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, watch};

use super::object::{self, NodeFacts};
use super::options::NodeSimOptions;
use crate::kubelet::admission::{Allocatable, Requests};
use crate::network::ClusterNetwork;

/// Field manager of every write the simulator makes.
pub(crate) const FIELD_MANAGER: &str = "devcluster-kubelet";

/// Patch parameters naming the simulator as the field manager.
pub(crate) fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Create parameters naming the simulator as the field manager.
pub(crate) fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// Whether a node is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Power {
    Up,
    /// Shutting down or rebooting: the kubelet kills its containers and reports nothing.
    Down,
    /// A dead machine (power cut, kernel hang): every process is gone at once, nothing is
    /// reported, and it stays so until [`super::NodeHandle::up`].
    Off,
}

/// Paths of one node's state.
#[derive(Debug, Clone)]
pub(crate) struct NodePaths {
    pub dir: PathBuf,
    /// The node root's mount point (inside the holder's namespace).
    pub root: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
    pub control: PathBuf,
    pub boot_id: PathBuf,
    pub logs: PathBuf,
    pub pods: PathBuf,
    /// Mount point of container roots (each in its own namespace).
    pub scratch: PathBuf,
}

impl NodePaths {
    pub fn new(state_dir: &Path, name: &str) -> Self {
        let dir = state_dir.join(name);
        Self {
            root: dir.join("root"),
            upper: dir.join("upper"),
            work: dir.join("work"),
            control: dir.join("control"),
            boot_id: dir.join("boot_id"),
            logs: dir.join("logs"),
            pods: dir.join("pods"),
            scratch: dir.join("scratch"),
            dir,
        }
    }
}

/// What `node.json` records, for handles opened from another process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct NodeRecord {
    pub name: String,
    pub index: usize,
    pub light: bool,
}

/// One simulated node, shared by its heartbeat, its kubelet pod workers and its handles.
#[derive(Debug)]
pub(crate) struct SimNode {
    pub name: String,
    pub index: usize,
    pub light: bool,
    pub paths: NodePaths,
    pub labels: std::collections::BTreeMap<String, String>,
    pub power: watch::Sender<Power>,
    /// Containers (processes or virtual) currently running on the node.
    pub live_containers: watch::Sender<usize>,
    pub rebooting: AtomicBool,
    /// Held down by [`super::NodeHandle::down`]: a reboot in flight must not bring it back.
    pub held_down: AtomicBool,
    /// Serialises power transitions (reboot, down, up), so `down` can wait out a reboot.
    pub power_lock: tokio::sync::Mutex<()>,
    /// When the kubelet last posted this node's status successfully.
    pub last_status_post: Mutex<Option<std::time::Instant>>,
    pub boot_id: Mutex<String>,
    /// Requests of the pods admitted on the node, by pod uid.
    pub admitted: Mutex<HashMap<String, Requests>>,
    /// Pod IP slots in use.
    pub pod_ip_slots: Mutex<BTreeSet<u8>>,
}

impl SimNode {
    /// The node's labels as the API server holds them now (labels are added after registration,
    /// by users and controllers), or those it registered with while the watch has not seen it.
    pub fn current_labels(&self, ctx: &SimContext) -> std::collections::BTreeMap<String, String> {
        ctx.node_store
            .get(&ObjectRef::new(&self.name))
            .and_then(|node| node.metadata.labels.clone())
            .unwrap_or_else(|| self.labels.clone())
    }

    pub fn boot_id(&self) -> String {
        self.boot_id.lock().map(|b| b.clone()).unwrap_or_default()
    }

    pub fn is_up(&self) -> bool {
        *self.power.borrow() == Power::Up
    }

    pub fn host_ip(&self) -> String {
        object::node_ip(self.index)
    }
}

/// How containers become processes (full nodes only).
#[derive(Debug, Clone)]
pub(crate) struct ProcessRuntime {
    pub devcluster_bin: PathBuf,
    pub holder_pid: i32,
}

/// Shared by every part of the simulator.
pub(crate) struct SimContext {
    pub client: kube::Client,
    pub opts: NodeSimOptions,
    pub facts: NodeFacts,
    pub allocatable: Allocatable,
    /// Bounds API writes in flight.
    pub writes: Semaphore,
    pub processes: Option<ProcessRuntime>,
    /// The Node objects as the API server holds them (labels for admission, conditions and boot
    /// ID for the status loop), from one watch shared by every simulated kubelet.
    pub node_store: reflector::Store<Node>,
    /// The pod network, when full nodes have one.
    pub network: Option<ClusterNetwork>,
}

impl std::fmt::Debug for SimContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimContext")
            .field("opts", &self.opts)
            .field("processes", &self.processes)
            .finish_non_exhaustive()
    }
}
