//! The process that holds the private mount namespace of node roots, and the mounting of one
//! node's root in it.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, ChildStdin, Command};

use super::error::NodeError;
use crate::PathIoError;
use crate::isolation::{self, NodeRootSpec};

/// File under the nodes state dir with the holder's pid, for other processes (`devcluster exec`).
pub const HOLDER_PID_FILE: &str = "holder.pid";

/// The running holder. Dropping it kills the holder, which tears down every node root.
#[derive(Debug)]
pub struct Holder {
    child: Child,
    /// Kept open: the holder exits when it sees EOF.
    _stdin: ChildStdin,
    pub pid: i32,
    pid_file: PathBuf,
}

impl Holder {
    pub async fn start(binary: &Path, state_dir: &Path) -> Result<Self, NodeError> {
        let failed = |reason: String| NodeError::Holder {
            binary: binary.to_owned(),
            reason,
        };
        let holder =
            isolation::spawn_holder(binary, &isolation::hold_namespace_args(), Stdio::piped())
                .await
                .map_err(failed)?;
        let pid = i32::try_from(holder.pid)
            .map_err(|_| failed(format!("its pid {} is out of range", holder.pid)))?;
        let pid_file = state_dir.join(HOLDER_PID_FILE);
        std::fs::write(&pid_file, pid.to_string())
            .map_err(PathIoError::of("write", pid_file.clone()))?;
        Ok(Self {
            child: holder.child,
            _stdin: holder.stdin,
            pid,
            pid_file,
        })
    }

    /// Stops the holder: every node root disappears with its namespace.
    pub async fn stop(mut self) {
        let _ = std::fs::remove_file(&self.pid_file);
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// Mounts (or remounts, after a reboot) a node's root in the holder's namespace.
pub async fn mount_node_root(
    binary: &Path,
    node: &str,
    spec: &NodeRootSpec,
    spec_path: &Path,
) -> Result<(), NodeError> {
    let json = serde_json::to_vec(spec).map_err(|e| NodeError::NodeRoot {
        node: node.to_owned(),
        reason: e.to_string(),
    })?;
    std::fs::write(spec_path, json).map_err(PathIoError::of("write", spec_path))?;
    let output = Command::new(binary)
        .args(isolation::node_root_args(spec_path))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(PathIoError::of("run", binary))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(NodeError::NodeRoot {
            node: node.to_owned(),
            reason: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

/// The holder pid recorded in `state_dir`, if that process is still a holder.
pub fn running_holder(state_dir: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(state_dir.join(HOLDER_PID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let is_holder = cmdline
        .split(|b| *b == 0)
        .any(|arg| arg == isolation::hold_namespace_args()[0].as_bytes());
    is_holder.then_some(pid)
}
