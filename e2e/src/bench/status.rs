//! `kubectl skyhook status` wall time: the plugin binary run as a user would, all Skyhooks.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

use super::cluster::BenchCluster;
use super::report::{StatusReport, quantile};

/// The plugin next to the benchmark binary (same cargo target directory and profile).
pub fn plugin_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the benchmark executable")?;
    Ok(exe.with_file_name("kubectl-skyhook"))
}

fn run_once(plugin: &Path, kubeconfig: &Path) -> anyhow::Result<f64> {
    let started = Instant::now();
    let output = std::process::Command::new(plugin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("status")
        .output()
        .with_context(|| format!("running {}", plugin.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    if !output.status.success() {
        bail!(
            "`kubectl-skyhook status` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(seconds)
}

/// Runs `kubectl-skyhook status` `runs` times against the cluster.
pub async fn measure(cluster: &BenchCluster, runs: usize) -> anyhow::Result<StatusReport> {
    let plugin = plugin_binary()?;
    let kubeconfig = cluster.installed.cluster.kubeconfig_path();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let plugin = plugin.clone();
        let kubeconfig = kubeconfig.clone();
        let seconds = tokio::task::spawn_blocking(move || run_once(&plugin, &kubeconfig))
            .await
            .context("the status run panicked")??;
        times.push(seconds);
    }
    Ok(StatusReport {
        case: "status",
        nodes: cluster.nodes,
        skyhooks: cluster.skyhooks.len(),
        runs,
        median_seconds: quantile(&times, 0.5).unwrap_or(f64::NAN),
        min_seconds: times.iter().copied().fold(f64::INFINITY, f64::min),
    })
}
