//! The pod that pulls a node's package and agent images before the node is cordoned for a
//! package with an interrupt (`spec.prePullImages`, `PRE_PULL_IMAGES`), and what its status
//! says. A tag that does not exist or a registry out of reach is then found while the node
//! still works, not after its drain.
//!
//! Contract: [`images_to_pull`], [`pre_pull_pod`] and [`pull_state`] are pure; the plan decides
//! whether a pod should exist. The pod pulls each image in an init container, in order (the
//! kubelet pulls one image at a time by default anyway), with the pull policy of the package
//! pods (`Always`), so it resolves the tags exactly as they will:
//! * a package image runs `/bin/sh -c true`: the copy step of every package pod needs that
//!   shell, so a working package image has it;
//! * an agent image runs with `--version` (it may have no shell), after every package image,
//!   so that an agent that does not know the flag ends the pod without hiding a package
//!   image's failure;
//! * the main container runs the first package image's shell again and exits, so the pod ends.
//!
//! Only the kubelet's pull failures ([`IMAGE_PULL_FAILURES`]) are failures: whatever a container
//! does once its image is on the node (exit 0, exit non-zero, a start or create error) means the
//! image was pulled. A container that stops the pod that way leaves the images after it
//! unchecked; their packages' own pods find them as before.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerState, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;
use skyhook_api::generation::group_of_labels;
use skyhook_api::image::pull_reference;
use skyhook_api::keys;
use skyhook_api::v1alpha1::Package;

use crate::cache::CachedPod;
use crate::config::PodSettings;
use crate::names::{OwnerSkyhook, pre_pull_pod_name};
use crate::pod_outcome::IMAGE_PULL_FAILURES;
use crate::pods::{agent_image, pod_tolerations, pull_secrets};

/// Name of the main container of a pre-pull pod.
pub const DONE_CONTAINER: &str = "done";

/// One image a node needs, with the packages that need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullImage {
    /// The reference as the package pods pull it.
    pub reference: String,
    /// The packages whose pods run it, by name, sorted.
    pub packages: Vec<String>,
    /// It is an agent image (pulled after the package images).
    pub agent: bool,
}

/// The images the pods of `packages` pull, each once: the package images first, in the order
/// given, then the agent images.
pub fn images_to_pull<'p>(
    settings: &PodSettings,
    packages: impl IntoIterator<Item = &'p Package>,
) -> Vec<PullImage> {
    let mut images: Vec<PullImage> = Vec::new();
    let mut agents: Vec<PullImage> = Vec::new();
    for package in packages {
        let package_image = pull_reference(
            &package.image,
            &package.version,
            package.container_sha.as_deref(),
        );
        add(&mut images, package_image, &package.name, false);
        add(
            &mut agents,
            agent_image(settings, package).to_owned(),
            &package.name,
            true,
        );
    }
    images.extend(agents);
    images
}

fn add(images: &mut Vec<PullImage>, reference: String, package: &str, agent: bool) {
    match images.iter_mut().find(|i| i.reference == reference) {
        Some(image) => {
            if !image.packages.iter().any(|p| p == package) {
                image.packages.push(package.to_owned());
                image.packages.sort_unstable();
            }
        }
        None => images.push(PullImage {
            reference,
            packages: vec![package.to_owned()],
            agent,
        }),
    }
}

/// The references of `images`, in order: what a pre-pull pod records it pulls.
pub fn references(images: &[PullImage]) -> Vec<String> {
    images.iter().map(|i| i.reference.clone()).collect()
}

/// The container pulling the `index`th image.
fn pull_container_name(index: usize) -> String {
    format!("pull-{index}")
}

/// The pod pulling `images` (at least one package image first) on `node` for `owner`.
pub fn pre_pull_pod(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    node: &str,
    images: &[PullImage],
) -> Pod {
    let keys = owner.group.keys();
    let resources = small_resources();
    let shell = |name: String, image: &str, policy: &str| Container {
        name,
        image: Some(image.to_owned()),
        image_pull_policy: Some(policy.to_owned()),
        command: Some(vec!["/bin/sh".to_owned()]),
        args: Some(vec!["-c".to_owned(), "true".to_owned()]),
        resources: Some(resources.clone()),
        ..Container::default()
    };
    let init_containers: Vec<Container> = (images.iter().enumerate())
        .map(|(index, image)| match image.agent {
            false => shell(pull_container_name(index), &image.reference, "Always"),
            true => Container {
                name: pull_container_name(index),
                image: Some(image.reference.clone()),
                image_pull_policy: Some("Always".to_owned()),
                args: Some(vec!["--version".to_owned()]),
                resources: Some(resources.clone()),
                ..Container::default()
            },
        })
        .collect();
    let first = images.first().map_or("", |i| i.reference.as_str());
    let list = serde_json::Value::from(references(images)).to_string();
    let name = pre_pull_pod_name(owner.name, node, &references(images));
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(settings.namespace.clone()),
            labels: Some(BTreeMap::from([
                (keys.name_label.to_owned(), owner.name.to_owned()),
                (
                    keys.pre_pull_label.to_owned(),
                    keys::PRE_PULL_LABEL_VALUE.to_owned(),
                ),
            ])),
            annotations: Some(BTreeMap::from([(
                keys.pre_pull_images_annotation.to_owned(),
                list,
            )])),
            owner_references: Some(vec![owner.owner_reference()]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            restart_policy: Some("Never".to_owned()),
            // As the package pods: a node whose pod network is not up yet still pulls.
            host_network: Some(true),
            init_containers: Some(init_containers),
            containers: vec![shell(DONE_CONTAINER.to_owned(), first, "IfNotPresent")],
            image_pull_secrets: pull_secrets(
                settings.image_pull_secret.as_deref(),
                owner.image_pull_secrets,
            ),
            tolerations: Some(pod_tolerations(settings, owner)),
            priority_class_name: settings.priority_class_name.clone(),
            termination_grace_period_seconds: Some(0),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// Enough for a shell's `true` and an agent's `--version`: the pod must fit any node.
fn small_resources() -> ResourceRequirements {
    let list = BTreeMap::from([
        ("cpu".to_owned(), Quantity("50m".to_owned())),
        ("memory".to_owned(), Quantity("64Mi".to_owned())),
    ]);
    ResourceRequirements {
        limits: Some(list.clone()),
        requests: Some(list),
        ..ResourceRequirements::default()
    }
}

/// Where a pre-pull stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullState {
    /// Still pulling (or not started).
    Pulling,
    /// Every image is on the node.
    Pulled,
    /// The kubelet cannot pull an image; it keeps retrying with its back-off.
    Failed(PullFailure),
    /// The kubelet refused the pod before pulling anything (`OutOfpods`, ...): it is made again.
    Refused(String),
}

/// A pull the kubelet reports failing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullFailure {
    /// The image.
    pub image: String,
    /// The kubelet's waiting reason (`ErrImagePull`, `ImagePullBackOff`, ...).
    pub reason: String,
    /// The kubelet's message (the registry's answer).
    pub message: String,
}

/// What the status of the pre-pull `pod` of `images` (its annotation's list) says.
pub fn pull_state(pod: &CachedPod, images: &[String]) -> PullState {
    let status = pod.status.as_ref();
    let statuses = status
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or_default();
    let ran = |state: Option<&ContainerState>| {
        state.is_some_and(|s| s.running.is_some() || s.terminated.is_some())
    };
    match status.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded" | "Running") => return PullState::Pulled,
        Some("Failed") => {
            let any_ran = statuses
                .iter()
                .any(|c| ran(c.state.as_ref()) || ran(c.last_state.as_ref()));
            return match any_ran {
                true => PullState::Pulled,
                false => PullState::Refused(
                    status
                        .and_then(|s| s.reason.clone())
                        .unwrap_or_else(|| "Failed".to_owned()),
                ),
            };
        }
        _ => {}
    }
    for (index, image) in images.iter().enumerate() {
        let name = pull_container_name(index);
        let waiting = statuses
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.state.as_ref()?.waiting.as_ref());
        let Some(waiting) = waiting else { continue };
        let Some(reason) = waiting.reason.as_deref() else {
            continue;
        };
        if IMAGE_PULL_FAILURES.contains(&reason) {
            return PullState::Failed(PullFailure {
                image: image.clone(),
                reason: reason.to_owned(),
                message: waiting.message.clone().unwrap_or_default(),
            });
        }
        if AFTER_PULL.contains(&reason) {
            // The image is there; the init containers after this one never start.
            return PullState::Pulled;
        }
    }
    PullState::Pulling
}

/// The kubelet's waiting reasons for a container whose image it has: the container could not
/// be created or started, or it crashed (the kubelet pulls before it creates).
const AFTER_PULL: [&str; 4] = [
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    crate::pod_outcome::CRASH_LOOP_BACK_OFF,
];

/// The images a pre-pull pod records it pulls (its annotation); empty when it does not parse.
pub fn recorded_images(pod: &CachedPod) -> Vec<String> {
    (pod.metadata.annotations.as_ref())
        .and_then(|a| {
            a.get(
                group_of_labels(pod.metadata.labels.as_ref())
                    .keys()
                    .pre_pull_images_annotation,
            )
        })
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// Whether `pod` is a pre-pull pod (label [`keys::Keys::pre_pull_label`]).
pub fn is_pre_pull(pod: &CachedPod) -> bool {
    let labels = pod.metadata.labels.as_ref();
    group_of_labels(labels).keys().is_pre_pull_pod(labels)
}

#[cfg(test)]
mod tests;
