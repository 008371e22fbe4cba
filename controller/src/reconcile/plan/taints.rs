//! Node selection by Skyhook, auto-taint of new nodes and per-node removal of the
//! runtime-required taint (spec §2.10).

use skyhook_api::keys;
use skyhook_api::runtime_required::{
    RuntimeRequiredSkyhook, auto_taint_eligible, has_taint, runtime_taint_removable,
};
use skyhook_api::v1alpha1::Skyhook;

use super::Planner;
use crate::reconcile::snapshot::NodeView;

/// The nodes `skyhook` targets ([`skyhook_api::v1alpha1::SkyhookSpec::target_selector`]: every
/// node without `nodeSelectors`), by creation time then name.
pub(super) fn matched_nodes<'s>(skyhook: &Skyhook, nodes: &'s [NodeView]) -> Vec<&'s NodeView> {
    let selector = skyhook.spec.target_selector();
    let mut matched: Vec<&NodeView> = nodes
        .iter()
        .filter(|n| selector.matches(&n.labels))
        .collect();
    matched.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    matched
}

impl Planner<'_> {
    /// Taints nodes no Skyhook has touched yet, for Skyhooks asking for it.
    pub(super) fn auto_taint(&mut self) {
        let taint = self.config.pods.runtime_required_taint.clone();
        let marker = keys::auto_taint_annotation(&taint.key);
        for skyhook in &self.snapshot.skyhooks {
            if !(skyhook.spec.runtime_required && skyhook.spec.auto_taint_new_nodes)
                || skyhook.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            for node in matched_nodes(skyhook, &self.snapshot.nodes) {
                let Some(work) = self.nodes.get_mut(node.name.as_str()) else {
                    continue;
                };
                if auto_taint_eligible(work.annotations(), &work.taints, &taint) {
                    work.add_taint(&taint);
                    work.set_annotation(marker.clone(), "true".to_owned());
                }
            }
        }
    }

    /// Removes the runtime-required taint from each node on which every runtime-required
    /// Skyhook targeting it is complete.
    pub(super) fn runtime_required(&mut self) {
        let taint = self.config.pods.runtime_required_taint.clone();
        let skyhooks: Vec<RuntimeRequiredSkyhook<'_>> = self
            .snapshot
            .skyhooks
            .iter()
            .filter(|s| s.spec.runtime_required && s.metadata.deletion_timestamp.is_none())
            .map(|s| {
                let name = s.metadata.name.as_deref().unwrap_or_default();
                RuntimeRequiredSkyhook {
                    active: !s.is_disabled() && !s.is_paused(),
                    nodes: matched_nodes(s, &self.snapshot.nodes)
                        .into_iter()
                        .map(|n| {
                            let complete = self
                                .completion
                                .get(&(name.to_owned(), n.name.clone()))
                                .copied()
                                .unwrap_or(false);
                            (n.name.as_str(), complete)
                        })
                        .collect(),
                }
            })
            .collect();
        for (name, work) in &mut self.nodes {
            if has_taint(&work.taints, &taint) && runtime_taint_removable(name, &skyhooks) {
                work.remove_taint(&taint);
            }
        }
    }
}
