//! What changed for one Skyhook since its last pass, turned into node-state edits before its
//! nodes are looked at: reboots (spec §2.11), version changes (spec §2.6), and pods that no
//! longer belong to the spec or the node state.

use std::collections::BTreeMap;

use skyhook_api::stage::{apply_edits, version_changes};
use skyhook_api::uninstall::node_uninstalls;
use skyhook_api::v1alpha1::{Package, SkyhookStatus, Status};

use super::skyhooks::Pass;
use super::{EventTarget, Planner};
use crate::names::OwnerSkyhook;
use crate::pod_match::{InvalidReason, Verdict, validate_pod};
use crate::reconcile::snapshot::{NodeView, OwnedPod};

impl Planner<'_> {
    /// Records each node's boot ID; with `REAPPLY_ON_REBOOT`, a changed boot ID resets the node
    /// for this Skyhook so every package runs again (spec §2.11).
    pub(super) fn track_reboots(
        &mut self,
        name: &str,
        matched: &[&NodeView],
        status: &mut SkyhookStatus,
    ) {
        for node in matched {
            let Some(boot_id) = node.boot_id.as_deref() else {
                continue;
            };
            let previous = status
                .node_boot_ids
                .insert(node.name.clone(), boot_id.to_owned());
            let rebooted = previous.is_some_and(|p| p != boot_id);
            if !(rebooted && self.config.reapply_on_reboot) {
                continue;
            }
            if let Some(work) = self.nodes.get_mut(node.name.as_str()) {
                work.reset(name);
            }
            status.node_state.remove(&node.name);
            status.node_status.remove(&node.name);
            let message = format!(
                "node [{}] rebooted; re-applying Skyhook [{name}]",
                node.name
            );
            let on_node = EventTarget::Node(node.name.clone());
            self.event(on_node, false, "Reboot", message.clone());
            self.event(
                EventTarget::Skyhook(name.to_owned()),
                false,
                "Reboot",
                message,
            );
        }
    }

    /// Explicit uninstall requests and cancels (upstream's `HandleUninstallRequests` and
    /// `HandleCancelledUninstalls`), on every targeted node at once: a finished install whose
    /// uninstall is requested moves to `(in_progress, uninstall)`, a withdrawn request sends a
    /// running uninstall back to `apply`, a finished uninstall interrupt is forgotten. Pods
    /// still follow selection and the budget, so a node not already in progress waits.
    pub(super) fn uninstall_requests(&mut self, pass: &Pass<'_>) {
        for node in &pass.matched {
            let Some(work) = self.nodes.get_mut(node.name.as_str()) else {
                continue;
            };
            let state = work.state(pass.name());
            let changes = node_uninstalls(state, &pass.skyhook.spec.packages, pass.rules.deleting);
            apply_edits(state, &changes.edits);
            if changes.node_in_progress && work.status(pass.name()) != Status::InProgress {
                work.set_status(pass.name(), Status::Waiting);
            }
        }
    }

    /// Upgrades, downgrades and removals turn into node-state edits (spec §2.6); returns whether
    /// any node changed. The nodes keep `in_progress` only if they already were.
    pub(super) fn version_changes(&mut self, pass: &Pass<'_>, status: &mut SkyhookStatus) -> bool {
        let mut changed = false;
        for node in &pass.matched {
            let Some(work) = self.nodes.get_mut(node.name.as_str()) else {
                continue;
            };
            let state = work.state(pass.name());
            let mode = self.config.uninstall_mode;
            let changes = version_changes(state, &pass.skyhook.spec.packages, mode);
            if changes.edits.is_empty() {
                continue;
            }
            apply_edits(state, &changes.edits);
            for package in &changes.changed_packages {
                status.config_updates.remove(package);
            }
            // Upstream marks every node `in_progress` here, though pods run only on the batch;
            // a node waits until selection picks it (and `launch` marks it).
            if work.status(pass.name()) != Status::InProgress {
                work.set_status(pass.name(), Status::Waiting);
            }
            changed = true;
        }
        changed
    }

    /// Deletes the Skyhook's pods that no longer match the spec or the node state.
    pub(super) fn validate_pods(&mut self, pass: &Pass<'_>) {
        let snapshot = self.snapshot;
        for pod in snapshot.pods.iter().filter(|p| p.skyhook == pass.name()) {
            if pod.deleting
                || self.plan.delete_pods.contains_key(&pod.name)
                || self.state_malformed(&pod.node, pass.name())
            {
                continue;
            }
            if !self.nodes.contains_key(pod.node.as_str()) {
                self.delete_pod(&pod.name, "its node is gone");
                continue;
            }
            if let Some(reason) = self.invalid_reason(&pass.owner, &pass.skyhook.spec.packages, pod)
            {
                self.delete_pod(&pod.name, format!("invalidated: {reason:?}"));
            }
        }
    }

    /// Why `pod` of `owner` no longer belongs to the spec's `packages` or to its node's state as
    /// read (see [`validate_pod`]); `None` when it does or its node is unknown.
    pub(super) fn invalid_reason(
        &mut self,
        owner: &OwnerSkyhook<'_>,
        packages: &BTreeMap<String, Package>,
        pod: &OwnedPod,
    ) -> Option<InvalidReason> {
        let state = self.nodes.get_mut(pod.node.as_str())?.state(owner.name);
        match validate_pod(
            &self.config.pods,
            owner,
            packages,
            state,
            &pod.pod,
            &mut self.expected_containers,
        ) {
            Verdict::Keep => None,
            Verdict::Invalidate(reason) => Some(reason),
        }
    }
}
