//! What goes wrong in the node simulator.

use std::path::PathBuf;

use crate::PathIoError;
use crate::images::ImageMapError;

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
