//! Issue #17 items 1 and 2: `spec.drain` (which pods a drain leaves, its timeout, giving up
//! with `onTimeout: fail`) and `spec.onFailure.uncordon`, as plans over the sim.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use skyhook_api::keys;
use skyhook_api::v1alpha1::{
    DrainSpec, DrainTimeoutAction, InterruptionBudget, OnFailure, Skyhook, Stage, State,
};

use super::sim::{Sim, node, rebooting, skyhook, workload};
use crate::pod_outcome::PodOutcome;
use crate::reconcile::plan::Eviction;

const TWO_MINUTES: jiff::SignedDuration = jiff::SignedDuration::from_secs(120);

fn with_drain(drain: DrainSpec) -> Skyhook {
    let mut sky = skyhook("safe", vec![rebooting()]);
    sky.spec.drain = Some(drain);
    sky
}

fn daemon_set_pod(name: &str, node: &str) -> Pod {
    let mut pod = workload(name, node, &[]);
    pod.metadata.owner_references = Some(vec![OwnerReference {
        kind: "DaemonSet".into(),
        name: "agent".into(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    pod
}

fn selector(key: &str, value: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some([(key.to_owned(), value.to_owned())].into()),
        match_expressions: None,
    }
}

/// A drain that a PodDisruptionBudget refuses: the sim drops evicted pods, so the test puts
/// the pod back after every step.
fn step_with_stuck_pod(sim: &mut Sim, node: &str) -> crate::reconcile::plan::Plan {
    let planned = sim.step();
    sim.snapshot
        .workload_pods
        .insert(node.into(), vec![workload("stuck", node, &[])]);
    planned
}

#[test]
fn a_drain_leaves_selected_and_daemon_set_pods_and_evicts_with_the_grace_period() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![with_drain(DrainSpec {
            pod_selector: Some(selector("keep", "yes")),
            grace_period_seconds: Some(5),
            ..DrainSpec::default()
        })],
    );
    let pods = vec![
        workload("web", "worker", &[]),
        workload("pinned", "worker", &[("keep", "yes")]),
        daemon_set_pod("agent", "worker"),
    ];
    sim.snapshot.workload_pods.insert("worker".into(), pods);
    sim.step();
    let planned = sim.step();
    assert_eq!(
        planned.evictions,
        [Eviction {
            namespace: "default".into(),
            name: "web".into(),
            node: "worker".into(),
            grace_period_seconds: Some(5),
            delete: false,
        }]
    );
    let planned = sim.step();
    assert_eq!(
        planned.create_pods.len(),
        1,
        "the apply starts on the drained node"
    );
    assert!(sim.node("worker").unschedulable);
}

#[test]
fn a_drain_timeout_of_the_skyhook_overrides_the_controllers() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![with_drain(DrainSpec {
            timeout: Some("1m".into()),
            ..DrainSpec::default()
        })],
    );
    sim.snapshot.workload_pods.insert("worker".into(), vec![]);
    step_with_stuck_pod(&mut sim, "worker");
    step_with_stuck_pod(&mut sim, "worker");
    sim.now += TWO_MINUTES;
    let planned = step_with_stuck_pod(&mut sim, "worker");
    assert!(
        planned.events.iter().any(|e| e.reason == "DrainBlocked"),
        "blocked after 1m although DRAIN_TIMEOUT is 10m: {:?}",
        planned.events
    );
    assert!(
        sim.node("worker").unschedulable,
        "onTimeout: wait keeps the node"
    );
    assert!(
        sim.state("safe", "worker")
            .iter()
            .all(|(_, _, s)| *s != State::Erroring)
    );
}

#[test]
fn on_timeout_fail_marks_the_package_erroring_and_gives_the_slot_to_the_next_node() {
    let mut sky = with_drain(DrainSpec {
        timeout: Some("1m".into()),
        on_timeout: Some(DrainTimeoutAction::Fail),
        ..DrainSpec::default()
    });
    sky.spec.interruption_budget = Some(InterruptionBudget {
        count: Some(1),
        percent: None,
        topology: None,
    });
    let mut sim = Sim::new(vec![node("first", 0), node("second", 1)], vec![sky]);
    sim.snapshot.workload_pods.insert("second".into(), vec![]);
    sim.snapshot.workload_pods.insert("first".into(), vec![]);
    step_with_stuck_pod(&mut sim, "first");
    step_with_stuck_pod(&mut sim, "first");
    assert!(!sim.node("second").unschedulable, "one node at a time");
    sim.now += TWO_MINUTES;
    let planned = step_with_stuck_pod(&mut sim, "first");
    let failed = planned
        .events
        .iter()
        .find(|e| e.reason == "DrainFailed")
        .expect("a DrainFailed Event");
    assert!(
        failed.warning && failed.message.contains("default/stuck"),
        "{}",
        failed.message
    );
    let first = sim.node("first");
    assert!(!first.unschedulable);
    assert!(
        !first
            .annotations
            .contains_key(&keys::SKYHOOK.cordon_annotation("safe"))
    );
    assert!(
        first
            .annotations
            .contains_key(&keys::SKYHOOK.drain_failed_annotation("safe"))
    );
    assert_eq!(
        sim.state("safe", "first"),
        [("dexter|1.2.3".to_owned(), Stage::Apply, State::Erroring)]
    );
    assert_eq!(
        sim.node_status("safe", "first").as_deref(),
        Some("erroring")
    );
    step_with_stuck_pod(&mut sim, "first");
    assert!(
        sim.node("second").unschedulable,
        "the released slot goes to the next node"
    );
    assert!(!sim.node("first").unschedulable);
}

#[test]
fn on_failure_uncordon_releases_an_erroring_node_and_cordons_again_to_interrupt() {
    for uncordon in [false, true] {
        let mut sky = skyhook("safe", vec![rebooting()]);
        sky.spec.on_failure = Some(OnFailure { uncordon });
        let mut sim = Sim::new(vec![node("worker", 0)], vec![sky]);
        sim.snapshot.workload_pods.insert("worker".into(), vec![]);
        sim.step();
        sim.step();
        assert_eq!(sim.pods().len(), 1, "the apply runs on the drained node");
        sim.settle(|_| true);
        sim.step();
        assert_eq!(
            sim.node_status("safe", "worker").as_deref(),
            Some("erroring")
        );
        assert_eq!(
            sim.node("worker").unschedulable,
            !uncordon,
            "uncordon: {uncordon}"
        );
        // The pod retries and succeeds: the interrupt cordons and drains again first.
        for pod in &mut sim.snapshot.pods {
            pod.outcome = PodOutcome::Succeeded {
                container: "check".into(),
                restarts: 1,
            };
        }
        let mut interrupted_on_cordoned_node = false;
        for _ in 0..6 {
            let planned = sim.step();
            if planned.created_pods().iter().any(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(keys::SKYHOOK.interrupt_label))
            }) {
                interrupted_on_cordoned_node = sim.node("worker").unschedulable;
                break;
            }
            sim.settle(|_| false);
        }
        assert!(interrupted_on_cordoned_node, "uncordon: {uncordon}");
    }
}
