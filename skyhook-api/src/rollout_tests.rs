use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;

use super::*;
use crate::budget::{CompartmentSpec, legacy_compartments};
use crate::health::{HoldReason, Since};
use crate::selector::Selector;
use crate::v1alpha1::{InterruptionBudget, PolicyBudget};

fn now() -> Timestamp {
    "2026-06-01T12:00:00Z".parse().unwrap()
}

struct Node {
    name: &'static str,
    labels: BTreeMap<String, String>,
    status: Status,
    complete: bool,
    picked: bool,
    /// Worked on, Ready or not (for the health gate).
    worked_on: Option<bool>,
}

fn node(name: &'static str, status: Status) -> Node {
    Node {
        name,
        labels: BTreeMap::new(),
        status,
        complete: status == Status::Complete,
        picked: false,
        worked_on: None,
    }
}

const NO_TAINTS: &[Taint] = &[];

fn rollout_nodes(nodes: &[Node]) -> Vec<RolloutNode<'_>> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| RolloutNode {
            candidate: CandidateNode {
                name: n.name,
                created: Some(now() - SignedDuration::from_hours(100 - i64::try_from(i).unwrap())),
                labels: &n.labels,
                taints: NO_TAINTS,
                status: n.status,
                complete: n.complete,
                ready: true,
                picked: n.picked,
                hold: None,
            },
            gate: n.worked_on.map(|ready| GateNode {
                name: n.name,
                ready: if ready { Since::Unknown } else { Since::Not },
                schedulable: Since::Unknown,
                finished: n.complete,
            }),
        })
        .collect()
}

fn legacy(count: i32, nodes: usize) -> Vec<CompartmentSpec> {
    let budget = InterruptionBudget {
        count: Some(count),
        ..InterruptionBudget::default()
    };
    legacy_compartments(Some(&budget), nodes)
}

fn input<'i, 'n>(
    compartments: &'i [CompartmentSpec],
    nodes: &'i [RolloutNode<'n>],
    recorded: &'i BTreeMap<String, CompartmentStatus>,
) -> RolloutInput<'i, 'n> {
    RolloutInput {
        compartments,
        tolerations: &[],
        nodes,
        recorded,
        may_start: true,
        window_budgets: &[],
        settle: None,
        now: now(),
    }
}

fn picks<'a>(rollout: &[CompartmentRollout<'a>]) -> Vec<&'a str> {
    rollout
        .iter()
        .flat_map(|c| c.selection.picks.clone())
        .collect()
}

#[test]
fn a_fresh_legacy_rollout_takes_its_budget_in_creation_order() {
    let nodes = [
        node("n1", Status::Unknown),
        node("n2", Status::Unknown),
        node("n3", Status::Unknown),
    ];
    let nodes = rollout_nodes(&nodes);
    let specs = legacy(2, nodes.len());
    let recorded = BTreeMap::new();
    let rollout = rollout(&input(&specs, &nodes, &recorded));
    assert_eq!(picks(&rollout), ["n1", "n2"]);
    assert_eq!(rollout[0].ceiling, 2);
    assert_eq!(rollout[0].nodes, [0, 1, 2]);
    assert_eq!(rollout[0].status.matched, 3);
    assert!(rollout[0].selection.new_batch);
}

#[test]
fn nodes_go_to_the_compartment_whose_selector_matches_them() {
    let mut gpu = node("gpu-1", Status::Unknown);
    gpu.labels.insert("gpu".into(), "true".into());
    let nodes = [node("cpu-1", Status::Unknown), gpu];
    let nodes = rollout_nodes(&nodes);
    let specs = vec![
        CompartmentSpec {
            name: "gpu".into(),
            selector: Some(Selector::parse_or_nothing(
                &serde_json::from_value(serde_json::json!({"matchLabels": {"gpu": "true"}}))
                    .unwrap(),
            )),
            budget: PolicyBudget {
                count: Some(1),
                percent: None,
                topology: None,
            },
            strategy: None,
        },
        legacy(1, 1).remove(0),
    ];
    let recorded = BTreeMap::new();
    let rollout = rollout(&input(&specs, &nodes, &recorded));
    let members: Vec<(&str, Vec<usize>)> = rollout
        .iter()
        .map(|c| (c.spec.name.as_str(), c.nodes.clone()))
        .collect();
    assert_eq!(members, [("gpu", vec![1]), ("__default__", vec![0])]);
    assert_eq!(picks(&rollout), ["gpu-1", "cpu-1"]);
}

#[test]
fn a_finished_batch_is_evaluated_before_the_next_is_picked() {
    let nodes = [
        node("n1", Status::Complete),
        node("n2", Status::Unknown),
        node("n3", Status::Unknown),
    ];
    let nodes = rollout_nodes(&nodes);
    let specs = legacy(1, nodes.len());
    let recorded = BTreeMap::from([(
        "__default__".to_owned(),
        CompartmentStatus {
            batch_state: Some(BatchState::initial()),
            ..CompartmentStatus::default()
        },
    )]);
    let rollout = rollout(&input(&specs, &nodes, &recorded));
    assert_eq!(rollout[0].recorded_state.current_batch, 1);
    assert_eq!(rollout[0].batch_state.current_batch, 2);
    assert_eq!(rollout[0].batch_state.completed_nodes, 1);
    assert_eq!(picks(&rollout), ["n2"]);
    assert_eq!(
        rollout[0].status.batch_state,
        Some(rollout[0].batch_state.clone())
    );
}

#[test]
fn a_complete_rollout_keeps_its_recorded_batch_state() {
    let nodes = [node("n1", Status::Complete), node("n2", Status::Complete)];
    let nodes = rollout_nodes(&nodes);
    let specs = legacy(1, nodes.len());
    let recorded = BTreeMap::new();
    let rollout = rollout(&input(&specs, &nodes, &recorded));
    assert_eq!(rollout[0].batch_state, BatchState::initial());
    assert!(picks(&rollout).is_empty());
    assert_eq!(rollout[0].complete, 2);
}

#[test]
fn a_closed_window_or_a_held_gate_starts_no_batch() {
    let mut sick = node("n1", Status::Complete);
    sick.worked_on = Some(false);
    let nodes = [sick, node("n2", Status::Unknown)];
    let nodes = rollout_nodes(&nodes);
    let specs = legacy(1, nodes.len());
    let recorded = BTreeMap::new();

    let closed = RolloutInput {
        may_start: false,
        ..input(&specs, &nodes, &recorded)
    };
    let held = rollout(&closed);
    assert!(held[0].selection.held && picks(&held).is_empty());
    assert_eq!(held[0].gate, GateState::Open);

    let gated = RolloutInput {
        settle: Some(SignedDuration::from_mins(5)),
        ..input(&specs, &nodes, &recorded)
    };
    let held = rollout(&gated);
    assert!(held[0].selection.held && picks(&held).is_empty());
    assert!(matches!(
        &held[0].gate,
        GateState::Hold { node, reason: HoldReason::NotReady } if node == "n1"
    ));

    let open = rollout(&input(&specs, &nodes, &recorded));
    assert_eq!(picks(&open), ["n2"]);
}

#[test]
fn an_open_windows_budget_holds_a_whole_compartment_to_its_ceiling() {
    let nodes = [
        node("n1", Status::Unknown),
        node("n2", Status::Unknown),
        node("n3", Status::Unknown),
        node("n4", Status::Unknown),
    ];
    let nodes = rollout_nodes(&nodes);
    // A 100% compartment without a strategy: every batch is its ceiling.
    let specs = [CompartmentSpec {
        name: crate::keys::DEFAULT_COMPARTMENT.into(),
        selector: None,
        budget: PolicyBudget {
            percent: Some(100),
            count: None,
            topology: None,
        },
        strategy: None,
    }];
    let recorded = BTreeMap::new();
    let count = |c| {
        Some(PolicyBudget {
            percent: None,
            count: Some(c),
            topology: None,
        })
    };
    let one = [count(1)];
    let under = RolloutInput {
        window_budgets: &one,
        ..input(&specs, &nodes, &recorded)
    };
    let held = rollout(&under);
    assert_eq!(picks(&held), ["n1"]);
    assert_eq!((held[0].ceiling, held[0].own_ceiling), (1, 4));
    assert!(held[0].window_held);
    assert_eq!(held[0].status.ceiling, 1);

    // Mid-batch, with the last node alone left: the window holds the others for the whole of a
    // batch, and nothing once one node remains.
    let mut working = node("n1", Status::InProgress);
    working.picked = true;
    let done = |name| node(name, Status::Complete);
    let mid = [
        working,
        node("n2", Status::Unknown),
        node("n3", Status::Unknown),
        done("n4"),
    ];
    let mid = rollout_nodes(&mid);
    let rolled = rollout(&RolloutInput {
        window_budgets: &one,
        ..input(&specs, &mid, &recorded)
    });
    assert_eq!(picks(&rolled), ["n1"]);
    assert!(rolled[0].window_held);
    let last = [
        done("n1"),
        done("n2"),
        node("n3", Status::Unknown),
        done("n4"),
    ];
    let last = rollout_nodes(&last);
    let rolled = rollout(&RolloutInput {
        window_budgets: &one,
        ..input(&specs, &last, &recorded)
    });
    assert_eq!(picks(&rolled), ["n3"]);
    assert!(!rolled[0].window_held);

    let free = rollout(&input(&specs, &nodes, &recorded));
    assert_eq!(picks(&free), ["n1", "n2", "n3", "n4"]);
    assert!(!free[0].window_held);

    // A larger window budget holds nothing back.
    let ten = [count(10)];
    let larger = RolloutInput {
        window_budgets: &ten,
        ..input(&specs, &nodes, &recorded)
    };
    let larger = rollout(&larger);
    assert_eq!(picks(&larger).len(), 4);
    assert!(!larger[0].window_held);
}

#[test]
fn batch_numbers_follow_the_batches_as_each_succeeds() {
    let nodes = [
        node("n1", Status::Unknown),
        node("n2", Status::Unknown),
        node("n3", Status::Unknown),
    ];
    let nodes = rollout_nodes(&nodes);
    let specs = legacy(2, nodes.len());
    let recorded = BTreeMap::new();
    let rollout = rollout(&input(&specs, &nodes, &recorded));
    let numbers = batch_numbers(&rollout[0], &nodes, &[]);
    assert_eq!(numbers, BTreeMap::from([("n1", 1), ("n2", 1), ("n3", 2)]));
}
