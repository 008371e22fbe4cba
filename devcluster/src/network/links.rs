//! Creating and removing the links of the pod network with iproute2 (`ip`, and `nsenter` to
//! address a pod's side), and the processes that hold pods' network namespaces.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use super::{BridgePlan, ClusterNetwork, MAX_CLUSTERS, POD_INTERFACE, PodInterface};
use crate::PathIoError;

/// Where the simulator records the bridges it created, so `devcluster down` removes them even
/// after a crash.
const BRIDGES_FILE: &str = "bridges.json";

#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error(
        "failed to run `{command}`: {reason} (the pod network of full nodes needs root and iproute2)"
    )]
    Command { command: String, reason: String },
    #[error(
        "every one of the {MAX_CLUSTERS} pod networks is taken on this machine (bridges dcp0n1 … \
         exist); stop other clusters or delete bridges left by crashed ones (`ip link del dcpNn1`)"
    )]
    NoFreeNetwork,
    #[error("node index {index} is beyond the pod network's {max} nodes", max = super::MAX_NODES)]
    TooManyNodes { index: usize },
    #[error("failed to start the network namespace holder of a pod: {reason}")]
    Holder { reason: String },
    #[error(transparent)]
    Io(#[from] PathIoError),
}

/// The bridges of one cluster's nodes, in the machine's network namespace.
#[derive(Debug)]
pub struct NodeBridges {
    pub network: ClusterNetwork,
    names: Vec<String>,
    record: PathBuf,
}

impl NodeBridges {
    /// Claims a free cluster number and creates a bridge for each of nodes `1..=count`, recorded
    /// in `state_dir`, the nodes' state directory (its namespace holder must be running: a
    /// claim whose holder is gone is taken over by the next cluster).
    pub async fn create(state_dir: &Path, count: usize) -> Result<Self, NetworkError> {
        if !ClusterNetwork::has_node(count) {
            return Err(NetworkError::TooManyNodes { index: count });
        }
        let owner = state_dir.to_owned();
        let network = tokio::task::spawn_blocking(move || claim_network(&owner))
            .await
            .map_err(|e| NetworkError::Command {
                command: "claim a pod network".to_owned(),
                reason: e.to_string(),
            })??;
        let mut bridges = Self {
            network,
            names: vec![network.bridge(1)],
            record: state_dir.join(BRIDGES_FILE),
        };
        bridges.write_record()?;
        for index in 1..=count {
            let plan = network.node_bridge(index);
            if index > 1 {
                // The number is ours: a bridge of that name was left by a crashed cluster.
                let _ = ip(["link", "del", &plan.name]).await;
                ip(["link", "add", &plan.name, "type", "bridge"]).await?;
                bridges.names.push(plan.name.clone());
                bridges.write_record()?;
            }
            configure_bridge(&plan).await?;
        }
        Ok(bridges)
    }

    /// Deletes the bridges (the pods' veth pairs went with their namespaces).
    pub async fn remove(self) {
        let record = self.record;
        let _ = tokio::task::spawn_blocking(move || remove_bridges_in(&record)).await;
    }

    fn write_record(&self) -> Result<(), NetworkError> {
        let json = serde_json::to_vec(&self.names).map_err(|e| PathIoError {
            action: "encode",
            path: self.record.clone(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(&self.record, json)
            .map_err(PathIoError::of("write", self.record.clone()))?;
        Ok(())
    }
}

/// Deletes the bridges recorded in the nodes' state directory `state_dir` by
/// [`NodeBridges::create`], if any (`devcluster down` after a crash). Blocks on `ip`.
pub fn remove_recorded_bridges(state_dir: &Path) -> Vec<String> {
    remove_bridges_in(&state_dir.join(BRIDGES_FILE))
}

fn remove_bridges_in(record: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read(record) else {
        return Vec::new();
    };
    let names: Vec<String> = serde_json::from_slice(&text).unwrap_or_default();
    let removed = names
        .into_iter()
        .filter(|name| ip_blocking(["link", "del", name]).is_ok())
        .collect();
    let _ = std::fs::remove_file(record);
    removed
}

/// The first cluster number whose first bridge this cluster creates. Creating a link is atomic;
/// the lock makes taking over a dead cluster's number (deleting its bridge first) atomic too.
fn claim_network(owner: &Path) -> Result<ClusterNetwork, NetworkError> {
    let _lock = lock_claims()?;
    for number in 0..MAX_CLUSTERS {
        let Some(network) = ClusterNetwork::new(number) else {
            break;
        };
        let first = network.bridge(1);
        let create = || ip_blocking(["link", "add", &first, "type", "bridge"]);
        let created = match create() {
            Err(NetworkError::Command { reason, .. }) if reason.contains("File exists") => {
                owner_is_gone(&first)
                    && ip_blocking(["link", "del", &first]).is_ok()
                    && create().is_ok()
            }
            Err(error) => return Err(error),
            Ok(()) => true,
        };
        if created {
            let alias = PathBuf::from(format!("/sys/class/net/{first}/ifalias"));
            std::fs::write(&alias, owner.as_os_str().as_encoded_bytes())
                .map_err(PathIoError::of("record the owner of the bridge in", alias))?;
            return Ok(network);
        }
    }
    Err(NetworkError::NoFreeNetwork)
}

/// Whether the cluster named in the bridge's alias (its nodes' state directory) no longer runs.
fn owner_is_gone(bridge: &str) -> bool {
    let alias = std::fs::read_to_string(format!("/sys/class/net/{bridge}/ifalias"));
    match alias {
        Ok(owner) if !owner.trim().is_empty() => {
            crate::node::running_holder(Path::new(owner.trim())).is_none()
        }
        // Being created by a cluster that has not named itself yet (under the lock, so this
        // is a cluster that crashed right then).
        _ => true,
    }
}

/// A machine-wide lock over claiming pod networks, released when the returned value drops (or
/// the process dies).
fn lock_claims() -> Result<nix::fcntl::Flock<std::fs::File>, NetworkError> {
    let path = std::env::temp_dir().join("devcluster-pod-networks.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(PathIoError::of("open", path.clone()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, errno)| {
        NetworkError::Io(PathIoError {
            action: "lock",
            path,
            source: std::io::Error::from(errno),
        })
    })
}

async fn configure_bridge(plan: &BridgePlan) -> Result<(), NetworkError> {
    let address = format!("{}/{}", plan.gateway, plan.prefix_len);
    ip(["addr", "add", &address, "dev", &plan.name]).await?;
    ip(["link", "set", &plan.name, "up"]).await?;
    // Forwarding for packets that enter through this bridge only: pods of one node reach the
    // other nodes' bridges, and the machine as a whole still forwards nothing.
    let sysctl = PathBuf::from(format!("/proc/sys/net/ipv4/conf/{}/forwarding", plan.name));
    std::fs::write(&sysctl, "1").map_err(PathIoError::of("enable forwarding in", sysctl))?;
    Ok(())
}

/// A pod's network namespace, held by a `devcluster __hold-netns` process for as long as this
/// value lives; the pod's veth pair disappears with it.
#[derive(Debug)]
pub struct PodNamespace {
    _holder: Child,
    /// Kept open: the holder exits when it sees EOF.
    _stdin: ChildStdin,
    pid: u32,
}

impl PodNamespace {
    /// Starts the holder and links its namespace to the node's bridge as `interface` says.
    pub async fn create(
        devcluster_bin: &Path,
        interface: &PodInterface,
    ) -> Result<Self, NetworkError> {
        let namespace = Self::start_holder(devcluster_bin).await?;
        let pid = namespace.pid.to_string();
        let veth = &interface.host_veth;
        // A namespace of an earlier pod in this slot may still be on its way out.
        let _ = ip(["link", "del", veth]).await;
        ip([
            "link",
            "add",
            veth,
            "type",
            "veth",
            "peer",
            "name",
            POD_INTERFACE,
            "netns",
            &pid,
        ])
        .await?;
        ip(["link", "set", veth, "master", &interface.bridge, "up"]).await?;
        let address = format!("{}/{}", interface.address, interface.prefix_len);
        let gateway = interface.gateway.to_string();
        for args in [
            vec!["link", "set", "lo", "up"],
            vec!["addr", "add", &address, "dev", POD_INTERFACE],
            vec!["link", "set", POD_INTERFACE, "up"],
            vec!["route", "add", "default", "via", &gateway],
        ] {
            let mut command = vec!["-t", &pid, "-n", "ip"];
            command.extend(args);
            run("nsenter", command).await?;
        }
        Ok(namespace)
    }

    async fn start_holder(devcluster_bin: &Path) -> Result<Self, NetworkError> {
        let failed = |reason: String| NetworkError::Holder { reason };
        let mut child = Command::new(devcluster_bin)
            .args(crate::isolation::hold_network_namespace_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(format!("cannot run {}: {e}", devcluster_bin.display())))?;
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
            return Err(failed(format!(
                "it did not report ready ({:?})",
                line.trim()
            )));
        }
        let pid = child
            .id()
            .ok_or_else(|| failed("it exited right after starting".into()))?;
        Ok(Self {
            _holder: child,
            _stdin: stdin,
            pid,
        })
    }

    /// What containers of the pod enter.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.pid))
    }
}

async fn ip<const N: usize>(args: [&str; N]) -> Result<(), NetworkError> {
    run("ip", args).await
}

fn ip_blocking<const N: usize>(args: [&str; N]) -> Result<(), NetworkError> {
    let output = std::process::Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output();
    checked("ip", &args, output)
}

async fn run<I, S>(program: &str, args: I) -> Result<(), NetworkError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let output = Command::new(program)
        .args(&args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await;
    checked(program, &args, output)
}

/// The command's failure, with its stderr, as an error.
fn checked<S: AsRef<OsStr>>(
    program: &str,
    args: &[S],
    output: std::io::Result<std::process::Output>,
) -> Result<(), NetworkError> {
    let failed = |reason: String| {
        let mut command = program.to_owned();
        for arg in args {
            command.push(' ');
            command.push_str(&arg.as_ref().to_string_lossy());
        }
        NetworkError::Command { command, reason }
    };
    match output {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(failed(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        )),
        Err(error) => Err(failed(error.to_string())),
    }
}
