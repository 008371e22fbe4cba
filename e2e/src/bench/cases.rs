//! The rollout and idle cases on a [`BenchCluster`].

use std::time::Duration;

use super::cluster::BenchCluster;
use super::manifests;
use super::report::{IdleReport, RolloutReport, quantile};
use super::steps::StepWatch;

/// The shape of a rollout case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    /// One package without interrupt.
    Single,
    /// Three dependent packages, the last with a service interrupt.
    Chain,
}

impl Rollout {
    pub fn name(self) -> &'static str {
        match self {
            Self::Single => "rollout",
            Self::Chain => "chain",
        }
    }
}

/// Applies a new Skyhook of `kind` with `budget_percent` and measures it until `complete`.
pub async fn rollout(
    cluster: &mut BenchCluster,
    kind: Rollout,
    budget_percent: u32,
) -> anyhow::Result<RolloutReport> {
    let name = format!(
        "bench-{}-{}-{budget_percent}",
        kind.name(),
        cluster.skyhooks.len() + 1
    );
    let manifest = match kind {
        Rollout::Single => manifests::single_package(&name, budget_percent),
        Rollout::Chain => manifests::dependency_chain(&name, budget_percent),
    };
    let packages = manifests::package_count(&manifest);
    let other_skyhooks = cluster.skyhooks.len();
    let steps = StepWatch::start(&cluster.client, crate::pods::NAMESPACE, &name);
    let mark = cluster.mark().await?;
    cluster.apply_and_complete(&manifest).await?;
    let interval = cluster.measure(mark).await?;
    let step_latencies = steps.finish();
    let node_packages = (cluster.nodes * packages).max(1) as f64;
    Ok(RolloutReport {
        case: kind.name(),
        nodes: cluster.nodes,
        budget_percent,
        packages,
        other_skyhooks,
        wall_seconds: interval.seconds,
        controller_cpu_seconds: interval.controller_cpu_seconds,
        controller_peak_rss_mib: interval.controller_peak_rss_mib,
        apiserver_cpu_seconds: interval.apiserver_cpu_seconds,
        machine_busy_percent: interval.machine_busy_percent,
        reconciles: interval.reconciles.count,
        reconcile_seconds: interval.reconciles.seconds,
        writes_per_node_package: interval.requests.writes() as f64 / node_packages,
        writes_per_node_package_by_resource: interval
            .requests
            .writes_by_resource_per(node_packages),
        all_clients_writes_per_node_package: interval.all_requests.writes() as f64 / node_packages,
        all_clients_writes_per_node_package_by_resource: interval
            .all_requests
            .writes_by_resource_per(node_packages),
        requests: interval.requests,
        steps: step_latencies.len(),
        step_latency_p50_seconds: quantile(&step_latencies, 0.5),
        step_latency_p99_seconds: quantile(&step_latencies, 0.99),
    })
}

/// Completes Skyhooks until `skyhooks` are on the cluster, lets the cluster settle, then
/// measures the controller for `duration`.
pub async fn idle(
    cluster: &mut BenchCluster,
    skyhooks: usize,
    settle: Duration,
    duration: Duration,
) -> anyhow::Result<IdleReport> {
    while cluster.skyhooks.len() < skyhooks {
        let name = format!("bench-idle-{}", cluster.skyhooks.len() + 1);
        cluster
            .apply_and_complete(&manifests::single_package(&name, 100))
            .await?;
    }
    tokio::time::sleep(settle).await;
    let mark = cluster.mark().await?;
    tokio::time::sleep(duration).await;
    let interval = cluster.measure(mark).await?;
    let minutes = interval.seconds / 60.0;
    Ok(IdleReport {
        case: "idle",
        nodes: cluster.nodes,
        skyhooks: cluster.skyhooks.len(),
        measured_seconds: interval.seconds,
        controller_cpu_seconds_per_minute: interval.controller_cpu_seconds / minutes,
        controller_rss_mib: cluster.controller.rss_mib()?,
        apiserver_cpu_seconds_per_minute: interval.apiserver_cpu_seconds / minutes,
        requests_per_minute: interval.requests.total() as f64 / minutes,
        requests: interval.requests,
    })
}
