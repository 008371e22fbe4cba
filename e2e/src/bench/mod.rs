//! The benchmark behind `cargo run --release -p e2e --bin bench`: rollouts, idle cost, admission
//! and `kubectl skyhook status` on fresh devclusters of light nodes.
//!
//! [`plan`] decides, purely, which clusters to start and which cases run on each; [`run`] starts
//! one cluster per node count in turn and runs its cases in order. Each case's result is one
//! JSON object on stdout; the Markdown tables of [`report::markdown_tables`] go to stderr.
//!
//! Cases on one cluster run one after the other, so a later rollout runs while the earlier
//! Skyhooks sit complete (each report says how many: `other_skyhooks`); that is also how the idle
//! case gets its three complete Skyhooks.

pub mod admission;
pub mod cases;
pub mod cluster;
pub mod manifests;
pub mod process;
pub mod report;
pub mod requests;
pub mod status;
pub mod steps;

use std::time::Duration;

use cases::Rollout;
use cluster::BenchCluster;
use devcluster::node::NodeSize;
use report::CaseReport;
use skyhook_devcluster::SkyhookInstall;

/// One measured step on a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Rollout { kind: Rollout, budget_percent: u32 },
    Idle,
    Status,
    Admission,
}

/// Which cases to run, on which cluster sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// One fresh cluster per entry.
    pub nodes: Vec<usize>,
    pub rollout: bool,
    /// The rollout budgets, in percent.
    pub budgets: Vec<u32>,
    /// The dependency chain runs on the cluster of this size.
    pub chain: Option<(usize, u32)>,
    /// The idle case runs on the cluster of this size.
    pub idle_nodes: Option<usize>,
    /// `kubectl skyhook status` runs on clusters of these sizes.
    pub status_nodes: Vec<usize>,
    /// Admission runs on the smallest cluster.
    pub admission: bool,
}

/// The clusters to start, in order, each with its steps in order: rollouts, the chain, idle
/// (which completes Skyhooks up to three), status, admission. Clusters without steps are left
/// out.
pub fn plan(selection: &Selection) -> Vec<(usize, Vec<Step>)> {
    let smallest = selection.nodes.iter().copied().min();
    selection
        .nodes
        .iter()
        .map(|&nodes| {
            let mut steps = Vec::new();
            if selection.rollout {
                steps.extend(
                    selection
                        .budgets
                        .iter()
                        .map(|&budget_percent| Step::Rollout {
                            kind: Rollout::Single,
                            budget_percent,
                        }),
                );
            }
            if let Some((chain_nodes, budget_percent)) = selection.chain
                && chain_nodes == nodes
            {
                steps.push(Step::Rollout {
                    kind: Rollout::Chain,
                    budget_percent,
                });
            }
            if selection.idle_nodes == Some(nodes) {
                steps.push(Step::Idle);
            }
            if selection.status_nodes.contains(&nodes) {
                steps.push(Step::Status);
            }
            if selection.admission && smallest == Some(nodes) {
                steps.push(Step::Admission);
            }
            (nodes, steps)
        })
        .filter(|(_, steps)| !steps.is_empty())
        .collect()
}

/// How long and how often the cases measure.
#[derive(Debug, Clone, Copy)]
pub struct Effort {
    /// Complete Skyhooks during the idle measurement.
    pub idle_skyhooks: usize,
    pub idle_settle: Duration,
    pub idle_duration: Duration,
    pub admission_requests: usize,
    pub admission_concurrency: [usize; 2],
    pub status_runs: usize,
    /// How much each simulated Node object carries.
    pub node_size: NodeSize,
}

/// Runs the planned clusters and steps; `emit` receives each case's report as it finishes.
pub async fn run(
    planned: &[(usize, Vec<Step>)],
    effort: Effort,
    mut emit: impl FnMut(&CaseReport),
) -> anyhow::Result<Vec<CaseReport>> {
    let mut reports = Vec::new();
    for (nodes, steps) in planned {
        eprintln!("bench: starting a devcluster of {nodes} light nodes");
        let started = std::time::Instant::now();
        let mut cluster = BenchCluster::start(*nodes, effort.node_size).await?;
        eprintln!(
            "bench: {nodes} nodes ready in {:.0} s; controller pid {}, kube-apiserver pid {}",
            started.elapsed().as_secs_f64(),
            cluster.controller.pid,
            cluster.apiserver.pid
        );
        for step in steps {
            eprintln!("bench: {nodes} nodes: {step:?}");
            let produced = run_step(&mut cluster, *step, effort).await?;
            for report in produced {
                emit(&report);
                reports.push(report);
            }
        }
    }
    Ok(reports)
}

async fn run_step(
    cluster: &mut BenchCluster,
    step: Step,
    effort: Effort,
) -> anyhow::Result<Vec<CaseReport>> {
    Ok(match step {
        Step::Rollout {
            kind,
            budget_percent,
        } => vec![CaseReport::Rollout(
            cases::rollout(cluster, kind, budget_percent).await?,
        )],
        Step::Idle => vec![CaseReport::Idle(
            cases::idle(
                cluster,
                effort.idle_skyhooks,
                effort.idle_settle,
                effort.idle_duration,
            )
            .await?,
        )],
        Step::Status => vec![CaseReport::Status(
            status::measure(cluster, effort.status_runs).await?,
        )],
        Step::Admission => {
            let _webhook = cluster
                .installed
                .cluster
                .install_webhook(skyhook_devcluster::WebhookOptions::default())
                .await?;
            let mut reports = Vec::new();
            for object in [admission::Object::Valid, admission::Object::Invalid] {
                for concurrency in effort.admission_concurrency {
                    reports.push(CaseReport::Admission(
                        admission::measure(
                            &cluster.client,
                            object,
                            concurrency,
                            effort.admission_requests,
                        )
                        .await?,
                    ));
                }
            }
            reports
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection() -> Selection {
        Selection {
            nodes: vec![100, 1000, 5000],
            rollout: true,
            budgets: vec![100, 10],
            chain: Some((1000, 10)),
            idle_nodes: Some(5000),
            status_nodes: vec![1000, 5000],
            admission: true,
        }
    }

    const R100: Step = Step::Rollout {
        kind: Rollout::Single,
        budget_percent: 100,
    };
    const R10: Step = Step::Rollout {
        kind: Rollout::Single,
        budget_percent: 10,
    };
    const CHAIN: Step = Step::Rollout {
        kind: Rollout::Chain,
        budget_percent: 10,
    };

    #[test]
    fn the_full_matrix() {
        assert_eq!(
            plan(&selection()),
            vec![
                (100, vec![R100, R10, Step::Admission]),
                (1000, vec![R100, R10, CHAIN, Step::Status]),
                (5000, vec![R100, R10, Step::Idle, Step::Status]),
            ]
        );
    }

    #[test]
    fn single_cases_start_only_the_clusters_they_need() {
        let only = |edit: fn(&mut Selection)| {
            let mut selection = Selection {
                rollout: false,
                chain: None,
                idle_nodes: None,
                status_nodes: vec![],
                admission: false,
                ..selection()
            };
            edit(&mut selection);
            plan(&selection)
        };
        type Case = (fn(&mut Selection), Vec<(usize, Vec<Step>)>);
        let cases: [Case; 5] = [
            (|_| {}, vec![]),
            (|s| s.chain = Some((1000, 10)), vec![(1000, vec![CHAIN])]),
            (
                |s| s.idle_nodes = Some(5000),
                vec![(5000, vec![Step::Idle])],
            ),
            (|s| s.admission = true, vec![(100, vec![Step::Admission])]),
            (
                |s| {
                    s.rollout = true;
                    s.budgets = vec![10];
                    s.nodes = vec![1000];
                },
                vec![(1000, vec![R10])],
            ),
        ];
        for (index, (edit, expected)) in cases.into_iter().enumerate() {
            assert_eq!(only(edit), expected, "case {index}");
        }
    }
}
