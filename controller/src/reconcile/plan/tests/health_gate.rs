//! The health gate (issue #17 item 6): a compartment starts its next batch only once the nodes
//! the Skyhook finished have been Ready and schedulable for `settle`, never while a node it
//! worked on is NotReady; the Skyhook names the node that holds the batch, and the plan wakes
//! itself when the settle time ends.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::SignedDuration;
use skyhook_api::generation::Group;
use skyhook_api::keys;
use skyhook_api::v1alpha1::{HealthGate, Status};

use super::sim::{Sim, node, one_node_batches, package, skyhook};

const NODES: [&str; 3] = ["node-0", "node-1", "node-2"];

/// One node per batch under a policy with `gate`.
fn sim(gate: Option<HealthGate>) -> Sim {
    let policy = one_node_batches(vec![], gate);
    let mut s = skyhook("gated", vec![package("one", "1.0.0")]);
    s.spec.deployment_policy = Some("careful".into());
    let nodes = NODES.iter().zip(0..).map(|(n, i)| node(n, i)).collect();
    let mut sim = Sim::new(nodes, vec![s]);
    sim.snapshot.policies = BTreeMap::from([((Group::Skyhook, "careful".to_owned()), policy)]);
    sim
}

fn five_minutes() -> Option<HealthGate> {
    Some(HealthGate {
        settle: "5m".into(),
    })
}

fn gate_condition(sim: &Sim) -> Option<String> {
    sim.skyhook("gated")
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == keys::SKYHOOK.condition_health_gate_held)
        .map(|c| c.message.clone())
}

fn statuses(sim: &Sim) -> [String; 3] {
    NODES.map(|n| sim.node_status("gated", n).unwrap_or_default())
}

/// Steps until nothing changes in the node statuses for a few steps.
fn run_quiet(sim: &mut Sim) -> Option<Duration> {
    let mut requeue = None;
    for _ in 0..12 {
        sim.settle(|_| false);
        requeue = sim.step().requeue_after;
    }
    requeue
}

fn set_ready(sim: &mut Sim, name: &str, ready: bool) {
    let now = sim.now;
    let view = sim
        .snapshot
        .nodes
        .iter_mut()
        .map(Arc::make_mut)
        .find(|n| n.name == name)
        .expect("a known node");
    view.ready = ready;
    view.ready_since = ready.then_some(now);
    view.not_ready_since = (!ready).then_some(now);
}

#[test]
fn the_next_batch_waits_for_the_previous_one_to_settle_and_for_not_ready_nodes() {
    let mut sim = sim(five_minutes());
    let requeue = run_quiet(&mut sim);
    assert_eq!(statuses(&sim), ["complete", "waiting", "waiting"]);
    let message = gate_condition(&sim).expect("node-0 settles first");
    assert!(
        message.contains("[__default__] held by node node-0, which has not been Ready"),
        "{message}"
    );
    let wait = requeue.expect("the plan wakes when node-0 has settled");
    assert!(
        wait > Duration::from_secs(4 * 60) && wait <= Duration::from_secs(5 * 60),
        "{wait:?}"
    );

    // node-0 goes away once settled: node-1 starts, and finishes, but node-2 waits for node-0.
    sim.now += SignedDuration::try_from(wait).expect("a short wait");
    sim.step();
    assert_eq!(statuses(&sim)[1], "in_progress");
    set_ready(&mut sim, "node-0", false);
    sim.now += SignedDuration::from_hours(1);
    let requeue = run_quiet(&mut sim);
    assert_eq!(statuses(&sim), ["complete", "complete", "waiting"]);
    assert_eq!(
        gate_condition(&sim).as_deref(),
        Some(
            "health gate of DeploymentPolicy [careful]: [__default__] held by node node-0, which is NotReady; the next batch starts once the node is Ready and schedulable for spec.healthGate.settle; nodes already started finish"
        )
    );
    assert_eq!(
        requeue, None,
        "a NotReady node wakes the plan when it changes"
    );

    // node-0 is back: it must settle again before node-2 starts.
    set_ready(&mut sim, "node-0", true);
    run_quiet(&mut sim);
    assert_eq!(statuses(&sim)[2], "waiting");
    assert!(gate_condition(&sim).is_some_and(|m| m.contains("node node-0")));
    sim.now += SignedDuration::from_mins(5);
    run_quiet(&mut sim);
    assert_eq!(sim.skyhook_status("gated"), Some(Status::Complete));
    assert_eq!(gate_condition(&sim), None);
}

#[test]
fn without_a_health_gate_batches_follow_each_other_at_once() {
    let mut sim = sim(None);
    let requeue = run_quiet(&mut sim);
    assert_eq!(sim.skyhook_status("gated"), Some(Status::Complete));
    assert_eq!(requeue, None);
    assert_eq!(gate_condition(&sim), None);
}
