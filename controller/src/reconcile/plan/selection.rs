//! Compartments and batches of one Skyhook (spec §2.4): assign its nodes to compartments,
//! evaluate finished batches, pick the nodes to work on (sticky, ceiling-capped), and report
//! the nodes that are ignored or carry taints the Skyhook does not tolerate.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use skyhook_api::budget::{
    BlockReason, CandidateNode, CompartmentNodes, CompartmentSpec, NodeActivity, SlotHold,
    assign_nodes, block_reason, evaluate_batch, slot_hold,
};
use skyhook_api::toleration::node_selection_tolerations;
use skyhook_api::v1alpha1::{BatchState, Skyhook, SkyhookStatus, Status};

use super::Planner;
use super::status::Outcome;
use crate::reconcile::snapshot::NodeView;

/// What selection reads of one node, as this plan left it so far.
struct NodeFacts<'s> {
    node: &'s NodeView,
    taints: Vec<Taint>,
    status: Status,
    hold: Option<SlotHold>,
}

/// What node selection found across all of a Skyhook's nodes.
#[derive(Debug, Default)]
pub(super) struct Blocking {
    pub(super) intolerable: Vec<String>,
    pub(super) ignored: Vec<String>,
}

impl<'s> Planner<'s> {
    /// The node as selection sees it for Skyhook `name`, with the budget slot it holds.
    fn node_facts(&mut self, name: &str, node: &'s NodeView) -> NodeFacts<'s> {
        let pod_on_node = self.skyhook_pod_on(name, &node.name);
        let Some(work) = self.nodes.get_mut(node.name.as_str()) else {
            return NodeFacts {
                node,
                taints: Vec::new(),
                status: Status::Unknown,
                hold: None,
            };
        };
        let status = work.status(name);
        let unschedulable = work.unschedulable();
        let state = work.state(name).clone();
        let hold = slot_hold(NodeActivity {
            skyhook: name,
            annotations: work.annotations(),
            unschedulable,
            state: &state,
            status,
            pod_on_node,
        });
        NodeFacts {
            node,
            taints: work.taints.clone(),
            status,
            hold,
        }
    }

    /// Assigns nodes to compartments, evaluates finished batches and picks the nodes to work
    /// on (never more in progress per compartment than its ceiling).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn select(
        &mut self,
        skyhook: &Skyhook,
        name: &str,
        matched: &[&'s NodeView],
        compartments: &[CompartmentSpec],
        ready: &BTreeMap<&str, bool>,
        complete: &BTreeMap<&str, bool>,
        status: &mut SkyhookStatus,
        outcome: &mut Outcome,
    ) -> Vec<String> {
        let runtime_taint = self.config.pods.runtime_required_taint.clone();
        let tolerations = node_selection_tolerations(
            &skyhook.spec.additional_tolerations,
            skyhook.spec.runtime_required.then_some(&runtime_taint),
        );
        let labels: Vec<(&str, &std::collections::BTreeMap<String, String>)> = matched
            .iter()
            .map(|n| (n.name.as_str(), &n.labels))
            .collect();
        let assignment = assign_nodes(compartments, &labels);
        let facts: Vec<NodeFacts<'s>> = matched.iter().map(|n| self.node_facts(name, n)).collect();
        for NodeFacts { node, taints, .. } in &facts {
            match block_reason(&node.labels, taints, &tolerations) {
                Some(BlockReason::Ignored) => outcome.blocking.ignored.push(node.name.clone()),
                Some(BlockReason::IntolerableTaints(t)) => outcome
                    .blocking
                    .intolerable
                    .push(format!("{}: {}", node.name, t.join(", "))),
                None => {}
            }
        }
        let all_complete = complete.values().all(|done| *done);
        let mut picks = Vec::new();
        let mut compartment_statuses = BTreeMap::new();
        for compartment in compartments {
            let candidates: Vec<CandidateNode<'_>> = facts
                .iter()
                .filter(|f| {
                    assignment.get(f.node.name.as_str()) == Some(&compartment.name.as_str())
                })
                .map(|f| CandidateNode {
                    name: f.node.name.as_str(),
                    created: f.node.created,
                    labels: &f.node.labels,
                    taints: &f.taints,
                    status: f.status,
                    complete: complete.get(f.node.name.as_str()).copied().unwrap_or(false),
                    ready: ready.get(f.node.name.as_str()).copied().unwrap_or(false),
                    picked: status.node_priority.contains_key(&f.node.name),
                    hold: f.hold,
                })
                .collect();
            let members = CompartmentNodes::new(candidates, &tolerations);
            let ceiling = compartment.ceiling(members.len());
            let state = status
                .compartment_statuses
                .get(&compartment.name)
                .and_then(|s| s.batch_state.clone())
                .unwrap_or_else(BatchState::initial);
            // Batches are evaluated only while the Skyhook is not complete, so a state reset
            // on completion stays reset.
            let state = if all_complete {
                state
            } else {
                evaluate_batch(compartment.strategy.as_ref(), &state, members.observation()).0
            };
            let selection = members.select(compartment.strategy.as_ref(), &state, ceiling);
            for blocked in &selection.blocked {
                if let Some(work) = self.nodes.get_mut(blocked.name) {
                    work.set_status(name, Status::Blocked);
                }
            }
            for node in &selection.newly_picked {
                status
                    .node_priority
                    .insert((*node).to_owned(), Time(self.now));
            }
            picks.extend(selection.picks.iter().map(|n| (*n).to_owned()));
            compartment_statuses.insert(compartment.name.clone(), members.status(ceiling, state));
        }
        status.compartment_statuses = compartment_statuses;
        picks
    }
}
