//! Upstream-exact condition texts (spec §2.5, §2.13), spelled out literally here so that a
//! change of a constant in `skyhook_api::keys` shows up as a failing test.

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
    ];
    for (type_, want) in cases {
        assert_eq!(skyhook_condition(&sim, "demo", type_), want, "{type_}");
    }
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

    for condition in &mut sim.snapshot.nodes[0].conditions {
        condition.message.clear();
    }
    assert_eq!(
        written(&sim.step()),
        [
            keys::node_erroring_condition("demo"),
            keys::node_not_ready_condition("demo"),
        ]
    );
    assert_eq!(written(&sim.step()), Vec::<String>::new());
}
