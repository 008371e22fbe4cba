//! One Skyhook per pass, in (priority, name) order (spec §2.2 step 6–7, §2.3, §2.11, §2.12):
//! finalizer or deletion cleanup, validation, reboot tracking, version changes, config updates,
//! pod validation, node statuses with per-node priority gating, then selection
//! (`selection`) and the packages of the selected nodes, node conditions, uncordon.

use std::collections::{BTreeMap, BTreeSet};

use skyhook_api::budget::{legacy_compartments, policy_compartments};
use skyhook_api::interrupt::has_interrupt;
use skyhook_api::keys;
use skyhook_api::ordering::{SkyhookProgress, node_ready, priority_order};
use skyhook_api::stage::{apply_edits, node_complete, version_changes};
use skyhook_api::status::{NodeStatusInput, node_erroring, node_status};
use skyhook_api::v1alpha1::{Package, Skyhook, SkyhookStatus, Status};
use skyhook_api::validate::{ValidationContext, validate_skyhook};

use super::status::Outcome;
use super::taints::matched_nodes;
use super::{EventTarget, Planner};
use crate::names::OwnerSkyhook;
use crate::pod_match::{InvalidReason, Verdict, validate_pod};
use crate::reconcile::snapshot::{NodeView, OwnedPod};

impl<'s> Planner<'s> {
    pub(super) fn skyhooks(&mut self) {
        let snapshot = self.snapshot;
        let mut order: Vec<&'s Skyhook> = snapshot
            .skyhooks
            .iter()
            .filter(|s| s.metadata.name.is_some())
            .collect();
        order.sort_by(|a, b| {
            priority_order(
                (
                    a.spec.priority,
                    a.metadata.name.as_deref().unwrap_or_default(),
                ),
                (
                    b.spec.priority,
                    b.metadata.name.as_deref().unwrap_or_default(),
                ),
            )
        });
        let mut earlier: Vec<SkyhookProgress<'s>> = Vec::new();
        for skyhook in order {
            if let Some(progress) = self.skyhook(skyhook, &earlier) {
                earlier.push(progress);
            }
        }
    }

    fn skyhook(
        &mut self,
        skyhook: &'s Skyhook,
        earlier: &[SkyhookProgress<'s>],
    ) -> Option<SkyhookProgress<'s>> {
        let name = skyhook.metadata.name.as_deref()?;
        let has_finalizer = skyhook
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == keys::FINALIZER);
        if skyhook.metadata.deletion_timestamp.is_some() {
            for work in self.nodes.values_mut() {
                work.release_cordon(name);
            }
            if has_finalizer {
                self.plan.finalizers.insert(name.to_owned(), false);
            }
            return None;
        }
        if !has_finalizer {
            self.plan.finalizers.insert(name.to_owned(), true);
        }
        let context = ValidationContext {
            name: Some(name),
            known_policies: None,
        };
        if let Err(violations) = validate_skyhook(&skyhook.spec, &context) {
            self.invalid(skyhook, name, &violations.to_string());
            return None;
        }
        let owner = match OwnerSkyhook::new(skyhook) {
            Ok(owner) => owner,
            Err(error) => {
                self.event(
                    EventTarget::Skyhook(name.to_owned()),
                    true,
                    "Invalid",
                    error.to_string(),
                );
                return None;
            }
        };
        let version = skyhook
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::VERSION_ANNOTATION));
        if version.map(String::as_str) != Some(super::CONTROLLER_VERSION) {
            self.plan.skyhook_annotations.insert(
                name.to_owned(),
                BTreeMap::from([(
                    keys::VERSION_ANNOTATION.to_owned(),
                    super::CONTROLLER_VERSION.to_owned(),
                )]),
            );
        }
        let matched = matched_nodes(skyhook, &self.snapshot.nodes);
        let matched_names: BTreeSet<&str> = matched.iter().map(|n| n.name.as_str()).collect();
        let old = skyhook.status.clone().unwrap_or_default();
        let mut status = old.clone();
        status
            .node_boot_ids
            .retain(|n, _| matched_names.contains(n.as_str()));
        status
            .node_priority
            .retain(|n, _| matched_names.contains(n.as_str()));
        status
            .node_state
            .retain(|n, _| matched_names.contains(n.as_str()));
        status
            .node_status
            .retain(|n, _| matched_names.contains(n.as_str()));

        for node in &matched {
            self.track_reboot(name, node, &mut status);
        }
        // A paused Skyhook changes nothing on its nodes, lost interrupt pods included: they are
        // looked at again on resume.
        if !skyhook.is_paused() {
            self.lost_interrupts(skyhook, name, &matched);
        }
        // A paused Skyhook changes nothing on its nodes (upstream skips it right after
        // reporting its state), so a spec edit made while paused takes effect on resume.
        let paused = skyhook.is_paused();
        let version_changed = !paused && self.version_changes(skyhook, name, &matched, &mut status);
        if !paused {
            self.config_updates(skyhook, &owner, &matched, &mut status);
            self.validate_pods(skyhook, &owner);
        }

        let packages = &skyhook.spec.packages;
        let updates = status.config_updates.clone();
        let has_int = |pkg: &str| {
            packages
                .get(pkg)
                .is_some_and(|p| has_interrupt(p, updates.get(pkg).map_or(&[][..], Vec::as_slice)))
        };
        let mut complete: BTreeMap<&'s str, bool> = BTreeMap::new();
        for node in &matched {
            if let Some(work) = self.nodes.get_mut(node.name.as_str()) {
                let done = node_complete(work.state(name), packages, has_int);
                complete.insert(node.name.as_str(), done);
            }
        }
        let progress = SkyhookProgress {
            name,
            priority: skyhook.spec.priority,
            disabled: skyhook.is_disabled(),
            sequencing: skyhook.spec.sequencing,
            nodes: complete.clone(),
        };

        let policy_name = skyhook.spec.policy_name();
        let policy = policy_name.and_then(|p| self.snapshot.policies.get(p));
        let policy_missing = policy_name.is_some() && policy.is_none();
        let disabled = skyhook.is_disabled();
        let ready: BTreeMap<&str, bool> = matched
            .iter()
            .map(|n| (n.name.as_str(), node_ready(earlier, &progress, &n.name)))
            .collect();
        for node in &matched {
            let Some(work) = self.nodes.get_mut(node.name.as_str()) else {
                continue;
            };
            let next = node_status(NodeStatusInput {
                current: work.status(name),
                complete: complete.get(node.name.as_str()).copied().unwrap_or(false),
                ready: ready.get(node.name.as_str()).copied().unwrap_or(false),
                disabled,
                paused,
                has_compartments: !policy_missing,
            });
            work.set_status(name, next);
        }

        let mut outcome = Outcome {
            version_changed,
            policy_missing,
            ..Outcome::default()
        };
        if !disabled && !paused && !policy_missing {
            let compartments = match policy {
                Some(policy) => policy_compartments(policy),
                None => {
                    legacy_compartments(skyhook.spec.interruption_budget.as_ref(), matched.len())
                }
            };
            let picks = self.select(
                skyhook,
                name,
                &matched,
                &compartments,
                &ready,
                &complete,
                &mut status,
                &mut outcome,
            );
            for node in picks {
                self.run_node(skyhook, &owner, &node, &status.config_updates, &mut outcome);
            }
        }

        let mut completed = Vec::new();
        for node in &matched {
            let done = complete.get(node.name.as_str()).copied().unwrap_or(false);
            self.completion
                .insert((name.to_owned(), node.name.clone()), done);
            let Some(work) = self.nodes.get_mut(node.name.as_str()) else {
                continue;
            };
            if done {
                status.node_priority.remove(&node.name);
                work.release_cordon(name);
            }
            let (not_ready, reason) = if done {
                ("False", keys::NODE_NOT_READY_REASON_COMPLETE)
            } else {
                ("True", keys::NODE_NOT_READY_REASON_INCOMPLETE)
            };
            work.set_condition(
                keys::node_not_ready_condition(name),
                not_ready,
                reason,
                keys::node_not_ready_message(name, done),
            );
            let erroring = node_erroring(work.state(name));
            work.set_condition(
                keys::node_erroring_condition(name),
                if erroring { "True" } else { "False" },
                if erroring {
                    keys::NODE_ERRORING_REASON
                } else {
                    keys::NODE_NOT_ERRORING_REASON
                },
                keys::node_erroring_message(name, erroring),
            );
            if work.state(name).is_empty() {
                status.node_state.remove(&node.name);
            } else {
                status
                    .node_state
                    .insert(node.name.clone(), work.state(name).clone());
            }
            let node_status = work.status(name);
            if node_status == Status::Complete
                && node
                    .annotations
                    .get(&keys::node_status_key(name))
                    .map(String::as_str)
                    != Some("complete")
            {
                completed.push(node.name.clone());
            }
            status.node_status.insert(node.name.clone(), node_status);
            if !node
                .annotations
                .contains_key(&keys::node_version_annotation(name))
                || node
                    .annotations
                    .get(&keys::node_version_annotation(name))
                    .map(String::as_str)
                    != Some(super::CONTROLLER_VERSION)
            {
                work.set_annotation(
                    keys::node_version_annotation(name),
                    super::CONTROLLER_VERSION.to_owned(),
                );
            }
        }
        for node in completed {
            self.event(
                EventTarget::Node(node),
                false,
                "State",
                format!("Skyhook [{name}] complete."),
            );
        }
        for (node, work) in &mut self.nodes {
            if !matched_names.contains(node) {
                work.release_cordon(name);
            }
        }
        self.finish_status(skyhook, name, &old, status, outcome);
        Some(progress)
    }

    /// Records the node's boot ID; with `REAPPLY_ON_REBOOT`, a changed boot ID resets the node
    /// for this Skyhook so every package runs again (spec §2.11).
    fn track_reboot(&mut self, name: &str, node: &NodeView, status: &mut SkyhookStatus) {
        let Some(boot_id) = node.boot_id.as_deref() else {
            return;
        };
        let previous = status
            .node_boot_ids
            .insert(node.name.clone(), boot_id.to_owned());
        let rebooted = previous.is_some_and(|p| p != boot_id);
        if rebooted && self.config.reapply_on_reboot {
            if let Some(work) = self.nodes.get_mut(node.name.as_str()) {
                work.reset(name);
            }
            status.node_state.remove(&node.name);
            status.node_status.remove(&node.name);
            let message = format!(
                "node [{}] rebooted; re-applying Skyhook [{name}]",
                node.name
            );
            self.event(
                EventTarget::Node(node.name.clone()),
                false,
                "Reboot",
                message.clone(),
            );
            self.event(
                EventTarget::Skyhook(name.to_owned()),
                false,
                "Reboot",
                message,
            );
        }
    }

    /// Upgrades, downgrades and removals turn into node-state edits (spec §2.6). The nodes
    /// keep `in_progress` only if they already were.
    fn version_changes(
        &mut self,
        skyhook: &Skyhook,
        name: &str,
        matched: &[&NodeView],
        status: &mut SkyhookStatus,
    ) -> bool {
        let mut changed = false;
        for node in matched {
            let Some(work) = self.nodes.get_mut(node.name.as_str()) else {
                continue;
            };
            let state = work.state(name);
            let changes = version_changes(state, &skyhook.spec.packages);
            if changes.edits.is_empty() {
                continue;
            }
            apply_edits(state, &changes.edits);
            for package in &changes.changed_packages {
                status.config_updates.remove(package);
            }
            // Upstream marks every node `in_progress` here, though pods run only on the batch;
            // a node waits until selection picks it (and `launch` marks it).
            if work.status(name) != Status::InProgress {
                work.set_status(name, Status::Waiting);
            }
            changed = true;
        }
        changed
    }

    /// Deletes the Skyhook's pods that no longer match the spec or the node state.
    fn validate_pods(&mut self, skyhook: &Skyhook, owner: &OwnerSkyhook<'_>) {
        let snapshot = self.snapshot;
        for pod in snapshot.pods.iter().filter(|p| p.skyhook == owner.name) {
            if pod.deleting || self.plan.delete_pods.contains_key(&pod.name) {
                continue;
            }
            if !self.nodes.contains_key(pod.node.as_str()) {
                self.delete_pod(&pod.name, "its node is gone");
                continue;
            }
            if let Some(reason) = self.invalid_reason(owner, &skyhook.spec.packages, pod) {
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
        match validate_pod(&self.config.pods, owner, packages, state, &pod.pod) {
            Verdict::Keep => None,
            Verdict::Invalidate(reason) => Some(reason),
        }
    }
}
