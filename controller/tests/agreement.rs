//! One truth per rule, checked: the controller's plan, the plugin's `plan` prediction and the
//! metrics reporter read the same Skyhooks, DeploymentPolicies and Nodes, and must agree on which
//! nodes a Skyhook targets, which nodes its first batch takes, and the first stage each runs.
//! A copy of a rule that drifts (a Skyhook without `nodeSelectors` targeting nothing in one
//! binary and everything in another, `deploymentPolicy: ""` read as a missing policy) fails here.

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use controller::cache;
use controller::config::{Args, Config};
use controller::reconcile::plan::plan;
use controller::reconcile::report::skyhook_metrics;
use controller::reconcile::snapshot::Snapshot;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kubectl_skyhook::cluster::Cluster;
use skyhook_api::keys;
use skyhook_api::pod_annotation::PodPackageAnnotation;
use skyhook_api::v1alpha1::{DeploymentPolicy, Skyhook};

fn now() -> Timestamp {
    "2026-06-01T00:00:00Z".parse().unwrap()
}

/// Six ready nodes, three of them GPU nodes, created a minute apart.
fn nodes() -> Vec<Node> {
    (1..=6)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": format!("node-{i}"),
                    "creationTimestamp": format!("2026-01-01T00:0{i}:00Z"),
                    "labels": if i % 2 == 0 { serde_json::json!({"gpu": "true"}) } else { serde_json::json!({}) },
                },
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "nodeInfo": {"bootID": format!("boot-{i}"), "machineID": "", "systemUUID": "", "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
                }
            }))
            .unwrap()
        })
        .collect()
}

fn policy() -> DeploymentPolicy {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": "pairs"},
        "spec": {
            "default": {"budget": {"count": 2}, "strategy": {"fixed": {"initialBatch": 2}}},
            "compartments": [{
                "name": "gpu",
                "selector": {"matchLabels": {"gpu": "true"}},
                "budget": {"count": 1},
                "strategy": {"fixed": {"initialBatch": 1}}
            }]
        }
    }))
    .unwrap()
}

fn skyhook(name: &str, extra: serde_json::Value) -> Skyhook {
    let mut spec = serde_json::json!({
        "packages": {"tuning": {"version": "1.1.0", "image": "ghcr.io/nvidia/skyhook-packages/tuning"}}
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "Skyhook",
        "metadata": {"name": name, "uid": "0000-1111", "generation": 1},
        "spec": spec,
    }))
    .unwrap()
}

/// What one binary says about a Skyhook.
#[derive(Debug, PartialEq, Eq)]
struct Verdict {
    targets: BTreeSet<String>,
    first_batch: BTreeSet<String>,
    first_stages: BTreeSet<String>,
}

fn controller_verdict(skyhook: &Skyhook) -> (Verdict, usize) {
    let cached = cache::CachedObjects {
        skyhooks: vec![Arc::new(skyhook.clone())],
        policies: vec![Arc::new(policy())],
        nodes: nodes()
            .into_iter()
            .map(|node| Arc::new(node.into()))
            .collect(),
        ..cache::CachedObjects::default()
    };
    let config = Config::from_args(&Args::parse_from(["skyhook-controller"])).unwrap();
    let snapshot = Snapshot::build(
        &cached,
        BTreeMap::new(),
        Vec::new(),
        now(),
        Duration::from_secs(1800),
    );
    let planned = plan(&snapshot, &config, now());
    let name = skyhook.metadata.name.clone().unwrap();
    let status = planned.statuses.get(&name).cloned().unwrap_or_default();
    let targets = status.node_status.keys().cloned().collect();
    let mut first_batch = BTreeSet::new();
    let mut first_stages = BTreeSet::new();
    for planned_pod in &planned.create_pods {
        first_batch.insert(planned_pod.node().to_owned());
        let pod = planned_pod.pod().unwrap();
        let annotation =
            pod.metadata.annotations.as_ref().unwrap()[keys::SKYHOOK.package_annotation].clone();
        let annotation = PodPackageAnnotation::parse(&annotation).unwrap();
        first_stages.insert(annotation.stage.to_string());
    }
    let metrics = skyhook_metrics(&snapshot.skyhooks, &snapshot.policies, &cached.nodes);
    let target_count = usize::try_from(
        metrics[&(skyhook_api::generation::Group::Skyhook, name.clone())].target_count,
    )
    .unwrap();
    (
        Verdict {
            targets,
            first_batch,
            first_stages,
        },
        target_count,
    )
}

fn plugin_verdict(skyhook: &Skyhook) -> Verdict {
    let cluster = Cluster {
        nodes: nodes(),
        policies: vec![policy()],
        ..Cluster::default()
    };
    let view = kubectl_skyhook::views::plan(
        &cluster,
        skyhook,
        skyhook_api::uninstall::UninstallMode::Legacy,
    );
    let first = view.nodes.iter().filter_map(|n| n.batch).min();
    Verdict {
        targets: view.nodes.iter().map(|n| n.node_name.clone()).collect(),
        first_batch: view
            .nodes
            .iter()
            .filter(|n| first.is_some() && n.batch == first)
            .map(|n| n.node_name.clone())
            .collect(),
        first_stages: view
            .nodes
            .iter()
            .filter(|n| first.is_some() && n.batch == first)
            .filter_map(|n| n.packages.first().and_then(|p| p.stages.first()).cloned())
            .collect(),
    }
}

#[test]
fn the_controller_the_plugin_and_the_metrics_agree() {
    let gpu = serde_json::json!({"gpu": "true"});
    let cases = [
        (
            "no selector",
            skyhook(
                "everything",
                serde_json::json!({"interruptionBudget": {"count": 2}}),
            ),
            6,
            2,
        ),
        (
            "empty policy name",
            skyhook(
                "empty-policy",
                serde_json::json!({"deploymentPolicy": "", "nodeSelectors": {"matchLabels": gpu}}),
            ),
            3,
            3,
        ),
        (
            "selector and percent",
            skyhook(
                "half",
                serde_json::json!({"nodeSelectors": {"matchLabels": gpu}, "interruptionBudget": {"percent": 50}}),
            ),
            3,
            1,
        ),
        (
            "policy compartments",
            skyhook("policy", serde_json::json!({"deploymentPolicy": "pairs"})),
            6,
            3,
        ),
    ];
    // Case, Skyhook, targeted nodes, first batch.
    for (case, skyhook, expected_targets, expected_batch) in cases {
        let (controller, metrics_targets) = controller_verdict(&skyhook);
        let plugin = plugin_verdict(&skyhook);
        assert_eq!(
            controller.targets.len(),
            expected_targets,
            "{case}: {controller:?}"
        );
        assert_eq!(metrics_targets, expected_targets, "{case}: metrics");
        assert_eq!(
            plugin, controller,
            "{case}: the plugin's prediction and the plan"
        );
        assert_eq!(
            controller.first_batch.len(),
            expected_batch,
            "{case}: {controller:?}"
        );
        assert_eq!(
            controller.first_stages,
            BTreeSet::from(["apply".to_owned()]),
            "{case}"
        );
    }
}
