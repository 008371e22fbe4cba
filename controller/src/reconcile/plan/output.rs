//! What one plan returns: the writes of a reconcile ([`Plan`]) and the types its parts are
//! made of, with the names of the conditions and requeues the planner's steps share. A leaf:
//! every step writes into these, and the apply step reads them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use skyhook_api::conditions::LongList;
use skyhook_api::transition::FinishedStage;
use skyhook_api::v1alpha1::SkyhookStatus;

use super::planned_pod::PlannedPod;
use crate::last_logs::LastLogs;
use crate::reconcile::snapshot::{Leftover, NodeConditionView};

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
    /// Pods pulling a node's images before its cordon, to create (bare pods).
    pub create_pre_pulls: Vec<Pod>,
    /// Pods to delete (bare pods of an earlier release, a Job's attempts), by name in the
    /// controller's namespace, with why.
    pub delete_pods: BTreeMap<String, String>,
    /// Stage Jobs to delete with their pods, by name in the controller's namespace, with why.
    pub delete_jobs: BTreeMap<String, String>,
    /// Stage Jobs whose end this plan records, with the TTL to set (seconds).
    pub record_jobs: BTreeMap<String, i32>,
    /// Stage Jobs to suspend (`true`) or resume (`false`).
    pub suspend_jobs: BTreeMap<String, bool>,
    /// Interrupt Jobs whose restart allowance is spent, with the restart count that spent it.
    pub restart_limits: BTreeMap<String, i32>,
    /// Stage Jobs stuck at `FailureTarget` whose `last-logs` annotation the apply step writes,
    /// with what it holds (the logs to read, or the text).
    pub last_logs: BTreeMap<String, LastLogs>,
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
    /// Annotations to set (`Some`) or remove on the live objects (the controller version, a
    /// migration's `legacy-migrated-at`), by name.
    pub skyhook_annotations: BTreeMap<String, BTreeMap<String, Option<String>>>,
    /// Writes to inert twins, by name (a name has at most one).
    pub twins: BTreeMap<String, TwinWrite>,
    /// Package ConfigMaps a twin made, moved to their name's live object, by ConfigMap name.
    pub move_configmaps: BTreeMap<String, ConfigMapMove>,
    /// What twins left that goes (finished Jobs, ended pods, node-metadata ConfigMaps), each
    /// deleted only while it is the very object read.
    pub delete_leftovers: Vec<Leftover>,
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
    /// Nodes this plan adds the runtime-required taint to (a new node, or a node reset by a
    /// reboot), with the taint as `key=value:Effect`: a refused node patch is reported on the
    /// node with a Warning Event `AutoTaint`.
    pub auto_taints: BTreeMap<String, String>,
    /// (Skyhook, node) pairs whose node state this plan reset after a reboot
    /// (`REAPPLY_ON_REBOOT`): the Skyhook's work on the node starts over, so whatever still runs
    /// there for it (its Jobs) must go.
    pub reboot_resets: BTreeSet<(String, String)>,
    /// Stage attempts this plan finished, for `skyhook_package_stage_duration_seconds`: the
    /// apply step records those whose node patch landed, so a refused patch, planned again,
    /// is counted once.
    pub stage_durations: Vec<StageDuration>,
    /// The (Skyhook, node) pairs that pods matching `podNonInterruptLabels` hold in this plan.
    /// The reconcile loop hands their keys to the next plan, which announces only the nodes
    /// newly held, and logs the pods of those announced here.
    pub non_interrupt_holds: BTreeMap<(String, String), NonInterruptHold>,
}

/// Pods matching `podNonInterruptLabels` hold a node: what waits, and for which pods.
/// What a plan writes to an inert twin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TwinWrite {
    /// Its new status (its `Migrated` condition), when that changed.
    pub status: Option<SkyhookStatus>,
    /// It is being deleted: its finalizer goes, and nothing else is done for it.
    pub remove_finalizer: bool,
}

/// One package ConfigMap moving to its name's live object: a metadata merge patch.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigMapMove {
    /// Labels to set (`Some`) or remove: the old group's moved under the new prefix.
    pub labels: BTreeMap<String, Option<String>>,
    /// Its owner references as they become: the twin's replaced by the live object as
    /// controller, so that deleting the twin no longer collects it.
    pub owner_references: Vec<OwnerReference>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonInterruptHold {
    /// The package waiting, `<name>:<version>`.
    pub package: String,
    /// The protected pods, `<namespace>/<name>`, sorted.
    pub pods: Vec<String>,
    /// This plan announces the hold (a Warning Event on the node): it is new.
    pub announced: bool,
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
        let status_prefixes =
            (skyhook_api::generation::Group::ALL).map(|group| group.keys().node_status_key(""));
        self.unschedulable == Some(true)
            || self.labels.iter().any(|(key, value)| {
                status_prefixes.iter().any(|prefix| key.starts_with(prefix))
                    && value.as_deref() == Some(skyhook_api::v1alpha1::Status::InProgress.as_str())
            })
    }

    pub(super) fn is_empty(&self) -> bool {
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
    /// The drain's grace period in seconds; `None` leaves the pod's own.
    pub grace_period_seconds: Option<i64>,
    /// Delete the pod instead of evicting it (`drainConfig.disableEviction`): no
    /// PodDisruptionBudget is consulted.
    pub delete: bool,
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
    /// The reason, from the table of kinds (`event_kinds`).
    pub reason: &'static str,
    /// The action, from the same table: upstream's where upstream has the Event.
    pub action: &'static str,
    /// A sentence.
    pub message: String,
}
