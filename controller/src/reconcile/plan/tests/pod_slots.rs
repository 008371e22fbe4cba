//! Package pods per node are bounded by `MAX_PODS_PER_NODE` and the node's allocatable CPU and
//! memory, and a pod the node refuses at admission is created again after a backoff (issue 12,
//! item 4).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use skyhook_api::resources::CpuMemory;
use skyhook_api::v1alpha1::{InterruptType, Package, PackageResources, Stage, State, Status};

use super::sim::{Sim, node, package, skyhook, workload};
use crate::pod_outcome::PodOutcome;
use crate::reconcile::plan::{EventTarget, Plan};

fn independent(count: usize) -> Vec<Package> {
    (0..count)
        .map(|i| package(&format!("pkg{i:03}x"), "1.0.0"))
        .collect()
}

fn pods_on(sim: &Sim, node: &str) -> usize {
    sim.snapshot.pods.iter().filter(|p| p.node == node).count()
}

/// Steps and settles every pod successfully until nothing is left to do, checking after every
/// step that no node holds more than `limit` pods and that an interrupt pod is always alone on
/// its node. Returns every plan.
fn run_bounded(sim: &mut Sim, limit: usize, max_steps: usize) -> Vec<Plan> {
    let mut plans = Vec::new();
    for _ in 0..max_steps {
        let planned = sim.step();
        let names: Vec<String> = sim.snapshot.nodes.iter().map(|n| n.name.clone()).collect();
        for name in &names {
            assert!(
                pods_on(sim, name) <= limit,
                "{} pods on {name}: {:?}",
                pods_on(sim, name),
                sim.pods()
            );
            let on_node: Vec<_> = sim
                .snapshot
                .pods
                .iter()
                .filter(|p| p.node == *name)
                .collect();
            if on_node.iter().any(|p| p.interrupt) {
                assert_eq!(
                    on_node.len(),
                    1,
                    "an interrupt pod runs alone: {:?}",
                    sim.pods()
                );
            }
        }
        let idle = planned.create_pods.is_empty()
            && planned.delete_pods.is_empty()
            && planned.nodes.is_empty()
            && planned.statuses.is_empty()
            && sim.snapshot.pods.is_empty();
        plans.push(planned);
        if idle {
            return plans;
        }
        sim.settle(|_| false);
    }
    panic!("not done after {max_steps} steps: {:?}", sim.pods());
}

fn all_complete(sim: &Sim, skyhook: &str, node: &str, count: usize) {
    let state = sim.state(skyhook, node);
    assert_eq!(state.len(), count, "{state:?}");
    assert!(
        state
            .iter()
            .all(|(_, stage, s)| *stage == Stage::Config && *s == State::Complete),
        "{state:?}"
    );
}

#[test]
fn two_hundred_independent_packages_run_at_most_n_pods_at_once_in_name_order() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("many", independent(200))],
    );
    assert_eq!(sim.config.max_pods_per_node, 4);
    let plans = run_bounded(&mut sim, 4, 2000);

    assert!(plans.iter().all(|p| p.create_pods.len() <= 4));
    assert_eq!(
        plans[0].create_pods.len(),
        4,
        "the first plan fills the slots"
    );
    all_complete(&sim, "many", "worker", 200);
    assert_eq!(sim.skyhook_status("many"), Some(Status::Complete));

    // Deterministic: the apply stages start in the package order (by name), and each package's
    // config stage comes before packages that have not started.
    let applies: Vec<String> = plans
        .iter()
        .flat_map(|p| p.created_pods())
        .filter_map(|pod| pod.metadata.name.clone())
        .filter(|name| name.contains("-apply-"))
        .collect();
    let mut sorted = applies.clone();
    sorted.sort();
    assert_eq!(applies.len(), 200);
    assert_eq!(applies, sorted);
    let again = {
        let mut replay = Sim::new(
            vec![node("worker", 0)],
            vec![skyhook("many", independent(200))],
        );
        run_bounded(&mut replay, 4, 2000)
    };
    assert_eq!(again, plans, "the same cluster gives the same plans");
}

#[test]
fn waiting_packages_start_in_dependency_then_name_order() {
    let packages = vec![
        package("aa", "1.0.0"),
        package("bb", "1.0.0"),
        package("cc", "1.0.0"),
        package("dd", "1.0.0"),
        super::sim::depends(package("ab", "1.0.0"), &[("aa", "1.0.0")]),
    ];
    let mut sim = Sim::new(vec![node("worker", 0)], vec![skyhook("order", packages)]);
    sim.config.max_pods_per_node = 2;
    let plans = run_bounded(&mut sim, 2, 200);
    let created: Vec<(String, Stage)> = plans
        .iter()
        .flat_map(|p| p.created_pods())
        .map(|pod| {
            let owned = super::sim::owned(pod);
            let annotation = owned.annotation.expect("created pods are annotated");
            (annotation.name, annotation.stage)
        })
        .collect();
    let want: Vec<(String, Stage)> = [
        ("aa", Stage::Apply),
        ("bb", Stage::Apply),
        ("aa", Stage::Config),
        ("bb", Stage::Config),
        // ab became runnable when aa completed and sorts before cc.
        ("ab", Stage::Apply),
        ("cc", Stage::Apply),
        ("ab", Stage::Config),
        ("cc", Stage::Config),
        ("dd", Stage::Apply),
        ("dd", Stage::Config),
    ]
    .iter()
    .map(|(name, stage)| ((*name).to_owned(), *stage))
    .collect();
    assert_eq!(created, want);
    all_complete(&sim, "order", "worker", 5);
}

#[test]
fn the_bound_is_per_node_and_shared_by_every_skyhook() {
    let mut sim = Sim::new(
        vec![node("n1", 0), node("n2", 1)],
        vec![
            skyhook("alpha", independent(7)),
            skyhook("beta", independent(7)),
        ],
    );
    sim.config.max_pods_per_node = 3;
    let plans = run_bounded(&mut sim, 3, 500);
    let first: BTreeMap<String, usize> =
        plans[0]
            .created_pods()
            .iter()
            .fold(BTreeMap::new(), |mut per_node, pod| {
                let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
                *per_node.entry(node.unwrap_or_default()).or_default() += 1;
                per_node
            });
    assert_eq!(
        first,
        BTreeMap::from([("n1".to_owned(), 3), ("n2".to_owned(), 3)])
    );
    for node in ["n1", "n2"] {
        all_complete(&sim, "alpha", node, 7);
        all_complete(&sim, "beta", node, 7);
    }
}

#[test]
fn one_slot_runs_the_packages_one_by_one() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("solo", independent(5))],
    );
    sim.config.max_pods_per_node = 1;
    let plans = run_bounded(&mut sim, 1, 200);
    assert!(plans.iter().all(|p| p.create_pods.len() <= 1));
    all_complete(&sim, "solo", "worker", 5);
}

fn requesting(mut p: Package, cpu: &str, memory: &str) -> Package {
    p.resources = Some(PackageResources {
        cpu_request: Some(Quantity(cpu.into())),
        cpu_limit: Some(Quantity(cpu.into())),
        memory_request: Some(Quantity(memory.into())),
        memory_limit: Some(Quantity(memory.into())),
    });
    p
}

#[test]
fn the_nodes_allocatable_bounds_the_pods_too() {
    // 1 CPU and 1 GiB: two pods of 400m fit, a third does not (the pause container's 100m is
    // below each init container's request, so each pod counts 400m).
    let small = (0..6)
        .map(|i| requesting(package(&format!("cpu{i}x"), "1.0.0"), "400m", "64Mi"))
        .collect();
    let mut worker = node("worker", 0);
    worker.allocatable = Some(CpuMemory {
        cpu_millis: 1000,
        memory: 1 << 30,
    });
    let mut sim = Sim::new(vec![worker.clone()], vec![skyhook("cpu", small)]);
    let plans = run_bounded(&mut sim, 2, 500);
    assert_eq!(plans[0].create_pods.len(), 2);
    all_complete(&sim, "cpu", "worker", 6);

    // Memory bounds the same way.
    let heavy = (0..3)
        .map(|i| requesting(package(&format!("mem{i}x"), "1.0.0"), "10m", "600Mi"))
        .collect();
    let mut sim = Sim::new(vec![worker.clone()], vec![skyhook("mem", heavy)]);
    let plans = run_bounded(&mut sim, 1, 500);
    assert_eq!(plans[0].create_pods.len(), 1);
    all_complete(&sim, "mem", "worker", 3);

    // A pod larger than the whole node is not held back (no room could ever free up for it):
    // it starts beside the others, and the kubelet's refusal is a failure, not a retry.
    let packages = vec![
        requesting(package("huge", "1.0.0"), "4", "64Mi"),
        requesting(package("small", "1.0.0"), "400m", "64Mi"),
    ];
    let mut sim = Sim::new(vec![worker], vec![skyhook("huge", packages)]);
    assert_eq!(sim.step().create_pods.len(), 2);
    reject(&mut sim, "huge");
    advance(&mut sim, 600);
    let failed = sim.step();
    assert!(failed.delete_pods.is_empty(), "{:?}", failed.delete_pods);
    assert!(
        failed.events.iter().any(|e| e.warning
            && e.message.contains("state erroring")
            && e.message.contains("OutOfcpu")),
        "{:?}",
        failed.events
    );
    assert_eq!(
        sim.state("huge", "worker"),
        vec![
            ("huge|1.0.0".to_owned(), Stage::Apply, State::Erroring),
            ("small|1.0.0".to_owned(), Stage::Apply, State::InProgress),
        ]
    );
}

#[test]
fn an_interrupt_still_runs_alone_with_slots() {
    let mut packages = independent(9);
    packages[4].interrupt = Some(skyhook_api::v1alpha1::Interrupt {
        type_: InterruptType::Service,
        services: vec!["cron".into()],
    });
    let mut sim = Sim::new(vec![node("worker", 0)], vec![skyhook("svc", packages)]);
    sim.snapshot
        .workload_pods
        .insert("worker".into(), vec![workload("app", "worker", &[])]);
    let plans = run_bounded(&mut sim, 4, 500);
    assert!(
        plans.iter().flat_map(|p| p.created_pods()).any(|pod| pod
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.contains("interrupt"))),
        "the interrupt pod ran"
    );
    let state = sim.state("svc", "worker");
    assert_eq!(state.len(), 9, "{state:?}");
    assert!(
        state.iter().all(|(_, _, s)| *s == State::Complete),
        "{state:?}"
    );
}

/// Marks the running pod of `package` as refused by its node for want of CPU.
fn reject(sim: &mut Sim, package: &str) {
    let pod = sim
        .snapshot
        .pods
        .iter_mut()
        .find(|p| p.annotation.as_ref().is_some_and(|a| a.name == package))
        .expect("the package has a pod");
    pod.outcome = PodOutcome::Rejected {
        reason: "OutOfcpu".into(),
        message: Some(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 500, used: 7800, capacity: 8000"
                .into(),
        ),
    };
}

fn advance(sim: &mut Sim, seconds: i64) {
    sim.now += jiff::SignedDuration::from_secs(seconds);
}

fn restarts(sim: &Sim, skyhook: &str, node: &str, key: &str) -> i32 {
    let text = sim
        .node(node)
        .annotations
        .get(&skyhook_api::keys::SKYHOOK.node_state_annotation(skyhook))
        .expect("the node state annotation");
    skyhook_api::node_state::NodeState::parse(text)
        .unwrap()
        .iter()
        .find(|(k, _)| k.as_str() == key)
        .map(|(_, e)| e.restarts)
        .unwrap()
}

#[test]
fn a_pod_refused_by_the_node_is_created_again_after_a_growing_backoff() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("retry", vec![package("pkg", "1.0.0")])],
    );
    let created_at = sim.now;
    sim.step();
    reject(&mut sim, "pkg");

    // 1 s after creation: the refused pod stays (it records the attempt), nothing is written,
    // and the plan looks again when the 10 s backoff ends.
    let waiting = sim.step();
    assert!(waiting.delete_pods.is_empty());
    assert!(waiting.nodes.is_empty(), "{:?}", waiting.nodes);
    assert!(waiting.events.is_empty(), "{:?}", waiting.events);
    assert_eq!(waiting.requeue_after, Some(Duration::from_secs(9)));
    assert_eq!(
        sim.state("retry", "worker"),
        vec![("pkg|1.0.0".to_owned(), Stage::Apply, State::InProgress)]
    );
    assert_eq!(
        sim.node_status("retry", "worker").as_deref(),
        Some("in_progress"),
        "a refusal is not a package failure"
    );

    // A restarted controller plans from the same objects: the same wait.
    let restarted = crate::reconcile::plan::plan(&sim.snapshot, &sim.config, sim.now);
    assert_eq!(restarted.requeue_after, Some(Duration::from_secs(8)));

    // Backoff over: the pod is deleted with a Warning naming node, package, stage and reason,
    // and the entry keeps its stage with one attempt counted.
    sim.now = created_at + jiff::SignedDuration::from_secs(10);
    let retry = sim.step();
    assert_eq!(retry.delete_pods.len(), 1, "{:?}", retry.delete_pods);
    let warning = retry
        .events
        .iter()
        .find(|e| e.warning)
        .expect("a Warning Event");
    assert_eq!(warning.target, EventTarget::Node("worker".into()));
    for part in [
        "[pkg:1.0.0]",
        "stage apply",
        "node [worker]",
        "OutOfcpu",
        "requested: 500",
    ] {
        assert!(
            warning.message.contains(part),
            "{part}: {}",
            warning.message
        );
    }
    assert_eq!(restarts(&sim, "retry", "worker", "pkg|1.0.0"), 1);
    assert!(sim.pods().is_empty());

    // Created again, refused again: now the backoff is 20 s.
    let recreated = sim.step();
    assert_eq!(recreated.create_pods.len(), 1);
    assert_eq!(restarts(&sim, "retry", "worker", "pkg|1.0.0"), 1);
    let second_created = sim.now - jiff::SignedDuration::from_secs(1);
    reject(&mut sim, "pkg");
    advance(&mut sim, 10);
    let early = sim.step();
    assert!(early.delete_pods.is_empty());
    sim.now = second_created + jiff::SignedDuration::from_secs(20);
    let second = sim.step();
    assert_eq!(second.delete_pods.len(), 1);
    assert_eq!(restarts(&sim, "retry", "worker", "pkg|1.0.0"), 2);

    // Once the node has room the package completes.
    sim.run(20);
    assert_eq!(
        sim.state("retry", "worker"),
        vec![("pkg|1.0.0".to_owned(), Stage::Config, State::Complete)]
    );
}

#[test]
fn a_refused_pod_holds_its_slot_until_it_is_gone() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("full", independent(6))],
    );
    sim.config.max_pods_per_node = 2;
    sim.step();
    reject(&mut sim, "pkg000x");
    // pkg001x still runs and pkg000x waits out its backoff: two pods, no room for a third.
    assert!(sim.step().create_pods.is_empty(), "{:?}", sim.pods());

    advance(&mut sim, 10);
    sim.settle(|_| false);
    let released = sim.step();
    assert_eq!(released.delete_pods.len(), 2, "{:?}", released.delete_pods);
    assert!(
        released.create_pods.is_empty(),
        "the deleted pods hold their slots until they are gone"
    );
    let next = sim.step();
    let names: Vec<String> = next
        .created_pods()
        .iter()
        .filter_map(|pod| pod.metadata.name.clone())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names[0].contains("pkg000x") && names[0].contains("-apply-"),
        "the refused stage comes back first: {names:?}"
    );
    run_bounded(&mut sim, 2, 200);
    all_complete(&sim, "full", "worker", 6);
}
