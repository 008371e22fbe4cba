//! The plain data every view is computed from, and small accessors over Kubernetes objects.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use skyhook_api::generation::Group;
use skyhook_api::v1alpha1::{DeploymentPolicy, Skyhook};

/// What the plugin read from the cluster. Views are pure functions of this.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The API group read: its objects are in `skyhooks` and `policies` (a NodeWright as the
    /// Skyhook of the same fields), and its keys are the ones read on nodes and pods.
    pub group: Group,
    /// Every Skyhook (every NodeWright, for the nodewright group).
    pub skyhooks: Vec<Skyhook>,
    /// Every node.
    pub nodes: Vec<Node>,
    /// Pods the views need: package pods in the operator namespace and pods on cordoned nodes.
    pub pods: Vec<Pod>,
    /// Every DeploymentPolicy.
    pub policies: Vec<DeploymentPolicy>,
    /// PodDisruptionBudgets, read when a drain may be waiting on them.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// When it was read: the `now` of estimates.
    pub read_at: Timestamp,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            group: Group::Skyhook,
            skyhooks: Vec::new(),
            nodes: Vec::new(),
            pods: Vec::new(),
            policies: Vec::new(),
            pdbs: Vec::new(),
            read_at: Timestamp::default(),
        }
    }
}

static NO_STRINGS: BTreeMap<String, String> = BTreeMap::new();

/// An object's name, empty when unset.
pub fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// A Skyhook's status as the operator reported it, `unknown` before it has.
pub fn reported_status(skyhook: &Skyhook) -> String {
    (skyhook.status.as_ref())
        .and_then(|s| s.status)
        .map_or("unknown", |s| s.as_str())
        .to_owned()
}

/// A node's labels.
pub fn labels(node: &Node) -> &BTreeMap<String, String> {
    node.metadata.labels.as_ref().unwrap_or(&NO_STRINGS)
}

/// A node's annotations.
pub fn annotations(node: &Node) -> &BTreeMap<String, String> {
    node.metadata.annotations.as_ref().unwrap_or(&NO_STRINGS)
}

/// A node's taints.
pub fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_deref())
        .unwrap_or_default()
}

/// Whether the node is cordoned.
pub fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|spec| spec.unschedulable)
        .unwrap_or(false)
}

/// A node's creation time.
pub fn created(node: &Node) -> Option<Timestamp> {
    node.metadata.creation_timestamp.as_ref().map(|time| time.0)
}

/// The node a pod runs on.
pub fn pod_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref())
}

/// A pod label.
pub fn pod_label<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(key))
        .map(String::as_str)
}

impl Cluster {
    /// The keys of the group read.
    pub fn keys(&self) -> &'static skyhook_api::keys::Keys {
        self.group.keys()
    }

    /// Whether `object` carries its group's pause annotation (`"true"`).
    pub fn paused(&self, object: &Skyhook) -> bool {
        annotation_is_true(object, self.keys().pause_annotation)
    }

    /// Whether `object` carries its group's disable annotation (`"true"`).
    pub fn disabled(&self, object: &Skyhook) -> bool {
        annotation_is_true(object, self.keys().disable_annotation)
    }

    /// The Skyhook called `name`.
    pub fn skyhook(&self, name: &str) -> Option<&Skyhook> {
        self.skyhooks
            .iter()
            .find(|skyhook| name_of(&skyhook.metadata) == name)
    }

    /// The DeploymentPolicy called `name`.
    pub fn policy(&self, name: &str) -> Option<&DeploymentPolicy> {
        self.policies
            .iter()
            .find(|policy| name_of(&policy.metadata) == name)
    }
}

fn annotation_is_true(object: &Skyhook, key: &str) -> bool {
    (object.metadata.annotations.as_ref())
        .and_then(|annotations| annotations.get(key))
        .is_some_and(|value| value == "true")
}
