//! One Skyhook's rollout over its compartments: the single place where the budget rules are
//! put together (spec §2.4). Its nodes are assigned to compartments; in each, the nodes are
//! classified, the ceiling taken, the recorded batch state evaluated (only while the Skyhook
//! is not complete, so a state reset on completion stays reset), the health gate judged, and
//! the nodes to work on selected. The controller's plan, the plugin's `status` and `plan`
//! views all call [`rollout`]; none of them combines the pieces itself, so they cannot drift.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Toleration;

use crate::budget::{
    CandidateNode, CompartmentNodes, CompartmentSpec, Selection, assign_nodes, evaluate_batch,
    next_batch_size, window_ceiling,
};
use crate::health::{GateNode, GateState, health_gate};
use crate::string_map::StringMap;
use crate::v1alpha1::{BatchState, CompartmentStatus, PolicyBudget, Status};

/// One node the Skyhook targets.
#[derive(Debug, Clone, Copy)]
pub struct RolloutNode<'a> {
    /// The node as selection sees it.
    pub candidate: CandidateNode<'a>,
    /// What the health gate reads of it, when the Skyhook worked on it (it has a node state of
    /// the Skyhook or was picked); `None` otherwise.
    pub gate: Option<GateNode<'a>>,
}

/// What one Skyhook's rollout is computed from.
#[derive(Debug, Clone)]
pub struct RolloutInput<'i, 'n> {
    /// Its compartments (see [`crate::budget::skyhook_compartments`]).
    pub compartments: &'i [CompartmentSpec],
    /// The tolerations its node selection uses (see
    /// [`crate::toleration::node_selection_tolerations`]).
    pub tolerations: &'i [Toleration],
    /// The nodes it targets.
    pub nodes: &'i [RolloutNode<'n>],
    /// `status.compartmentStatuses` as recorded: each compartment's batch state.
    pub recorded: &'i BTreeMap<String, CompartmentStatus>,
    /// Whether its policy lets a compartment start a new batch now (maintenance windows).
    pub may_start: bool,
    /// The budgets of its policy's maintenance windows open now
    /// ([`crate::window::windows_now`]); empty without a policy or an open window.
    pub window_budgets: &'i [Option<PolicyBudget>],
    /// Its policy's health gate `settle`, when it has one.
    pub settle: Option<SignedDuration>,
    /// The time of the decision.
    pub now: Timestamp,
}

/// One compartment of the rollout.
#[derive(Debug, Clone)]
pub struct CompartmentRollout<'n> {
    /// The compartment.
    pub spec: CompartmentSpec,
    /// Its nodes: indexes into [`RolloutInput::nodes`], in the order given.
    pub nodes: Vec<usize>,
    /// The most nodes of it that may hold a budget slot at once: its own budget's ceiling, or
    /// that of an open maintenance window's budget ([`window_ceiling`]).
    pub ceiling: usize,
    /// The ceiling of its own budget.
    pub own_ceiling: usize,
    /// An open window's budget holds back nodes its own budget would work on now.
    pub window_held: bool,
    /// The batch state recorded in status, or the initial one.
    pub recorded_state: BatchState,
    /// The batch state after evaluating the finished batch: what selection used.
    pub batch_state: BatchState,
    /// Its health gate (open without one).
    pub gate: GateState,
    /// The nodes to work on now, and those blocked.
    pub selection: Selection<'n>,
    /// Its entry of `status.compartmentStatuses`.
    pub status: CompartmentStatus,
    /// Complete nodes.
    pub complete: usize,
    /// Nodes `in_progress`.
    pub in_progress: usize,
    /// Incomplete, erroring nodes.
    pub erroring: usize,
}

/// The rollout of one Skyhook, compartment by compartment in the order of
/// [`RolloutInput::compartments`].
pub fn rollout<'n>(input: &RolloutInput<'_, 'n>) -> Vec<CompartmentRollout<'n>> {
    let labels: Vec<(&str, &dyn StringMap)> = input
        .nodes
        .iter()
        .map(|n| (n.candidate.name, n.candidate.labels))
        .collect();
    let assignment = assign_nodes(input.compartments, &labels);
    let all_complete = input.nodes.iter().all(|n| n.candidate.complete);
    input
        .compartments
        .iter()
        .map(|spec| {
            let member_indexes: Vec<usize> = (input.nodes.iter().enumerate())
                .filter(|(_, n)| assignment.get(n.candidate.name) == Some(&spec.name.as_str()))
                .map(|(index, _)| index)
                .collect();
            let nodes = CompartmentNodes::new(
                member_indexes
                    .iter()
                    .map(|&i| input.nodes[i].candidate)
                    .collect(),
                input.tolerations,
            )
            .with_topology(spec.budget.topology.as_ref());
            let own_ceiling = spec.ceiling(nodes.len());
            let ceiling = window_ceiling(own_ceiling, input.window_budgets, nodes.len());
            let recorded_state = (input.recorded.get(&spec.name))
                .and_then(|s| s.batch_state.clone())
                .unwrap_or_else(BatchState::initial);
            let batch_state = if all_complete {
                recorded_state.clone()
            } else {
                evaluate_batch(spec.strategy.as_ref(), &recorded_state, nodes.observation()).0
            };
            let gate = match input.settle {
                None => GateState::Open,
                Some(settle) => {
                    let worked_on: Vec<GateNode<'n>> = (member_indexes.iter())
                        .filter_map(|&i| input.nodes[i].gate)
                        .collect();
                    health_gate(settle, &worked_on, input.now)
                }
            };
            let may_start = input.may_start && gate == GateState::Open;
            let strategy = spec.strategy.as_ref();
            let selection = nodes.select_gated(strategy, &batch_state, ceiling, may_start);
            // The window holds work back while its batch is smaller than the one the
            // compartment's own budget would take (not merely its ceiling: the strategy's batch
            // size may be the smaller one). Judged on the batch size, so it holds for the whole
            // batch, not only at its start.
            let batch_size =
                |ceiling| next_batch_size(strategy, &batch_state, nodes.len(), ceiling);
            // Only while some incomplete node is left out of the picks.
            let waiting = nodes.len().saturating_sub(nodes.complete()) > selection.picks.len();
            let window_held =
                waiting && ceiling < own_ceiling && batch_size(ceiling) < batch_size(own_ceiling);
            CompartmentRollout {
                spec: spec.clone(),
                nodes: member_indexes,
                ceiling,
                own_ceiling,
                window_held,
                recorded_state,
                status: nodes.status(ceiling, batch_state.clone()),
                batch_state,
                gate,
                selection,
                complete: nodes.complete(),
                in_progress: nodes.in_progress(),
                erroring: nodes.erroring(),
            }
        })
        .collect()
}

/// The batch each incomplete node of `compartment` would be worked on in, assuming every
/// batch succeeds: its selection run batch after batch from the recorded state, the state
/// moving on exactly as [`rollout`] moves it after each batch. A stopped compartment picks
/// nothing.
pub fn batch_numbers<'a>(
    compartment: &CompartmentRollout<'_>,
    nodes: &[RolloutNode<'a>],
    tolerations: &[Toleration],
) -> BTreeMap<&'a str, i32> {
    let strategy = compartment.spec.strategy.as_ref();
    let mut candidates: Vec<CandidateNode<'a>> = (compartment.nodes.iter())
        .map(|&i| nodes[i].candidate)
        .collect();
    let mut state = compartment.recorded_state.clone();
    let mut batches = BTreeMap::new();
    // Each round completes at least one node, so the loop ends within one round per node.
    for _ in 0..=candidates.len() {
        let members = CompartmentNodes::new(candidates.clone(), tolerations)
            .with_topology(compartment.spec.budget.topology.as_ref());
        state = evaluate_batch(strategy, &state, members.observation()).0;
        let selection = members.select(strategy, &state, compartment.ceiling);
        if selection.picks.is_empty() {
            break;
        }
        for pick in &selection.picks {
            batches.insert(*pick, state.current_batch.max(1));
        }
        for node in &mut candidates {
            if selection.picks.contains(&node.name) {
                // Complete nodes leave `status.nodePriority` and free their slot.
                node.complete = true;
                node.status = Status::Complete;
                node.picked = false;
                node.hold = None;
            }
        }
    }
    batches
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
