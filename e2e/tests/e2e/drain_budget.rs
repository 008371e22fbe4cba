//! A drain that a PodDisruptionBudget refuses: the controller cordons the node, its evictions are
//! refused (HTTP 429), and past the drain timeout the Skyhook says which pod and budget block it,
//! while the node stays cordoned. Once the budget is gone the pod is evicted, the service
//! interrupt runs, and the node is uncordoned.
//!
//! This also proves the controller does not sit inside kube's own 429 retries (up to ~15 minutes):
//! the `DrainBlocked` condition can only be written by a reconcile loop that is still turning.

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use serde_json::json;

use e2e::WAIT;

const NODE: &str = "node-1";
const NAMESPACE: &str = "default";
const GUARDED_POD: &str = "protected";
const BUDGET: &str = "guard";
const SKYHOOK: &str = "drain";
/// Generous waits for a loaded 2-core machine; every wait ends as soon as its condition holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_blocks_the_drain_until_it_is_removed() -> anyhow::Result<()> {
    let installed = e2e::install_with_env(1, &[("DRAIN_TIMEOUT", "3s")]).await?;
    let client = installed.cluster.client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NAMESPACE);
    let nodes: Api<Node> = Api::all(client.clone());

    e2e::pods::guard_with_budget(&client, NAMESPACE, NODE, GUARDED_POD, BUDGET).await?;

    let skyhook: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "Skyhook",
        "metadata": {"name": SKYHOOK},
        "spec": {
            "nodeSelectors": {"matchLabels": {"kubernetes.io/hostname": NODE}},
            "packages": {
                "restarter": {
                    "version": "1.1.1",
                    "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
                    "interrupt": {"type": "service", "services": ["cron"]}
                }
            }
        }
    }))?;
    e2e::skyhook_api(&client)
        .patch(SKYHOOK, &PatchParams::apply("e2e"), &Patch::Apply(&skyhook))
        .await
        .context("applying the Skyhook")?;

    e2e::within(
        "the node to be cordoned",
        WAIT,
        await_condition(nodes.clone(), NODE, |node: Option<&Node>| {
            node.is_some_and(|n| unschedulable(n) == Some(true))
        }),
    )
    .await?;
    let blocked = e2e::within(
        "the Skyhook to report the blocked drain",
        WAIT,
        await_condition(
            e2e::skyhook_api(&client),
            SKYHOOK,
            |skyhook: Option<&DynamicObject>| skyhook.and_then(drain_blocked).is_some(),
        ),
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    let message = blocked
        .as_ref()
        .and_then(drain_blocked)
        .context("the DrainBlocked condition vanished")?;
    assert!(
        message.contains(GUARDED_POD) && message.contains(BUDGET),
        "the condition names the blocking pod and budget: {message}"
    );
    // Upstream v0.20's condition, beside ours: the refusal is a wait, reported at once.
    let upstream = e2e::wait_for_skyhook(
        &client,
        SKYHOOK,
        "the upstream DrainBlocked condition",
        |s| {
            s.data["status"]["conditions"]
                .as_array()
                .is_some_and(|conditions| {
                    conditions.iter().any(|c| {
                        c["type"] == "DrainBlocked"
                            && c["status"] == "True"
                            && c["reason"] == "PodDisruptionBudget"
                    })
                })
        },
    )
    .await?;
    let upstream_message = upstream.data["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "DrainBlocked"))
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        upstream_message
            .starts_with("1/1 nodes blocked draining (node-1); default/protected on node-1: "),
        "{upstream_message}"
    );
    assert!(
        pods.get_opt(GUARDED_POD).await?.is_some(),
        "the budget protects the pod"
    );
    assert_eq!(
        unschedulable(&nodes.get(NODE).await?),
        Some(true),
        "a blocked drain keeps the node cordoned"
    );

    budgets.delete(BUDGET, &DeleteParams::default()).await?;
    e2e::wait_for_skyhook_status(&client, SKYHOOK, "complete", WAIT)
        .await
        .with_context(|| installed.controller_log_tail(40))?;

    let leftover = pods.get_opt(GUARDED_POD).await?;
    assert!(
        leftover
            .as_ref()
            .is_none_or(|pod| pod.metadata.deletion_timestamp.is_some()),
        "the pod was evicted once the budget was gone: {leftover:?}"
    );
    assert_ne!(
        unschedulable(&nodes.get(NODE).await?),
        Some(true),
        "the node is uncordoned when the Skyhook completes"
    );
    let journal = installed
        .cluster
        .node(NODE)
        .context("node handle")?
        .journal()?;
    assert!(
        journal
            .iter()
            .any(|line| line.ends_with("systemctl restart cron")),
        "the service interrupt restarted cron: {journal:?}"
    );
    Ok(())
}

/// The message of a True `skyhook.nvidia.com/DrainBlocked` condition.
fn drain_blocked(skyhook: &DynamicObject) -> Option<String> {
    skyhook.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "skyhook.nvidia.com/DrainBlocked" && c["status"] == "True")
        .and_then(|c| c["message"].as_str())
        .map(str::to_owned)
}

fn unschedulable(node: &Node) -> Option<bool> {
    node.spec.as_ref().and_then(|spec| spec.unschedulable)
}
