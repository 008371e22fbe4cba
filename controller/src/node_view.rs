//! What the rules read of a Node ([`NodeView`]), reduced from the Node once when the cache
//! stores it. Below both the cache, which stores views, and the reconcile, which reads them.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeStatus, Taint};
use skyhook_api::generation::Group;
use skyhook_api::readiness::KUBELET_CONDITIONS;
use skyhook_api::resources::{CpuMemory, cpu_memory};
use skyhook_api::string_map::PackedMap;

/// A node condition as the plan reads and writes it (the times are the apply step's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeConditionView {
    /// `type`.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `reason`, empty when absent.
    pub reason: String,
    /// `message`, empty when absent.
    pub message: String,
}

/// A node condition of someone else (a GPU validator, node-problem-detector), as the
/// readiness gates read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignCondition {
    /// `type`.
    pub type_: String,
    /// `status` is `True`.
    pub true_: bool,
    /// `lastTransitionTime`.
    pub last_transition: Option<Timestamp>,
}

/// What the rules read of a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeView {
    /// Node name.
    pub name: String,
    /// Labels, packed: the cache holds every node's view for as long as it runs.
    pub labels: PackedMap,
    /// Annotations, packed like the labels.
    pub annotations: PackedMap,
    /// Taints.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// `metadata.creationTimestamp`.
    pub created: Option<Timestamp>,
    /// `status.nodeInfo.bootID`.
    pub boot_id: Option<String>,
    /// The kubelet's `Ready` condition is True.
    pub ready: bool,
    /// When the `Ready` condition last left True, while it is not True.
    pub not_ready_since: Option<Timestamp>,
    /// When the `Ready` condition last turned True, while it is True.
    pub ready_since: Option<Timestamp>,
    /// The node's conditions of the workloads of either group
    /// ([`skyhook_api::keys::Keys::is_skyhook_node_condition`]): the plan
    /// writes no other, and reads of the kubelet's only `ready` and its transitions.
    pub conditions: Vec<NodeConditionView>,
    /// The node's other conditions, neither the kubelet's nor a Skyhook's or NodeWright's:
    /// what `spec.readinessGates` wait for.
    pub foreign_conditions: Vec<ForeignCondition>,
    /// `status.allocatable` CPU and memory; `None` unless the node reports both, readably.
    pub allocatable: Option<CpuMemory>,
    /// `metadata.resourceVersion` as read: node patches planned from this view are made
    /// conditional on it, so a concurrent edit (an administrator deleting the node state) is
    /// never overwritten with stale bookkeeping.
    pub resource_version: Option<String>,
}

/// Reduces a Node to a [`NodeView`].
pub fn node_view(node: Node) -> NodeView {
    let Node {
        metadata,
        spec,
        status,
    } = node;
    let ready_since = ready_transition(status.as_ref(), true);
    let not_ready_since = ready_transition(status.as_ref(), false);
    let (conditions, boot_id, allocatable) = match status {
        Some(status) => (
            status.conditions.unwrap_or_default(),
            status.node_info.map(|info| info.boot_id),
            status.allocatable,
        ),
        None => (Vec::new(), None, None),
    };
    let ready = conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let (conditions, foreign): (Vec<_>, Vec<_>) = conditions
        .into_iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .partition(|c| {
            (Group::ALL.iter()).any(|group| group.keys().is_skyhook_node_condition(&c.type_))
        });
    let conditions: Vec<NodeConditionView> = conditions
        .into_iter()
        .map(|c| NodeConditionView {
            type_: c.type_,
            status: c.status,
            reason: c.reason.unwrap_or_default(),
            message: c.message.unwrap_or_default(),
        })
        .collect();
    let foreign_conditions = foreign
        .into_iter()
        .map(|c| ForeignCondition {
            true_: c.status == "True",
            type_: c.type_,
            last_transition: c.last_transition_time.map(|t| t.0),
        })
        .collect();
    let (taints, unschedulable) = match spec {
        Some(spec) => (spec.taints.unwrap_or_default(), spec.unschedulable),
        None => (Vec::new(), None),
    };
    NodeView {
        name: metadata.name.unwrap_or_default(),
        labels: metadata.labels.map(PackedMap::from).unwrap_or_default(),
        annotations: metadata
            .annotations
            .map(PackedMap::from)
            .unwrap_or_default(),
        taints,
        unschedulable: unschedulable.unwrap_or(false),
        created: metadata.creation_timestamp.map(|t| t.0),
        boot_id: boot_id.filter(|id| !id.is_empty()),
        ready,
        not_ready_since,
        ready_since,
        conditions,
        foreign_conditions,
        allocatable: allocatable
            .filter(|list| list.contains_key("cpu") && list.contains_key("memory"))
            .and_then(|list| cpu_memory(&list).ok()),
        resource_version: metadata.resource_version,
    }
}

/// When the `Ready` condition last changed, while it is True (`ready`) or not.
fn ready_transition(status: Option<&NodeStatus>, ready: bool) -> Option<Timestamp> {
    status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
        .filter(|condition| (condition.status == "True") == ready)
        .and_then(|condition| condition.last_transition_time.as_ref())
        .map(|time| time.0)
}
