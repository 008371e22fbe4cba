//! The seed Quick Start (upstream README): `examples/demo.yaml`, applied verbatim to a 3-node
//! devcluster where 2 nodes carry `skyhook.nvidia.com/test-node=demo`, completes on exactly those
//! nodes, and its scripts leave `/skyhook-hello-world` in each selected node's root.

use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use serde_json::{Value, json};

/// Generous: a loaded 2-core machine runs 4 stage pods of ~10 s per node, one node at a time.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(600);
const SELECTED: [&str; 2] = ["node-1", "node-2"];
const UNSELECTED: &str = "node-3";
const NODE_STATE: &str = "skyhook.nvidia.com/nodeState_demo";
const STATUS: &str = "skyhook.nvidia.com/status_demo";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_quick_start() -> anyhow::Result<()> {
    let installed = e2e::install(3).await?;
    let client = installed.cluster.client()?;
    let nodes: Api<Node> = Api::all(client.clone());
    e2e::nodes::label_nodes(&client, SELECTED, &[(e2e::TEST_NODE_LABEL, "demo")]).await?;
    let manifest = e2e::workspace().join("examples/demo.yaml");
    let name = e2e::apply_manifest(&client, &manifest).await?;
    assert_eq!(name, "demo");

    let skyhook = e2e::wait_for_skyhook_status(&client, "demo", "complete", ROLLOUT_TIMEOUT)
        .await
        .with_context(|| {
            format!(
                "controller log tail:\n{}",
                installed.controller_log_tail(40)
            )
        })?;

    let ready = skyhook.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|condition| condition["type"] == "Ready");
    assert_eq!(
        ready.map(|condition| condition["status"].clone()),
        Some(json!("True")),
        "Ready condition: {ready:?}"
    );

    for name in SELECTED {
        let node = nodes.get(name).await?;
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let state: Value = serde_json::from_str(
            annotations
                .get(NODE_STATE)
                .with_context(|| format!("{name} has no {NODE_STATE}: {annotations:?}"))?,
        )?;
        let package = &state["tuning|1.1.0"];
        assert_eq!(package["stage"], "config", "{name}: {state}");
        assert_eq!(package["state"], "complete", "{name}: {state}");
        assert_eq!(
            annotations.get(STATUS).map(String::as_str),
            Some("complete"),
            "{name}"
        );
        assert_eq!(
            labels.get(STATUS).map(String::as_str),
            Some("complete"),
            "{name}"
        );
        assert_ne!(unschedulable(&node), Some(true), "{name} was left cordoned");

        let hello = hello_world(&installed, name)?;
        let hello = hello.with_context(|| format!("{name} has no /skyhook-hello-world"))?;
        ensure!(
            hello.contains("hello world") && hello.contains("a config is run"),
            "{name}: /skyhook-hello-world holds {hello:?}"
        );
    }

    let node = nodes.get(UNSELECTED).await?;
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert!(!annotations.contains_key(NODE_STATE), "{annotations:?}");
    assert!(!annotations.contains_key(STATUS), "{annotations:?}");
    assert!(!labels.contains_key(STATUS), "{labels:?}");
    assert_ne!(
        unschedulable(&node),
        Some(true),
        "{UNSELECTED} was cordoned"
    );
    assert_eq!(hello_world(&installed, UNSELECTED)?, None);
    Ok(())
}

fn unschedulable(node: &Node) -> Option<bool> {
    node.spec.as_ref().and_then(|spec| spec.unschedulable)
}

/// `/skyhook-hello-world` in the node's host root, `None` if absent.
fn hello_world(installed: &e2e::Installed, node: &str) -> anyhow::Result<Option<String>> {
    let root = installed
        .cluster
        .node(node)
        .and_then(|handle| handle.root())
        .with_context(|| format!("{node} has no host root (not a full node?)"))?;
    let path = root.join("skyhook-hello-world");
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}
