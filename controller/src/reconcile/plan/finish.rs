//! The plan's last step: report the node states that did not parse, bring the node-metadata
//! ConfigMaps of the pods this plan starts up to date with the nodes as it leaves them, and
//! turn the nodes' working copies into patches of exactly what changed.

use super::context::Context;
use super::event_kinds;
use super::output::{EventTarget, MalformedNodeState, Plan};
use super::workset::Workset;
use crate::configmaps::{NodeFacts, node_metadata_configmap};
use crate::names::OwnerSkyhook;

/// The finished plan.
pub(super) fn finish(context: &Context<'_>, mut workset: Workset<'_>) -> Plan {
    report_malformed_states(context, &mut workset);
    for (skyhook, node) in std::mem::take(&mut workset.metadata_due) {
        node_metadata(context, &mut workset, &skyhook, &node);
    }
    for (name, work) in &workset.nodes {
        let patch = work.patch();
        if !patch.is_empty() {
            workset.plan.nodes.insert((*name).to_owned(), patch);
        }
    }
    workset.plan.evictions.sort();
    workset.plan.evictions.dedup();
    workset.plan
}

/// A node state that did not parse makes its Skyhook skip the node: say so on the node,
/// so the stalled node has a visible cause. Repeats fold into one Event series per distinct
/// parse error. The wording follows upstream's `NodeStateMalformed` condition.
fn report_malformed_states(context: &Context<'_>, workset: &mut Workset<'_>) {
    let malformed: Vec<MalformedNodeState> = workset
        .nodes
        .iter()
        .flat_map(|(node, work)| {
            work.malformed()
                .iter()
                .map(|(skyhook, error)| MalformedNodeState {
                    node: (*node).to_owned(),
                    skyhook: skyhook.clone(),
                    error: error.clone(),
                })
        })
        .collect();
    for m in &malformed {
        workset.emit(
            EventTarget::Node(m.node.clone()),
            event_kinds::NODE_STATE_MALFORMED,
            format!(
                "nodeState annotation {} cannot be parsed: {}; {} [{}] skips this node until the annotation is repaired or deleted",
                context.keys_of(&m.skyhook).node_state_annotation(&m.skyhook),
                m.error,
                context.keys_of(&m.skyhook).kind,
                m.skyhook
            ),
        );
    }
    workset.plan.malformed_states = malformed;
}

/// Upserts the node-metadata ConfigMap of (`skyhook`, `node`), which the package pods
/// starting there read, when it differs from the one read. It is built from the node as
/// this plan leaves it (state entries, status, cordon), not from the snapshot: the pods
/// start after the node patch, and the snapshot is one plan behind it.
fn node_metadata(context: &Context<'_>, workset: &mut Workset<'_>, skyhook: &str, node: &str) {
    let snapshot = context.snapshot;
    let Some(skyhook) = context.skyhook(skyhook) else {
        return;
    };
    let (Ok(owner), Some(work)) = (
        OwnerSkyhook::new(skyhook.group, skyhook),
        workset.nodes.get(node),
    ) else {
        return;
    };
    let annotations = work.current_annotations();
    let desired = node_metadata_configmap(
        &context.config.pods,
        &owner,
        &skyhook.spec.packages,
        NodeFacts {
            name: node,
            labels: work.labels(),
            annotations: &annotations,
        },
    );
    let name = desired.metadata.name.clone().unwrap_or_default();
    let current = snapshot.metadata_configmaps.get(&name);
    if !current.is_some_and(|current| current.holds(desired.data.as_ref())) {
        workset.plan.upsert_configmaps.push(desired);
    }
}
