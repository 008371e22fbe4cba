//! Upstream's core scenarios about taints and ordering (spec §6.1 items 13–16), on light
//! devcluster nodes with the `agentless` image as package and agent:
//!
//! - taint-scheduling: a taint the Skyhook does not tolerate blocks the node until it does;
//! - runtime-required: the runtime-required taint is removed node by node as each completes;
//! - auto-taint-new-nodes: a node with no skyhook annotations is tainted, a processed one is not;
//! - strict-order: priority gates each node on its own; paused Skyhooks block their successors,
//!   disabled ones do not.

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use serde_json::json;

use e2e::nodes::{
    add_taint, has_status, node_status, remove_taint, taints, wait_for_node, wait_for_nodes,
};
use e2e::{Setup, merge_patch_skyhook, wait_for_skyhook_status};

const NODE: &str = "node-1";
const OTHER_NODE: &str = "node-2";
const RUNTIME_REQUIRED: &str = "skyhook.nvidia.com=runtime-required:NoSchedule";
const TEST_BLOCK: &str = "test-block=true:NoSchedule";

/// A Skyhook selecting the test nodes with one `agentless` package `spencer` (or `foobar` for
/// strict-order) sleeping `sleep` seconds per stage; `extra_spec` and `annotations` are merged in.
fn skyhook_yaml(
    name: &str,
    package: &str,
    sleep: u32,
    extra_spec: &str,
    annotations: &str,
) -> String {
    format!(
        r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
{extra_spec}
  packages:
    {package}:
      version: "1.2"
      image: ghcr.io/nvidia/skyhook/agentless
      env: [{{name: SLEEP_LEN, value: "{sleep}"}}]
"#
    )
}

fn condition_status(skyhook: &DynamicObject, type_: &str) -> Option<String> {
    skyhook.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .map(str::to_owned)
}

/// taint-scheduling: `nvidia.com/gpu:NoSchedule` blocks the node (label, annotation, Skyhook
/// status, `TaintNotTolerable`, the blocked count metric) until the Skyhook tolerates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intolerable_taint_blocks_until_tolerated() -> anyhow::Result<()> {
    const NAME: &str = "taint-scheduling";
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let port = installed.metrics_port();
    add_taint(&client, NODE, "nvidia.com/gpu:NoSchedule").await?;
    e2e::apply_yaml(&client, &skyhook_yaml(NAME, "spencer", 1, "", "")).await?;

    let skyhook = wait_for_skyhook_status(&client, NAME, "blocked", e2e::WAIT)
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    assert_eq!(
        condition_status(&skyhook, "skyhook.nvidia.com/TaintNotTolerable").as_deref(),
        Some("True")
    );
    assert_eq!(
        skyhook.data["status"]["nodeStatus"],
        json!({NODE: "blocked"})
    );
    wait_for_node(&client, NODE, "the node to be blocked", |n| {
        has_status(n, NAME, "blocked")
    })
    .await?;
    let blocked = [("skyhook_name", NAME), ("status", "blocked")];
    e2e::metrics::wait_for_metric(port, "skyhook_node_status_count", &blocked, Some(1.0)).await?;

    let tolerate = json!({"spec": {"additionalTolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]}});
    merge_patch_skyhook(&client, NAME, &tolerate).await?;
    let skyhook = wait_for_skyhook_status(&client, NAME, "complete", e2e::WAIT)
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    assert_eq!(
        condition_status(&skyhook, "skyhook.nvidia.com/TaintNotTolerable").as_deref(),
        Some("False")
    );
    wait_for_node(&client, NODE, "the node to complete", |n| {
        has_status(n, NAME, "complete")
    })
    .await?;
    e2e::metrics::wait_for_metric(port, "skyhook_node_status_count", &blocked, Some(0.0)).await?;
    Ok(())
}

/// runtime-required: both nodes carry the runtime-required taint and node-2 also an
/// intolerable one. node-1 completes and loses its taint while node-2 keeps both; once
/// node-2's blocking taint goes, it completes and loses the runtime-required taint too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_required_taint_is_removed_per_node() -> anyhow::Result<()> {
    const NAME: &str = "runtime-required";
    let installed = e2e::install_with(Setup::agentless(2)).await?;
    let client = installed.cluster.client()?;
    for node in [NODE, OTHER_NODE] {
        add_taint(&client, node, RUNTIME_REQUIRED).await?;
    }
    add_taint(&client, OTHER_NODE, TEST_BLOCK).await?;
    let spec = "  runtimeRequired: true";
    e2e::apply_yaml(&client, &skyhook_yaml(NAME, "spencer", 1, spec, "")).await?;

    let nodes = wait_for_nodes(
        &client,
        "node-1 untainted while node-2 is blocked",
        |nodes| {
            let (Some(first), Some(second)) = (nodes.get(NODE), nodes.get(OTHER_NODE)) else {
                return false;
            };
            has_status(first, NAME, "complete")
                && !taints(first).iter().any(|t| t == RUNTIME_REQUIRED)
                && has_status(second, NAME, "blocked")
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    let second_taints = taints(&nodes[OTHER_NODE]);
    assert!(
        second_taints.iter().any(|t| t == RUNTIME_REQUIRED),
        "node-2 keeps the runtime-required taint while blocked: {second_taints:?}"
    );

    remove_taint(&client, OTHER_NODE, TEST_BLOCK).await?;
    wait_for_node(&client, OTHER_NODE, "node-2 to complete untainted", |n| {
        has_status(n, NAME, "complete") && taints(n).is_empty()
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    wait_for_skyhook_status(&client, NAME, "complete", e2e::WAIT).await?;
    Ok(())
}

/// auto-taint-new-nodes: a node without skyhook annotations gets the runtime-required taint
/// (and the `autoTaint_` annotation) from a runtimeRequired+autoTaintNewNodes Skyhook, which
/// then completes and removes it. A second such Skyhook does not taint the processed node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_new_nodes_are_auto_tainted() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let nodes: Api<Node> = Api::all(client.clone());
    let history = e2e::Recorder::start(nodes, watcher::Config::default()).await?;
    let spec = "  runtimeRequired: true\n  autoTaintNewNodes: true";
    let tainted = |node: &Node| taints(node).iter().any(|t| t == RUNTIME_REQUIRED);

    e2e::apply_yaml(
        &client,
        &skyhook_yaml("auto-taint-new-nodes", "spencer", 2, spec, ""),
    )
    .await?;
    history
        .wait_until("the new node to be auto-tainted", |seen| {
            seen.iter().any(|node| {
                tainted(node)
                    && node.metadata.annotations.as_ref().is_some_and(|a| {
                        a.get("skyhook.nvidia.com/autoTaint_skyhook.nvidia.com")
                            .is_some_and(|v| v == "true")
                    })
            })
        })
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    wait_for_skyhook_status(&client, "auto-taint-new-nodes", "complete", e2e::WAIT).await?;
    wait_for_node(&client, NODE, "the taint to be removed", |n| !tainted(n)).await?;

    let seen_before = history.seen().len();
    e2e::apply_yaml(
        &client,
        &skyhook_yaml("auto-taint-second", "spencer", 2, spec, ""),
    )
    .await?;
    wait_for_skyhook_status(&client, "auto-taint-second", "complete", e2e::WAIT)
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    let retainted: Vec<Vec<String>> = history.seen()[seen_before..]
        .iter()
        .filter(|node| tainted(node))
        .map(taints)
        .collect();
    assert!(
        retainted.is_empty(),
        "the processed node was tainted again: {retainted:?}"
    );
    Ok(())
}

const ZZZ: &str = "strict-order-skyhook-zzz";
const B: &str = "strict-order-skyhook-b";
const C: &str = "strict-order-skyhook-c";
const D: &str = "strict-order-skyhook-d";

/// strict-order: zzz (priority 1), b (2, paused), c (2) and d (2, disabled) on two nodes,
/// node-2 blocked by a taint. node-1 finishes zzz and stops at the paused b while node-2 is
/// blocked at zzz. Unpausing b and untainting node-2 together lets node-1 run priority 2 while
/// node-2 still runs zzz: ordering is per node. Everything but the disabled d completes.
/// A paused Skyhook gives every one of its nodes the status `paused` (spec §2.5), upstream and
/// here alike: b's `skyhook_status{status="paused"}` is 1 (upstream's assertion) and its
/// `skyhook_node_status_count{status="paused"}` is 2, node-2 included though it is blocked at zzz.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priorities_gate_each_node_on_its_own() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(2)).await?;
    let client = installed.cluster.client()?;
    let port = installed.metrics_port();
    add_taint(&client, OTHER_NODE, TEST_BLOCK).await?;
    let interrupt = "      interrupt: {type: service, services: [cron]}\n";
    let with_interrupt = |yaml: String| {
        yaml.replace(
            "      version: \"1.2\"\n",
            &format!("{interrupt}      version: \"1.2\"\n"),
        )
    };
    let skyhooks = [
        with_interrupt(skyhook_yaml(ZZZ, "foobar", 3, "  priority: 1", "")),
        with_interrupt(skyhook_yaml(
            B,
            "foobar",
            5,
            "  priority: 2",
            "skyhook.nvidia.com/pause: \"true\"",
        )),
        skyhook_yaml(C, "foobar", 5, "  priority: 2", ""),
        skyhook_yaml(
            D,
            "foobar",
            5,
            "  priority: 2",
            "skyhook.nvidia.com/disable: \"true\"",
        ),
    ];
    e2e::apply_yaml(&client, &skyhooks.join("---\n")).await?;

    for name in [ZZZ, B, C, D] {
        let target = [("skyhook_name", name)];
        e2e::metrics::wait_for_metric(port, "skyhook_node_target_count", &target, Some(2.0))
            .await?;
    }
    let status = |name, status| [("skyhook_name", name), ("status", status)];
    e2e::metrics::wait_for_metric(port, "skyhook_status", &status(D, "disabled"), Some(1.0))
        .await?;
    e2e::metrics::wait_for_metric(port, "skyhook_status", &status(B, "paused"), Some(1.0)).await?;

    wait_for_nodes(&client, "node-1 past zzz, node-2 blocked at zzz", |nodes| {
        let (Some(first), Some(second)) = (nodes.get(NODE), nodes.get(OTHER_NODE)) else {
            return false;
        };
        has_status(first, ZZZ, "complete")
            && node_status(first, B).1 == Some("paused")
            && node_status(second, ZZZ).1 == Some("blocked")
    })
    .await
    .with_context(|| installed.controller_log_tail(60))?;
    let count = |name, status| [("skyhook_name", name), ("status", status)];
    for (name, state, value) in [
        (ZZZ, "complete", 1.0),
        (ZZZ, "blocked", 1.0),
        (B, "paused", 2.0),
    ] {
        e2e::metrics::wait_for_metric(
            port,
            "skyhook_node_status_count",
            &count(name, state),
            Some(value),
        )
        .await?;
    }
    let package = |name, state| {
        [
            ("skyhook_name", name),
            ("package_name", "foobar"),
            ("package_version", "1.2"),
            ("state", state),
        ]
    };
    e2e::metrics::wait_for_metric(
        port,
        "skyhook_package_state_count",
        &package(ZZZ, "complete"),
        Some(1.0),
    )
    .await?;

    let unpause = json!({"metadata": {"annotations": {"skyhook.nvidia.com/pause": "false"}}});
    merge_patch_skyhook(&client, B, &unpause).await?;
    remove_taint(&client, OTHER_NODE, TEST_BLOCK).await?;
    wait_for_nodes(
        &client,
        "node-1 at priority 2 while node-2 is still at zzz",
        |nodes| {
            let (Some(first), Some(second)) = (nodes.get(NODE), nodes.get(OTHER_NODE)) else {
                return false;
            };
            has_status(first, ZZZ, "complete")
                && [B, C]
                    .iter()
                    .any(|name| node_status(first, name).1 == Some("in_progress"))
                && node_status(second, ZZZ).1 != Some("complete")
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(60))?;
    e2e::metrics::wait_for_metric(port, "skyhook_status", &status(B, "paused"), Some(0.0)).await?;

    wait_for_nodes(&client, "both nodes to complete zzz, b and c", |nodes| {
        [NODE, OTHER_NODE].iter().all(|name| {
            nodes.get(*name).is_some_and(|node| {
                [ZZZ, B, C]
                    .iter()
                    .all(|s| node_status(node, s).1 == Some("complete"))
                    && node_status(node, D).1 == Some("disabled")
            })
        })
    })
    .await
    .with_context(|| installed.controller_log_tail(60))?;
    for name in [ZZZ, B, C] {
        e2e::metrics::wait_for_metric(
            port,
            "skyhook_node_status_count",
            &count(name, "complete"),
            Some(2.0),
        )
        .await?;
        e2e::metrics::wait_for_metric(
            port,
            "skyhook_package_state_count",
            &package(name, "complete"),
            Some(2.0),
        )
        .await?;
    }
    e2e::metrics::wait_for_metric(port, "skyhook_status", &status(D, "disabled"), Some(1.0))
        .await?;
    Ok(())
}
