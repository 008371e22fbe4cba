//! `bench`: skyhook's benchmark on fresh devclusters of light nodes. One JSON object per case on
//! stdout, Markdown tables on stderr. See docs/performance.md.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use devcluster::node::NodeSize;
use e2e::bench::report::{CaseReport, markdown_tables};
use e2e::bench::{Effort, Selection, plan, run};

/// The cases: `rollout` (one no-interrupt package per budget), `chain` (three dependent
/// packages, a service interrupt), `idle`, `admission`, `status`.
const ALL_CASES: [&str; 5] = ["rollout", "chain", "idle", "admission", "status"];

#[derive(Debug, Parser)]
#[command(
    about = "Benchmark skyhook-controller, the webhook and kubectl-skyhook on fresh devclusters",
    after_help = "Build the binaries first (same profile and target directory):\n  \
        cargo build --release -p skyhook-devcluster -p controller -p agent -p webhook -p kubectl-skyhook\n\
        Examples:\n  bench\n  bench --nodes 1000 --cases chain\n  bench --nodes 100 --cases rollout,admission"
)]
struct Args {
    /// Cluster sizes; one fresh devcluster each, in this order.
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = [100, 1000, 5000])]
    nodes: Vec<usize>,
    /// Cases to run: rollout, chain, idle, admission, status.
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = ALL_CASES.map(String::from))]
    cases: Vec<String>,
    /// Interruption budgets of the one-package rollouts, in percent.
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = [100, 10])]
    budgets: Vec<u32>,
    /// Cluster size of the dependency chain.
    #[arg(long, default_value_t = 1000)]
    chain_nodes: usize,
    /// Interruption budget of the dependency chain, in percent.
    #[arg(long, default_value_t = 10)]
    chain_budget: u32,
    /// Cluster size of the idle case.
    #[arg(long, default_value_t = 5000)]
    idle_nodes: usize,
    /// Complete Skyhooks during the idle case.
    #[arg(long, default_value_t = 3)]
    idle_skyhooks: usize,
    /// Seconds the idle case measures; the default spans one round of node status reports
    /// (every 300 s on a devcluster, as a kubelet's), which wake the controller's node watch.
    #[arg(long, default_value_t = 300)]
    idle_seconds: u64,
    /// Cluster sizes `kubectl skyhook status` is timed at.
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = [1000, 5000])]
    status_nodes: Vec<usize>,
    /// Runs of `kubectl skyhook status` per cluster.
    #[arg(long, default_value_t = 5)]
    status_runs: usize,
    /// How much each simulated Node carries: `realistic` (50 images, 25 labels, 10 annotations,
    /// every standard condition, as a real node) or `small` (the kubelet's own labels only).
    #[arg(long, value_enum, default_value_t = NodeSize::Realistic)]
    node_size: NodeSize,
    /// Dry-run creates per admission measurement.
    #[arg(long, default_value_t = 400)]
    admission_requests: usize,
}

impl Args {
    fn selection(&self) -> anyhow::Result<Selection> {
        for case in &self.cases {
            if !ALL_CASES.contains(&case.as_str()) {
                bail!(
                    "unknown case {case:?}; the cases are {}",
                    ALL_CASES.join(", ")
                );
            }
        }
        let wants = |case: &str| self.cases.iter().any(|c| c == case);
        Ok(Selection {
            nodes: self.nodes.clone(),
            rollout: wants("rollout"),
            budgets: self.budgets.clone(),
            chain: wants("chain").then_some((self.chain_nodes, self.chain_budget)),
            idle_nodes: wants("idle").then_some(self.idle_nodes),
            status_nodes: if wants("status") {
                self.status_nodes.clone()
            } else {
                Vec::new()
            },
            admission: wants("admission"),
        })
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let planned = plan(&args.selection()?);
    if planned.is_empty() {
        bail!(
            "nothing to run: no selected case applies to the cluster sizes {:?}",
            args.nodes
        );
    }
    let effort = Effort {
        idle_skyhooks: args.idle_skyhooks,
        idle_settle: Duration::from_secs(15),
        idle_duration: Duration::from_secs(args.idle_seconds),
        admission_requests: args.admission_requests,
        admission_concurrency: [1, 16],
        status_runs: args.status_runs,
        node_size: args.node_size,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let emit = |report: &CaseReport| match serde_json::to_string(report) {
        #[allow(clippy::print_stdout)] // The JSON lines on stdout are the benchmark's output.
        Ok(line) => println!("{line}"),
        Err(error) => eprintln!("bench: could not serialise a report: {error}"),
    };
    let reports = runtime.block_on(run(&planned, effort, emit))?;
    eprintln!("\n{}", markdown_tables(&reports));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_take_commas_or_spaces() {
        for argv in [
            ["bench", "--nodes", "100,1000", "--cases", "rollout,status"].as_slice(),
            [
                "bench", "--nodes", "100", "1000", "--cases", "rollout", "status",
            ]
            .as_slice(),
        ] {
            let args = Args::try_parse_from(argv).map_err(|e| e.to_string());
            let parsed = args.map(|a| (a.nodes, a.cases));
            assert_eq!(
                parsed,
                Ok((vec![100, 1000], vec!["rollout".into(), "status".into()])),
                "{argv:?}"
            );
        }
    }
}
