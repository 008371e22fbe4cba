//! The budget invariant under interrupting rollouts: three Skyhooks roll out at once on
//! disjoint light nodes, each package with a service interrupt (so every node is cordoned and
//! drained in turn), and the budget sampler checks after every Node and pod event that no
//! compartment ever has more nodes cordoned, in an interrupt or in progress than its ceiling:
//!
//! - a legacy `count` budget (2 of 5 nodes);
//! - a legacy `percent` budget (40% of 5 nodes → 2);
//! - a DeploymentPolicy with three compartments: a fixed strategy whose batch (3) is larger
//!   than its count budget (2), a linear one whose second batch (1 + 2) outgrows its percent
//!   budget (50% of 4 → 2), and the default compartment (count 1).
//!
//! Every node must also end uncordoned.

use anyhow::Context;
use e2e::budget::{BudgetSampler, CompartmentBudget, SkyhookBudget};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use serde_json::{Value, json};

const COUNT: &str = "budget-count";
const PERCENT: &str = "budget-percent";
const POLICY_SKYHOOK: &str = "budget-policy";
const POLICY: &str = "budget-compartments";

fn names(first: usize, last: usize) -> Vec<String> {
    (first..=last).map(|i| format!("node-{i}")).collect()
}

/// A Skyhook selecting `group=<group>`, whose agentless package sleeps a second per stage and
/// restarts a service (cordon, drain, interrupt pod).
fn skyhook(name: &str, group: &str, extra_spec: Value) -> String {
    let spec = json!({
        "nodeSelectors": {"matchLabels": {"group": group}},
        "packages": {
            "restarter": {
                "version": "1.2.3",
                "image": "ghcr.io/nvidia/skyhook/agentless",
                "env": [{"name": "SLEEP_LEN", "value": "1"}],
                "interrupt": {"type": "service", "services": ["cron"]}
            }
        }
    });
    e2e::skyhook_manifest(name, spec, extra_spec)
}

/// Nodes and the labels each of them gets.
type NodeLabels<'a> = (&'a [String], Vec<(&'a str, &'a str)>);

fn compartment(name: &str, nodes: &[String], ceiling: usize) -> CompartmentBudget {
    CompartmentBudget::new(name, nodes.iter().map(String::as_str), ceiling)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupting_rollouts_never_exceed_a_ceiling() -> anyhow::Result<()> {
    let installed = e2e::install_with(e2e::Setup::agentless(21)).await?;
    let client = installed.cluster.client()?;
    let (count_nodes, percent_nodes) = (names(1, 5), names(6, 10));
    let (fixed_nodes, linear_nodes, default_nodes) = (names(11, 15), names(16, 19), names(20, 21));
    let mut labels: Vec<NodeLabels<'_>> = vec![
        (&count_nodes, vec![("group", "count")]),
        (&percent_nodes, vec![("group", "percent")]),
        (&fixed_nodes, vec![("group", "policy"), ("pool", "fixed")]),
        (&linear_nodes, vec![("group", "policy"), ("pool", "linear")]),
    ];
    labels.push((&default_nodes, vec![("group", "policy")]));
    for (nodes, pairs) in labels {
        e2e::nodes::label_nodes(&client, nodes, &pairs).await?;
    }

    let budgets = vec![
        SkyhookBudget {
            skyhook: COUNT.to_owned(),
            compartments: vec![compartment("__default__", &count_nodes, 2)],
        },
        SkyhookBudget {
            skyhook: PERCENT.to_owned(),
            compartments: vec![compartment("__default__", &percent_nodes, 2)],
        },
        SkyhookBudget {
            skyhook: POLICY_SKYHOOK.to_owned(),
            compartments: vec![
                compartment("fixed", &fixed_nodes, 2),
                compartment("linear", &linear_nodes, 2),
                compartment("__default__", &default_nodes, 1),
            ],
        },
    ];
    let sampler = BudgetSampler::start(&client, budgets).await?;

    let policy = e2e::policy_manifest(
        POLICY,
        json!({
            "default": {"budget": {"count": 1}, "strategy": {"fixed": {"initialBatch": 1}}},
            "compartments": [
                {
                    "name": "fixed",
                    "selector": {"matchLabels": {"pool": "fixed"}},
                    "budget": {"count": 2},
                    "strategy": {"fixed": {"initialBatch": 3}}
                },
                {
                    "name": "linear",
                    "selector": {"matchLabels": {"pool": "linear"}},
                    "budget": {"percent": 50},
                    "strategy": {"linear": {"initialBatch": 1, "delta": 2}}
                }
            ]
        }),
    );
    e2e::apply_yaml(&client, &policy).await?;
    e2e::apply_yaml(
        &client,
        &skyhook(COUNT, "count", json!({"interruptionBudget": {"count": 2}})),
    )
    .await?;
    e2e::apply_yaml(
        &client,
        &skyhook(
            PERCENT,
            "percent",
            json!({"interruptionBudget": {"percent": 40}}),
        ),
    )
    .await?;
    e2e::apply_yaml(
        &client,
        &skyhook(
            POLICY_SKYHOOK,
            "policy",
            json!({"deploymentPolicy": POLICY}),
        ),
    )
    .await?;

    for name in [COUNT, PERCENT, POLICY_SKYHOOK] {
        e2e::wait_for_skyhook_status(&client, name, "complete", e2e::WAIT)
            .await
            .with_context(|| installed.controller_log_tail(40))?;
    }
    let report = sampler.finish().await?;
    let expected_peaks = [
        (COUNT, "__default__", 2),
        (PERCENT, "__default__", 2),
        (POLICY_SKYHOOK, "fixed", 2),
        (POLICY_SKYHOOK, "linear", 2),
        (POLICY_SKYHOOK, "__default__", 1),
    ];
    for (skyhook, compartment, peak) in expected_peaks {
        assert_eq!(
            report.peak(skyhook, compartment),
            peak,
            "{skyhook}/{compartment} runs at its ceiling: {report:?}"
        );
    }
    let everyone = [
        (COUNT, count_nodes.len()),
        (PERCENT, percent_nodes.len()),
        (
            POLICY_SKYHOOK,
            fixed_nodes.len() + linear_nodes.len() + default_nodes.len(),
        ),
    ];
    for (skyhook, nodes) in everyone {
        assert_eq!(
            report.cordoned(skyhook).len(),
            nodes,
            "every node of {skyhook} was cordoned for its interrupt: {report:?}"
        );
    }

    let nodes: Api<Node> = Api::all(client.clone());
    for node in nodes.list(&Default::default()).await?.items {
        assert!(
            !e2e::nodes::is_cordoned(&node),
            "every node ends uncordoned: {}",
            e2e::nodes::skyhook_keys(&node)
        );
    }
    Ok(())
}
