//! How nodes and containers are isolated from the machine: hidden entry points of the
//! `devcluster` binary that set up mount namespaces, node and container roots and mounts, run in
//! a fresh single-threaded process (never after a fork of the threaded simulator):
//!
//! - `devcluster __hold-ns`: creates the private mount namespace where node roots are mounted
//!   and keeps it alive until its stdin closes (so it dies with the simulator).
//! - `devcluster __hold-netns`: creates a pod's network namespace (see `crate::network`) and
//!   keeps it alive until its stdin closes.
//! - `devcluster __node-root SPEC.json`: (re)mounts one node's root in that namespace.
//! - `devcluster __container SPEC.json`: enters that namespace, makes a private copy, builds the
//!   container's root and mounts, chroots and execs the container's command.
//! - `devcluster __keep-ns SPEC.json`: started by `__container` inside the container's namespace,
//!   starts a detached copy of itself (`... --detached`, so the container's command never has it
//!   as a child to wait for), prints its pid and exits. The copy keeps that namespace alive until
//!   its stdin (a pipe from the kubelet) closes: namespace ids are reused as soon as a namespace
//!   dies, so only a namespace kept alive can be swept by id.
//!
//! - `devcluster __pod-exec ...` and `devcluster __kubelet-logs ...`: the exec and container
//!   log requests of the kubelet API, run by its server (see `crate::kubelet::api`).
//!
//! `main` calls [`run_if_requested`] before anything else.

mod fs;
mod holder_process;
mod mounts;
mod pod_exec;
mod setup;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

use crate::PathIoError;
use crate::images::host_binary_env_var;
pub(crate) use holder_process::spawn_holder;

pub use setup::{IsolationError, mount_namespace_id};

/// Exit code of a container whose setup or exec failed (the kubelet reports `StartError`).
pub const START_ERROR_EXIT: u8 = 128;

const HOLD_NS: &str = "__hold-ns";
const HOLD_NETNS: &str = "__hold-netns";
const NODE_ROOT: &str = "__node-root";
const CONTAINER: &str = "__container";
const KEEP_NS: &str = "__keep-ns";
const DETACHED: &str = "--detached";
/// Run by the kubelet API server (`devcluster/controlplane/kubelet.go` names them too).
const POD_EXEC: &str = "__pod-exec";
const KUBELET_LOGS: &str = "__kubelet-logs";

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
    /// control directory and the package copied to `/skyhook-package`.
    Container {
        scratch: PathBuf,
        node_root: PathBuf,
        control_dir: PathBuf,
        boot_id_file: PathBuf,
        package: Option<PathBuf>,
    },
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

/// Writes the command shims, the journal link and a copy of the machine's `sysctl` into a node's
/// overlay upper directory (before it is mounted).
pub fn prepare_node_upper(upper: &Path) -> Result<(), IsolationError> {
    setup::prepare_node_upper(upper)
}

/// Runs a hidden entry point if `std::env::args` asks for one; `main` returns its exit code.
pub fn run_if_requested() -> Option<ExitCode> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let command = args.get(1)?.to_str()?;
    match command {
        POD_EXEC => return Some(pod_exec::run(&args[2..])),
        KUBELET_LOGS => return Some(crate::kubelet::log_reader::run(&args[2..])),
        _ => {}
    }
    let spec_path = args
        .get(2)
        .map(PathBuf::from)
        .ok_or(IsolationError::MissingSpec);
    let result = match command {
        HOLD_NS => setup::hold_namespace(),
        HOLD_NETNS => setup::hold_network_namespace(),
        KEEP_NS if args.get(3).is_some_and(|a| a == DETACHED) => {
            setup::wait_for_stdin_eof();
            Ok(())
        }
        KEEP_NS => spec_path.and_then(|path| setup::start_detached_keeper(&path)),
        NODE_ROOT => spec_path
            .and_then(|path| read_spec(&path))
            .and_then(|s| setup::mount_node_root(&s)),
        CONTAINER => {
            let read = spec_path
                .and_then(|path| read_spec::<ContainerSpec>(&path).map(|spec| (path, spec)));
            let (spec_path, spec) = match read {
                Ok(read) => read,
                Err(e) => return Some(fail(&e, None)),
            };
            // Only returns on failure: success replaces this process.
            let error = setup::run_container(&spec, &spec_path);
            return Some(fail(&error, spec.error_file.as_deref()));
        }
        _ => return None,
    };
    Some(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e, None),
    })
}

fn read_spec<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, IsolationError> {
    let text = std::fs::read(path).map_err(PathIoError::of("read spec", path.to_owned()))?;
    serde_json::from_slice(&text).map_err(|source| IsolationError::Spec {
        path: path.to_owned(),
        source,
    })
}

fn fail(error: &IsolationError, error_file: Option<&Path>) -> ExitCode {
    let message = error_chain(error);
    let mut stderr = std::io::stderr();
    // The container's stderr is its log file; nothing else can report the failure.
    let _ = writeln!(stderr, "devcluster: {message}");
    if let Some(path) = error_file {
        let _ = std::fs::write(path, &message);
    }
    ExitCode::from(START_ERROR_EXIT)
}

/// The error and its causes on one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// The `devcluster` binary that provides these entry points: `DEVCLUSTER_BIN`, this executable if
/// it is `devcluster`, or `devcluster` in the cargo target directory of this (test) executable.
pub fn devcluster_binary() -> Result<PathBuf, IsolationError> {
    if let Some(path) = std::env::var_os("DEVCLUSTER_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(PathIoError::of(
        "locate the running executable",
        PathBuf::from("/proc/self/exe"),
    ))?;
    if exe.file_name().is_some_and(|n| n == "devcluster") {
        return Ok(exe);
    }
    // Tests run from target/<profile>/deps/; binaries live in target/<profile>/.
    let candidates = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("devcluster"))
        .collect::<Vec<_>>();
    match candidates.iter().find(|c| c.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(IsolationError::BinaryNotFound {
            searched: candidates,
        }),
    }
}

/// Where the host binary `name` of an image is on the machine: its environment variable
/// ([`host_binary_env_var`]), or next to the `devcluster` binary.
pub fn host_binary(devcluster: &Path, name: &str) -> PathBuf {
    match std::env::var_os(host_binary_env_var(name)) {
        Some(path) => PathBuf::from(path),
        None => devcluster.with_file_name(name),
    }
}

/// The argument list that runs a hidden entry point.
pub(crate) fn hold_namespace_args() -> [&'static str; 1] {
    [HOLD_NS]
}

pub(crate) fn hold_network_namespace_args() -> [&'static str; 1] {
    [HOLD_NETNS]
}

pub(crate) fn node_root_args(spec: &Path) -> [OsString; 2] {
    [NODE_ROOT.into(), spec.as_os_str().to_owned()]
}

pub(crate) fn container_args(spec: &Path) -> [OsString; 2] {
    [CONTAINER.into(), spec.as_os_str().to_owned()]
}

/// The spec path is only there so `devcluster down` finds a keeper left behind by its cluster.
fn keep_namespace_args(spec: &Path, detached: bool) -> Vec<OsString> {
    let mut args = vec![KEEP_NS.into(), spec.as_os_str().to_owned()];
    if detached {
        args.push(DETACHED.into());
    }
    args
}
