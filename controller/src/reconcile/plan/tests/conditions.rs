//! Upstream-exact condition texts (spec §2.5, §2.13), spelled out literally here so that a
//! change of a constant in `skyhook_api::keys` shows up as a failing test.

use std::sync::Arc;

use skyhook_api::keys;

use super::sim::{Sim, node, package, skyhook};

/// `(status, reason, message)` of a Skyhook condition.
fn skyhook_condition(sim: &Sim, skyhook: &str, type_: &str) -> Option<(String, String, String)> {
    sim.skyhook(skyhook)
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// `(status, reason, message)` of a node condition.
fn node_condition(sim: &Sim, node: &str, type_: &str) -> Option<(String, String, String)> {
    sim.node(node)
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn triple(status: &str, reason: &str, message: &str) -> Option<(String, String, String)> {
    Some((status.into(), reason.into(), message.into()))
}

#[test]
fn skyhook_conditions_read_as_upstreams_when_nothing_is_blocked() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("demo", vec![package("one", "1.0.0")])],
    );
    sim.run(10);
    let cases = [
        (
            "skyhook.nvidia.com/TaintNotTolerable",
            triple(
                "False",
                "TaintNotTolerable",
                "All nodes have tolerable taints.",
            ),
        ),
        (
            "skyhook.nvidia.com/NodesIgnored",
            triple("False", "NodesIgnored", "No nodes have ignore label set."),
        ),
        (
            "skyhook.nvidia.com/ApplyPackage",
            triple(
                "True",
                "ApplyPackage",
                "Applying package [one:1.0.0] to node [worker]",
            ),
        ),
        (
            "TaintNotTolerable",
            triple(
                "False",
                "TaintNotTolerable",
                "All nodes have tolerable taints.",
            ),
        ),
        (
            "NodesIgnored",
            triple("False", "NodesIgnored", "No nodes have ignore label set."),
        ),
        (
            "ApplyPackage",
            triple(
                "True",
                "ApplyPackage",
                "Applying package [one:1.0.0] to node [worker]",
            ),
        ),
        (
            "Ready",
            triple("True", "NodesConverged", "1/1 nodes complete (worker)"),
        ),
        (
            "skyhook.nvidia.com/Ready",
            triple("True", "NodesConverged", "1/1 nodes complete (worker)"),
        ),
        (
            "skyhook.nvidia.com/Transition",
            triple("True", "complete", "1/1 nodes complete (worker)"),
        ),
        ("DeploymentPolicyNotFound", None),
        ("skyhook.nvidia.com/DeploymentPolicyNotFound", None),
    ];
    for (type_, want) in cases {
        assert_eq!(skyhook_condition(&sim, "demo", type_), want, "{type_}");
    }
}

/// `Ready` counts the nodes by status while rolling; `Transition` names the change in the
/// pass that makes it and repeats `Ready`'s message after; their times follow §4.
#[test]
fn ready_and_transition_follow_the_rollout() {
    let mut sim = Sim::new(
        vec![node("b", 1), node("a", 0)],
        vec![skyhook("demo", vec![package("one", "1.0.0")])],
    );
    sim.step();
    let transition = "skyhook.nvidia.com/Transition";
    assert_eq!(
        skyhook_condition(&sim, "demo", "Ready"),
        triple(
            "False",
            "Progressing",
            "0/2 nodes complete, 2 in progress (a, b)"
        )
    );
    assert_eq!(
        skyhook_condition(&sim, "demo", transition),
        triple(
            "False",
            "in_progress",
            "Transitioned [none] -> [in_progress]"
        )
    );
    let first = sim.skyhook("demo").status.clone().unwrap_or_default();
    let ready_time = |status: &skyhook_api::v1alpha1::SkyhookStatus, type_: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.last_transition_time.clone(), c.observed_generation))
    };
    sim.step();
    let second = sim.skyhook("demo").status.clone().unwrap_or_default();
    assert_eq!(
        skyhook_condition(&sim, "demo", transition),
        triple(
            "False",
            "in_progress",
            "0/2 nodes complete, 2 in progress (a, b)"
        ),
        "no change of status: Ready's message"
    );
    assert_eq!(ready_time(&first, "Ready"), ready_time(&second, "Ready"));
    assert_eq!(ready_time(&second, "Ready").and_then(|t| t.1), Some(1));
    assert_ne!(
        ready_time(&first, transition),
        ready_time(&second, transition),
        "Transition's time follows its message"
    );
    sim.run(20);
    let done = sim.skyhook("demo").status.clone().unwrap_or_default();
    assert_eq!(
        skyhook_condition(&sim, "demo", "Ready"),
        triple("True", "NodesConverged", "2/2 nodes complete (a, b)")
    );
    assert_ne!(ready_time(&second, "Ready"), ready_time(&done, "Ready"));
    let find = |type_: &str| done.conditions.iter().find(|c| c.type_ == type_).cloned();
    let mirror = find("skyhook.nvidia.com/Ready").map(|c| {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: "Ready".into(),
            ..c
        }
    });
    assert_eq!(
        mirror,
        find("Ready"),
        "the mirror is identical, time included"
    );
    let planned = sim.step();
    assert!(
        planned.statuses.is_empty(),
        "identical conditions write nothing: {:?}",
        planned.statuses
    );
}

/// `Ready` is True on a complete Skyhook whatever its status says: paused, its nodes read
/// `paused`.
#[test]
fn ready_stays_true_on_a_complete_skyhook_that_is_paused() {
    let mut sim = Sim::new(
        vec![node("a", 0)],
        vec![skyhook("demo", vec![package("one", "1.0.0")])],
    );
    sim.run(10);
    sim.skyhook_mut("demo")
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(keys::SKYHOOK.pause_annotation.to_owned(), "true".to_owned());
    sim.step();
    assert_eq!(
        skyhook_condition(&sim, "demo", "Ready"),
        triple("True", "Paused", "0/1 nodes complete, 1 paused (a)")
    );
}

#[test]
fn node_conditions_carry_upstreams_messages() {
    let failing = skyhook("failing", vec![package("bad", "1.0.0")]);
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("demo", vec![package("one", "1.0.0")]), failing],
    );
    sim.step();
    assert_eq!(
        node_condition(&sim, "worker", "skyhook.nvidia.com/demo/NotReady"),
        triple("True", "Incomplete", "Skyhook demo Not Ready")
    );
    for _ in 0..10 {
        sim.step();
        sim.settle(|pod| pod.name == "bad");
    }
    let cases = [
        (
            "skyhook.nvidia.com/demo/NotReady",
            triple("False", "Complete", "Skyhook demo Ready"),
        ),
        (
            "skyhook.nvidia.com/demo/Erroring",
            triple(
                "False",
                "Not Erroring",
                "No Package Erroring or Unknown for demo",
            ),
        ),
        (
            "skyhook.nvidia.com/failing/NotReady",
            triple("True", "Incomplete", "Skyhook failing Not Ready"),
        ),
        (
            "skyhook.nvidia.com/failing/Erroring",
            triple(
                "True",
                "Package(s) Erroring or Unknown",
                "Package Erroring or Unknown for failing",
            ),
        ),
    ];
    for (type_, want) in cases {
        assert_eq!(node_condition(&sim, "worker", type_), want, "{type_}");
    }
}

/// A node condition is written when its message differs (a node last written without messages)
/// and not again once it matches.
#[test]
fn node_conditions_are_written_only_when_they_differ() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("demo", vec![package("one", "1.0.0")])],
    );
    sim.run(10);
    let written = |planned: &crate::reconcile::plan::Plan| -> Vec<String> {
        planned
            .nodes
            .get("worker")
            .map(|patch| patch.conditions.iter().map(|c| c.type_.clone()).collect())
            .unwrap_or_default()
    };
    assert_eq!(written(&sim.step()), Vec::<String>::new());

    for condition in &mut Arc::make_mut(&mut sim.snapshot.nodes[0]).conditions {
        condition.message.clear();
    }
    assert_eq!(
        written(&sim.step()),
        [
            keys::SKYHOOK.node_erroring_condition("demo"),
            keys::SKYHOOK.node_not_ready_condition("demo"),
        ]
    );
    assert_eq!(written(&sim.step()), Vec::<String>::new());
}
