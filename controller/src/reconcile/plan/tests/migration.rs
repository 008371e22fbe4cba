//! A name moving between the API groups: the object taking it over adopts its twin's node
//! state in the plan that first sees both, runs no completed step again, keeps the twin's keys
//! for the rollback window and prunes them after; the twin says it is inert, and deleting it
//! uninstalls nothing and writes no node.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use skyhook_api::generation::{Group, InertReason, handoff_annotation, migrated_at_annotation};
use skyhook_api::keys::{self, Keys};
use skyhook_api::v1alpha1::Status;

use super::sim::{Sim, node, package, restarting, skyhook};
use crate::reconcile::plan::Plan;
use crate::reconcile::plan::event_kinds;
use crate::reconcile::snapshot::{Leftover, LeftoverKind};

const NODE: &str = "node-0";
const NAME: &str = "gpu";

/// One node, on which a Skyhook `gpu` with an interrupting package completed.
fn completed_skyhook() -> Sim {
    let mut sim = Sim::new(vec![node(NODE, 0)], Vec::new());
    sim.snapshot.workload_pods.insert(NODE.into(), Vec::new());
    sim.add(
        Group::Skyhook,
        skyhook(NAME, vec![restarting(), package("tools", "1.0.0")]),
    );
    sim.run(60);
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Complete));
    sim
}

/// The per-name annotations of `keys` for `gpu` on the node, with the group prefix cut off
/// (so that the two groups' keys compare), but the adoption marker.
fn name_keys(sim: &Sim, keys: &Keys) -> BTreeMap<String, String> {
    let prefix = format!("{}/", keys.group);
    (sim.node(NODE).annotations.iter())
        .filter(|(key, _)| keys.is_skyhook_node_key(key, NAME))
        .filter(|(key, _)| **key != keys.adopted_by_annotation(NAME))
        .map(|(key, value)| (key.trim_start_matches(&prefix).to_owned(), value.to_owned()))
        .collect()
}

/// Steps until a plan writes nothing more (at most `steps`), asserting that none starts a pod.
fn settle_without_pods(sim: &mut Sim, steps: usize) -> Vec<Plan> {
    let mut plans = Vec::new();
    for _ in 0..steps {
        let planned = sim.step();
        let started: Vec<_> = (planned.created_pods().into_iter())
            .filter_map(|pod| pod.metadata.name)
            .collect();
        assert!(
            started.is_empty() && sim.snapshot.pods.is_empty(),
            "a migration runs no step, but {started:?} started; the node: {:?}",
            sim.node(NODE).annotations
        );
        let idle = planned.nodes.is_empty()
            && planned.statuses.is_empty()
            && planned.twins.is_empty()
            && planned.skyhook_annotations.is_empty();
        plans.push(planned);
        if idle {
            break;
        }
    }
    plans
}

#[test]
fn a_nodewright_takes_over_a_complete_skyhook_without_running_a_step() {
    let mut sim = completed_skyhook();
    let before = name_keys(&sim, &keys::SKYHOOK);
    assert!(before.contains_key("nodeState_gpu"), "{before:?}");
    sim.add(
        Group::NodeWright,
        skyhook(NAME, vec![restarting(), package("tools", "1.0.0")]),
    );
    assert_eq!(sim.snapshot.owners.live(NAME), Some(Group::NodeWright));

    let first = sim.step();
    assert!(first.create_pods.is_empty());
    let stamp = migrated_at_annotation(Group::NodeWright);
    assert!(
        (first.skyhook_annotations.get(NAME)).is_some_and(|a| a.contains_key(&stamp)),
        "the adoption is stamped: {:?}",
        first.skyhook_annotations
    );
    assert!(
        (first.events.iter()).any(|e| e.reason == event_kinds::ADOPTED.reason
            && e.message.contains("adopted its node state on 1 node(s)")),
        "{:?}",
        first.events
    );
    let migrated = (first.twins.get(NAME))
        .and_then(|write| write.status.as_ref())
        .and_then(|status| (status.conditions.iter()).find(|c| c.type_ == keys::CONDITION_MIGRATED))
        .expect("the twin says it is inert");
    assert_eq!(
        (migrated.status.as_str(), migrated.reason.as_str()),
        ("True", keys::MIGRATED_REASON_OWNED_BY_TWIN)
    );
    assert!(
        migrated
            .message
            .contains("NodeWright gpu (nodewright.nvidia.com) does the work"),
        "{}",
        migrated.message
    );

    settle_without_pods(&mut sim, 20);
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Complete));
    assert_eq!(
        name_keys(&sim, &keys::NODEWRIGHT),
        before,
        "the NodeWright's keys are the Skyhook's, moved"
    );
    assert_eq!(
        name_keys(&sim, &keys::SKYHOOK),
        before,
        "the Skyhook's stay for the rollback window"
    );
    let node = sim.node(NODE);
    assert_eq!(
        node.annotations
            .get(&keys::NODEWRIGHT.adopted_by_annotation(NAME)),
        Some("uid-gpu-nw")
    );
    assert!(!node.unschedulable, "never cordoned");
}

#[test]
fn after_the_window_the_twins_keys_go_and_deleting_it_touches_no_node() {
    let mut sim = completed_skyhook();
    sim.config.legacy_cleanup_delay = Duration::ZERO;
    sim.add(
        Group::NodeWright,
        skyhook(NAME, vec![restarting(), package("tools", "1.0.0")]),
    );
    settle_without_pods(&mut sim, 20);
    assert!(
        name_keys(&sim, &keys::SKYHOOK).is_empty(),
        "pruned at once with a zero delay: {:?}",
        sim.node(NODE).annotations
    );
    assert!(
        !(sim.node(NODE).conditions.iter()).any(|c| c.type_.starts_with("skyhook.nvidia.com/gpu/")),
        "the twin's node conditions go too"
    );
    let adopted = name_keys(&sim, &keys::NODEWRIGHT);
    assert!(adopted.contains_key("nodeState_gpu"));

    // The twin is deleted: its finalizer goes, and nothing else happens.
    let twin = std::sync::Arc::make_mut(
        &mut (sim.snapshot.twins.iter_mut())
            .find(|t| t.name() == NAME)
            .expect("the twin")
            .object,
    );
    twin.metadata.deletion_timestamp = Some(Time(sim.now));
    let deleting = sim.step();
    assert!(
        deleting.twins.get(NAME).is_some_and(|w| w.remove_finalizer),
        "{:?}",
        deleting.twins
    );
    assert!(
        deleting.nodes.is_empty()
            && deleting.create_pods.is_empty()
            && deleting.delete_jobs.is_empty()
            && deleting.delete_pods.is_empty(),
        "an inert twin's deletion writes no node and deletes no run: {deleting:?}"
    );
    // Gone: nothing of it is left, so the stamp goes.
    sim.snapshot.twins.clear();
    let done = sim.step();
    assert_eq!(
        done.skyhook_annotations
            .get(NAME)
            .and_then(|a| a.get(&migrated_at_annotation(Group::NodeWright))),
        Some(&None),
        "{:?}",
        done.skyhook_annotations
    );
    assert_eq!(name_keys(&sim, &keys::NODEWRIGHT), adopted);
}

#[test]
fn a_nodewright_waits_while_its_skyhook_twin_is_mid_rollout() {
    let mut sim = Sim::new(vec![node(NODE, 0)], Vec::new());
    sim.snapshot.workload_pods.insert(NODE.into(), Vec::new());
    sim.add(
        Group::Skyhook,
        skyhook(NAME, vec![package("tools", "1.0.0")]),
    );
    let started = sim.step();
    assert_eq!(
        started.create_pods.len(),
        1,
        "the Skyhook's first stage runs"
    );
    sim.add(
        Group::NodeWright,
        skyhook(NAME, vec![package("tools", "1.0.0")]),
    );
    assert_eq!(sim.snapshot.owners.live(NAME), Some(Group::Skyhook));
    assert_eq!(sim.twin(NAME).reason, InertReason::HeldForMigration);
    let held = sim.step();
    let waiting = (held.twins.get(NAME))
        .and_then(|write| write.status.as_ref())
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == keys::CONDITION_MIGRATED)
        })
        .expect("the waiting NodeWright says why");
    assert_eq!(
        (waiting.status.as_str(), waiting.reason.as_str()),
        ("False", keys::MIGRATED_REASON_WAITING)
    );
    assert!(
        !(sim.node(NODE).annotations.iter()).any(|(k, _)| k.starts_with("nodewright.nvidia.com/")),
        "nothing is adopted while the Skyhook works"
    );
    // The Skyhook finishes; the NodeWright then takes over with nothing left to run, and no
    // longer says it waits.
    let ran = sim.run(60);
    assert!(!ran.is_empty());
    assert_eq!(sim.snapshot.owners.live(NAME), Some(Group::NodeWright));
    settle_without_pods(&mut sim, 20);
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Complete));
    let conditions = &sim
        .skyhook(NAME)
        .status
        .as_ref()
        .expect("a status")
        .conditions;
    assert!(
        !conditions
            .iter()
            .any(|c| c.type_ == keys::CONDITION_MIGRATED),
        "a live object carries no Migrated condition: {conditions:?}"
    );
}

#[test]
fn an_upstream_takeover_keeps_the_nodewrights_own_keys_and_only_marks_the_node() {
    // Upstream v0.20 migrated the node and moved on under the new prefix: the NodeWright's keys
    // are there (complete), the frozen Skyhook's legacy keys beside them hold an older state,
    // and upstream stamped the NodeWright.
    let mut sim = Sim::new(vec![node(NODE, 0)], Vec::new());
    sim.snapshot.workload_pods.insert(NODE.into(), Vec::new());
    sim.add(
        Group::NodeWright,
        skyhook(NAME, vec![package("tools", "1.0.0")]),
    );
    sim.run(60);
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Complete));
    let nodewright_keys = name_keys(&sim, &keys::NODEWRIGHT);
    let legacy = [
        (keys::SKYHOOK.node_state_annotation(NAME), "{}".to_owned()),
        (
            keys::SKYHOOK.node_status_key(NAME),
            "in_progress".to_owned(),
        ),
        (
            keys::SKYHOOK.node_version_annotation(NAME),
            "v0.17.0".to_owned(),
        ),
    ];
    let view = std::sync::Arc::make_mut(&mut sim.snapshot.nodes[0]);
    for (key, value) in &legacy {
        view.annotations.insert(key, value);
    }
    let stamps = [
        ("nodewright.nvidia.com/mirrored-from", NAME),
        (
            "nodewright.nvidia.com/legacy-migrated-at",
            "2026-01-01T00:00:00Z",
        ),
    ];
    let annotations = (sim.skyhook_mut(NAME).metadata.annotations).get_or_insert_default();
    for (key, value) in stamps {
        annotations.insert(key.to_owned(), value.to_owned());
    }
    let mut frozen = skyhook(NAME, vec![package("tools", "1.0.0")]);
    frozen.status = Some(skyhook_api::v1alpha1::SkyhookStatus {
        status: Some(Status::InProgress),
        ..Default::default()
    });
    sim.add(Group::Skyhook, frozen);
    assert_eq!(
        sim.snapshot.owners.live(NAME),
        Some(Group::NodeWright),
        "an adopted NodeWright stays live whatever its frozen twin says"
    );
    let first = sim.step();
    assert!(first.create_pods.is_empty());
    let patch = &first.nodes[NODE];
    assert_eq!(
        patch.annotations.keys().collect::<Vec<_>>(),
        [&keys::NODEWRIGHT.adopted_by_annotation(NAME)],
        "only the marker: the new prefix wins, nothing is copied over it"
    );
    assert!(
        !first.skyhook_annotations.contains_key(NAME),
        "upstream's stamp stands: the window runs from it"
    );
    settle_without_pods(&mut sim, 10);
    assert_eq!(name_keys(&sim, &keys::NODEWRIGHT), nodewright_keys);
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Complete));
}

#[test]
fn a_handoff_back_to_the_skyhook_group_wins_over_stale_keys() {
    let mut sim = Sim::new(vec![node(NODE, 0)], Vec::new());
    sim.snapshot.workload_pods.insert(NODE.into(), Vec::new());
    sim.add(
        Group::NodeWright,
        skyhook(NAME, vec![package("tools", "1.0.0")]),
    );
    sim.run(60);
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Complete));
    let nodewright_keys = name_keys(&sim, &keys::NODEWRIGHT);
    // A stale skyhook-group key of the name, left by an earlier round trip.
    let stale = keys::SKYHOOK.node_version_annotation(NAME);
    std::sync::Arc::make_mut(&mut sim.snapshot.nodes[0])
        .annotations
        .insert(&stale, "v0.0.1-stale");
    let annotations = (sim.skyhook_mut(NAME).metadata.annotations).get_or_insert_default();
    annotations.insert(
        handoff_annotation(Group::NodeWright),
        Group::Skyhook.name().to_owned(),
    );
    sim.add(
        Group::Skyhook,
        skyhook(NAME, vec![package("tools", "1.0.0")]),
    );
    assert_eq!(sim.snapshot.owners.live(NAME), Some(Group::Skyhook));
    settle_without_pods(&mut sim, 20);
    assert_eq!(
        name_keys(&sim, &keys::SKYHOOK),
        nodewright_keys,
        "the handing object's keys win, the stale one is gone"
    );
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Complete));
}

#[test]
fn what_the_twin_left_in_the_namespace_moves_or_goes() {
    let mut sim = completed_skyhook();
    let leftover = |name: &str, kind: LeftoverKind| Leftover {
        kind,
        name: name.to_owned(),
        group: Group::Skyhook,
        owner: NAME.to_owned(),
        uid: Some(format!("uid-of-{name}")),
        resource_version: Some("7".to_owned()),
    };
    let twin_reference = OwnerReference {
        api_version: "skyhook.nvidia.com/v1alpha1".into(),
        kind: "Skyhook".into(),
        name: NAME.into(),
        uid: "uid-gpu".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let package_configmap = LeftoverKind::PackageConfigMap {
        labels: BTreeMap::from([
            ("skyhook.nvidia.com/name".to_owned(), NAME.to_owned()),
            ("app".to_owned(), "kept".to_owned()),
        ]),
        owner_references: vec![twin_reference.clone()],
    };
    let foreign = LeftoverKind::PackageConfigMap {
        labels: BTreeMap::from([("skyhook.nvidia.com/name".to_owned(), NAME.to_owned())]),
        owner_references: vec![OwnerReference {
            kind: "Deployment".into(),
            ..twin_reference
        }],
    };
    sim.snapshot.leftovers = vec![
        leftover("gpu-tools-1.0.0-apply-node-0", LeftoverKind::Job),
        leftover("gpu-old-pod", LeftoverKind::Pod),
        leftover("gpu-metadata-node-0", LeftoverKind::MetadataConfigMap),
        leftover("gpu-tools-1.0.0", package_configmap),
        leftover("gpu-foreign", foreign),
        Leftover {
            owner: "other".into(),
            ..leftover("other-job", LeftoverKind::Job)
        },
    ];
    sim.add(
        Group::NodeWright,
        skyhook(NAME, vec![restarting(), package("tools", "1.0.0")]),
    );
    let first = sim.step();
    let deleted: Vec<&str> = (first.delete_leftovers.iter())
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(
        deleted,
        [
            "gpu-tools-1.0.0-apply-node-0",
            "gpu-old-pod",
            "gpu-metadata-node-0"
        ],
        "only the name's own leftovers, each as read (uid {:?})",
        first.delete_leftovers[0].uid
    );
    let moved = &first.move_configmaps;
    assert_eq!(moved.keys().collect::<Vec<_>>(), ["gpu-tools-1.0.0"]);
    let moved = &moved["gpu-tools-1.0.0"];
    assert_eq!(
        moved.labels,
        BTreeMap::from([
            ("skyhook.nvidia.com/name".to_owned(), None),
            (
                "nodewright.nvidia.com/name".to_owned(),
                Some(NAME.to_owned())
            ),
        ])
    );
    let owners: Vec<(&str, &str)> = (moved.owner_references.iter())
        .map(|r| (r.kind.as_str(), r.uid.as_str()))
        .collect();
    assert_eq!(owners, [("NodeWright", "uid-gpu-nw")], "re-parented");
}
