//! `spec.drainConfig` (upstream v0.18-v0.20) on a devcluster of three nodes, before a service
//! interrupt:
//! - node-1 runs a pod no controller owns; with `force: false` it blocks the drain, named in the
//!   `DrainBlocked` condition (reason `UnmanagedPod`) and the node's `drainBlocked_` annotation;
//! - node-3 runs a pod a PodDisruptionBudget protects: its eviction is refused, which is a wait
//!   (`PodDisruptionBudget`), while the other nodes go on; once the budget is gone it completes;
//! - node-2 was cordoned by someone else: it is drained without a cordon annotation of ours,
//!   its evicted pod (which ignores SIGTERM for its grace period) is waited for until it is gone
//!   before the interrupt runs, and the node stays cordoned afterwards;
//! - finally a `timeout` turns node-1 `erroring`, still cordoned, with a `Drain` Warning Event.

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::conditions::is_pod_running;
use kube::runtime::wait::await_condition;
use serde_json::{Value, json};

use e2e::WAIT;

const NAMESPACE: &str = "default";
const SKYHOOK: &str = "drain-config";
const UNMANAGED: &str = "lonely";
const SLOW: &str = "slow";
const PROTECTED: &str = "protected";
const BUDGET: &str = "guard";
const OWNER: &str = "workload-owner";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_config_blocks_waits_and_times_out_as_upstream() -> anyhow::Result<()> {
    let installed = e2e::install(3).await?;
    let client = installed.cluster.client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let nodes: Api<Node> = Api::all(client.clone());

    // A controller every managed pod points at: any existing object keeps the garbage
    // collector away, and the drain only looks for a controller reference.
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let owner = owners
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": OWNER}}))?,
        )
        .await
        .context("creating the owner ConfigMap")?;
    let owner_uid = owner.metadata.uid.clone().unwrap_or_default();
    let controlled = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": OWNER, "uid": owner_uid, "controller": true
    }]);

    start_pod(
        &pods,
        UNMANAGED,
        "node-1",
        json!({"containers": [sleep()]}),
        None,
    )
    .await?;
    start_pod(
        &pods,
        SLOW,
        "node-2",
        json!({
            "terminationGracePeriodSeconds": 15,
            "containers": [{
                "name": "work",
                "image": "devcluster.local/shell",
                "args": ["trap '' TERM; while true; do sleep 0.2; done"]
            }]
        }),
        Some(controlled.clone()),
    )
    .await?;
    start_pod(
        &pods,
        PROTECTED,
        "node-3",
        json!({"containers": [sleep()]}),
        Some(controlled),
    )
    .await?;
    guard(&client).await?;
    nodes
        .patch(
            "node-2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .context("cordoning node-2 as an administrator would")?;

    e2e::apply_yaml(
        &client,
        &e2e::skyhook_manifest(
            SKYHOOK,
            json!({"packages": {
                "restarter": {
                    "version": "1.1.1",
                    "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
                    "interrupt": {"type": "service", "services": ["cron"]}
                }
            }}),
            json!({"drainConfig": {"force": false}}),
        ),
    )
    .await?;

    // node-2: the evicted pod is waited for while it ignores SIGTERM.
    let evicted = e2e::wait_for(&pods, SLOW, "pod slow to be evicted", |pod| {
        pod.metadata.deletion_timestamp.is_some()
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    ensure!(evicted.metadata.deletion_timestamp.is_some());
    // Until its containers stopped (the grace period ran out), the pod is not gone.
    while pods.get_opt(SLOW).await?.is_some_and(|pod| {
        pod.status
            .and_then(|s| s.phase)
            .is_some_and(|phase| phase == "Running" || phase == "Pending")
    }) {
        let interrupts = interrupt_pods(&client, "node-2").await?;
        ensure!(
            interrupts.is_empty(),
            "the interrupt started while the evicted pod was still terminating: {interrupts:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let node2 = e2e::nodes::wait_for_node(&client, "node-2", "node-2 complete", |node| {
        e2e::nodes::has_status(node, SKYHOOK, "complete")
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    ensure!(
        unschedulable(&node2),
        "a node cordoned by someone else stays cordoned"
    );
    ensure!(
        !annotations(&node2)
            .keys()
            .any(|k| k.starts_with("skyhook.nvidia.com/cordon_")),
        "no cordon annotation is written on a foreign cordon: {:?}",
        annotations(&node2)
    );

    // node-1 and node-3 are blocked: one condition naming both, one annotation on each node.
    let skyhook = e2e::wait_for_skyhook(&client, SKYHOOK, "DrainBlocked with both causes", |s| {
        condition(s, "DrainBlocked").is_some_and(|c| c["reason"] == "MultipleCauses")
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    let message = condition(&skyhook, "DrainBlocked")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    for expected in [
        "2/3 nodes blocked draining (node-1, node-3)",
        "default/lonely on node-1: UnmanagedPod",
        "default/protected on node-3: ",
    ] {
        ensure!(message.contains(expected), "{expected:?} in {message}");
    }
    for (node, pod, reason) in [
        ("node-1", UNMANAGED, "UnmanagedPod"),
        ("node-3", PROTECTED, "PodDisruptionBudget"),
    ] {
        let found = nodes.get(node).await?;
        let node_annotations = annotations(&found);
        let blocked: Value = serde_json::from_str(
            node_annotations
                .get(&format!("skyhook.nvidia.com/drainBlocked_{SKYHOOK}"))
                .with_context(|| format!("{node} has no drainBlocked annotation"))?,
        )?;
        ensure!(
            blocked[0]["namespace"] == NAMESPACE
                && blocked[0]["name"] == pod
                && blocked[0]["reason"] == reason,
            "{node}: {blocked}"
        );
        ensure!(
            node_annotations.contains_key(&format!("skyhook.nvidia.com/drainStart_{SKYHOOK}")),
            "{node} has a drain start"
        );
        ensure!(unschedulable(&found), "{node} stays cordoned while blocked");
    }
    ensure!(
        pods.get_opt(UNMANAGED).await?.is_some(),
        "force: false leaves the unmanaged pod"
    );

    // The budget goes: node-3 is drained on its next try (at most 30 s later) and completes.
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NAMESPACE);
    budgets.delete(BUDGET, &DeleteParams::default()).await?;
    checks_complete(&client, "node-3").await?;
    let skyhook = e2e::wait_for_skyhook(&client, SKYHOOK, "DrainBlocked by node-1 alone", |s| {
        condition(s, "DrainBlocked").is_some_and(|c| c["reason"] == "UnmanagedPod")
    })
    .await?;
    let message = condition(&skyhook, "DrainBlocked")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default();
    ensure!(
        message == "1/3 nodes blocked draining (node-1); default/lonely on node-1: UnmanagedPod",
        "{message}"
    );
    let node3 = nodes.get("node-3").await?;
    ensure!(
        !unschedulable(&node3)
            && !annotations(&node3)
                .keys()
                .any(|k| k.starts_with("skyhook.nvidia.com/drain")),
        "node-3 is uncordoned and its drain keys are gone: {:?}",
        annotations(&node3)
    );

    // A timeout: node-1's drain started long ago, so it times out at once.
    e2e::merge_patch_skyhook(
        &client,
        SKYHOOK,
        &json!({"spec": {"drainConfig": {"force": false, "timeout": "1s"}}}),
    )
    .await?;
    e2e::wait_for(&nodes, "node-1", "node-1 to turn erroring", |node| {
        node.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(&format!("skyhook.nvidia.com/status_{SKYHOOK}")))
            .is_some_and(|s| s == "erroring")
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    ensure!(
        unschedulable(&nodes.get("node-1").await?),
        "a timed-out drain leaves the node cordoned"
    );
    ensure!(pods.get_opt(UNMANAGED).await?.is_some());
    e2e::wait_for_skyhook_status(&client, SKYHOOK, "erroring", WAIT).await?;
    let events: Api<Event> = Api::all(client.clone());
    let timed_out = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Drain"))
        .filter_map(|e| e.message)
        .find(|m| {
            m.contains("drain timed out after [1s] for node [node-1] package [restarter:1.1.1]")
        });
    ensure!(
        timed_out.is_some(),
        "a Drain Warning Event says the drain timed out"
    );
    Ok(())
}

fn sleep() -> Value {
    json!({"name": "work", "image": "devcluster.local/sleep"})
}

/// Starts pod `name` on `node` with `spec` (and `owners`), and waits until it runs.
async fn start_pod(
    pods: &Api<Pod>,
    name: &str,
    node: &str,
    mut spec: Value,
    owners: Option<Value>,
) -> anyhow::Result<()> {
    spec["nodeName"] = json!(node);
    spec["automountServiceAccountToken"] = json!(false);
    if spec.get("terminationGracePeriodSeconds").is_none() {
        spec["terminationGracePeriodSeconds"] = json!(1);
    }
    let mut metadata = json!({"name": name, "labels": {"app": name}});
    if let Some(owners) = owners {
        metadata["ownerReferences"] = owners;
    }
    let pod: Pod = serde_json::from_value(json!({"metadata": metadata, "spec": spec}))?;
    pods.create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("creating pod {name} on {node}"))?;
    e2e::within(
        &format!("pod {name} to run"),
        WAIT,
        await_condition(pods.clone(), name, is_pod_running()),
    )
    .await?;
    Ok(())
}

/// A PodDisruptionBudget that allows no eviction of the protected pod.
async fn guard(client: &kube::Client) -> anyhow::Result<()> {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NAMESPACE);
    let guard: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": BUDGET},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": PROTECTED}}}
    }))?;
    budgets.create(&PostParams::default(), &guard).await?;
    e2e::wait_for(&budgets, BUDGET, "the budget to allow no disruption", |b| {
        b.status
            .as_ref()
            .is_some_and(|s| s.current_healthy == 1 && s.disruptions_allowed == 0)
    })
    .await?;
    Ok(())
}

/// The Skyhook's interrupt pods on `node`.
async fn interrupt_pods(client: &kube::Client, node: &str) -> anyhow::Result<Vec<String>> {
    let pods: Api<Pod> = Api::all(client.clone());
    let listed = pods
        .list(&ListParams::default().labels(&format!(
            "skyhook.nvidia.com/name={SKYHOOK},skyhook.nvidia.com/interrupt=True"
        )))
        .await?;
    Ok(listed
        .items
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .filter_map(|p| p.metadata.name)
        .collect())
}

async fn checks_complete(client: &kube::Client, node: &str) -> anyhow::Result<()> {
    e2e::checks::wait_for_complete_node(client, node, SKYHOOK)
        .await
        .with_context(|| format!("{node} completes"))?;
    Ok(())
}

fn condition<'a>(skyhook: &'a kube::api::DynamicObject, type_: &str) -> Option<&'a Value> {
    skyhook.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == "True")
}

fn annotations(node: &Node) -> BTreeMap<String, String> {
    node.metadata.annotations.clone().unwrap_or_default()
}

fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|spec| spec.unschedulable)
        .unwrap_or(false)
}
