//! A node whose `nodeState_<skyhook>` does not parse is skipped and reported while the others
//! roll; the explicit-uninstall conditions follow the node states, even while paused.

use std::collections::BTreeMap;
use std::sync::Arc;

use skyhook_api::generation::Group;
use skyhook_api::keys;
use skyhook_api::v1alpha1::{Stage, State};

use super::sim::{Sim, node, package, skyhook};
use crate::reconcile::plan::EventTarget;
use crate::reconcile::plan::event_kinds::NODE_STATE_MALFORMED;
use crate::reconcile::snapshot::Workload;

fn condition(sim: &Sim, type_: &str) -> Option<(String, String, String)> {
    sim.skyhook("x")
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn triple(status: &str, reason: &str, message: &str) -> Option<(String, String, String)> {
    Some((status.into(), reason.into(), message.into()))
}

/// Three nodes; `c`'s state is corrupt while `c` is cordoned by `x` and `in_progress`.
fn three_nodes_one_corrupt() -> Sim {
    let mut corrupt = node("c", 2);
    corrupt
        .annotations
        .insert(keys::SKYHOOK.node_state_annotation("x"), "{not json");
    corrupt
        .annotations
        .insert(keys::SKYHOOK.cordon_annotation("x"), "true");
    corrupt
        .annotations
        .insert(keys::SKYHOOK.node_status_key("x"), "in_progress");
    corrupt
        .labels
        .insert(keys::SKYHOOK.node_status_key("x"), "in_progress");
    corrupt.unschedulable = true;
    Sim::new(
        vec![node("a", 0), node("b", 1), corrupt],
        vec![skyhook("x", vec![package("aa", "1.0.0")])],
    )
}

/// Steps and settles until nothing changes, asserting each plan leaves `x`'s part of `c`
/// alone (no key of `x`, no cordon change, no condition of `x`) and starts no pod there.
/// Returns every plan.
fn roll_around_c(sim: &mut Sim) -> Vec<crate::reconcile::plan::Plan> {
    let mut plans = Vec::new();
    for _ in 0..20 {
        let planned = sim.step();
        if let Some(patch) = planned.nodes.get("c") {
            let mut keys_of_x = patch.annotations.keys().chain(patch.labels.keys());
            assert!(
                keys_of_x.all(|k| !k.ends_with("_x")) && patch.unschedulable.is_none(),
                "{patch:?}"
            );
            assert!(
                patch.conditions.iter().all(|c| !c.type_.contains("/x/")),
                "{patch:?}"
            );
        }
        assert!(
            planned.created_pods().iter().all(|p| p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                != Some("c")),
            "no pod on c"
        );
        sim.settle(|_| false);
        let settled = planned.statuses.is_empty() && sim.snapshot.pods.is_empty();
        plans.push(planned);
        if settled {
            break;
        }
    }
    plans
}

#[test]
fn a_malformed_node_is_skipped_and_reported_while_the_others_complete() {
    let mut sim = three_nodes_one_corrupt();
    let before = sim.node("c").clone();
    let plans = roll_around_c(&mut sim);
    let done = vec![("aa|1.0.0".to_owned(), Stage::Config, State::Complete)];
    assert_eq!(sim.state("x", "a"), done);
    assert_eq!(sim.state("x", "b"), done);
    let after = sim.node("c");
    assert_eq!(
        after.annotations, before.annotations,
        "c's annotations as they were"
    );
    assert_eq!(after.labels, before.labels);
    assert!(after.unschedulable, "x's cordon on c is not released");
    assert_eq!(
        condition(&sim, "NodeStateMalformed"),
        triple(
            "True",
            "ParseError",
            "nodeState annotation cannot be parsed on 1 node(s): c"
        )
    );
    assert_eq!(
        condition(&sim, "Ready"),
        triple(
            "False",
            "Unknown",
            "2/3 nodes complete (a, b), 1 unknown (c)"
        )
    );
    let status = sim.skyhook("x").status.clone().unwrap_or_default();
    assert_eq!(status.complete_nodes, "2/3");
    let warning = plans[0]
        .events
        .iter()
        .find(|e| {
            (e.reason, e.action) == (NODE_STATE_MALFORMED.reason, NODE_STATE_MALFORMED.action)
        })
        .expect("a Warning Event on the node");
    assert!(warning.warning);
    assert_eq!(warning.target, EventTarget::Node("c".into()));
    for fragment in [
        "skyhook.nvidia.com/nodeState_x cannot be parsed",
        "not a JSON object",
        "line 1 column 2",
        "Skyhook [x] skips this node",
    ] {
        assert!(
            warning.message.contains(fragment),
            "{fragment:?} in {}",
            warning.message
        );
    }
    let logged: Vec<(&str, &str)> = plans[0]
        .malformed_states
        .iter()
        .map(|m| (m.node.as_str(), m.skyhook.as_str()))
        .collect();
    assert_eq!(logged, [("c", "x")], "handed to the log");
}

#[test]
fn repairing_or_deleting_the_annotation_clears_the_condition_and_the_node_completes() {
    for repair in [Some("{}"), None] {
        let mut sim = three_nodes_one_corrupt();
        roll_around_c(&mut sim);
        let key = keys::SKYHOOK.node_state_annotation("x");
        let c = sim
            .snapshot
            .nodes
            .iter_mut()
            .map(Arc::make_mut)
            .find(|n| n.name == "c")
            .expect("node c");
        match repair {
            Some(text) => c.annotations.insert(key, text),
            None => {
                c.annotations.remove(&key);
            }
        }
        sim.run(20);
        assert_eq!(condition(&sim, "NodeStateMalformed"), None, "{repair:?}");
        assert_eq!(
            sim.state("x", "c"),
            vec![("aa|1.0.0".to_owned(), Stage::Config, State::Complete)]
        );
        assert!(!sim.node("c").unschedulable, "released once complete");
        assert_eq!(
            condition(&sim, "Ready"),
            triple("True", "NodesConverged", "3/3 nodes complete (a, b, c)")
        );
    }
}

/// The state of `x` on node `a`: package `aa` at `stage`/`state`.
fn set_state(sim: &mut Sim, stage: &str, state: &str) {
    let text = format!(
        r#"{{"aa|1.0.0":{{"name":"aa","version":"1.0.0","image":"{}","stage":"{stage}","state":"{state}"}}}}"#,
        package("aa", "1.0.0").image
    );
    Arc::make_mut(&mut sim.snapshot.nodes[0])
        .annotations
        .insert(keys::SKYHOOK.node_state_annotation("x"), text);
}

#[test]
fn uninstall_conditions_follow_the_node_state_even_while_paused() {
    let mut paused = skyhook("x", vec![package("aa", "1.0.0")]);
    paused.metadata.annotations = Some(BTreeMap::from([(
        keys::SKYHOOK.pause_annotation.to_owned(),
        "true".to_owned(),
    )]));
    let mut sim = Sim::new(vec![node("a", 0)], vec![paused]);
    set_state(&mut sim, "uninstall", "erroring");
    sim.step();
    assert_eq!(
        condition(&sim, "UninstallInProgress"),
        triple(
            "True",
            "UninstallInProgress",
            "package aa is being uninstalled on 1 node(s) (a)"
        )
    );
    assert_eq!(
        condition(&sim, "UninstallFailed"),
        triple(
            "True",
            "UninstallPodFailing",
            "package aa uninstall is failing on 1 node(s) (a)"
        )
    );
    set_state(&mut sim, "uninstall-interrupt", "in_progress");
    sim.step();
    assert!(condition(&sim, "UninstallInProgress").is_some());
    assert_eq!(
        condition(&sim, "UninstallFailed"),
        None,
        "removed, not False"
    );
    set_state(&mut sim, "config", "complete");
    sim.step();
    assert_eq!(condition(&sim, "UninstallInProgress"), None);
}

/// A skipped node is incomplete for its Skyhook, so a later Skyhook waits there as it would for
/// any incomplete node, and runs on the others.
#[test]
fn a_later_skyhook_waits_on_the_skipped_node() {
    let mut sim = three_nodes_one_corrupt();
    let mut later = skyhook("y", vec![package("bb", "1.0.0")]);
    later.spec.priority = 300;
    sim.snapshot
        .skyhooks
        .push(Workload::new(Group::Skyhook, later));
    roll_around_c(&mut sim);
    let done = vec![("bb|1.0.0".to_owned(), Stage::Config, State::Complete)];
    assert_eq!(sim.state("y", "a"), done);
    assert_eq!(sim.state("y", "b"), done);
    assert_eq!(sim.state("y", "c"), vec![]);
    assert_eq!(sim.node_status("y", "c").as_deref(), Some("waiting"));
}

/// A pod already on a node whose state turns unreadable is left as it is: its success is not
/// written over the annotation and the pod is neither deleted nor judged.
#[test]
fn a_pod_on_a_node_whose_state_turns_unreadable_is_left_alone() {
    let mut sim = Sim::new(
        vec![node("c", 0)],
        vec![skyhook("x", vec![package("aa", "1.0.0")])],
    );
    sim.step();
    assert_eq!(sim.snapshot.pods.len(), 1, "a pod on c");
    Arc::make_mut(&mut sim.snapshot.nodes[0])
        .annotations
        .insert(keys::SKYHOOK.node_state_annotation("x"), "[1]");
    sim.settle(|_| false);
    for _ in 0..3 {
        let planned = sim.step();
        assert!(planned.delete_pods.is_empty(), "{:?}", planned.delete_pods);
        assert!(planned.create_pods.is_empty());
    }
    assert_eq!(sim.snapshot.pods.len(), 1);
    assert_eq!(
        sim.node("c")
            .annotations
            .get(&keys::SKYHOOK.node_state_annotation("x")),
        Some("[1]")
    );
}
