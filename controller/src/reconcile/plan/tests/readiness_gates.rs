//! Readiness gates: after its interrupt a node stays cordoned, incomplete and in its budget
//! slot until each gated node condition is True and turned True after the interrupt; past the
//! timeout it is `erroring` (still cordoned), and a condition that turns True later still lets
//! it complete. A node that completes without an interrupt is not gated.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use skyhook_api::keys;
use skyhook_api::v1alpha1::{InterruptionBudget, ReadinessGate, Status};

use super::sim::{Sim, node, package, restarting, skyhook};
use crate::reconcile::plan::{EventTarget, Plan};
use crate::reconcile::snapshot::ForeignCondition;

const NAME: &str = "gated";
const NODES: [&str; 2] = ["node-0", "node-1"];

/// Two nodes, one at a time, a package restarting a service, gated on `GpuHealthy` for 10m.
fn sim(interrupt: bool) -> Sim {
    let tuning = if interrupt {
        restarting()
    } else {
        package("tuning", "1.0.0")
    };
    let mut s = skyhook(NAME, vec![tuning]);
    s.spec.interruption_budget = Some(InterruptionBudget {
        count: Some(1),
        percent: None,
        topology: None,
    });
    s.spec.readiness_gates = vec![ReadinessGate {
        condition_type: "GpuHealthy".into(),
        timeout: Some("10m".into()),
    }];
    let nodes = NODES.iter().zip(0..).map(|(n, i)| node(n, i)).collect();
    let mut sim = Sim::new(nodes, vec![s]);
    for n in NODES {
        sim.snapshot.workload_pods.insert(n.into(), Vec::new());
    }
    sim
}

/// Steps and settles until node-0's packages have all finished and the gate holds it.
fn until_held(sim: &mut Sim) {
    for _ in 0..40 {
        sim.step();
        sim.settle(|_| false);
        if held(sim).is_some() {
            return;
        }
    }
    panic!(
        "the gate never held node-0: {:?}",
        sim.state(NAME, "node-0")
    );
}

fn held(sim: &Sim) -> Option<(String, String)> {
    sim.true_condition(NAME, keys::SKYHOOK.condition_readiness_gate_held)
        .map(|c| (c.reason.clone(), c.message.clone()))
}

fn set_gpu_healthy(sim: &mut Sim, node: &str, true_: bool, since: Timestamp) {
    let view = sim
        .snapshot
        .nodes
        .iter_mut()
        .map(Arc::make_mut)
        .find(|n| n.name == node)
        .expect("a known node");
    view.foreign_conditions = vec![ForeignCondition {
        type_: "GpuHealthy".into(),
        true_,
        last_transition: Some(since),
    }];
}

fn node_events<'p>(planned: &'p Plan, node: &str, reason: &str) -> Vec<&'p str> {
    planned
        .events
        .iter()
        .filter(|e| e.target == EventTarget::Node(node.into()) && e.reason == reason)
        .map(|e| e.message.as_str())
        .collect()
}

fn record(sim: &Sim, node: &str) -> Option<String> {
    sim.node(node)
        .annotations
        .get(&keys::SKYHOOK.ready_gate_annotation(NAME))
        .map(str::to_owned)
}

#[test]
fn a_node_stays_cordoned_in_its_slot_until_its_condition_turns_true_after_the_interrupt() {
    let mut sim = sim(true);
    let before_interrupt = sim.now - SignedDuration::from_secs(1);
    // True since before the interrupt: says nothing about the node after it.
    set_gpu_healthy(&mut sim, "node-0", true, before_interrupt);
    until_held(&mut sim);
    for _ in 0..5 {
        sim.step();
        sim.settle(|_| false);
        assert!(sim.node("node-0").unschedulable, "node-0 stays cordoned");
        assert_eq!(
            sim.node_status(NAME, "node-0").as_deref(),
            Some("in_progress")
        );
        assert!(
            sim.state(NAME, "node-1").is_empty() && !sim.node("node-1").unschedulable,
            "node-0 keeps the only slot"
        );
    }
    let (reason, message) = held(&sim).expect("held");
    assert_eq!(reason, keys::READINESS_GATE_WAITING_REASON);
    assert!(
        message.starts_with(
            "node node-0 waits for GpuHealthy (True only since before the interrupt) until "
        ),
        "{message}"
    );
    assert!(record(&sim, "node-0").is_some_and(|r| r.contains("waitingSince")));

    let now = sim.now;
    set_gpu_healthy(&mut sim, "node-0", true, now);
    let planned = sim.step();
    assert_eq!(node_events(&planned, "node-0", "ReadinessGateMet").len(), 1);
    assert_eq!(sim.node_status(NAME, "node-0").as_deref(), Some("complete"));
    assert!(
        !sim.node("node-0").unschedulable,
        "released once the gate is met"
    );
    assert_eq!(
        record(&sim, "node-0"),
        None,
        "the record goes with the wait"
    );
    assert_eq!(held(&sim), None);
    // node-1 now rolls, and is held in turn.
    until_held(&mut sim);
    assert!(sim.node("node-1").unschedulable);
}

#[test]
fn past_its_timeout_the_node_is_erroring_still_cordoned_and_completes_when_the_condition_comes() {
    let mut sim = sim(true);
    until_held(&mut sim);
    sim.now += SignedDuration::from_mins(11);
    let planned = sim.step();
    let events = node_events(&planned, "node-0", "ReadinessGateTimedOut");
    assert_eq!(
        events,
        [
            "Skyhook [gated]: readiness gate timed out: GpuHealthy (not reported); the node is erroring and stays cordoned until each condition is True"
        ]
    );
    assert_eq!(sim.node_status(NAME, "node-0").as_deref(), Some("erroring"));
    // As for a failed package: erroring beside a node not started yet aggregates to unknown.
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Unknown));
    assert!(sim.node("node-0").unschedulable);
    let erroring = keys::SKYHOOK.node_erroring_condition(NAME);
    assert!(
        sim.node("node-0")
            .conditions
            .iter()
            .any(|c| c.type_ == erroring && c.status == "True")
    );
    let (reason, message) = held(&sim).expect("held");
    assert_eq!(reason, keys::READINESS_GATE_TIMED_OUT_REASON);
    assert!(message.contains("timed out at"), "{message}");
    // Reported once per wait.
    let again = sim.step();
    assert!(node_events(&again, "node-0", "ReadinessGateTimedOut").is_empty());
    assert!(sim.state(NAME, "node-1").is_empty(), "node-1 waits");

    let now = sim.now;
    set_gpu_healthy(&mut sim, "node-0", true, now);
    sim.step();
    assert_eq!(sim.node_status(NAME, "node-0").as_deref(), Some("complete"));
    assert!(!sim.node("node-0").unschedulable);
}

#[test]
fn the_plan_wakes_itself_at_the_deadline() {
    let mut sim = sim(true);
    until_held(&mut sim);
    let planned = sim.step();
    let wake = planned.requeue_after.expect("a wake-up");
    assert!(
        wake <= std::time::Duration::from_secs(600) && wake > std::time::Duration::from_secs(590),
        "{wake:?}"
    );
}

#[test]
fn a_node_completed_without_an_interrupt_is_not_gated() {
    let mut sim = sim(false);
    sim.run(60);
    for n in NODES {
        assert_eq!(sim.node_status(NAME, n).as_deref(), Some("complete"), "{n}");
        assert_eq!(record(&sim, n), None);
    }
    assert_eq!(held(&sim), None);
}
