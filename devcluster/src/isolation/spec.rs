//! The data the simulator hands to the hidden entry points in spec files, and what they leave
//! behind (serialised as JSON).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Exit code of a container whose setup or exec failed (the kubelet reports `StartError`).
pub const START_ERROR_EXIT: u8 = 128;

/// How to mount a node's root in the holder's namespace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeRootSpec {
    pub holder_pid: i32,
    /// The overlay's upper and work directories (on the machine) and its mount point.
    pub upper: PathBuf,
    pub work: PathBuf,
    pub merged: PathBuf,
    /// Bind-mounted at `/run/devcluster`.
    pub control_dir: PathBuf,
    /// Bind-mounted over `/proc/sys/kernel/random/boot_id`.
    pub boot_id_file: PathBuf,
}

/// How to run one container (or one `exec` in a node root).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerSpec {
    pub holder_pid: i32,
    pub hostname: String,
    pub root: RootSpec,
    pub mounts: Vec<BindMount>,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
    /// The pod's network namespace (`/proc/<holder>/ns/net`) to enter; `None` keeps the node's
    /// (the machine's) network, as for `hostNetwork` pods.
    #[serde(default)]
    pub network_namespace: Option<PathBuf>,
    /// Where to record the container's [`NamespaceRecord`] before exec, so every process left in
    /// its namespace can be found and killed later. Set only when stdin is the kubelet's pipe,
    /// which the namespace's keeper holds.
    pub namespace_file: Option<PathBuf>,
    /// Where to write why setup failed.
    pub error_file: Option<PathBuf>,
}

/// What `__container` leaves in its namespace file: the namespace and the process keeping it
/// alive (so its id cannot have been reused by another container when it is swept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceRecord {
    /// As `/proc/<pid>/ns/mnt` reads: `mnt:[4026532301]`.
    pub namespace: String,
    pub keeper_pid: u32,
}

/// The container's root filesystem.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RootSpec {
    /// Chroot into the node's root itself (`devcluster.local/shell`, `devcluster exec`).
    Node { path: PathBuf },
    /// A fresh overlay of the machine's `/` on a tmpfs, with the node's `/dev`, command shims, the
    /// control directory and the image's contents copied in.
    Container {
        scratch: PathBuf,
        node_root: PathBuf,
        control_dir: PathBuf,
        boot_id_file: PathBuf,
        contents: Option<CopyInto>,
    },
}

/// A directory copied into a container root when it is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyInto {
    /// The directory on the machine.
    pub from: PathBuf,
    /// Where, relative to the container root.
    pub inside: PathBuf,
}

/// A bind mount into the container's root.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BindMount {
    pub source: MountSource,
    /// Absolute path inside the container's root.
    pub target: String,
    pub read_only: bool,
}

/// What a bind mount shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MountSource {
    /// A directory on the machine (a volume the kubelet wrote), or a file (an image's host
    /// binary).
    Machine(PathBuf),
    /// A path inside the node's root (a hostPath volume), resolved without leaving the root and
    /// created if missing.
    Node {
        node_root: PathBuf,
        path: String,
        directory: bool,
    },
}
