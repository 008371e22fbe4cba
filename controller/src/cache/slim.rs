//! Nodes as the cache holds them, decoded without what the controller never reads.
//!
//! A real Node is 10-40 KB of JSON, most of it `managedFields`, the image list and the system
//! info; the controller reads a few hundred bytes of it. Decoding the whole object and trimming
//! it afterwards allocates all of it on every watch event and leaves the kept parts scattered
//! among the freed ones, so the allocator cannot give the pages back. A Node is decoded from
//! only the kept fields (serde skips the rest of the JSON without allocating it): the metadata
//! without `managedFields` (labels and annotations whole: the node-metadata ConfigMaps copy
//! them), the taints and `unschedulable`, the conditions, the boot ID and the allocatable CPU
//! and memory. That is read at once into the [`NodeView`] the plan, the trigger and the
//! metrics read, which [`CachedNode`] holds: every snapshot shares it instead of reading the
//! node again (1,000 realistic nodes' views were 7.6 MiB, copied into every reconcile).
//!
//! The controller's own pods are decoded the same way, into types of their own
//! ([`super::pod`]).

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

use crate::node_view::{NodeView, node_view};

/// A Node as the cache holds it: what the plan reads of it ([`NodeView`]), read once per
/// version of the Node and shared with every snapshot taken while it is current, and the
/// identity the watch needs.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedNode {
    /// Name, uid, resource version and creation time only: everything else is in `view`, and
    /// this field is private so that nothing reads labels or annotations from here.
    metadata: ObjectMeta,
    view: Arc<NodeView>,
}

impl CachedNode {
    /// What the plan reads of the node.
    pub fn view(&self) -> &Arc<NodeView> {
        &self.view
    }
}

impl Deref for CachedNode {
    type Target = NodeView;

    fn deref(&self) -> &NodeView {
        &self.view
    }
}

impl From<Node> for CachedNode {
    fn from(node: Node) -> Self {
        let metadata = ObjectMeta {
            name: node.metadata.name.clone(),
            uid: node.metadata.uid.clone(),
            resource_version: node.metadata.resource_version.clone(),
            creation_timestamp: node.metadata.creation_timestamp.clone(),
            ..ObjectMeta::default()
        };
        CachedNode {
            metadata,
            view: Arc::new(node_view(node)),
        }
    }
}

resource_of!(CachedNode, Node);

impl<'de> Deserialize<'de> for CachedNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireNode::deserialize(deserializer)?;
        Ok(CachedNode::from(wire.into_node()))
    }
}

/// The kept fields of a Node's JSON; serde ignores every other field.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNode {
    #[serde(default)]
    metadata: WireMeta,
    spec: Option<WireSpec>,
    status: Option<WireStatus>,
}

/// `ObjectMeta` without `managedFields`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireMeta {
    name: Option<String>,
    generate_name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
    finalizers: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    taints: Option<Vec<Taint>>,
    unschedulable: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    conditions: Option<Vec<NodeCondition>>,
    node_info: Option<WireNodeInfo>,
    allocatable: Option<BTreeMap<String, Quantity>>,
}

#[derive(Deserialize)]
struct WireNodeInfo {
    #[serde(rename = "bootID", default)]
    boot_id: String,
}

/// The allocatable resources the plan reads.
const KEPT_ALLOCATABLE: [&str; 2] = ["cpu", "memory"];

impl WireMeta {
    pub(super) fn into_meta(self) -> ObjectMeta {
        // Destructured whole, so a field added to WireMeta cannot be left out here unnoticed.
        let WireMeta {
            name,
            generate_name,
            namespace,
            uid,
            resource_version,
            generation,
            creation_timestamp,
            deletion_timestamp,
            deletion_grace_period_seconds,
            labels,
            annotations,
            owner_references,
            finalizers,
        } = self;
        ObjectMeta {
            name,
            generate_name,
            namespace,
            uid,
            resource_version,
            generation,
            creation_timestamp,
            deletion_timestamp,
            deletion_grace_period_seconds,
            labels,
            annotations,
            owner_references,
            finalizers,
            ..ObjectMeta::default()
        }
    }
}

impl WireNode {
    fn into_node(self) -> Node {
        Node {
            metadata: self.metadata.into_meta(),
            spec: self.spec.map(|spec| NodeSpec {
                taints: spec.taints,
                unschedulable: spec.unschedulable,
                ..NodeSpec::default()
            }),
            status: self.status.map(|status| NodeStatus {
                conditions: status.conditions,
                node_info: status.node_info.map(|info| NodeSystemInfo {
                    boot_id: info.boot_id,
                    ..NodeSystemInfo::default()
                }),
                allocatable: status.allocatable.map(|mut list| {
                    list.retain(|name, _| KEPT_ALLOCATABLE.contains(&name.as_str()));
                    list
                }),
                ..NodeStatus::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_node_json() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": "node-1", "resourceVersion": "7", "uid": "u-1",
                "creationTimestamp": "2026-11-24T10:00:00Z",
                "labels": {"tier": "gpu"}, "annotations": {"skyhook.nvidia.com/x": "y"},
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]
            },
            "spec": {"podCIDR": "10.0.0.0/24", "unschedulable": true, "providerID": "p",
                     "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "8"},
                "capacity": {"cpu": "8", "memory": "16Gi"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "images": [{"names": ["busybox:1"], "sizeBytes": 1}],
                "nodeInfo": {"bootID": "boot-1", "kernelVersion": "6.1", "machineID": "m",
                             "systemUUID": "u", "osImage": "o", "containerRuntimeVersion": "c",
                             "kubeletVersion": "v", "kubeProxyVersion": "",
                             "operatingSystem": "linux", "architecture": "amd64"},
                "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                "message": "m", "lastTransitionTime": "2026-11-24T11:00:00Z"}]
            }
        })
    }

    #[test]
    fn a_cached_node_reads_as_the_node_it_came_from() {
        let node: Node = serde_json::from_value(full_node_json()).unwrap();
        let decoded: CachedNode = serde_json::from_value(full_node_json()).unwrap();
        assert_eq!(**decoded.view(), node_view(node.clone()));
        assert_eq!(decoded, CachedNode::from(node.clone()));
        // The node-metadata ConfigMaps copy labels and annotations whole.
        assert_eq!(Some(decoded.labels.to_map()), node.metadata.labels);
        assert_eq!(
            Some(decoded.annotations.to_map()),
            node.metadata.annotations
        );
        // The watch reads the identity from the metadata, and nothing else is there.
        let expected_meta = ObjectMeta {
            name: node.metadata.name.clone(),
            uid: node.metadata.uid.clone(),
            resource_version: node.metadata.resource_version.clone(),
            creation_timestamp: node.metadata.creation_timestamp.clone(),
            ..ObjectMeta::default()
        };
        assert_eq!(kube::Resource::meta(&decoded), &expected_meta);
    }

    #[test]
    fn a_decoded_node_skips_what_the_controller_never_reads() {
        let node = serde_json::from_value::<WireNode>(full_node_json())
            .unwrap()
            .into_node();
        assert!(node.metadata.managed_fields.is_none());
        let spec = node.spec.as_ref().unwrap();
        assert!(spec.pod_cidr.is_none() && spec.provider_id.is_none());
        let status = node.status.as_ref().unwrap();
        assert!(status.images.is_none() && status.addresses.is_none() && status.capacity.is_none());
        assert_eq!(status.node_info.as_ref().unwrap().kernel_version, "");
        let allocatable: Vec<&str> = status
            .allocatable
            .as_ref()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(allocatable, ["cpu", "memory"]);
    }

    #[test]
    fn a_node_without_spec_or_status_decodes() {
        let cached: CachedNode =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "bare"}})).unwrap();
        assert_eq!(cached.name, "bare");
        assert!(cached.conditions.is_empty() && cached.boot_id.is_none());
    }
}
