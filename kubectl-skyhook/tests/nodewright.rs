//! The verbs and views under `kubectl nodewright`: the nodewright group's keys only, upstream's
//! texts, and the two node-state edits (`reset --package`, `update-state`).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::{demo, node};
use kubectl_skyhook::cluster::Cluster;
use kubectl_skyhook::patches::{self, Lifecycle, PlanError, StateUpdate, Target};
use kubectl_skyhook::pattern::parse_all;
use kubectl_skyhook::views;
use serde_json::{Value, json};
use skyhook_api::generation::Group;
use skyhook_api::keys::{NODEWRIGHT, SKYHOOK};
use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::{Skyhook, Stage, State};

const IMAGE: &str = "ghcr.io/nvidia/skyhook-packages/shellscript";

fn entry(name: &str, version: &str, stage: &str, state: &str, restarts: i32) -> Value {
    json!({"name": name, "version": version, "image": IMAGE, "stage": stage, "state": state,
           "restarts": restarts})
}

/// A node-state annotation value of `entries`.
fn state_of(entries: &[Value]) -> String {
    let map: serde_json::Map<String, Value> = entries
        .iter()
        .map(|e| {
            let key = format!(
                "{}|{}",
                e["name"].as_str().unwrap(),
                e["version"].as_str().unwrap()
            );
            (key, e.clone())
        })
        .collect();
    Value::Object(map).to_string()
}

fn selected() -> Value {
    json!({"skyhook.nvidia.com/test-node": "demo"})
}

/// The demo as a NodeWright, with a second package, on four nodes:
/// - n1: tuning 1.1.0 complete and extra 2.0.0 complete, cordoned by it, status label;
/// - n2: an old tuning 1.0.0 erroring, not selected any more;
/// - n3: no node state;
/// - n4: node state only under the skyhook prefix (another object's keys, never touched).
fn cluster() -> Cluster {
    let mut object = demo();
    let mut extra = object.spec.packages["tuning"].clone();
    extra.name = "extra".into();
    extra.version = "2.0.0".into();
    object.spec.packages.insert("extra".into(), extra);
    let n1_state = state_of(&[
        entry("tuning", "1.1.0", "config", "complete", 0),
        entry("extra", "2.0.0", "config", "complete", 0),
    ]);
    Cluster {
        group: Group::NodeWright,
        skyhooks: vec![object],
        read_at: "2026-01-01T11:20:00Z".parse().unwrap(),
        nodes: vec![
            node(
                "n1",
                1,
                selected(),
                json!({
                    NODEWRIGHT.node_state_annotation("demo"): n1_state,
                    NODEWRIGHT.cordon_annotation("demo"): "true",
                    NODEWRIGHT.node_status_key("demo"): "complete",
                    NODEWRIGHT.runtime_required_cordon_annotation: "true",
                }),
                json!([]),
            ),
            node(
                "n2",
                2,
                json!({}),
                json!({
                    NODEWRIGHT.node_state_annotation("demo"):
                        state_of(&[entry("tuning", "1.0.0", "apply", "erroring", 3)]),
                }),
                json!([]),
            ),
            node("n3", 3, selected(), json!({}), json!([])),
            node(
                "n4",
                4,
                selected(),
                json!({
                    SKYHOOK.node_state_annotation("demo"):
                        state_of(&[entry("tuning", "1.1.0", "config", "complete", 0)]),
                }),
                json!([]),
            ),
        ],
        ..Cluster::default()
    }
}

fn object(cluster: &Cluster) -> &Skyhook {
    cluster.skyhook("demo").unwrap()
}

fn node_targets(change: &patches::Change) -> Vec<String> {
    (change.patches.iter())
        .filter_map(|p| match &p.target {
            Target::Node(name) => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// The node state a node patch writes, `None` when it removes the annotation.
fn written_state(change: &patches::Change, node: &str) -> Option<NodeState> {
    let patch = (change.patches.iter())
        .find(|p| p.target == Target::Node(node.into()))
        .unwrap();
    let value = &patch.body["metadata"]["annotations"][NODEWRIGHT.node_state_annotation("demo")];
    value.as_str().map(|text| NodeState::parse(text).unwrap())
}

#[test]
fn reset_package_removes_only_the_matching_entries_and_nothing_else() {
    let cluster = cluster();
    let change = patches::reset_package(&cluster, "demo", "tuning", None);
    assert_eq!(
        change.summary,
        [
            "NodeWright: demo",
            "Package filter: tuning",
            "Nodes with a matching package (2):",
            "  - n1 (1 packages)",
            "  - n2 (1 packages)",
        ]
    );
    assert_eq!(
        change.done,
        ["Successfully reset 2 node(s) for NodeWright \"demo\""]
    );
    assert!(change.confirm);
    assert_eq!(node_targets(&change), ["n1", "n2"], "and no status patch");
    let n1 = written_state(&change, "n1").unwrap();
    assert!(n1.get_version("tuning", "1.1.0").is_none());
    assert!(n1.get_version("extra", "2.0.0").is_some());
    assert_eq!(written_state(&change, "n2"), None, "an emptied state goes");
    for patch in &change.patches {
        let annotations = patch.body["metadata"]["annotations"].as_object().unwrap();
        assert!(
            !annotations.contains_key(&NODEWRIGHT.cordon_annotation("demo")),
            "{annotations:?}"
        );
        assert!(annotations.keys().all(|k| k.starts_with(NODEWRIGHT.group)));
        assert!(patch.body["metadata"].get("labels").is_none());
    }

    let one_version = patches::reset_package(&cluster, "demo", "tuning", Some("1.0.0"));
    assert_eq!(node_targets(&one_version), ["n2"]);
    assert_eq!(one_version.summary[1], "Package filter: tuning:1.0.0");

    let none = patches::reset_package(&cluster, "demo", "nope", None);
    assert!(none.patches.is_empty());
    assert_eq!(
        none.notes.last().map(String::as_str),
        Some("no matching package on any node")
    );
}

#[test]
fn reset_speaks_upstreams_words_and_reads_only_nodewright_keys() {
    let cluster = cluster();
    let change = patches::reset(&cluster, object(&cluster), true);
    assert_eq!(
        change.summary,
        [
            "NodeWright: demo",
            "Nodes to reset (2):",
            "  - n1 (2 packages)",
            "  - n2 (1 packages)"
        ]
    );
    assert_eq!(
        change.done[0],
        "Successfully reset 2 node(s) for NodeWright \"demo\""
    );
    assert_eq!(
        node_targets(&change),
        ["n1", "n2"],
        "n4's skyhook keys are not ours"
    );
    let annotations = |node: &str| {
        (change.patches.iter())
            .find(|p| p.target == Target::Node(node.into()))
            .unwrap()
            .body["metadata"]["annotations"]
            .as_object()
            .unwrap()
            .clone()
    };
    // n1 is still selected: its cordon stays for the next run to release. n2 is not.
    assert!(!annotations("n1").contains_key(&NODEWRIGHT.cordon_annotation("demo")));
    assert!(annotations("n2").contains_key(&NODEWRIGHT.cordon_annotation("demo")));
    for node in ["n1", "n2"] {
        assert!(
            annotations(node)
                .keys()
                .all(|k| k.starts_with(NODEWRIGHT.group))
        );
    }
}

#[test]
fn batch_reset_says_upstreams_line_for_a_nodewright() {
    let mut cluster = cluster();
    let status: skyhook_api::v1alpha1::SkyhookStatus = serde_json::from_value(json!({
        "compartmentStatuses": {"__default__": {"matched": 2, "ceiling": 2, "inProgress": 0,
            "completed": 1, "progressPercent": 50, "batchState": {"currentBatch": 3}}}
    }))
    .unwrap();
    cluster.skyhooks[0].status = Some(status);
    let change = patches::reset(&cluster, object(&cluster), false);
    assert!(
        change
            .done
            .contains(&"Batch state reset for NodeWright \"demo\"".to_owned())
    );
    let policy = patches::deployment_policy_reset_in(Group::NodeWright, object(&cluster));
    assert_eq!(policy.done, ["Batch state reset for NodeWright \"demo\""]);
}

fn update<'a>(
    patterns: &'a [kubectl_skyhook::pattern::NodePattern],
    selected: Option<&'a [String]>,
    add: bool,
) -> StateUpdate<'a> {
    StateUpdate {
        package: "tuning",
        version: "1.1.0",
        stage: Stage::Interrupt,
        state: State::InProgress,
        nodes: patterns,
        selected,
        add,
    }
}

#[test]
fn update_state_rewrites_the_entry_on_nodes_that_have_it() {
    let cluster = cluster();
    let change =
        patches::update_state(&cluster, object(&cluster), &update(&[], None, false)).unwrap();
    assert_eq!(node_targets(&change), ["n1"]);
    assert_eq!(
        change.notes,
        ["Warning: node n2 has no entry for package tuning (1.1.0); skipped (--add creates it)"]
    );
    let written = written_state(&change, "n1").unwrap();
    let tuning = written.get_version("tuning", "1.1.0").unwrap();
    assert_eq!(
        (tuning.stage, tuning.state),
        (Stage::Interrupt, State::InProgress)
    );
    assert!(
        written.get_version("extra", "2.0.0").is_some(),
        "other entries stay"
    );
    assert!(change.confirm);
    assert_eq!(
        change.summary,
        [
            "Setting package tuning (1.1.0) of NodeWright \"demo\" to stage interrupt state in_progress on 1 node(s):",
            "  - n1",
            "NodeWright \"demo\" is not paused: the operator may overwrite this; `kubectl nodewright pause demo` first to be sure",
        ]
    );
}

#[test]
fn update_state_targets_named_and_selected_nodes_and_warns_about_the_rest() {
    let cluster = cluster();
    let named = parse_all(&["n3".into(), "ghost".into(), "n1".into()]).unwrap();
    let change =
        patches::update_state(&cluster, object(&cluster), &update(&named, None, false)).unwrap();
    assert_eq!(node_targets(&change), ["n1"]);
    assert_eq!(
        change.notes,
        [
            "Warning: node ghost not found; skipped",
            "Warning: node n3 has no node state for NodeWright \"demo\"; skipped",
        ]
    );
    let selected = vec!["n2".to_owned()];
    let by_selector = patches::update_state(
        &cluster,
        object(&cluster),
        &update(&[], Some(&selected), false),
    )
    .unwrap();
    assert!(by_selector.patches.is_empty(), "n2 has only 1.0.0");
    assert_eq!(
        by_selector.notes.last().map(String::as_str),
        Some("No node to update for NodeWright \"demo\"")
    );
}

#[test]
fn update_state_add_creates_missing_entries_only() {
    let cluster = cluster();
    let named = parse_all(&["n[1-3]".into()]).unwrap();
    let change =
        patches::update_state(&cluster, object(&cluster), &update(&named, None, true)).unwrap();
    assert_eq!(node_targets(&change), ["n2", "n3"]);
    assert_eq!(
        change.notes,
        [
            "Warning: node n1 already has package tuning (1.1.0); skipped (--add only creates missing entries)"
        ]
    );
    let n3 = written_state(&change, "n3").unwrap();
    let added = n3.get_version("tuning", "1.1.0").unwrap();
    assert_eq!(added.image, IMAGE);
    assert_eq!(
        (added.stage, added.state, added.restarts),
        (Stage::Interrupt, State::InProgress, 0)
    );
    let n2 = written_state(&change, "n2").unwrap();
    assert!(
        n2.get_version("tuning", "1.0.0").is_some(),
        "the old entry stays"
    );
}

#[test]
fn update_state_refusals() {
    let cluster = cluster();
    let object = object(&cluster);
    assert_eq!(
        patches::update_state(&cluster, object, &update(&[], None, true)).unwrap_err(),
        PlanError::AddNeedsTargets
    );
    let wrong_version = StateUpdate {
        version: "9.9.9",
        ..update(&[], None, false)
    };
    let error = patches::update_state(&cluster, object, &wrong_version).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("is at version 1.1.0 in the spec, not 9.9.9"),
        "{error}"
    );
    let unknown = StateUpdate {
        package: "nope",
        ..update(&[], None, false)
    };
    assert_eq!(
        patches::update_state(&cluster, object, &unknown).unwrap_err(),
        PlanError::UnknownPackage {
            package: "nope".into(),
            skyhook: "demo".into(),
            kind: "NodeWright",
        }
    );
    assert!(
        (PlanError::UnknownPackage {
            package: "nope".into(),
            skyhook: "demo".into(),
            kind: "NodeWright",
        })
        .to_string()
        .contains("`kubectl nodewright package status`")
    );
}

#[test]
fn a_paused_nodewright_gets_no_pause_advice() {
    let mut cluster = cluster();
    cluster.skyhooks[0].metadata.annotations = Some(
        [(NODEWRIGHT.pause_annotation.to_owned(), "true".to_owned())]
            .into_iter()
            .collect(),
    );
    let change =
        patches::update_state(&cluster, object(&cluster), &update(&[], None, false)).unwrap();
    assert!(
        !change
            .summary
            .iter()
            .any(|line| line.contains("not paused"))
    );
}

#[test]
fn node_state_edits_need_operator_0_7_5() {
    for (operator, allowed) in [
        (None, true),
        (Some("v0.7.5"), true),
        (Some("0.13.0"), true),
        (Some("v0.7.4"), false),
        (Some("not-a-version"), true),
    ] {
        assert_eq!(
            patches::require_node_state_edits("update-state", operator).is_ok(),
            allowed,
            "{operator:?}"
        );
    }
}

#[test]
fn lifecycle_verbs_use_the_nodewright_annotations() {
    let cluster = cluster();
    let change =
        patches::lifecycle_in(Group::NodeWright, object(&cluster), Lifecycle::Pause, None).unwrap();
    assert_eq!(
        change.patches[0].body,
        json!({"metadata": {"annotations": {NODEWRIGHT.pause_annotation: "true"}}})
    );
    assert_eq!(change.done, ["NodeWright \"demo\" paused"]);
    let mut paused = object(&cluster).clone();
    paused.metadata.annotations = Some(
        [(NODEWRIGHT.pause_annotation.to_owned(), "true".to_owned())]
            .into_iter()
            .collect(),
    );
    let again = patches::lifecycle_in(Group::NodeWright, &paused, Lifecycle::Pause, None).unwrap();
    assert!(again.patches.is_empty());
    assert_eq!(again.notes, ["NodeWright \"demo\" is already paused"]);
    // The skyhook group's annotation means nothing to a NodeWright.
    paused.metadata.annotations = Some(
        [(SKYHOOK.pause_annotation.to_owned(), "true".to_owned())]
            .into_iter()
            .collect(),
    );
    let ignored =
        patches::lifecycle_in(Group::NodeWright, &paused, Lifecycle::Pause, None).unwrap();
    assert_eq!(ignored.patches.len(), 1);
}

#[test]
fn node_views_read_the_nodewright_keys() {
    let cluster = cluster();
    let status = views::node_status(&cluster, &[], None);
    let rows: Vec<(&str, &str, bool, bool)> = (status.nodes.iter())
        .map(|n| {
            (
                n.node_name.as_str(),
                n.skyhook.as_str(),
                n.cordoned,
                n.runtime_required_cordon,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [("n1", "demo", false, true), ("n2", "demo", false, false)]
    );
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["nodes"][0]["runtimeRequiredCordon"], true);
    assert_eq!(json["nodes"][0]["cordoned"], false);
    let table = kubectl_skyhook::output::render(
        &status,
        kubectl_skyhook::output::OutputFormat::Table,
        false,
    )
    .unwrap();
    let header = table.lines().next().unwrap();
    assert!(
        header.contains("NODEWRIGHT") && header.contains("RUNTIME-REQUIRED-CORDON"),
        "{header}"
    );
    assert!(header.contains("CORDONED"), "{header}");
    let list = views::node_list(&cluster, "demo");
    let list_text =
        kubectl_skyhook::output::render(&list, kubectl_skyhook::output::OutputFormat::Table, false)
            .unwrap();
    assert!(list_text.starts_with("NodeWright: demo\n"), "{list_text}");
    assert_eq!(list.nodes.len(), 2);
}

#[test]
fn reset_of_a_gone_object_clears_its_leftovers_cordons_included() {
    let cluster = cluster();
    let change = patches::reset_gone(&cluster, "demo").unwrap();
    assert_eq!(
        change.summary[0],
        "NodeWright \"demo\" does not exist: only its node keys are reset."
    );
    assert_eq!(
        node_targets(&change),
        ["n1", "n2"],
        "no status patch: there is no object"
    );
    for patch in &change.patches {
        let annotations = patch.body["metadata"]["annotations"].as_object().unwrap();
        assert!(
            annotations.contains_key(&NODEWRIGHT.cordon_annotation("demo")),
            "{annotations:?}"
        );
    }
    assert_eq!(
        patches::reset_gone(&cluster, "typo"),
        None,
        "nothing left: not found"
    );
}

#[test]
fn reset_of_an_unreadable_object_keeps_every_cordon_and_warns() {
    let cluster = cluster();
    let change = patches::reset_unreadable(&cluster, "demo", "the API server answered 403");
    assert!(
        change.notes[0].starts_with("Warning: could not read NodeWright \"demo\""),
        "{:?}",
        change.notes
    );
    assert_eq!(node_targets(&change), ["n1", "n2"]);
    for patch in &change.patches {
        let annotations = patch.body["metadata"]["annotations"].as_object().unwrap();
        assert!(
            !annotations.contains_key(&NODEWRIGHT.cordon_annotation("demo")),
            "{annotations:?}"
        );
    }
    assert!(
        change.done.contains(
            &"Node \"n1\" keeps the cordon of NodeWright \"demo\": its next run releases it"
                .to_owned()
        ),
        "{:?}",
        change.done
    );
}
