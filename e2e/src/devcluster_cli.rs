//! The `devcluster` command as a user runs it, against a temporary state directory: for tests
//! of `up`, `install`, `status` and `down` themselves. Dropping it runs `down`, so nothing a
//! test started outlives it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, ensure};

use crate::Kubectl;

#[derive(Debug)]
pub struct DevclusterCli {
    binary: PathBuf,
    state: tempfile::TempDir,
}

impl DevclusterCli {
    /// Builds the binaries and picks a fresh state directory; starts nothing yet.
    pub fn new() -> anyhow::Result<Self> {
        crate::build_binaries()?;
        Ok(DevclusterCli {
            binary: devcluster::isolation::devcluster_binary()?,
            state: tempfile::tempdir()?,
        })
    }

    pub fn state_dir(&self) -> &Path {
        self.state.path()
    }

    /// `devcluster --state-dir <state> args...`, whatever its exit status.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<Output> {
        Command::new(&self.binary)
            .arg("--state-dir")
            .arg(self.state.path())
            .args(args)
            .output()
            .with_context(|| format!("running devcluster {args:?}"))
    }

    /// [`DevclusterCli::run`], which must succeed; returns its trimmed stdout and stderr.
    pub fn succeed(&self, args: &[&str]) -> anyhow::Result<(String, String)> {
        let output = self.run(args)?;
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        ensure!(
            output.status.success(),
            "devcluster {args:?} failed ({}):\n{stdout}\n{stderr}",
            output.status
        );
        Ok((stdout, stderr))
    }

    /// The real `kubectl` against this cluster.
    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(self.state.path().join("kubeconfig"))
    }

    /// The pid in the state directory's record `<binary>.json` of a background process.
    pub fn recorded_pid(&self, binary: &str) -> anyhow::Result<u32> {
        let path = self.state.path().join(format!("{binary}.json"));
        let record: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?,
        )?;
        record["pid"]
            .as_u64()
            .and_then(|pid| u32::try_from(pid).ok())
            .with_context(|| format!("no pid in {record}"))
    }
}

impl Drop for DevclusterCli {
    fn drop(&mut self) {
        // Whatever the test did, nothing it started may outlive it.
        let _stopped = self.run(&["down"]);
    }
}

/// Whether `pid` is a live (not zombie) process running `binary`.
pub fn runs(pid: u32, binary: &str) -> bool {
    devcluster::controlplane::process::is_alive_running(pid, binary)
}

/// A command's output as trimmed text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_string()
}
