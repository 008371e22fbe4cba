use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::keys;
use crate::node_state::NodeState;
use crate::v1alpha1::{SkyhookStatus, Status};

/// One case: the node's annotations, the status read, the node, what it reads as.
type Case<'a, T> = (
    &'a [(&'a str, &'a str)],
    Option<&'a SkyhookStatus>,
    &'a str,
    T,
);

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn the_boot_id_comes_from_the_node_then_from_a_status_not_yet_migrated() {
    let keys = NodeRecordKeys::of(&keys::SKYHOOK, "demo");
    let mut status = SkyhookStatus::default();
    status.node_boot_ids.insert("n1".into(), "old".into());
    let on_node = [("skyhook.nvidia.com/bootId_demo", "new")];
    let other_skyhook = [("skyhook.nvidia.com/bootId_other", "x")];
    let cases: [Case<'_, Option<&str>>; 6] = [
        (&on_node, Some(&status), "n1", Some("new")),
        (&[], Some(&status), "n1", Some("old")),
        (&other_skyhook, Some(&status), "n1", Some("old")),
        (&[], Some(&status), "n2", None),
        (&[], None, "n1", None),
        (&on_node, None, "n1", Some("new")),
    ];
    for (pairs, status, node, expected) in cases {
        let annotations = annotations(pairs);
        assert_eq!(
            keys.boot_id(&annotations, status, node),
            expected,
            "{pairs:?} {node}"
        );
    }
}

#[test]
fn the_pick_comes_from_the_node_then_from_a_status_not_yet_migrated() {
    let keys = NodeRecordKeys::of(&keys::SKYHOOK, "demo");
    let mut status = SkyhookStatus::default();
    status.node_priority.insert("n1".into(), at(100));
    let on_node = [("skyhook.nvidia.com/pickedAt_demo", "1970-01-01T00:03:20Z")];
    let garbled = [("skyhook.nvidia.com/pickedAt_demo", "soon")];
    let cases: [Case<'_, Option<Time>>; 6] = [
        (&on_node, Some(&status), "n1", Some(at(200))),
        (&[], Some(&status), "n1", Some(at(100))),
        (&[], Some(&status), "n2", None),
        (&[], None, "n1", None),
        (&garbled, None, "n2", Some(at(0))),
        (&garbled, Some(&status), "n1", Some(at(0))),
    ];
    for (pairs, status, node, expected) in cases {
        let annotations = annotations(pairs);
        assert_eq!(
            keys.picked_at(&annotations, status, node),
            expected,
            "{pairs:?} {node}"
        );
    }
}

#[test]
fn a_pick_time_reads_back_as_written() {
    let keys = NodeRecordKeys::of(&keys::SKYHOOK, "demo");
    let picked = Time(Timestamp::from_second(1_700_000_000).unwrap());
    let text = pick_time_text(&picked);
    assert_eq!(text, "2023-11-14T22:13:20Z");
    let annotations = annotations(&[("skyhook.nvidia.com/pickedAt_demo", &text)]);
    assert_eq!(keys.picked_at(&annotations, None, "n"), Some(picked));
}

/// The status the planner leaves for `nodes` nodes mid-rollout: one package per node (a
/// quarter in progress), every boot ID, a tenth of the nodes picked; node names as on a cloud.
fn status_of(nodes: usize) -> SkyhookStatus {
    let complete = NodeState::parse(
        r#"{"pkg|1.2.3":{"name":"pkg","version":"1.2.3","image":"ghcr.io/nvidia/skyhook/agentless","stage":"config","state":"complete"}}"#,
    )
    .unwrap();
    let running = NodeState::parse(
        r#"{"pkg|1.2.3":{"name":"pkg","version":"1.2.3","image":"ghcr.io/nvidia/skyhook/agentless","stage":"apply","state":"in_progress"}}"#,
    )
    .unwrap();
    let mut status = SkyhookStatus::default();
    for index in 0..nodes {
        let node = format!(
            "ip-10-{}-{}-{}.ec2.internal",
            index / 65_536,
            (index / 256) % 256,
            index % 256
        );
        let in_progress = index % 4 == 0;
        let state = if in_progress { &running } else { &complete };
        status.node_state.insert(node.clone(), state.clone());
        let node_status = if in_progress {
            Status::InProgress
        } else {
            Status::Complete
        };
        status.node_status.insert(node.clone(), node_status);
        status
            .node_boot_ids
            .insert(node.clone(), format!("0f3c9a52-7d1e-4b8a-9c2f-{index:012}"));
        if index % 10 == 0 {
            status.node_priority.insert(node, at(1_700_000_000));
        }
    }
    status
}

/// Prints what the status costs at 1k, 5k and 20k nodes, unbounded and bounded (run with
/// `--nocapture`); fails if a bounded status would not stay well under etcd's 1.5 MiB.
#[test]
fn the_bounded_status_stays_writable_at_any_node_count() {
    for nodes in [0, 10, 1_000, 1_600, 1_700, 1_900, 2_000, 5_000, 20_000] {
        let unbounded = status_of(nodes);
        let mut bounded = unbounded.clone();
        bound_node_mirrors(&mut bounded);
        let (json, applied) = (json_bytes(&unbounded), applied_bytes(&unbounded));
        let (bounded_json, bounded_applied) = (json_bytes(&bounded), applied_bytes(&bounded));
        println!(
            "{nodes:>6} nodes: status JSON {json:>9} B, with managedFields {applied:>9} B; bounded: JSON {bounded_json:>7} B, with managedFields {bounded_applied:>7} B (nodeState kept: {}, bookkeeping kept: {})",
            !bounded.node_state.is_empty() || nodes == 0,
            !bounded.node_status.is_empty() || nodes == 0,
        );
        assert!(
            bounded_applied < 1024 * 1024,
            "{nodes} nodes: {bounded_applied} B"
        );
    }
}

#[test]
fn small_statuses_keep_every_mirror_and_large_ones_drop_them_whole() {
    // (nodes, nodeState kept, bookkeeping maps kept)
    let cases = [
        (0, true, true),
        (3, true, true),
        (1_000, true, true),
        (1_500, true, true),
        (1_800, false, true),
        (5_000, false, false),
        (20_000, false, false),
    ];
    for (nodes, state_kept, bookkeeping_kept) in cases {
        let mut status = status_of(nodes);
        bound_node_mirrors(&mut status);
        let len = |kept: bool| if kept { nodes } else { 0 };
        assert_eq!(status.node_state.len(), len(state_kept), "{nodes} nodes");
        assert_eq!(
            status.node_status.len(),
            len(bookkeeping_kept),
            "{nodes} nodes"
        );
        assert_eq!(
            status.node_boot_ids.len(),
            len(bookkeeping_kept),
            "{nodes} nodes"
        );
        assert_eq!(
            status.node_priority.len(),
            if bookkeeping_kept {
                nodes.div_ceil(10)
            } else {
                0
            },
            "{nodes} nodes"
        );
    }
}

#[test]
fn managed_fields_name_every_key_again() {
    let value = serde_json::json!({"nodeBootIds": {"a": "1", "b": "2"}, "status": "complete"});
    assert_eq!(
        managed_fields(&value),
        serde_json::json!({"f:nodeBootIds": {".": {}, "f:a": {}, "f:b": {}}, "f:status": {}})
    );
}
