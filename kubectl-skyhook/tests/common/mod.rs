//! A small cluster shared by the view, planner and plan tests, and golden-file comparison.
// Each test binary uses part of the helpers; a broken fixture must fail the test at once.
#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kubectl_skyhook::cluster::Cluster;
use serde_json::{Value, json};
use skyhook_api::v1alpha1::{DeploymentPolicy, Skyhook};

/// The seed demo Skyhook (examples/demo.yaml).
pub fn demo() -> Skyhook {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/demo.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A node-state entry of the demo's `tuning` package.
pub fn tuning(stage: &str, state: &str, restarts: i32) -> Value {
    json!({"name": "tuning", "version": "1.1.0", "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
           "stage": stage, "state": state, "restarts": restarts})
}

/// A node with labels, annotations and taints, created `minute` minutes after 10:00.
pub fn node(name: &str, minute: u32, labels: Value, annotations: Value, taints: Value) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels, "annotations": annotations,
                     "creationTimestamp": format!("2026-01-01T10:{minute:02}:00Z")},
        "spec": {"taints": taints},
    }))
    .unwrap()
}

/// The annotations of a node with node state `entries` and status `status` for Skyhook `sky`.
pub fn progress(sky: &str, status: &str, entries: &[Value]) -> Value {
    let state: serde_json::Map<String, Value> = entries
        .iter()
        .map(|e| {
            (
                format!(
                    "{}|{}",
                    e["name"].as_str().unwrap(),
                    e["version"].as_str().unwrap()
                ),
                e.clone(),
            )
        })
        .collect();
    json!({
        format!("skyhook.nvidia.com/nodeState_{sky}"): Value::Object(state).to_string(),
        format!("skyhook.nvidia.com/status_{sky}"): status,
    })
}

fn demo_labels() -> Value {
    json!({"skyhook.nvidia.com/test-node": "demo"})
}

/// The demo rolled out on five nodes, plus a paused Skyhook with a DeploymentPolicy:
/// - node-a complete, node-b applying and cordoned (draining `shop/web-1`, held by a budget), node-c erroring in config (exit code 1, 2 restarts),
/// - node-d ignored, node-e tainted `dedicated=gpu:NoSchedule`, node-f not selected.
pub fn cluster() -> Cluster {
    let mut demo = demo();
    demo.status = Some(
        serde_json::from_value(json!({
            "status": "erroring",
            "conditions": [{"type": "Ready", "status": "False", "reason": "InProgress",
                "message": "rolling out", "lastTransitionTime": "2026-01-01T10:30:00Z"}],
            "nodePriority": {"node-b": "2026-01-01T11:00:00Z", "node-c": "2026-01-01T11:00:00Z"},
            "compartmentStatuses": {"__default__": {"matched": 5, "ceiling": 5, "inProgress": 1,
                "completed": 1, "progressPercent": 20, "batchState": {"currentBatch": 2, "lastBatchSize": 1, "completedNodes": 1}}},
        }))
        .unwrap(),
    );
    let gpu: Skyhook = serde_json::from_value(json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1", "kind": "Skyhook",
        "metadata": {"name": "gpu", "annotations": {"skyhook.nvidia.com/pause": "true"}},
        "spec": {"priority": 300, "deploymentPolicy": "rolling",
                 "nodeSelectors": {"matchLabels": {"gpu": "true"}},
                 "packages": {"driver": {"version": "2.0.0", "image": "example.com/driver",
                                         "interrupt": {"type": "reboot"}}}},
        "status": {"status": "paused", "compartmentStatuses": {
            "__default__": {"matched": 1, "ceiling": 1, "inProgress": 0, "completed": 0, "progressPercent": 0,
                            "batchState": {"currentBatch": 3, "consecutiveFailures": 2, "shouldStop": true}},
            "canary": {"matched": 0, "ceiling": 0, "inProgress": 0, "completed": 0, "progressPercent": 0}}},
    }))
    .unwrap();
    let policy: DeploymentPolicy = serde_json::from_value(json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1", "kind": "DeploymentPolicy",
        "metadata": {"name": "rolling"},
        "spec": {"default": {"budget": {"percent": 50}, "strategy": {"fixed": {"initialBatch": 1}}},
                 "compartments": [{"name": "canary", "selector": {"matchLabels": {"canary": "true"}},
                                   "budget": {"count": 1}, "strategy": {"fixed": {"initialBatch": 1}}}]},
    }))
    .unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "demo-tuning-config-abc", "namespace": "skyhook",
                     "labels": {"skyhook.nvidia.com/name": "demo", "skyhook.nvidia.com/package": "tuning-1.1.0"}},
        "spec": {"nodeName": "node-c", "containers": [{"name": "pause"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "tuning-init", "ready": true, "restartCount": 0, "image": "i", "imageID": "",
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "tuning-config", "ready": false, "restartCount": 2, "image": "i", "imageID": "",
             "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]},
    }))
    .unwrap();
    let mut gpu_annotations = progress(
        "gpu",
        "paused",
        &[json!({"name": "driver", "version": "2.0.0",
        "image": "example.com/driver", "stage": "apply", "state": "complete"})],
    );
    gpu_annotations["skyhook.nvidia.com/nodeState_demo"] = progress(
        "demo",
        "complete",
        &[tuning("config", "complete", 0)],
    )["skyhook.nvidia.com/nodeState_demo"]
        .clone();
    // node-b is being drained for demo: a web pod held by a budget, a free one, and a
    // DaemonSet pod, which a drain leaves alone.
    let on_b = |name: &str, labels: Value, owner: Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop", "labels": labels, "ownerReferences": owner},
            "spec": {"nodeName": "node-b", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        }))
        .unwrap()
    };
    let held = on_b("web-1", json!({"app": "web"}), json!([]));
    let free = on_b("batch-1", json!({"app": "batch"}), json!([]));
    let daemon = on_b(
        "agent-x",
        json!({"app": "agent"}),
        json!([{"apiVersion": "apps/v1",
        "kind": "DaemonSet", "name": "agent", "uid": "u"}]),
    );
    let pdb = |name: &str, app: &str, allowed: i32| -> PodDisruptionBudget {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": app}}, "minAvailable": 1},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1},
        }))
        .unwrap()
    };
    let mut node_b = node(
        "node-b",
        2,
        demo_labels(),
        progress("demo", "in_progress", &[tuning("apply", "in_progress", 0)]),
        json!([]),
    );
    node_b
        .spec
        .get_or_insert_with(Default::default)
        .unschedulable = Some(true);
    node_b
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("skyhook.nvidia.com/cordon_demo".into(), "true".into());
    // node-a completed at 11:10: its stage times, as the controller records them.
    let mut node_a_progress = progress("demo", "complete", &[tuning("config", "complete", 0)]);
    node_a_progress["skyhook.nvidia.com/stageTimes_demo"] = json!(
        r#"{"tuning|1.1.0":{"stage":"config","state":"complete","since":"2026-01-01T11:10:00Z"}}"#
    );
    Cluster {
        group: skyhook_api::generation::Group::Skyhook,
        read_at: "2026-01-01T11:20:00Z".parse().unwrap(),
        pdbs: vec![pdb("web-pdb", "web", 0), pdb("batch-pdb", "batch", 1)],
        skyhooks: vec![demo, gpu],
        policies: vec![policy],
        pods: vec![pod, held, free, daemon],
        nodes: vec![
            node("node-a", 1, demo_labels(), node_a_progress, json!([])),
            node_b,
            node(
                "node-c",
                3,
                demo_labels(),
                progress("demo", "erroring", &[tuning("config", "erroring", 1)]),
                json!([]),
            ),
            node(
                "node-d",
                4,
                json!({"skyhook.nvidia.com/test-node": "demo", "skyhook.nvidia.com/ignore": "true"}),
                json!({"skyhook.nvidia.com/status_demo": "blocked"}),
                json!([]),
            ),
            node(
                "node-e",
                5,
                demo_labels(),
                json!({"skyhook.nvidia.com/status_demo": "waiting"}),
                json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
            ),
            node(
                "node-f",
                6,
                json!({"gpu": "true"}),
                gpu_annotations,
                json!([]),
            ),
        ],
    }
}

/// Compares `actual` with `tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites the file.
pub fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    assert_eq!(
        actual,
        expected,
        "{name} differs from {}; UPDATE_GOLDEN=1 rewrites it",
        path.display()
    );
}
