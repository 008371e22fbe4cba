//! A working copy of one node: the plan edits it in place, and [`NodeWork::patch`] returns only
//! what differs from the node as read.
//!
//! A plan looks at every node but changes few of them, so the copy is made on the first change:
//! annotations and labels are borrowed from the view until then, conditions are taken over only
//! when one is set to something new, each Skyhook's node state is parsed once, and writes that
//! change nothing are not made. A node the plan leaves as it was costs no copies and an empty
//! patch.

use std::borrow::Cow;
use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Taint;
use skyhook_api::budget::holds_fleet_slot;
use skyhook_api::errors::error_chain;
use skyhook_api::generation::Owners;
use skyhook_api::keys::{self, Keys};
use skyhook_api::migration::NodeEdit;
use skyhook_api::node_keys::{cordon_held, live_state_names};
use skyhook_api::node_state::NodeState;
use skyhook_api::runtime_required::has_taint;
use skyhook_api::string_map::PackedMap;
use skyhook_api::transition::{
    FinishedStage, TransitionTimes, carries_legacy_times, recorded_times, stamp_transitions,
};
use skyhook_api::v1alpha1::Status;

use super::output::NodePatch;
use crate::reconcile::snapshot::{NodeConditionView, NodeView};

#[derive(Debug, Clone)]
pub(super) struct NodeWork<'s> {
    pub(super) view: &'s NodeView,
    /// Which group's keys of each name are in force (the others are a migration's shadows).
    owners: &'s Owners,
    /// The annotations as this plan leaves them so far (node states apart, see `states`).
    annotations: Cow<'s, PackedMap>,
    labels: Cow<'s, PackedMap>,
    pub(super) taints: Vec<Taint>,
    unschedulable: bool,
    /// The node's conditions by type as this plan leaves them, once one of them changed;
    /// `None` while they are as read.
    conditions: Option<BTreeMap<String, NodeConditionView>>,
    /// Node states parsed on first use, by Skyhook, sorted by name; written back in
    /// [`NodeWork::patch`]. A vector: a node has one per Skyhook targeting it, and every plan
    /// has one `NodeWork` per node (a `BTreeMap`'s first leaf has room for eleven).
    states: Vec<(String, WorkState)>,
    /// Why the node-state annotation of a Skyhook did not parse, by Skyhook: reported by the
    /// last step (`finish`), and never written over (the Skyhook's pass skips the node).
    malformed: BTreeMap<String, String>,
    /// The names whose keys this plan adopted from their twin ([`NodeWork::adopt`]): their
    /// state as adopted is their state as read, so that the adoption itself is no transition.
    adopted: Vec<String>,
}

/// One Skyhook's node state on the node.
#[derive(Debug, Clone)]
struct WorkState {
    /// As the annotation was read; `None` when there is none or it did not parse.
    read: Option<NodeState>,
    /// As this plan leaves it so far.
    now: NodeState,
    /// This plan reset it ([`NodeWork::reset`]): left empty, the annotation goes.
    reset: bool,
    /// When its entries entered their stages and states, as last written.
    times: TransitionTimes,
    /// The annotation as read carries the times our earlier releases wrote into the entries:
    /// written again in upstream's form, even when the state did not change.
    legacy_times: bool,
}

impl<'s> NodeWork<'s> {
    pub(super) fn new(view: &'s NodeView, owners: &'s Owners) -> Self {
        NodeWork {
            view,
            owners,
            annotations: Cow::Borrowed(&view.annotations),
            labels: Cow::Borrowed(&view.labels),
            taints: view.taints.clone(),
            unschedulable: view.unschedulable,
            conditions: None,
            states: Vec::new(),
            malformed: BTreeMap::new(),
            adopted: Vec::new(),
        }
    }

    /// The keys of `skyhook` on this node: its live object's group's (see [`Owners::keys_of`]).
    fn keys_of(&self, skyhook: &str) -> &'static Keys {
        self.owners.keys_of(skyhook)
    }

    pub(super) fn annotations(&self) -> &PackedMap {
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
        &mut self.work_state(skyhook).now
    }

    /// `skyhook`'s state, parsed on first use: as read from the view, and as this plan leaves
    /// it, starting from the working annotations (the same text unless this plan removed it).
    fn work_state(&mut self, skyhook: &str) -> &mut WorkState {
        let at = match self
            .states
            .binary_search_by(|(s, _)| s.as_str().cmp(skyhook))
        {
            Ok(at) => at,
            Err(at) => {
                let state = self.read_state(skyhook);
                self.states.reserve_exact(1);
                self.states.insert(at, (skyhook.to_owned(), state));
                at
            }
        };
        &mut self.states[at].1
    }

    /// `skyhook`'s state as read and as the working annotations have it (see
    /// [`NodeWork::work_state`]); a malformed one is recorded and reads as empty.
    fn read_state(&mut self, skyhook: &str) -> WorkState {
        let keys = self.keys_of(skyhook);
        let key = keys.node_state_annotation(skyhook);
        let as_read = self.as_read(skyhook);
        let read_text = as_read.get(&key);
        let read = read_text.map(NodeState::parse);
        let now = match self.annotations.get(&key) {
            None => Ok(NodeState::new()),
            Some(text) if Some(text) == read_text => match &read {
                Some(Ok(state)) => Ok(state.clone()),
                _ => NodeState::parse(text),
            },
            Some(text) => NodeState::parse(text),
        };
        let legacy_times = read_text.is_some_and(carries_legacy_times);
        let times = recorded_times(as_read, keys, skyhook);
        let now = now.unwrap_or_else(|error| {
            self.malformed
                .insert(skyhook.to_owned(), error_chain(&error));
            NodeState::new()
        });
        WorkState {
            read: read.and_then(Result::ok),
            now,
            reset: false,
            legacy_times,
            times,
        }
    }

    /// Stamps the transition times of `skyhook`'s node state against the annotation as read
    /// (see [`stamp_transitions`]) into `stageTimes_<skyhook>`; the stage attempts this plan
    /// finished. Called once per Skyhook and node, after the last edit of the state.
    pub(super) fn stamp_transitions(
        &mut self,
        skyhook: &str,
        now: Timestamp,
    ) -> Vec<FinishedStage> {
        let (stamped, finished) = self.stamped(skyhook, now);
        let key = self.keys_of(skyhook).stage_times_annotation(skyhook);
        let written =
            (self.annotations.get(&key)).and_then(|text| TransitionTimes::parse(text).ok());
        if written.as_ref() != Some(&stamped) {
            let text = (!stamped.is_empty()).then(|| stamped.to_annotation());
            self.set_or_remove_annotation(&key, text.as_deref());
        }
        finished
    }

    /// When `skyhook`'s node state last changed as this plan leaves it so far: an entry this
    /// plan changed counts as changed `now`, as [`NodeWork::stamp_transitions`] will stamp it.
    pub(super) fn last_transition(&mut self, skyhook: &str, now: Timestamp) -> Option<Timestamp> {
        self.stamped(skyhook, now).0.latest()
    }

    /// [`stamp_transitions`] of `skyhook`'s node state as this plan leaves it so far.
    fn stamped(&mut self, skyhook: &str, now: Timestamp) -> (TransitionTimes, Vec<FinishedStage>) {
        let state = self.work_state(skyhook);
        let written = state.read.clone().unwrap_or_default();
        stamp_transitions(&written, &state.times, &state.now, now)
    }

    /// Whether the node holds a fleet slot as this plan leaves it so far: some Skyhook's cordon,
    /// or an unconfirmed interrupt of some Skyhook (see `skyhook_api::budget::holds_fleet_slot`).
    pub(super) fn holds_fleet_slot(&mut self) -> bool {
        let skyhooks: Vec<String> = live_state_names(self.annotations.as_ref(), self.owners);
        for skyhook in &skyhooks {
            self.state(skyhook);
        }
        let states = self
            .states
            .iter()
            .map(|(s, state)| (s.as_str(), &state.now));
        holds_fleet_slot(
            self.annotations.as_ref(),
            self.owners,
            self.unschedulable,
            states,
        )
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
        let keys = self.keys_of(skyhook);
        self.annotations
            .get(&keys.node_status_key(skyhook))
            .and_then(|text| text.parse().ok())
            .unwrap_or(Status::Unknown)
    }

    pub(super) fn set_status(&mut self, skyhook: &str, status: Status) {
        let keys = self.keys_of(skyhook);
        let key = keys.node_status_key(skyhook);
        let value = status.to_string();
        set_entry(&mut self.labels, &key, &value);
        set_entry(&mut self.annotations, &key, &value);
    }

    /// Forgets `skyhook` on this node after a reboot: its node state and every key of
    /// [`keys::Keys::reboot_reset_node_keys`] (status annotation and label, version, drain
    /// start); its cordon stays, for the re-run to release.
    pub(super) fn reset(&mut self, skyhook: &str) {
        let keys = self.keys_of(skyhook);
        let state = self.work_state(skyhook);
        state.now = NodeState::new();
        state.reset = true;
        self.malformed.remove(skyhook);
        // The node state's annotation follows the reset state (see `state_annotations`).
        let state_key = keys.node_state_annotation(skyhook);
        for key in keys.reboot_reset_node_keys(skyhook) {
            if key.key == state_key {
                continue;
            }
            remove_entry(&mut self.annotations, &key.key);
            if key.kind == keys::NodeKeyKind::AnnotationAndLabel {
                remove_entry(&mut self.labels, &key.key);
            }
        }
    }

    pub(super) fn set_annotation(&mut self, key: String, value: String) {
        set_entry(&mut self.annotations, &key, &value);
    }

    /// Sets the annotation `key` to `value`, or removes it for `None`.
    pub(super) fn set_or_remove_annotation(&mut self, key: &str, value: Option<&str>) {
        match value {
            Some(value) => set_entry(&mut self.annotations, key, value),
            None => remove_entry(&mut self.annotations, key),
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
        if self.condition(&type_) != Some(&condition) {
            self.conditions_mut().insert(type_, condition);
        }
    }

    /// The condition `type_` as this plan leaves it so far.
    fn condition(&self, type_: &str) -> Option<&NodeConditionView> {
        match &self.conditions {
            Some(conditions) => conditions.get(type_),
            None => self.view.conditions.iter().find(|c| c.type_ == type_),
        }
    }

    /// The conditions, taken over from the node as read on the first change.
    fn conditions_mut(&mut self) -> &mut BTreeMap<String, NodeConditionView> {
        let view = self.view;
        self.conditions.get_or_insert_with(|| {
            view.conditions
                .iter()
                .map(|c| (c.type_.clone(), c.clone()))
                .collect()
        })
    }

    /// Removes every trace of a deleted Skyhook (upstream §2.8): its cordon, every annotation
    /// and label of its ([`keys::Keys::is_skyhook_node_key`]) and its node conditions. Its node state
    /// and the controller-version annotation stay when the state still holds entries: the
    /// markers of packages that were never uninstalled. Returns whether the node held anything
    /// of the Skyhook to remove.
    pub(super) fn forget_skyhook(&mut self, skyhook: &str) -> bool {
        let keys = self.keys_of(skyhook);
        let held = |work: &Self| {
            (
                work.current_annotations(),
                work.labels.len(),
                work.condition_types().count(),
                work.unschedulable,
            )
        };
        let before = held(self);
        self.release_cordon(skyhook);
        let keep_markers = !self.state(skyhook).is_empty();
        let markers = [
            keys.node_state_annotation(skyhook),
            keys.node_version_annotation(skyhook),
        ];
        let forget = |key: &str| {
            keys.is_skyhook_node_key(key, skyhook)
                && !(keep_markers && markers.iter().any(|marker| marker == key))
        };
        retain_entries(&mut self.annotations, |key| !forget(key));
        retain_entries(&mut self.labels, |key| !forget(key));
        if !keep_markers {
            self.states.retain(|(s, _)| s != skyhook);
        }
        let prefix = keys.node_condition_prefix(skyhook);
        if self
            .condition_types()
            .any(|type_| type_.starts_with(&prefix))
        {
            self.conditions_mut()
                .retain(|type_, _| !type_.starts_with(&prefix));
        }
        held(self) != before
    }

    /// The annotations `skyhook`'s state counts as read from: the node's, or for a name this
    /// plan adopted, the adopted ones (before any step edited them: node states are edited
    /// apart from the annotations).
    fn as_read(&self, skyhook: &str) -> &PackedMap {
        if self.adopted.iter().any(|name| name == skyhook) {
            &self.annotations
        } else {
            &self.view.annotations
        }
    }

    /// Applies the adoption of `name`'s keys from its twin ([`NodeEdit`] of
    /// `migration::adopt_node`). It runs before any step reads a node state, so the states
    /// parsed later start from the adopted keys, and read them as the node's: a stage the twin
    /// finished is not finished again by this plan.
    pub(super) fn adopt(&mut self, name: &str, edit: &NodeEdit) {
        self.apply_edit(edit);
        self.adopted.push(name.to_owned());
    }

    /// Applies a migration's edit of the node's keys (an adoption, or a prune, which edits
    /// only the keys of a group whose states no step reads).
    pub(super) fn apply_edit(&mut self, edit: &NodeEdit) {
        for (key, value) in &edit.set_annotations {
            set_entry(&mut self.annotations, key, value);
        }
        for key in &edit.remove_annotations {
            remove_entry(&mut self.annotations, key);
        }
        for (key, value) in &edit.set_labels {
            set_entry(&mut self.labels, key, value);
        }
        for key in &edit.remove_labels {
            remove_entry(&mut self.labels, key);
        }
        let held = |type_: &String| self.condition(type_).is_some();
        if edit.remove_conditions.iter().any(held) {
            let conditions = self.conditions_mut();
            for type_ in &edit.remove_conditions {
                conditions.remove(type_);
            }
        }
    }

    /// Cordons the node for `skyhook`, recording ownership and when; a drain that failed
    /// before is being tried again, so its mark goes.
    pub(super) fn cordon(&mut self, skyhook: &str, now: &str) {
        let keys = self.keys_of(skyhook);
        remove_entry(
            &mut self.annotations,
            &keys.drain_failed_annotation(skyhook),
        );
        set_entry(
            &mut self.annotations,
            &keys.cordon_annotation(skyhook),
            "true",
        );
        let cordoned_at = keys.cordoned_at_annotation(skyhook);
        if !self.annotations.contains_key(&cordoned_at) {
            set_entry(&mut self.annotations, &cordoned_at, now);
        }
        self.unschedulable = true;
    }

    /// Marks a drain of `skyhook` that timed out with `onTimeout: fail` (see
    /// `skyhook_api::budget::slot`).
    pub(super) fn mark_drain_failed(&mut self, skyhook: &str, now: &str) {
        let keys = self.keys_of(skyhook);
        set_entry(
            &mut self.annotations,
            &keys.drain_failed_annotation(skyhook),
            now,
        );
    }

    /// Cordons the node when the runtime-required taint is removed from it, marked with the
    /// runtime-required cordon annotation of `keys`' group (the group of the workload asking
    /// for it) so that no workload's release uncordons it.
    pub(super) fn cordon_runtime_required(&mut self, keys: &Keys) {
        set_entry(
            &mut self.annotations,
            keys.runtime_required_cordon_annotation,
            "true",
        );
        self.unschedulable = true;
    }

    /// Releases `skyhook`'s cordon; the node becomes schedulable only when nothing else holds
    /// a cordon on it (`skyhook_api::node_keys::cordon_held`). Does nothing when `skyhook` holds none, so a cordon
    /// someone else set (an administrator's, found before ours) stays.
    pub(super) fn release_cordon(&mut self, skyhook: &str) {
        let keys = self.keys_of(skyhook);
        let cordon = keys.cordon_annotation(skyhook);
        if !self.annotations.contains_key(&cordon) {
            return;
        }
        remove_entry(&mut self.annotations, &cordon);
        remove_entry(&mut self.annotations, &keys.cordoned_at_annotation(skyhook));
        self.clear_drain(skyhook);
        if !cordon_held(self.annotations.as_ref(), self.owners) {
            self.unschedulable = false;
        }
    }

    /// Whether the node is cordoned by someone other than the Skyhooks (upstream v0.20's
    /// "foreign cordon"): unschedulable with no cordon any Skyhook holds. Such a node is
    /// drained without taking the cordon over, and left cordoned afterwards.
    pub(super) fn foreign_cordon(&self) -> bool {
        self.unschedulable && !cordon_held(self.annotations.as_ref(), self.owners)
    }

    /// Records when `skyhook`'s drain of the node started, unless it already has.
    pub(super) fn start_drain(&mut self, skyhook: &str, now: &str) {
        let keys = self.keys_of(skyhook);
        let key = keys.drain_start_annotation(skyhook);
        if !self.annotations.contains_key(&key) {
            set_entry(&mut self.annotations, &key, now);
        }
    }

    /// Records the pods that block `skyhook`'s drain of the node (JSON), or removes the record
    /// when none does.
    pub(super) fn set_drain_blocked(&mut self, skyhook: &str, blockers: Option<&str>) {
        let keys = self.keys_of(skyhook);
        let key = keys.drain_blocked_annotation(skyhook);
        match blockers {
            Some(json) => set_entry(&mut self.annotations, &key, json),
            None => remove_entry(&mut self.annotations, &key),
        }
    }

    /// Forgets `skyhook`'s drain of the node: drained, or released.
    pub(super) fn clear_drain(&mut self, skyhook: &str) {
        let keys = self.keys_of(skyhook);
        remove_entry(&mut self.annotations, &keys.drain_start_annotation(skyhook));
        remove_entry(
            &mut self.annotations,
            &keys.drain_blocked_annotation(skyhook),
        );
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
    pub(super) fn labels(&self) -> &PackedMap {
        &self.labels
    }

    /// The node's annotations as this plan leaves them so far, node states included; a node
    /// state that did not change keeps its text as read, and one that did not parse stays.
    pub(super) fn current_annotations(&self) -> BTreeMap<String, String> {
        let mut annotations = self.annotations.to_map();
        for (key, value) in self.state_annotations() {
            match value {
                Some(text) => annotations.insert(key, text),
                None => annotations.remove(&key),
            };
        }
        annotations
    }

    /// The node-state annotations as this plan leaves them, overriding `annotations`: its text
    /// as read when the state did not change (so an equal state written differently is not
    /// rewritten); a malformed one stays as it is. An empty state is `{}` where the annotation
    /// was, as upstream leaves it once the last package is uninstalled (absent means the
    /// Skyhook never touched the node, and tools wait for `{}`); it stays absent where it was,
    /// and goes when this plan reset the node.
    fn state_annotations(&self) -> impl Iterator<Item = (String, Option<String>)> + '_ {
        self.states
            .iter()
            .filter(|(skyhook, _)| !self.malformed.contains_key(skyhook))
            .map(|(skyhook, state)| {
                let key = self.keys_of(skyhook).node_state_annotation(skyhook);
                let text = if state.now.is_empty() {
                    let was_there = self.view.annotations.contains_key(&key);
                    (was_there && !state.reset).then(|| state.now.to_annotation())
                } else if state.read.as_ref() == Some(&state.now) && !state.legacy_times {
                    self.as_read(skyhook).get(&key).map(str::to_owned)
                } else {
                    Some(state.now.to_annotation())
                };
                (key, text)
            })
    }

    fn condition_types(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match &self.conditions {
            Some(conditions) => Box::new(conditions.keys().map(String::as_str)),
            None => Box::new(self.view.conditions.iter().map(|c| c.type_.as_str())),
        }
    }

    /// What differs from the node as read.
    pub(super) fn patch(&self) -> NodePatch {
        let mut annotations = match &self.annotations {
            Cow::Borrowed(_) => BTreeMap::new(),
            Cow::Owned(current) => diff(&self.view.annotations, current),
        };
        for (key, text) in self.state_annotations() {
            let read = self.view.annotations.get(&key);
            if text.as_deref() == read {
                annotations.remove(&key);
            } else {
                annotations.insert(key, text);
            }
        }
        let labels = match &self.labels {
            Cow::Borrowed(_) => BTreeMap::new(),
            Cow::Owned(current) => diff(&self.view.labels, current),
        };
        let (conditions, remove_conditions) = match &self.conditions {
            None => (Vec::new(), Vec::new()),
            Some(current) => (
                // Written only when status, reason or message differ from the node as read,
                // so a settled node costs no status write per reconcile.
                current
                    .values()
                    .filter(|condition| !self.view.conditions.contains(condition))
                    .cloned()
                    .collect(),
                self.view
                    .conditions
                    .iter()
                    .filter(|c| !current.contains_key(&c.type_))
                    .map(|c| c.type_.clone())
                    .collect(),
            ),
        };
        NodePatch {
            annotations,
            labels,
            unschedulable: (self.unschedulable != self.view.unschedulable)
                .then_some(self.unschedulable),
            taints: (self.taints != self.view.taints).then(|| self.taints.clone()),
            conditions,
            remove_conditions,
        }
    }
}

/// Sets `key` to `value` in `map`, copying a borrowed map only when that changes it.
fn set_entry(map: &mut Cow<'_, PackedMap>, key: &str, value: &str) {
    if map.get(key) != Some(value) {
        map.to_mut().insert(key, value);
    }
}

/// Removes `key` from `map`, copying a borrowed map only when it holds the key.
fn remove_entry(map: &mut Cow<'_, PackedMap>, key: &str) {
    if map.contains_key(key) {
        map.to_mut().remove(key);
    }
}

/// Keeps the entries whose key `keep` accepts, copying a borrowed map only when one goes.
fn retain_entries(map: &mut Cow<'_, PackedMap>, keep: impl Fn(&str) -> bool) {
    if !map.keys().all(&keep) {
        map.to_mut().retain(|key, _| keep(key));
    }
}

fn diff(old: &PackedMap, new: &PackedMap) -> BTreeMap<String, Option<String>> {
    let mut out: BTreeMap<String, Option<String>> = new
        .iter()
        .filter(|&(k, v)| old.get(k) != Some(v))
        .map(|(k, v)| (k.to_owned(), Some(v.to_owned())))
        .collect();
    out.extend(
        old.keys()
            .filter(|k| !new.contains_key(k))
            .map(|k| (k.to_owned(), None)),
    );
    out
}
