//! Maintenance windows (issue #17 item 4): a compartment starts a new batch only while a window
//! of its DeploymentPolicy is open, a batch started inside a window finishes outside it, the
//! Skyhook says when the next window opens, and the plan wakes itself at that time.

use std::collections::BTreeMap;
use std::time::Duration;

use skyhook_api::generation::Group;
use skyhook_api::keys;
use skyhook_api::v1alpha1::{FixedStrategy, MaintenanceWindow, PolicyBudget, Status};

use super::sim::{Sim, node, one_node_batches, package, skyhook};

/// One node per batch, in a window opening daily at 03:00 UTC for an hour (the sim starts at
/// midnight).
fn sim(windows: Vec<MaintenanceWindow>) -> Sim {
    let policy = one_node_batches(windows, None);
    let mut s = skyhook("windowed", vec![package("one", "1.0.0")]);
    s.spec.deployment_policy = Some("nightly".into());
    let mut sim = Sim::new(vec![node("node-0", 0), node("node-1", 1)], vec![s]);
    sim.snapshot.policies = BTreeMap::from([((Group::Skyhook, "nightly".to_owned()), policy)]);
    sim
}

fn nightly() -> MaintenanceWindow {
    MaintenanceWindow {
        schedule: "0 3 * * *".into(),
        duration: "1h".into(),
        time_zone: None,
        budget: None,
    }
}

/// A window open all day, every day, with `budget`.
fn all_day(budget: Option<PolicyBudget>) -> MaintenanceWindow {
    MaintenanceWindow {
        schedule: "0 0 * * *".into(),
        duration: "24h".into(),
        time_zone: None,
        budget,
    }
}

/// Three nodes under a policy that takes them all at once, in windows `windows`.
fn everything_at_once(windows: Vec<MaintenanceWindow>) -> Sim {
    let mut policy = one_node_batches(windows, None);
    policy.default.budget = PolicyBudget {
        percent: Some(100),
        count: None,
        topology: None,
    };
    policy.default.strategy.fixed = Some(FixedStrategy {
        initial_batch: Some(3),
        ..FixedStrategy::default()
    });
    let mut s = skyhook("windowed", vec![package("one", "1.0.0")]);
    s.spec.deployment_policy = Some("weekend".into());
    let nodes = (0..3).map(|i| node(&format!("node-{i}"), i)).collect();
    let mut sim = Sim::new(nodes, vec![s]);
    sim.snapshot.policies = BTreeMap::from([((Group::Skyhook, "weekend".to_owned()), policy)]);
    sim
}

fn condition(sim: &Sim, type_: &str) -> Option<String> {
    sim.skyhook("windowed")
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.message.clone())
}

fn in_progress(sim: &Sim) -> usize {
    (0..3)
        .filter(|i| {
            sim.node_status("windowed", &format!("node-{i}")).as_deref() == Some("in_progress")
        })
        .count()
}

#[test]
fn an_open_windows_budget_holds_a_wide_policy_to_one_node_at_a_time() {
    let one = PolicyBudget {
        percent: None,
        count: Some(1),
        topology: None,
    };
    let mut sim = everything_at_once(vec![all_day(Some(one))]);
    let held_events = |plan: &crate::reconcile::plan::Plan| {
        (plan.events.iter())
            .filter(|e| e.reason == "WindowBudgetHeld" && e.action == "HoldBatch")
            .count()
    };
    let plan = sim.step();
    assert_eq!(held_events(&plan), 1, "an Event when the hold starts");
    assert_eq!(in_progress(&sim), 1);
    assert_eq!(
        condition(&sim, keys::SKYHOOK.condition_window_budget_held).as_deref(),
        Some(
            "the budget of the open maintenance window of DeploymentPolicy [weekend] holds compartments [__default__ (1 node at once)]; their other nodes wait for a free slot or a window with a larger budget"
        )
    );
    let ceiling = (sim.skyhook("windowed").status.as_ref())
        .and_then(|s| s.compartment_statuses.get(keys::DEFAULT_COMPARTMENT))
        .map(|c| c.ceiling);
    assert_eq!(ceiling, Some(1));
    let mut held_mid_batch = false;
    for _ in 0..30 {
        sim.settle(|_| false);
        let plan = sim.step();
        assert!(in_progress(&sim) <= 1, "the window budget allows one node");
        assert_eq!(held_events(&plan), 0, "no Event while the hold lasts");
        let held = condition(&sim, keys::SKYHOOK.condition_window_budget_held).is_some();
        held_mid_batch |= held && in_progress(&sim) == 1;
    }
    assert!(held_mid_batch, "the condition holds while a batch runs");
    assert_eq!(sim.skyhook_status("windowed"), Some(Status::Complete));
    assert_eq!(
        condition(&sim, keys::SKYHOOK.condition_window_budget_held),
        None
    );
}

#[test]
fn a_window_without_a_budget_keeps_the_policys() {
    let mut sim = everything_at_once(vec![all_day(None)]);
    sim.step();
    assert_eq!(in_progress(&sim), 3);
    assert_eq!(
        condition(&sim, keys::SKYHOOK.condition_window_budget_held),
        None
    );
}

fn window_condition(sim: &Sim) -> Option<String> {
    sim.skyhook("windowed")
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == keys::SKYHOOK.condition_outside_maintenance_window)
        .map(|c| c.message.clone())
}

fn statuses(sim: &Sim) -> [Option<String>; 2] {
    ["node-0", "node-1"].map(|n| sim.node_status("windowed", n))
}

fn at(sim: &mut Sim, time: &str) {
    sim.now = time.parse().expect("a valid timestamp literal");
}

#[test]
fn a_closed_window_holds_new_batches_and_wakes_the_plan_when_it_opens() {
    let mut sim = sim(vec![nightly()]);
    let plan = sim.step();
    assert!(sim.pods().is_empty(), "nothing starts before 03:00");
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(3 * 3600)));
    assert_eq!(
        window_condition(&sim).as_deref(),
        Some(
            "outside the maintenance windows; compartments [__default__] start their next batch when the next maintenance window of DeploymentPolicy [nightly] opens at 2026-01-01T03:00:00Z; nodes already started finish"
        )
    );

    // 03:59: the window is open, the first batch starts.
    at(&mut sim, "2026-01-01T03:59:00Z");
    sim.step();
    assert_eq!(statuses(&sim)[0].as_deref(), Some("in_progress"));
    assert_eq!(window_condition(&sim), None);

    // 04:00: closed. The node in flight finishes; the next batch waits for tomorrow.
    at(&mut sim, "2026-01-01T04:00:00Z");
    for _ in 0..10 {
        sim.settle(|_| false);
        sim.step();
    }
    assert_eq!(
        statuses(&sim).map(|s| s.unwrap_or_default()),
        ["complete", "waiting"]
    );
    let message = window_condition(&sim).expect("held until tomorrow");
    assert!(
        message.contains("opens at 2026-01-02T03:00:00Z"),
        "{message}"
    );

    at(&mut sim, "2026-01-02T03:00:00Z");
    sim.run(20);
    assert_eq!(sim.skyhook_status("windowed"), Some(Status::Complete));
    assert_eq!(window_condition(&sim), None);
}

#[test]
fn a_policy_without_windows_rolls_out_at_any_time() {
    let mut sim = sim(vec![]);
    let plan = sim.step();
    assert_eq!(statuses(&sim)[0].as_deref(), Some("in_progress"));
    assert_eq!(plan.requeue_after, None);
    sim.settle(|_| false);
    sim.run(20);
    assert_eq!(sim.skyhook_status("windowed"), Some(Status::Complete));
    assert_eq!(window_condition(&sim), None);
}
