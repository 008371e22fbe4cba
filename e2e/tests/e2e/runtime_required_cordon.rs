//! `runtimeRequiredCordonAfter` (upstream v0.19) and the reboot reset that keeps the cordon
//! (v0.20), on one light devcluster node with `REAPPLY_ON_REBOOT=true`:
//!
//! - removing the runtime-required taint cordons the node in the same write and marks it
//!   `runtimeRequiredCordon`, with the Events' upstream reason and action;
//! - a reboot resets the node's state in one patch that puts the taint back while the node
//!   stays cordoned; the re-run removes the taint again and leaves the runtime-required cordon
//!   (that the reset keeps the Skyhook's own `cordon_` is a plan test: a complete node's own
//!   cordon is released before a reboot could be timed against it);
//! - a node uncordoned by someone who left the annotation loses the annotation.

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;

use e2e::nodes::{add_taint, has_status, is_cordoned, taints, wait_for_node};
use e2e::{Setup, wait_for_skyhook_status};

const NODE: &str = "node-1";
const NAME: &str = "runtime-cordon";
const RUNTIME_REQUIRED: &str = "skyhook.nvidia.com=runtime-required:NoSchedule";
const RR_CORDON: &str = "skyhook.nvidia.com/runtimeRequiredCordon";

const SKYHOOK: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: runtime-cordon
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  runtimeRequired: true
  runtimeRequiredCordonAfter: true
  autoTaintNewNodes: true
  packages:
    spencer:
      version: "1.2"
      image: ghcr.io/nvidia/skyhook/agentless
      env: [{name: SLEEP_LEN, value: "1"}]
"#;

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn boot_id(node: &Node) -> Option<String> {
    Some(node.status.as_ref()?.node_info.as_ref()?.boot_id.clone())
}

fn tainted(node: &Node) -> bool {
    taints(node).iter().any(|t| t == RUNTIME_REQUIRED)
}

/// Whether the node carries the runtime-required cordon: cordoned and marked.
fn rr_cordoned(node: &Node) -> bool {
    is_cordoned(node) && annotation(node, RR_CORDON) == Some("true")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_taint_removal_cordons_and_a_reboot_keeps_the_cordon() -> anyhow::Result<()> {
    let mut setup = Setup::agentless(1);
    setup.controller_env = BTreeMap::from([("REAPPLY_ON_REBOOT".to_owned(), "true".to_owned())]);
    let installed = e2e::install_with(setup).await?;
    let client = installed.cluster.client()?;
    let nodes: Api<Node> = Api::all(client.clone());
    let history = e2e::Recorder::start(nodes.clone(), watcher::Config::default()).await?;
    add_taint(&client, NODE, RUNTIME_REQUIRED).await?;

    e2e::apply_yaml(&client, SKYHOOK).await?;
    wait_for_skyhook_status(&client, NAME, "complete", e2e::WAIT)
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    wait_for_node(
        &client,
        NODE,
        "the taint removed and the node cordoned",
        |n| !tainted(n) && rr_cordoned(n),
    )
    .await?;
    let seen = history.seen();
    let first_untainted = seen
        .iter()
        .skip_while(|n| !tainted(n))
        .find(|n| !tainted(n))
        .context("the node was never seen tainted then untainted")?;
    assert!(
        rr_cordoned(first_untainted),
        "the taint went without the cordon: the same write must do both"
    );
    // Events are published off the reconcile's path: wait for them, do not race them.
    let expected = [("Apply", "ApplyPackage"), ("State", "MarkComplete")];
    let deadline = tokio::time::Instant::now() + e2e::WAIT;
    loop {
        let events = Api::<Event>::all(client.clone())
            .list(&ListParams::default())
            .await?;
        let pairs: Vec<(Option<String>, Option<String>)> = (events.items.iter())
            .map(|e| (e.reason.clone(), e.action.clone()))
            .collect();
        let missing: Vec<_> = (expected.iter())
            .filter(|(reason, action)| {
                !pairs.contains(&(Some((*reason).to_owned()), Some((*action).to_owned())))
            })
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no Event {missing:?} in {pairs:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }

    let before = boot_id(&nodes.get(NODE).await?).context("no boot ID")?;
    let seen_before = history.seen().len();
    installed
        .cluster
        .node(NODE)
        .context("node-1 is not in the cluster")?
        .reboot()
        .await?;
    let after_reboot = |n: &Node| boot_id(n).is_some_and(|id| id != before);
    history
        .wait_until("the reboot reset to put the taint back", |seen| {
            seen[seen_before..]
                .iter()
                .any(|n| after_reboot(n) && tainted(n))
        })
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    let seen = history.seen();
    let retainted = seen[seen_before..]
        .iter()
        .find(|n| after_reboot(n) && tainted(n))
        .context("seen above")?;
    assert!(
        rr_cordoned(retainted),
        "the reboot reset leaves the runtime-required cordon"
    );

    let done = wait_for_node(&client, NODE, "the re-run complete", |n| {
        after_reboot(n) && has_status(n, NAME, "complete") && !tainted(n)
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    assert!(rr_cordoned(&done), "the runtime-required cordon stays");
    let events = Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    assert!(
        events
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("Reboot")
                && e.action.as_deref() == Some("ResetNodeState")),
        "no Reboot/ResetNodeState Event"
    );

    // Uncordoned by someone who left the annotation: the annotation goes.
    let patch = json!({"spec": {"unschedulable": false}});
    nodes
        .patch(NODE, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    wait_for_node(&client, NODE, "the stale annotation removed", |n| {
        !is_cordoned(n) && annotation(n, RR_CORDON).is_none()
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    Ok(())
}
