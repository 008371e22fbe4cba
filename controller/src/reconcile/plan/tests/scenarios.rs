//! Spec §6.1 scenarios that need no cluster, as exact plans and states.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use skyhook_api::keys;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, Stage, State, Status};

use super::sim::{Sim, depends, node, package, runtime_taint, skyhook, taint, workload};
use crate::pod_outcome::PodOutcome;
use crate::reconcile::plan::{DRAIN_POLL, EventTarget};
use crate::reconcile::snapshot::NodeConditionView;

fn pod(s: &str, p: &str, v: &str, stage: Stage) -> (String, String, String, Stage) {
    (s.into(), p.into(), v.into(), stage)
}

fn row(key: &str, stage: Stage, state: State) -> (String, Stage, State) {
    (key.into(), stage, state)
}

fn with_config_map(mut p: skyhook_api::v1alpha1::Package) -> skyhook_api::v1alpha1::Package {
    p.config_map = BTreeMap::from([
        ("game.properties".to_owned(), "lives=3".to_owned()),
        ("ui.properties".to_owned(), "color=blue".to_owned()),
    ]);
    p
}

/// `(status, message)` of a Skyhook condition, empty when absent.
fn condition_of(sim: &Sim, skyhook: &str, type_: &str) -> (String, String) {
    sim.skyhook(skyhook)
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .map(|c| (c.status.clone(), c.message.clone()))
        .unwrap_or_default()
}

fn node_condition(type_: String, status: &str, reason: &str, message: &str) -> NodeConditionView {
    NodeConditionView {
        type_,
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

fn interrupt(type_: InterruptType, services: &[&str]) -> Interrupt {
    Interrupt {
        type_,
        services: services.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn simple() -> skyhook_api::v1alpha1::Skyhook {
    let mut s = skyhook(
        "simple",
        vec![
            with_config_map(package("dexter", "1.2.3")),
            depends(package("spencer", "3.2.3"), &[("dexter", "1.2.3")]),
            depends(package("foobar", "1.2"), &[("dexter", "1.2.3")]),
        ],
    );
    s.spec.interruption_budget = Some(skyhook_api::v1alpha1::InterruptionBudget {
        count: Some(1),
        percent: None,
        topology: None,
    });
    s
}

#[test]
fn simple_first_reconcile_runs_only_the_root_then_the_next_stage() {
    let mut sim = Sim::new(vec![node("worker", 0)], vec![simple()]);
    let first = sim.step();
    assert_eq!(
        sim.pods(),
        vec![pod("simple", "dexter", "1.2.3", Stage::Apply)]
    );
    assert_eq!(
        sim.state("simple", "worker"),
        vec![row("dexter|1.2.3", Stage::Apply, State::InProgress)]
    );
    assert_eq!(
        sim.node_status("simple", "worker").as_deref(),
        Some("in_progress")
    );
    assert_eq!(
        sim.node("worker")
            .labels
            .get(&keys::SKYHOOK.node_status_key("simple")),
        Some("in_progress")
    );
    let configmaps: Vec<_> = first
        .upsert_configmaps
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert!(
        configmaps.contains(&"simple-dexter-1.2.3".to_owned()),
        "{configmaps:?}"
    );
    assert_eq!(
        configmaps.len(),
        2,
        "package and node-metadata ConfigMaps: {configmaps:?}"
    );
    assert_eq!(first.requeue_after, None);

    sim.settle(|_| false);
    sim.step();
    assert_eq!(
        sim.pods(),
        vec![pod("simple", "dexter", "1.2.3", Stage::Config)]
    );
    assert_eq!(
        sim.state("simple", "worker"),
        vec![row("dexter|1.2.3", Stage::Config, State::InProgress)]
    );

    sim.settle(|_| false);
    sim.run(20);
    assert_eq!(
        sim.state("simple", "worker"),
        vec![
            row("dexter|1.2.3", Stage::Config, State::Complete),
            row("foobar|1.2", Stage::Config, State::Complete),
            row("spencer|3.2.3", Stage::Config, State::Complete),
        ]
    );
    assert_eq!(
        sim.node_status("simple", "worker").as_deref(),
        Some("complete")
    );
    assert_eq!(sim.skyhook_status("simple"), Some(Status::Complete));
    let status = sim.skyhook("simple").status.clone().unwrap_or_default();
    assert_eq!(status.complete_nodes, "1/1");
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.package_list, "dexter:1.2.3,foobar:1.2,spencer:3.2.3");
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == keys::CONDITION_READY);
    assert_eq!(ready.map(|c| c.status.as_str()), Some("True"));
    let conditions = &sim.node("worker").conditions;
    assert!(conditions.contains(&node_condition(
        keys::SKYHOOK.node_not_ready_condition("simple"),
        "False",
        keys::NODE_NOT_READY_REASON_COMPLETE,
        "Skyhook simple Ready"
    )));
    assert!(conditions.contains(&node_condition(
        keys::SKYHOOK.node_erroring_condition("simple"),
        "False",
        keys::NODE_NOT_ERRORING_REASON,
        "No Package Erroring or Unknown for simple"
    )));
    let budget = status
        .compartment_statuses
        .get(keys::DEFAULT_COMPARTMENT)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (
            budget.matched,
            budget.ceiling,
            budget.completed,
            budget.in_progress,
            budget.progress_percent
        ),
        (1, 1, 1, 0, 100)
    );
    // Converged: another reconcile writes nothing.
    let again = sim.step();
    assert!(
        again.nodes.is_empty() && again.statuses.is_empty() && again.create_pods.is_empty(),
        "{again:?}"
    );
}

#[test]
fn depends_on_runs_both_roots_before_the_dependent() {
    let s = skyhook(
        "depends-on",
        vec![
            package("aa-fast", "1.0.0"),
            package("bb-slow", "1.0.0"),
            depends(
                package("cc-last", "1.0.0"),
                &[("aa-fast", "1.0.0"), ("bb-slow", "1.0.0")],
            ),
        ],
    );
    let mut sim = Sim::new(vec![node("worker", 0)], vec![s]);
    let created = sim.run(20);
    assert_eq!(
        created,
        vec![
            pod("depends-on", "aa-fast", "1.0.0", Stage::Apply),
            pod("depends-on", "bb-slow", "1.0.0", Stage::Apply),
            pod("depends-on", "aa-fast", "1.0.0", Stage::Config),
            pod("depends-on", "bb-slow", "1.0.0", Stage::Config),
            pod("depends-on", "cc-last", "1.0.0", Stage::Apply),
            pod("depends-on", "cc-last", "1.0.0", Stage::Config),
        ]
    );
    assert_eq!(sim.skyhook_status("depends-on"), Some(Status::Complete));
}

#[test]
fn failure_marks_the_package_erroring_and_leaves_the_pod() {
    let mut s = skyhook(
        "failure",
        vec![
            package("dexter", "1.2.3"),
            depends(package("failure", "1.2.3"), &[("dexter", "1.2.3")]),
        ],
    );
    s.spec.interruption_budget = Some(skyhook_api::v1alpha1::InterruptionBudget {
        percent: Some(20),
        count: None,
        topology: None,
    });
    let mut sim = Sim::new(vec![node("worker", 0)], vec![s]);
    for _ in 0..10 {
        sim.step();
        sim.settle(|a| a.name == "failure");
    }
    sim.step();
    assert_eq!(
        sim.state("failure", "worker"),
        vec![
            row("dexter|1.2.3", Stage::Config, State::Complete),
            row("failure|1.2.3", Stage::Apply, State::Erroring),
        ]
    );
    let annotation = sim
        .node("worker")
        .annotations
        .get(&keys::SKYHOOK.node_state_annotation("failure"))
        .expect("the node state annotation");
    assert!(annotation.contains(r#""restarts":2"#), "{annotation}");
    assert_eq!(
        sim.pods(),
        vec![pod("failure", "failure", "1.2.3", Stage::Apply)],
        "the failed pod stays"
    );
    assert_eq!(
        sim.node_status("failure", "worker").as_deref(),
        Some("erroring")
    );
    assert_eq!(sim.skyhook_status("failure"), Some(Status::Erroring));
    let status = sim.skyhook("failure").status.clone().unwrap_or_default();
    assert_eq!(
        (status.complete_nodes.as_str(), status.nodes_in_progress),
        ("0/1", 1)
    );
    assert_eq!(status.package_list, "dexter:1.2.3,failure:1.2.3");
    assert!(sim.node("worker").conditions.contains(&node_condition(
        keys::SKYHOOK.node_erroring_condition("failure"),
        "True",
        keys::NODE_ERRORING_REASON,
        "Package Erroring or Unknown for failure"
    )));
    assert!(sim.node("worker").conditions.contains(&node_condition(
        keys::SKYHOOK.node_not_ready_condition("failure"),
        "True",
        keys::NODE_NOT_READY_REASON_INCOMPLETE,
        "Skyhook failure Not Ready"
    )));
}

#[test]
fn interrupt_cordons_waits_for_protected_pods_drains_then_interrupts_once() {
    let mut dexter = package("dexter", "1.2.3");
    dexter.interrupt = Some(interrupt(InterruptType::Reboot, &[]));
    let mut john = package("john", "1.2.3");
    john.interrupt = Some(interrupt(InterruptType::Service, &["rsyslog"]));
    let mut s = skyhook("interrupt", vec![package("jason", "1.2.3"), dexter, john]);
    s.spec.pod_non_interrupt_labels = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([(
            "dontmess".to_owned(),
            "withme".to_owned(),
        )])),
        match_expressions: None,
    });
    let mut sim = Sim::new(vec![node("worker", 0)], vec![s]);
    sim.snapshot.workload_pods.insert(
        "worker".into(),
        vec![
            workload("important-stuff", "worker", &[("dontmess", "withme")]),
            workload("drain-on", "worker", &[]),
        ],
    );

    let first = sim.step();
    let patch = &first.nodes["worker"];
    assert_eq!(patch.unschedulable, Some(true));
    assert_eq!(
        patch
            .annotations
            .get(&keys::SKYHOOK.cordon_annotation("interrupt")),
        Some(&Some("true".to_owned()))
    );
    assert_eq!(
        sim.pods(),
        vec![pod("interrupt", "jason", "1.2.3", Stage::Apply)]
    );
    assert_eq!(
        sim.state("interrupt", "worker"),
        vec![
            row("dexter|1.2.3", Stage::Apply, State::InProgress),
            row("jason|1.2.3", Stage::Apply, State::InProgress),
            row("john|1.2.3", Stage::Apply, State::InProgress),
        ]
    );

    // Cordoned, but important-stuff is protected: nothing is evicted, the plan looks again.
    let held = sim.step();
    assert!(held.evictions.is_empty());
    assert_eq!(held.requeue_after, Some(DRAIN_POLL));
    sim.settle(|_| false);
    sim.step();
    assert_eq!(
        sim.pods(),
        vec![pod("interrupt", "jason", "1.2.3", Stage::Config)],
        "jason runs while cordoned"
    );

    // Protected pod gone: drain-on is evicted, then dexter and john apply.
    if let Some(pods) = sim.snapshot.workload_pods.get_mut("worker") {
        pods.retain(|p| p.metadata.name.as_deref() != Some("important-stuff"));
    }
    let drain = sim.step();
    assert_eq!(drain.evictions.len(), 1);
    assert_eq!(drain.evictions[0].name, "drain-on");
    assert!(
        drain
            .events
            .iter()
            .any(|e| (e.reason, e.action) == ("Drain", "DrainNode")
                && e.target == EventTarget::Node("worker".into()))
    );
    sim.step();
    assert_eq!(
        sim.pods(),
        vec![
            pod("interrupt", "dexter", "1.2.3", Stage::Apply),
            pod("interrupt", "jason", "1.2.3", Stage::Config),
            pod("interrupt", "john", "1.2.3", Stage::Apply),
        ]
    );

    // Apply and config complete; john goes to skipped, dexter owns one reboot interrupt pod.
    let mut interrupt_pods = Vec::new();
    for _ in 0..6 {
        sim.settle(|_| false);
        let planned = sim.step();
        interrupt_pods.extend(planned.created_pods().into_iter().filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(keys::SKYHOOK.interrupt_label))
        }));
        if !interrupt_pods.is_empty() {
            break;
        }
    }
    assert_eq!(interrupt_pods.len(), 1);
    assert_eq!(
        sim.state("interrupt", "worker"),
        vec![
            row("dexter|1.2.3", Stage::Interrupt, State::InProgress),
            row("jason|1.2.3", Stage::Config, State::Complete),
            row("john|1.2.3", Stage::Interrupt, State::Skipped),
        ]
    );
    let args = interrupt_pods[0]
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map(|c| c[0].args.clone().unwrap_or_default())
        .unwrap_or_default();
    assert_eq!(args.len(), 4);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&args[3])
        .unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&decoded),
        r#"{"type":"node_restart"}"#
    );

    // The interrupt succeeds: john is promoted, both run post-interrupt, the node is uncordoned.
    sim.settle(|_| false);
    sim.step();
    assert_eq!(
        sim.pods(),
        vec![
            pod("interrupt", "dexter", "1.2.3", Stage::PostInterrupt),
            pod("interrupt", "john", "1.2.3", Stage::PostInterrupt),
        ]
    );
    sim.settle(|_| false);
    sim.run(10);
    assert_eq!(
        sim.state("interrupt", "worker"),
        vec![
            row("dexter|1.2.3", Stage::PostInterrupt, State::Complete),
            row("jason|1.2.3", Stage::Config, State::Complete),
            row("john|1.2.3", Stage::PostInterrupt, State::Complete),
        ]
    );
    let worker = sim.node("worker");
    assert!(!worker.unschedulable);
    assert!(
        !worker
            .annotations
            .contains_key(&keys::SKYHOOK.cordon_annotation("interrupt"))
    );
    assert_eq!(sim.skyhook_status("interrupt"), Some(Status::Complete));
}

#[test]
fn interrupt_grouping_merges_services_into_one_pod_owned_by_the_first_package() {
    let mut zeb = package("zeb", "1.0.0");
    zeb.interrupt = Some(interrupt(InterruptType::Service, &["cron"]));
    let mut dax = package("dax", "1.0.0");
    dax.interrupt = Some(interrupt(InterruptType::Service, &["containerd", "foobar"]));
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("interrupt-grouping", vec![zeb, dax])],
    );
    sim.snapshot
        .workload_pods
        .insert("worker".into(), Vec::new());
    let mut interrupt_pods = Vec::new();
    for _ in 0..20 {
        let planned = sim.step();
        interrupt_pods.extend(planned.created_pods().into_iter().filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(keys::SKYHOOK.interrupt_label))
        }));
        sim.settle(|_| false);
    }
    assert_eq!(interrupt_pods.len(), 1, "one interrupt for the wave");
    let annotation = interrupt_pods[0]
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::SKYHOOK.package_annotation))
        .cloned()
        .unwrap_or_default();
    assert!(annotation.contains(r#""name":"dax""#), "{annotation}");
    let args = interrupt_pods[0]
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map(|c| c[0].args.clone().unwrap_or_default())
        .unwrap_or_default();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&args[3])
        .unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&decoded),
        r#"{"type":"service_restart","services":["containerd","cron","foobar"]}"#
    );
    assert_eq!(
        sim.state("interrupt-grouping", "worker"),
        vec![
            row("dax|1.0.0", Stage::PostInterrupt, State::Complete),
            row("zeb|1.0.0", Stage::PostInterrupt, State::Complete),
        ]
    );
    let worker = sim.node("worker");
    assert!(!worker.unschedulable && worker.taints.is_empty());
    assert_eq!(
        worker
            .annotations
            .get(&keys::SKYHOOK.node_version_annotation("interrupt-grouping")),
        Some(keys::COMPATIBLE_OPERATOR_VERSION)
    );
    let annotations = sim
        .skyhook("interrupt-grouping")
        .metadata
        .annotations
        .clone()
        .unwrap_or_default();
    assert_eq!(
        annotations
            .get(keys::SKYHOOK.version_annotation)
            .map(String::as_str),
        Some(keys::COMPATIBLE_OPERATOR_VERSION)
    );
}

#[test]
fn uninstall_upgrade_shows_upstreams_intermediate_states() {
    let mut dogs = package("dogs", "1.2.6");
    dogs.interrupt = Some(interrupt(InterruptType::Reboot, &[]));
    let mut nullptr = package("nullptr", "2.0.0");
    nullptr.interrupt = Some(interrupt(InterruptType::Service, &["cron"]));
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook(
            "uninstall-upgrade",
            vec![dogs.clone(), nullptr.clone(), package("cats", "6.2.0")],
        )],
    );
    sim.snapshot
        .workload_pods
        .insert("worker".into(), Vec::new());
    sim.run(40);
    assert_eq!(
        sim.skyhook_status("uninstall-upgrade"),
        Some(Status::Complete)
    );

    dogs.version = "1.2.5".into();
    nullptr.version = "2.0.1".into();
    sim.skyhook_mut("uninstall-upgrade").spec.packages = [dogs, nullptr]
        .into_iter()
        .map(|p| (p.name.clone(), p))
        .collect();
    sim.step();
    assert_eq!(
        sim.state("uninstall-upgrade", "worker"),
        vec![
            row("cats|6.2.0", Stage::Uninstall, State::InProgress),
            row("dogs|1.2.5", Stage::Uninstall, State::Skipped),
            row("dogs|1.2.6", Stage::Uninstall, State::InProgress),
            row("nullptr|2.0.0", Stage::PostInterrupt, State::Complete),
            row("nullptr|2.0.1", Stage::Upgrade, State::InProgress),
        ]
    );
    // The interrupting packages' uninstall and upgrade pods wait for the cordon and drain;
    // cats had no interrupt (the node-metadata ConfigMap says so) and uninstalls at once.
    assert_eq!(
        sim.pods(),
        vec![pod("uninstall-upgrade", "cats", "6.2.0", Stage::Uninstall)]
    );
    assert!(sim.node("worker").unschedulable);
    sim.step();
    assert_eq!(
        sim.pods(),
        vec![
            pod("uninstall-upgrade", "cats", "6.2.0", Stage::Uninstall),
            pod("uninstall-upgrade", "dogs", "1.2.6", Stage::Uninstall),
            pod("uninstall-upgrade", "nullptr", "2.0.1", Stage::Upgrade),
        ]
    );
    sim.settle(|_| false);
    sim.run(40);
    assert_eq!(
        sim.state("uninstall-upgrade", "worker"),
        vec![
            row("dogs|1.2.5", Stage::PostInterrupt, State::Complete),
            row("nullptr|2.0.1", Stage::PostInterrupt, State::Complete),
        ]
    );
    let status = sim
        .skyhook("uninstall-upgrade")
        .status
        .clone()
        .unwrap_or_default();
    assert_eq!(
        (status.complete_nodes.as_str(), status.package_list.as_str()),
        ("1/1", "dogs:1.2.5,nullptr:2.0.1")
    );
    assert!(!sim.node("worker").unschedulable);
}

#[test]
fn strict_order_gates_per_node_paused_blocks_disabled_does_not() {
    let prio = |mut s: skyhook_api::v1alpha1::Skyhook, p: i32| {
        s.spec.priority = p;
        s
    };
    let annotate = |mut s: skyhook_api::v1alpha1::Skyhook, key: &str| {
        s.metadata.annotations = Some(BTreeMap::from([(key.to_owned(), "true".to_owned())]));
        s
    };
    let mut worker2 = node("worker2", 1);
    worker2.taints.push(taint("test-block", Some("true")));
    let mut sim = Sim::new(
        vec![node("worker", 0), worker2],
        vec![
            prio(skyhook("zzz", vec![package("one", "1.0.0")]), 1),
            annotate(
                prio(skyhook("b", vec![package("two", "1.0.0")]), 2),
                keys::SKYHOOK.pause_annotation,
            ),
            prio(skyhook("c", vec![package("three", "1.0.0")]), 2),
            annotate(
                prio(skyhook("d", vec![package("four", "1.0.0")]), 2),
                keys::SKYHOOK.disable_annotation,
            ),
        ],
    );
    sim.run(20);
    assert_eq!(
        sim.node_status("zzz", "worker").as_deref(),
        Some("complete")
    );
    assert_eq!(
        sim.node_status("zzz", "worker2").as_deref(),
        Some("blocked")
    );
    assert_eq!(sim.node_status("b", "worker").as_deref(), Some("paused"));
    assert_eq!(
        sim.node_status("c", "worker").as_deref(),
        Some("waiting"),
        "paused b blocks c"
    );
    assert_eq!(sim.node_status("d", "worker").as_deref(), Some("disabled"));
    assert_eq!(sim.skyhook_status("b"), Some(Status::Paused));
    assert_eq!(sim.skyhook_status("d"), Some(Status::Disabled));
    assert!(sim.pods().is_empty());

    // Unpause b and untaint worker2: worker runs priority 2 while worker2 runs priority 1.
    sim.skyhook_mut("b").metadata.annotations = None;
    Arc::make_mut(&mut sim.snapshot.nodes[1]).taints.clear();
    sim.step();
    assert_eq!(
        sim.pods(),
        vec![
            pod("b", "two", "1.0.0", Stage::Apply),
            pod("zzz", "one", "1.0.0", Stage::Apply)
        ]
    );
    assert_eq!(
        sim.snapshot
            .pods
            .iter()
            .find(|p| p.skyhook == "zzz")
            .map(|p| p.node.as_str()),
        Some("worker2")
    );
    sim.settle(|_| false);
    sim.run(40);
    for name in ["zzz", "b", "c"] {
        for node in ["worker", "worker2"] {
            assert_eq!(
                sim.node_status(name, node).as_deref(),
                Some("complete"),
                "{name} on {node}"
            );
        }
    }
    assert_eq!(sim.node_status("d", "worker").as_deref(), Some("disabled"));
}

#[test]
fn taint_scheduling_blocks_until_tolerated() {
    let mut tainted = node("worker", 0);
    tainted.taints.push(taint("nvidia.com/gpu", None));
    let mut sim = Sim::new(
        vec![tainted],
        vec![skyhook("taint-scheduling", vec![package("one", "1.0.0")])],
    );
    sim.run(5);
    assert!(sim.pods().is_empty());
    assert_eq!(
        sim.node_status("taint-scheduling", "worker").as_deref(),
        Some("blocked")
    );
    assert_eq!(
        sim.node("worker")
            .labels
            .get(&keys::SKYHOOK.node_status_key("taint-scheduling")),
        Some("blocked")
    );
    assert_eq!(
        sim.skyhook_status("taint-scheduling"),
        Some(Status::Blocked)
    );
    let (status, message) = condition_of(
        &sim,
        "taint-scheduling",
        keys::SKYHOOK.condition_taint_not_tolerable,
    );
    assert_eq!(status, "True");
    assert!(
        message.contains("worker: nvidia.com/gpu:NoSchedule"),
        "{message}"
    );

    sim.skyhook_mut("taint-scheduling")
        .spec
        .additional_tolerations = vec![skyhook_api::toleration::toleration_for(&taint(
        "nvidia.com/gpu",
        None,
    ))];
    sim.run(10);
    assert_eq!(
        sim.skyhook_status("taint-scheduling"),
        Some(Status::Complete)
    );
    let (status, _) = condition_of(
        &sim,
        "taint-scheduling",
        keys::SKYHOOK.condition_taint_not_tolerable,
    );
    assert_eq!(status, "False");
}

#[test]
fn runtime_required_taint_is_removed_per_node() {
    let mut worker = node("worker", 0);
    worker.taints.push(runtime_taint());
    let mut worker2 = node("worker2", 1);
    worker2
        .taints
        .extend([runtime_taint(), taint("test-block", Some("true"))]);
    let mut s = skyhook("runtime-required", vec![package("one", "1.0.0")]);
    s.spec.runtime_required = true;
    let mut sim = Sim::new(vec![worker, worker2], vec![s]);
    sim.run(20);
    assert!(
        sim.node("worker").taints.is_empty(),
        "complete node untainted"
    );
    assert_eq!(
        sim.node("worker2").taints.len(),
        2,
        "blocked node keeps its taints"
    );
    assert_eq!(
        sim.node_status("runtime-required", "worker2").as_deref(),
        Some("blocked")
    );

    Arc::make_mut(&mut sim.snapshot.nodes[1])
        .taints
        .retain(|t| t.key != "test-block");
    sim.run(20);
    assert!(sim.node("worker2").taints.is_empty());
}

#[test]
fn auto_taint_marks_only_untouched_nodes() {
    let mut s = skyhook("auto", vec![package("one", "1.0.0")]);
    s.spec.runtime_required = true;
    s.spec.auto_taint_new_nodes = true;
    let mut sim = Sim::new(vec![node("worker", 0)], vec![s]);
    let first = sim.step();
    assert_eq!(first.nodes["worker"].taints, Some(vec![runtime_taint()]));
    assert_eq!(
        sim.node("worker")
            .annotations
            .get(&keys::SKYHOOK.auto_taint_annotation("skyhook.nvidia.com")),
        Some("true")
    );
    sim.settle(|_| false);
    sim.run(10);
    assert!(
        sim.node("worker").taints.is_empty(),
        "removed once complete, never re-added"
    );
}

#[test]
fn shared_cordon_is_not_released_by_the_first_skyhook_completing() {
    let mut worker = node("worker", 0);
    worker.unschedulable = true;
    worker
        .annotations
        .insert(keys::SKYHOOK.cordon_annotation("first"), "true");
    worker
        .annotations
        .insert(keys::SKYHOOK.cordon_annotation("second"), "true");
    let mut first = skyhook("first", vec![package("one", "1.0.0")]);
    first.spec.priority = 1;
    let mut second = skyhook("second", vec![package("two", "1.0.0")]);
    second.spec.priority = 2;
    second.metadata.annotations = Some(BTreeMap::from([(
        keys::SKYHOOK.pause_annotation.to_owned(),
        "true".to_owned(),
    )]));
    let mut sim = Sim::new(vec![worker], vec![first, second]);
    sim.run(10);
    assert_eq!(
        sim.node_status("first", "worker").as_deref(),
        Some("complete")
    );
    let worker = sim.node("worker");
    assert!(
        !worker
            .annotations
            .contains_key(&keys::SKYHOOK.cordon_annotation("first"))
    );
    assert!(
        worker
            .annotations
            .contains_key(&keys::SKYHOOK.cordon_annotation("second"))
    );
    assert!(worker.unschedulable, "second still holds a cordon");
}

#[test]
fn deletion_uncordons_what_the_skyhook_cordoned_and_releases_the_finalizer() {
    let mut worker = node("worker", 0);
    worker.unschedulable = true;
    worker
        .annotations
        .insert(keys::SKYHOOK.cordon_annotation("gone"), "true");
    let mut s = skyhook("gone", vec![package("one", "1.0.0")]);
    s.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        super::sim::start(),
    ));
    let mut sim = Sim::new(vec![worker], vec![s]);
    let planned = sim.step();
    // The finalizer stays while the cleanup is being written: a refused node patch would
    // otherwise leave the Skyhook's keys behind for good.
    assert_eq!(planned.finalizers.get("gone"), None);
    assert!(planned.create_pods.is_empty());
    assert_eq!(planned.nodes["worker"].unschedulable, Some(false));
    assert!(
        !sim.node("worker")
            .annotations
            .contains_key(&keys::SKYHOOK.cordon_annotation("gone"))
    );
    let planned = sim.step();
    assert_eq!(planned.finalizers.get("gone"), Some(&false));
    assert!(planned.nodes.is_empty(), "{:?}", planned.nodes);
}

#[test]
fn a_new_skyhook_gets_the_finalizer() {
    let mut s = skyhook("fresh", vec![package("one", "1.0.0")]);
    s.metadata.finalizers = None;
    let mut sim = Sim::new(vec![node("worker", 0)], vec![s]);
    assert_eq!(sim.step().finalizers.get("fresh"), Some(&true));
}

#[test]
fn a_hand_made_pod_records_its_result_for_its_skyhook() {
    let mut sim = Sim::new(vec![node("worker", 0)], vec![]);
    let mut pod = super::sim::workload(
        "hand-made",
        "worker",
        &[(keys::SKYHOOK.name_label, "foobar")],
    );
    pod.metadata.annotations = Some(BTreeMap::from([(
        keys::SKYHOOK.package_annotation.to_owned(),
        r#"{"name":"foobar","version":"1.2.3","skyhook":"foobar","stage":"apply","image":""}"#
            .to_owned(),
    )]));
    let mut owned = super::sim::owned(pod);
    owned.outcome = PodOutcome::Succeeded {
        container: "foobar-applycheck".into(),
        restarts: 0,
    };
    sim.snapshot.pods.push(owned);
    let planned = sim.step();
    assert!(planned.delete_pods.contains_key("hand-made"));
    assert_eq!(
        sim.node("worker")
            .annotations
            .get(&keys::SKYHOOK.node_state_annotation("foobar")),
        Some(
            r#"{"foobar|1.2.3":{"name":"foobar","version":"1.2.3","image":"","stage":"apply","state":"complete"}}"#
        )
    );
}

#[test]
fn a_drain_past_its_timeout_names_its_blockers_and_keeps_the_node_cordoned() {
    let mut reboot = package("dexter", "1.2.3");
    reboot.interrupt = Some(interrupt(InterruptType::Reboot, &[]));
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("drain", vec![reboot])],
    );
    sim.snapshot
        .workload_pods
        .insert("worker".into(), vec![workload("stuck", "worker", &[])]);
    sim.step();
    // The first drain pass stamps the drain's start (drainStart_), from which the timeout
    // counts.
    sim.step();
    assert!(
        sim.node("worker")
            .annotations
            .contains_key(&keys::SKYHOOK.drain_start_annotation("drain"))
    );
    // The eviction is refused (a PodDisruptionBudget): the sim keeps the pod.
    sim.snapshot
        .workload_pods
        .insert("worker".into(), vec![workload("stuck", "worker", &[])]);
    sim.now += jiff::SignedDuration::from_secs(601);
    let planned = sim.step();
    assert_eq!(planned.evictions.len(), 1);
    assert!(
        planned.events.iter().any(|e| e.reason == "DrainBlocked"
            && e.warning
            && e.message.contains("default/stuck")),
        "{:?}",
        planned.events
    );
    let (status, _) = condition_of(
        &sim,
        "drain",
        skyhook_api::keys::SKYHOOK.condition_drain_blocked,
    );
    assert_eq!(status, "True");
    assert!(sim.node("worker").unschedulable);
    assert!(sim.pods().is_empty(), "nothing runs on an undrained node");
}

#[test]
fn a_failed_node_whose_node_state_is_deleted_by_hand_runs_again() {
    let bb = with_config_map(depends(package("bb", "1.2.3"), &[("aa", "1.2.3")]));
    let packages = vec![package("aa", "1.2.3"), bb];
    let mut sim = Sim::new(
        vec![node("first", 0), node("second", 1)],
        vec![skyhook("rerun", packages)],
    );
    sim.run(40);
    // A config change that fails on both nodes.
    let spec = &mut sim.skyhook_mut("rerun").spec;
    let bb = spec.packages.get_mut("bb").unwrap();
    bb.config_map
        .insert("game.properties".into(), "lives=4".into());
    for _ in 0..6 {
        sim.step();
        sim.settle(|pod| pod.name == "bb");
    }
    for node in ["first", "second"] {
        assert_eq!(sim.node_status("rerun", node).as_deref(), Some("erroring"));
    }
    // The second node's state deleted by hand (`kubectl annotate node second
    // skyhook.nvidia.com/nodeState_rerun-`): its failing pod no longer matches it. A retry
    // batch of one node would take the first node again and again: the second must not wait
    // behind it as if it still failed.
    let second = (sim.snapshot.nodes.iter_mut().map(Arc::make_mut))
        .find(|n| n.name == "second")
        .unwrap();
    second
        .annotations
        .remove(&keys::SKYHOOK.node_state_annotation("rerun"));
    let mut started = Vec::new();
    for _ in 0..4 {
        let planned = sim.step();
        started.extend(
            (planned.created_pods().into_iter())
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("second"))
                .filter_map(|p| p.metadata.name),
        );
    }
    assert!(
        started.iter().any(|name| name.contains("-aa-")),
        "aa starts over on the second node: {started:?}"
    );
    assert_eq!(
        sim.node_status("rerun", "second").as_deref(),
        Some("in_progress")
    );
}

#[test]
fn a_newer_operators_version_marker_is_never_lowered() {
    let newer = "v0.20.0";
    let mut worker = node("worker", 0);
    let mut older = node("older", 1);
    worker
        .annotations
        .insert(keys::SKYHOOK.node_version_annotation("taken-over"), newer);
    older.annotations.insert(
        keys::SKYHOOK.node_version_annotation("taken-over"),
        "v0.9.1",
    );
    let mut taken_over = skyhook("taken-over", vec![package("one", "1.0.0")]);
    taken_over.metadata.annotations = Some(BTreeMap::from([(
        keys::SKYHOOK.version_annotation.to_owned(),
        newer.to_owned(),
    )]));
    let mut sim = Sim::new(vec![worker, older, node("fresh", 2)], vec![taken_over]);
    sim.run(20);
    assert_eq!(sim.skyhook_status("taken-over"), Some(Status::Complete));
    let marker = |node: &str| {
        (sim.node(node).annotations)
            .get(&keys::SKYHOOK.node_version_annotation("taken-over"))
            .map(str::to_owned)
    };
    assert_eq!(marker("worker").as_deref(), Some(newer));
    let ours = Some(keys::COMPATIBLE_OPERATOR_VERSION);
    assert_eq!(marker("older").as_deref(), ours);
    assert_eq!(marker("fresh").as_deref(), ours);
    let annotations = sim.skyhook("taken-over").metadata.annotations.as_ref();
    assert_eq!(
        annotations
            .and_then(|a| a.get(keys::SKYHOOK.version_annotation))
            .map(String::as_str),
        Some(newer)
    );
}
