//! Why starting a Skyhook binary against a devcluster failed: one error for the installer and the
//! background processes it starts, which report through each other.

use std::path::PathBuf;
use std::time::Duration;

/// Why `install` (or a background process it starts) failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing the CRD manifest {path}: {source}")]
    Manifest {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    #[error("no CRD manifests (*.yaml) in {0}; pass the chart's crds directory")]
    NoCrds(PathBuf),
    #[error("applying {what}: {source}")]
    Apply { what: String, source: kube::Error },
    #[error("CRD {name} was not Established within {waited:?}")]
    CrdNotEstablished { name: String, waited: Duration },
    #[error(
        "the skyhook-controller binary was not found at {0}; build it with `cargo build -p controller` \
         (same CARGO_TARGET_DIR as devcluster) or set SKYHOOK_CONTROLLER_BIN"
    )]
    ControllerMissing(PathBuf),
    #[error(
        "the skyhook-agent binary was not found at {0}; build it with `cargo build -p agent` \
         (same CARGO_TARGET_DIR as devcluster) or set SKYHOOK_AGENT_BIN"
    )]
    AgentMissing(PathBuf),
    #[error("building a client for the cluster: {0}")]
    Client(String),
    #[error("locating the devcluster binary: {0}")]
    Isolation(#[from] devcluster::isolation::IsolationError),
    #[error("no free port for the controller's {0} endpoint: {1}")]
    Port(&'static str, std::io::Error),
    #[error("starting {binary}: {source}")]
    Spawn {
        binary: PathBuf,
        source: std::io::Error,
    },
    #[error("{binary} exited ({status}) before it was ready; last lines of {log}:\n{tail}")]
    Exited {
        binary: &'static str,
        status: std::process::ExitStatus,
        log: PathBuf,
        tail: String,
    },
    #[error(
        "{binary} (pid {pid}) was not ready within {waited:?} ({last}); stopped it; last lines of {log}:\n{tail}"
    )]
    NotReady {
        binary: &'static str,
        pid: u32,
        waited: Duration,
        last: String,
        log: PathBuf,
        tail: String,
    },
}
