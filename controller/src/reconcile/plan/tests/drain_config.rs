//! `spec.drainConfig` (upstream v0.18-v0.20) as plans over the sim: the drain start, the
//! `drainBlocked_` record and `DrainBlocked` condition, a budget refusal as a wait, deletion
//! instead of eviction, a foreign cordon left in place, and the timeout that turns the node
//! `erroring` and keeps it cordoned.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use skyhook_api::drain::{BlockReason, BlockedPod};
use skyhook_api::keys;
use skyhook_api::v1alpha1::{Skyhook, Stage, State};

use super::sim::{Sim, node, rebooting, skyhook, workload};
use crate::drain::refusals::{EvictionOutcome, EvictionRefusals};
use crate::reconcile::plan::EventTarget;

const SKYHOOK: &str = "dc";

fn with_drain_config(yaml: &str) -> Skyhook {
    let mut sky = skyhook(SKYHOOK, vec![rebooting()]);
    sky.spec.drain_config = Some(serde_yaml::from_str(yaml).expect("a drainConfig"));
    sky
}

/// A pod a ReplicaSet controls, so that `force: false` lets it go.
fn managed(name: &str, node: &str) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = workload(name, node, &[]);
    pod.metadata.owner_references = Some(vec![OwnerReference {
        kind: "ReplicaSet".into(),
        name: "rs".into(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    pod
}

fn condition(sim: &Sim, type_: &str) -> Option<(String, String, String)> {
    sim.skyhook(SKYHOOK)
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn annotation(sim: &Sim, node: &str, key: &str) -> Option<String> {
    sim.node(node).annotations.get(key).map(str::to_owned)
}

#[test]
fn an_unmanaged_pod_blocks_with_force_false_and_is_named() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![with_drain_config("{force: false}")],
    );
    sim.snapshot
        .workload_pods
        .insert("worker".into(), vec![workload("lonely", "worker", &[])]);
    sim.step();
    let planned = sim.step();
    assert!(
        planned.evictions.is_empty(),
        "an unmanaged pod is not evicted"
    );
    let blocked = annotation(
        &sim,
        "worker",
        &keys::SKYHOOK.drain_blocked_annotation(SKYHOOK),
    );
    assert_eq!(
        blocked.as_deref(),
        Some(r#"[{"namespace":"default","name":"lonely","reason":"UnmanagedPod"}]"#)
    );
    assert!(
        annotation(
            &sim,
            "worker",
            &keys::SKYHOOK.drain_start_annotation(SKYHOOK)
        )
        .is_some(),
        "the drain's start is stamped"
    );
    assert_eq!(
        condition(&sim, keys::CONDITION_DRAIN_BLOCKED),
        Some((
            "True".into(),
            "UnmanagedPod".into(),
            "1/1 nodes blocked draining (worker); default/lonely on worker: UnmanagedPod".into()
        ))
    );
    assert!(sim.pods().is_empty(), "nothing runs on an undrained node");

    // The pod goes: the drain completes, its keys and the condition go with it.
    sim.snapshot.workload_pods.insert("worker".into(), vec![]);
    sim.step();
    sim.step();
    for key in [
        keys::SKYHOOK.drain_blocked_annotation(SKYHOOK),
        keys::SKYHOOK.drain_start_annotation(SKYHOOK),
    ] {
        assert_eq!(annotation(&sim, "worker", &key), None, "{key}");
    }
    assert_eq!(condition(&sim, keys::CONDITION_DRAIN_BLOCKED), None);
    assert_eq!(sim.pods().len(), 1, "the apply runs on the drained node");
}

#[test]
fn disable_eviction_deletes_with_the_grace_period_rounded_up() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![with_drain_config(
            "{disableEviction: true, gracePeriod: 1500ms}",
        )],
    );
    sim.snapshot
        .workload_pods
        .insert("worker".into(), vec![managed("web", "worker")]);
    sim.step();
    let planned = sim.step();
    assert_eq!(planned.evictions.len(), 1);
    assert!(planned.evictions[0].delete);
    assert_eq!(planned.evictions[0].grace_period_seconds, Some(2));
    assert!(
        planned
            .events
            .iter()
            .any(|e| (e.reason, e.action, e.warning) == ("Drain", "DrainNode", false))
    );
}

#[test]
fn a_budget_refusal_is_a_wait_of_thirty_seconds_for_that_node_only() {
    let mut sim = Sim::new(
        vec![node("a", 0), node("b", 1)],
        vec![with_drain_config("{}")],
    );
    for name in ["a", "b"] {
        sim.snapshot
            .workload_pods
            .insert(name.into(), vec![managed(&format!("web-{name}"), name)]);
    }
    sim.step();
    let refused_at = sim.now;
    let planned = sim.step();
    assert_eq!(planned.evictions.len(), 2);
    // node a's eviction is refused (the pod stays), node b's accepted.
    let mut refusals = EvictionRefusals::default();
    refusals.record(
        &[
            EvictionOutcome {
                node: "a".into(),
                namespace: "default".into(),
                name: "web-a".into(),
                refused: Some(
                    "Cannot evict pod as it would violate the pod's disruption budget.".into(),
                ),
            },
            EvictionOutcome {
                node: "b".into(),
                namespace: "default".into(),
                name: "web-b".into(),
                refused: None,
            },
        ],
        refused_at,
    );
    sim.snapshot.refusals = refusals;
    sim.snapshot
        .workload_pods
        .insert("a".into(), vec![managed("web-a", "a")]);
    let planned = sim.step();
    assert!(
        planned.evictions.is_empty(),
        "node a waits before trying again: {:?}",
        planned.evictions
    );
    assert_eq!(sim.pods().len(), 1, "node b goes on: {:?}", sim.pods());
    let (status, reason, message) =
        condition(&sim, keys::CONDITION_DRAIN_BLOCKED).expect("DrainBlocked");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "PodDisruptionBudget")
    );
    assert!(
        message.starts_with("1/2 nodes blocked draining (a); default/web-a on a: Cannot evict pod"),
        "{message}"
    );
    let blocked: Vec<BlockedPod> = serde_json::from_str(
        &annotation(&sim, "a", &keys::SKYHOOK.drain_blocked_annotation(SKYHOOK))
            .unwrap_or_default(),
    )
    .expect("the annotation is JSON");
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0].reason, BlockReason::PodDisruptionBudget);
    // 30 s later node a tries again.
    sim.now = refused_at + jiff::SignedDuration::from_secs(30);
    sim.snapshot
        .workload_pods
        .insert("a".into(), vec![managed("web-a", "a")]);
    let planned = sim.step();
    assert_eq!(planned.evictions.len(), 1, "{:?}", planned.evictions);
    assert_eq!(planned.evictions[0].node, "a");
}

#[test]
fn a_timeout_turns_the_node_erroring_and_keeps_it_cordoned() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![with_drain_config("{force: false, timeout: 1m}")],
    );
    sim.snapshot
        .workload_pods
        .insert("worker".into(), vec![workload("lonely", "worker", &[])]);
    sim.step();
    sim.step();
    sim.now += jiff::SignedDuration::from_secs(61);
    let planned = sim.step();
    assert_eq!(
        sim.state(SKYHOOK, "worker"),
        [("dexter|1.2.3".to_owned(), Stage::Apply, State::Erroring)]
    );
    assert_eq!(
        sim.node_status(SKYHOOK, "worker").as_deref(),
        Some("erroring")
    );
    assert!(sim.node("worker").unschedulable, "the node stays cordoned");
    let timed_out: Vec<_> = planned
        .events
        .iter()
        .filter(|e| (e.reason, e.action, e.warning) == ("Drain", "DrainTimeout", true))
        .collect();
    assert_eq!(
        timed_out.len(),
        2,
        "on the node and the Skyhook: {timed_out:?}"
    );
    assert!(
        timed_out[0]
            .message
            .starts_with("drain timed out after [1m0s] for node [worker] package [dexter:1.2.3]"),
        "{}",
        timed_out[0].message
    );
    assert!(planned.evictions.is_empty());
    assert_eq!(
        condition(&sim, keys::SKYHOOK.condition_drain_blocked).map(|c| c.0),
        Some("True".to_owned()),
        "our timeout report (and its metric) covers drainConfig's timeout too"
    );
}

#[test]
fn no_timeout_by_default_even_past_drain_timeout() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![with_drain_config("{force: false}")],
    );
    sim.snapshot
        .workload_pods
        .insert("worker".into(), vec![workload("lonely", "worker", &[])]);
    sim.step();
    sim.step();
    sim.now += jiff::SignedDuration::from_secs(24 * 3600);
    sim.step();
    assert!(
        sim.state(SKYHOOK, "worker")
            .iter()
            .all(|(_, _, s)| *s != State::Erroring)
    );
    assert_eq!(
        condition(&sim, keys::SKYHOOK.condition_drain_blocked),
        None,
        "our timeout report belongs to the deprecated spec.drain"
    );
}

#[test]
fn a_foreign_cordon_is_drained_without_taking_it_and_left_in_place() {
    let mut cordoned = node("worker", 0);
    cordoned.unschedulable = true;
    let mut sim = Sim::new(vec![cordoned], vec![with_drain_config("{}")]);
    // Not listed yet: the drain's start is what has the node's pods listed.
    sim.step();
    assert!(
        annotation(
            &sim,
            "worker",
            &keys::SKYHOOK.drain_start_annotation(SKYHOOK)
        )
        .is_some()
    );
    sim.snapshot
        .workload_pods
        .insert("worker".into(), vec![managed("web", "worker")]);
    let planned = sim.step();
    assert_eq!(
        planned.evictions.len(),
        1,
        "drained without a cordon of ours"
    );
    assert_eq!(
        annotation(&sim, "worker", &keys::SKYHOOK.cordon_annotation(SKYHOOK)),
        None
    );
    let steps = sim.run(40);
    assert!(!steps.is_empty());
    assert_eq!(
        sim.node_status(SKYHOOK, "worker").as_deref(),
        Some("complete")
    );
    assert!(
        sim.node("worker").unschedulable,
        "someone else's cordon stays after the work"
    );
    assert!(
        !sim.node("worker")
            .annotations
            .keys()
            .any(|k| k.starts_with(keys::SKYHOOK.cordon_annotation_prefix))
    );
}

/// One node's patch of a new batch is refused (its node changed since the cache read it: here
/// kube-controller-manager's `node.kubernetes.io/unschedulable` taint after an administrator's
/// cordon), while the other two nodes' land and their drains then block. A plan with a refused
/// node patch writes no status, so the refused node's pick lived nowhere: it was left out of
/// its own batch and waited for a next batch that could not start (found by a CI run).
#[test]
fn a_node_whose_pick_was_refused_stays_in_its_batch() {
    for foreign_cordon in [true, false] {
        let mut restarter = super::sim::package("restarter", "1.1.1");
        restarter.interrupt =
            Some(serde_yaml::from_str("{type: service, services: [cron]}").expect("an interrupt"));
        let mut sky = skyhook(SKYHOOK, vec![restarter]);
        sky.spec.drain_config =
            Some(serde_yaml::from_str("{force: false}").expect("a drainConfig"));
        let mut second = node("node-2", 1);
        second.unschedulable = foreign_cordon;
        let mut sim = Sim::new(
            vec![node("node-1", 0), second, node("node-3", 2)],
            vec![sky],
        );
        sim.snapshot
            .workload_pods
            .insert("node-1".into(), vec![workload("lonely", "node-1", &[])]);
        sim.snapshot
            .workload_pods
            .insert("node-3".into(), vec![workload("lonely-too", "node-3", &[])]);
        sim.step_losing_node_writes(&["node-2"]);
        sim.snapshot
            .workload_pods
            .insert("node-2".into(), vec![managed("slow", "node-2")]);
        let mut evicted = Vec::new();
        for _ in 0..5 {
            evicted.extend(sim.step().evictions.into_iter().map(|e| e.node));
        }
        assert!(
            evicted.iter().any(|node| node == "node-2"),
            "foreign cordon {foreign_cordon}: node-2 is drained in its batch: {evicted:?} {:?} {:?}",
            sim.node("node-2").annotations,
            sim.state(SKYHOOK, "node-2")
        );
        assert!(
            (sim.node("node-2").annotations)
                .get(&keys::SKYHOOK.node_picked_annotation(SKYHOOK))
                .is_some(),
            "the pick reached the node"
        );
        assert_eq!(
            annotation(&sim, "node-2", &keys::SKYHOOK.cordon_annotation(SKYHOOK)).is_some(),
            !foreign_cordon,
            "a foreign cordon is not taken over"
        );
    }
}

#[test]
fn non_interrupt_pods_hold_the_node_with_a_blocked_condition_announced_once() {
    let mut sky = with_drain_config("{}");
    sky.spec.pod_non_interrupt_labels =
        Some(serde_yaml::from_str("matchLabels: {critical: 'yes'}").expect("a selector"));
    let mut sim = Sim::new(vec![node("worker", 0)], vec![sky]);
    sim.snapshot.workload_pods.insert(
        "worker".into(),
        vec![workload("training", "worker", &[("critical", "yes")])],
    );
    sim.step();
    let first = sim.step();
    assert_eq!(
        condition(&sim, keys::CONDITION_BLOCKED),
        Some((
            "True".into(),
            "NonInterruptPodsRunning".into(),
            "1 node blocked by non-interrupt pods (worker). Waiting.".into()
        ))
    );
    let announced = |plan: &crate::reconcile::plan::Plan| {
        plan.events
            .iter()
            .filter(|e| {
                (e.reason, e.action, e.warning) == ("Drain", "NonInterruptPodsRunning", true)
                    && e.target == EventTarget::Skyhook(SKYHOOK.to_owned())
            })
            .count()
    };
    assert_eq!(announced(&first), 1, "{:?}", first.events);
    let again = sim.step();
    assert_eq!(
        announced(&again),
        0,
        "only on the transition: {:?}",
        again.events
    );
    sim.snapshot.workload_pods.insert("worker".into(), vec![]);
    sim.step();
    assert_eq!(condition(&sim, keys::CONDITION_BLOCKED), None);
}

#[test]
fn a_node_with_malformed_node_state_keeps_its_last_blockers() {
    let mut broken = node("worker", 0);
    broken
        .annotations
        .insert(keys::SKYHOOK.node_state_annotation(SKYHOOK), "{not json");
    broken.annotations.insert(
        keys::SKYHOOK.drain_blocked_annotation(SKYHOOK),
        r#"[{"namespace":"default","name":"lonely","reason":"UnmanagedPod"}]"#,
    );
    let mut sim = Sim::new(vec![broken], vec![with_drain_config("{force: false}")]);
    sim.step();
    let (status, reason, message) =
        condition(&sim, keys::CONDITION_DRAIN_BLOCKED).expect("DrainBlocked kept");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "UnmanagedPod"));
    assert!(
        message.contains("default/lonely on worker: UnmanagedPod"),
        "{message}"
    );
}
