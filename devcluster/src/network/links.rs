//! Creating and removing the links of the pod network with iproute2 (`ip`, and `nsenter` to
//! address a pod's side), and the processes that hold pods' network namespaces.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, ChildStdin, Command};

use super::addresses::{
    BridgePlan, ClusterNetwork, MAX_CLUSTERS, MAX_NODES, POD_INTERFACE, PodInterface,
};
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
    #[error("node index {index} is beyond the pod network's {max} nodes", max = MAX_NODES)]
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
    /// Creates a bridge for each of nodes `1..=count` of a claimed network, recorded in
    /// `state_dir` (the nodes' state directory).
    pub async fn create(
        network: ClusterNetwork,
        state_dir: &Path,
        count: usize,
    ) -> Result<Self, NetworkError> {
        if !ClusterNetwork::has_node(count) {
            return Err(NetworkError::TooManyNodes { index: count });
        }
        let mut bridges = Self {
            network,
            names: Vec::new(),
            record: state_dir.join(BRIDGES_FILE),
        };
        for index in 1..=count {
            let plan = network.node_bridge(index);
            // The number is claimed: a bridge of that name was left by a crashed cluster.
            let _ = ip(["link", "del", &plan.name]).await;
            ip(["link", "add", &plan.name, "type", "bridge"]).await?;
            bridges.names.push(plan.name.clone());
            write_record(&bridges.record, &bridges.names)?;
            configure_bridge(&plan).await?;
        }
        Ok(bridges)
    }

    /// Deletes the bridges (the pods' veth pairs went with their namespaces).
    pub async fn remove(self) {
        let record = self.record;
        let _ = tokio::task::spawn_blocking(move || remove_bridges_in(&record)).await;
    }
}

fn write_record(record: &Path, names: &[String]) -> Result<(), NetworkError> {
    let json = serde_json::to_vec(names).map_err(|e| PathIoError {
        action: "encode",
        path: record.to_owned(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(record, json).map_err(PathIoError::of("write", record.to_owned()))?;
    Ok(())
}

/// A cluster's claim on a pod network: the control plane's link (`dcp<N>n0`, the range of "node
/// 0"), whose address the API server serves on so that pods reach it. Dropping it deletes the
/// link.
#[derive(Debug)]
pub struct ClaimedNetwork {
    network: ClusterNetwork,
    record: PathBuf,
}

impl ClaimedNetwork {
    /// Claims a free network number for this process, recorded in `state_dir`.
    pub async fn claim(state_dir: &Path) -> Result<Self, NetworkError> {
        let record = state_dir.join(BRIDGES_FILE);
        let network = tokio::task::spawn_blocking(claim_network)
            .await
            .map_err(|e| NetworkError::Command {
                command: "claim a pod network".to_owned(),
                reason: e.to_string(),
            })??;
        let claimed = Self { network, record };
        write_record(&claimed.record, &[network.bridge(0)])?;
        configure_bridge(&network.node_bridge(0)).await?;
        // Every ClusterIP is an address of this machine, so that the Service proxy listens on
        // it and pods reach it through their default route; the route goes with the link.
        let services = network.service_range().cidr();
        let link = network.bridge(0);
        ip(["route", "add", "local", &services, "dev", &link]).await?;
        Ok(claimed)
    }

    pub fn network(&self) -> ClusterNetwork {
        self.network
    }
}

impl Drop for ClaimedNetwork {
    fn drop(&mut self) {
        remove_bridges_in(&self.record);
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
    // A pod's veth pair goes with its namespace, but only once the kernel gets to it: delete
    // what is left of them now, so that nothing of the cluster outlives this call.
    let veths: Vec<String> = std::fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|link| names.iter().any(|bridge| is_veth_of(link, bridge)))
        .collect();
    for veth in veths {
        let _ = ip_blocking(["link", "del", &veth]);
    }
    let removed = names
        .into_iter()
        .filter(|name| ip_blocking(["link", "del", name]).is_ok())
        .collect();
    let _ = std::fs::remove_file(record);
    removed
}

/// Whether `link` is the machine's end of a pod's veth pair on `bridge` (see
/// [`ClusterNetwork::veth`]).
fn is_veth_of(link: &str, bridge: &str) -> bool {
    link.strip_prefix(bridge)
        .and_then(|rest| rest.strip_prefix('s'))
        .is_some_and(|slot| slot.parse::<u8>().is_ok())
}

/// The first network number whose control-plane link this process creates. Creating a link is
/// atomic; the lock makes taking over a dead process's number (deleting its link first) atomic
/// too.
fn claim_network() -> Result<ClusterNetwork, NetworkError> {
    let _lock = lock_claims()?;
    for number in 0..MAX_CLUSTERS {
        let Some(network) = ClusterNetwork::new(number) else {
            break;
        };
        let link = network.bridge(0);
        let create = || ip_blocking(["link", "add", &link, "type", "bridge"]);
        let created = match create() {
            Err(NetworkError::Command { reason, .. }) if reason.contains("File exists") => {
                owner_is_gone(&link)
                    && ip_blocking(["link", "del", &link]).is_ok()
                    && create().is_ok()
            }
            Err(error) => return Err(error),
            Ok(()) => true,
        };
        if created {
            let alias = PathBuf::from(format!("/sys/class/net/{link}/ifalias"));
            std::fs::write(&alias, process_identity("self").unwrap_or_default())
                .map_err(PathIoError::of("record the owner of the link in", alias))?;
            return Ok(network);
        }
    }
    Err(NetworkError::NoFreeNetwork)
}

/// A process as `<pid> <start time>`, which a recycled pid does not repeat.
fn process_identity(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces): state is field 3, start time field 22.
    let start_time = stat.rsplit_once(") ")?.1.split(' ').nth(19)?.to_owned();
    let pid = match pid {
        "self" => std::process::id().to_string(),
        other => other.to_owned(),
    };
    Some(format!("{pid} {start_time}"))
}

/// Whether the process named in the link's alias has ended.
fn owner_is_gone(link: &str) -> bool {
    let alias = std::fs::read_to_string(format!("/sys/class/net/{link}/ifalias"));
    let owner = alias.unwrap_or_default();
    match owner.trim().split_once(' ') {
        Some((pid, _)) => process_identity(pid).as_deref() != Some(owner.trim()),
        // Never named (its creator died under the lock) or named by something else.
        None => true,
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
        let holder = crate::isolation::spawn_holder(
            devcluster_bin,
            &crate::isolation::hold_network_namespace_args(),
            Stdio::inherit(),
        )
        .await
        .map_err(|reason| NetworkError::Holder { reason })?;
        Ok(Self {
            _holder: holder.child,
            _stdin: holder.stdin,
            pid: holder.pid,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veths_are_told_apart_from_other_nodes_links() {
        let cases = [
            ("dcp0n1s2", "dcp0n1", true),
            ("dcp0n1s254", "dcp0n1", true),
            ("dcp0n12s2", "dcp0n1", false),
            ("dcp0n1", "dcp0n1", false),
            ("dcp0n1sx", "dcp0n1", false),
            ("dcp10n1s2", "dcp1n1", false),
        ];
        for (link, bridge, expected) in cases {
            assert_eq!(is_veth_of(link, bridge), expected, "{link} on {bridge}");
        }
    }
}
