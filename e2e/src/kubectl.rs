//! The real `kubectl` against one devcluster: what the webhook, chart and CLI tests drive, the
//! way a user would. Run from the workspace root, so manifest paths such as
//! `examples/demo.yaml` name the repository's files.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Output, Stdio};

use anyhow::{Context, bail, ensure};
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

use crate::Installed;

/// `kubectl` for one cluster's kubeconfig, optionally with the built `kubectl-skyhook` first on
/// `PATH` (as a user's kubectl finds an installed plugin).
#[derive(Debug, Clone)]
pub struct Kubectl {
    kubeconfig: PathBuf,
    /// `PATH` for kubectl when the plugin directory goes first; else the test's own.
    path: Option<OsString>,
}

impl Kubectl {
    /// `kubectl` with the kubeconfig at `kubeconfig`, without the plugin.
    pub fn new(kubeconfig: PathBuf) -> Self {
        Self {
            kubeconfig,
            path: None,
        }
    }

    /// `kubectl` for `installed`'s cluster with the built `kubectl-skyhook` plugin (builds the
    /// binaries if needed).
    pub fn with_plugin(installed: &Installed) -> anyhow::Result<Self> {
        crate::build_binaries()?;
        let bin = crate::binary_dir()?;
        let plugin = bin.join("kubectl-skyhook");
        ensure!(
            plugin.is_file(),
            "{} was not built; build_binaries should have built it",
            plugin.display()
        );
        let mut dirs = vec![bin];
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        Ok(Self {
            kubeconfig: installed.cluster.kubeconfig_path(),
            path: Some(std::env::join_paths(dirs).context("building PATH")?),
        })
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new("kubectl");
        command
            .args(args)
            .current_dir(crate::workspace())
            .env("KUBECONFIG", &self.kubeconfig)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        if let Some(path) = &self.path {
            command.env("PATH", path);
        }
        command
    }

    /// Runs `kubectl <args>` and returns what it did, success or not.
    pub async fn run(&self, args: &[&str]) -> anyhow::Result<Output> {
        tokio::process::Command::from(self.command(args))
            .output()
            .await
            .with_context(|| format!("running kubectl {args:?} (is kubectl installed?)"))
    }

    /// [`Kubectl::run`] for a test without an async runtime.
    pub fn run_blocking(&self, args: &[&str]) -> anyhow::Result<Output> {
        self.command(args)
            .output()
            .with_context(|| format!("running kubectl {args:?} (is kubectl installed?)"))
    }

    /// Runs `kubectl <args>` with `input` on its stdin (e.g. `apply -f -`).
    pub async fn run_with_input(&self, args: &[&str], input: &[u8]) -> anyhow::Result<Output> {
        let mut child = tokio::process::Command::from(self.command(args))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("running kubectl {args:?} (is kubectl installed?)"))?;
        let mut stdin = child.stdin.take().context("kubectl's stdin")?;
        stdin
            .write_all(input)
            .await
            .with_context(|| format!("writing kubectl {args:?}'s input"))?;
        // Closing stdin ends kubectl's input.
        drop(stdin);
        child
            .wait_with_output()
            .await
            .with_context(|| format!("waiting for kubectl {args:?}"))
    }

    /// `kubectl <args>`, which must succeed; its stdout.
    pub async fn succeed(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = self.run(args).await?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if !output.status.success() {
            bail!(
                "`kubectl {}` failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(stdout)
    }

    /// `kubectl <args>`, which must be refused; its stderr.
    pub async fn refused(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = self.run(args).await?;
        ensure!(
            !output.status.success(),
            "`kubectl {}` succeeded but should have been refused: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout)
        );
        Ok(String::from_utf8_lossy(&output.stderr).into_owned())
    }

    /// `kubectl skyhook <args>`, which must succeed; its stdout.
    pub async fn skyhook(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut all = vec!["skyhook"];
        all.extend_from_slice(args);
        self.succeed(&all).await
    }

    /// `kubectl skyhook <args> -o json`, parsed.
    pub async fn skyhook_json(&self, args: &[&str]) -> anyhow::Result<Value> {
        let mut with_output = args.to_vec();
        with_output.extend(["-o", "json"]);
        let stdout = self.skyhook(&with_output).await?;
        serde_json::from_str(&stdout).with_context(|| {
            format!(
                "`kubectl skyhook {}` printed no JSON:\n{stdout}",
                with_output.join(" ")
            )
        })
    }
}
