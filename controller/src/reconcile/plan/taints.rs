//! Node selection by Skyhook, auto-taint of new nodes (the plan's first step) and per-node
//! removal of the runtime-required taint once the passes say where every runtime-required
//! Skyhook is complete (spec §2.10).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;
use skyhook_api::generation::Group;
use skyhook_api::runtime_required::{
    RuntimeRequiredSkyhook, auto_taint_eligible, cordon_after_removal, has_taint,
    runtime_required_cordon_stale, runtime_taint_removable, taint_text,
};
use skyhook_api::v1alpha1::Skyhook;

use super::context::Context;
use super::workset::Workset;
use crate::reconcile::snapshot::{NodeView, Snapshot};

/// Per (Skyhook, node) the passes looked at: whether every package of the Skyhook is complete
/// there after this plan's edits.
pub(super) type Completion = BTreeMap<(String, String), bool>;

/// Taints the nodes no Skyhook has touched yet, for Skyhooks asking for it, and records them
/// in [`Workset::awaiting_taint`]: no Skyhook works on them until the taint landed (the next reconcile finds them
/// tainted and marked), so a node whose taint is refused (an admission policy, say) is left out
/// of every Skyhook, uncounted, and tried again at every reconcile, as upstream does.
pub(super) fn auto_taint(context: &Context<'_>, workset: &mut Workset<'_>) {
    let taint = &context.config.pods.runtime_required_taint;
    let marker = skyhook_api::keys::SKYHOOK.auto_taint_annotation(&taint.key);
    for node in nodes_to_auto_taint(context.snapshot, taint) {
        if let Some(work) = workset.nodes.get_mut(node) {
            work.add_taint(taint);
            work.set_annotation(marker.clone(), "true".to_owned());
            workset.awaiting_taint.insert(node.to_owned());
            workset
                .plan
                .auto_taints
                .insert(node.to_owned(), taint_text(taint));
        }
    }
}

/// Removes the runtime-required taint from each node on which every runtime-required
/// Skyhook targeting it is complete; where one of them sets `runtimeRequiredCordonAfter`, the
/// same node patch cordons the node and marks it with the runtime-required cordon annotation
/// (only a node that carried the taint: no taint, no cordon). Then removes the annotation from
/// every node found schedulable (someone uncordoned it and left the annotation).
pub(super) fn runtime_required(
    context: &Context<'_>,
    workset: &mut Workset<'_>,
    completion: &Completion,
) {
    let taint = &context.config.pods.runtime_required_taint;
    let skyhooks = runtime_required_skyhooks(context.snapshot, completion);
    for node in &context.snapshot.nodes {
        let name = node.name.as_str();
        let Some(work) = workset.nodes.get_mut(name) else {
            continue;
        };
        if runtime_taint_removable(name, &skyhooks) && has_taint(&work.taints, taint) {
            work.remove_taint(taint);
            if let Some(group) = cordon_after_removal(name, &skyhooks) {
                work.cordon_runtime_required(group.keys());
            }
        }
        if runtime_required_cordon_stale(work.annotations(), work.unschedulable()) {
            for group in Group::ALL {
                work.set_or_remove_annotation(
                    group.keys().runtime_required_cordon_annotation,
                    None,
                );
            }
        }
    }
}

/// The nodes `skyhook` targets ([`skyhook_api::v1alpha1::SkyhookSpec::target_selector`]: every
/// node without `nodeSelectors`), by creation time then name.
pub(super) fn matched_nodes<'s>(
    skyhook: &Skyhook,
    nodes: &'s [Arc<NodeView>],
) -> Vec<&'s NodeView> {
    let selector = skyhook.spec.target_selector();
    let mut matched: Vec<&NodeView> = nodes
        .iter()
        .map(|n| &**n)
        .filter(|n| selector.matches(&n.labels))
        .collect();
    matched.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    matched
}

/// The nodes to auto-taint: those targeted by a Skyhook asking for it (runtime required, auto
/// taint of new nodes, not being deleted) that no Skyhook has touched yet and that lack the
/// taint.
fn nodes_to_auto_taint<'s>(snapshot: &'s Snapshot, taint: &Taint) -> BTreeSet<&'s str> {
    snapshot
        .skyhooks
        .iter()
        .filter(|s| s.spec.runtime_required && s.spec.auto_taint_new_nodes)
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .flat_map(|skyhook| matched_nodes(skyhook, &snapshot.nodes))
        .filter(|node| auto_taint_eligible(&node.annotations, &node.taints, taint))
        .map(|node| node.name.as_str())
        .collect()
}

/// The runtime-required Skyhooks (not being deleted), each with the nodes it targets and
/// whether it is complete on each, by `completion` (per (Skyhook, node), after this plan's
/// edits).
fn runtime_required_skyhooks<'s>(
    snapshot: &'s Snapshot,
    completion: &Completion,
) -> Vec<RuntimeRequiredSkyhook<'s>> {
    snapshot
        .skyhooks
        .iter()
        .filter(|s| s.spec.runtime_required && s.metadata.deletion_timestamp.is_none())
        .map(|s| {
            let name = s.metadata.name.as_deref().unwrap_or_default();
            let complete = |node: &str| {
                completion
                    .get(&(name.to_owned(), node.to_owned()))
                    .copied()
                    .unwrap_or(false)
            };
            RuntimeRequiredSkyhook {
                group: s.group,
                active: !s.is_disabled() && !s.is_paused(),
                cordon_after: s.spec.runtime_required_cordon_after,
                nodes: matched_nodes(s, &snapshot.nodes)
                    .into_iter()
                    .map(|n| (n.name.as_str(), complete(&n.name)))
                    .collect(),
            }
        })
        .collect()
}
