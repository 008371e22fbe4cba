//! Maintenance windows (issue #17 item 4): a compartment starts a new batch only while a window
//! of its DeploymentPolicy is open, a batch started inside a window finishes outside it, the
//! Skyhook says when the next window opens, and the plan wakes itself at that time.

use std::collections::BTreeMap;
use std::time::Duration;

use skyhook_api::keys;
use skyhook_api::v1alpha1::{MaintenanceWindow, Status};

use super::sim::{Sim, node, one_node_batches, package, skyhook};

/// One node per batch, in a window opening daily at 03:00 UTC for an hour (the sim starts at
/// midnight).
fn sim(windows: Vec<MaintenanceWindow>) -> Sim {
    let policy = one_node_batches(windows, None);
    let mut s = skyhook("windowed", vec![package("one", "1.0.0")]);
    s.spec.deployment_policy = Some("nightly".into());
    let mut sim = Sim::new(vec![node("node-0", 0), node("node-1", 1)], vec![s]);
    sim.snapshot.policies = BTreeMap::from([("nightly".to_owned(), policy)]);
    sim
}

fn nightly() -> MaintenanceWindow {
    MaintenanceWindow {
        schedule: "0 3 * * *".into(),
        duration: "1h".into(),
        time_zone: None,
    }
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
