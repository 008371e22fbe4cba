//! What each boot of a node needs: a fresh boot ID, and its root (re)mounted.

use super::context::{ProcessRuntime, SimNode};
use super::error::NodeError;
use super::holder;
use crate::PathIoError;
use crate::isolation::NodeRootSpec;

/// A fresh random boot ID.
pub(crate) fn new_boot_id() -> Result<String, NodeError> {
    let path = "/proc/sys/kernel/random/uuid";
    let text = std::fs::read_to_string(path).map_err(PathIoError::of("read", path))?;
    Ok(text.trim().to_owned())
}

/// Mounts (or remounts) a node's root in the holder's namespace.
pub(crate) async fn mount_root(
    processes: &ProcessRuntime,
    node: &SimNode,
) -> Result<(), NodeError> {
    let spec = NodeRootSpec {
        holder_pid: processes.holder_pid,
        upper: node.paths.upper.clone(),
        work: node.paths.work.clone(),
        merged: node.paths.root.clone(),
        control_dir: node.paths.control.clone(),
        boot_id_file: node.paths.boot_id.clone(),
    };
    holder::mount_node_root(
        &processes.devcluster_bin,
        &node.name,
        &spec,
        &node.paths.dir.join("root-spec.json"),
    )
    .await
}
