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

mod args;
mod binary;
mod entry;
mod error;
mod fs;
mod holder_process;
mod mounts;
mod pod_exec;
mod setup;
mod spec;

pub(crate) use args::{
    container_args, hold_namespace_args, hold_network_namespace_args, node_root_args,
};
pub use binary::{devcluster_binary, host_binary};
pub use entry::run_if_requested;
pub use error::{IsolationError, error_chain};
pub(crate) use holder_process::spawn_holder;
pub use setup::{mount_namespace_id, prepare_node_upper};
pub use spec::{
    BindMount, ContainerSpec, CopyInto, MountSource, NamespaceRecord, NodeRootSpec, RootSpec,
    START_ERROR_EXIT,
};
