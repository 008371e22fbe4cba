//! Issue #17 item 5 on a devcluster: under `FLEET_BUDGET=1`, two Skyhooks whose own budgets
//! (50% of two nodes each) would cordon two nodes at once never have more than one node
//! cordoned at any moment a Node watch delivered. A node left cordoned by another Skyhook
//! holds the fleet budget: both Skyhooks wait, say so in their status and in
//! `kubectl skyhook status`, and go on once it is released.

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;
use skyhook_api::keys;
use skyhook_api::v1alpha1::Skyhook;

use e2e::{Kubectl, Recorder, Setup};

/// The node another Skyhook (one this controller no longer plans) left cordoned.
const HELD: &str = "node-4";
const SKYHOOKS: [&str; 2] = ["fleet-a", "fleet-b"];

fn skyhook(name: &str, group: &str) -> String {
    let spec = json!({
        "nodeSelectors": {"matchLabels": {"group": group}},
        "interruptionBudget": {"percent": 50},
        "packages": {
            "restarter": {
                "version": "1.0.0",
                "image": "ghcr.io/nvidia/skyhook/agentless",
                "env": [{"name": "SLEEP_LEN", "value": "1"}],
                "interrupt": {"type": "service", "services": ["cron"]}
            }
        }
    });
    e2e::skyhook_manifest(name, spec, json!({}))
}

async fn set_foreign_cordon(client: &kube::Client, cordoned: bool) -> anyhow::Result<()> {
    let key = keys::SKYHOOK.cordon_annotation("earlier");
    let value = cordoned.then_some("true");
    let patch = json!({
        "metadata": {"annotations": {key: value}},
        "spec": {"unschedulable": cordoned},
    });
    Api::<Node>::all(client.clone())
        .patch(HELD, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("setting the cordon of {HELD} to {cordoned}"))?;
    Ok(())
}

fn name(skyhook: &Skyhook) -> &str {
    skyhook.metadata.name.as_deref().unwrap_or_default()
}

fn waits_for_fleet(skyhook: &Skyhook) -> bool {
    skyhook
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .any(|c| c.type_ == keys::SKYHOOK.condition_fleet_budget_wait && c.status == "True")
}

/// Whether the latest version seen of each Skyhook satisfies `check`.
fn latest_all(seen: &[Skyhook], check: impl Fn(&Skyhook) -> bool) -> bool {
    SKYHOOKS.iter().all(|want| {
        seen.iter()
            .rev()
            .find(|s| name(s) == *want)
            .is_some_and(&check)
    })
}

/// The most nodes unschedulable at once, replaying the Node watch in the order it delivered.
fn most_cordoned(seen: &[Node]) -> Vec<String> {
    let mut unschedulable = BTreeMap::new();
    let mut most = Vec::new();
    for node in seen {
        let name = node.metadata.name.clone().unwrap_or_default();
        let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        unschedulable.insert(name, cordoned);
        let now: Vec<String> = unschedulable
            .iter()
            .filter(|(_, c)| **c)
            .map(|(n, _)| n.clone())
            .collect();
        if now.len() > most.len() {
            most = now;
        }
    }
    most
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_skyhooks_under_a_fleet_budget_of_one_node() -> anyhow::Result<()> {
    let mut setup = Setup::agentless(4);
    setup
        .controller_env
        .insert("FLEET_BUDGET".into(), "1".into());
    let installed = e2e::install_with(setup).await?;
    let client = installed.cluster.client()?;
    e2e::nodes::label_nodes(&client, ["node-1", "node-2"], &[("group", "a")]).await?;
    e2e::nodes::label_nodes(&client, ["node-3", HELD], &[("group", "b")]).await?;
    set_foreign_cordon(&client, true).await?;

    let all = watcher::Config::default();
    let nodes = Recorder::start(Api::<Node>::all(client.clone()), all.clone()).await?;
    let skyhooks = Recorder::start(Api::<Skyhook>::all(client.clone()), all).await?;
    e2e::apply_yaml(&client, &skyhook(SKYHOOKS[0], "a")).await?;
    e2e::apply_yaml(&client, &skyhook(SKYHOOKS[1], "b")).await?;

    skyhooks
        .wait_until(
            "both Skyhooks to say they wait for the fleet budget",
            |seen| latest_all(seen, waits_for_fleet),
        )
        .await?;
    let kubectl = Kubectl::with_plugin(&installed)?;
    let text = kubectl.skyhook(&["status", SKYHOOKS[0]]).await?;
    assert!(
        text.contains("waiting for the fleet budget") && text.contains("FLEET_BUDGET=1"),
        "{text}"
    );
    assert_eq!(
        most_cordoned(&nodes.seen()),
        [HELD],
        "only the held node is cordoned"
    );

    set_foreign_cordon(&client, false).await?;
    for skyhook in SKYHOOKS {
        installed.wait_for_status(skyhook, "complete").await?;
    }
    skyhooks
        .wait_until(
            "both Skyhooks to stop waiting for the fleet budget",
            |seen| latest_all(seen, |s| !waits_for_fleet(s)),
        )
        .await?;

    let seen = nodes.seen();
    let most = most_cordoned(&seen);
    assert_eq!(most.len(), 1, "nodes cordoned at once: {most:?}");
    for skyhook in SKYHOOKS {
        let cordon = keys::SKYHOOK.cordon_annotation(skyhook);
        let cordoned = seen.iter().any(|n| {
            n.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(&cordon))
        });
        assert!(cordoned, "{skyhook} cordoned its nodes");
    }
    Ok(())
}
