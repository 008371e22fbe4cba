//! The controller's own pods as the cache holds them: only what the pod rules read, in types
//! sized for it.
//!
//! A package pod changes five times in its life (the kubelet posts each container's start and
//! end), and every version carries the kubelet's and the controller's `managedFields`, the
//! volumes, tolerations and security contexts admission added. None of that is decoded: serde
//! skips it in the JSON ([`WirePod`]). What is kept is then moved out of the Kubernetes types
//! into [`CachedPod`], because those types are sized for everything a pod can say: a
//! `Container` is about 2.3 KB before any of its fields holds a value (three probes, a
//! lifecycle and a security context inline), a `ContainerStatus` about 1 KB, a `PodSpec` over
//! 1 KB. Held that way, the 2,000 package pods of a 1,000-node rollout took 45 MiB of the
//! controller's peak heap (measured with heaptrack), most of it empty fields.
//!
//! Kept: the metadata without `managedFields`; the node; the pod's effective requests, read
//! once here with [`skyhook_api::resources::pod_requests`] (pod slots, nodes that can never
//! hold a pod); of each init container its name, image, arguments, limits and requests and a
//! digest of its environment ([`EnvDigest`]) (pod validation, reboot interrupts); the phase,
//! reason and message and, of each init container's status, its name, state, last state and
//! restart count (`pod_outcome`). A rule
//! that reads another field of a package pod must keep it here;
//! `a_cached_pod_answers_every_pod_rule_as_the_full_pod` checks the rules that read pods today.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStatus, EnvVar, Pod, PodCondition, PodSpec, PodStatus,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};
use skyhook_api::keys;
use skyhook_api::resources::{CpuMemory, pod_requests};

use super::slim::WireMeta;

/// The pod condition the API server, the scheduler and the taint manager set on a pod they are
/// about to stop.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// A package or interrupt pod as the cache holds it (see the module documentation). Built from
/// a [`Pod`] with `From`, or decoded from the API server's JSON; both give the same value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CachedPod {
    /// The metadata, without `managedFields`.
    pub metadata: ObjectMeta,
    /// What the rules read of the spec.
    pub spec: Option<CachedPodSpec>,
    /// What the rules read of the status.
    pub status: Option<CachedPodStatus>,
}

/// What the pod rules read of a pod's spec.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CachedPodSpec {
    /// The node the pod is bound to.
    pub node_name: Option<String>,
    /// The pod's effective CPU and memory requests (containers, init containers and overhead);
    /// `None` when one of its quantities does not parse.
    pub requests: Option<CpuMemory>,
    /// The init containers, in spec order.
    pub init_containers: Option<Vec<CachedContainer>>,
}

/// What the pod rules read of a container.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CachedContainer {
    /// Container name.
    pub name: String,
    /// Image reference.
    pub image: Option<String>,
    /// Arguments (an interrupt pod's fourth names its interrupt).
    pub args: Option<Vec<String>>,
    /// The environment, as pod validation compares it.
    pub env: EnvDigest,
    /// Requests and limits.
    pub resources: Option<CachedResources>,
}

/// A digest of a container's environment as pod validation compares it (`crate::pod_match`):
/// without the variables the operator injects (they change with every generation), an empty
/// `value` as none and a `fieldRef` without `apiVersion` as `v1` (the API server drops the one
/// and defaults the other). A package pod has about twenty variables, two strings each, and
/// validation only asks whether they equal the spec's: the cache keeps the answer's input as
/// 8 bytes. SipHash with fixed keys over the normalized variables' JSON: equal environments
/// always give equal digests; two different ones a 1 in 2^64 chance of an equal one, where the
/// cost would be a pod left running after an edit of its package's `env`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnvDigest(u64);

impl EnvDigest {
    /// The digest of `env` (see the type's documentation); an absent environment is the empty
    /// one.
    pub fn of(env: Option<&[EnvVar]>) -> Self {
        let compared: Vec<Cow<'_, EnvVar>> = env
            .unwrap_or_default()
            .iter()
            .filter(|var| {
                var.name != keys::ENV_SKYHOOK_DIR
                    && !keys::OPERATOR_AGENT_ENV.contains(&var.name.as_str())
            })
            .map(undo_api_defaulting)
            .collect();
        let mut hasher = DefaultHasher::new();
        // Written into the hasher as it is serialized. Plain data cannot fail to serialize; were
        // it to, every environment would digest alike and no pod would be replaced for its env,
        // which the tests catch.
        let _ = serde_json::to_writer(HashWriter(&mut hasher), &compared);
        EnvDigest(hasher.finish())
    }
}

/// `var` as the spec wrote it, undoing what the API server changes on its own: an empty `value`
/// dropped, `fieldRef.apiVersion` defaulted to `v1`. Borrowed unless one of them applies, which
/// is rare: the digest is taken on every watch event of a pod.
fn undo_api_defaulting(var: &EnvVar) -> Cow<'_, EnvVar> {
    let empty_value = var.value.as_deref() == Some("");
    let field_without_version = var
        .value_from
        .as_ref()
        .and_then(|source| source.field_ref.as_ref())
        .is_some_and(|field| field.api_version.is_none());
    if !empty_value && !field_without_version {
        return Cow::Borrowed(var);
    }
    let mut var = var.clone();
    if empty_value {
        var.value = None;
    }
    if let Some(field) = var
        .value_from
        .as_mut()
        .and_then(|source| source.field_ref.as_mut())
    {
        field.api_version.get_or_insert_with(|| "v1".to_owned());
    }
    Cow::Owned(var)
}

/// Feeds what is written to it to a hasher.
struct HashWriter<'h>(&'h mut DefaultHasher);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A container's limits and requests, each in name order. A `BTreeMap` of two quantities takes
/// a whole node of eleven (about 550 bytes); a list takes what it holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CachedResources {
    /// Limits, by resource name.
    pub limits: Option<Vec<(String, Quantity)>>,
    /// Requests, by resource name.
    pub requests: Option<Vec<(String, Quantity)>>,
}

/// What the pod rules read of a pod's status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CachedPodStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed`.
    pub phase: Option<String>,
    /// Why the pod is in its phase, e.g. `OutOfcpu`.
    pub reason: Option<String>,
    /// The kubelet's explanation.
    pub message: Option<String>,
    /// The init containers' statuses.
    pub init_container_statuses: Option<Vec<CachedContainerStatus>>,
    /// Condition `DisruptionTarget` is true: the pod is being stopped by an eviction, a
    /// preemption or the taint manager, not by its own failure (a Job's attempt that ends so is
    /// not counted as a package failure).
    pub disruption_target: bool,
}

/// What the pod rules read of an init container's status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CachedContainerStatus {
    /// Container name.
    pub name: String,
    /// Where the container is now.
    pub state: Option<ContainerState>,
    /// How its previous run ended.
    pub last_state: Option<ContainerState>,
    /// How often the kubelet restarted it.
    pub restart_count: i32,
}

impl From<Pod> for CachedPod {
    fn from(pod: Pod) -> Self {
        let Pod {
            mut metadata,
            spec,
            status,
        } = pod;
        metadata.managed_fields = None;
        if let Some(labels) = metadata.labels.as_mut() {
            drop_unread_job_labels(labels);
        }
        CachedPod {
            metadata,
            spec: spec.map(CachedPodSpec::from),
            status: status.map(CachedPodStatus::from),
        }
    }
}

/// The label the Job controller puts on each pod it creates (and on the template), naming the
/// Job: how an attempt is told from a bare pod and matched to its Job.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The same label without its prefix, which the Job controller also sets (Kubernetes before
/// 1.27 set only this one).
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";
/// The Job's uid, which the Job controller puts on each template and attempt, prefixed and not.
const JOB_UID_LABELS: [&str; 2] = ["batch.kubernetes.io/controller-uid", "controller-uid"];

/// Drops the Job controller's labels no rule reads: the uids and the unprefixed job name when
/// the prefixed one is there. Every cached template and attempt carries them (four strings of
/// up to 50 bytes, held twice by the watch), and no rule reads a pod's labels whole.
fn drop_unread_job_labels(labels: &mut BTreeMap<String, String>) {
    for key in JOB_UID_LABELS {
        labels.remove(key);
    }
    if labels.contains_key(JOB_NAME_LABEL) {
        labels.remove(LEGACY_JOB_NAME_LABEL);
    }
}

impl From<PodSpec> for CachedPodSpec {
    fn from(spec: PodSpec) -> Self {
        CachedPodSpec {
            requests: pod_requests(&spec).ok(),
            node_name: spec.node_name,
            init_containers: spec
                .init_containers
                .map(|containers| converted(containers, CachedContainer::from)),
        }
    }
}

impl From<Container> for CachedContainer {
    fn from(container: Container) -> Self {
        CachedContainer {
            name: container.name,
            image: container.image,
            args: container.args,
            env: EnvDigest::of(container.env.as_deref()),
            resources: container.resources.map(CachedResources::from),
        }
    }
}

impl From<ResourceRequirements> for CachedResources {
    fn from(resources: ResourceRequirements) -> Self {
        let list =
            |map: Option<BTreeMap<String, Quantity>>| map.map(|map| map.into_iter().collect());
        CachedResources {
            limits: list(resources.limits),
            requests: list(resources.requests),
        }
    }
}

impl From<PodStatus> for CachedPodStatus {
    fn from(status: PodStatus) -> Self {
        let disruption_target =
            status.conditions.iter().flatten().any(|condition| {
                condition.type_ == DISRUPTION_TARGET && condition.status == "True"
            });
        CachedPodStatus {
            disruption_target,
            phase: status.phase,
            reason: status.reason,
            message: status.message,
            init_container_statuses: (status.init_container_statuses)
                .map(|statuses| converted(statuses, CachedContainerStatus::from)),
        }
    }
}

/// `items` converted one by one, in a vector holding only what it needs. Collecting a
/// `Vec<Container>` into a `Vec<CachedContainer>` reuses the source's allocation (the standard
/// library collects in place when the new items are no larger), so each cached pod would keep
/// room for its init containers as k8s-openapi sizes them, about 2.3 KB each: heaptrack found
/// 12.6 MiB of a 1,000-node rollout's 62 MiB peak heap held so, by the stage Jobs' templates.
fn converted<T, U>(items: Vec<T>, convert: impl FnMut(T) -> U) -> Vec<U> {
    let mut converted: Vec<U> = items.into_iter().map(convert).collect();
    converted.shrink_to_fit();
    converted
}

impl From<ContainerStatus> for CachedContainerStatus {
    fn from(status: ContainerStatus) -> Self {
        CachedContainerStatus {
            name: status.name,
            state: status.state,
            last_state: status.last_state,
            restart_count: status.restart_count,
        }
    }
}

resource_of!(CachedPod, Pod);

impl<'de> Deserialize<'de> for CachedPod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WirePod::deserialize(deserializer)?;
        Ok(CachedPod::from(wire.into_pod()))
    }
}

/// The kept fields of a pod's JSON; serde skips every other field without allocating it.
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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePodStatus {
    phase: Option<String>,
    reason: Option<String>,
    message: Option<String>,
    init_container_statuses: Option<Vec<WireContainerStatus>>,
    conditions: Option<Vec<WirePodCondition>>,
}

#[derive(Deserialize)]
struct WirePodCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
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

impl WirePod {
    /// The kept fields as a [`Pod`], for [`CachedPod::from`]: one conversion for the cache and
    /// for a pod built in memory, so the two cannot disagree.
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
                conditions: status.conditions.map(|conditions| {
                    conditions
                        .into_iter()
                        .filter(|condition| condition.type_ == DISRUPTION_TARGET)
                        .map(|condition| PodCondition {
                            type_: condition.type_,
                            status: condition.status,
                            ..PodCondition::default()
                        })
                        .collect()
                }),
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

#[cfg(test)]
mod tests;
