//! Issue #17 item 6 on a devcluster: a DeploymentPolicy's health gate holds the second batch
//! while a node of the first batch is NotReady. Two nodes, one per batch, settle 40 s. Once the
//! first node is complete it goes away as a dead machine does; the Skyhook (and `kubectl
//! skyhook status`) names it as the node that holds the batch, and the second node does not
//! start before the first is back and has settled.

use std::time::Duration;

use devcluster::node::Heartbeat;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::json;
use skyhook_api::keys;
use skyhook_api::v1alpha1::Skyhook;

use e2e::{Kubectl, Recorder, Setup};

use crate::skyhook_reads;

const SKYHOOK: &str = "gated";
const POLICY: &str = "careful";
const NODES: [&str; 2] = ["node-1", "node-2"];

fn policy() -> String {
    e2e::policy_manifest(
        POLICY,
        json!({
            "default": {"budget": {"count": 1}, "strategy": {"fixed": {"initialBatch": 1}}},
            "healthGate": {"settle": "40s"},
        }),
    )
}

fn skyhook() -> String {
    let spec = json!({
        "nodeSelectors": {"matchLabels": {"skyhook.nvidia.com/test-node": "skyhooke2e"}},
        "deploymentPolicy": POLICY,
        "packages": {
            "quick": {
                "version": "1.0.0",
                "image": "ghcr.io/nvidia/skyhook/agentless",
                "env": [{"name": "SLEEP_LEN", "value": "2"}]
            }
        }
    });
    e2e::skyhook_manifest(SKYHOOK, spec, json!({}))
}

fn condition(skyhook: &Skyhook) -> Option<String> {
    skyhook_reads::true_condition_message(skyhook, keys::SKYHOOK.condition_health_gate_held)
}

fn is_ours(skyhook: &Skyhook) -> bool {
    skyhook.metadata.name.as_deref() == Some(SKYHOOK)
}

/// The node of the first batch, once it is complete and the gate holds the second.
fn first_batch(seen: &[Skyhook]) -> Option<&'static str> {
    seen.iter().filter(|s| is_ours(s)).find_map(|s| {
        let complete = NODES
            .into_iter()
            .find(|n| skyhook_reads::status_of_node(s, n) == Some("complete"))?;
        condition(s).map(|_| complete)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_ready_node_holds_the_next_batch() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup {
        // A dead node turns NotReady within seconds, well inside the 40 s settle.
        heartbeat: Heartbeat {
            lease_renew_interval: Duration::from_secs(2),
            node_monitor_grace_period: Duration::from_secs(12),
        },
        ..Setup::agentless(NODES.len())
    })
    .await?;
    let client = installed.cluster.client()?;
    let skyhooks = Recorder::start(
        Api::<Skyhook>::all(client.clone()),
        watcher::Config::default(),
    )
    .await?;
    e2e::apply_yaml(&client, &policy()).await?;
    e2e::apply_yaml(&client, &skyhook()).await?;

    let settling = skyhooks
        .wait_until(
            "the first batch complete and the gate holding the second",
            |seen| first_batch(seen).is_some(),
        )
        .await?;
    let first = first_batch(&settling).unwrap_or(NODES[0]);
    let second = NODES.into_iter().find(|n| *n != first).unwrap_or(NODES[1]);
    installed.cluster.node_down(first).await?;

    let held_by = format!("held by node {first}, which is NotReady");
    skyhooks
        .wait_until("the gate held by the NotReady node", |seen| {
            seen.iter()
                .any(|s| is_ours(s) && condition(s).is_some_and(|m| m.contains(&held_by)))
        })
        .await?;
    let kubectl = Kubectl::with_plugin(&installed)?;
    let text = kubectl.skyhook(&["status", SKYHOOK]).await?;
    assert!(
        text.contains("held by the health gate") && text.contains(&held_by),
        "{text}"
    );

    installed.cluster.node_up(first).await?;
    installed.wait_for_status(SKYHOOK, "complete").await?;
    let seen: Vec<Skyhook> = skyhooks.seen().into_iter().filter(is_ours).collect();
    let last_not_ready = seen
        .iter()
        .rposition(|s| condition(s).is_some_and(|m| m.contains(&held_by)));
    let second_started = seen.iter().position(|s| {
        matches!(
            skyhook_reads::status_of_node(s, second),
            Some("in_progress" | "complete")
        )
    });
    assert!(
        matches!((last_not_ready, second_started), (Some(held), Some(started)) if started > held),
        "{second} started (state #{second_started:?}) while {first} held the gate (last #{last_not_ready:?})"
    );
    Ok(())
}
