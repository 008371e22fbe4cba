//! The node-metadata ConfigMap (`annotations.json`, `labels.json`) that package pods read is
//! current with the node when each package pod starts, and is not written when nothing changed.

use std::collections::BTreeMap;
use std::sync::Arc;

use skyhook_api::v1alpha1::Stage;

use super::sim::{Sim, node, package, skyhook};
use crate::configmaps::{ANNOTATIONS_KEY, LABELS_KEY};
use crate::names::node_metadata_configmap_name;
use crate::reconcile::plan::Plan;

const NAME: &str = "meta";

fn configmap_name() -> String {
    node_metadata_configmap_name(NAME, "worker")
}

/// The node-metadata upsert of `planned`, if any.
fn upserted(planned: &Plan) -> Option<&BTreeMap<String, String>> {
    planned
        .upsert_configmaps
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(configmap_name().as_str()))
        .and_then(|c| c.data.as_ref())
}

fn decoded(data: &BTreeMap<String, String>, key: &str) -> BTreeMap<String, String> {
    serde_json::from_str(&data[key]).expect("the ConfigMap holds a JSON object")
}

/// The stored ConfigMap says what the node says, labels and annotations alike.
fn assert_current(sim: &Sim, when: &str) {
    let written = sim.written_configmaps[&configmap_name()].data.as_ref();
    assert!(
        sim.snapshot.metadata_configmaps[&configmap_name()].holds(written),
        "the cache holds what was written {when}"
    );
    let stored = written.expect("the ConfigMap has data");
    let node = sim.node("worker");
    assert_eq!(
        decoded(stored, LABELS_KEY),
        node.labels.to_map(),
        "labels {when}"
    );
    assert_eq!(
        decoded(stored, ANNOTATIONS_KEY),
        node.annotations.to_map(),
        "annotations {when}"
    );
}

#[test]
fn each_stage_pod_starts_with_the_node_as_it_is_and_nothing_unchanged_is_written() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook(NAME, vec![package("dexter", "1.2.3")])],
    );
    let apply = sim.step();
    assert_eq!(apply.create_pods.len(), 1);
    assert!(upserted(&apply).is_some());
    assert_current(&sim, "when the apply pod starts");

    sim.settle(|_| false);
    Arc::make_mut(&mut sim.snapshot.nodes[0])
        .labels
        .insert("example.com/team", "blue");
    let config = sim.step();
    assert_eq!(
        sim.pods(),
        vec![(NAME.into(), "dexter".into(), "1.2.3".into(), Stage::Config)]
    );
    let data = upserted(&config).expect("the config pod starts after an upsert");
    assert_eq!(
        decoded(data, LABELS_KEY)
            .get("example.com/team")
            .map(String::as_str),
        Some("blue")
    );
    assert_current(&sim, "when the config pod starts");

    // The config pod vanishes and is started again on a node that did not change since.
    sim.snapshot.pods.clear();
    let again = sim.step();
    assert_eq!(
        again.create_pods.len(),
        1,
        "the config pod is started again"
    );
    assert_eq!(
        upserted(&again),
        None,
        "nothing changed, nothing is written"
    );
    assert_current(&sim, "when the config pod starts again");
}
