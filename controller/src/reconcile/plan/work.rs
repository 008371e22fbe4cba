//! A working copy of one node: the plan edits it in place, and [`NodeWork::patch`] returns only
//! what differs from the node as read.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Taint;
use skyhook_api::budget::holds_fleet_slot;
use skyhook_api::keys;
use skyhook_api::node_state::NodeState;
use skyhook_api::runtime_required::has_taint;
use skyhook_api::transition::{FinishedStage, stamp_transitions};
use skyhook_api::v1alpha1::Status;

use super::NodePatch;
use crate::reconcile::snapshot::{NodeConditionView, NodeView};

#[derive(Debug, Clone)]
pub(super) struct NodeWork<'s> {
    pub(super) view: &'s NodeView,
    annotations: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
    pub(super) taints: Vec<Taint>,
    unschedulable: bool,
    /// The node's conditions by type, as this plan leaves them so far.
    conditions: BTreeMap<String, NodeConditionView>,
    /// Node states parsed on first use, by Skyhook; written back in [`NodeWork::patch`].
    states: BTreeMap<String, NodeState>,
    /// Why the node-state annotation of a Skyhook did not parse, by Skyhook: reported by the
    /// planner, and never written over (the Skyhook's pass skips the node).
    malformed: BTreeMap<String, String>,
}

impl<'s> NodeWork<'s> {
    pub(super) fn new(view: &'s NodeView) -> Self {
        NodeWork {
            view,
            annotations: view.annotations.clone(),
            labels: view.labels.clone(),
            taints: view.taints.clone(),
            unschedulable: view.unschedulable,
            conditions: view
                .conditions
                .iter()
                .map(|c| (c.type_.clone(), c.clone()))
                .collect(),
            states: BTreeMap::new(),
            malformed: BTreeMap::new(),
        }
    }

    pub(super) fn annotations(&self) -> &BTreeMap<String, String> {
        &self.annotations
    }

    /// `spec.unschedulable` as this plan leaves it so far.
    pub(super) fn unschedulable(&self) -> bool {
        self.unschedulable
    }

    /// The node state of `skyhook`; an unreadable annotation reads as empty and is recorded in
    /// [`NodeWork::malformed`]: the Skyhook's pass skips such a node, and whatever else edits
    /// its state is not written back over the annotation.
    pub(super) fn state(&mut self, skyhook: &str) -> &mut NodeState {
        let annotations = &self.annotations;
        let malformed = &mut self.malformed;
        self.states.entry(skyhook.to_owned()).or_insert_with(|| {
            let Some(text) = annotations.get(&keys::node_state_annotation(skyhook)) else {
                return NodeState::new();
            };
            NodeState::parse(text).unwrap_or_else(|error| {
                malformed.insert(skyhook.to_owned(), error_chain(&error));
                NodeState::new()
            })
        })
    }

    /// Stamps the transition times of `skyhook`'s node state against the annotation as read
    /// (see [`stamp_transitions`]); the stage attempts this plan finished. Called once per
    /// Skyhook and node, after the last edit of the state.
    pub(super) fn stamp_transitions(
        &mut self,
        skyhook: &str,
        now: Timestamp,
    ) -> Vec<FinishedStage> {
        let written = self.written_state(skyhook);
        stamp_transitions(&written, self.state(skyhook), now)
    }

    /// When `skyhook`'s node state last changed as this plan leaves it so far: an entry this
    /// plan changed counts as changed `now`, as [`NodeWork::stamp_transitions`] will stamp it.
    pub(super) fn last_transition(&mut self, skyhook: &str, now: Timestamp) -> Option<Timestamp> {
        let written = self.written_state(skyhook);
        let mut stamped = self.state(skyhook).clone();
        stamp_transitions(&written, &mut stamped, now);
        stamped
            .iter()
            .filter_map(|(_, entry)| entry.last_transition_time.as_ref().map(|t| t.0))
            .max()
    }

    /// `skyhook`'s node state as the annotation was read (empty when unreadable).
    fn written_state(&self, skyhook: &str) -> NodeState {
        self.view
            .annotations
            .get(&keys::node_state_annotation(skyhook))
            .and_then(|text| NodeState::parse(text).ok())
            .unwrap_or_default()
    }

    /// Whether the node holds a fleet slot as this plan leaves it so far: some Skyhook's cordon,
    /// or an unconfirmed interrupt of some Skyhook (see `skyhook_api::budget::holds_fleet_slot`).
    pub(super) fn holds_fleet_slot(&mut self) -> bool {
        let state_prefix = keys::node_state_annotation("");
        let skyhooks: Vec<String> = self
            .annotations
            .keys()
            .filter_map(|key| key.strip_prefix(&state_prefix))
            .map(str::to_owned)
            .collect();
        for skyhook in &skyhooks {
            self.state(skyhook);
        }
        let states = self.states.iter().map(|(s, state)| (s.as_str(), state));
        holds_fleet_slot(&self.annotations, self.unschedulable, states)
    }

    /// Whether the node-state annotation of `skyhook` does not parse.
    pub(super) fn state_malformed(&mut self, skyhook: &str) -> bool {
        self.state(skyhook);
        self.malformed.contains_key(skyhook)
    }

    /// The Skyhooks whose node-state annotation did not parse, with why.
    pub(super) fn malformed(&self) -> &BTreeMap<String, String> {
        &self.malformed
    }

    /// The node status of `skyhook` as last written, `unknown` when absent.
    pub(super) fn status(&self, skyhook: &str) -> Status {
        self.annotations
            .get(&keys::node_status_key(skyhook))
            .and_then(|text| text.parse().ok())
            .unwrap_or(Status::Unknown)
    }

    pub(super) fn set_status(&mut self, skyhook: &str, status: Status) {
        let key = keys::node_status_key(skyhook);
        self.annotations.insert(key.clone(), status.to_string());
        self.labels.insert(key, status.to_string());
    }

    /// Forgets `skyhook` on this node: state, status annotation and label.
    pub(super) fn reset(&mut self, skyhook: &str) {
        self.states.insert(skyhook.to_owned(), NodeState::new());
        self.malformed.remove(skyhook);
        let key = keys::node_status_key(skyhook);
        self.annotations.remove(&key);
        self.labels.remove(&key);
    }

    pub(super) fn set_annotation(&mut self, key: String, value: String) {
        self.annotations.insert(key, value);
    }

    /// Sets the annotation `key` to `value`, or removes it for `None`.
    pub(super) fn set_or_remove_annotation(&mut self, key: &str, value: Option<&str>) {
        match value {
            Some(value) if self.annotations.get(key).map(String::as_str) != Some(value) => {
                self.annotations.insert(key.to_owned(), value.to_owned());
            }
            Some(_) => {}
            None => {
                self.annotations.remove(key);
            }
        }
    }

    pub(super) fn set_condition(
        &mut self,
        type_: String,
        status: &str,
        reason: &str,
        message: String,
    ) {
        let condition = NodeConditionView {
            type_: type_.clone(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message,
        };
        self.conditions.insert(type_, condition);
    }

    /// Removes every trace of a deleted Skyhook (upstream §2.8): its cordon, every annotation
    /// and label of its ([`keys::is_skyhook_node_key`]) and its node conditions. Its node state
    /// and the controller-version annotation stay when the state still holds entries: the
    /// markers of packages that were never uninstalled. Returns whether the node held anything
    /// of the Skyhook to remove.
    pub(super) fn forget_skyhook(&mut self, skyhook: &str) -> bool {
        let held = |work: &Self| {
            (
                work.current_annotations(),
                work.labels.len(),
                work.conditions.len(),
                work.unschedulable,
            )
        };
        let before = held(self);
        self.release_cordon(skyhook);
        let keep_markers = !self.state(skyhook).is_empty();
        let markers = [
            keys::node_state_annotation(skyhook),
            keys::node_version_annotation(skyhook),
        ];
        let forget = |key: &String| {
            keys::is_skyhook_node_key(key, skyhook) && !(keep_markers && markers.contains(key))
        };
        self.annotations.retain(|key, _| !forget(key));
        self.labels.retain(|key, _| !forget(key));
        if !keep_markers {
            self.states.remove(skyhook);
        }
        let prefix = keys::node_condition_prefix(skyhook);
        self.conditions
            .retain(|type_, _| !type_.starts_with(&prefix));
        held(self) != before
    }

    /// Cordons the node for `skyhook`, recording ownership and when; a drain that failed
    /// before is being tried again, so its mark goes.
    pub(super) fn cordon(&mut self, skyhook: &str, now: &str) {
        self.annotations
            .remove(&keys::drain_failed_annotation(skyhook));
        self.annotations
            .insert(keys::cordon_annotation(skyhook), "true".to_owned());
        self.annotations
            .entry(keys::cordoned_at_annotation(skyhook))
            .or_insert_with(|| now.to_owned());
        self.unschedulable = true;
    }

    /// Marks a drain of `skyhook` that timed out with `onTimeout: fail` (see
    /// `skyhook_api::budget::slot`).
    pub(super) fn mark_drain_failed(&mut self, skyhook: &str, now: &str) {
        self.annotations
            .insert(keys::drain_failed_annotation(skyhook), now.to_owned());
    }

    /// Releases `skyhook`'s cordon; the node becomes schedulable only when no other Skyhook
    /// holds one. Does nothing when `skyhook` holds none, so an administrator's cordon stays.
    pub(super) fn release_cordon(&mut self, skyhook: &str) {
        if self
            .annotations
            .remove(&keys::cordon_annotation(skyhook))
            .is_none()
        {
            return;
        }
        self.annotations
            .remove(&keys::cordoned_at_annotation(skyhook));
        let others = self
            .annotations
            .keys()
            .any(|k| k.starts_with(keys::CORDON_ANNOTATION_PREFIX));
        if !others {
            self.unschedulable = false;
        }
    }

    pub(super) fn add_taint(&mut self, taint: &Taint) {
        if !has_taint(&self.taints, taint) {
            self.taints.push(taint.clone());
        }
    }

    pub(super) fn remove_taint(&mut self, taint: &Taint) {
        self.taints
            .retain(|t| !has_taint(std::slice::from_ref(t), taint));
    }

    /// The node's labels as this plan leaves them so far.
    pub(super) fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// The node's annotations as this plan leaves them so far, node states included; a node
    /// state that did not change keeps its text as read, and one that did not parse stays.
    pub(super) fn current_annotations(&self) -> BTreeMap<String, String> {
        let mut annotations = self.annotations.clone();
        for (skyhook, state) in &self.states {
            if self.malformed.contains_key(skyhook) {
                continue;
            }
            let key = keys::node_state_annotation(skyhook);
            if state.is_empty() {
                annotations.remove(&key);
            } else {
                let text = state.to_annotation();
                let unchanged = self
                    .view
                    .annotations
                    .get(&key)
                    .and_then(|old| NodeState::parse(old).ok())
                    .is_some_and(|old| old == *state);
                if !unchanged {
                    annotations.insert(key, text);
                } else if let Some(old) = self.view.annotations.get(&key) {
                    annotations.insert(key, old.clone());
                }
            }
        }
        annotations
    }

    /// What differs from the node as read.
    pub(super) fn patch(&self) -> NodePatch {
        NodePatch {
            annotations: diff(&self.view.annotations, &self.current_annotations()),
            labels: diff(&self.view.labels, &self.labels),
            unschedulable: (self.unschedulable != self.view.unschedulable)
                .then_some(self.unschedulable),
            taints: (self.taints != self.view.taints).then(|| self.taints.clone()),
            // Written only when status, reason or message differ from the node as read, so a
            // settled node costs no status write per reconcile.
            conditions: self
                .conditions
                .values()
                .filter(|condition| !self.view.conditions.contains(condition))
                .cloned()
                .collect(),
            remove_conditions: self
                .view
                .conditions
                .iter()
                .filter(|c| !self.conditions.contains_key(&c.type_))
                .map(|c| c.type_.clone())
                .collect(),
        }
    }
}

/// `error` and its sources, so the report says where the JSON broke, not only that it did.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn diff(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> BTreeMap<String, Option<String>> {
    let mut out: BTreeMap<String, Option<String>> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    out.extend(
        old.keys()
            .filter(|k| !new.contains_key(*k))
            .map(|k| (k.clone(), None)),
    );
    out
}
