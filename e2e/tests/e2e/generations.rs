//! One controller, both API groups: a Skyhook and a NodeWright, each with a package that
//! restarts a service, roll out on the same two nodes of a devcluster whose API server serves
//! the nodewright.nvidia.com CRDs. Every node is sampled after each of its changes:
//! - a node is cordoned exactly while a `cordon_*` of either group is on it, and is handed from
//!   one workload to the other without turning schedulable in between;
//! - each object ends `complete`, with its own group's node state on every node, and no
//!   `cordon_*` of either group left;
//! - the NodeWright's stage Jobs carry the nodewright labels and name it as their owner;
//! - the NodeWright's metrics are `nodewright_*` with `nodewright_name`, plus their legacy
//!   `skyhook_*` twins; the Skyhook's are `skyhook_*` only.

use anyhow::{Context, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use serde_json::json;
use skyhook_api::keys::{NODEWRIGHT, SKYHOOK};
use skyhook_api::nodewright_v1alpha1::NodeWright;

const NODES: [&str; 2] = ["node-1", "node-2"];

fn spec(package: &str) -> serde_json::Value {
    json!({
        "nodeSelectors": {"matchLabels": {e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}},
        "packages": {package: {
            "version": "1.0.0",
            "image": "ghcr.io/nvidia/skyhook/agentless",
            "interrupt": {"type": "service", "services": ["containerd"]},
        }},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skyhook_and_a_nodewright_share_each_nodes_cordon() -> anyhow::Result<()> {
    let installed = e2e::install_serving_both_groups(e2e::Setup::agentless(NODES.len())).await?;
    let client = installed.cluster.client()?;
    let log = || installed.controller_log_tail(40);
    let mut recorders = Vec::new();
    for node in NODES {
        recorders.push(e2e::record_node(&client, node).await?);
    }

    let nodewright = json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": {"name": "gpu"},
        "spec": spec("gpu-tuning"),
    });
    e2e::apply_yaml(
        &client,
        &e2e::skyhook_manifest("net", spec("net-tuning"), json!({})),
    )
    .await?;
    e2e::apply_yaml(&client, &nodewright.to_string()).await?;

    e2e::wait_for_skyhook_status(&client, "net", "complete", e2e::WAIT)
        .await
        .with_context(|| format!("the Skyhook; controller log tail:\n{}", log()))?;
    let nodewrights: Api<NodeWright> = Api::all(client.clone());
    e2e::wait_for_nodewright_status(&nodewrights, "gpu", "complete")
        .await
        .with_context(|| format!("controller log tail:\n{}", log()))?;

    let owners = skyhook_api::generation::Owners::skyhooks_only(["net"]);
    for (node, recorder) in NODES.iter().zip(&recorders) {
        // (the Skyhook's cordon, the NodeWright's cordon, unschedulable), as they changed.
        let mut seen: Vec<(bool, bool, bool)> = Vec::new();
        for version in recorder.seen() {
            let annotations = version.metadata.annotations.clone().unwrap_or_default();
            let unschedulable = (version.spec.as_ref()).and_then(|s| s.unschedulable) == Some(true);
            let held = skyhook_api::node_keys::cordon_held(&annotations, &owners);
            ensure!(
                unschedulable == held,
                "{node} unschedulable={unschedulable} while a cordon is held={held}: {annotations:?}"
            );
            let sample = (
                annotations.contains_key(&SKYHOOK.cordon_annotation("net")),
                annotations.contains_key(&NODEWRIGHT.cordon_annotation("gpu")),
                unschedulable,
            );
            if seen.last() != Some(&sample) {
                seen.push(sample);
            }
        }
        let cordoned: Vec<bool> = seen.iter().map(|s| s.2).collect();
        let runs = cordoned.windows(2).filter(|w| !w[0] && w[1]).count()
            + usize::from(cordoned.first() == Some(&true));
        ensure!(
            runs == 1 && seen.iter().any(|s| s.0) && seen.iter().any(|s| s.1),
            "{node}: both workloads cordon it, within one cordoned stretch: {seen:?}"
        );
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for node in NODES {
        let node = nodes.get(node).await?;
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        ensure!(
            !annotations.keys().any(|k| k.contains("/cordon_")),
            "no cordon left: {annotations:?}"
        );
        ensure!(
            annotations.contains_key(&SKYHOOK.node_state_annotation("net"))
                && annotations.contains_key(&NODEWRIGHT.node_state_annotation("gpu")),
            "each state under its own group: {annotations:?}"
        );
        ensure!(node.spec.and_then(|s| s.unschedulable) != Some(true));
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), "skyhook");
    let labelled = ListParams::default().labels(&format!("{}=gpu", NODEWRIGHT.name_label));
    let gpu_jobs = jobs.list(&labelled).await?;
    ensure!(
        !gpu_jobs.items.is_empty(),
        "the NodeWright's Jobs are labelled"
    );
    for job in &gpu_jobs.items {
        let owner = &job.metadata.owner_references.as_ref().context("owned")?[0];
        ensure!(
            owner.kind == "NodeWright" && owner.name == "gpu",
            "{:?}",
            job.metadata.owner_references
        );
        let labels = job.metadata.labels.clone().unwrap_or_default();
        ensure!(
            !labels.contains_key(SKYHOOK.name_label),
            "no skyhook-group name label: {labels:?}"
        );
    }

    // Each object's metrics under its own group's names; the NodeWright's legacy twins too.
    let port = installed.controller.record().metrics_port;
    for (metric, label, name) in [
        ("nodewright_status", "nodewright_name", "gpu"),
        ("skyhook_status", "skyhook_name", "gpu"),
        ("skyhook_status", "skyhook_name", "net"),
    ] {
        let labels = [(label, name), ("status", "complete")];
        e2e::metrics::wait_for_metric(port, metric, &labels, Some(1.0)).await?;
    }
    let samples = e2e::metrics::scrape(port).await?;
    let target = |metric: &str, label: &str, name: &str| {
        e2e::metrics::find(&samples, metric, &[(label, name)])
    };
    ensure!(
        target("nodewright_node_target_count", "nodewright_name", "gpu") == Some(2.0)
            && target("skyhook_node_target_count", "skyhook_name", "gpu") == Some(2.0),
        "the NodeWright's series and their twins count its two nodes"
    );
    ensure!(
        target("nodewright_node_target_count", "nodewright_name", "net").is_none(),
        "a Skyhook publishes no nodewright_* series"
    );
    Ok(())
}
