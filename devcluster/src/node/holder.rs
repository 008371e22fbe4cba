//! The process that holds the private mount namespace of node roots, and the mounting of one
//! node's root in it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use super::NodeError;
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
        let mut child = Command::new(binary)
            .args(isolation::hold_namespace_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(format!("cannot run it: {e}")))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| failed("no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| failed("no stdout".into()))?;
        let mut line = String::new();
        let read = tokio::time::timeout(
            Duration::from_secs(30),
            BufReader::new(stdout).read_line(&mut line),
        )
        .await;
        if !matches!(read, Ok(Ok(_))) || line.trim() != "ready" {
            let mut stderr = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ =
                    tokio::time::timeout(Duration::from_secs(2), err.read_to_string(&mut stderr))
                        .await;
            }
            return Err(failed(format!(
                "it did not report ready (stdout {:?}, stderr {:?})",
                line.trim(),
                stderr.trim()
            )));
        }
        let pid = child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| failed("it exited right after starting".into()))?;
        let pid_file = state_dir.join(HOLDER_PID_FILE);
        std::fs::write(&pid_file, pid.to_string())
            .map_err(PathIoError::of("write", pid_file.clone()))?;
        Ok(Self {
            child,
            _stdin: stdin,
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
