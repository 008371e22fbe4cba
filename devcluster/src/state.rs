//! Where a cluster keeps its files: one directory per cluster, laid out the same way whether a test
//! or the `devcluster` command started it, so logs are always found in the same place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::controlplane::ports::Ports;

/// The directory holding one cluster's certificates, kubeconfig, etcd data, logs and node roots.
///
/// ```text
/// <root>/kubeconfig          admin kubeconfig (certificates embedded)
/// <root>/cluster.json        ports and process ids of the running cluster (for `status`, `down`)
/// <root>/devcluster.pid      pid of the `devcluster serve` daemon, when the command started it
/// <root>/devcluster.sock     the daemon's control socket (`devcluster restart`, `node down`, ...)
/// <root>/pki/                CA, serving and client certificates, service-account key
/// <root>/etcd/               etcd data
/// <root>/components/         working files of kube-controller-manager and kube-scheduler
/// <root>/logs/<name>.log     one log per process (etcd, kube-apiserver, ..., devcluster)
/// <root>/logs/progress.log   milestones while starting (relayed by `devcluster up`)
/// <root>/nodes/              simulated nodes' state (owned by the node simulation)
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }

    pub fn cluster_info(&self) -> PathBuf {
        self.root.join("cluster.json")
    }

    pub fn daemon_pid_file(&self) -> PathBuf {
        self.root.join("devcluster.pid")
    }

    /// The daemon's control socket, through which other `devcluster` commands inject faults.
    pub fn control_socket(&self) -> PathBuf {
        self.root.join("devcluster.sock")
    }

    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }

    pub fn etcd_data(&self) -> PathBuf {
        self.root.join("etcd")
    }

    pub fn components(&self) -> PathBuf {
        self.root.join("components")
    }

    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    pub fn log_file(&self, process: &str) -> PathBuf {
        self.logs().join(format!("{process}.log"))
    }

    pub fn nodes(&self) -> PathBuf {
        self.root.join("nodes")
    }

    /// Progress lines of a cluster being started by the daemon, relayed by `devcluster up`.
    pub fn progress_file(&self) -> PathBuf {
        self.logs().join("progress.log")
    }

    /// The entries a previous cluster left that a new one must not reuse: its certificates and
    /// ports are gone, so its etcd data and kubeconfig would only mislead. Logs are not among
    /// them (the daemon's log is opened before the cluster starts); each component truncates
    /// its own. Node state is cleared by the node simulation, which knows what it mounted there.
    pub fn previous_run_entries(&self) -> Vec<PathBuf> {
        vec![
            self.kubeconfig(),
            self.cluster_info(),
            self.pki(),
            self.etcd_data(),
            self.components(),
        ]
    }
}

/// What runs for a cluster, written once it is ready and removed when it stops, so `devcluster
/// status` and `devcluster down` work from another process (and after a crash).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClusterRecord {
    /// The process that runs the cluster (the `devcluster serve` daemon, or a test binary).
    pub owner_pid: u32,
    pub server: String,
    pub kubeconfig: PathBuf,
    pub ports: Ports,
    /// Control-plane component name to process id.
    pub components: BTreeMap<String, u32>,
    pub nodes: Vec<String>,
    pub light: bool,
}

impl ClusterRecord {
    pub fn read(path: &Path) -> std::io::Result<Option<Self>> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Written to a temporary file and renamed, so a reader never sees half a record.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, json)?;
        std::fs::rename(&tmp, path)
    }
}

/// The state directory `devcluster` uses when none is given: `.devcluster/` at the root of the
/// repository containing `start` (a directory with `.git`, or a `Cargo.toml` declaring a
/// workspace), so every command finds the same cluster from any subdirectory.
pub fn default_state_dir(start: &Path) -> Option<PathBuf> {
    repository_root(start).map(|root| root.join(".devcluster"))
}

/// The nearest ancestor of `start` (itself included) that is a repository or workspace root.
pub fn repository_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|dir| dir.join(".git").exists() || is_workspace_manifest(&dir.join("Cargo.toml")))
        .map(Path::to_path_buf)
}

fn is_workspace_manifest(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .map(|text| text.lines().any(|line| line.trim() == "[workspace]"))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_root_is_found_from_any_depth() -> std::io::Result<()> {
        let repo = tempfile::tempdir()?;
        std::fs::write(
            repo.path().join("Cargo.toml"),
            "[workspace]\nmembers = []\n",
        )?;
        let member = repo.path().join("crate");
        let deep = member.join("src/deep");
        std::fs::create_dir_all(&deep)?;
        std::fs::write(member.join("Cargo.toml"), "[package]\nname = \"x\"\n")?;

        for start in [repo.path(), member.as_path(), deep.as_path()] {
            assert_eq!(
                repository_root(start).as_deref(),
                Some(repo.path()),
                "from {start:?}"
            );
        }
        assert_eq!(
            default_state_dir(&deep),
            Some(repo.path().join(".devcluster"))
        );
        Ok(())
    }

    #[test]
    fn a_git_directory_marks_the_root() -> std::io::Result<()> {
        let repo = tempfile::tempdir()?;
        std::fs::create_dir(repo.path().join(".git"))?;
        let sub = repo.path().join("a/b");
        std::fs::create_dir_all(&sub)?;
        assert_eq!(repository_root(&sub).as_deref(), Some(repo.path()));
        Ok(())
    }
}
