//! Which nodes a Skyhook targets and which policy it rolls out by, as the plan sees them: the
//! same rules (`SkyhookSpec::target_selector`, `SkyhookSpec::policy_name`) the metrics and the
//! plugin use.

use skyhook_api::string_map::PackedMap;

use skyhook_api::v1alpha1::{Stage, Status};

use super::sim::{Sim, node, package, skyhook};

fn pod(s: &str, p: &str, v: &str, stage: Stage) -> (String, String, String, Stage) {
    (s.into(), p.into(), v.into(), stage)
}

/// Upstream: an empty selector selects every node, whatever its labels.
#[test]
fn a_skyhook_without_node_selectors_rolls_out_to_every_node() {
    let mut unlabelled = node("plain", 1);
    unlabelled.labels = PackedMap::new();
    let mut everywhere = skyhook("everywhere", vec![package("one", "1.0.0")]);
    everywhere.spec.node_selectors = None;
    let mut sim = Sim::new(vec![node("worker", 0), unlabelled], vec![everywhere]);
    let created = sim.run(20);
    assert_eq!(
        created,
        vec![
            pod("everywhere", "one", "1.0.0", Stage::Apply),
            pod("everywhere", "one", "1.0.0", Stage::Apply),
            pod("everywhere", "one", "1.0.0", Stage::Config),
            pod("everywhere", "one", "1.0.0", Stage::Config),
        ]
    );
    for name in ["worker", "plain"] {
        assert_eq!(
            sim.node_status("everywhere", name).as_deref(),
            Some("complete"),
            "{name}"
        );
    }
    let status = sim.skyhook("everywhere").status.clone().unwrap_or_default();
    assert_eq!(status.status, Some(Status::Complete));
    assert_eq!(status.complete_nodes, "2/2");
}

/// `deploymentPolicy: ""` means "no policy" (validation, metrics and upstream): the Skyhook rolls
/// out with its own interruption budget instead of waiting for a policy named "".
#[test]
fn an_empty_deployment_policy_rolls_out_without_a_policy() {
    let mut unnamed = skyhook("unnamed", vec![package("one", "1.0.0")]);
    unnamed.spec.deployment_policy = Some(String::new());
    let mut sim = Sim::new(vec![node("worker", 0)], vec![unnamed]);
    let created = sim.run(20);
    assert_eq!(
        created,
        vec![
            pod("unnamed", "one", "1.0.0", Stage::Apply),
            pod("unnamed", "one", "1.0.0", Stage::Config),
        ]
    );
    assert_eq!(sim.skyhook_status("unnamed"), Some(Status::Complete));
    let conditions = sim
        .skyhook("unnamed")
        .status
        .clone()
        .unwrap_or_default()
        .conditions;
    assert!(
        !conditions
            .iter()
            .any(|c| c.type_ == skyhook_api::keys::SKYHOOK.condition_deployment_policy_not_found),
        "{conditions:?}"
    );
}
