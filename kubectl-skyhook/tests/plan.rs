//! `plan` on the seed demo (examples/demo.yaml) over synthetic nodes: the right nodes,
//! compartments, batches, stages, interrupts and blocked reasons.

mod common;

use common::{node, progress};
use kubectl_skyhook::cluster::Cluster;
use kubectl_skyhook::views::{PlannedNode, PlannedPackage, plan};
use serde_json::json;
use skyhook_api::uninstall::UninstallMode;
use skyhook_api::v1alpha1::{DeploymentPolicy, InterruptionBudget, Skyhook};

fn demo_node(name: &str, minute: u32) -> k8s_openapi::api::core::v1::Node {
    node(
        name,
        minute,
        json!({"skyhook.nvidia.com/test-node": "demo"}),
        json!({}),
        json!([]),
    )
}

fn fresh_cluster() -> Cluster {
    Cluster {
        nodes: vec![
            demo_node("worker-3", 1),
            demo_node("worker-1", 2),
            demo_node("worker-2", 3),
            node("other", 4, json!({}), json!({}), json!([])),
        ],
        ..Cluster::default()
    }
}

/// (node, compartment, batch, stages as `pkg@ver: a>b`, interrupt, blocked)
type Row = (
    String,
    String,
    Option<i32>,
    String,
    Option<String>,
    Option<String>,
);

fn summary(nodes: &[PlannedNode]) -> Vec<Row> {
    nodes
        .iter()
        .map(|n| {
            (
                n.node_name.clone(),
                n.compartment.clone().unwrap_or_default(),
                n.batch,
                n.packages
                    .iter()
                    .map(|p| format!("{}@{}: {}", p.name, p.version, p.stages.join(">")))
                    .collect::<Vec<_>>()
                    .join("; "),
                n.interrupt.clone(),
                n.blocked.clone(),
            )
        })
        .collect()
}

fn row(
    node: &str,
    compartment: &str,
    batch: Option<i32>,
    stages: &str,
    interrupt: Option<&str>,
    blocked: Option<&str>,
) -> Row {
    (
        node.into(),
        compartment.into(),
        batch,
        stages.into(),
        interrupt.map(Into::into),
        blocked.map(Into::into),
    )
}

#[test]
fn the_demo_on_fresh_nodes_runs_apply_and_config_everywhere_in_one_batch() {
    let view = plan(&fresh_cluster(), &common::demo(), UninstallMode::Legacy);
    assert!(!view.exists);
    assert_eq!(
        summary(&view.nodes),
        [
            row(
                "worker-1",
                "__default__",
                Some(1),
                "tuning@1.1.0: apply>config",
                None,
                None
            ),
            row(
                "worker-2",
                "__default__",
                Some(1),
                "tuning@1.1.0: apply>config",
                None,
                None
            ),
            row(
                "worker-3",
                "__default__",
                Some(1),
                "tuning@1.1.0: apply>config",
                None,
                None
            ),
        ]
    );
}

#[test]
fn a_count_budget_of_one_gives_one_node_per_batch_oldest_first() {
    let mut demo = common::demo();
    demo.spec.interruption_budget = Some(InterruptionBudget {
        count: Some(1),
        percent: None,
        topology: None,
    });
    let view = plan(&fresh_cluster(), &demo, UninstallMode::Legacy);
    let batches: Vec<(String, Option<i32>)> = view
        .nodes
        .iter()
        .map(|n| (n.node_name.clone(), n.batch))
        .collect();
    assert_eq!(
        batches,
        [
            ("worker-1".into(), Some(2)),
            ("worker-2".into(), Some(3)),
            ("worker-3".into(), Some(1))
        ]
    );
}

#[test]
fn interrupts_upgrades_and_blocked_nodes() {
    let mut demo = common::demo();
    demo.spec.packages.get_mut("tuning").unwrap().interrupt =
        Some(serde_json::from_value(json!({"type": "reboot"})).unwrap());
    let older = json!({"name": "tuning", "version": "1.0.0", "image": "i", "stage": "config", "state": "complete"});
    let mut cluster = fresh_cluster();
    cluster.nodes = vec![
        node(
            "a-upgraded",
            1,
            json!({"skyhook.nvidia.com/test-node": "demo"}),
            progress("demo", "complete", &[older]),
            json!([]),
        ),
        node(
            "b-ignored",
            2,
            json!({"skyhook.nvidia.com/test-node": "demo", "skyhook.nvidia.com/ignore": "true"}),
            json!({}),
            json!([]),
        ),
        node(
            "c-tainted",
            3,
            json!({"skyhook.nvidia.com/test-node": "demo"}),
            json!({}),
            json!([{"key": "skyhook.nvidia.com", "value": "runtime-required", "effect": "NoSchedule"}]),
        ),
        node(
            "d-done",
            4,
            json!({"skyhook.nvidia.com/test-node": "demo"}),
            progress(
                "demo",
                "complete",
                &[json!({"name": "tuning", "version": "1.1.0", "image": "i",
                 "stage": "post-interrupt", "state": "complete"})],
            ),
            json!([]),
        ),
        node(
            "e-cordoned",
            5,
            json!({"skyhook.nvidia.com/test-node": "demo"}),
            json!({}),
            json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
        ),
    ];
    let view = plan(&cluster, &demo, UninstallMode::Legacy);
    // d-done, complete before the first batch, is counted as a batch of its own by the
    // controller's batch evaluation, so the first batch the controller starts is number 2.
    assert_eq!(
        summary(&view.nodes),
        [
            row(
                "a-upgraded",
                "__default__",
                Some(2),
                "tuning@1.1.0: upgrade>config>interrupt>post-interrupt",
                Some("reboot (by tuning)"),
                None
            ),
            row(
                "b-ignored",
                "__default__",
                None,
                "tuning@1.1.0: apply>config>interrupt>post-interrupt",
                Some("reboot (by tuning)"),
                Some("ignored (label skyhook.nvidia.com/ignore=true)")
            ),
            row(
                "c-tainted",
                "__default__",
                None,
                "tuning@1.1.0: apply>config>interrupt>post-interrupt",
                Some("reboot (by tuning)"),
                Some("does not tolerate skyhook.nvidia.com=runtime-required:NoSchedule")
            ),
            row("d-done", "__default__", None, "", None, None),
            row(
                "e-cordoned",
                "__default__",
                Some(2),
                "tuning@1.1.0: apply>config>interrupt>post-interrupt",
                Some("reboot (by tuning)"),
                None
            ),
        ]
    );

    // A runtime-required Skyhook tolerates the runtime-required taint.
    demo.spec.runtime_required = true;
    let view = plan(&cluster, &demo, UninstallMode::Legacy);
    let tainted = view
        .nodes
        .iter()
        .find(|n| n.node_name == "c-tainted")
        .unwrap();
    assert_eq!((tainted.batch, tainted.blocked.as_deref()), (Some(2), None));
}

#[test]
fn policy_compartments_take_their_nodes_and_batch_separately() {
    let policy: DeploymentPolicy = serde_json::from_value(json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1", "kind": "DeploymentPolicy",
        "metadata": {"name": "canary-first"},
        "spec": {"default": {"budget": {"count": 2}, "strategy": {"fixed": {"initialBatch": 2}}},
                 "compartments": [{"name": "canary", "selector": {"matchLabels": {"canary": "true"}},
                                   "budget": {"count": 1}, "strategy": {"fixed": {"initialBatch": 1}}}]},
    }))
    .unwrap();
    let mut cluster = fresh_cluster();
    cluster.policies.push(policy);
    cluster.nodes.push(node(
        "canary-1",
        0,
        json!({"skyhook.nvidia.com/test-node": "demo", "canary": "true"}),
        json!({}),
        json!([]),
    ));
    let mut demo = common::demo();
    demo.spec.deployment_policy = Some("canary-first".into());
    let view = plan(&cluster, &demo, UninstallMode::Legacy);
    let placed: Vec<(String, String, Option<i32>)> = view
        .nodes
        .iter()
        .map(|n| {
            (
                n.node_name.clone(),
                n.compartment.clone().unwrap_or_default(),
                n.batch,
            )
        })
        .collect();
    assert_eq!(
        placed,
        [
            ("canary-1".into(), "canary".into(), Some(1)),
            ("worker-1".into(), "__default__".into(), Some(1)),
            ("worker-2".into(), "__default__".into(), Some(2)),
            ("worker-3".into(), "__default__".into(), Some(1)),
        ]
    );

    demo.spec.deployment_policy = Some("missing".into());
    let view = plan(&cluster, &demo, UninstallMode::Legacy);
    assert!(
        view.nodes
            .iter()
            .all(|n| n.batch.is_none() && n.blocked.is_some())
    );
    assert_eq!(
        view.notes,
        ["DeploymentPolicy \"missing\" does not exist: no node would be worked on"]
    );
}

#[test]
fn a_higher_priority_skyhook_incomplete_on_a_node_makes_it_wait() {
    let mut cluster = fresh_cluster();
    let first: Skyhook = serde_json::from_value(json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1", "kind": "Skyhook",
        "metadata": {"name": "first"},
        "spec": {"priority": 1, "nodeSelectors": {"matchLabels": {"first": "yes"}},
                 "packages": {"base": {"version": "1.0.0", "image": "example.com/base"}}},
    }))
    .unwrap();
    cluster.skyhooks.push(first);
    cluster.nodes[0]
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("first".into(), "yes".into());
    let view = plan(&cluster, &common::demo(), UninstallMode::Legacy);
    let waiting = view
        .nodes
        .iter()
        .find(|n| n.node_name == "worker-3")
        .unwrap();
    assert_eq!(
        waiting.blocked.as_deref(),
        Some("waits for higher-priority Skyhooks to complete")
    );
    assert_eq!(waiting.batch, None);
}

/// `1.2` and `1.2.0` have the same precedence: the controller upgrades (it never leaves the old
/// entry behind), and the plan must say what the controller does, not uninstall and apply.
#[test]
fn an_equal_version_written_differently_is_an_upgrade_as_in_the_controller() {
    let mut demo = common::demo();
    demo.spec.packages.get_mut("tuning").unwrap().version = "1.2.0".into();
    let installed = json!({"name": "tuning", "version": "1.2", "image": "i", "stage": "config", "state": "complete"});
    let mut cluster = fresh_cluster();
    cluster.nodes = vec![node(
        "worker-1",
        1,
        json!({"skyhook.nvidia.com/test-node": "demo"}),
        progress("demo", "complete", &[installed]),
        json!([]),
    )];
    let view = plan(&cluster, &demo, UninstallMode::Legacy);
    assert_eq!(
        view.nodes[0].packages,
        [PlannedPackage {
            name: "tuning".into(),
            version: "1.2.0".into(),
            stages: vec!["upgrade".into(), "config".into()],
        }]
    );
}

/// Downgrades run the old version's uninstall, then the new version from apply; removed
/// packages only their uninstall.
#[test]
fn downgrades_and_removals_follow_the_controllers_version_changes() {
    let mut demo = common::demo();
    demo.spec.packages.get_mut("tuning").unwrap().version = "1.0.0".into();
    let newer = json!({"name": "tuning", "version": "1.1.0", "image": "i", "stage": "config", "state": "complete"});
    let gone = json!({"name": "gone", "version": "2.0.0", "image": "i", "stage": "config", "state": "complete"});
    let mut cluster = fresh_cluster();
    cluster.nodes = vec![node(
        "worker-1",
        1,
        json!({"skyhook.nvidia.com/test-node": "demo"}),
        progress("demo", "complete", &[newer, gone]),
        json!([]),
    )];
    let view = plan(&cluster, &demo, UninstallMode::Legacy);
    let stages: Vec<(String, String, Vec<String>)> = view.nodes[0]
        .packages
        .iter()
        .map(|p| (p.name.clone(), p.version.clone(), p.stages.clone()))
        .collect();
    assert_eq!(
        stages,
        [
            (
                "tuning".into(),
                "1.0.0".into(),
                vec!["uninstall".into(), "apply".into(), "config".into()]
            ),
            ("gone".into(), "2.0.0".into(), vec!["uninstall".into()]),
        ]
    );
}
