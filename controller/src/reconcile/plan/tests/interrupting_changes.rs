//! Version changes of interrupting packages (spec §2.6, §2.7): the uninstall or upgrade pod of a
//! package with an interrupt changes what running workloads use, so it waits for the node to be
//! cordoned and drained, exactly like the apply of an interrupting package.

use skyhook_api::v1alpha1::{Interrupt, InterruptType, Package, Stage, State, Status};

use super::sim::{PodKey, Sim, node, package, skyhook, workload};

const NAME: &str = "changes";

fn with_interrupt(mut package: Package, type_: InterruptType, services: &[&str]) -> Package {
    package.interrupt = Some(Interrupt {
        type_,
        services: services.iter().map(|s| (*s).to_owned()).collect(),
    });
    package
}

/// A Skyhook with `packages` rolled out to completion on `worker`, which then runs a workload
/// pod again.
fn rolled_out(packages: Vec<Package>) -> Sim {
    let mut sim = Sim::new(vec![node("worker", 0)], vec![skyhook(NAME, packages)]);
    sim.snapshot
        .workload_pods
        .insert("worker".into(), vec![workload("web", "worker", &[])]);
    sim.run(40);
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Complete));
    assert!(!sim.node("worker").unschedulable, "the rollout uncordoned");
    sim.snapshot
        .workload_pods
        .insert("worker".into(), vec![workload("web", "worker", &[])]);
    sim
}

fn set_packages(sim: &mut Sim, packages: Vec<Package>) {
    sim.skyhook_mut(NAME).spec.packages =
        packages.into_iter().map(|p| (p.name.clone(), p)).collect();
}

fn pod(name: &str, version: &str, stage: Stage) -> PodKey {
    (NAME.into(), name.into(), version.into(), stage)
}

/// Steps through the cordon and the drain and returns the pods of the step after the drain;
/// asserts that no pod starts while the node is schedulable or still runs the workload.
fn cordon_drain_then_pods(sim: &mut Sim) -> Vec<PodKey> {
    let first = sim.step();
    assert_eq!(
        first.nodes.get("worker").and_then(|p| p.unschedulable),
        Some(true),
        "the first plan cordons"
    );
    assert!(first.create_pods.is_empty(), "no pod before the cordon");
    let drain = sim.step();
    assert_eq!(
        drain
            .evictions
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>(),
        vec!["web"]
    );
    assert!(drain.create_pods.is_empty(), "no pod before the drain");
    sim.step();
    sim.pods()
}

fn finishes_uncordoned(sim: &mut Sim) {
    sim.settle(|_| false);
    sim.run(40);
    assert_eq!(sim.skyhook_status(NAME), Some(Status::Complete));
    assert!(!sim.node("worker").unschedulable);
}

#[test]
fn a_downgrade_of_an_interrupting_package_uninstalls_on_a_drained_node() {
    let dogs = with_interrupt(package("dogs", "1.2.6"), InterruptType::Reboot, &[]);
    let mut sim = rolled_out(vec![dogs.clone()]);
    set_packages(
        &mut sim,
        vec![Package {
            version: "1.2.5".into(),
            ..dogs
        }],
    );
    assert_eq!(
        cordon_drain_then_pods(&mut sim),
        vec![pod("dogs", "1.2.6", Stage::Uninstall)]
    );
    assert_eq!(
        sim.state(NAME, "worker"),
        vec![
            ("dogs|1.2.5".to_owned(), Stage::Uninstall, State::Skipped),
            ("dogs|1.2.6".to_owned(), Stage::Uninstall, State::InProgress),
        ]
    );
    finishes_uncordoned(&mut sim);
}

#[test]
fn removing_an_interrupting_package_uninstalls_on_a_drained_node() {
    let dogs = with_interrupt(package("dogs", "1.2.6"), InterruptType::Reboot, &[]);
    let mut sim = rolled_out(vec![dogs, package("cats", "6.2.0")]);
    set_packages(&mut sim, vec![package("cats", "6.2.0")]);
    assert_eq!(
        cordon_drain_then_pods(&mut sim),
        vec![pod("dogs", "1.2.6", Stage::Uninstall)]
    );
    finishes_uncordoned(&mut sim);
}

#[test]
fn an_upgrade_of_an_interrupting_package_runs_on_a_drained_node() {
    let nullptr = with_interrupt(
        package("nullptr", "2.0.0"),
        InterruptType::Service,
        &["cron"],
    );
    let mut sim = rolled_out(vec![nullptr.clone()]);
    set_packages(
        &mut sim,
        vec![Package {
            version: "2.0.1".into(),
            ..nullptr
        }],
    );
    assert_eq!(
        cordon_drain_then_pods(&mut sim),
        vec![pod("nullptr", "2.0.1", Stage::Upgrade)]
    );
    finishes_uncordoned(&mut sim);
}

#[test]
fn a_downgrade_of_a_package_without_interrupt_does_not_cordon() {
    let mut sim = rolled_out(vec![package("cats", "6.2.0")]);
    set_packages(&mut sim, vec![package("cats", "6.1.0")]);
    let first = sim.step();
    assert_eq!(
        first.nodes.get("worker").and_then(|p| p.unschedulable),
        None
    );
    assert!(first.evictions.is_empty());
    assert_eq!(sim.pods(), vec![pod("cats", "6.2.0", Stage::Uninstall)]);
}

/// The node-metadata ConfigMap still describes the removed package as the node's pods last
/// read it: without an interrupt, its uninstall needs no drain.
#[test]
fn removing_a_package_without_interrupt_does_not_cordon() {
    let mut sim = rolled_out(vec![package("cats", "6.2.0"), package("dogs", "1.2.6")]);
    set_packages(&mut sim, vec![package("cats", "6.2.0")]);
    let first = sim.step();
    assert_eq!(
        first.nodes.get("worker").and_then(|p| p.unschedulable),
        None
    );
    assert!(first.evictions.is_empty());
    assert_eq!(sim.pods(), vec![pod("dogs", "1.2.6", Stage::Uninstall)]);
    finishes_uncordoned(&mut sim);
}

/// Without the ConfigMap nothing tells whether the removed package had an interrupt: the
/// uninstall waits for the cordon and the drain.
#[test]
fn removing_a_package_nothing_describes_any_more_drains_first() {
    let mut sim = rolled_out(vec![package("cats", "6.2.0"), package("dogs", "1.2.6")]);
    sim.snapshot.metadata_configmaps.clear();
    set_packages(&mut sim, vec![package("cats", "6.2.0")]);
    assert_eq!(
        cordon_drain_then_pods(&mut sim),
        vec![pod("dogs", "1.2.6", Stage::Uninstall)]
    );
    finishes_uncordoned(&mut sim);
}
