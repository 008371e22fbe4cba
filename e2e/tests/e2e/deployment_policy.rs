//! Upstream's deployment-policy suite (spec §6.2) on light devcluster nodes with the agentless
//! package: compartment statuses, ceilings, batch progressions (lower bounds, as upstream
//! asserts them) and rollout metrics. Each scenario also runs the budget sampler, which fails
//! the test if a compartment ever has more nodes busy at once than its ceiling.
//!
//! Where we deliberately differ from upstream (docs/compatibility.md): a batch never exceeds
//! the compartment's ceiling, so the overlapping-selectors and multi-compartment batches are the
//! ceiling-capped sizes; upstream's lower-bound assertions hold either way.

use std::collections::BTreeMap;

use e2e::budget::{BudgetSampler, CompartmentBudget, SkyhookBudget};
use e2e::metrics::{find, scrape};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

/// The agentless package every scenario installs; `sleep` seconds per stage.
fn package(sleep: u32) -> Value {
    json!({
        "agentless": {
            "version": "1.2.3",
            "image": "ghcr.io/nvidia/skyhook/agentless",
            "env": [{"name": "SLEEP_LEN", "value": sleep.to_string()}]
        }
    })
}

/// Names of nodes `first..=last` (`node-<i>`).
fn nodes(first: usize, last: usize) -> Vec<String> {
    (first..=last).map(|i| format!("node-{i}")).collect()
}

/// `status.compartmentStatuses.<compartment>` of a Skyhook (null when absent).
fn compartment<'a>(skyhook: &'a DynamicObject, compartment: &str) -> &'a Value {
    &skyhook.data["status"]["compartmentStatuses"][compartment]
}

fn number(value: &Value) -> i64 {
    value.as_i64().unwrap_or(-1)
}

/// `(matched, ceiling)` of a compartment's status.
fn matched_ceiling(skyhook: &DynamicObject, name: &str) -> (i64, i64) {
    let status = compartment(skyhook, name);
    (number(&status["matched"]), number(&status["ceiling"]))
}

fn completed(skyhook: &DynamicObject, name: &str) -> i64 {
    number(&compartment(skyhook, name)["completed"])
}

fn current_batch(skyhook: &DynamicObject, name: &str) -> i64 {
    number(&compartment(skyhook, name)["batchState"]["currentBatch"])
}

/// A light cluster of `count` agentless nodes with skyhook installed.
async fn cluster(count: usize) -> anyhow::Result<e2e::Installed> {
    e2e::install_with(e2e::Setup::agentless(count)).await
}

fn skyhook_manifest(name: &str, selector: Value, extra_spec: Value, sleep: u32) -> String {
    let spec = json!({
        "nodeSelectors": {"matchLabels": selector},
        "packages": package(sleep),
    });
    e2e::skyhook_manifest(name, spec, extra_spec)
}

fn budget(skyhook: &str, compartments: Vec<CompartmentBudget>) -> Vec<SkyhookBudget> {
    vec![SkyhookBudget {
        skyhook: skyhook.to_owned(),
        compartments,
    }]
}

fn compartment_budget(name: &str, nodes: &[String], ceiling: usize) -> CompartmentBudget {
    CompartmentBudget::new(name, nodes.iter().map(String::as_str), ceiling)
}

/// legacy-compatibility: `interruptionBudget.count 3` on 6 nodes → `__default__` matched 6,
/// ceiling 3, then complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_compatibility() -> anyhow::Result<()> {
    const NAME: &str = "legacy-compatibility";
    let installed = cluster(6).await?;
    let client = installed.cluster.client()?;
    let all = nodes(1, 6);
    let sampler = BudgetSampler::start(
        &client,
        budget(NAME, vec![compartment_budget("__default__", &all, 3)]),
    )
    .await?;
    e2e::apply_yaml(
        &client,
        &skyhook_manifest(
            NAME,
            json!({e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}),
            json!({"interruptionBudget": {"count": 3}}),
            1,
        ),
    )
    .await?;
    installed
        .wait_for_skyhook(NAME, "__default__ matched 6, ceiling 3", |s| {
            matched_ceiling(s, "__default__") == (6, 3)
        })
        .await?;
    let done = installed
        .wait_for_skyhook(NAME, "complete", |s| {
            e2e::skyhook_status(s) == Some("complete")
        })
        .await?;
    assert_eq!(matched_ceiling(&done, "__default__"), (6, 3));
    assert_eq!(completed(&done, "__default__"), 6);
    let port = installed.controller.record().metrics_port;
    let labels = [
        ("skyhook_name", NAME),
        ("policy_name", "legacy"),
        ("compartment_name", "__default__"),
        ("strategy", "fixed"),
    ];
    e2e::metrics::wait_for_metric(port, "skyhook_rollout_completed", &labels, Some(6.0)).await?;
    let samples = scrape(port).await?;
    assert_eq!(
        find(&samples, "skyhook_rollout_matched_nodes", &labels),
        Some(6.0)
    );
    assert_eq!(
        find(&samples, "skyhook_rollout_ceiling", &labels),
        Some(3.0)
    );
    let report = sampler.finish().await?;
    assert_eq!(
        report.peak(NAME, "__default__"),
        3,
        "batches of the legacy ceiling run at once"
    );
    Ok(())
}

/// linear-strategy: 8 nodes `tier=production`, compartment count 4, linear 1 + 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linear_strategy() -> anyhow::Result<()> {
    const NAME: &str = "linear-strategy";
    const POLICY: &str = "linear-policy";
    let installed = cluster(8).await?;
    let client = installed.cluster.client()?;
    let all = nodes(1, 8);
    e2e::nodes::label_nodes(&client, &all, &[("tier", "production")]).await?;
    let sampler = BudgetSampler::start(
        &client,
        budget(NAME, vec![compartment_budget("production", &all, 4)]),
    )
    .await?;
    e2e::apply_yaml(
        &client,
        &e2e::policy_manifest(
            POLICY,
            json!({
                "default": {"budget": {"count": 1}, "strategy": {"fixed": {"initialBatch": 1}}},
                "compartments": [{
                    "name": "production",
                    "selector": {"matchLabels": {"tier": "production"}},
                    "budget": {"count": 4},
                    "strategy": {"linear": {"initialBatch": 1, "delta": 1}}
                }]
            }),
        ),
    )
    .await?;
    e2e::apply_yaml(
        &client,
        &skyhook_manifest(
            NAME,
            json!({"tier": "production"}),
            json!({"deploymentPolicy": POLICY}),
            1,
        ),
    )
    .await?;
    installed
        .wait_for_skyhook(NAME, "production matched 8, ceiling 4", |s| {
            matched_ceiling(s, "production") == (8, 4)
        })
        .await?;
    let port = installed.controller.record().metrics_port;
    let labels = [
        ("skyhook_name", NAME),
        ("policy_name", POLICY),
        ("compartment_name", "production"),
        ("strategy", "linear"),
    ];
    e2e::metrics::wait_for_metric(port, "skyhook_rollout_matched_nodes", &labels, Some(8.0))
        .await?;
    e2e::metrics::wait_for_metric(port, "skyhook_rollout_ceiling", &labels, Some(4.0)).await?;

    installed
        .wait_for_skyhook(NAME, "completed >= 1", |s| completed(s, "production") >= 1)
        .await?;
    for step in 2..=4 {
        installed
            .wait_for_skyhook(
                NAME,
                &format!("completed >= {step} with currentBatch >= {step}"),
                |s| completed(s, "production") >= step && current_batch(s, "production") >= step,
            )
            .await?;
    }
    let done = installed
        .wait_for_skyhook(NAME, "complete", |s| {
            e2e::skyhook_status(s) == Some("complete")
        })
        .await?;
    let status = compartment(&done, "production");
    assert_eq!(number(&status["completed"]), 8, "{status}");
    assert_eq!(number(&status["inProgress"]), 0, "{status}");
    assert_eq!(number(&status["progressPercent"]), 100, "{status}");
    assert_eq!(
        // Zero counters are omitted, as upstream's omitempty does.
        status["batchState"]["consecutiveFailures"]
            .as_i64()
            .unwrap_or(0),
        0,
        "{status}"
    );

    e2e::metrics::wait_for_metric(port, "skyhook_rollout_completed", &labels, Some(8.0)).await?;
    let samples = scrape(port).await?;
    let metric = |name: &str| find(&samples, name, &labels);
    assert_eq!(metric("skyhook_rollout_in_progress"), Some(0.0));
    assert_eq!(metric("skyhook_rollout_progress_percent"), Some(100.0));
    assert_eq!(metric("skyhook_rollout_consecutive_failures"), Some(0.0));
    let settled = e2e::skyhook_api(&client).get(NAME).await?;
    assert_eq!(
        metric("skyhook_rollout_current_batch"),
        Some(current_batch(&settled, "production") as f64),
        "the current_batch metric mirrors the status: {}",
        compartment(&settled, "production")
    );

    let report = sampler.finish().await?;
    assert!(report.peak(NAME, "production") >= 2, "{report:?}");
    Ok(())
}

/// multi-compartment: critical (5 nodes, count 2, exponential 1×2, failureThreshold 1),
/// standard (6 nodes, 33% → ceiling 1), test (4 nodes, 50% → ceiling 2, initialBatch 2,
/// batchThreshold 90, safetyLimit 60).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_compartment() -> anyhow::Result<()> {
    const NAME: &str = "multi-compartment";
    const POLICY: &str = "multi-policy";
    let installed = cluster(15).await?;
    let client = installed.cluster.client()?;
    let (critical, standard, test) = (nodes(1, 5), nodes(6, 11), nodes(12, 15));
    e2e::nodes::label_nodes(&client, &critical, &[("tier", "critical")]).await?;
    e2e::nodes::label_nodes(&client, &standard, &[("tier", "standard")]).await?;
    e2e::nodes::label_nodes(&client, &test, &[("tier", "test")]).await?;
    let sampler = BudgetSampler::start(
        &client,
        budget(
            NAME,
            vec![
                compartment_budget("critical", &critical, 2),
                compartment_budget("standard", &standard, 1),
                compartment_budget("test", &test, 2),
            ],
        ),
    )
    .await?;
    e2e::apply_yaml(
        &client,
        &e2e::policy_manifest(
            POLICY,
            json!({
                "default": {"budget": {"percent": 100}, "strategy": {"fixed": {"initialBatch": 1}}},
                "compartments": [
                    {
                        "name": "critical",
                        "selector": {"matchLabels": {"tier": "critical"}},
                        "budget": {"count": 2},
                        "strategy": {"exponential": {
                            "initialBatch": 1, "growthFactor": 2, "failureThreshold": 1
                        }}
                    },
                    {
                        "name": "standard",
                        "selector": {"matchLabels": {"tier": "standard"}},
                        "budget": {"percent": 33},
                        "strategy": {"linear": {"initialBatch": 1, "delta": 1}}
                    },
                    {
                        "name": "test",
                        "selector": {"matchLabels": {"tier": "test"}},
                        "budget": {"percent": 50},
                        "strategy": {"fixed": {
                            "initialBatch": 2, "batchThreshold": 90, "safetyLimit": 60
                        }}
                    }
                ]
            }),
        ),
    )
    .await?;
    e2e::apply_yaml(
        &client,
        &skyhook_manifest(
            NAME,
            json!({e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}),
            json!({"deploymentPolicy": POLICY}),
            1,
        ),
    )
    .await?;
    installed
        .wait_for_skyhook(NAME, "matched/ceiling 5/2, 6/1, 4/2", |s| {
            matched_ceiling(s, "critical") == (5, 2)
                && matched_ceiling(s, "standard") == (6, 1)
                && matched_ceiling(s, "test") == (4, 2)
        })
        .await?;
    installed
        .wait_for_skyhook(
            NAME,
            "batch 1: critical >= 1, standard >= 1, test >= 2",
            |s| {
                completed(s, "critical") >= 1
                    && completed(s, "standard") >= 1
                    && completed(s, "test") >= 2
            },
        )
        .await?;
    installed
        .wait_for_skyhook(
            NAME,
            "batch 2: critical >= 3, standard >= 2, test >= 4",
            |s| {
                completed(s, "critical") >= 3
                    && completed(s, "standard") >= 2
                    && completed(s, "test") >= 4
            },
        )
        .await?;
    let done = installed
        .wait_for_skyhook(NAME, "complete", |s| {
            e2e::skyhook_status(s) == Some("complete")
        })
        .await?;
    for (name, count) in [("critical", 5), ("standard", 6), ("test", 4)] {
        assert_eq!(
            completed(&done, name),
            count,
            "{}",
            compartment(&done, name)
        );
    }
    let report = sampler.finish().await?;
    for name in ["critical", "standard", "test"] {
        assert!(report.peak(NAME, name) >= 1, "{name}: {report:?}");
    }
    Ok(())
}

/// overlapping-selectors: `us-west` (count 2, exponential), `production` (count 2,
/// exponential), `prod-us-west` (both labels, count 1, fixed); two nodes per label combination.
/// The nodes with both labels go to prod-us-west (fixed is the safest); the first batch is one
/// node per compartment: 3 in progress, 3 waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_selectors() -> anyhow::Result<()> {
    const NAME: &str = "overlapping-selectors";
    const POLICY: &str = "overlapping-policy";
    let installed = cluster(6).await?;
    let client = installed.cluster.client()?;
    let (west, production, both) = (nodes(1, 2), nodes(3, 4), nodes(5, 6));
    e2e::nodes::label_nodes(&client, &west, &[("region", "us-west")]).await?;
    e2e::nodes::label_nodes(&client, &production, &[("env", "production")]).await?;
    e2e::nodes::label_nodes(
        &client,
        &both,
        &[("region", "us-west"), ("env", "production")],
    )
    .await?;
    let sampler = BudgetSampler::start(
        &client,
        budget(
            NAME,
            vec![
                compartment_budget("us-west", &west, 2),
                compartment_budget("production", &production, 2),
                compartment_budget("prod-us-west", &both, 1),
            ],
        ),
    )
    .await?;
    let recorder =
        e2e::Recorder::start(Api::<Node>::all(client.clone()), Default::default()).await?;
    let exponential = json!({"exponential": {"initialBatch": 1, "growthFactor": 2}});
    e2e::apply_yaml(
        &client,
        &e2e::policy_manifest(
            POLICY,
            json!({
                "default": {"budget": {"count": 1}, "strategy": {"fixed": {"initialBatch": 1}}},
                "compartments": [
                    {
                        "name": "us-west",
                        "selector": {"matchLabels": {"region": "us-west"}},
                        "budget": {"count": 2},
                        "strategy": exponential
                    },
                    {
                        "name": "production",
                        "selector": {"matchLabels": {"env": "production"}},
                        "budget": {"count": 2},
                        "strategy": exponential
                    },
                    {
                        "name": "prod-us-west",
                        "selector": {"matchLabels": {"region": "us-west", "env": "production"}},
                        "budget": {"count": 1},
                        "strategy": {"fixed": {"initialBatch": 1}}
                    }
                ]
            }),
        ),
    )
    .await?;
    e2e::apply_yaml(
        &client,
        &skyhook_manifest(
            NAME,
            json!({e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}),
            json!({"deploymentPolicy": POLICY}),
            // Long enough to see the first batch in progress.
            5,
        ),
    )
    .await?;
    installed
        .wait_for_skyhook(NAME, "matched 2 each; ceilings 2, 2, 1", |s| {
            matched_ceiling(s, "us-west") == (2, 2)
                && matched_ceiling(s, "production") == (2, 2)
                && matched_ceiling(s, "prod-us-west") == (2, 1)
        })
        .await?;

    let first_batch = recorder
        .wait_until(
            "the first batch: 3 nodes in progress, 3 waiting",
            |seen: &[Node]| first_moment_with(seen, NAME, 3, 3).is_some(),
        )
        .await?;
    let statuses = first_moment_with(&first_batch, NAME, 3, 3).unwrap_or_default();
    for (compartment, members) in [
        ("us-west", &west),
        ("production", &production),
        ("prod-us-west", &both),
    ] {
        let picked = members
            .iter()
            .filter(|n| statuses.get(*n).is_some_and(|s| s == "in_progress"))
            .count();
        assert_eq!(
            picked, 1,
            "one node of {compartment} in the first batch: {statuses:?}"
        );
    }

    installed
        .wait_for_skyhook(NAME, "complete", |s| {
            e2e::skyhook_status(s) == Some("complete")
        })
        .await?;
    let report = sampler.finish().await?;
    assert_eq!(report.peak(NAME, "prod-us-west"), 1, "{report:?}");
    Ok(())
}

/// Replays recorded Node versions in order and returns the `status_<skyhook>` label of every
/// node at the first moment when `in_progress` nodes were in progress and `waiting` waiting.
fn first_moment_with(
    seen: &[Node],
    skyhook: &str,
    in_progress: usize,
    waiting: usize,
) -> Option<BTreeMap<String, String>> {
    let mut statuses: BTreeMap<String, String> = BTreeMap::new();
    for node in seen {
        let (label, _) = e2e::nodes::node_status(node, skyhook);
        statuses.insert(
            node.metadata.name.clone().unwrap_or_default(),
            label.unwrap_or_default().to_owned(),
        );
        let count = |wanted: &str| statuses.values().filter(|s| *s == wanted).count();
        if count("in_progress") == in_progress && count("waiting") == waiting {
            return Some(statuses);
        }
    }
    None
}

/// batch-state-reset: a policy with `resetBatchStateOnCompletion: true` and an exponential
/// `tier1` compartment. A Skyhook inheriting the setting ends complete with `currentBatch == 1`;
/// one overriding it with false ends with `currentBatch > 1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_state_reset() -> anyhow::Result<()> {
    const POLICY: &str = "reset-policy";
    const INHERITS: &str = "reset-inherit";
    const KEEPS: &str = "reset-keep";
    let installed = cluster(6).await?;
    let client = installed.cluster.client()?;
    let (inherit_nodes, keep_nodes) = (nodes(1, 3), nodes(4, 6));
    e2e::nodes::label_nodes(
        &client,
        &inherit_nodes,
        &[("tier", "tier1"), ("reset", "inherit")],
    )
    .await?;
    e2e::nodes::label_nodes(
        &client,
        &keep_nodes,
        &[("tier", "tier1"), ("reset", "keep")],
    )
    .await?;
    let mut budgets = budget(
        INHERITS,
        vec![compartment_budget("tier1", &inherit_nodes, 3)],
    );
    budgets.extend(budget(
        KEEPS,
        vec![compartment_budget("tier1", &keep_nodes, 3)],
    ));
    let sampler = BudgetSampler::start(&client, budgets).await?;
    e2e::apply_yaml(
        &client,
        &e2e::policy_manifest(
            POLICY,
            json!({
                "resetBatchStateOnCompletion": true,
                "default": {"budget": {"count": 1}, "strategy": {"fixed": {"initialBatch": 1}}},
                "compartments": [{
                    "name": "tier1",
                    "selector": {"matchLabels": {"tier": "tier1"}},
                    "budget": {"count": 3},
                    "strategy": {"exponential": {"initialBatch": 1, "growthFactor": 2}}
                }]
            }),
        ),
    )
    .await?;
    e2e::apply_yaml(
        &client,
        &skyhook_manifest(
            INHERITS,
            json!({"reset": "inherit"}),
            json!({"deploymentPolicy": POLICY}),
            0,
        ),
    )
    .await?;
    e2e::apply_yaml(
        &client,
        &skyhook_manifest(
            KEEPS,
            json!({"reset": "keep"}),
            json!({
                "deploymentPolicy": POLICY,
                "deploymentPolicyOptions": {"resetBatchStateOnCompletion": false}
            }),
            0,
        ),
    )
    .await?;
    let inherited = installed
        .wait_for_skyhook(INHERITS, "complete", |s| {
            e2e::skyhook_status(s) == Some("complete")
        })
        .await?;
    let kept = installed
        .wait_for_skyhook(KEEPS, "complete", |s| {
            e2e::skyhook_status(s) == Some("complete")
        })
        .await?;
    assert_eq!(
        current_batch(&inherited, "tier1"),
        1,
        "reset on completion: {}",
        compartment(&inherited, "tier1")
    );
    assert!(
        current_batch(&kept, "tier1") > 1,
        "the override keeps the batch state: {}",
        compartment(&kept, "tier1")
    );
    let report = sampler.finish().await?;
    for skyhook in [INHERITS, KEEPS] {
        // Exponential from 1: the second batch takes the other two nodes at once.
        assert_eq!(report.peak(skyhook, "tier1"), 2, "{skyhook}: {report:?}");
    }
    Ok(())
}

/// A failing batch stops the rollout (beyond §6.2, the failure half of the strategy rules):
/// fixed batches of 1 with `failureThreshold: 1` and a package that exits 1. The first node
/// fails, the batch is evaluated as failed while less than `safetyLimit` of the nodes are done,
/// and the compartment stops: `shouldStop`, the should_stop metric, and no other node picked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_stops_the_rollout() -> anyhow::Result<()> {
    const NAME: &str = "failure-stop";
    const POLICY: &str = "failure-policy";
    let installed = e2e::install_with(e2e::Setup::agentless(4).single_attempt()).await?;
    let client = installed.cluster.client()?;
    e2e::apply_yaml(
        &client,
        &e2e::policy_manifest(
            POLICY,
            json!({
                "default": {
                    "budget": {"count": 1},
                    "strategy": {"fixed": {
                        "initialBatch": 1, "failureThreshold": 1, "safetyLimit": 50
                    }}
                }
            }),
        ),
    )
    .await?;
    let mut skyhook: Value = serde_json::from_str(&skyhook_manifest(
        NAME,
        json!({e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}),
        json!({"deploymentPolicy": POLICY}),
        0,
    ))?;
    skyhook["spec"]["packages"]["agentless"]["env"] =
        json!([{"name": "EXIT_CODE", "value": "1"}, {"name": "SLEEP_LEN", "value": "0"}]);
    e2e::apply_yaml(&client, &skyhook.to_string()).await?;
    let stopped = installed
        .wait_for_skyhook(NAME, "the default compartment to stop", |s| {
            compartment(s, "__default__")["batchState"]["shouldStop"] == json!(true)
        })
        .await?;
    let state = &compartment(&stopped, "__default__")["batchState"];
    assert_eq!(number(&state["consecutiveFailures"]), 1, "{state}");
    let port = installed.controller.record().metrics_port;
    let labels = [
        ("skyhook_name", NAME),
        ("policy_name", POLICY),
        ("compartment_name", "__default__"),
        ("strategy", "fixed"),
    ];
    e2e::metrics::wait_for_metric(port, "skyhook_rollout_should_stop", &labels, Some(1.0)).await?;
    let api: Api<Node> = Api::all(client.clone());
    let statuses: Vec<String> = api
        .list(&Default::default())
        .await?
        .items
        .iter()
        .map(|node| {
            e2e::nodes::node_status(node, NAME)
                .0
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| *s == "erroring").count(),
        1,
        "only the first batch's node ran: {statuses:?}"
    );
    Ok(())
}
