//! What the `cli_*` tests share: running `kubectl skyhook …` through the real `kubectl` (which
//! finds the built `kubectl-skyhook` on `PATH`, as a user's kubectl finds an installed plugin),
//! and the agentless Skyhooks they roll out.

// Each `cli_*` test crate includes this module and uses a different part of it.
#![allow(dead_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Output;

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

/// The agentless package the CLI tests install (spec §6.1's test image: every stage sleeps
/// `SLEEP_LEN` seconds and exits `EXIT_CODE`).
pub const PACKAGE: &str = "agentless";
pub const VERSION: &str = "1.2.3";

/// The cargo target directory's profile directory (`<target>/debug`), where `build_binaries`
/// puts `kubectl-skyhook`, `devcluster` and the rest.
pub fn binary_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the test executable")?;
    // <target>/<profile>/deps/<test>
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .with_context(|| format!("{} is not in <target>/<profile>/deps/", exe.display()))?;
    Ok(dir.to_path_buf())
}

/// `kubectl` against one cluster, with the built plugin first on `PATH`.
#[derive(Debug, Clone)]
pub struct Kubectl {
    kubeconfig: PathBuf,
    path: OsString,
}

impl Kubectl {
    /// `kubectl` for `installed`'s cluster (builds the binaries if needed).
    pub fn new(installed: &e2e::Installed) -> anyhow::Result<Self> {
        e2e::build_binaries()?;
        let bin = binary_dir()?;
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
            path: std::env::join_paths(dirs).context("building PATH")?,
        })
    }

    /// Runs `kubectl <args>` and returns what it did, success or not.
    pub async fn run(&self, args: &[&str]) -> anyhow::Result<Output> {
        tokio::process::Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .context("running kubectl (is it installed?)")
    }

    /// `kubectl skyhook <args>`, which must succeed; returns its stdout.
    pub async fn skyhook(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = self.run(&plugin_args(args)).await?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if !output.status.success() {
            bail!(
                "`kubectl skyhook {}` failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(stdout)
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

fn plugin_args<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["skyhook"];
    all.extend_from_slice(args);
    all
}

/// A Skyhook of one agentless package with `env`, on the nodes matching `match_labels`;
/// `extra_spec` is merged into the spec.
pub fn agentless_skyhook(
    name: &str,
    match_labels: Value,
    env: &[(&str, &str)],
    extra_spec: Value,
) -> String {
    let env: Vec<Value> = env
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    let spec = json!({
        "nodeSelectors": {"matchLabels": match_labels},
        "packages": {PACKAGE: {
            "version": VERSION,
            "image": "ghcr.io/nvidia/skyhook/agentless",
            "env": env,
        }},
    });
    e2e::skyhook_manifest(name, spec, extra_spec)
}

/// `"<package>|<version>"`, the key of the agentless package in a node state.
pub fn package_key() -> String {
    format!("{PACKAGE}|{VERSION}")
}

/// The lines of `text` whose whitespace-separated columns start with `columns`.
pub fn rows_starting<'t>(text: &'t str, columns: &[&str]) -> Vec<&'t str> {
    text.lines()
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() >= columns.len() && fields[..columns.len()] == *columns
        })
        .collect()
}
