//! Pods matching `podNonInterruptLabels` holding a node (upstream v0.20, §2.6 "Barrier"): the
//! Warning Event on each node newly held, naming the package and the pods, and the
//! `Blocked`/`NonInterruptPodsRunning` condition removed on every way the hold ends, without
//! touching a `Blocked` of another reason.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use skyhook_api::keys;
use skyhook_api::v1alpha1::{Package, Skyhook, Uninstall};

use super::sim::{Sim, depends, node, rebooting, skyhook, start, workload};
use crate::reconcile::plan::{Plan, PlannedEvent};

const SKYHOOK: &str = "hold";

fn protecting(packages: Vec<Package>) -> Skyhook {
    let mut sky = skyhook(SKYHOOK, packages);
    sky.spec.pod_non_interrupt_labels =
        Some(serde_yaml::from_str("matchLabels: {critical: 'yes'}").expect("a selector"));
    sky
}

fn protected(name: &str, node: &str) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = workload(name, node, &[("critical", "yes")]);
    pod.metadata.namespace = Some("ml".into());
    pod
}

fn hold_pods(sim: &mut Sim, node: &str, pods: &[&str]) {
    let pods = pods.iter().map(|pod| protected(pod, node)).collect();
    sim.snapshot.workload_pods.insert(node.into(), pods);
}

/// The `Blocked` condition's reason, if any.
fn blocked(sim: &Sim) -> Option<String> {
    (sim.skyhook(SKYHOOK).status.iter())
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == keys::CONDITION_BLOCKED)
        .map(|c| c.reason.clone())
}

fn hold_events(plan: &Plan) -> Vec<&PlannedEvent> {
    (plan.events.iter())
        .filter(|e| (e.reason, e.action, e.warning) == ("Drain", "NonInterruptPodsRunning", true))
        .collect()
}

fn node_hold_messages(plan: &Plan) -> Vec<(String, String)> {
    hold_events(plan)
        .into_iter()
        .filter_map(|e| match &e.target {
            crate::reconcile::plan::EventTarget::Node(node) => {
                Some((node.clone(), e.message.clone()))
            }
            crate::reconcile::plan::EventTarget::Skyhook(_) => None,
        })
        .collect()
}

/// One node, cordoned on the first plan and held from the second.
fn held(packages: Vec<Package>) -> (Sim, Plan) {
    let mut sim = Sim::new(vec![node("worker", 0)], vec![protecting(packages)]);
    hold_pods(&mut sim, "worker", &["train-b", "train-a"]);
    sim.step();
    let first = sim.step();
    assert_eq!(blocked(&sim).as_deref(), Some("NonInterruptPodsRunning"));
    (sim, first)
}

#[test]
fn each_node_newly_held_gets_one_warning_naming_the_package_and_the_pods() {
    let mut sim = Sim::new(
        vec![node("worker", 0), node("other", 1)],
        vec![protecting(vec![rebooting()])],
    );
    // `other`'s pods are not listed yet: it waits before the gate.
    hold_pods(&mut sim, "worker", &["train-b", "train-a"]);
    sim.step();
    let first = sim.step();
    assert_eq!(
        node_hold_messages(&first),
        [(
            "worker".to_owned(),
            "package [dexter:1.2.3] waits on node [worker] for non-interrupt pods \
             (ml/train-a, ml/train-b). Waiting."
                .to_owned()
        )]
    );
    assert_eq!(hold_events(&first).len(), 2, "and one on the Skyhook");
    let again = sim.step();
    assert!(hold_events(&again).is_empty(), "{:?}", again.events);

    // `other` is held too while `worker` still is: only `other` is new.
    hold_pods(&mut sim, "other", &["serve"]);
    let mut newly = Vec::new();
    for _ in 0..3 {
        newly.extend(node_hold_messages(&sim.step()));
    }
    let nodes = |messages: &[(String, String)]| {
        let mut nodes: Vec<String> = messages.iter().map(|(node, _)| node.clone()).collect();
        nodes.sort();
        nodes
    };
    assert_eq!(nodes(&newly), ["other"], "{newly:?}");

    // Holds that end (a pause) and come back are new again.
    set_annotation(&mut sim, keys::SKYHOOK.pause_annotation);
    sim.step();
    (sim.skyhook_mut(SKYHOOK)
        .metadata
        .annotations
        .get_or_insert_default())
    .remove(keys::SKYHOOK.pause_annotation);
    let back = sim.step();
    assert_eq!(nodes(&node_hold_messages(&back)), ["other", "worker"]);
}

#[test]
fn the_first_plan_of_a_process_announces_only_what_the_condition_does_not_already_say() {
    let (mut sim, _) = held(vec![rebooting()]);
    // A restarted controller (or a new leader) has no memory of the last plan.
    sim.snapshot.non_interrupt_held = None;
    let restarted = sim.step();
    assert!(hold_events(&restarted).is_empty(), "{:?}", restarted.events);

    let (mut sim, _) = held(vec![rebooting()]);
    sim.snapshot.non_interrupt_held = None;
    if let Some(status) = sim.skyhook_mut(SKYHOOK).status.as_mut() {
        status
            .conditions
            .retain(|c| c.type_ != keys::CONDITION_BLOCKED);
    }
    let restarted = sim.step();
    assert_eq!(
        node_hold_messages(&restarted).len(),
        1,
        "{:?}",
        restarted.events
    );
}

#[test]
fn more_than_ten_pods_are_cut_with_a_pointer_to_the_log_which_has_them_all() {
    let mut sim = Sim::new(vec![node("worker", 0)], vec![protecting(vec![rebooting()])]);
    let names: Vec<String> = (0..12).map(|i| format!("p{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    hold_pods(&mut sim, "worker", &names);
    sim.step();
    let first = sim.step();
    let [(_, message)] = node_hold_messages(&first)
        .try_into()
        .expect("one node Event");
    assert!(
        message.contains("ml/p09 (list truncated; see controller logs)")
            && !message.contains("p10"),
        "{message}"
    );
    let hold = &first.non_interrupt_holds[&(SKYHOOK.to_owned(), "worker".to_owned())];
    assert!(hold.announced);
    assert_eq!(hold.pods.len(), 12);
}

fn set_annotation(sim: &mut Sim, key: &str) {
    (sim.skyhook_mut(SKYHOOK)
        .metadata
        .annotations
        .get_or_insert_default())
    .insert(key.to_owned(), "true".to_owned());
}

fn complete_on_worker(sim: &mut Sim) {
    let state = r#"{"dexter|1.2.3":{"name":"dexter","version":"1.2.3","image":"","stage":"post-interrupt","state":"complete"}}"#;
    let worker = (sim.snapshot.nodes.iter_mut())
        .map(Arc::make_mut)
        .find(|n| n.name == "worker")
        .expect("the worker node");
    worker
        .annotations
        .insert(keys::SKYHOOK.node_state_annotation(SKYHOOK), state);
}

#[test]
fn the_blocked_condition_goes_on_every_way_the_hold_ends() {
    type End = fn(&mut Sim);
    let cases: [(&str, Vec<Package>, End); 8] = [
        ("the pods are gone", vec![rebooting()], |sim| {
            hold_pods(sim, "worker", &[]);
        }),
        ("paused", vec![rebooting()], |sim| {
            set_annotation(sim, keys::SKYHOOK.pause_annotation);
        }),
        ("disabled", vec![rebooting()], |sim| {
            set_annotation(sim, keys::SKYHOOK.disable_annotation);
        }),
        ("deleted, nothing to uninstall", vec![rebooting()], |sim| {
            sim.skyhook_mut(SKYHOOK).metadata.deletion_timestamp = Some(Time(start()));
        }),
        (
            "deleted while paused with an uninstall pending (DeletionBlocked)",
            vec![{
                let mut dexter = rebooting();
                dexter.uninstall = Some(Uninstall {
                    enabled: true,
                    apply: false,
                });
                dexter
            }],
            |sim| {
                set_annotation(sim, keys::SKYHOOK.pause_annotation);
                sim.skyhook_mut(SKYHOOK).metadata.deletion_timestamp = Some(Time(start()));
            },
        ),
        ("the node is no longer selected", vec![rebooting()], |sim| {
            sim.skyhook_mut(SKYHOOK).spec.node_selectors = Some(LabelSelector {
                match_labels: Some([("pool".to_owned(), "elsewhere".to_owned())].into()),
                match_expressions: None,
            });
        }),
        (
            "the package is complete",
            vec![rebooting()],
            complete_on_worker,
        ),
        ("the spec turns invalid", vec![rebooting()], |sim| {
            let dexter = depends(rebooting(), &[("ghost", "1.0.0")]);
            (sim.skyhook_mut(SKYHOOK).spec.packages).insert("dexter".into(), dexter);
        }),
    ];
    let mut stayed = Vec::new();
    for (case, packages, end) in cases {
        let (mut sim, _) = held(packages);
        end(&mut sim);
        sim.step();
        sim.step();
        if let Some(reason) = blocked(&sim) {
            stayed.push(format!("{case}: Blocked {reason}"));
        }
    }
    assert!(stayed.is_empty(), "{stayed:#?}");
}

#[test]
fn another_reasons_blocked_is_left_alone_when_the_hold_ends() {
    let dependency_uninstalled = |now| Condition {
        type_: keys::CONDITION_BLOCKED.to_owned(),
        status: "True".to_owned(),
        reason: "DependencyUninstalled".to_owned(),
        message: "someone else's".to_owned(),
        observed_generation: Some(1),
        last_transition_time: Time(now),
    };
    let mut list = vec![dependency_uninstalled(start())];
    crate::reconcile::plan::status::end_non_interrupt_hold(&mut list);
    assert_eq!(list, [dependency_uninstalled(start())]);

    // And through a plan whose Skyhook is held while its `Blocked` says something else.
    let (mut sim, _) = held(vec![rebooting()]);
    let status = sim.skyhook_mut(SKYHOOK).status.as_mut().expect("a status");
    status
        .conditions
        .retain(|c| c.type_ != keys::CONDITION_BLOCKED);
    status.conditions.push(dependency_uninstalled(start()));
    // An invalid spec ends the hold; the other reason's condition is not the hold's to remove.
    let dexter = depends(rebooting(), &[("ghost", "1.0.0")]);
    (sim.skyhook_mut(SKYHOOK).spec.packages).insert("dexter".into(), dexter);
    sim.step();
    assert_eq!(blocked(&sim).as_deref(), Some("DependencyUninstalled"));
}
