//! What changed for one Skyhook since its last pass, turned into node-state edits before its
//! nodes are looked at: reboots (spec §2.11), version changes (spec §2.6), and pods that no
//! longer belong to the spec or the node state.

use std::collections::BTreeMap;

use skyhook_api::stage::{apply_edits, version_changes};
use skyhook_api::uninstall::node_uninstalls;
use skyhook_api::v1alpha1::{Package, SkyhookStatus, Status};

use skyhook_api::runtime_required::{has_taint, taint_text};

use super::context::Context;
use super::event_kinds;
use super::output::EventTarget;
use super::pass::Pass;
use super::workset::Workset;
use crate::names::OwnerSkyhook;
use crate::pod_match::{InvalidReason, Verdict, validate_pod};
use crate::reconcile::snapshot::OwnedPod;

/// Records each node's boot ID; with `REAPPLY_ON_REBOOT`, a changed boot ID resets the node
/// for this Skyhook so every package runs again (spec §2.11), keeping its cordon for the re-run
/// to release. A runtime-required Skyhook that auto-taints new nodes treats the rebooted node as
/// new: the runtime-required taint goes back on in the same node patch as the reset, so no
/// workload lands on the node before the re-run completes (and with
/// `runtimeRequiredCordonAfter`, its removal cordons the node again).
pub(super) fn track_reboots<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    status: &mut SkyhookStatus,
) {
    let name = pass.name();
    let spec = &pass.skyhook.spec;
    let retaint = spec.runtime_required && spec.auto_taint_new_nodes;
    let taint = &context.config.pods.runtime_required_taint;
    for node in &pass.matched {
        let Some(boot_id) = node.boot_id.as_deref() else {
            continue;
        };
        let previous = status
            .node_boot_ids
            .insert(node.name.clone(), boot_id.to_owned());
        let rebooted = previous.is_some_and(|p| p != boot_id);
        if !(rebooted && context.config.reapply_on_reboot) {
            continue;
        }
        if let Some(work) = workset.nodes.get_mut(node.name.as_str()) {
            work.reset(name);
            if retaint && !has_taint(&work.taints, taint) {
                work.add_taint(taint);
                workset
                    .plan
                    .auto_taints
                    .insert(node.name.clone(), taint_text(taint));
            }
        }
        workset
            .plan
            .reboot_resets
            .insert((name.to_owned(), node.name.clone()));
        status.node_state.remove(&node.name);
        status.node_status.remove(&node.name);
        let message = format!(
            "node [{}] rebooted; re-applying Skyhook [{name}]",
            node.name
        );
        let on_node = EventTarget::Node(node.name.clone());
        workset.emit(on_node, event_kinds::REBOOT_RESET, message.clone());
        workset.emit(
            EventTarget::Skyhook(name.to_owned()),
            event_kinds::REBOOT_RESET,
            message,
        );
    }
}

/// Explicit uninstall requests and cancels (upstream's `HandleUninstallRequests` and
/// `HandleCancelledUninstalls`), on every targeted node at once: a finished install whose
/// uninstall is requested moves to `(in_progress, uninstall)`, a withdrawn request sends a
/// running uninstall back to `apply`, a finished uninstall interrupt is forgotten. Pods
/// still follow selection and the budget, so a node not already in progress waits.
pub(super) fn uninstall_requests<'s>(workset: &mut Workset<'s>, pass: &Pass<'_>) {
    for node in &pass.matched {
        let Some(work) = workset.nodes.get_mut(node.name.as_str()) else {
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
pub(super) fn apply_version_changes<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    status: &mut SkyhookStatus,
) -> bool {
    let mut changed = false;
    for node in &pass.matched {
        let Some(work) = workset.nodes.get_mut(node.name.as_str()) else {
            continue;
        };
        let state = work.state(pass.name());
        let mode = context.config.uninstall_mode;
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
pub(super) fn validate_pods<'s>(context: &Context<'s>, workset: &mut Workset<'s>, pass: &Pass<'_>) {
    let snapshot = context.snapshot;
    for pod in snapshot.pods.iter().filter(|p| p.skyhook == pass.name()) {
        if pod.deleting
            || workset.plan.delete_pods.contains_key(&pod.name)
            || workset.state_malformed(&pod.node, pass.name())
        {
            continue;
        }
        if !workset.nodes.contains_key(pod.node.as_str()) {
            workset.delete_pod(&pod.name, "its node is gone");
            continue;
        }
        if let Some(reason) = invalid_reason(
            context,
            workset,
            &pass.owner,
            &pass.skyhook.spec.packages,
            pod,
        ) {
            workset.delete_pod(&pod.name, format!("invalidated: {reason:?}"));
        }
    }
}

/// Why `pod` of `owner` no longer belongs to the spec's `packages` or to its node's state as
/// read (see [`validate_pod`]); `None` when it does or its node is unknown.
pub(super) fn invalid_reason<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    owner: &OwnerSkyhook<'_>,
    packages: &BTreeMap<String, Package>,
    pod: &OwnedPod,
) -> Option<InvalidReason> {
    let state = workset.nodes.get_mut(pod.node.as_str())?.state(owner.name);
    match validate_pod(
        &context.config.pods,
        owner,
        packages,
        state,
        &pod.pod,
        &mut workset.expected_containers,
    ) {
        Verdict::Keep => None,
        Verdict::Invalidate(reason) => Some(reason),
    }
}
