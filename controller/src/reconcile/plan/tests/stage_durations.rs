//! Transition times and stage durations: each finished stage attempt is reported once with the
//! time since its previous transition; the times live in the node annotation
//! `stageTimes_<skyhook>`, beside a node state that stays exactly upstream's JSON.

use jiff::SignedDuration;
use skyhook_api::keys;
use skyhook_api::node_state::NodeState;
use skyhook_api::transition::recorded_times;
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

    // The times live beside the node state, which stays exactly upstream's JSON.
    let annotations = &sim.node("node-0").annotations;
    let state_text = annotations
        .get(&keys::SKYHOOK.node_state_annotation(NAME))
        .expect("the node state annotation");
    assert_eq!(
        state_text,
        r#"{"tuning|1.0.0":{"name":"tuning","version":"1.0.0","image":"ghcr.io/nvidia/skyhook/agentless","stage":"config","state":"complete"}}"#
    );
    let state = NodeState::parse(state_text).unwrap();
    let entry = state.get_version("tuning", "1.0.0").unwrap();
    let times = recorded_times(annotations, &keys::SKYHOOK, NAME);
    assert!(
        times.of(entry).is_some(),
        "the node carries the time: {:?}",
        annotations.get(&keys::SKYHOOK.stage_times_annotation(NAME))
    );
    let status = sim.skyhook(NAME).status.clone().unwrap();
    let mirrored = status.node_state["node-0"]
        .get_version("tuning", "1.0.0")
        .unwrap();
    assert_eq!(mirrored, entry, "the status mirrors the node state");
}

#[test]
fn times_our_earlier_releases_wrote_into_the_node_state_move_to_their_own_annotation() {
    let mut sim = Sim::new(
        vec![node("node-0", 0)],
        vec![skyhook(NAME, vec![package("tuning", "1.0.0")])],
    );
    sim.run(20);
    let upstream_form = r#"{"tuning|1.0.0":{"name":"tuning","version":"1.0.0","image":"ghcr.io/nvidia/skyhook/agentless","stage":"config","state":"complete"}}"#;
    let ours_before = r#"{"tuning|1.0.0":{"name":"tuning","version":"1.0.0","image":"ghcr.io/nvidia/skyhook/agentless","stage":"config","state":"complete","lastTransitionTime":"2027-01-15T08:00:00Z"}}"#;
    let node = std::sync::Arc::make_mut(&mut sim.snapshot.nodes[0]);
    node.annotations
        .insert(keys::SKYHOOK.node_state_annotation(NAME), ours_before);
    node.annotations
        .remove(&keys::SKYHOOK.stage_times_annotation(NAME));
    let planned = sim.step();
    let patch = &planned.nodes["node-0"].annotations;
    assert_eq!(
        patch[&keys::SKYHOOK.node_state_annotation(NAME)].as_deref(),
        Some(upstream_form),
        "written again in upstream's form"
    );
    let times = recorded_times(&sim.node("node-0").annotations, &keys::SKYHOOK, NAME);
    let expected: jiff::Timestamp = "2027-01-15T08:00:00Z".parse().unwrap();
    assert_eq!(times.latest(), Some(expected), "the time is kept");
    assert!(sim.step().nodes.is_empty(), "then settled");
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
