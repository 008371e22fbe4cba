//! Deleting a Skyhook whose package keeps failing, step by step as upstream's own scenario does
//! it, with two other Skyhooks that interrupt the same nodes.
//!
//! `stall` has `aa` and `bb` (which depends on `aa` and has a ConfigMap). It completes on both
//! nodes, rolls a config change out, then is edited so that `bb` fails on every attempt
//! (`EXIT_CODE=2`, a 46 s `gracefulShutdown`, its ConfigMap changed once more) while `aa`'s
//! image carries an inline tag. With `bb` crash-looping, one node's `nodeState_stall` is deleted
//! by hand, so its packages run again and `bb`'s apply crash-loops there too. Meanwhile `other`
//! (complete, earlier priority) gets a config change that needs a service restart, and `third`
//! (a new Skyhook, earlier priority) asks for one too: both need the nodes free of package pods.
//!
//! Then `kubectl delete skyhook stall`: within a minute the Skyhook is gone, none of its pods
//! is left, its node keys are gone, and `other` and `third` complete with the nodes
//! uncordoned. Before the fix the deletion never ended: the failing pods kept rewriting the
//! node state the cleanup removed, and they held every other Skyhook's interrupt for good.

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use serde_json::{Value, json};

use e2e::Setup;
use e2e::nodes::{self, is_cordoned, node_state_key, stages, wait_for_node};
use e2e::pods::NAMESPACE;

const STALL: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: stall
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  packages:
    aa:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      env:
        - {name: SLEEP_LEN, value: "1"}
    bb:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {aa: "1.2.3"}
      env:
        - {name: SLEEP_LEN, value: "1"}
      configMap:
        settings.conf: |
          level=1
"#;

const OTHER: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: other
spec:
  priority: 100
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  packages:
    tuned:
      version: "2.0.0"
      image: ghcr.io/nvidia/skyhook/agentless
      configInterrupts:
        tuned.conf: {type: service, services: [tuned]}
      env:
        - {name: SLEEP_LEN, value: "1"}
      configMap:
        tuned.conf: |
          profile=a
"#;

const THIRD: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: third
spec:
  priority: 150
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  packages:
    driver:
      version: "1.0.0"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: service, services: [containerd]}
      env:
        - {name: SLEEP_LEN, value: "1"}
"#;

const NODES: [&str; 2] = ["node-1", "node-2"];

/// How long the deletion may take, once asked for (upstream's own test allows 30 s).
const DELETION_DEADLINE: Duration = Duration::from_secs(60);

/// The node's entry for `key` of `skyhook`: `(stage, state, restarts)`.
fn entry(node: &Node, skyhook: &str, key: &str) -> Option<(String, String, u64)> {
    let state = nodes::node_state(node, skyhook).ok()?;
    let entry = state.get(key)?;
    Some((
        entry["stage"].as_str()?.to_owned(),
        entry["state"].as_str()?.to_owned(),
        entry["restarts"].as_u64().unwrap_or(0),
    ))
}

/// `bb` failed at `stage` on `node` after at least one restart of its pod.
fn bb_crash_looping(node: &Node, stage: &str) -> bool {
    entry(node, "stall", "bb|1.2.3")
        .is_some_and(|(at, state, restarts)| at == stage && state == "erroring" && restarts > 0)
}

async fn stall_pods(client: &kube::Client) -> anyhow::Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let listed = pods
        .list(&ListParams::default().labels("skyhook.nvidia.com/name=stall"))
        .await
        .context("listing the pods of stall")?;
    Ok(listed.items)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_skyhook_whose_package_keeps_failing() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(2)).await?;
    let client = installed.cluster.client()?;
    e2e::apply_yaml(&client, OTHER).await?;
    e2e::apply_yaml(&client, STALL).await?;
    installed.wait_settled("other").await?;
    installed.wait_settled("stall").await?;

    // A config change rolled out.
    let level_two = json!({"spec": {"packages": {"bb": {
        "configMap": {"settings.conf": "level=2\n"}
    }}}});
    e2e::merge_patch_skyhook(&client, "stall", &level_two).await?;
    installed.wait_settled("stall").await?;

    // bb now fails on every attempt, its config changed once more; aa's image has an inline tag.
    let failing = json!({"spec": {"packages": {
        "aa": {"image": "ghcr.io/nvidia/skyhook/agentless:1.2.3"},
        "bb": {
            "env": [{"name": "EXIT_CODE", "value": "2"}, {"name": "SLEEP_LEN", "value": "1"}],
            "gracefulShutdown": "46s",
            "configMap": {"settings.conf": "level=3\n"}
        }
    }}});
    e2e::merge_patch_skyhook(&client, "stall", &failing).await?;
    installed.wait_for_status("stall", "erroring").await?;
    wait_for_node(&client, "node-1", "bb crash-looping in config", |node| {
        bb_crash_looping(node, "config")
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;

    let skyhooks_api = e2e::skyhook_api(&client);
    // node-2's node state deleted by hand: its packages run again, and bb's apply crash-loops.
    let nodes_api: Api<Node> = Api::all(client.clone());
    let forget = json!({"metadata": {"annotations": {node_state_key("stall"): Value::Null}}});
    nodes_api
        .patch("node-2", &PatchParams::default(), &Patch::Merge(&forget))
        .await
        .context("deleting node-2's nodeState_stall")?;
    let rerun = wait_for_node(&client, "node-2", "bb crash-looping in apply", |node| {
        bb_crash_looping(node, "apply")
    })
    .await;
    if let Err(error) = rerun {
        let status = skyhooks_api
            .get("stall")
            .await
            .map(|s| s.data["status"].clone());
        return Err(error.context(format!(
            "stall's status: {status:?}\n{}",
            installed.controller_log_tail(40)
        )));
    }

    // Two other Skyhooks now need to interrupt the same nodes.
    let tuned_b = json!({"spec": {"packages": {"tuned": {
        "configMap": {"tuned.conf": "profile=b\n"}
    }}}});
    e2e::merge_patch_skyhook(&client, "other", &tuned_b).await?;
    e2e::apply_yaml(&client, THIRD).await?;

    // The deletion.
    let skyhooks = skyhooks_api;
    skyhooks
        .delete("stall", &DeleteParams::default())
        .await
        .context("deleting Skyhook stall")?;
    let asked = tokio::time::Instant::now();
    e2e::within(
        "Skyhook stall to be gone",
        DELETION_DEADLINE,
        await_condition(skyhooks.clone(), "stall", |o: Option<&DynamicObject>| {
            o.is_none()
        }),
    )
    .await
    .with_context(|| installed.controller_log_tail(60))?;
    eprintln!(
        "Skyhook stall gone {:?} after its deletion",
        asked.elapsed()
    );
    loop {
        let left = stall_pods(&client).await?;
        if left.is_empty() {
            eprintln!("its last pod gone {:?} after its deletion", asked.elapsed());
            break;
        }
        anyhow::ensure!(
            asked.elapsed() < DELETION_DEADLINE,
            "pods of the deleted Skyhook left after {DELETION_DEADLINE:?}: {:?}",
            e2e::pods::placements(&left)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Upstream's cleanup keeps a non-empty node state and its version marker (the markers of
    // packages without an uninstall); every other key of the Skyhook goes.
    let markers = [
        node_state_key("stall"),
        "skyhook.nvidia.com/version_stall".to_owned(),
    ];
    for node in NODES {
        let found = nodes_api.get(node).await?;
        let left: Vec<&String> = (found.metadata.annotations.iter().flatten())
            .chain(found.metadata.labels.iter().flatten())
            .map(|(key, _)| key)
            .filter(|key| key.starts_with("skyhook.nvidia.com/") && key.ends_with("_stall"))
            .filter(|key| !markers.contains(key))
            .collect();
        let conditions = nodes::skyhook_keys(&found);
        assert!(
            left.is_empty() && !conditions.contains("skyhook.nvidia.com/stall/"),
            "{node} keeps keys of the deleted Skyhook: {left:?}; {conditions}"
        );
    }

    // The Skyhooks that waited for the nodes finish, and leave them schedulable.
    installed.wait_settled("other").await?;
    installed.wait_settled("third").await?;
    for node in NODES {
        let found = wait_for_node(&client, node, "uncordoned", |n| !is_cordoned(n)).await?;
        let other = stages(&found, "other");
        assert_eq!(
            other.get("tuned|2.0.0").map(|(_, state)| state.as_str()),
            Some("complete"),
            "{node}: {other:?}"
        );
    }
    Ok(())
}
