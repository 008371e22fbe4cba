//! A budget's `topology` in the plan: nodes of one rack at a time, the Skyhook saying which
//! nodes wait for their rack, an Event when the hold begins, and a node without the label
//! blocked until it is labelled.

use skyhook_api::keys;
use skyhook_api::string_map::PackedMap;
use skyhook_api::v1alpha1::{InterruptionBudget, Skyhook, TopologyBudget};

use super::sim::{Sim, TEST_LABEL, node, restarting, skyhook};

const NAME: &str = "racked";

fn racked_skyhook(allow_unlabelled: bool) -> Skyhook {
    let mut s = skyhook(NAME, vec![restarting()]);
    s.spec.interruption_budget = Some(InterruptionBudget {
        count: Some(4),
        percent: None,
        topology: Some(TopologyBudget {
            key: "rack".into(),
            max_domains: Some(1),
            max_per_domain: None,
            allow_unlabelled,
        }),
    });
    s
}

/// Nodes `a0`, `b0`, `a1`, `b1` in racks a and b, plus `unlabelled` nodes without the label.
fn sim(allow_unlabelled: bool, unlabelled: usize) -> Sim {
    let mut nodes = Vec::new();
    for (index, (name, rack)) in [("a0", "a"), ("b0", "b"), ("a1", "a"), ("b1", "b")]
        .into_iter()
        .enumerate()
    {
        let mut view = node(name, i64::try_from(index).unwrap());
        view.labels = PackedMap::from_iter([(TEST_LABEL, "skyhooke2e"), ("rack", rack)]);
        nodes.push(view);
    }
    for i in 0..unlabelled {
        nodes.push(node(&format!("x{i}"), 10 + i64::try_from(i).unwrap()));
    }
    let mut sim = Sim::new(nodes, vec![racked_skyhook(allow_unlabelled)]);
    let names: Vec<String> = sim.snapshot.nodes.iter().map(|n| n.name.clone()).collect();
    for n in names {
        sim.snapshot.workload_pods.insert(n, Vec::new());
    }
    sim
}

fn held(sim: &Sim) -> Option<(String, String)> {
    sim.true_condition(NAME, keys::SKYHOOK.condition_topology_budget_held)
        .map(|c| (c.reason.clone(), c.message.clone()))
}

/// The racks of the nodes the Skyhook has cordoned.
fn cordoned_racks(sim: &Sim) -> Vec<String> {
    let mut racks: Vec<String> = (sim.snapshot.nodes.iter())
        .filter(|n| n.unschedulable)
        .map(|n| n.labels.get("rack").unwrap_or("-").to_owned())
        .collect();
    racks.sort();
    racks.dedup();
    racks
}

#[test]
fn one_rack_at_a_time_and_the_skyhook_says_which_nodes_wait() {
    let mut sim = sim(false, 0);
    let first = sim.step();
    let events: Vec<&str> = (first.events.iter())
        .filter(|e| e.reason == "TopologyBudgetHeld")
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(
        events,
        [
            "[__default__] b0, b1 wait for their rack domain: disrupted now a (2); the budget's topology allows maxDomains 1"
        ]
    );
    let (reason, message) = held(&sim).expect("held");
    assert_eq!(reason, keys::TOPOLOGY_DOMAINS_BUSY_REASON);
    assert!(
        message.starts_with("[__default__] b0, b1 wait"),
        "{message}"
    );
    assert!(
        (sim.step().events.iter()).all(|e| e.reason != "TopologyBudgetHeld"),
        "the Event marks when the hold began, once"
    );
    // Settle every stage as it comes: never two racks at once.
    let mut seen_racks = Vec::new();
    for _ in 0..80 {
        sim.step();
        let racks = cordoned_racks(&sim);
        assert!(racks.len() <= 1, "{racks:?} cordoned together");
        seen_racks.extend(racks);
        sim.settle(|_| false);
    }
    for n in ["a0", "b0", "a1", "b1"] {
        assert_eq!(sim.node_status(NAME, n).as_deref(), Some("complete"), "{n}");
    }
    seen_racks.dedup();
    assert_eq!(seen_racks, ["a", "b"], "rack a first, then rack b");
    assert_eq!(held(&sim), None, "removed once nothing waits");
}

#[test]
fn a_node_without_the_label_is_blocked_unless_allowed() {
    let mut strict = sim(false, 1);
    strict.step();
    assert_eq!(strict.node_status(NAME, "x0").as_deref(), Some("blocked"));
    let (reason, message) = held(&strict).expect("held");
    assert_eq!(reason, keys::TOPOLOGY_LABEL_MISSING_REASON);
    assert!(
        message.contains("[__default__] x0 blocked: no rack label"),
        "{message}"
    );

    let mut lenient = sim(true, 1);
    lenient.step();
    assert_ne!(lenient.node_status(NAME, "x0").as_deref(), Some("blocked"));
    assert!(
        lenient.node("x0").unschedulable,
        "in no domain, it starts with rack a"
    );
}
