//! A name moving from `skyhook.nvidia.com` to `nodewright.nvidia.com` on a devcluster: a
//! Skyhook whose package restarts a service completes on a node; a NodeWright of the same
//! name and spec is then applied, as upstream's mirror or a GitOps repository would.
//! - the NodeWright takes the work over without one stage Job of its own and without the node
//!   ever turning unschedulable again, and ends `complete` with the Skyhook's node state under
//!   its own keys, marked as adopted by its uid;
//! - the Skyhook says it is inert (`Migrated=True`, `OwnedByTwin`);
//! - with `LEGACY_CLEANUP_DELAY=0s` the Skyhook's keys are pruned from the node;
//! - deleting the Skyhook finishes at once, writes nothing to the node and starts no Job, and
//!   the NodeWright's `legacy-migrated-at` stamp goes once nothing of the Skyhook is left.

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::wait::{await_condition, conditions::is_deleted};
use serde_json::json;
use skyhook_api::generation::{Group, migrated_at_annotation};
use skyhook_api::keys::{self, NODEWRIGHT, SKYHOOK};
use skyhook_api::nodewright_v1alpha1::NodeWright;
use skyhook_api::v1alpha1::Skyhook;

const NODE: &str = "node-1";
const NAME: &str = "gpu";

fn spec() -> serde_json::Value {
    json!({
        "nodeSelectors": {"matchLabels": {e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}},
        "packages": {"tuning": {
            "version": "1.0.0",
            "image": "ghcr.io/nvidia/skyhook/agentless",
            "interrupt": {"type": "service", "services": ["containerd"]},
        }},
    })
}

/// The keys of `keys`'s group for `gpu` on `node`, with the group prefix cut off, but the
/// adoption marker and the transition times (stamped as each object saw its stages change).
fn name_keys(node: &Node, keys: &keys::Keys) -> BTreeMap<String, String> {
    let prefix = format!("{}/", keys.group);
    (node.metadata.annotations.iter().flatten())
        .filter(|(key, _)| keys.is_skyhook_node_key(key, NAME))
        .filter(|(key, _)| {
            **key != keys.adopted_by_annotation(NAME) && **key != keys.stage_times_annotation(NAME)
        })
        .map(|(key, value)| (key.trim_start_matches(&prefix).to_owned(), value.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodewright_takes_over_a_complete_skyhook_without_running_a_step() -> anyhow::Result<()> {
    let installed = e2e::install_serving_both_groups(e2e::Setup {
        controller_env: BTreeMap::from([("LEGACY_CLEANUP_DELAY".to_owned(), "0s".to_owned())]),
        ..e2e::Setup::agentless(1)
    })
    .await?;
    let client = installed.cluster.client()?;
    let log = || installed.controller_log_tail(60);

    e2e::apply_yaml(&client, &e2e::skyhook_manifest(NAME, spec(), json!({}))).await?;
    e2e::wait_for_skyhook_status(&client, NAME, "complete", e2e::WAIT)
        .await
        .with_context(|| format!("the Skyhook; controller log tail:\n{}", log()))?;
    let nodes: Api<Node> = Api::all(client.clone());
    let before = name_keys(&nodes.get(NODE).await?, &SKYHOOK);
    ensure!(
        before.get("status_gpu").map(String::as_str) == Some("complete"),
        "{before:?}"
    );
    let jobs: Api<Job> = Api::namespaced(client.clone(), "skyhook");
    let nodewright_jobs =
        ListParams::default().labels(&format!("{}={NAME}", NODEWRIGHT.name_label));

    let recorder = e2e::record_node(&client, NODE).await?;
    let nodewright = json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": {"name": NAME},
        "spec": spec(),
    });
    e2e::apply_yaml(&client, &nodewright.to_string()).await?;
    let nodewrights: Api<NodeWright> = Api::all(client.clone());
    let adopter = e2e::wait_for_nodewright_status(&nodewrights, NAME, "complete")
        .await
        .with_context(|| format!("controller log tail:\n{}", log()))?;
    let skyhooks: Api<Skyhook> = Api::all(client.clone());
    let inert = e2e::wait_for(&skyhooks, NAME, "the Skyhook to say it is inert", |s| {
        (s.status.iter().flat_map(|s| &s.conditions)).any(|c| {
            c.type_ == keys::CONDITION_MIGRATED
                && c.status == "True"
                && c.reason == keys::MIGRATED_REASON_OWNED_BY_TWIN
        })
    })
    .await
    .with_context(|| format!("controller log tail:\n{}", log()))?;
    ensure!(
        (inert.status.iter().flat_map(|s| &s.conditions)).any(|c| c
            .message
            .contains("NodeWright gpu (nodewright.nvidia.com) does the work")),
        "{:?}",
        inert.status
    );

    // The Skyhook's keys are pruned (no rollback window here); the NodeWright's hold its state.
    let pruned = recorder
        .wait_until("the Skyhook's keys to be pruned", |seen| {
            seen.last()
                .is_some_and(|node| name_keys(node, &SKYHOOK).is_empty())
        })
        .await
        .with_context(|| format!("controller log tail:\n{}", log()))?;
    let node = pruned.last().context("a node version")?;
    ensure!(
        name_keys(node, &NODEWRIGHT) == before,
        "the NodeWright's keys are the Skyhook's, moved: {:?} vs {before:?}",
        node.metadata.annotations
    );
    let marker = (node.metadata.annotations.as_ref())
        .and_then(|a| a.get(&NODEWRIGHT.adopted_by_annotation(NAME)));
    ensure!(
        marker == adopter.metadata.uid.as_ref(),
        "adopted by the NodeWright's uid: {marker:?}"
    );
    ensure!(
        recorder
            .seen()
            .iter()
            .all(|n| (n.spec.as_ref()).and_then(|s| s.unschedulable) != Some(true)),
        "the node is never cordoned by the takeover"
    );
    ensure!(
        jobs.list(&nodewright_jobs).await?.items.is_empty(),
        "the NodeWright runs no stage"
    );

    // Deleting the inert Skyhook lets it go at once and touches nothing.
    let uid = inert.metadata.uid.clone().context("a uid")?;
    let versions_before = recorder.seen().len();
    skyhooks.delete(NAME, &DeleteParams::default()).await?;
    e2e::within(
        "the inert Skyhook to be deleted",
        e2e::WAIT,
        await_condition(skyhooks.clone(), NAME, is_deleted(&uid)),
    )
    .await
    .with_context(|| format!("controller log tail:\n{}", log()))?;
    let stamp = migrated_at_annotation(Group::NodeWright);
    e2e::wait_for(&nodewrights, NAME, "the migration stamp to go", |n| {
        !(n.metadata.annotations.iter().flatten()).any(|(key, _)| *key == stamp)
    })
    .await
    .with_context(|| format!("controller log tail:\n{}", log()))?;
    let node = nodes.get(NODE).await?;
    ensure!(
        name_keys(&node, &NODEWRIGHT) == before,
        "the node keeps the NodeWright's state: {:?}",
        node.metadata.annotations
    );
    ensure!(
        recorder.seen()[versions_before..]
            .iter()
            .all(|n| name_keys(n, &NODEWRIGHT) == before),
        "deleting the twin changed the NodeWright's node state"
    );
    ensure!(
        jobs.list(&nodewright_jobs).await?.items.is_empty(),
        "still no stage of the NodeWright"
    );
    let nodewright = nodewrights.get(NAME).await?;
    ensure!(
        (nodewright.status.as_ref())
            .and_then(|s| s.status)
            .map(|s| s.to_string())
            .as_deref()
            == Some("complete"),
        "{:?}",
        nodewright.status
    );
    Ok(())
}
