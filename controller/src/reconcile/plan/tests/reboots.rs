//! Reboots and the budget: a rebooting node keeps its slot while kube-controller-manager taints
//! it, a node that does not come back is reported and keeps its slot, a lost interrupt pod is
//! noticed, and a version bump marks only the nodes being worked on `in_progress`.

use std::sync::Arc;

use skyhook_api::keys;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, InterruptionBudget, Stage, State, Status};

use super::sim::{Sim, node, package, skyhook, taint};
use crate::pod_outcome::{PodFailure, PodOutcome, REBOOT_NOT_CONFIRMED};
use crate::reconcile::plan::{EventTarget, Plan};

const NAME: &str = "reboots";

/// Three nodes, budget 1, one package that reboots.
fn rollout() -> Sim {
    let mut driver = package("driver", "1.0.0");
    driver.interrupt = Some(Interrupt {
        type_: InterruptType::Reboot,
        services: Vec::new(),
    });
    let mut s = skyhook(NAME, vec![driver]);
    s.spec.interruption_budget = Some(InterruptionBudget {
        count: Some(1),
        percent: None,
        topology: None,
    });
    let nodes = vec![node("node-0", 0), node("node-1", 1), node("node-2", 2)];
    let mut sim = Sim::new(nodes, vec![s]);
    for n in ["node-0", "node-1", "node-2"] {
        sim.snapshot.workload_pods.insert(n.into(), Vec::new());
    }
    sim
}

/// Steps and settles until node-0's interrupt pod exists.
fn until_interrupt(sim: &mut Sim) {
    for _ in 0..20 {
        sim.step();
        if sim.snapshot.pods.iter().any(|p| p.interrupt) {
            return;
        }
        sim.settle(|_| false);
    }
    panic!("no interrupt pod after 20 steps: {:?}", sim.pods());
}

fn view_mut<'s>(sim: &'s mut Sim, name: &str) -> &'s mut crate::reconcile::snapshot::NodeView {
    sim.snapshot
        .nodes
        .iter_mut()
        .map(Arc::make_mut)
        .find(|n| n.name == name)
        .expect("a known node")
}

/// The node went down for its reboot: NotReady and tainted by kube-controller-manager.
fn go_down(sim: &mut Sim, name: &str, since_secs: i64) {
    let now = sim.now;
    let view = view_mut(sim, name);
    view.ready = false;
    view.not_ready_since = Some(now - jiff::SignedDuration::from_secs(since_secs));
    view.taints
        .push(taint("node.kubernetes.io/not-ready", None));
    let mut unreachable = taint("node.kubernetes.io/unreachable", None);
    unreachable.effect = "NoExecute".into();
    view.taints.push(unreachable);
}

fn come_back(sim: &mut Sim, name: &str) {
    let view = view_mut(sim, name);
    view.ready = true;
    view.not_ready_since = None;
    view.boot_id = Some("boot-2".into());
    view.taints.retain(|t| {
        !t.key.starts_with("node.kubernetes.io/not-ready")
            && t.key != "node.kubernetes.io/unreachable"
    });
}

/// Nodes with a pod, cordoned, or `in_progress`.
fn busy(sim: &Sim) -> Vec<String> {
    sim.snapshot
        .nodes
        .iter()
        .filter(|n| {
            n.unschedulable
                || sim.snapshot.pods.iter().any(|p| p.node == n.name)
                || sim.node_status(NAME, &n.name).as_deref() == Some("in_progress")
        })
        .map(|n| n.name.clone())
        .collect()
}

fn warnings<'p>(planned: &'p Plan, reason: &str) -> Vec<&'p str> {
    planned
        .events
        .iter()
        .filter(|e| e.warning && e.reason == reason)
        .map(|e| e.message.as_str())
        .collect()
}

fn reboot_condition(sim: &Sim) -> Option<String> {
    sim.true_condition(NAME, keys::SKYHOOK.condition_reboot_not_confirmed)
        .map(|c| c.message.clone())
}

#[test]
fn a_rebooting_node_keeps_its_budget_slot_while_it_is_tainted_not_ready() {
    let mut sim = rollout();
    until_interrupt(&mut sim);
    go_down(&mut sim, "node-0", 5);
    for pod in &mut sim.snapshot.pods {
        pod.outcome = PodOutcome::AwaitingReboot {
            deadline: sim.now + jiff::SignedDuration::from_mins(30),
        };
    }
    for _ in 0..5 {
        sim.step();
        assert_eq!(
            busy(&sim),
            ["node-0"],
            "nothing else starts while node-0 is down"
        );
        assert_eq!(
            sim.node_status(NAME, "node-0").as_deref(),
            Some("in_progress")
        );
    }
    // Back with a new boot ID: the interrupt is confirmed and the rollout goes on.
    come_back(&mut sim, "node-0");
    sim.settle(|_| false);
    for pod in &mut sim.snapshot.pods {
        pod.outcome = PodOutcome::Succeeded {
            container: "interrupt".into(),
            restarts: 0,
        };
    }
    sim.run(60);
    assert!(
        sim.snapshot
            .nodes
            .iter()
            .all(|n| sim.node_status(NAME, &n.name).as_deref() == Some("complete")),
        "{:?}",
        busy(&sim)
    );
}

#[test]
fn a_reboot_not_confirmed_is_reported_and_keeps_the_slot() {
    let mut sim = rollout();
    until_interrupt(&mut sim);
    go_down(&mut sim, "node-0", 31 * 60);
    let requested = sim.now - jiff::SignedDuration::from_mins(31);
    for pod in &mut sim.snapshot.pods {
        pod.outcome = PodOutcome::Failed(PodFailure {
            container: Some("interrupt".into()),
            exit_code: None,
            reason: REBOOT_NOT_CONFIRMED.into(),
            message: Some("the node was asked to reboot 31m ago".into()),
            restarts: 0,
            reboot_requested: Some(requested),
        });
    }
    let planned = sim.step();
    let events = warnings(&planned, "RebootNotConfirmed");
    assert_eq!(events.len(), 1, "{:?}", planned.events);
    assert!(
        events[0].contains("node-0")
            && events[0].contains("driver:1.0.0")
            && events[0].contains("31m ago"),
        "{}",
        events[0]
    );
    assert!(
        matches!(&planned.events.iter().find(|e| e.reason == "RebootNotConfirmed").map(|e| &e.target), Some(EventTarget::Node(n)) if n == "node-0")
    );
    let message = reboot_condition(&sim).expect("the condition is set");
    assert!(
        message.contains("node-0 (package driver:1.0.0"),
        "{message}"
    );
    assert_eq!(sim.node_status(NAME, "node-0").as_deref(), Some("erroring"));
    for _ in 0..5 {
        let planned = sim.step();
        assert!(
            warnings(&planned, "RebootNotConfirmed").is_empty(),
            "reported once"
        );
        assert_eq!(busy(&sim), ["node-0"], "the rollout waits for node-0");
    }
    assert!(reboot_condition(&sim).is_some(), "the condition stays");
}

#[test]
fn a_lost_interrupt_pod_on_a_dead_node_is_reported_then_recreated_when_it_is_back() {
    let mut sim = rollout();
    until_interrupt(&mut sim);
    go_down(&mut sim, "node-0", 60);
    sim.snapshot.pods.retain(|p| !p.interrupt);
    let planned = sim.step();
    let lost = warnings(&planned, "Interrupt");
    assert_eq!(lost.len(), 1, "{:?}", planned.events);
    assert!(
        lost[0].contains("is gone while the node is NotReady"),
        "{}",
        lost[0]
    );
    assert_eq!(
        sim.state(NAME, "node-0"),
        vec![("driver|1.0.0".to_owned(), Stage::Interrupt, State::Erroring)]
    );
    assert_eq!(
        planned.requeue_after,
        Some(std::time::Duration::from_secs(29 * 60)),
        "look again when the reboot deadline passes"
    );
    assert!(reboot_condition(&sim).is_none());
    assert_eq!(busy(&sim), ["node-0"]);

    sim.now += jiff::SignedDuration::from_mins(30);
    let planned = sim.step();
    assert_eq!(warnings(&planned, "RebootNotConfirmed").len(), 1);
    assert!(reboot_condition(&sim).is_some());
    assert_eq!(busy(&sim), ["node-0"], "still holding the only slot");

    come_back(&mut sim, "node-0");
    let planned = sim.step();
    assert_eq!(
        planned.create_pods.len(),
        1,
        "the interrupt pod is created again"
    );
    assert!(
        sim.snapshot
            .pods
            .iter()
            .any(|p| p.interrupt && p.node == "node-0")
    );
    assert!(reboot_condition(&sim).is_none(), "the node is back");
}

#[test]
fn a_version_bump_marks_only_the_nodes_being_worked_on_in_progress() {
    let mut sim = rollout();
    if let Some(driver) = sim.skyhook_mut(NAME).spec.packages.get_mut("driver") {
        driver.interrupt = None;
    }
    sim.run(60);
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Complete));
    if let Some(driver) = sim.skyhook_mut(NAME).spec.packages.get_mut("driver") {
        driver.version = "1.0.1".into();
    }
    sim.step();
    let statuses: Vec<Option<String>> = ["node-0", "node-1", "node-2"]
        .iter()
        .map(|n| sim.node_status(NAME, n))
        .collect();
    assert_eq!(
        statuses,
        [
            Some("in_progress".to_owned()),
            Some("waiting".to_owned()),
            Some("waiting".to_owned())
        ]
    );
}

#[test]
fn a_paused_skyhook_leaves_a_lost_interrupt_alone_until_it_resumes() {
    let mut sim = rollout();
    until_interrupt(&mut sim);
    go_down(&mut sim, "node-0", 60);
    sim.snapshot.pods.retain(|p| !p.interrupt);
    sim.skyhook_mut(NAME)
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(keys::SKYHOOK.pause_annotation.to_owned(), "true".to_owned());
    let planned = sim.step();
    assert!(
        warnings(&planned, "Interrupt").is_empty(),
        "{:?}",
        planned.events
    );
    assert_eq!(
        sim.state(NAME, "node-0"),
        vec![(
            "driver|1.0.0".to_owned(),
            Stage::Interrupt,
            State::InProgress
        )]
    );
    sim.skyhook_mut(NAME)
        .metadata
        .annotations
        .get_or_insert_default()
        .remove(keys::SKYHOOK.pause_annotation);
    let planned = sim.step();
    assert_eq!(
        warnings(&planned, "Interrupt").len(),
        1,
        "reported on resume"
    );
}

#[test]
fn a_reboot_deadline_of_the_skyhook_overrides_the_controllers() {
    let mut sim = rollout();
    sim.skyhook_mut(NAME).spec.reboot_deadline = Some("5m".into());
    until_interrupt(&mut sim);
    go_down(&mut sim, "node-0", 60);
    sim.snapshot.pods.retain(|p| !p.interrupt);
    let planned = sim.step();
    assert_eq!(
        planned.requeue_after,
        Some(std::time::Duration::from_secs(4 * 60)),
        "look again when the Skyhook's 5m deadline passes, not REBOOT_DEADLINE's 30m"
    );
    sim.now += jiff::SignedDuration::from_mins(5);
    let planned = sim.step();
    let events = warnings(&planned, "RebootNotConfirmed");
    assert_eq!(events.len(), 1, "{:?}", planned.events);
    assert!(
        events[0].contains("within the reboot deadline (5m)"),
        "{}",
        events[0]
    );
}
