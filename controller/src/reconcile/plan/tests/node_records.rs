//! Boot IDs and batch picks live on the node (`bootId_<skyhook>`, `pickedAt_<skyhook>`); the
//! status maps only mirror them. A node written by a status-only version reads its entry from
//! the status, so an upgrade misses no reboot and keeps every pick.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use skyhook_api::keys;
use skyhook_api::v1alpha1::{InterruptionBudget, Stage, Status};

use super::sim::{Sim, node, package, skyhook, start};

fn budget_of_one(name: &str) -> skyhook_api::v1alpha1::Skyhook {
    let mut s = skyhook(name, vec![package("pkg", "1.0.0")]);
    s.spec.interruption_budget = Some(InterruptionBudget {
        count: Some(1),
        percent: None,
        topology: None,
    });
    s
}

fn annotation(sim: &Sim, node: &str, key: &str) -> Option<String> {
    sim.node(node).annotations.get(key).map(str::to_owned)
}

/// The node as a status-only version left it: no boot ID or pick annotation.
fn forget_node_records(sim: &mut Sim, skyhook: &str) {
    for node in sim.snapshot.nodes.iter_mut().map(Arc::make_mut) {
        node.annotations
            .remove(&keys::SKYHOOK.node_boot_id_annotation(skyhook));
        node.annotations
            .remove(&keys::SKYHOOK.node_picked_annotation(skyhook));
    }
}

#[test]
fn the_boot_id_is_recorded_on_the_node_and_mirrored_in_a_small_status() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("boot", vec![package("one", "1.0.0")])],
    );
    sim.run(10);
    let key = keys::SKYHOOK.node_boot_id_annotation("boot");
    assert_eq!(annotation(&sim, "worker", &key).as_deref(), Some("boot-1"));
    let status = sim.skyhook("boot").status.clone().unwrap();
    assert_eq!(
        status.node_boot_ids.get("worker").map(String::as_str),
        Some("boot-1")
    );
    // Complete nodes leave the picks, on the node too.
    assert_eq!(
        annotation(
            &sim,
            "worker",
            &keys::SKYHOOK.node_picked_annotation("boot")
        ),
        None
    );
}

#[test]
fn reboots_are_detected_from_the_node_or_from_a_status_not_yet_migrated() {
    // (the status mirror is kept, the node carries the boot ID annotation)
    for (mirror_kept, annotated) in [(true, true), (false, true), (true, false)] {
        let mut sim = Sim::new(
            vec![node("worker", 0)],
            vec![skyhook("reboot", vec![package("one", "1.0.0")])],
        );
        sim.config.reapply_on_reboot = true;
        sim.run(10);
        assert_eq!(sim.skyhook_status("reboot"), Some(Status::Complete));
        if !mirror_kept {
            let status = sim.skyhook_mut("reboot").status.as_mut().unwrap();
            status.node_boot_ids.clear();
        }
        if !annotated {
            forget_node_records(&mut sim, "reboot");
        }
        Arc::make_mut(&mut sim.snapshot.nodes[0]).boot_id = Some("boot-2".into());
        let planned = sim.step();
        let case = format!("mirror kept: {mirror_kept}, annotated: {annotated}");
        assert!(
            planned.events.iter().any(|e| e.reason == "Reboot"),
            "{case}"
        );
        assert_eq!(
            sim.pods(),
            vec![("reboot".into(), "one".into(), "1.0.0".into(), Stage::Apply)],
            "{case}"
        );
        // The reset and the new boot ID are one node patch: neither lands without the other.
        let patch = &planned.nodes["worker"];
        let boot_key = keys::SKYHOOK.node_boot_id_annotation("reboot");
        assert_eq!(
            patch.annotations.get(&boot_key),
            Some(&Some("boot-2".to_owned())),
            "{case}"
        );
        let status_key = keys::SKYHOOK.node_status_key("reboot");
        assert_ne!(
            patch.annotations.get(&status_key),
            Some(&Some("complete".to_owned())),
            "{case}"
        );
    }
}

#[test]
fn an_upgraded_controller_keeps_the_picks_the_status_recorded() {
    let mut sim = Sim::new(
        vec![node("node-a", 0), node("node-b", 1)],
        vec![budget_of_one("sticky")],
    );
    // A status-only version picked node-b (though node-a comes first by creation time).
    let mut status = skyhook_api::v1alpha1::SkyhookStatus::default();
    status.node_priority.insert("node-b".into(), Time(start()));
    sim.skyhook_mut("sticky").status = Some(status);
    let planned = sim.step();
    let picked_on: Vec<String> = planned
        .created_pods()
        .into_iter()
        .filter_map(|p| p.spec?.node_name)
        .collect();
    assert_eq!(picked_on, vec!["node-b"]);
    assert_eq!(
        annotation(
            &sim,
            "node-b",
            &keys::SKYHOOK.node_picked_annotation("sticky")
        )
        .as_deref(),
        Some("2026-01-01T00:00:00Z")
    );
    assert_eq!(
        annotation(
            &sim,
            "node-a",
            &keys::SKYHOOK.node_picked_annotation("sticky")
        ),
        None
    );
}

#[test]
fn picks_survive_a_status_that_no_longer_mirrors_them() {
    let mut sim = Sim::new(
        vec![node("node-a", 0), node("node-b", 1)],
        vec![budget_of_one("sticky")],
    );
    sim.step();
    let key = keys::SKYHOOK.node_picked_annotation("sticky");
    assert!(annotation(&sim, "node-a", &key).is_some());
    sim.skyhook_mut("sticky")
        .status
        .as_mut()
        .unwrap()
        .node_priority
        .clear();
    let planned = sim.step();
    let status = planned
        .statuses
        .get("sticky")
        .cloned()
        .unwrap_or_else(|| sim.skyhook("sticky").status.clone().unwrap());
    assert_eq!(
        status.node_priority.keys().collect::<Vec<_>>(),
        vec!["node-a"]
    );
    assert!(annotation(&sim, "node-b", &key).is_none());
}

#[test]
fn a_node_no_longer_targeted_loses_its_records() {
    let mut sim = Sim::new(
        vec![node("node-a", 0), node("node-b", 1)],
        vec![budget_of_one("leave")],
    );
    sim.step();
    let picked = keys::SKYHOOK.node_picked_annotation("leave");
    let boot = keys::SKYHOOK.node_boot_id_annotation("leave");
    assert!(annotation(&sim, "node-a", &picked).is_some());
    Arc::make_mut(&mut sim.snapshot.nodes[0]).labels.clear();
    sim.step();
    assert_eq!(annotation(&sim, "node-a", &picked), None);
    assert_eq!(annotation(&sim, "node-a", &boot), None);
    assert_eq!(annotation(&sim, "node-b", &boot).as_deref(), Some("boot-1"));
}

#[test]
fn a_status_over_thousands_of_nodes_drops_its_node_maps_and_the_nodes_keep_the_state() {
    // Short names and boot IDs: about 80 bytes per node, so past 5,000 nodes the maps go.
    let nodes = (0..6_000)
        .map(|i| node(&format!("node-{i:04}"), i))
        .collect();
    let mut s = budget_of_one("large");
    s.spec.interruption_budget = Some(InterruptionBudget {
        count: Some(10),
        percent: None,
        topology: None,
    });
    let mut sim = Sim::new(nodes, vec![s]);
    for _ in 0..2 {
        sim.step();
        let status = sim.skyhook("large").status.clone().unwrap();
        assert!(status.node_boot_ids.is_empty());
        assert!(status.node_priority.is_empty());
        assert!(status.node_status.is_empty());
        let picked_key = keys::SKYHOOK.node_picked_annotation("large");
        let boot_key = keys::SKYHOOK.node_boot_id_annotation("large");
        let picked = sim
            .snapshot
            .nodes
            .iter()
            .filter(|n| n.annotations.contains_key(&picked_key))
            .count();
        assert_eq!(picked, 10);
        assert!(
            sim.snapshot
                .nodes
                .iter()
                .all(|n| n.annotations.get(&boot_key) == Some("boot-1"))
        );
        assert_eq!(sim.pods().len(), 10);
    }
}
