//! The CLI suite's lifecycle, reset and deployment-policy verbs (spec §6.4) through the real
//! `kubectl`, on four light nodes:
//!
//! - `rolling` rolls one agentless package over node-1..3, one node per batch, under a policy
//!   that keeps its batch state on completion. `pause`/`resume`/`disable`/`enable` set and
//!   remove the annotations (`resume` leaves `disable`); `reset --skip-batch-reset` on the
//!   disabled Skyhook removes the node state but keeps the batch; `deployment-policy reset`
//!   brings `currentBatch` back to 1; enabled again, the Skyhook runs everything again.
//! - `drained` has a service interrupt on node-4, whose drain a PodDisruptionBudget blocks, so
//!   the node stays cordoned by it. Disabled and then `reset`, its node state is gone, the
//!   status annotation becomes `disabled` again, and the node, which the Skyhook still selects,
//!   keeps its cordon and cordon annotation for the next run to release (upstream's reset since
//!   its v0.5.0 plugin), which the output says.

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use e2e::Kubectl;
use e2e::nodes::{is_cordoned, node_state_key, status_key, wait_for_node};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

use crate::cli_support::agentless_skyhook;

const ROLLING: &str = "rolling";
const ROLLING_NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const GROUP_LABEL: &str = "e2e.skyhook/group";
const POLICY: &str = "one-at-a-time";
const DRAINED: &str = "drained";
const DRAINED_NODE: &str = "node-4";
const PAUSE: &str = "skyhook.nvidia.com/pause";
const DISABLE: &str = "skyhook.nvidia.com/disable";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_reset_and_policy_verbs() -> anyhow::Result<()> {
    let installed = e2e::install_with(e2e::Setup::agentless(4)).await?;
    let client = installed.cluster.client()?;
    let kubectl = Kubectl::with_plugin(&installed)?;

    e2e::nodes::label_nodes(&client, ROLLING_NODES, &[(GROUP_LABEL, ROLLING)]).await?;
    let policy = e2e::policy_manifest(
        POLICY,
        json!({
            "default": {"budget": {"count": 1}, "strategy": {"fixed": {"initialBatch": 1}}},
            "resetBatchStateOnCompletion": false,
        }),
    );
    e2e::apply_yaml(&client, &policy).await?;
    let rolling = agentless_skyhook(
        ROLLING,
        json!({GROUP_LABEL: ROLLING}),
        &[("SLEEP_LEN", "1")],
        json!({"deploymentPolicy": POLICY}),
    );
    e2e::apply_yaml(&client, &rolling).await?;
    let skyhook = installed.wait_for_status(ROLLING, "complete").await?;
    let batch = current_batch(&skyhook);
    ensure!(
        batch > 1,
        "three one-node batches should leave currentBatch past 1: {}",
        skyhook.data["status"]
    );

    lifecycle(&kubectl, &client).await?;
    reset_keeping_the_batch(&installed, &kubectl, &client, batch).await?;
    reset_a_drained_node(&installed, &kubectl, &client).await?;
    Ok(())
}

/// The Skyhook's annotations.
async fn annotations(
    client: &kube::Client,
    name: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let skyhook = e2e::skyhook_api(client).get(name).await?;
    Ok(skyhook.metadata.annotations.unwrap_or_default())
}

async fn lifecycle(kubectl: &Kubectl, client: &kube::Client) -> anyhow::Result<()> {
    // (command, what it prints, pause annotation after it, disable annotation after it)
    let steps = [
        ("pause", "Skyhook \"rolling\" paused", Some("true"), None),
        (
            "pause",
            "Skyhook \"rolling\" is already paused",
            Some("true"),
            None,
        ),
        (
            "disable",
            "Skyhook \"rolling\" disabled",
            Some("true"),
            Some("true"),
        ),
        ("resume", "Skyhook \"rolling\" resumed", None, Some("true")),
        ("enable", "Skyhook \"rolling\" enabled", None, None),
    ];
    for (verb, printed, pause, disable) in steps {
        // Resume and enable do not ask (as upstream's), so scripts call them without --confirm.
        let args: &[&str] = match verb {
            "resume" | "enable" => &[verb, ROLLING],
            _ => &[verb, ROLLING, "--confirm"],
        };
        let out = kubectl.skyhook(args).await?;
        ensure!(out.contains(printed), "{verb}: {out}");
        let annotations = annotations(client, ROLLING).await?;
        assert_eq!(
            (
                annotations.get(PAUSE).map(String::as_str),
                annotations.get(DISABLE).map(String::as_str)
            ),
            (pause, disable),
            "after {verb}: {annotations:?}"
        );
    }
    // A dry run says what it would do and changes nothing.
    let out = kubectl.skyhook(&["pause", ROLLING, "--dry-run"]).await?;
    ensure!(out.contains("[dry-run] Would pause"), "{out}");
    ensure!(
        !annotations(client, ROLLING).await?.contains_key(PAUSE),
        "a dry run paused the Skyhook"
    );
    Ok(())
}

async fn reset_keeping_the_batch(
    installed: &e2e::Installed,
    kubectl: &Kubectl,
    client: &kube::Client,
    batch: i64,
) -> anyhow::Result<()> {
    kubectl.skyhook(&["disable", ROLLING, "-y"]).await?;
    let out = kubectl
        .skyhook(&["reset", ROLLING, "--skip-batch-reset", "-y"])
        .await?;
    ensure!(out.contains("resetting node state on 3 node(s)"), "{out}");
    ensure!(!out.contains("Batch state"), "{out}");
    let state_key = node_state_key(ROLLING);
    for node in ROLLING_NODES {
        wait_for_node(client, node, "the node state to be gone", |n| {
            !has_annotation(n, &state_key)
        })
        .await?;
    }
    let skyhook = e2e::skyhook_api(client).get(ROLLING).await?;
    assert_eq!(
        current_batch(&skyhook),
        batch,
        "--skip-batch-reset changed the batch: {}",
        skyhook.data["status"]
    );

    let dry = kubectl
        .skyhook(&["dp", "reset", ROLLING, "--dry-run"])
        .await?;
    ensure!(
        dry.contains("Compartments: 1 total, 1 with batch state"),
        "{dry}"
    );
    ensure!(
        dry.contains(&format!("__default__: current batch {batch}")),
        "{dry}"
    );
    let out = kubectl
        .skyhook(&["deployment-policy", "reset", ROLLING, "-y"])
        .await?;
    ensure!(
        out.contains("Batch state of Skyhook \"rolling\" reset"),
        "{out}"
    );
    let api = e2e::skyhook_api(client);
    e2e::wait_for(&api, ROLLING, "currentBatch back to 1", |s| {
        current_batch(s) == 1
    })
    .await?;

    // Enabled again, the Skyhook starts over on every node, batch after batch.
    installed.wait_for_status(ROLLING, "disabled").await?;
    kubectl.skyhook(&["enable", ROLLING, "-y"]).await?;
    let skyhook = installed.wait_for_status(ROLLING, "complete").await?;
    ensure!(
        current_batch(&skyhook) > 1,
        "the rerun went through no batch: {}",
        skyhook.data["status"]
    );
    for node in ROLLING_NODES {
        let node = Api::<Node>::all(client.clone()).get(node).await?;
        ensure!(has_annotation(&node, &state_key), "{node:?}");
    }
    Ok(())
}

async fn reset_a_drained_node(
    installed: &e2e::Installed,
    kubectl: &Kubectl,
    client: &kube::Client,
) -> anyhow::Result<()> {
    e2e::pods::guard_with_budget(client, "default", DRAINED_NODE, "guarded", "guard").await?;
    let drained = agentless_skyhook(
        DRAINED,
        json!({"kubernetes.io/hostname": DRAINED_NODE}),
        &[("SLEEP_LEN", "0")],
        json!({}),
    );
    // A service interrupt makes the operator cordon and drain the node first.
    let mut drained: Value = serde_json::from_str(&drained)?;
    drained["spec"]["packages"][crate::cli_support::PACKAGE]["interrupt"] =
        json!({"type": "service", "services": ["cron"]});
    e2e::apply_yaml(client, &drained.to_string()).await?;

    let cordon_key = format!("skyhook.nvidia.com/cordon_{DRAINED}");
    wait_for_node(client, DRAINED_NODE, "the drain's cordon", |n| {
        is_cordoned(n) && has_annotation(n, &cordon_key)
    })
    .await
    .with_context(|| format!("controller log:\n{}", installed.controller_log_tail(30)))?;

    kubectl.skyhook(&["disable", DRAINED, "-y"]).await?;
    let status = status_key(DRAINED);
    wait_for_node(client, DRAINED_NODE, "status_drained disabled", |n| {
        annotation(n, &status) == Some("disabled")
    })
    .await?;

    let out = kubectl.skyhook(&["reset", DRAINED, "-y"]).await?;
    ensure!(
        out.contains(&format!("  - {DRAINED_NODE} (1 packages)")),
        "{out}"
    );
    ensure!(
        out.contains(&format!(
            "Node \"{DRAINED_NODE}\" keeps the cordon of Skyhook \"{DRAINED}\""
        )),
        "{out}"
    );
    let state_key = node_state_key(DRAINED);
    let node = wait_for_node(
        client,
        DRAINED_NODE,
        "node state gone, cordon kept, status disabled again",
        |n| {
            !has_annotation(n, &state_key)
                && has_annotation(n, &cordon_key)
                && annotation(n, &status) == Some("disabled")
        },
    )
    .await?;
    ensure!(
        is_cordoned(&node),
        "reset uncordoned {DRAINED_NODE}; only `kubectl uncordon` should"
    );
    Ok(())
}

fn annotation<'n>(node: &'n Node, key: &str) -> Option<&'n str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn has_annotation(node: &Node, key: &str) -> bool {
    annotation(node, key).is_some()
}

/// `currentBatch` of the default compartment's batch state (-1 when absent).
fn current_batch(skyhook: &DynamicObject) -> i64 {
    skyhook.data["status"]["compartmentStatuses"]["__default__"]["batchState"]["currentBatch"]
        .as_i64()
        .unwrap_or(-1)
}
