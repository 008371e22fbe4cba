//! Pods nobody wants any more (`skyhook_api::pod_owner`): those of a Skyhook being deleted
//! that its deletion does not wait for, and those of a Skyhook that is gone. They are removed,
//! their outcome is ignored, and they hold no other Skyhook's interrupt.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use skyhook_api::generation::Group;
use skyhook_api::keys;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, Package, Stage, State};

use super::sim::{Sim, depends, node, package, skyhook};
use crate::pod_outcome::{PodFailure, PodOutcome};
use crate::reconcile::plan::Plan;
use crate::reconcile::snapshot::Workload;

fn rebooting(name: &str) -> Package {
    Package {
        interrupt: Some(Interrupt {
            type_: InterruptType::Reboot,
            services: Vec::new(),
        }),
        ..package(name, "1.0.0")
    }
}

/// The failing package's pods report one more restart, as a crash-looping pod does.
fn restart_failing_pods(sim: &mut Sim, package: &str) {
    for pod in &mut sim.snapshot.pods {
        if pod.annotation.as_ref().is_some_and(|a| a.name == package) {
            let restarts = match &pod.outcome {
                PodOutcome::Failed(failure) => failure.restarts + 1,
                _ => 1,
            };
            pod.outcome = PodOutcome::Failed(PodFailure {
                container: Some(format!("{package}-apply")),
                exit_code: Some(2),
                reason: "CrashLoopBackOff".into(),
                message: None,
                restarts,
                reboot_requested: None,
            });
        }
    }
}

/// `stall`'s node state on `node-a` as written, restarts included.
fn state_text(sim: &Sim) -> Option<String> {
    let key = keys::SKYHOOK.node_state_annotation("stall");
    sim.node("node-a").annotations.get(&key).map(str::to_owned)
}

fn finalizer_released(sim: &Sim, name: &str) -> bool {
    (sim.skyhook(name).metadata.finalizers.iter().flatten()).all(|f| f != keys::SKYHOOK.finalizer)
}

/// `stall` installed `aa`; `bb` (after it) crash-loops at apply.
fn crash_looping() -> Sim {
    let packages = vec![
        package("aa", "1.2.3"),
        depends(package("bb", "1.2.3"), &[("aa", "1.2.3")]),
    ];
    let mut sim = Sim::new(vec![node("node-a", 0)], vec![skyhook("stall", packages)]);
    for _ in 0..10 {
        sim.step();
        sim.settle(|pod| pod.name == "bb");
    }
    assert_eq!(
        sim.state("stall", "node-a"),
        [
            ("aa|1.2.3".to_owned(), Stage::Config, State::Complete),
            ("bb|1.2.3".to_owned(), Stage::Apply, State::Erroring),
        ]
    );
    sim
}

#[test]
fn deleting_a_skyhook_whose_pod_keeps_failing_finishes() {
    let mut sim = crash_looping();
    sim.skyhook_mut("stall").metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    restart_failing_pods(&mut sim, "bb");
    let first = sim.step();
    let deleted: Vec<&String> = first.delete_pods.keys().collect();
    assert_eq!(deleted.len(), 1, "the crash-looping pod goes: {deleted:?}");
    assert!(
        first.events.iter().all(|e| e.reason != "Apply"),
        "its restarts are no longer reported: {:?}",
        first.events
    );
    // The API server still shows the pod while it terminates, still restarting.
    let mut steps = 1;
    while !finalizer_released(&sim, "stall") {
        restart_failing_pods(&mut sim, "bb");
        let planned = sim.step();
        assert!(
            planned.create_pods.is_empty(),
            "{:?}",
            planned.created_pods()
        );
        steps += 1;
        assert!(steps <= 3, "the deletion is not done after {steps} passes");
    }
    // Upstream's cleanup keeps the markers of packages without an uninstall.
    let node = sim.node("node-a");
    let left: Vec<&str> = (node.annotations.keys().chain(node.labels.keys()))
        .filter(|k| keys::SKYHOOK.is_skyhook_node_key(k, "stall"))
        .collect();
    assert_eq!(
        left,
        [
            &keys::SKYHOOK.node_state_annotation("stall"),
            &keys::SKYHOOK.node_version_annotation("stall")
        ]
    );
}

#[test]
fn a_terminating_pod_of_a_deleted_skyhook_is_neither_deleted_again_nor_recorded() {
    let mut sim = crash_looping();
    sim.skyhook_mut("stall").metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    let state_before = state_text(&sim);
    restart_failing_pods(&mut sim, "bb");
    for pod in &mut sim.snapshot.pods {
        pod.deleting = true;
    }
    let planned = sim.step();
    assert!(planned.delete_pods.is_empty(), "{:?}", planned.delete_pods);
    assert_eq!(
        state_text(&sim),
        state_before,
        "its restart is not recorded"
    );
}

/// `other` rolled out its rebooting package up to its interrupt on `node-a`, where a pod of
/// `stall` crash-loops: the interrupt waits for that pod while `stall` wants it (it would wait
/// for good).
fn interrupt_waiting_behind_stall() -> Sim {
    let mut sim = crash_looping();
    let mut other = skyhook("other", vec![rebooting("driver")]);
    other.spec.priority = 100;
    sim.snapshot
        .skyhooks
        .push(Workload::new(Group::Skyhook, other));
    sim.snapshot
        .workload_pods
        .insert("node-a".into(), Vec::new());
    for _ in 0..8 {
        let planned = sim.step();
        sim.settle(|pod| pod.name == "bb");
        assert!(
            !creates_interrupt(&planned),
            "a live Skyhook's pod holds the interrupt"
        );
    }
    // Configured, and ready for the interrupt that the crash-looping pod holds back.
    assert_eq!(
        sim.state("other", "node-a"),
        [("driver|1.0.0".to_owned(), Stage::Config, State::Complete)]
    );
    sim
}

fn creates_interrupt(planned: &Plan) -> bool {
    planned.created_pods().iter().any(|pod| {
        (pod.metadata.labels.as_ref())
            .is_some_and(|l| l.contains_key(keys::SKYHOOK.interrupt_label))
    })
}

/// Whether one of the next three plans creates an interrupt pod.
fn interrupt_created(sim: &mut Sim) -> bool {
    (0..3).any(|_| creates_interrupt(&sim.step()))
}

#[test]
fn the_pods_of_a_deleted_skyhook_hold_no_other_interrupt() {
    let mut sim = interrupt_waiting_behind_stall();
    sim.skyhook_mut("stall").metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    assert!(interrupt_created(&mut sim));
}

#[test]
fn the_pods_of_a_skyhook_that_is_gone_hold_no_interrupt_and_go() {
    let mut sim = interrupt_waiting_behind_stall();
    // Gone without its cleanup (its finalizer stripped by hand).
    sim.snapshot
        .skyhooks
        .retain(|s| s.metadata.name.as_deref() != Some("stall"));
    let state_before = state_text(&sim);
    restart_failing_pods(&mut sim, "bb");
    let first = sim.step();
    assert_eq!(first.delete_pods.len(), 1, "{:?}", first.delete_pods);
    assert_eq!(
        state_text(&sim),
        state_before,
        "its restart is not recorded"
    );
    assert!(creates_interrupt(&first) || interrupt_created(&mut sim));
}

#[test]
fn a_pod_of_a_skyhook_created_again_under_the_same_name_is_gone() {
    let mut sim = crash_looping();
    let recreated = sim.skyhook_mut("stall");
    recreated.metadata.uid = Some("uid-stall-again".to_owned());
    restart_failing_pods(&mut sim, "bb");
    let planned = sim.step();
    assert_eq!(
        planned.delete_pods.values().collect::<Vec<_>>(),
        ["its Skyhook is gone"]
    );
}
