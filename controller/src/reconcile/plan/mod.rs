//! The pure plan: from one [`Snapshot`], the configuration and the time, every write of one
//! reconcile (spec §2.2–§2.12).
//!
//! Contract: [`plan`] is synchronous, reads no clock and touches no client. Node bookkeeping is
//! computed on working copies of the nodes and returned as per-node patches of exactly what
//! changed, so a reconcile writes in proportion to what changed, never to cluster size. The
//! rules themselves live in `skyhook_api` (ordering, budget, stage, interrupt, status,
//! runtime_required, toleration) and in the controller's builders (`pods`, `configmaps`,
//! `drain`, `pod_match`); this module sequences them:
//!
//! 1. auto-taint new nodes (`taints`);
//! 2. turn pod outcomes into node-state edits, deletions and Events (`pod_results`, `reboots`);
//! 3. per Skyhook in (priority, name) order, one pass (`skyhooks`): admission (finalizer,
//!    validation), what changed since the last pass (`spec_changes`: reboots, version changes,
//!    pods that no longer match; `reboots`: lost interrupts; `configs`: ConfigMap changes), node
//!    statuses, the pure batch selection returning a `Selection` (`selection`), the packages of
//!    the selected nodes (`packages`) with cordon, drain and the wave's merged interrupt
//!    (`interrupts`), node conditions, and the pure next status (`status`);
//! 4. remove the runtime-required taint per node (`taints`); write the node-metadata ConfigMaps
//!    of the pods this plan starts, and turn the nodes' working copies (`work`) into patches.
//!
//! Deliberate choices: a drain's start is recorded in the node annotation `cordonedAt_<skyhook>`
//! ([`skyhook_api::keys::Keys::cordoned_at_annotation`], RFC 3339) so that the drain timeout survives
//! restarts; an invalidated pod is deleted at once rather than first annotated `invalid`.

mod configs;
mod deletion;
mod interrupts;
mod node_states;
mod packages;
mod planned_pod;
mod pod_results;
mod reboots;
mod selection;
mod skyhooks;
mod spec_changes;
mod status;
mod taints;
mod work;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Taint};
use skyhook_api::conditions::LongList;
use skyhook_api::pod_owner::{PodFate, PodOwner, deletion_awaits, pod_fate};
use skyhook_api::resources::CpuMemory;
use skyhook_api::runtime_required::has_taint;
use skyhook_api::transition::FinishedStage;
use skyhook_api::v1alpha1::{Skyhook, SkyhookStatus};

use crate::config::Config;
use crate::pod_match::ExpectedContainers;
use crate::pod_outcome::PodOutcome;

use super::snapshot::{NodeConditionView, NodeView, OwnedPod, Snapshot};
pub use planned_pod::PlannedPod;
use work::NodeWork;

/// How often a reconcile looks again at a node that is being drained or held by protected
/// pods: workload pods are not watched, so their departure wakes nothing.
pub const DRAIN_POLL: Duration = Duration::from_secs(5);

/// Every write of one reconcile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Per node, what changes (only nodes with a change).
    pub nodes: BTreeMap<String, NodePatch>,
    /// Pods to create, after the ConfigMaps.
    pub create_pods: Vec<PlannedPod>,
    /// Pods to delete, by name in the controller's namespace, with why.
    pub delete_pods: BTreeMap<String, String>,
    /// Evictions to request.
    pub evictions: Vec<Eviction>,
    /// ConfigMaps to create or replace.
    pub upsert_configmaps: Vec<ConfigMap>,
    /// ConfigMaps to delete, by name in the controller's namespace.
    pub delete_configmaps: BTreeSet<String>,
    /// Skyhook statuses to write (only those that changed), by Skyhook name.
    pub statuses: BTreeMap<String, SkyhookStatus>,
    /// Finalizer changes, by Skyhook name: `true` adds, `false` removes.
    pub finalizers: BTreeMap<String, bool>,
    /// Annotations to set on Skyhooks (the controller version), by Skyhook name.
    pub skyhook_annotations: BTreeMap<String, BTreeMap<String, String>>,
    /// Events to emit.
    pub events: Vec<PlannedEvent>,
    /// Look again after this long even if nothing changes; `None` when only watches matter.
    pub requeue_after: Option<Duration>,
    /// Node-state annotations that did not parse, whose nodes their Skyhook skips, for the log
    /// (each also has a Warning Event on its node).
    pub malformed_states: Vec<MalformedNodeState>,
    /// Node lists too long for the condition messages of the Skyhook named first, for the log;
    /// only when that Skyhook's status changes.
    pub long_node_lists: Vec<(String, LongList)>,
    /// Stage attempts this plan finished, for `skyhook_package_stage_duration_seconds`: the
    /// apply step records those whose node patch landed, so a refused patch, planned again,
    /// is counted once.
    pub stage_durations: Vec<StageDuration>,
}

#[cfg(test)]
impl Plan {
    /// The pods to create, decoded.
    pub(crate) fn created_pods(&self) -> Vec<Pod> {
        (self.create_pods.iter())
            .map(|pod| pod.pod().expect("a planned pod decodes"))
            .collect()
    }
}

/// A stage attempt that finished on a node.
#[derive(Debug, Clone, PartialEq)]
pub struct StageDuration {
    /// The node whose patch carries the transition.
    pub node: String,
    /// The Skyhook.
    pub skyhook: String,
    /// The package, stage and duration.
    pub finished: FinishedStage,
}

/// A `nodeState_<skyhook>` annotation that did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedNodeState {
    /// The node.
    pub node: String,
    /// The Skyhook.
    pub skyhook: String,
    /// The parse error.
    pub error: String,
}

/// Reason of the Warning Event on a node whose node state did not parse; upstream's condition
/// for the same defect is named `NodeStateMalformed` too.
pub const NODE_STATE_MALFORMED_REASON: &str = "NodeStateMalformed";

/// What changes on one node. `None` values remove the key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePatch {
    /// Annotations to set (`Some`) or remove (`None`).
    pub annotations: BTreeMap<String, Option<String>>,
    /// Labels to set (`Some`) or remove (`None`).
    pub labels: BTreeMap<String, Option<String>>,
    /// New `spec.unschedulable`.
    pub unschedulable: Option<bool>,
    /// The node's complete taint list after the change, when it changed.
    pub taints: Option<Vec<Taint>>,
    /// Node conditions to set: only those that differ from the node as read.
    pub conditions: Vec<NodeConditionView>,
    /// Node condition types to remove (a deleted Skyhook's).
    pub remove_conditions: Vec<String>,
}

impl NodePatch {
    /// Whether the patch takes the node into a Skyhook's work: it cordons the node or sets a
    /// Skyhook's node status (label `status_<skyhook>`) to `in_progress`.
    pub fn takes_node(&self) -> bool {
        let status_prefix = skyhook_api::keys::SKYHOOK.node_status_key("");
        self.unschedulable == Some(true)
            || self.labels.iter().any(|(key, value)| {
                key.starts_with(&status_prefix)
                    && value.as_deref() == Some(skyhook_api::v1alpha1::Status::InProgress.as_str())
            })
    }

    fn is_empty(&self) -> bool {
        self.annotations.is_empty()
            && self.labels.is_empty()
            && self.unschedulable.is_none()
            && self.taints.is_none()
            && self.conditions.is_empty()
            && self.remove_conditions.is_empty()
    }
}

/// The order the node patches of a plan are written in: `(others, takes)`, each by node name.
/// A plan that finishes one node (complete, uncordoned) and picks the next in the same reconcile
/// must never hold both at once, or a compartment briefly has more nodes busy than its ceiling:
/// so every patch that takes a node ([`NodePatch::takes_node`]) comes after all the others, and
/// the apply step writes the takes only when all the others landed (a release refused with 409
/// because the node changed under the plan leaves its node busy until the next reconcile).
pub fn node_write_order(nodes: &BTreeMap<String, NodePatch>) -> (Vec<&str>, Vec<&str>) {
    let (takes, others): (Vec<&str>, Vec<&str>) = nodes
        .keys()
        .map(String::as_str)
        .partition(|name| nodes.get(*name).is_some_and(NodePatch::takes_node));
    (others, takes)
}

/// An eviction through the Eviction API.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Eviction {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The node being drained.
    pub node: String,
    /// `spec.drain.gracePeriodSeconds`; `None` leaves the pod's own.
    pub grace_period_seconds: Option<i64>,
}

/// What an Event is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EventTarget {
    /// A Node, by name.
    Node(String),
    /// A Skyhook, by name.
    Skyhook(String),
}

/// An Event to emit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlannedEvent {
    /// The object.
    pub target: EventTarget,
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// Upstream's reasons: `Apply`, `Interrupt`, `State`, `Reboot`; ours: `DrainBlocked`.
    pub reason: &'static str,
    /// A sentence.
    pub message: String,
}

/// The controller's pods the snapshot holds on one node, being deleted or not (they hold their
/// share of the node until they are gone), and what those with readable requests request. A
/// pod the kubelet refused holds its place among them but none of the node's resources.
#[derive(Debug, Default)]
struct PodsOnNode<'s> {
    pods: Vec<&'s OwnedPod>,
    requests: CpuMemory,
}

/// The snapshot's pods by node, read once per plan: the per-node questions of a plan (is a pod
/// of this package there, may one more start) then cost the node's pods, not the cluster's.
fn pods_per_node(snapshot: &Snapshot) -> HashMap<&str, PodsOnNode<'_>> {
    let mut per_node: HashMap<&str, PodsOnNode<'_>> = HashMap::new();
    for pod in &snapshot.pods {
        let requests = pod
            .pod
            .spec
            .as_ref()
            .filter(|_| !matches!(pod.outcome, PodOutcome::Rejected { .. }))
            .and_then(|spec| spec.requests)
            .unwrap_or_default();
        let on_node = per_node.entry(pod.node.as_str()).or_default();
        on_node.pods.push(pod);
        on_node.requests = on_node.requests.plus(requests);
    }
    per_node
}

/// Where the Skyhook each of the snapshot's pods works for stands, by pod name (see
/// [`skyhook_api::pod_owner`]). A pod names its Skyhook by label and, when the operator made
/// it, by an owner reference: an owner reference to another UID than the Skyhook of its name
/// (or to a Skyhook no longer there) means its Skyhook is gone; no owner reference and no
/// Skyhook means a pod made by hand.
fn pod_owners(snapshot: &Snapshot) -> HashMap<&str, PodOwner> {
    let skyhooks: HashMap<&str, &Skyhook> = (snapshot.skyhooks.iter())
        .filter_map(|s| Some((s.metadata.name.as_deref()?, &**s)))
        .collect();
    let owner = |pod: &OwnedPod| {
        let owner_uid = (pod.pod.metadata.owner_references.iter().flatten())
            .find(|reference| reference.kind == "Skyhook")
            .map(|reference| reference.uid.as_str());
        let Some(skyhook) = skyhooks.get(pod.skyhook.as_str()) else {
            return match owner_uid {
                Some(_) => PodOwner::Gone,
                None => PodOwner::Unowned,
            };
        };
        if owner_uid.is_some_and(|uid| Some(uid) != skyhook.metadata.uid.as_deref()) {
            PodOwner::Gone
        } else if skyhook.metadata.deletion_timestamp.is_some() {
            let awaited = deletion_awaits(&skyhook.spec.packages, pod.annotation.as_ref());
            PodOwner::Deleting { awaited }
        } else {
            PodOwner::Live
        }
    };
    (snapshot.pods.iter())
        .map(|pod| (pod.name.as_str(), owner(pod)))
        .collect()
}

/// Computes the plan of one reconcile.
pub fn plan(snapshot: &Snapshot, config: &Config, now: Timestamp) -> Plan {
    let mut planner = Planner::new(snapshot, config, now);
    // Steps in order; each Skyhook's pass reads what the steps before it left on the nodes.
    planner.auto_taint();
    planner.pod_results();
    planner.skyhooks();
    planner.runtime_required();
    planner.finish()
}

/// The working state of one plan.
struct Planner<'s> {
    snapshot: &'s Snapshot,
    config: &'s Config,
    now: Timestamp,
    nodes: BTreeMap<&'s str, NodeWork<'s>>,
    plan: Plan,
    /// Per (skyhook, node): complete after this plan's edits (runtime-required removal).
    completion: BTreeMap<(String, String), bool>,
    /// Pods created by this plan, per node.
    created_on: BTreeMap<String, Vec<(String, String)>>,
    /// Per node, the controller's pods in the snapshot.
    pods_on: HashMap<&'s str, PodsOnNode<'s>>,
    /// Where the Skyhook of each pod in the snapshot stands, by pod name.
    pod_owners: HashMap<&'s str, PodOwner>,
    /// The Events of [`Plan::events`], to add each once without searching the list.
    events_planned: HashSet<PlannedEvent>,
    /// The init containers each package's pods must run, for validating pods.
    expected_containers: ExpectedContainers,
    /// Per node, the requests of the package pods this plan creates.
    created_requests: BTreeMap<String, CpuMemory>,
    /// Pods this plan deletes because they succeeded.
    succeeded: BTreeSet<String>,
    /// (Skyhook, node) pairs a package pod starts on: [`Planner::finish`] brings their
    /// node-metadata ConfigMaps up to date with the node as this plan leaves it.
    metadata_due: BTreeSet<(String, String)>,
    /// Per Skyhook, per node: reboots found not confirmed in time by `pod_results`; each
    /// Skyhook's pass takes its own into its status.
    unconfirmed_reboots: BTreeMap<String, BTreeMap<String, reboots::UnconfirmedReboot>>,
    /// (Skyhook, node) pairs this plan cordons and drains, which `spec.onFailure.uncordon`
    /// leaves cordoned.
    draining: BTreeSet<(String, String)>,
}

impl<'s> Planner<'s> {
    fn new(snapshot: &'s Snapshot, config: &'s Config, now: Timestamp) -> Self {
        Planner {
            snapshot,
            config,
            now,
            nodes: snapshot
                .nodes
                .iter()
                .map(|n| (n.name.as_str(), NodeWork::new(n)))
                .collect(),
            plan: Plan::default(),
            completion: BTreeMap::new(),
            created_on: BTreeMap::new(),
            pods_on: pods_per_node(snapshot),
            pod_owners: pod_owners(snapshot),
            events_planned: HashSet::new(),
            expected_containers: ExpectedContainers::default(),
            created_requests: BTreeMap::new(),
            succeeded: BTreeSet::new(),
            metadata_due: BTreeSet::new(),
            unconfirmed_reboots: BTreeMap::new(),
            draining: BTreeSet::new(),
        }
    }

    fn requeue(&mut self, after: Duration) {
        self.plan.requeue_after = Some(self.plan.requeue_after.map_or(after, |d| d.min(after)));
    }

    /// Adds an Event unless this plan already emits the same one.
    fn event(&mut self, target: EventTarget, warning: bool, reason: &'static str, message: String) {
        let event = PlannedEvent {
            target,
            warning,
            reason,
            message,
        };
        if self.events_planned.insert(event.clone()) {
            self.plan.events.push(event);
        }
    }

    /// `pod` as the plan holds it until the apply sends it; `None`, with a Warning Event on
    /// Skyhook `skyhook`, if it does not serialize (no pod the builders make fails to).
    fn planned_pod(&mut self, skyhook: &str, pod: &Pod) -> Option<PlannedPod> {
        match PlannedPod::new(pod) {
            Ok(planned) => Some(planned),
            Err(error) => {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let message = format!("pod {name} could not be serialized: {error}");
                self.event(
                    EventTarget::Skyhook(skyhook.to_owned()),
                    true,
                    "Apply",
                    message,
                );
                None
            }
        }
    }

    fn delete_pod(&mut self, name: &str, why: impl Into<String>) {
        self.plan
            .delete_pods
            .entry(name.to_owned())
            .or_insert_with(|| why.into());
    }

    /// Whether a pod of `skyhook` labelled `package_label` is on `node`. A pod this plan
    /// deletes because it succeeded no longer counts (the next stage's pod has another name);
    /// any other pod being deleted still does, so a replacement with the same name waits for
    /// it to be gone.
    fn pod_exists(&self, skyhook: &str, node: &str, package_label: &str) -> bool {
        self.snapshot_pods_on(node).any(|p| {
            p.skyhook == skyhook
                && p.package_label == package_label
                && !self.succeeded.contains(&p.name)
        }) || self.created_on.get(node).is_some_and(|created| {
            created
                .iter()
                .any(|(s, label)| s == skyhook && label == package_label)
        })
    }

    /// Whether a pod of `skyhook` is on `node`, including those this plan deletes or creates.
    fn skyhook_pod_on(&self, skyhook: &str, node: &str) -> bool {
        self.snapshot_pods_on(node).any(|p| p.skyhook == skyhook)
            || self
                .created_on
                .get(node)
                .is_some_and(|created| created.iter().any(|(s, _)| s == skyhook))
    }

    /// Where the Skyhook `pod` works for stands. Every pod of the snapshot has an entry; one
    /// without would be taken as wanted, which deletes nothing.
    fn owner_of(&self, pod: &OwnedPod) -> PodOwner {
        (self.pod_owners.get(pod.name.as_str()).copied()).unwrap_or(PodOwner::Live)
    }

    /// What becomes of `pod` whatever its status says (see [`skyhook_api::pod_owner`]).
    fn fate_of(&self, pod: &OwnedPod) -> PodFate {
        pod_fate(self.owner_of(pod), pod.deleting)
    }

    /// Whether a pod on `node` holds its interrupts: one a live Skyhook still wants, including
    /// those this plan deletes (they are still running until they are gone), one a deletion
    /// waits for, or one this plan creates. The pods of a Skyhook that is gone, or of one
    /// being deleted that the deletion does not wait for, hold nothing: nobody wants them, and
    /// they are removed.
    fn pods_hold_interrupts(&self, node: &str) -> bool {
        skyhook_api::pod_owner::pods_hold_interrupts(
            self.snapshot_pods_on(node).map(|pod| self.fate_of(pod)),
        ) || self.created_on.get(node).is_some_and(|c| !c.is_empty())
    }

    /// The controller's pods the snapshot holds on `node`.
    fn snapshot_pods_on(&self, node: &str) -> impl Iterator<Item = &'s OwnedPod> + '_ {
        self.pods_on
            .get(node)
            .into_iter()
            .flat_map(|on_node| on_node.pods.iter().copied())
    }

    /// How many of the controller's pods are on `node`, all Skyhooks together: those in the
    /// snapshot, including the ones being deleted, and those this plan creates.
    fn pod_count(&self, node: &str) -> usize {
        self.pods_on
            .get(node)
            .map_or(0, |on_node| on_node.pods.len())
            + self.created_on.get(node).map_or(0, Vec::len)
    }

    /// Whether a package pod requesting `requests` may start on `node` now: fewer than
    /// `MAX_PODS_PER_NODE` of the controller's pods are there, and, when the node reports its
    /// allocatable CPU and memory, the requests of those pods plus this one fit in it. Workload
    /// pods are not cached, so the kubelet may still refuse a pod that passes; that rejection is
    /// retried (`pod_results`). A pod that would not fit the node even alone is not held back:
    /// waiting could never make room, so it starts and the kubelet's refusal is reported as a
    /// failure rather than waited on silently.
    fn has_pod_slot(&self, node: &str, requests: CpuMemory) -> bool {
        let count = self.pod_count(node);
        if count >= self.config.max_pods_per_node {
            return false;
        }
        let Some(allocatable) = self.view_of(node).and_then(|view| view.allocatable) else {
            return true;
        };
        if count == 0 || !self.can_ever_fit(node, requests) {
            return true;
        }
        let held = self
            .pods_on
            .get(node)
            .map_or_else(CpuMemory::default, |on_node| on_node.requests);
        let created = self.created_requests.get(node).copied().unwrap_or_default();
        held.plus(created).plus(requests).fits_within(allocatable)
    }

    /// Whether `requests` fit the node's allocatable CPU and memory with nothing else on it
    /// (true when the node does not report them). A pod that does not is refused by the kubelet
    /// and never holds any of the node's resources.
    fn can_ever_fit(&self, node: &str, requests: CpuMemory) -> bool {
        self.view_of(node)
            .and_then(|view| view.allocatable)
            .is_none_or(|allocatable| requests.fits_within(allocatable))
    }

    fn view_of(&self, node: &str) -> Option<&'s NodeView> {
        self.nodes.get(node).map(|work| work.view)
    }

    /// Taints the nodes no Skyhook has touched yet, for Skyhooks asking for it.
    fn auto_taint(&mut self) {
        let taint = &self.config.pods.runtime_required_taint;
        let marker = skyhook_api::keys::SKYHOOK.auto_taint_annotation(&taint.key);
        for node in taints::nodes_to_auto_taint(self.snapshot, taint) {
            if let Some(work) = self.nodes.get_mut(node) {
                work.add_taint(taint);
                work.set_annotation(marker.clone(), "true".to_owned());
            }
        }
    }

    /// Removes the runtime-required taint from each node on which every runtime-required
    /// Skyhook targeting it is complete.
    fn runtime_required(&mut self) {
        let taint = &self.config.pods.runtime_required_taint;
        for node in taints::runtime_taint_removable_nodes(self.snapshot, &self.completion) {
            if let Some(work) = self.nodes.get_mut(node)
                && has_taint(&work.taints, taint)
            {
                work.remove_taint(taint);
            }
        }
    }

    fn finish(mut self) -> Plan {
        self.report_malformed_states();
        for (skyhook, node) in std::mem::take(&mut self.metadata_due) {
            self.node_metadata(&skyhook, &node);
        }
        for (name, work) in &self.nodes {
            let patch = work.patch();
            if !patch.is_empty() {
                self.plan.nodes.insert((*name).to_owned(), patch);
            }
        }
        self.plan.evictions.sort();
        self.plan.evictions.dedup();
        self.plan
    }

    /// A node state that did not parse makes its Skyhook skip the node: say so on the node,
    /// so the stalled node has a visible cause. Repeats fold into one Event series per distinct
    /// parse error. The wording follows upstream's `NodeStateMalformed` condition.
    fn report_malformed_states(&mut self) {
        let malformed: Vec<MalformedNodeState> = self
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
            self.event(
                EventTarget::Node(m.node.clone()),
                true,
                NODE_STATE_MALFORMED_REASON,
                format!(
                    "nodeState annotation {} cannot be parsed: {}; Skyhook [{}] skips this node until the annotation is repaired or deleted",
                    skyhook_api::keys::SKYHOOK.node_state_annotation(&m.skyhook),
                    m.error,
                    m.skyhook
                ),
            );
        }
        self.plan.malformed_states = malformed;
    }
}
