//! The runtime-required cordon (`runtimeRequiredCordonAfter`), its release and stale
//! annotation, auto-taint exclusion, and the reboot reset that keeps the cordon and puts the
//! taint back (upstream v0.19–v0.20).

use std::sync::Arc;

use skyhook_api::keys;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, Skyhook, Stage, Status};

use super::sim::{Sim, node, package, runtime_taint, skyhook};

const RR_CORDON: &str = keys::SKYHOOK.runtime_required_cordon_annotation;

fn runtime_required(name: &str, cordon_after: bool) -> Skyhook {
    let mut s = skyhook(name, vec![package("one", "1.0.0")]);
    s.spec.runtime_required = true;
    s.spec.runtime_required_cordon_after = cordon_after;
    s
}

fn rr_cordoned(sim: &Sim, node: &str) -> (bool, Option<String>) {
    let view = sim.node(node);
    (
        view.unschedulable,
        view.annotations.get(RR_CORDON).map(str::to_owned),
    )
}

#[test]
fn removing_the_taint_cordons_in_the_same_patch_only_where_asked_and_tainted() {
    // (case, cordon_after, tainted, cordoned afterwards)
    let cases = [
        ("asked and tainted", true, true, true),
        (
            "asked but never tainted: no taint, no cordon",
            true,
            false,
            false,
        ),
        ("not asked", false, true, false),
    ];
    for (case, cordon_after, tainted, cordoned) in cases {
        let mut worker = node("worker", 0);
        if tainted {
            worker.taints.push(runtime_taint());
        }
        let mut sim = Sim::new(vec![worker], vec![runtime_required("rr", cordon_after)]);
        let mut removal = None;
        for _ in 0..20 {
            let planned = sim.step();
            if let Some(patch) = planned.nodes.get("worker")
                && patch.taints.as_ref().is_some_and(Vec::is_empty)
            {
                removal = Some(patch.clone());
            }
            sim.settle(|_| false);
        }
        assert_eq!(sim.skyhook_status("rr"), Some(Status::Complete), "{case}");
        assert!(sim.node("worker").taints.is_empty(), "{case}");
        let expected = (cordoned, cordoned.then(|| "true".to_owned()));
        assert_eq!(rr_cordoned(&sim, "worker"), expected, "{case}");
        if cordoned {
            let patch = removal.expect("the taint was removed");
            assert_eq!(patch.unschedulable, Some(true), "{case}: same patch");
            assert_eq!(
                patch.annotations.get(RR_CORDON),
                Some(&Some("true".to_owned())),
                "{case}: same patch"
            );
        }
    }
}

#[test]
fn one_of_several_runtime_required_skyhooks_asking_is_enough() {
    let mut worker = node("worker", 0);
    worker.taints.push(runtime_taint());
    let mut sim = Sim::new(
        vec![worker],
        vec![
            runtime_required("plain", false),
            runtime_required("asks", true),
        ],
    );
    sim.run(30);
    assert!(sim.node("worker").taints.is_empty());
    assert_eq!(rr_cordoned(&sim, "worker"), (true, Some("true".to_owned())));
}

#[test]
fn the_cordon_survives_a_later_interrupt_and_an_external_release_sticks() {
    let mut worker = node("worker", 0);
    worker.unschedulable = true;
    worker.annotations.insert(RR_CORDON, "true");
    let mut restarting = package("driver", "1.0.0");
    restarting.interrupt = Some(Interrupt {
        type_: InterruptType::Service,
        services: vec!["containerd".into()],
    });
    let mut later = skyhook("later", vec![restarting]);
    later.spec.priority = 300;
    let mut sim = Sim::new(vec![worker], vec![later]);
    // The drain reads the node's workload pods: none.
    sim.snapshot
        .workload_pods
        .insert("worker".into(), Vec::new());
    let mut cordoned_by_later = false;
    for _ in 0..30 {
        sim.step();
        sim.settle(|_| false);
        cordoned_by_later |= (sim.node("worker").annotations)
            .contains_key(&keys::SKYHOOK.cordon_annotation("later"));
    }
    assert!(cordoned_by_later, "the interrupt took its own cordon");
    assert_eq!(sim.skyhook_status("later"), Some(Status::Complete));
    assert!(
        !(sim.node("worker").annotations).contains_key(&keys::SKYHOOK.cordon_annotation("later"))
    );
    assert_eq!(
        rr_cordoned(&sim, "worker"),
        (true, Some("true".to_owned())),
        "releasing its own cordon leaves the runtime-required one"
    );

    // The external release: annotation and cordon go in one patch, and stay gone.
    let view = Arc::make_mut(&mut sim.snapshot.nodes[0]);
    view.annotations.remove(RR_CORDON);
    view.unschedulable = false;
    sim.run(5);
    assert_eq!(rr_cordoned(&sim, "worker"), (false, None));
}

#[test]
fn a_stale_annotation_on_a_schedulable_node_is_removed() {
    let mut worker = node("worker", 0);
    worker.annotations.insert(RR_CORDON, "true");
    let mut cordoned = node("cordoned", 1);
    cordoned.unschedulable = true;
    cordoned.annotations.insert(RR_CORDON, "true");
    // No Skyhook at all: every pass checks every node.
    let mut sim = Sim::new(vec![worker, cordoned], vec![]);
    let planned = sim.step();
    assert_eq!(
        planned
            .nodes
            .get("worker")
            .map(|p| p.annotations.get(RR_CORDON)),
        Some(Some(&None))
    );
    assert!(!planned.nodes.contains_key("cordoned"));
    assert_eq!(rr_cordoned(&sim, "worker"), (false, None));
    assert_eq!(
        rr_cordoned(&sim, "cordoned"),
        (true, Some("true".to_owned()))
    );
}

#[test]
fn a_node_being_auto_tainted_joins_no_skyhook_until_the_taint_landed() {
    let mut s = runtime_required("auto", false);
    s.spec.auto_taint_new_nodes = true;
    let mut sim = Sim::new(vec![node("worker", 0)], vec![s]);
    let first = sim.step();
    assert_eq!(
        first.auto_taints.get("worker").map(String::as_str),
        Some("skyhook.nvidia.com=runtime-required:NoSchedule")
    );
    assert!(
        first.create_pods.is_empty(),
        "no work before the taint landed"
    );
    let patch = &first.nodes["worker"];
    assert!(
        patch
            .annotations
            .keys()
            .all(|k| k == &keys::SKYHOOK.auto_taint_annotation("skyhook.nvidia.com")),
        "only the taint and its mark: {patch:?}"
    );
    let second = sim.step();
    assert!(second.auto_taints.is_empty());
    assert_eq!(
        sim.pods(),
        vec![("auto".into(), "one".into(), "1.0.0".into(), Stage::Apply)]
    );
}

#[test]
fn a_reboot_reset_keeps_the_cordon_and_puts_the_taint_back() {
    let mut s = runtime_required("rr", true);
    s.spec.auto_taint_new_nodes = true;
    let mut sim = Sim::new(vec![node("worker", 0)], vec![s]);
    sim.config.reapply_on_reboot = true;
    sim.run(20);
    assert_eq!(sim.skyhook_status("rr"), Some(Status::Complete));
    assert!(sim.node("worker").taints.is_empty());
    assert_eq!(rr_cordoned(&sim, "worker"), (true, Some("true".to_owned())));
    // An interrupting Skyhook's cordon left on the node when it rebooted.
    let view = Arc::make_mut(&mut sim.snapshot.nodes[0]);
    view.annotations
        .insert(keys::SKYHOOK.cordon_annotation("rr"), "true");
    view.boot_id = Some("boot-2".into());

    let reset = sim.step();
    assert!(
        reset
            .reboot_resets
            .contains(&("rr".to_owned(), "worker".to_owned()))
    );
    assert!(reset.auto_taints.contains_key("worker"));
    let patch = &reset.nodes["worker"];
    assert_eq!(
        patch.taints,
        Some(vec![runtime_taint()]),
        "re-tainted in the reset's patch"
    );
    let annotations = &sim.node("worker").annotations;
    assert_eq!(
        annotations.get(&keys::SKYHOOK.cordon_annotation("rr")),
        Some("true"),
        "the reset keeps the cordon"
    );
    assert_eq!(
        annotations.get(&keys::SKYHOOK.auto_taint_annotation("skyhook.nvidia.com")),
        Some("true")
    );
    assert!(
        reset
            .events
            .iter()
            .any(|e| (e.reason, e.action) == ("Reboot", "ResetNodeState"))
    );

    // The re-run completes: the taint goes again, the node stays cordoned for the external
    // actor, and the re-run released its own cordon.
    sim.run(20);
    assert_eq!(sim.skyhook_status("rr"), Some(Status::Complete));
    assert!(sim.node("worker").taints.is_empty());
    assert_eq!(rr_cordoned(&sim, "worker"), (true, Some("true".to_owned())));
    assert!(!(sim.node("worker").annotations).contains_key(&keys::SKYHOOK.cordon_annotation("rr")));
}
