//! Transition times and stage durations: each finished stage attempt is reported once with the
//! time since its previous transition, the node annotation carries the times, and the Skyhook
//! status mirror does not.

use jiff::SignedDuration;
use skyhook_api::keys;
use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::Stage;

use super::sim::{Sim, node, package, skyhook};

const NAME: &str = "timing";

/// (node, skyhook, package, stage, seconds) of a plan's stage durations.
type Row = (String, String, String, Stage, f64);

#[test]
fn each_finished_stage_is_reported_once_with_its_duration() {
    let mut sim = Sim::new(
        vec![node("node-0", 0)],
        vec![skyhook(NAME, vec![package("tuning", "1.0.0")])],
    );
    sim.snapshot
        .workload_pods
        .insert("node-0".into(), Vec::new());
    let mut rows: Vec<Row> = Vec::new();
    for _ in 0..12 {
        let planned = sim.step();
        rows.extend(planned.stage_durations.iter().map(|d| {
            (
                d.node.clone(),
                d.skyhook.clone(),
                d.finished.package.clone(),
                d.finished.stage,
                d.finished.seconds,
            )
        }));
        // Every pod runs for a minute (`step` adds one second).
        sim.now += SignedDuration::from_secs(59);
        sim.settle(|_| false);
    }
    let row = |stage| {
        (
            "node-0".to_owned(),
            NAME.to_owned(),
            "tuning".to_owned(),
            stage,
            60.0,
        )
    };
    assert_eq!(rows, vec![row(Stage::Apply), row(Stage::Config)]);

    let annotation = sim
        .node("node-0")
        .annotations
        .get(&keys::node_state_annotation(NAME))
        .expect("the node state annotation");
    let state = NodeState::parse(annotation).unwrap();
    let entry = state.get_version("tuning", "1.0.0").unwrap();
    assert!(
        entry.last_transition_time.is_some(),
        "the node carries the time: {annotation}"
    );
    let status = sim.skyhook(NAME).status.clone().unwrap();
    let mirrored = status.node_state["node-0"]
        .get_version("tuning", "1.0.0")
        .unwrap();
    assert_eq!(
        mirrored.last_transition_time, None,
        "the status mirror does not"
    );
    assert!(mirrored.same_progress(entry));
}

#[test]
fn a_settled_node_is_not_rewritten() {
    let mut sim = Sim::new(
        vec![node("node-0", 0)],
        vec![skyhook(NAME, vec![package("tuning", "1.0.0")])],
    );
    sim.snapshot
        .workload_pods
        .insert("node-0".into(), Vec::new());
    sim.run(30);
    let planned = sim.step();
    assert!(planned.nodes.is_empty(), "{:?}", planned.nodes);
    assert!(planned.statuses.is_empty(), "{:?}", planned.statuses);
    assert!(planned.stage_durations.is_empty());
}
