//! Property tests for the rollout rules: batches respect the ceiling and remaining nodes and
//! never starve picked nodes, the runnable set respects dependencies, the stage machine never
//! skips a stage, and the version order is a total order consistent with semver.

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use skyhook_api::budget::{CandidateNode, CompartmentNodes, evaluate_batch, next_batch_size};
use skyhook_api::graph::PackageGraph;
use skyhook_api::node_state::NodeState;
use skyhook_api::pod_annotation::PodPackageAnnotation;
use skyhook_api::stage::{NextStep, apply_edits, next_step, on_pod_failed, on_pod_succeeded};
use skyhook_api::toleration::node_selection_tolerations;
use skyhook_api::v1alpha1::{
    BatchState, DeploymentStrategy, ExponentialStrategy, FixedStrategy, LinearStrategy, Package,
    PackageStatus, Stage, State, Status,
};
use skyhook_api::version::Version;

fn strategy() -> impl Strategy<Value = Option<DeploymentStrategy>> {
    (
        0..4u8,
        1..6i32,
        1..5i32,
        1..101i32,
        1..101i32,
        prop::option::of(1..4i32),
    )
        .prop_map(|(kind, initial, step, threshold, safety, failure)| {
            let mut s = DeploymentStrategy::default();
            match kind {
                0 => return None,
                1 => {
                    s.fixed = Some(FixedStrategy {
                        initial_batch: Some(initial),
                        batch_threshold: Some(threshold),
                        failure_threshold: failure,
                        safety_limit: Some(safety),
                    })
                }
                2 => {
                    s.linear = Some(LinearStrategy {
                        initial_batch: Some(initial),
                        batch_threshold: Some(threshold),
                        failure_threshold: failure,
                        safety_limit: Some(safety),
                        delta: Some(step),
                    })
                }
                _ => {
                    s.exponential = Some(ExponentialStrategy {
                        initial_batch: Some(initial),
                        batch_threshold: Some(threshold),
                        failure_threshold: failure,
                        safety_limit: Some(safety),
                        growth_factor: Some(step + 1),
                    })
                }
            }
            Some(s)
        })
}

proptest! {
    #[test]
    fn batch_size_respects_ceiling_and_remaining(
        strategy in strategy(),
        total in 0..40usize,
        ceiling in 0..12usize,
        completed in 0..40i32,
        failed in 0..10i32,
        last in 0..20i32,
        last_failed in any::<bool>(),
    ) {
        let state = BatchState {
            current_batch: 2,
            completed_nodes: completed,
            failed_nodes: failed,
            last_batch_size: last,
            last_batch_failed: last_failed,
            ..BatchState::default()
        };
        let size = next_batch_size(strategy.as_ref(), &state, total, ceiling);
        prop_assert!(size <= ceiling);
        prop_assert!(size <= total);
        let remaining = total.saturating_sub(usize::try_from(completed + failed).unwrap());
        if remaining > 0 {
            prop_assert!(size <= remaining);
        }
        if total > 0 && ceiling > 0 {
            prop_assert!(size >= 1);
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Complete,
    Fail,
    /// Finished one package and waits for the next one.
    Between,
    Stay,
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Complete),
        Just(Outcome::Fail),
        Just(Outcome::Between),
        Just(Outcome::Stay)
    ]
}

struct SimNode {
    name: String,
    status: Status,
    complete: bool,
    picked: bool,
    labels: BTreeMap<String, String>,
}

proptest! {
    /// A rollout simulation: every round selects nodes, the picked ones work, some finish,
    /// fail or pause between packages, and batches are evaluated.
    #[test]
    fn selection_respects_the_ceiling_and_never_starves_picked_nodes(
        strategy in strategy(),
        node_count in 1..15usize,
        ceiling in 1..6usize,
        rounds in prop::collection::vec(prop::collection::vec(outcome(), 15), 1..25),
    ) {
        let mut nodes: Vec<SimNode> = (0..node_count)
            .map(|i| SimNode {
                name: format!("n{i:02}"),
                status: Status::Waiting,
                complete: false,
                picked: false,
                labels: BTreeMap::new(),
            })
            .collect();
        let tolerations = node_selection_tolerations(&[], None);
        let mut state = BatchState::initial();
        for outcomes in rounds {
            let candidates = nodes
                .iter()
                .map(|n| CandidateNode {
                    name: &n.name,
                    created: None,
                    labels: &n.labels,
                    taints: &[],
                    status: n.status,
                    complete: n.complete,
                    ready: true,
                    picked: n.picked,
                    hold: None,
                })
                .collect();
            let compartment = CompartmentNodes::new(candidates, &tolerations);
            let (next_state, _) = evaluate_batch(strategy.as_ref(), &state, compartment.observation());
            state = next_state;
            let selection = compartment.select(strategy.as_ref(), &state, ceiling);
            let picks: BTreeSet<String> = selection.picks.iter().map(|s| (*s).to_owned()).collect();
            prop_assert!(picks.len() <= ceiling, "{} picks over ceiling {ceiling}", picks.len());
            let incomplete = nodes.iter().filter(|n| !n.complete).count();
            prop_assert!(picks.len() <= incomplete);
            if !state.should_stop {
                for n in &nodes {
                    let held = !n.complete && (n.status == Status::InProgress || (n.picked && n.status != Status::Erroring));
                    if held {
                        prop_assert!(picks.contains(&n.name), "picked node {} was starved", n.name);
                    }
                }
            }
            drop(selection);
            drop(compartment);
            for (node, outcome) in nodes.iter_mut().zip(&outcomes) {
                if picks.contains(&node.name) {
                    node.picked = true;
                    node.status = match outcome {
                        Outcome::Complete => {
                            node.complete = true;
                            Status::Complete
                        }
                        Outcome::Fail => Status::Erroring,
                        Outcome::Between => Status::Waiting,
                        Outcome::Stay => Status::InProgress,
                    };
                }
                if node.complete {
                    // Completed nodes leave nodePriority.
                    node.picked = false;
                }
            }
            let in_progress = nodes.iter().filter(|n| n.status == Status::InProgress).count();
            prop_assert!(in_progress <= ceiling, "{in_progress} in progress over ceiling {ceiling}");
        }
    }
}

/// A random DAG over `n` packages: package i may depend only on packages j < i.
fn dag() -> impl Strategy<Value = (Vec<Vec<usize>>, Vec<bool>)> {
    (1..12usize).prop_flat_map(|n| {
        let deps = (0..n)
            .map(|i| {
                prop::collection::btree_set(0..i.max(1), 0..=i.min(3))
                    .prop_map(move |s| s.into_iter().filter(|j| *j < i).collect::<Vec<_>>())
            })
            .collect::<Vec<_>>();
        (deps, prop::collection::vec(any::<bool>(), n))
    })
}

fn build(deps: &[Vec<usize>]) -> PackageGraph {
    let mut builder = PackageGraph::builder();
    for (i, d) in deps.iter().enumerate() {
        builder.add(
            &format!("p{i:02}"),
            "1.0.0",
            d.iter().map(|j| (format!("p{j:02}"), "1.0.0")),
        );
    }
    builder.build().unwrap()
}

proptest! {
    #[test]
    fn runnable_is_exactly_incomplete_with_complete_dependencies((deps, complete) in dag()) {
        let graph = build(&deps);
        let is_complete = |name: &str| complete[name[1..].parse::<usize>().unwrap()];
        let runnable: BTreeSet<String> =
            graph.runnable(|p| is_complete(p.name)).into_iter().map(|p| p.name.to_owned()).collect();
        for (i, d) in deps.iter().enumerate() {
            let name = format!("p{i:02}");
            let should = !complete[i] && d.iter().all(|j| complete[*j]);
            prop_assert_eq!(runnable.contains(&name), should, "{}", name);
        }
    }

    #[test]
    fn walking_runnable_completes_everything_in_dependency_order((deps, _) in dag()) {
        let graph = build(&deps);
        let mut done: BTreeSet<String> = BTreeSet::new();
        for _ in 0..=deps.len() {
            let step: Vec<String> = graph.runnable(|p| done.contains(p.name)).into_iter().map(|p| p.name.to_owned()).collect();
            for name in &step {
                let i: usize = name[1..].parse().unwrap();
                let ready = deps[i].iter().all(|j| done.contains(&format!("p{j:02}")));
                prop_assert!(ready, "{} ran before its dependencies", name);
            }
            done.extend(step);
        }
        prop_assert_eq!(done.len(), deps.len());
        let order: Vec<String> = graph.topological_order().into_iter().map(|p| p.name.to_owned()).collect();
        prop_assert_eq!(order.len(), deps.len());
        for (pos, name) in order.iter().enumerate() {
            let i: usize = name[1..].parse().unwrap();
            for j in &deps[i] {
                let dep = format!("p{j:02}");
                prop_assert!(order[..pos].contains(&dep), "{} before {}", dep, name);
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum PodOutcome {
    Succeed,
    FailThenSucceed,
    /// The pod disappears before finishing (deleted, invalidated, garbage-collected).
    Vanish,
}

fn pod_outcome() -> impl Strategy<Value = PodOutcome> {
    prop_oneof![
        4 => Just(PodOutcome::Succeed),
        1 => Just(PodOutcome::FailThenSucceed),
        1 => Just(PodOutcome::Vanish),
    ]
}

/// The documented flow (spec §2.6), written out independently of the implementation.
fn flow_successor(stage: Stage, has_interrupt: bool) -> Option<Stage> {
    match stage {
        Stage::Uninstall | Stage::UninstallInterrupt => Some(Stage::Apply),
        Stage::Apply | Stage::Upgrade => Some(Stage::Config),
        Stage::Config if has_interrupt => Some(Stage::Interrupt),
        Stage::Interrupt if has_interrupt => Some(Stage::PostInterrupt),
        Stage::Config | Stage::Interrupt | Stage::PostInterrupt => None,
    }
}

proptest! {
    /// Walks one package through the stage machine with random pod outcomes. Every stage that
    /// completes follows the previous completed stage in the flow, or restarts the flow at
    /// `apply` (the restart rule for a vanished apply or post-interrupt pod); the walk ends at
    /// the terminal stage.
    #[test]
    fn stage_machine_never_skips_a_stage(
        has_interrupt in any::<bool>(),
        start_with_upgrade in any::<bool>(),
        outcomes in prop::collection::vec(pod_outcome(), 40),
    ) {
        let package = Package { name: "pkg".into(), version: "2.0.0".into(), image: "busybox".into(), ..Package::default() };
        let packages = BTreeMap::from([("pkg".to_owned(), package)]);
        let mut state = NodeState::new();
        if start_with_upgrade {
            state.upsert(PackageStatus {
                name: "pkg".into(), version: "2.0.0".into(), image: "busybox".into(),
                container_sha: String::new(), stage: Stage::Upgrade, state: State::InProgress, restarts: 0,
            });
        }
        let mut last_completed: Option<Stage> = None;
        let mut finished = false;
        for outcome in outcomes {
            let entry = state.get_version("pkg", "2.0.0").cloned();
            let stage = match next_step(entry.as_ref(), has_interrupt, false) {
                NextStep::Complete => { finished = true; break; }
                NextStep::Wait => panic!("nothing to wait for without a pod: {entry:?}"),
                NextStep::Run(stage) => stage,
            };
            state.upsert(PackageStatus {
                name: "pkg".into(), version: "2.0.0".into(), image: "busybox".into(),
                container_sha: String::new(), stage, state: State::InProgress, restarts: 0,
            });
            let pod = PodPackageAnnotation {
                name: "pkg".into(), version: "2.0.0".into(), skyhook: "s".into(), stage,
                image: "busybox".into(), container_sha: String::new(), invalid: false,
            };
            match outcome {
                PodOutcome::Vanish => continue,
                PodOutcome::FailThenSucceed => {
                    let failed = on_pod_failed(&pod, 1);
                    apply_edits(&mut state, &[failed]);
                    prop_assert_eq!(next_step(state.get_version("pkg", "2.0.0"), has_interrupt, true), NextStep::Wait);
                }
                PodOutcome::Succeed => {}
            }
            let edits = on_pod_succeeded(&state, &pod, 0, &packages);
            apply_edits(&mut state, &edits);
            let allowed = stage == Stage::Apply || match last_completed {
                None => stage == Stage::Upgrade,
                Some(previous) => flow_successor(previous, has_interrupt) == Some(stage),
            };
            prop_assert!(allowed, "{:?} completed after {:?}", stage, last_completed);
            last_completed = Some(stage);
        }
        if finished {
            let terminal = if has_interrupt { Stage::PostInterrupt } else { Stage::Config };
            prop_assert_eq!(last_completed, Some(terminal));
        }
    }
}

/// Lenient version strings: short forms, leading zeros, prereleases and builds.
fn lenient_version() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        (0..4u32).prop_map(|n| n.to_string()),
        Just("00".to_owned()),
        Just("01".to_owned()),
        Just("10".to_owned())
    ];
    let identifier = prop_oneof![
        Just("alpha"),
        Just("beta"),
        Just("rc"),
        Just("1"),
        Just("2"),
        Just("11"),
        Just("x-y")
    ];
    (
        number.clone(),
        prop::option::of(number.clone()),
        prop::option::of(number),
        prop::collection::vec(identifier.clone(), 0..3),
        prop::collection::vec(identifier, 0..2),
    )
        .prop_map(|(major, minor, patch, pre, build)| {
            let mut v = major;
            let full = minor.is_some() && patch.is_some();
            if let Some(minor) = minor {
                v = format!("{v}.{minor}");
                if let Some(patch) = patch {
                    v = format!("{v}.{patch}");
                }
            }
            if full && !pre.is_empty() {
                v = format!("{v}-{}", pre.join("."));
            }
            if full && !build.is_empty() {
                v = format!("{v}+{}", build.join("."));
            }
            v
        })
}

/// Strict semver strings (no leading zeros, all three numbers).
fn strict_version() -> impl Strategy<Value = String> {
    let identifier = prop_oneof![
        Just("alpha"),
        Just("beta"),
        Just("rc"),
        Just("0"),
        Just("1"),
        Just("2"),
        Just("11"),
        Just("x-y")
    ];
    (
        0..3u32,
        0..3u32,
        0..12u32,
        prop::collection::vec(identifier.clone(), 0..3),
        prop::collection::vec(identifier, 0..2),
    )
        .prop_map(|(a, b, c, pre, build)| {
            let mut v = format!("{a}.{b}.{c}");
            if !pre.is_empty() {
                v = format!("{v}-{}", pre.join("."));
            }
            if !build.is_empty() {
                v = format!("{v}+{}", build.join("."));
            }
            v
        })
}

proptest! {
    #[test]
    fn version_order_is_total(a in lenient_version(), b in lenient_version(), c in lenient_version()) {
        let (va, vb, vc) = (Version::parse(&a).unwrap(), Version::parse(&b).unwrap(), Version::parse(&c).unwrap());
        prop_assert_eq!(va.cmp(&vb), vb.cmp(&va).reverse());
        prop_assert_eq!(va.cmp(&vb).is_eq(), a == b);
        if va <= vb && vb <= vc {
            prop_assert!(va <= vc);
        }
        if va.same_precedence(&vb) && vb.same_precedence(&vc) {
            prop_assert!(va.same_precedence(&vc));
        }
        prop_assert_eq!(va.cmp_precedence(&vb), vb.cmp_precedence(&va).reverse());
        // The total order refines precedence.
        if !va.same_precedence(&vb) {
            prop_assert_eq!(va.cmp(&vb), va.cmp_precedence(&vb));
        }
    }

    #[test]
    fn version_precedence_agrees_with_semver(a in strict_version(), b in strict_version()) {
        let ours = Version::parse(&a).unwrap().cmp_precedence(&Version::parse(&b).unwrap());
        let reference = semver::Version::parse(&a).unwrap().cmp_precedence(&semver::Version::parse(&b).unwrap());
        prop_assert_eq!(ours, reference, "{} vs {}", a, b);
    }
}
