//! Handles on simulated nodes, for tests and the `devcluster exec` command.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

use super::command_shims::{JOURNAL_FILE, REQUESTS_FIFO};
use super::context::{NodePaths, NodeRecord, SimContext, SimNode};
use super::error::NodeError;
use super::holder::running_holder;
use super::power;
use crate::PathIoError;
use crate::isolation::{self, ContainerSpec, RootSpec};

/// A simulated node: its name, host root, boot ID and journal, and commands run inside it.
#[derive(Debug, Clone)]
pub struct NodeHandle {
    name: String,
    light: bool,
    paths: NodePaths,
    holder_pid: Option<i32>,
    /// Set for handles from a running [`super::NodeSim`] in this process.
    local: Option<(Arc<SimContext>, Arc<SimNode>)>,
}

impl NodeHandle {
    pub(crate) fn in_process(ctx: Arc<SimContext>, node: Arc<SimNode>) -> Self {
        Self {
            name: node.name.clone(),
            light: node.light,
            paths: node.paths.clone(),
            holder_pid: ctx.processes.as_ref().map(|p| p.holder_pid),
            local: Some((ctx, node)),
        }
    }

    /// A handle on a node of a cluster run by another process (`devcluster up`), from its
    /// nodes state directory (`<cluster state>/nodes`).
    pub fn open(state_dir: &Path, name: &str) -> Result<Self, NodeError> {
        let paths = NodePaths::new(state_dir, name);
        let record_path = paths.dir.join("node.json");
        let unknown = || NodeError::UnknownNode {
            node: name.to_owned(),
            state_dir: state_dir.to_owned(),
        };
        let text = std::fs::read(&record_path).map_err(|_| unknown())?;
        let record: NodeRecord = serde_json::from_slice(&text).map_err(|_| unknown())?;
        Ok(Self {
            name: record.name,
            light: record.light,
            paths,
            holder_pid: running_holder(state_dir),
            local: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_light(&self) -> bool {
        self.light
    }

    /// The node's host root as seen from this machine (through the namespace holder), or `None`
    /// for light nodes and when the cluster is not running.
    pub fn root(&self) -> Option<PathBuf> {
        if self.light {
            return None;
        }
        let pid = self.holder_pid?;
        let inside = self.paths.root.strip_prefix("/").ok()?;
        Some(PathBuf::from(format!("/proc/{pid}/root")).join(inside))
    }

    /// The node's current boot ID (`status.nodeInfo.bootID`).
    pub fn boot_id(&self) -> Result<String, NodeError> {
        if let Some((_, node)) = &self.local {
            return Ok(node.boot_id());
        }
        let text = std::fs::read_to_string(&self.paths.boot_id)
            .map_err(PathIoError::of("read", &self.paths.boot_id))?;
        Ok(text.trim().to_owned())
    }

    /// The service journal: one line per `systemctl`/`service`/power/`sysctl` command run in the
    /// node, `<RFC 3339 time> <command line>`.
    pub fn journal(&self) -> Result<Vec<String>, NodeError> {
        let path = self.paths.control.join(JOURNAL_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(text.lines().map(str::to_owned).collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(PathIoError::of("read", path)(e).into()),
        }
    }

    /// Runs a command chrooted in the node's root (as `root`, with the node's hostname).
    pub async fn exec(&self, argv: &[&str]) -> Result<Output, NodeError> {
        let root = self.root_for_exec()?;
        let holder_pid = self.holder_pid.ok_or_else(|| self.not_running())?;
        let binary = isolation::devcluster_binary()?;
        let exec_dir = self.paths.dir.join("exec");
        std::fs::create_dir_all(&exec_dir).map_err(PathIoError::of("create", &exec_dir))?;
        let spec_file = tempfile_in(&exec_dir)?;
        let spec = ContainerSpec {
            holder_pid,
            hostname: self.name.clone(),
            root: RootSpec::Node { path: root },
            mounts: Vec::new(),
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
            env: vec![
                ("PATH".to_owned(), crate::kubelet::DEFAULT_PATH.to_owned()),
                ("HOME".to_owned(), "/root".to_owned()),
                ("HOSTNAME".to_owned(), self.name.clone()),
            ],
            working_dir: None,
            network_namespace: None,
            namespace_file: None,
            error_file: None,
        };
        let json = serde_json::to_vec(&spec).map_err(|e| {
            NodeError::Io(PathIoError {
                action: "encode",
                path: spec_file.path().to_owned(),
                source: std::io::Error::other(e),
            })
        })?;
        std::fs::write(spec_file.path(), json)
            .map_err(PathIoError::of("write", spec_file.path()))?;
        let output = tokio::process::Command::new(&binary)
            .args(isolation::container_args(spec_file.path()))
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(PathIoError::of("run", binary))?;
        Ok(output)
    }

    /// Reboots the node, as `reboot` inside it would. Returns once the reboot has started; watch
    /// the Node's boot ID and Ready condition to see it come back.
    pub async fn reboot(&self) -> Result<(), NodeError> {
        if let Some((ctx, node)) = &self.local {
            tokio::spawn(power::reboot(ctx.clone(), node.clone()));
            return Ok(());
        }
        if self.light {
            return Err(NodeError::LightNode {
                node: self.name.clone(),
            });
        }
        let fifo = self.paths.control.join(REQUESTS_FIFO);
        // Non-blocking: opening a FIFO without a reader fails instead of hanging.
        let mut sender = tokio::net::unix::pipe::OpenOptions::new()
            .open_sender(&fifo)
            .map_err(|_| self.not_running())?;
        sender
            .write_all(b"reboot handle\n")
            .await
            .map_err(PathIoError::of("write", fifo))?;
        Ok(())
    }

    /// The machine dies (power cut): the kubelet stops renewing the Lease and posting status,
    /// every container process is killed at once, and nothing is reported to the API server (pods
    /// keep the status they had). kube-controller-manager marks the Node unreachable after its
    /// grace period, as for a real machine. A reboot in flight does not bring it back. Returns
    /// once the processes are gone. Only for nodes simulated in this process (`devcluster node
    /// down` reaches those of `devcluster up`).
    pub async fn down(&self) -> Result<(), NodeError> {
        let (_, node) = self.local_node("down")?;
        power::down(node).await;
        Ok(())
    }

    /// The machine boots after [`NodeHandle::down`]: new boot ID, fresh root, status and Lease
    /// posted at once, and the kubelet re-runs the pods bound to it (as after a reboot). Returns
    /// once the status is posted; a node that is not down is left alone.
    pub async fn up(&self) -> Result<(), NodeError> {
        let (ctx, node) = self.local_node("up")?;
        power::up(ctx, node).await;
        Ok(())
    }

    /// Whether the machine runs (false while it reboots or is down).
    pub fn is_up(&self) -> Result<bool, NodeError> {
        let (_, node) = self.local_node("up")?;
        Ok(node.is_up())
    }

    fn local_node(&self, action: &'static str) -> Result<(&SimContext, &SimNode), NodeError> {
        self.local
            .as_ref()
            .map(|(ctx, node)| (&**ctx, &**node))
            .ok_or_else(|| NodeError::NotInProcess {
                node: self.name.clone(),
                action,
            })
    }

    fn root_for_exec(&self) -> Result<PathBuf, NodeError> {
        if self.light {
            return Err(NodeError::LightNode {
                node: self.name.clone(),
            });
        }
        Ok(self.paths.root.clone())
    }

    fn not_running(&self) -> NodeError {
        NodeError::NotRunning {
            node: self.name.clone(),
            path: self.paths.control.join(REQUESTS_FIFO),
        }
    }
}

fn tempfile_in(dir: &Path) -> Result<tempfile::NamedTempFile, NodeError> {
    let file = tempfile::Builder::new()
        .suffix(".json")
        .tempfile_in(dir)
        .map_err(PathIoError::of("create a spec file in", dir))?;
    Ok(file)
}
