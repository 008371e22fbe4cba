//! The fleet budget (`FLEET_BUDGET`): never more nodes cordoned or interrupting across all
//! Skyhooks than its ceiling, counting nodes other Skyhooks hold and nodes left cordoned by an
//! earlier controller; a Skyhook that waits for it says so in a condition.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use skyhook_api::budget::FleetBudget;
use skyhook_api::keys;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, InterruptionBudget, Skyhook, Status};

use super::sim::{Sim, node, package, skyhook};

/// A Skyhook restarting a service on the nodes labelled `group=<group>`, half of them at once.
fn restarting(name: &str, group: &str) -> Skyhook {
    let mut tuning = package("tuning", "1.0.0");
    tuning.interrupt = Some(Interrupt {
        type_: InterruptType::Service,
        services: vec!["containerd".into()],
    });
    let mut s = skyhook(name, vec![tuning]);
    s.spec.node_selectors = Some(LabelSelector {
        match_labels: Some(BTreeMap::from([("group".to_owned(), group.to_owned())])),
        match_expressions: None,
    });
    s.spec.interruption_budget = Some(InterruptionBudget {
        count: None,
        percent: Some(50),
        topology: None,
    });
    s
}

/// Skyhook `a` on a0, a1 and `b` on b0, b1: each may take one node, two together.
fn two_skyhooks(fleet: Option<FleetBudget>) -> Sim {
    let nodes = ["a0", "a1", "b0", "b1"]
        .iter()
        .zip(0..)
        .map(|(name, index)| {
            let mut view = node(name, index);
            view.labels.insert("group", &name[..1]);
            view
        })
        .collect();
    let mut sim = Sim::new(nodes, vec![restarting("a", "a"), restarting("b", "b")]);
    for n in ["a0", "a1", "b0", "b1"] {
        sim.snapshot.workload_pods.insert(n.into(), Vec::new());
    }
    sim.config.fleet_budget = fleet;
    sim
}

fn cordoned(sim: &Sim) -> Vec<String> {
    sim.snapshot
        .nodes
        .iter()
        .filter(|n| n.unschedulable)
        .map(|n| n.name.clone())
        .collect()
}

fn fleet_condition(sim: &Sim, skyhook: &str) -> Option<String> {
    sim.skyhook(skyhook)
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == keys::SKYHOOK.condition_fleet_budget_wait)
        .map(|c| c.message.clone())
}

/// Steps and settles until both Skyhooks are complete; returns the most nodes cordoned at
/// once and whether either Skyhook ever reported waiting for the fleet budget.
fn roll_out(sim: &mut Sim) -> (usize, bool) {
    let (mut most, mut waited) = (0, false);
    for _ in 0..80 {
        sim.step();
        most = most.max(cordoned(sim).len());
        waited |= fleet_condition(sim, "a").is_some() || fleet_condition(sim, "b").is_some();
        if ["a", "b"]
            .iter()
            .all(|s| sim.skyhook_status(s) == Some(Status::Complete))
        {
            return (most, waited);
        }
        sim.settle(|_| false);
    }
    panic!("not complete after 80 steps: {:?}", sim.pods());
}

#[test]
fn a_fleet_budget_of_one_node_serialises_two_skyhooks() {
    #[rustfmt::skip]
    let cases = [
        ("no fleet budget: one node per Skyhook", None, 2, false),
        ("one node for the whole fleet", Some(FleetBudget::Count(1)), 1, true),
        ("25% of four nodes", Some(FleetBudget::Percent(25)), 1, true),
        ("a fleet budget larger than both", Some(FleetBudget::Count(3)), 2, false),
    ];
    for (case, fleet, most, waited) in cases {
        let mut sim = two_skyhooks(fleet);
        assert_eq!(roll_out(&mut sim), (most, waited), "{case}");
        assert_eq!(
            fleet_condition(&sim, "a"),
            None,
            "{case}: condition removed"
        );
        assert_eq!(
            fleet_condition(&sim, "b"),
            None,
            "{case}: condition removed"
        );
    }
}

#[test]
fn a_node_left_cordoned_by_another_skyhook_holds_the_fleet_budget() {
    let mut sim = two_skyhooks(Some(FleetBudget::Count(1)));
    // A Skyhook the controller no longer plans (say, before a restart) cordoned b1.
    let b1 = sim
        .snapshot
        .nodes
        .iter_mut()
        .map(Arc::make_mut)
        .find(|n| n.name == "b1")
        .expect("b1");
    b1.unschedulable = true;
    b1.annotations
        .insert(keys::SKYHOOK.cordon_annotation("gone"), "true");
    for _ in 0..6 {
        sim.step();
        sim.settle(|_| false);
    }
    assert_eq!(cordoned(&sim), ["b1"]);
    let message = fleet_condition(&sim, "a").expect("a waits for the fleet budget");
    assert_eq!(
        message,
        "1 of 1 nodes allowed by the fleet budget (FLEET_BUDGET=1) are cordoned or interrupting across all Skyhooks; waiting to cordon: a0"
    );
    // Released: the rollout goes on, one node at a time.
    let b1 = sim
        .snapshot
        .nodes
        .iter_mut()
        .map(Arc::make_mut)
        .find(|n| n.name == "b1")
        .expect("b1");
    b1.unschedulable = false;
    b1.annotations
        .remove(&keys::SKYHOOK.cordon_annotation("gone"));
    assert_eq!(roll_out(&mut sim).0, 1);
}
