//! `spec.readinessGates` on a devcluster: two nodes, one at a time, a package that reboots,
//! gated on a `GpuHealthy` node condition with a 30 s timeout. The first node rebooted and
//! finished its packages, yet stays cordoned and `in_progress` while the second waits; past
//! the timeout it is `erroring`, still cordoned, and `kubectl skyhook status` says which gate
//! holds it. The test then plays the validator: it sets `GpuHealthy=True` on the node, which
//! completes and is uncordoned; the second node is held in turn and released the same way.

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;
use skyhook_api::keys;
use skyhook_api::v1alpha1::Skyhook;

use e2e::{Kubectl, Recorder, Setup, nodes};

use crate::skyhook_reads;

const SKYHOOK: &str = "gpu-gated";
const NODES: [&str; 2] = ["node-1", "node-2"];
const GATE: &str = "GpuHealthy";

fn skyhook() -> String {
    let spec = json!({
        "nodeSelectors": {"matchLabels": {"skyhook.nvidia.com/test-node": "skyhooke2e"}},
        "interruptionBudget": {"count": 1},
        "readinessGates": [{"conditionType": GATE, "timeout": "30s"}],
        "packages": {
            "driver": {
                "version": "1.0.0",
                "image": "ghcr.io/nvidia/skyhook/agentless",
                "interrupt": {"type": "reboot"},
                "env": [{"name": "SLEEP_LEN", "value": "1"}]
            }
        }
    });
    e2e::skyhook_manifest(SKYHOOK, spec, json!({}))
}

fn held(skyhook: &Skyhook) -> Option<String> {
    skyhook_reads::true_condition_message(skyhook, keys::SKYHOOK.condition_readiness_gate_held)
}

fn is_ours(skyhook: &Skyhook) -> bool {
    skyhook.metadata.name.as_deref() == Some(SKYHOOK)
}

/// The node a Skyhook state names as held by the gate.
fn held_node(skyhook: &Skyhook) -> Option<&'static str> {
    let message = held(skyhook)?;
    NODES
        .into_iter()
        .find(|n| message.contains(&format!("node {n} waits for {GATE}")))
}

/// The package finished on `node` (its last stage complete) while the node is cordoned.
fn finished_but_cordoned(node: &Node) -> bool {
    let stages = nodes::stages(node, SKYHOOK);
    !stages.is_empty()
        && stages.values().all(|(_, state)| state == "complete")
        && nodes::is_cordoned(node)
}

/// Plays the validator: `GpuHealthy=True`, transitioned now.
async fn report_healthy(client: &kube::Client, node: &str) -> anyhow::Result<()> {
    let now = Time(jiff::Timestamp::now());
    let patch = json!({"status": {"conditions": [{
        "type": GATE,
        "status": "True",
        "reason": "DiagnosticsPassed",
        "message": "dcgmi diag -r 3 passed",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }]}});
    Api::<Node>::all(client.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .with_context(|| format!("setting {GATE} on node {node}"))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebooted_node_returns_only_when_its_health_condition_says_so() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(NODES.len())).await?;
    let client = installed.cluster.client()?;
    let skyhooks = Recorder::start(
        Api::<Skyhook>::all(client.clone()),
        watcher::Config::default(),
    )
    .await?;
    e2e::apply_yaml(&client, &skyhook()).await?;

    let first = skyhooks
        .wait_until("the gate holding the first node after its reboot", |seen| {
            seen.iter().any(|s| is_ours(s) && held_node(s).is_some())
        })
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    let first = first
        .iter()
        .filter(|s| is_ours(s))
        .find_map(held_node)
        .context("a held node")?;
    let second = NODES.into_iter().find(|n| *n != first).unwrap_or(NODES[1]);
    let node = nodes::wait_for_node(&client, first, "finished, cordoned and in_progress", |n| {
        finished_but_cordoned(n) && nodes::has_status(n, SKYHOOK, "in_progress")
    })
    .await?;
    assert_eq!(
        nodes::node_condition(&node, &keys::SKYHOOK.node_not_ready_condition(SKYHOOK)),
        Some(("True", "Incomplete")),
        "a held node is not Ready for the Skyhook"
    );

    // Past the 30 s timeout: erroring, still cordoned, and said so.
    nodes::wait_for_node(&client, first, "erroring and still cordoned", |n| {
        nodes::has_status(n, SKYHOOK, "erroring") && nodes::is_cordoned(n)
    })
    .await?;
    let timed_out = skyhooks
        .wait_until("the condition saying the gate timed out", |seen| {
            seen.iter().any(|s| {
                is_ours(s)
                    && s.status.as_ref().is_some_and(|st| {
                        st.conditions.iter().any(|c| {
                            c.type_ == keys::SKYHOOK.condition_readiness_gate_held
                                && c.reason == keys::READINESS_GATE_TIMED_OUT_REASON
                        })
                    })
            })
        })
        .await?;
    let message = timed_out
        .iter()
        .rev()
        .filter(|s| is_ours(s))
        .find_map(held)
        .unwrap_or_default();
    assert!(
        message.contains(&format!(
            "node {first} waits for {GATE} (not reported) timed out at"
        )),
        "{message}"
    );
    let second_node: Node = Api::<Node>::all(client.clone()).get(second).await?;
    assert!(
        !nodes::is_cordoned(&second_node) && nodes::stages(&second_node, SKYHOOK).is_empty(),
        "{second} waits while {first} holds the only slot: {}",
        nodes::skyhook_keys(&second_node)
    );
    let kubectl = Kubectl::with_plugin(&installed)?;
    let text = kubectl.skyhook(&["status", SKYHOOK]).await?;
    assert!(
        text.contains("nodes held by readiness gates")
            && text.contains(&format!("node {first} waits for {GATE}")),
        "{text}"
    );

    // The validator reports the node healthy: it completes and returns to the scheduler.
    report_healthy(&client, first).await?;
    nodes::wait_for_node(&client, first, "complete and uncordoned", |n| {
        nodes::has_status(n, SKYHOOK, "complete") && !nodes::is_cordoned(n)
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;

    // The second node is held in turn, and released before its timeout.
    nodes::wait_for_node(&client, second, "finished and held", |n| {
        finished_but_cordoned(n) && nodes::has_status(n, SKYHOOK, "in_progress")
    })
    .await?;
    report_healthy(&client, second).await?;
    installed.wait_for_status(SKYHOOK, "complete").await?;
    let last: Node = Api::<Node>::all(client.clone()).get(second).await?;
    assert!(!nodes::is_cordoned(&last), "{}", nodes::skyhook_keys(&last));
    assert_eq!(
        last.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&keys::SKYHOOK.ready_gate_annotation(SKYHOOK))),
        None,
        "the gate's record goes once the node completes"
    );
    Ok(())
}
