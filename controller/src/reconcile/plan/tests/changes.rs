//! Spec changes and node events after a rollout: config updates (spec §2.6), pod invalidation
//! (§2.8), reboots (§2.11), a missing DeploymentPolicy (§2.4) and `serial`.

use std::collections::BTreeMap;
use std::sync::Arc;

use skyhook_api::keys;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, Package, Stage, State, Status};

use super::sim::{Sim, node, package, skyhook};

fn row(key: &str, stage: Stage, state: State) -> (String, Stage, State) {
    (key.into(), stage, state)
}

fn configured() -> Package {
    let mut dexter = package("dexter", "1.2.3");
    dexter.interrupt = Some(Interrupt {
        type_: InterruptType::Reboot,
        services: Vec::new(),
    });
    dexter.config_interrupts = BTreeMap::from([(
        "*.properties".to_owned(),
        Interrupt {
            type_: InterruptType::Service,
            services: vec!["rsyslog".into()],
        },
    )]);
    dexter.config_map = BTreeMap::from([
        ("game.properties".to_owned(), "lives=3".to_owned()),
        ("ui.json".to_owned(), "{}".to_owned()),
    ]);
    dexter
}

fn set_config(sim: &mut Sim, key: &str, value: &str) {
    if let Some(p) = sim.skyhook_mut("config").spec.packages.get_mut("dexter") {
        p.config_map.insert(key.to_owned(), value.to_owned());
    }
}

#[test]
fn config_changes_rerun_config_and_interrupt_only_for_matching_keys() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("config", vec![configured()])],
    );
    sim.snapshot
        .workload_pods
        .insert("worker".into(), Vec::new());
    sim.run(30);
    assert_eq!(
        sim.state("config", "worker"),
        vec![row("dexter|1.2.3", Stage::PostInterrupt, State::Complete)]
    );

    // A key no config interrupt matches: config runs again and is terminal.
    set_config(&mut sim, "ui.json", r#"{"a":1}"#);
    let planned = sim.step();
    assert!(
        planned
            .upsert_configmaps
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some("config-dexter-1.2.3")),
        "the changed ConfigMap is written"
    );
    assert_eq!(
        sim.pods(),
        vec![(
            "config".into(),
            "dexter".into(),
            "1.2.3".into(),
            Stage::Config
        )]
    );
    let updates = sim
        .skyhook("config")
        .status
        .clone()
        .unwrap_or_default()
        .config_updates;
    assert_eq!(updates.get("dexter"), Some(&vec!["ui.json".to_owned()]));
    sim.settle(|_| false);
    sim.run(30);
    assert_eq!(
        sim.state("config", "worker"),
        vec![row("dexter|1.2.3", Stage::Config, State::Complete)]
    );
    assert_eq!(sim.skyhook_status("config"), Some(Status::Complete));

    // A key the glob matches: config, then the config interrupt, then post-interrupt.
    set_config(&mut sim, "game.properties", "lives=9");
    sim.step();
    let updates = sim
        .skyhook("config")
        .status
        .clone()
        .unwrap_or_default()
        .config_updates;
    assert_eq!(
        updates.get("dexter"),
        Some(&vec!["game.properties".to_owned()]),
        "replaced, not appended, after completion"
    );
    sim.settle(|_| false);
    let created = sim.run(30);
    assert!(
        created.iter().any(|p| p.3 == Stage::Interrupt),
        "{created:?}"
    );
    assert_eq!(
        sim.state("config", "worker"),
        vec![row("dexter|1.2.3", Stage::PostInterrupt, State::Complete)]
    );
}

#[test]
fn a_spec_edit_replaces_the_running_pod() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("edit", vec![package("one", "1.0.0")])],
    );
    sim.step();
    if let Some(p) = sim.skyhook_mut("edit").spec.packages.get_mut("one") {
        p.image = "example.com/fixed".into();
    }
    let planned = sim.step();
    assert_eq!(planned.delete_pods.len(), 1);
    assert!(
        planned.create_pods.is_empty(),
        "the replacement waits for the old pod to go"
    );
    let planned = sim.step();
    let images: Vec<String> = planned
        .created_pods()
        .iter()
        .flat_map(|p| {
            p.spec
                .iter()
                .flat_map(|s| s.init_containers.iter().flatten())
        })
        .filter_map(|c| c.image.clone())
        .collect();
    assert!(
        images.contains(&"example.com/fixed:1.0.0".to_owned()),
        "{images:?}"
    );
}

#[test]
fn reapply_on_reboot_resets_the_node_when_its_boot_id_changes() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("reboot", vec![package("one", "1.0.0")])],
    );
    sim.config.reapply_on_reboot = true;
    sim.run(10);
    assert_eq!(sim.skyhook_status("reboot"), Some(Status::Complete));
    let boot_ids = sim
        .skyhook("reboot")
        .status
        .clone()
        .unwrap_or_default()
        .node_boot_ids;
    assert_eq!(boot_ids.get("worker").map(String::as_str), Some("boot-1"));

    Arc::make_mut(&mut sim.snapshot.nodes[0]).boot_id = Some("boot-2".into());
    let planned = sim.step();
    assert!(
        planned
            .events
            .iter()
            .any(|e| (e.reason, e.action) == ("Reboot", "ResetNodeState"))
    );
    assert_eq!(
        sim.pods(),
        vec![("reboot".into(), "one".into(), "1.0.0".into(), Stage::Apply)]
    );
    let boot_ids = sim
        .skyhook("reboot")
        .status
        .clone()
        .unwrap_or_default()
        .node_boot_ids;
    assert_eq!(boot_ids.get("worker").map(String::as_str), Some("boot-2"));
}

#[test]
fn a_reboot_without_reapply_only_records_the_boot_id() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("reboot", vec![package("one", "1.0.0")])],
    );
    sim.run(10);
    Arc::make_mut(&mut sim.snapshot.nodes[0]).boot_id = Some("boot-2".into());
    let planned = sim.step();
    assert!(planned.create_pods.is_empty());
    assert_eq!(sim.skyhook_status("reboot"), Some(Status::Complete));
}

#[test]
fn a_missing_policy_blocks_the_skyhook_and_says_so() {
    let mut s = skyhook("policy", vec![package("one", "1.0.0")]);
    s.spec.deployment_policy = Some("nope".into());
    let mut sim = Sim::new(vec![node("worker", 0)], vec![s]);
    sim.step();
    assert!(sim.pods().is_empty());
    assert_eq!(sim.skyhook_status("policy"), Some(Status::Blocked));
    assert_eq!(
        sim.node_status("policy", "worker").as_deref(),
        Some("unknown")
    );
    let conditions = sim
        .skyhook("policy")
        .status
        .clone()
        .unwrap_or_default()
        .conditions;
    assert!(conditions.iter().any(|c| c.type_
        == keys::SKYHOOK.condition_deployment_policy_not_found
        && c.status == "True"));
}

#[test]
fn serial_runs_one_package_at_a_time() {
    let mut s = skyhook(
        "serial",
        vec![package("aa", "1.0.0"), package("bb", "1.0.0")],
    );
    s.spec.serial = true;
    let mut sim = Sim::new(vec![node("worker", 0)], vec![s]);
    let created = sim.run(20);
    let stages: Vec<(String, Stage)> = created.into_iter().map(|p| (p.1, p.3)).collect();
    assert_eq!(
        stages,
        vec![
            ("aa".into(), Stage::Apply),
            ("aa".into(), Stage::Config),
            ("bb".into(), Stage::Apply),
            ("bb".into(), Stage::Config),
        ]
    );
}

/// Upstream v0.20's `serial`: one package per node per pass, and the nodes of a batch progress
/// together (before, a serial pass ended after the first package anywhere).
#[test]
fn serial_nodes_progress_together() {
    let mut s = skyhook(
        "serial",
        vec![package("aa", "1.0.0"), package("bb", "1.0.0")],
    );
    s.spec.serial = true;
    let mut sim = Sim::new(vec![node("worker", 0), node("worker2", 1)], vec![s]);
    let first = sim.step();
    let mut started: Vec<(String, String)> = (first.created_pods().iter())
        .map(|pod| {
            let spec = pod.spec.clone().unwrap_or_default();
            let label = (pod.metadata.labels.clone().unwrap_or_default())
                .get(keys::SKYHOOK.package_label)
                .cloned()
                .unwrap_or_default();
            (spec.node_name.unwrap_or_default(), label)
        })
        .collect();
    started.sort();
    assert_eq!(
        started,
        vec![
            ("worker".to_owned(), "aa-1.0.0".to_owned()),
            ("worker2".to_owned(), "aa-1.0.0".to_owned()),
        ],
        "one package on each node, both nodes at once"
    );
    assert!(
        ["worker", "worker2"]
            .iter()
            .all(|n| sim.node_status("serial", n).as_deref() == Some("in_progress")),
        "the pass saved its node changes"
    );
}

#[test]
fn an_invalid_spec_runs_nothing_and_says_why() {
    let mut s = skyhook("invalid", vec![package("one", "1.0.0")]);
    s.spec.priority = 0;
    let mut sim = Sim::new(vec![node("worker", 0)], vec![s]);
    let planned = sim.step();
    assert!(planned.create_pods.is_empty() && planned.nodes.is_empty());
    let conditions = sim
        .skyhook("invalid")
        .status
        .clone()
        .unwrap_or_default()
        .conditions;
    let invalid = conditions
        .iter()
        .find(|c| c.type_ == skyhook_api::keys::SKYHOOK.condition_spec_invalid);
    assert!(
        invalid.is_some_and(|c| c.status == "True" && c.message.contains("spec.priority")),
        "{conditions:?}"
    );

    sim.skyhook_mut("invalid").spec.priority = 1;
    sim.step();
    let conditions = sim
        .skyhook("invalid")
        .status
        .clone()
        .unwrap_or_default()
        .conditions;
    assert!(
        !conditions
            .iter()
            .any(|c| c.type_ == skyhook_api::keys::SKYHOOK.condition_spec_invalid)
    );
    assert_eq!(sim.pods().len(), 1);
}

/// A version with build metadata would make the pod label `skyhook.nvidia.com/package` and the
/// pod name invalid; a Skyhook that bypassed the webhook with one gets `SpecInvalid` naming the
/// version, and no pod is attempted (the API server would refuse it and leave the node
/// `in_progress` with nothing reporting why).
#[test]
fn a_version_with_build_metadata_is_spec_invalid_and_starts_no_pod() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("build", vec![package("one", "1.0.0-rc.1+build.5")])],
    );
    let planned = sim.step();
    assert!(planned.create_pods.is_empty(), "{:?}", planned.create_pods);
    assert!(planned.nodes.is_empty(), "{:?}", planned.nodes);
    let conditions = sim
        .skyhook("build")
        .status
        .clone()
        .unwrap_or_default()
        .conditions;
    let invalid = conditions
        .iter()
        .find(|c| c.type_ == skyhook_api::keys::SKYHOOK.condition_spec_invalid);
    assert!(
        invalid.is_some_and(|c| c.status == "True"
            && c.message.contains("spec.packages.one.version")
            && c.message.contains("drop the build metadata")),
        "{conditions:?}"
    );
    assert!(
        planned
            .events
            .iter()
            .any(|e| e.warning && e.reason == "SpecInvalid"),
        "{:?}",
        planned.events
    );
}

#[test]
fn a_reboot_interrupt_waiting_for_its_reboot_asks_to_look_again_at_the_deadline() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("wait", vec![package("one", "1.0.0")])],
    );
    sim.step();
    let deadline = sim.now + jiff::SignedDuration::from_secs(90);
    if let Some(pod) = sim.snapshot.pods.first_mut() {
        pod.outcome = crate::pod_outcome::PodOutcome::AwaitingReboot { deadline };
    }
    let planned = sim.step();
    assert!(planned.delete_pods.is_empty() && planned.create_pods.is_empty());
    assert_eq!(
        planned.requeue_after,
        Some(std::time::Duration::from_secs(90))
    );
    assert_eq!(
        sim.state("wait", "worker"),
        vec![row("one|1.0.0", Stage::Apply, State::InProgress)],
        "not an error"
    );
}

#[test]
fn a_pod_the_reboot_stopped_for_good_is_replaced() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("again", vec![package("one", "1.0.0")])],
    );
    sim.step();
    if let Some(pod) = sim.snapshot.pods.first_mut() {
        pod.outcome = crate::pod_outcome::PodOutcome::RecreateAfterReboot;
    }
    let planned = sim.step();
    assert_eq!(planned.delete_pods.len(), 1);
    let planned = sim.step();
    assert_eq!(planned.create_pods.len(), 1, "the same stage runs again");
    assert_eq!(
        sim.pods(),
        vec![("again".into(), "one".into(), "1.0.0".into(), Stage::Apply)]
    );
}

#[test]
fn nothing_starts_on_a_node_whose_kubelet_is_not_ready() {
    let mut down = node("worker", 0);
    down.ready = false;
    let mut sim = Sim::new(
        vec![down],
        vec![skyhook("down", vec![package("one", "1.0.0")])],
    );
    sim.step();
    assert!(sim.pods().is_empty());
    Arc::make_mut(&mut sim.snapshot.nodes[0]).ready = true;
    sim.step();
    assert_eq!(sim.pods().len(), 1);
}

#[test]
fn a_paused_skyhook_applies_spec_changes_only_on_resume() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("pause", vec![package("one", "1.0.0")])],
    );
    sim.run(10);
    let skyhook = sim.skyhook_mut("pause");
    skyhook.metadata.annotations = Some(BTreeMap::from([(
        keys::SKYHOOK.pause_annotation.to_owned(),
        "true".to_owned(),
    )]));
    if let Some(p) = skyhook.spec.packages.get_mut("one") {
        p.version = "1.0.1".into();
    }
    sim.step();
    assert_eq!(
        sim.state("pause", "worker"),
        vec![row("one|1.0.0", Stage::Config, State::Complete)]
    );
    assert_eq!(sim.skyhook_status("pause"), Some(Status::Paused));
    sim.skyhook_mut("pause").metadata.annotations = None;
    sim.step();
    assert_eq!(
        sim.state("pause", "worker"),
        vec![
            row("one|1.0.0", Stage::Config, State::Complete),
            row("one|1.0.1", Stage::Upgrade, State::InProgress),
        ]
    );
}

/// A node reset by hand (its state annotation deleted) while the config pod runs, or while it is
/// failing (crash-looping between restarts): the pod no longer matches the emptied state and is
/// removed, a failure is not written back (the stray pod would then match that state again and
/// hold the node in `erroring` for good), and the node starts again at `apply`.
#[test]
fn a_node_reset_by_hand_removes_stray_pods_and_runs_again() {
    for config_pod_fails in [false, true] {
        let mut sim = Sim::new(
            vec![node("worker", 0)],
            vec![skyhook("cleanup", vec![package("aa", "1.0.0")])],
        );
        sim.step();
        sim.settle(|_| false);
        sim.step();
        assert_eq!(
            sim.pods(),
            vec![("cleanup".into(), "aa".into(), "1.0.0".into(), Stage::Config)]
        );
        if config_pod_fails {
            sim.settle(|annotation| annotation.stage == Stage::Config);
            sim.step();
            assert_eq!(
                sim.state("cleanup", "worker"),
                vec![row("aa|1.0.0", Stage::Config, State::Erroring)]
            );
        }
        Arc::make_mut(&mut sim.snapshot.nodes[0])
            .annotations
            .remove(&keys::SKYHOOK.node_state_annotation("cleanup"));
        let planned = sim.step();
        assert_eq!(
            planned.delete_pods.len(),
            1,
            "failing {config_pod_fails}: the config pod no longer matches the node state"
        );
        assert_eq!(
            sim.state("cleanup", "worker"),
            Vec::new(),
            "failing {config_pod_fails}"
        );
        sim.step();
        assert_eq!(
            sim.pods(),
            vec![("cleanup".into(), "aa".into(), "1.0.0".into(), Stage::Apply)],
            "failing {config_pod_fails}"
        );
        assert_eq!(
            sim.state("cleanup", "worker"),
            vec![row("aa|1.0.0", Stage::Apply, State::InProgress)],
            "failing {config_pod_fails}"
        );
    }
}

#[test]
fn removing_every_package_uninstalls_them_and_releases_the_node() {
    let mut reboot = package("dogs", "1.2.6");
    reboot.interrupt = Some(Interrupt {
        type_: InterruptType::Reboot,
        services: Vec::new(),
    });
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("gone", vec![reboot, package("cats", "6.2.0")])],
    );
    sim.snapshot
        .workload_pods
        .insert("worker".into(), Vec::new());
    sim.run(30);
    assert_eq!(sim.skyhook_status("gone"), Some(Status::Complete));
    sim.skyhook_mut("gone").spec.packages.clear();
    sim.step();
    assert_eq!(
        sim.state("gone", "worker"),
        vec![
            row("cats|6.2.0", Stage::Uninstall, State::InProgress),
            row("dogs|1.2.6", Stage::Uninstall, State::InProgress),
        ]
    );
    // dogs had a reboot interrupt (as the node-metadata ConfigMap last said): its uninstall
    // waits for the cordon and drain; cats had none and uninstalls at once.
    assert_eq!(
        sim.pods(),
        vec![(
            "gone".into(),
            "cats".into(),
            "6.2.0".into(),
            Stage::Uninstall
        )]
    );
    assert!(sim.node("worker").unschedulable);
    sim.step();
    assert_eq!(
        sim.pods(),
        vec![
            (
                "gone".into(),
                "cats".into(),
                "6.2.0".into(),
                Stage::Uninstall
            ),
            (
                "gone".into(),
                "dogs".into(),
                "1.2.6".into(),
                Stage::Uninstall
            ),
        ]
    );
    sim.settle(|_| false);
    sim.run(10);
    // Upstream leaves `{}`: absent would mean the Skyhook never touched the node.
    assert_eq!(
        (sim.node("worker").annotations).get(&keys::SKYHOOK.node_state_annotation("gone")),
        Some("{}")
    );
    assert_eq!(sim.skyhook_status("gone"), Some(Status::Complete));
    assert!(!sim.node("worker").unschedulable);
}

#[test]
fn a_config_change_while_the_package_runs_is_queued_until_it_completes() {
    let mut plain = package("dexter", "1.2.3");
    plain.config_map = BTreeMap::from([("game.properties".to_owned(), "lives=3".to_owned())]);
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("config", vec![plain])],
    );
    sim.step();
    set_config(&mut sim, "game.properties", "lives=9");
    let planned = sim.step();
    assert!(
        !planned
            .upsert_configmaps
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some("config-dexter-1.2.3")),
        "queued while the apply pod runs"
    );
    sim.settle(|_| false);
    sim.run(20);
    let data = &sim.snapshot.package_configmaps["config-dexter-1.2.3"].data();
    assert_eq!(
        data.get("game.properties").map(String::as_str),
        Some("lives=9")
    );
    assert_eq!(
        sim.state("config", "worker"),
        vec![row("dexter|1.2.3", Stage::Config, State::Complete)]
    );
    let updates = sim
        .skyhook("config")
        .status
        .clone()
        .unwrap_or_default()
        .config_updates;
    assert_eq!(
        updates.get("dexter"),
        Some(&vec!["game.properties".to_owned()])
    );
}
