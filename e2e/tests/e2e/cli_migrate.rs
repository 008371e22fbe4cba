//! `kubectl skyhook migrate` and back with `kubectl nodewright migrate --to skyhook`, through the
//! real `kubectl`, on a devcluster serving both API groups. A Skyhook with a package that
//! restarts a service and one that reboots the node completes; then:
//! - `migrate` refuses it while it is mid-rollout, and `--dry-run` prints the NodeWright and
//!   writes nothing;
//! - `migrate` creates the NodeWright, waits until it adopted the node, deletes the Skyhook:
//!   no stage Job of the NodeWright, no reboot (the boot ID is the one of the first rollout),
//!   the node state under the NodeWright's keys;
//! - `kubectl nodewright migrate --to skyhook` moves it back the same way.

use anyhow::{Context, ensure};
use e2e::Kubectl;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use serde_json::json;
use skyhook_api::keys::{self, NODEWRIGHT, SKYHOOK};
use skyhook_api::nodewright_v1alpha1::NodeWright;
use skyhook_api::v1alpha1::Skyhook;

const NODE: &str = "node-1";
const NAME: &str = "gpu";

fn spec() -> serde_json::Value {
    json!({
        "nodeSelectors": {"matchLabels": {e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}},
        "packages": {
            "tuning": {
                "version": "1.0.0",
                "image": "ghcr.io/nvidia/skyhook/agentless",
                "interrupt": {"type": "service", "services": ["containerd"]},
            },
            "driver": {
                "version": "1.0.0",
                "image": "ghcr.io/nvidia/skyhook/agentless",
                "interrupt": {"type": "reboot"},
                "env": [{"name": "SLEEP_LEN", "value": "20"}],
            },
        },
    })
}

fn boot_id(node: &Node) -> Option<String> {
    (node.status.as_ref())
        .and_then(|s| s.node_info.as_ref())
        .map(|info| info.boot_id.clone())
}

/// The node-state annotation of `keys`'s group for `gpu`.
fn node_state(node: &Node, keys: &keys::Keys) -> Option<String> {
    (node.metadata.annotations.as_ref())
        .and_then(|a| a.get(&keys.node_state_annotation(NAME)))
        .cloned()
}

async fn jobs_of(client: &kube::Client, keys: &keys::Keys) -> anyhow::Result<usize> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), "skyhook");
    let labelled = ListParams::default().labels(&format!("{}={NAME}", keys.name_label));
    Ok(jobs.list(&labelled).await?.items.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_moves_a_workload_to_nodewright_and_back_without_a_step() -> anyhow::Result<()> {
    let installed = e2e::install_serving_both_groups(e2e::Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let log = || installed.controller_log_tail(60);
    let kubectl = Kubectl::with_plugin(&installed)?;
    let nodes: Api<Node> = Api::all(client.clone());
    let skyhooks: Api<Skyhook> = Api::all(client.clone());
    let nodewrights: Api<NodeWright> = Api::all(client.clone());

    e2e::apply_yaml(&client, &e2e::skyhook_manifest(NAME, spec(), json!({}))).await?;
    e2e::wait_for_skyhook_status(&client, NAME, "in_progress", e2e::WAIT).await?;
    let stderr = kubectl.refused(&["skyhook", "migrate", NAME, "-y"]).await?;
    ensure!(
        stderr.contains("Skyhook \"gpu\" is in_progress: a workload moves to the other API group only once it is complete, paused or disabled"),
        "{stderr}"
    );
    ensure!(
        nodewrights.get_opt(NAME).await?.is_none(),
        "a refused migrate creates nothing"
    );
    e2e::wait_for_skyhook_status(&client, NAME, "complete", e2e::WAIT)
        .await
        .with_context(|| format!("controller log tail:\n{}", log()))?;
    let first = nodes.get(NODE).await?;
    let boot = boot_id(&first).context("a boot ID")?;
    let state = node_state(&first, &SKYHOOK).context("the Skyhook's node state")?;

    let dry = kubectl
        .succeed(&["skyhook", "migrate", NAME, "--dry-run"])
        .await?;
    ensure!(
        dry.contains("Skyhook \"gpu\" -> NodeWright \"gpu\"")
            && dry.contains("Nodes with its state (1): node-1")
            && dry.contains("kind: NodeWright")
            && dry.contains("nodewright.nvidia.com/mirrored-from: gpu")
            && dry.contains("Dry run: nothing was changed"),
        "{dry}"
    );
    ensure!(
        nodewrights.get_opt(NAME).await?.is_none(),
        "a dry run writes nothing"
    );

    let moved = kubectl
        .succeed(&["skyhook", "migrate", NAME, "-y", "--timeout", "3m"])
        .await
        .with_context(|| format!("controller log tail:\n{}", log()))?;
    ensure!(
        moved.contains("NodeWright \"gpu\" created")
            && moved.contains("NodeWright \"gpu\" adopted 1 of 1 node(s)")
            && moved.contains("Skyhook \"gpu\" deleted"),
        "{moved}"
    );
    e2e::wait_for_nodewright_status(&nodewrights, NAME, "complete").await?;
    ensure!(
        skyhooks.get_opt(NAME).await?.is_none(),
        "the Skyhook is gone"
    );
    let node = nodes.get(NODE).await?;
    ensure!(
        boot_id(&node).as_deref() == Some(boot.as_str()),
        "no reboot"
    );
    ensure!(
        node_state(&node, &NODEWRIGHT).as_deref() == Some(state.as_str()),
        "the state moved: {:?}",
        node.metadata.annotations
    );
    ensure!(
        jobs_of(&client, &NODEWRIGHT).await? == 0,
        "the NodeWright runs no stage"
    );

    let back = kubectl
        .succeed(&[
            "nodewright",
            "migrate",
            NAME,
            "--to",
            "skyhook",
            "-y",
            "--timeout",
            "3m",
        ])
        .await
        .with_context(|| format!("controller log tail:\n{}", log()))?;
    ensure!(
        back.contains("NodeWright \"gpu\" -> Skyhook \"gpu\"")
            && back.contains("Skyhook \"gpu\" created")
            && back.contains("NodeWright \"gpu\" deleted"),
        "{back}"
    );
    e2e::wait_for_skyhook_status(&client, NAME, "complete", e2e::WAIT).await?;
    ensure!(
        nodewrights.get_opt(NAME).await?.is_none(),
        "the NodeWright is gone"
    );
    let node = nodes.get(NODE).await?;
    ensure!(
        boot_id(&node).as_deref() == Some(boot.as_str()),
        "no reboot on the way back"
    );
    ensure!(
        node_state(&node, &SKYHOOK).as_deref() == Some(state.as_str()),
        "the state moved back: {:?}",
        node.metadata.annotations
    );
    ensure!(
        jobs_of(&client, &SKYHOOK).await? == 0 && jobs_of(&client, &NODEWRIGHT).await? == 0,
        "no stage ran on the way back"
    );
    ensure!(
        node.spec.and_then(|s| s.unschedulable) != Some(true),
        "the node is schedulable"
    );
    Ok(())
}
