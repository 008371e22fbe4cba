//! Nodes and pods as the caches hold them, decoded without what the controller never reads.
//!
//! A real Node is 10-40 KB of JSON, most of it `managedFields`, the image list and the system
//! info; the controller reads a few hundred bytes of it. A package pod changes five times in its
//! life (the kubelet posts each container's start and end), and every version carries the
//! kubelet's and the controller's `managedFields`, which serde decodes into a tree of JSON
//! values. Decoding the whole object and trimming it afterwards allocates all of it on every
//! watch event and leaves the kept parts scattered among the freed ones, so the allocator cannot
//! give the pages back. [`Slim`] objects decode only the kept fields: serde skips the rest of the
//! JSON without allocating it.
//!
//! [`CachedNode`] keeps the metadata without `managedFields` (labels and annotations whole: the
//! node-metadata ConfigMaps copy them), the taints and `unschedulable`, the conditions, the boot
//! ID and the allocatable CPU and memory; everything [`crate::reconcile::snapshot::node_view`],
//! the trigger and the metrics read.
//!
//! [`CachedPod`] keeps what the plan reads of the controller's own pods: the metadata without
//! `managedFields`; the node, the overhead and, of each container, its name, image, arguments,
//! environment and resources (pod validation, pod slots, reboot interrupts); the phase, reason,
//! message and, of each init container's status, its name, state, last state and restart count
//! (`pod_outcome`). Everything admission and the kubelet add besides (volumes and their mounts,
//! tolerations, security contexts, conditions, addresses, image IDs) is skipped: with it, a
//! package pod was about 38 KB of the controller's memory. A rule that reads another field of a
//! package pod must keep it here; `a_cached_pod_answers_every_pod_rule_as_the_full_pod` checks
//! the rules that read pods today.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStatus, EnvVar, Node, NodeCondition, NodeSpec, NodeStatus,
    NodeSystemInfo, Pod, PodSpec, PodStatus, ResourceRequirements, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use serde::{Deserialize, Deserializer};

/// A Kubernetes object holding only what the controller reads (see the module documentation);
/// it reads as the object itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Slim<K>(pub K);

/// A Node as the cache holds it.
pub type CachedNode = Slim<Node>;

/// A pod as the cache holds it.
pub type CachedPod = Slim<Pod>;

impl<K> Deref for Slim<K> {
    type Target = K;

    fn deref(&self) -> &K {
        &self.0
    }
}

impl<K> DerefMut for Slim<K> {
    fn deref_mut(&mut self) -> &mut K {
        &mut self.0
    }
}

impl<K> From<K> for Slim<K> {
    fn from(object: K) -> Self {
        Slim(object)
    }
}

impl<K: Resource> Resource for Slim<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

impl<'de> Deserialize<'de> for Slim<Node> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireNode::deserialize(deserializer)?;
        Ok(Slim(wire.into_node()))
    }
}

impl<'de> Deserialize<'de> for Slim<Pod> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WirePod::deserialize(deserializer)?;
        Ok(Slim(wire.into_pod()))
    }
}

/// The kept fields of a pod's JSON (see the module documentation).
#[derive(Deserialize)]
struct WirePod {
    #[serde(default)]
    metadata: WireMeta,
    spec: Option<WirePodSpec>,
    status: Option<WirePodStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePodSpec {
    node_name: Option<String>,
    overhead: Option<BTreeMap<String, Quantity>>,
    init_containers: Option<Vec<WireContainer>>,
    #[serde(default)]
    containers: Vec<WireContainer>,
}

#[derive(Deserialize)]
struct WireContainer {
    #[serde(default)]
    name: String,
    image: Option<String>,
    args: Option<Vec<String>>,
    env: Option<Vec<EnvVar>>,
    resources: Option<ResourceRequirements>,
}

impl WirePod {
    fn into_pod(self) -> Pod {
        Pod {
            metadata: self.metadata.into_meta(),
            spec: self.spec.map(|spec| PodSpec {
                node_name: spec.node_name,
                overhead: spec.overhead,
                init_containers: spec
                    .init_containers
                    .map(|containers| containers.into_iter().map(Container::from).collect()),
                containers: spec.containers.into_iter().map(Container::from).collect(),
                ..PodSpec::default()
            }),
            status: self.status.map(|status| PodStatus {
                phase: status.phase,
                reason: status.reason,
                message: status.message,
                init_container_statuses: status
                    .init_container_statuses
                    .map(|statuses| statuses.into_iter().map(ContainerStatus::from).collect()),
                ..PodStatus::default()
            }),
        }
    }
}

impl From<WireContainer> for Container {
    fn from(wire: WireContainer) -> Self {
        Container {
            name: wire.name,
            image: wire.image,
            args: wire.args,
            env: wire.env,
            resources: wire.resources,
            ..Container::default()
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePodStatus {
    phase: Option<String>,
    reason: Option<String>,
    message: Option<String>,
    init_container_statuses: Option<Vec<WireContainerStatus>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireContainerStatus {
    #[serde(default)]
    name: String,
    state: Option<ContainerState>,
    last_state: Option<ContainerState>,
    #[serde(default)]
    restart_count: i32,
}

impl From<WireContainerStatus> for ContainerStatus {
    fn from(wire: WireContainerStatus) -> Self {
        ContainerStatus {
            name: wire.name,
            state: wire.state,
            last_state: wire.last_state,
            restart_count: wire.restart_count,
            ..ContainerStatus::default()
        }
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
struct WireMeta {
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
    fn into_meta(self) -> ObjectMeta {
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
    use crate::reconcile::snapshot::node_view;

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
        let cached: CachedNode = serde_json::from_value(full_node_json()).unwrap();
        assert_eq!(node_view(&cached), node_view(&node));
        // The node-metadata ConfigMaps copy labels and annotations whole; Events name the uid.
        assert_eq!(cached.metadata.labels, node.metadata.labels);
        assert_eq!(cached.metadata.annotations, node.metadata.annotations);
        assert_eq!(cached.metadata.uid, node.metadata.uid);
        assert_eq!(
            cached.metadata.creation_timestamp,
            node.metadata.creation_timestamp
        );
    }

    #[test]
    fn a_cached_node_holds_none_of_what_the_controller_never_reads() {
        let cached: CachedNode = serde_json::from_value(full_node_json()).unwrap();
        assert!(cached.metadata.managed_fields.is_none());
        let spec = cached.spec.as_ref().unwrap();
        assert!(spec.pod_cidr.is_none() && spec.provider_id.is_none());
        let status = cached.status.as_ref().unwrap();
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

    /// A package pod as the API server returns it: what the controller created, plus what
    /// admission and the kubelet add, plus `status`.
    fn served(mut pod: Pod, status: serde_json::Value) -> serde_json::Value {
        pod.metadata.resource_version = Some("42".into());
        pod.metadata.creation_timestamp = Some(Time("2026-11-24T10:00:00Z".parse().unwrap()));
        let mut json = serde_json::to_value(pod).unwrap();
        json["metadata"]["managedFields"] = serde_json::json!([{"manager": "kubelet",
            "operation": "Update", "subresource": "status", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:phase": {}}}}]);
        let spec = &mut json["spec"];
        spec["volumes"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
            "name": "kube-api-access-x", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}));
        for list in ["initContainers", "containers"] {
            for container in spec[list].as_array_mut().unwrap() {
                if let Some(mounts) = container["volumeMounts"].as_array_mut() {
                    mounts.push(
                        serde_json::json!({"name": "kube-api-access-x", "mountPath": "/var/run"}),
                    );
                }
                container["terminationMessagePath"] = "/dev/termination-log".into();
                container["imagePullPolicy"] = "Always".into();
            }
        }
        spec["tolerations"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
            "key": "node.kubernetes.io/not-ready", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 300}));
        json["status"] = status;
        json
    }

    #[test]
    fn a_cached_pod_answers_every_pod_rule_as_the_full_pod() {
        use crate::names::OwnerSkyhook;
        use crate::pod_match::{ExpectedContainers, validate_pod};
        use crate::pod_outcome::{OutcomeContext, outcome};
        use crate::pods::tests::{package, settings, skyhook};
        use crate::pods::{PodNode, interrupt_pod, is_reboot_interrupt, package_pod};
        use skyhook_api::node_state::NodeState;
        use skyhook_api::resources::pod_requests;
        use skyhook_api::v1alpha1::{Interrupt, InterruptType, Stage};

        let sky = skyhook("gpu", vec![]);
        let owner = OwnerSkyhook::new(&sky).unwrap();
        let mut driver = package("driver", "1.0.0", "ghcr.io/x/driver");
        driver.env = vec![EnvVar {
            name: "MODE".into(),
            value: Some("fast".into()),
            value_from: None,
        }];
        let node = PodNode::new("node-1", None);
        let apply = package_pod(&settings(), &owner, &driver, &node, Stage::Apply).unwrap();
        let reboot = Interrupt {
            type_: InterruptType::Reboot,
            services: vec![],
        };
        let interrupt = interrupt_pod(&settings(), &owner, &driver, &reboot, &node);
        let statuses = [
            serde_json::json!({"phase": "Pending", "initContainerStatuses": [
                {"name": "driver-init", "image": "i", "imageID": "x", "ready": false,
                 "restartCount": 0, "state": {"running": {"startedAt": "2026-11-24T10:00:01Z"}}}]}),
            serde_json::json!({"phase": "Pending", "initContainerStatuses": [
                {"name": "driver-init", "image": "i", "imageID": "x", "ready": true,
                 "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
                {"name": "driver-apply", "image": "i", "imageID": "x", "ready": false,
                 "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff",
                 "message": "back-off"}}, "lastState": {"terminated": {"exitCode": 2,
                 "reason": "Error", "startedAt": "2026-11-24T10:00:02Z"}}}]}),
            serde_json::json!({"phase": "Failed", "reason": "OutOfcpu",
                "message": "Node didn't have enough resource: cpu"}),
            serde_json::json!({"phase": "Running", "initContainerStatuses": [
                {"name": "driver-init", "image": "i", "imageID": "x", "ready": true,
                 "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
                {"name": "driver-apply", "image": "i", "imageID": "x", "ready": true,
                 "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
                {"name": "driver-applycheck", "image": "i", "imageID": "x", "ready": true,
                 "restartCount": 1, "state": {"terminated": {"exitCode": 0}}}],
                "conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.0.0.1"}),
            serde_json::json!({"phase": "Running", "initContainerStatuses": [
                {"name": "interrupt", "image": "i", "imageID": "x", "ready": false,
                 "restartCount": 0, "state": {"terminated": {"exitCode": 137,
                 "reason": "Error", "startedAt": "2026-11-24T10:00:03Z"}}}]}),
        ];
        let packages = BTreeMap::from([("driver".to_owned(), driver.clone())]);
        let state: NodeState = [skyhook_api::v1alpha1::PackageStatus {
            name: "driver".into(),
            version: "1.0.0".into(),
            image: "ghcr.io/x/driver".into(),
            container_sha: String::new(),
            stage: Stage::Apply,
            state: skyhook_api::v1alpha1::State::InProgress,
            restarts: 0,
            last_transition_time: None,
        }]
        .into_iter()
        .collect();
        for created in [&apply, &interrupt] {
            for status in &statuses {
                let json = served(created.clone(), status.clone());
                let full: Pod = serde_json::from_value(json.clone()).unwrap();
                let slim: CachedPod = serde_json::from_value(json).unwrap();
                for boot_id in [None, Some("boot-2")] {
                    let context = OutcomeContext {
                        node_boot_id: boot_id,
                        now: "2026-11-24T11:00:00Z".parse().unwrap(),
                        reboot_deadline: std::time::Duration::from_secs(600),
                    };
                    assert_eq!(outcome(&slim, context), outcome(&full, context), "{status}");
                }
                let validate = |pod: &Pod| {
                    let mut expected = ExpectedContainers::default();
                    validate_pod(&settings(), &owner, &packages, &state, pod, &mut expected)
                };
                assert_eq!(validate(&slim), validate(&full));
                let requests = |pod: &Pod| pod_requests(pod.spec.as_ref().unwrap()).ok();
                assert_eq!(requests(&slim), requests(&full));
                assert_eq!(is_reboot_interrupt(&slim), is_reboot_interrupt(&full));
                assert_eq!(slim.metadata.labels, full.metadata.labels);
                assert_eq!(slim.metadata.annotations, full.metadata.annotations);
                assert!(slim.metadata.managed_fields.is_none());
                let kept_spec = slim.spec.as_ref().unwrap();
                assert!(kept_spec.volumes.is_none() && kept_spec.tolerations.is_none());
            }
        }
    }

    #[test]
    fn a_node_without_spec_or_status_decodes() {
        let cached: CachedNode =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "bare"}})).unwrap();
        assert_eq!(cached.metadata.name.as_deref(), Some("bare"));
        assert!(cached.spec.is_none() && cached.status.is_none());
    }
}
