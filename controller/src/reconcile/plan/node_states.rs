//! Nodes whose `nodeState_<skyhook>` annotation does not parse, and the conditions read from the
//! node states (upstream §2.9).
//!
//! Such a node is skipped by its Skyhook's pass: not selected, no pod started or judged there,
//! its annotations, labels and cordon for that Skyhook left exactly as they are, never counted
//! as complete. Its status in `status.nodeStatus` is `unknown`; the condition
//! `NodeStateMalformed` lists it and a Warning Event on the node says why. Every other node, and
//! every other Skyhook, keeps rolling (upstream aborts the rest of the pass). Repairing or
//! deleting the annotation brings the node back on the next reconcile.

use std::collections::{BTreeMap, BTreeSet};

use skyhook_api::conditions::{
    NodeStateRead, UninstallConditions, UninstallFacts, uninstall_conditions,
};
use skyhook_api::interrupt::{changed_keys, has_interrupt};
use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::{Skyhook, SkyhookStatus, Status};

use super::pass::Pass;
use super::status::Outcome;
use super::workset::Workset;
use crate::reconcile::snapshot::NodeView;

/// Puts the pass's findings about node states into its outcome: completion per targeted
/// node for `Ready` (a malformed node is not complete and its status is `unknown`), and the
/// explicit-uninstall conditions.
pub(super) fn report_node_states<'s>(
    workset: &mut Workset<'s>,
    pass: &Pass<'s>,
    complete: &BTreeMap<&str, bool>,
    status: &mut SkyhookStatus,
    outcome: &mut Outcome,
) {
    outcome.complete = pass
        .targeted()
        .iter()
        .map(|node| {
            let done = complete.get(node.name.as_str()).copied().unwrap_or(false);
            (node.name.clone(), done)
        })
        .collect();
    for node in &pass.malformed {
        status
            .node_status
            .insert(node.name.clone(), Status::Unknown);
    }
    outcome.uninstall = uninstall_conditions_of(
        workset,
        pass.skyhook,
        (&pass.matched, &pass.malformed),
        &status.config_updates,
    );
}

/// The explicit-uninstall conditions of `skyhook` over its targeted nodes, split into
/// those whose state parses and those whose does not.
pub(super) fn uninstall_conditions_of<'s>(
    workset: &mut Workset<'s>,
    skyhook: &Skyhook,
    (parsed, malformed): (&[&NodeView], &[&NodeView]),
    config_updates: &BTreeMap<String, Vec<String>>,
) -> UninstallConditions {
    let name = skyhook.metadata.name.as_deref().unwrap_or_default();
    let mut states: BTreeMap<String, NodeState> = BTreeMap::new();
    for node in parsed {
        if let Some(work) = workset.nodes.get_mut(node.name.as_str()) {
            states.insert(node.name.clone(), work.state(name).clone());
        }
    }
    let mut reads: BTreeMap<String, NodeStateRead<'_>> = states
        .iter()
        .map(|(node, state)| (node.clone(), NodeStateRead::Parsed(state)))
        .collect();
    for node in malformed {
        reads.insert(node.name.clone(), NodeStateRead::Malformed);
    }
    let packages = &skyhook.spec.packages;
    let interrupting: BTreeSet<String> = packages
        .iter()
        .filter(|(p, package)| has_interrupt(package, changed_keys(config_updates, p)))
        .map(|(p, _)| p.clone())
        .collect();
    uninstall_conditions(&UninstallFacts {
        packages,
        deleting: skyhook.metadata.deletion_timestamp.is_some(),
        nodes: &reads,
        interrupting: &interrupting,
    })
}
