//! The budget invariant under reboots and faults (see `skyhook_api::budget::slot_hold`): a
//! simulated rollout of one package with a reboot interrupt, in which every round the
//! controller selects nodes and starts or advances the picked ones, and then events arrive in
//! a random order: pods finish, nodes go down for their reboot and come back, pods are
//! evicted, packages fail, nodes go NotReady on their own, the controller restarts. After every
//! round no more nodes may be disrupted (cordoned by the Skyhook, with an interrupt in flight,
//! or down after one) than the ceiling, nor nodes of more racks, or more of one rack, than the
//! budget's topology allows.
//!
//! The model keeps everything the real controller keeps on the Node (cordon annotation,
//! `spec.unschedulable`, taints, node state, status), so a controller restart loses nothing the
//! selection reads; it is a round with no controller step at all.

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use proptest::prelude::*;
use skyhook_api::budget::{
    CandidateNode, CompartmentNodes, NodeActivity, evaluate_batch, slot_hold,
};
use skyhook_api::keys;
use skyhook_api::node_state::NodeState;
use skyhook_api::toleration::node_selection_tolerations;
use skyhook_api::v1alpha1::{
    BatchState, DeploymentStrategy, FixedStrategy, PackageStatus, Stage, State, Status,
    TopologyBudget,
};

const SKYHOOK: &str = "budget";

/// Where the one package stands on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotStarted,
    /// Cordoned and drained; the apply and config pods run.
    Applying,
    /// The interrupt pod asked for the reboot.
    Interrupting,
    /// The node is down: NotReady, tainted by kube-controller-manager.
    Rebooting,
    /// Back with a new boot ID; the interrupt is confirmed.
    Back,
    /// The post-interrupt pod runs.
    PostInterrupt,
    Complete,
}

#[derive(Debug, Clone)]
struct SimNode {
    name: String,
    phase: Phase,
    status: Status,
    picked: bool,
    cordoned: bool,
    /// Tainted `node.kubernetes.io/not-ready` or `unreachable`.
    not_ready: bool,
    pod: bool,
    labels: BTreeMap<String, String>,
}

impl SimNode {
    fn new(index: usize) -> Self {
        SimNode {
            name: format!("n{index:02}"),
            phase: Phase::NotStarted,
            status: Status::Waiting,
            picked: false,
            cordoned: false,
            not_ready: false,
            pod: false,
            labels: BTreeMap::new(),
        }
    }

    fn complete(&self) -> bool {
        self.phase == Phase::Complete
    }

    /// The node state entry the controller would have written.
    fn state(&self) -> NodeState {
        let mut state = NodeState::new();
        let (stage, entry_state) = match self.phase {
            Phase::NotStarted => return state,
            Phase::Applying => (Stage::Apply, State::InProgress),
            Phase::Interrupting | Phase::Rebooting => (Stage::Interrupt, State::InProgress),
            Phase::Back => (Stage::Interrupt, State::Complete),
            Phase::PostInterrupt => (Stage::PostInterrupt, State::InProgress),
            Phase::Complete => (Stage::PostInterrupt, State::Complete),
        };
        let entry_state = if self.status == Status::Erroring && entry_state == State::InProgress {
            State::Erroring
        } else {
            entry_state
        };
        state.upsert(PackageStatus {
            name: "driver".into(),
            version: "1.0.0".into(),
            image: "driver".into(),
            stage,
            state: entry_state,
            container_sha: String::new(),
            restarts: 0,
        });
        state
    }

    fn annotations(&self) -> BTreeMap<String, String> {
        if self.cordoned {
            BTreeMap::from([(keys::SKYHOOK.cordon_annotation(SKYHOOK), "true".to_owned())])
        } else {
            BTreeMap::new()
        }
    }

    fn taints(&self) -> Vec<Taint> {
        let mut taints = Vec::new();
        if self.cordoned {
            taints.push(taint("node.kubernetes.io/unschedulable", "NoSchedule"));
        }
        if self.not_ready {
            taints.push(taint("node.kubernetes.io/not-ready", "NoSchedule"));
            taints.push(taint("node.kubernetes.io/unreachable", "NoExecute"));
        }
        taints
    }

    /// Disrupted by the Skyhook: what the budget limits.
    fn disrupted(&self) -> bool {
        self.cordoned || matches!(self.phase, Phase::Interrupting | Phase::Rebooting)
    }
}

/// `count` nodes spread over `racks` racks (label `rack`), round-robin.
fn racked(count: usize, racks: usize) -> Vec<SimNode> {
    (0..count)
        .map(|i| {
            let mut node = SimNode::new(i);
            node.labels
                .insert("rack".into(), format!("r{}", i % racks.max(1)));
            node
        })
        .collect()
}

fn rack_topology(max_domains: Option<i32>, max_per_domain: Option<i32>) -> Option<TopologyBudget> {
    (max_domains.is_some() || max_per_domain.is_some()).then(|| TopologyBudget {
        key: "rack".into(),
        max_domains,
        max_per_domain,
        allow_unlabelled: false,
    })
}

/// The racks of the disrupted nodes, with how many each.
fn disrupted_racks(nodes: &[SimNode]) -> BTreeMap<&str, usize> {
    let mut racks = BTreeMap::new();
    for node in nodes.iter().filter(|n| n.disrupted()) {
        *racks.entry(node.labels["rack"].as_str()).or_insert(0) += 1;
    }
    racks
}

fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        ..Taint::default()
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The node's current pod or reboot moves on.
    Progress,
    /// The node's current pod fails.
    Fail,
    /// The node's pod is evicted or deleted.
    LosePod,
    /// The node goes NotReady on its own, or comes back.
    FlapReady,
    /// The controller restarts: no controller step this round.
    RestartController,
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        4 => Just(Fault::Progress),
        1 => Just(Fault::Fail),
        1 => Just(Fault::LosePod),
        1 => Just(Fault::FlapReady),
        1 => Just(Fault::RestartController),
    ]
}

/// What happens to a node outside the controller.
fn apply_fault(node: &mut SimNode, fault: Fault) {
    match (fault, node.phase) {
        (Fault::Progress, Phase::Applying) if node.pod && node.status != Status::Erroring => {
            // The config pod succeeded; the controller created the interrupt pod.
            node.phase = Phase::Interrupting;
        }
        (Fault::Progress, Phase::Interrupting) if node.pod && node.status != Status::Erroring => {
            node.phase = Phase::Rebooting;
            node.not_ready = true;
        }
        (Fault::Progress, Phase::Rebooting) => {
            node.phase = Phase::Back;
            node.not_ready = false;
            node.pod = false;
            node.status = Status::InProgress;
        }
        (Fault::Progress, Phase::PostInterrupt) if node.pod && node.status != Status::Erroring => {
            node.phase = Phase::Complete;
            node.status = Status::Complete;
            node.cordoned = false;
            node.picked = false;
            node.pod = false;
        }
        (Fault::Fail, Phase::Applying | Phase::Interrupting | Phase::PostInterrupt) if node.pod => {
            node.status = Status::Erroring;
        }
        (Fault::LosePod, _) => node.pod = false,
        (Fault::FlapReady, Phase::Rebooting) => {}
        (Fault::FlapReady, _) => node.not_ready = !node.not_ready,
        _ => {}
    }
}

/// One controller pass: select, then start or advance every picked node.
fn reconcile(
    nodes: &mut [SimNode],
    state: &mut BatchState,
    ceiling: usize,
    topology: Option<&TopologyBudget>,
) {
    let strategy = DeploymentStrategy {
        fixed: Some(FixedStrategy {
            initial_batch: Some(i32::try_from(ceiling).unwrap()),
            ..FixedStrategy::default()
        }),
        ..DeploymentStrategy::default()
    };
    let tolerations = node_selection_tolerations(&[], None);
    let states: Vec<NodeState> = nodes.iter().map(SimNode::state).collect();
    let annotations: Vec<BTreeMap<String, String>> =
        nodes.iter().map(SimNode::annotations).collect();
    let taints: Vec<Vec<Taint>> = nodes.iter().map(SimNode::taints).collect();
    let candidates = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| CandidateNode {
            name: &n.name,
            created: None,
            labels: &n.labels,
            taints: &taints[i],
            status: n.status,
            complete: n.complete(),
            ready: true,
            picked: n.picked,
            hold: slot_hold(NodeActivity {
                keys: &skyhook_api::keys::SKYHOOK,
                skyhook: SKYHOOK,
                annotations: &annotations[i],
                unschedulable: n.cordoned,
                state: &states[i],
                status: n.status,
                pod_on_node: n.pod,
            }),
        })
        .collect();
    let compartment = CompartmentNodes::new(candidates, &tolerations).with_topology(topology);
    let (next, _) = evaluate_batch(Some(&strategy), state, compartment.observation());
    *state = next;
    let selection = compartment.select(Some(&strategy), state, ceiling);
    let picks: Vec<String> = selection.picks.iter().map(|p| (*p).to_owned()).collect();
    let blocked: Vec<String> = selection
        .blocked
        .iter()
        .map(|b| b.name.to_owned())
        .collect();
    for node in nodes.iter_mut() {
        if blocked.contains(&node.name) {
            node.status = Status::Blocked;
        }
        if !picks.contains(&node.name) || node.not_ready {
            continue;
        }
        node.picked = true;
        match node.phase {
            Phase::NotStarted => {
                node.phase = Phase::Applying;
                node.cordoned = true;
                node.pod = true;
            }
            Phase::Back => {
                node.phase = Phase::PostInterrupt;
                node.pod = true;
            }
            // A lost or failed pod is created again (a failed one is retried by the kubelet).
            Phase::Applying | Phase::Interrupting | Phase::PostInterrupt => node.pod = true,
            Phase::Rebooting | Phase::Complete => {}
        }
        if node.phase != Phase::Complete {
            node.status = Status::InProgress;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn reboots_and_faults_never_take_more_nodes_down_than_the_budget(
        node_count in 2..10usize,
        ceiling in 1..4usize,
        racks in 1..4usize,
        max_domains in prop::option::of(1..3i32),
        max_per_domain in prop::option::of(1..3i32),
        rounds in prop::collection::vec(prop::collection::vec((0..10usize, fault()), 0..6), 1..60),
    ) {
        let mut nodes = racked(node_count, racks);
        let topology = rack_topology(max_domains, max_per_domain);
        let mut state = BatchState::initial();
        for events in rounds {
            let restart = events.iter().any(|(_, f)| matches!(f, Fault::RestartController));
            if !restart {
                reconcile(&mut nodes, &mut state, ceiling, topology.as_ref());
            }
            let disrupted: Vec<&str> = nodes.iter().filter(|n| n.disrupted()).map(|n| n.name.as_str()).collect();
            prop_assert!(
                disrupted.len() <= ceiling,
                "{} nodes disrupted with a budget of {ceiling}: {disrupted:?}\n{nodes:#?}",
                disrupted.len()
            );
            let domains = disrupted_racks(&nodes);
            let over = |limit: Option<i32>, n: usize| limit.is_some_and(|l| n > usize::try_from(l).unwrap());
            prop_assert!(
                !over(max_domains, domains.len())
                    && !domains.values().any(|n| over(max_per_domain, *n)),
                "racks disrupted {domains:?} over maxDomains {max_domains:?} / maxPerDomain {max_per_domain:?}\n{nodes:#?}"
            );
            for (index, fault) in events {
                if let Some(node) = nodes.get_mut(index) {
                    apply_fault(node, fault);
                }
            }
        }
    }

    #[test]
    fn a_rollout_without_faults_completes(
        node_count in 1..10usize,
        ceiling in 1..4usize,
        racks in 1..4usize,
        max_domains in prop::option::of(1..3i32),
        max_per_domain in prop::option::of(1..3i32),
    ) {
        let mut nodes = racked(node_count, racks);
        let topology = rack_topology(max_domains, max_per_domain);
        let mut state = BatchState::initial();
        for _ in 0..(node_count * 8) {
            reconcile(&mut nodes, &mut state, ceiling, topology.as_ref());
            let disrupted = nodes.iter().filter(|n| n.disrupted()).count();
            prop_assert!(disrupted <= ceiling);
            for node in &mut nodes {
                apply_fault(node, Fault::Progress);
            }
        }
        prop_assert!(nodes.iter().all(SimNode::complete), "{nodes:#?}");
    }
}
