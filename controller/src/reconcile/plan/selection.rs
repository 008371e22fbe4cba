//! Compartments and batches of one Skyhook (spec §2.4): assign its nodes to compartments,
//! evaluate finished batches, pick the nodes to work on (sticky, ceiling-capped), and report
//! the nodes that are ignored or carry taints the Skyhook does not tolerate.
//!
//! [`select`] is a pure function of the nodes as this plan left them so far ([`NodeFacts`]),
//! through the rules' one [`rollout`]; the Skyhook's pass writes the returned [`Selection`]
//! into its node statuses and status.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Taint, Toleration};
use skyhook_api::budget::{
    BlockReason, CandidateNode, CompartmentSpec, SlotHold, block_reason, domains_held_message,
    unlabelled_message,
};
use skyhook_api::health::{GateNode, GateState, Since};
use skyhook_api::rollout::{RolloutInput, RolloutNode, rollout};
use skyhook_api::v1alpha1::{CompartmentStatus, PolicyBudget, SkyhookStatus, Status};

use crate::reconcile::snapshot::NodeView;

/// What selection reads of one node, as this plan left it so far.
pub(super) struct NodeFacts<'s> {
    pub(super) node: &'s NodeView,
    pub(super) taints: Vec<Taint>,
    pub(super) status: Status,
    pub(super) hold: Option<SlotHold>,
    /// Every package of the Skyhook is complete on the node.
    pub(super) complete: bool,
    /// Its turn has come: every earlier Skyhook is done with it (`node_ready`).
    pub(super) ready: bool,
    /// The Skyhook worked on the node: it has a node state of the Skyhook or was picked.
    pub(super) worked_on: bool,
    /// Cordoned, as this plan left it so far.
    pub(super) unschedulable: bool,
    /// When the node's last package entry of the Skyhook changed (when it was finished, for a
    /// complete node); `None` when no entry records it.
    pub(super) last_transition: Option<Timestamp>,
}

/// What selection reads of one Skyhook.
pub(super) struct SelectionInput<'a, 's> {
    pub(super) compartments: &'a [CompartmentSpec],
    pub(super) tolerations: &'a [Toleration],
    /// Its nodes, by creation time then name.
    pub(super) nodes: &'a [NodeFacts<'s>],
    /// Its status as this plan left it so far (batch states, picked nodes).
    pub(super) status: &'a SkyhookStatus,
    /// Whether its compartments may start a new batch now (its policy's maintenance windows).
    pub(super) may_start: bool,
    /// The budgets of its policy's maintenance windows open now.
    pub(super) window_budgets: &'a [Option<PolicyBudget>],
    /// Its policy's health gate `settle`, when it has one.
    pub(super) settle: Option<SignedDuration>,
    pub(super) now: Timestamp,
}

/// The nodes that are ignored or carry taints the Skyhook does not tolerate, for its
/// conditions.
#[derive(Debug, Default)]
pub(super) struct Blocking {
    /// `<node>: <taint>, <taint>` per node with taints the Skyhook does not tolerate.
    pub(super) intolerable: Vec<String>,
    /// Nodes labelled to be ignored.
    pub(super) ignored: Vec<String>,
}

/// What selection decided for one Skyhook.
#[derive(Debug, Default)]
pub(super) struct Selection {
    /// Nodes to work on now, compartment by compartment in processing order.
    pub(super) picks: Vec<String>,
    /// Picks new to the batch: recorded in `status.nodePriority` with this plan's time.
    pub(super) newly_picked: Vec<String>,
    /// Incomplete, ready nodes that are not eligible: their status turns `blocked`.
    pub(super) blocked: Vec<String>,
    /// Every compartment's status, batch state included.
    pub(super) compartment_statuses: BTreeMap<String, CompartmentStatus>,
    pub(super) blocking: Blocking,
    /// Compartments whose new batch was due but held back (`may_start` false).
    pub(super) held: Vec<String>,
    /// Compartments whose new batch was due but held back by the health gate, with the gate.
    pub(super) gate_held: Vec<(String, GateState)>,
    /// Compartments an open window's budget holds to fewer nodes than their own budgets, with
    /// the window's ceiling.
    pub(super) window_held: Vec<(String, usize)>,
    /// Per compartment whose budget's `topology` holds nodes back (their domains are busy, or
    /// they lack the label), what holds which node.
    pub(super) topology_held: Vec<String>,
    /// Whether nodes without the topology label are among them.
    pub(super) topology_unlabelled: bool,
}

/// Assigns nodes to compartments, evaluates finished batches and picks the nodes to work on
/// (never more holding a slot per compartment than its ceiling): the rules' own [`rollout`].
pub(super) fn select(input: &SelectionInput<'_, '_>) -> Selection {
    let nodes: Vec<RolloutNode<'_>> = input
        .nodes
        .iter()
        .map(|f| RolloutNode {
            candidate: candidate(f, input.status),
            gate: f.worked_on.then(|| gate_node(f)),
        })
        .collect();
    let compartments = rollout(&RolloutInput {
        compartments: input.compartments,
        tolerations: input.tolerations,
        nodes: &nodes,
        recorded: &input.status.compartment_statuses,
        may_start: input.may_start,
        window_budgets: input.window_budgets,
        settle: input.settle,
        now: input.now,
    });
    let mut selection = Selection {
        blocking: blocking(input.nodes, input.tolerations),
        ..Selection::default()
    };
    let owned = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    for compartment in compartments {
        let name = &compartment.spec.name;
        let chosen = &compartment.selection;
        if chosen.held {
            selection.held.push(name.clone());
            if compartment.gate != GateState::Open {
                selection
                    .gate_held
                    .push((name.clone(), compartment.gate.clone()));
            }
        }
        if compartment.window_held {
            selection
                .window_held
                .push((name.clone(), compartment.ceiling));
        }
        if let Some(topology) = &compartment.spec.budget.topology {
            let unlabelled: Vec<&str> = (chosen.blocked.iter())
                .filter(|b| matches!(b.reason, BlockReason::NoTopologyLabel(_)))
                .map(|b| b.name)
                .collect();
            if !chosen.topology_waiting.is_empty() {
                selection.topology_held.push(domains_held_message(
                    name,
                    topology,
                    &chosen.domains,
                    &chosen.topology_waiting,
                ));
            }
            if !unlabelled.is_empty() {
                selection.topology_unlabelled = true;
                selection
                    .topology_held
                    .push(unlabelled_message(name, topology, &unlabelled));
            }
        }
        selection.picks.extend(owned(&chosen.picks));
        selection.newly_picked.extend(owned(&chosen.newly_picked));
        selection
            .blocked
            .extend(chosen.blocked.iter().map(|b| b.name.to_owned()));
        selection
            .compartment_statuses
            .insert(name.clone(), compartment.status);
    }
    selection
}

fn candidate<'a>(facts: &'a NodeFacts<'_>, status: &SkyhookStatus) -> CandidateNode<'a> {
    CandidateNode {
        name: facts.node.name.as_str(),
        created: facts.node.created,
        labels: &facts.node.labels,
        taints: &facts.taints,
        status: facts.status,
        complete: facts.complete,
        ready: facts.ready,
        picked: status.node_priority.contains_key(&facts.node.name),
        hold: facts.hold,
    }
}

/// What the health gate reads of a node the Skyhook worked on.
fn gate_node<'a>(facts: &'a NodeFacts<'_>) -> GateNode<'a> {
    let since = |is: bool, at: Option<Timestamp>| match (is, at) {
        (false, _) => Since::Not,
        (true, Some(at)) => Since::At(at),
        (true, None) => Since::Unknown,
    };
    GateNode {
        name: facts.node.name.as_str(),
        ready: since(facts.node.ready, facts.node.ready_since),
        schedulable: since(!facts.unschedulable, facts.last_transition),
        finished: facts.complete,
    }
}

fn blocking(nodes: &[NodeFacts<'_>], tolerations: &[Toleration]) -> Blocking {
    let mut blocking = Blocking::default();
    for facts in nodes {
        match block_reason(&facts.node.labels, &facts.taints, tolerations) {
            Some(BlockReason::Ignored) => blocking.ignored.push(facts.node.name.clone()),
            Some(BlockReason::IntolerableTaints(taints)) => {
                blocking
                    .intolerable
                    .push(format!("{}: {}", facts.node.name, taints.join(", ")))
            }
            // Not a property of the node alone: selection reports it per compartment.
            Some(BlockReason::NoTopologyLabel(_)) | None => {}
        }
    }
    blocking
}
