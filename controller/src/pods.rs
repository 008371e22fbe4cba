//! The package pods and interrupt pods the controller creates, with upstream's exact shape
//! (spec §2.8), because package authors, dashboards and the upstream e2e suite look at container
//! names, arguments, environment and labels.
//!
//! Contract: [`package_pod`] and [`interrupt_pod`] are pure. They return the complete object to
//! create (name, namespace, labels, the `skyhook.nvidia.com/package` annotation, the controller
//! owner reference, spec). They never decide *whether* a pod should exist; the plan does.
//! [`job_pod`] turns either into the pod of a stage Job (upstream v0.18).
//!
//! Deliberate differences from upstream:
//! * `imagePullSecrets` is set only when `IMAGE_PULL_SECRET` is configured (upstream always adds
//!   an entry, possibly with an empty name, which makes kubelets log errors).
//! * The interrupt pod does not declare upstream's node-metadata volume: no container of it mounts
//!   the volume (and before upstream v0.18 its ConfigMap name was computed differently and could
//!   name a ConfigMap that does not exist, which keeps the pod from starting).
//! * Interrupt pods carry the node's boot ID at creation in [`skyhook_api::keys::Keys::boot_id_annotation`], so that an
//!   interrupt container killed by the reboot it caused is recognised as such and not reported as
//!   a failure (see `pod_outcome`).
//! * The package image reference comes from `skyhook_api::image::pull_reference`, which keeps
//!   registry ports intact (upstream #280).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EnvVar, HostPathVolumeSource, LocalObjectReference, Pod,
    PodSpec, ResourceRequirements, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;
use skyhook_api::image::{pull_reference, stored_image};
use skyhook_api::interrupt_payload::{AgentInterruptType, InterruptPayload};
use skyhook_api::keys;
use skyhook_api::pod_annotation::PodPackageAnnotation;
use skyhook_api::toleration::{UNSCHEDULABLE_TAINT_KEY, toleration_for};
use skyhook_api::v1alpha1::{Interrupt, Package, PackageResources, Stage};

use crate::cache::CachedPod;
use crate::config::PodSettings;
use crate::duration::{self, DurationError};
use crate::names::{
    self, OwnerSkyhook, check_container_name, copy_container_name, stage_container_name,
};

/// Name of the main container of every pod the controller creates.
pub const PAUSE_CONTAINER: &str = "pause";
/// Name of the main container of the pod of a stage Job, which exits 0 at once (see [`job_pod`]).
pub const DONE_CONTAINER: &str = "done";
/// Name of the single init container of an interrupt pod.
pub const INTERRUPT_CONTAINER: &str = "interrupt";

const ROOT_VOLUME: &str = "root-mount";
/// The taint of a node whose Ready condition is False.
const NOT_READY_TAINT_KEY: &str = "node.kubernetes.io/not-ready";
/// The taint of a node whose Ready condition is Unknown (its kubelet stopped reporting).
const UNREACHABLE_TAINT_KEY: &str = "node.kubernetes.io/unreachable";
const HOST_ROOT_MOUNT: &str = "/root";
const NODE_METADATA_MOUNT: &str = "/skyhook-package/node-metadata";
const CONFIGMAP_MOUNT: &str = "/skyhook-package/configmaps";
/// The copy container's command: upstream's, so existing package images keep working.
const COPY_SCRIPT: &str =
    "mkdir -p /root/${SKYHOOK_DIR} && cp -r /skyhook-package/* /root/${SKYHOOK_DIR}";

/// A pod cannot be built from the package as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    /// `gracefulShutdown` is not a Go duration.
    #[error("package {package:?} has an invalid gracefulShutdown")]
    GracefulShutdown {
        /// The package.
        package: String,
        /// Why the duration was rejected.
        #[source]
        source: DurationError,
    },
}

/// The pod running `stage` (and its check) of `package` on `node`.
///
/// For an uninstall of a package removed from the spec, pass the minimal package synthesised from
/// the node-state entry (name, version, image): it has no env, configMap, resources or agent
/// override, exactly like upstream's uninstall pods.
pub fn package_pod(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    package: &Package,
    node: &PodNode<'_>,
    stage: Stage,
) -> Result<Pod, PodError> {
    let termination_grace_period_seconds = termination_grace_period(package)?;
    let context = PodContext::new(settings, owner, package, *node);
    let (volumes, mounts) = package_volumes(owner, package, node.name);
    let mut pod = base_pod(
        &context,
        names::package_pod_name(
            owner.name,
            &package.name,
            &package.version,
            stage,
            node.name,
        ),
        stage,
        package_containers(&context, stage, &mounts),
        volumes,
    );
    if let Some(spec) = pod.spec.as_mut() {
        spec.termination_grace_period_seconds = termination_grace_period_seconds;
    }
    Ok(pod)
}

/// The package's `gracefulShutdown` in whole seconds, when it sets one.
fn termination_grace_period(package: &Package) -> Result<Option<i64>, PodError> {
    package
        .graceful_shutdown
        .as_deref()
        .map(|text| {
            duration::parse(text)
                .map(|grace| i64::try_from(grace.as_secs()).unwrap_or(i64::MAX))
                .map_err(|source| PodError::GracefulShutdown {
                    package: package.name.clone(),
                    source,
                })
        })
        .transpose()
}

/// The volumes of a package pod and where every init container mounts them: the host root, the
/// node metadata, and the package's ConfigMap when it has one.
fn package_volumes(
    owner: &OwnerSkyhook<'_>,
    package: &Package,
    node: &str,
) -> (Vec<Volume>, Vec<VolumeMount>) {
    let metadata_volume = names::node_metadata_volume_name(node);
    let mut volumes = vec![
        root_volume(),
        configmap_volume(
            &metadata_volume,
            &names::node_metadata_configmap_name(owner.name, node),
        ),
    ];
    let mut mounts = vec![
        root_mount(),
        VolumeMount {
            name: metadata_volume,
            mount_path: NODE_METADATA_MOUNT.to_owned(),
            ..VolumeMount::default()
        },
    ];
    if !package.config_map.is_empty() {
        volumes.push(configmap_volume(
            &package.name,
            &names::package_configmap_name(owner.name, &package.name, &package.version),
        ));
        // One read-only subPath mount per key (upstream v0.18), in key order: files the image
        // itself ships under the directory stay visible, which a mount of the whole directory
        // would hide. subPath mounts never live-update, which a stage does not need: a changed
        // configMap runs the config stage in a new pod.
        mounts.extend(package.config_map.keys().map(|key| VolumeMount {
            name: package.name.clone(),
            mount_path: format!("{CONFIGMAP_MOUNT}/{key}"),
            sub_path: Some(key.clone()),
            read_only: Some(true),
            ..VolumeMount::default()
        }));
    }
    (volumes, mounts)
}

/// The three init containers of a package pod: the copy of the package onto the host, then the
/// agent running `stage`, then the agent running its check.
fn package_containers(
    context: &PodContext<'_>,
    stage: Stage,
    mounts: &[VolumeMount],
) -> Vec<Container> {
    let PodContext {
        settings,
        owner,
        package,
        ..
    } = *context;
    let copy_dir = owner.copy_dir(settings, &package.name, &package.version);
    let resources = package
        .resources
        .as_ref()
        .filter(|resources| resources.any_set())
        .map(package_resources);
    let privileged = Some(SecurityContext {
        privileged: Some(true),
        ..SecurityContext::default()
    });

    let copy = Container {
        name: copy_container_name(&package.name),
        image: Some(pull_reference(
            &package.image,
            &package.version,
            package.container_sha.as_deref(),
        )),
        image_pull_policy: Some("Always".to_owned()),
        command: Some(vec!["/bin/sh".to_owned()]),
        args: Some(vec!["-c".to_owned(), COPY_SCRIPT.to_owned()]),
        env: Some(vec![env(keys::ENV_SKYHOOK_DIR, &copy_dir)]),
        security_context: privileged.clone(),
        volume_mounts: Some(mounts.to_vec()),
        resources: resources.clone(),
        ..Container::default()
    };
    let agent_env: Vec<EnvVar> = package
        .env
        .iter()
        .cloned()
        .chain(operator_env(
            settings,
            owner,
            &package.name,
            &package.version,
            context.node.order,
        ))
        .collect();
    let agent_image = agent_image(settings, package);
    let agent_container = |name: String, mode: String| Container {
        name,
        image: Some(agent_image.to_owned()),
        image_pull_policy: Some("Always".to_owned()),
        args: Some(vec![mode, HOST_ROOT_MOUNT.to_owned(), copy_dir.clone()]),
        env: Some(agent_env.clone()),
        security_context: privileged.clone(),
        volume_mounts: Some(mounts.to_vec()),
        resources: resources.clone(),
        ..Container::default()
    };
    let run = agent_container(
        stage_container_name(&package.name, stage),
        stage.as_str().to_owned(),
    );
    let check = agent_container(
        check_container_name(&package.name, stage),
        format!("{}-check", stage.as_str()),
    );
    vec![copy, run, check]
}

/// The pod that interrupts `node` (service restart, reboot…) on behalf of `package`, which owns
/// the wave's merged `interrupt`; the node's current boot ID is recorded on the pod.
pub fn interrupt_pod(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    package: &Package,
    interrupt: &Interrupt,
    node: &PodNode<'_>,
) -> Pod {
    let name = names::interrupt_pod_name(owner.name, interrupt.type_.as_str(), node.name);
    let pod = PodInterrupt {
        name,
        stage: Stage::Interrupt,
        resource_id: owner.stage_resource_id(Stage::Interrupt, &package.name, &package.version),
    };
    build_interrupt_pod(settings, owner, package, interrupt, node, pod)
}

/// The pod that runs `package`'s own `interrupt` on `node` after its explicit uninstall: stage
/// `uninstall-interrupt`, its own name, and its own `SKYHOOK_RESOURCE_ID`, because the agent
/// runs an interrupt once per resource ID and the install's interrupt of the same generation
/// has already used the ordinary one.
pub fn uninstall_interrupt_pod(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    package: &Package,
    interrupt: &Interrupt,
    node: &PodNode<'_>,
) -> Pod {
    let name = names::uninstall_interrupt_pod_name(owner.name, interrupt.type_.as_str(), node.name);
    let pod = PodInterrupt {
        name,
        stage: Stage::UninstallInterrupt,
        resource_id: owner.stage_resource_id(
            Stage::UninstallInterrupt,
            &package.name,
            &package.version,
        ),
    };
    build_interrupt_pod(settings, owner, package, interrupt, node, pod)
}

/// What tells an uninstall's interrupt pod from an install's.
struct PodInterrupt {
    name: String,
    stage: Stage,
    resource_id: String,
}

fn build_interrupt_pod(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    package: &Package,
    interrupt: &Interrupt,
    node: &PodNode<'_>,
    which: PodInterrupt,
) -> Pod {
    let keys = owner.group.keys();
    let copy_dir = owner.copy_dir(settings, &package.name, &package.version);
    // Upstream v0.18 raised the memory from 64Mi: the agent of an interrupt could be OOM-killed.
    let fixed = fixed_resources("500m", "256Mi");
    let mut env = operator_env(settings, owner, &package.name, &package.version, node.order);
    for variable in &mut env {
        if variable.name == keys::ENV_SKYHOOK_RESOURCE_ID {
            variable.value = Some(which.resource_id.clone());
        }
    }
    let container = Container {
        name: INTERRUPT_CONTAINER.to_owned(),
        image: Some(agent_image(settings, package).to_owned()),
        args: Some(vec![
            Stage::Interrupt.as_str().to_owned(),
            HOST_ROOT_MOUNT.to_owned(),
            copy_dir,
            InterruptPayload::from(interrupt).encode(),
        ]),
        env: Some(env),
        security_context: Some(SecurityContext {
            privileged: Some(true),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![root_mount()]),
        resources: Some(fixed),
        ..Container::default()
    };
    let context = PodContext::new(settings, owner, package, *node);
    let mut pod = base_pod(
        &context,
        which.name,
        which.stage,
        vec![container],
        vec![root_volume()],
    );
    pod.metadata.labels.get_or_insert_default().insert(
        keys.interrupt_label.to_owned(),
        keys::INTERRUPT_LABEL_VALUE.to_owned(),
    );
    pod
}

/// Whether `pod` is an interrupt pod whose interrupt is a reboot, read from the argument of its
/// `interrupt` container.
pub fn is_reboot_interrupt(pod: &CachedPod) -> bool {
    let Some(spec) = &pod.spec else {
        return false;
    };
    spec.init_containers
        .iter()
        .flatten()
        .filter(|container| container.name == INTERRUPT_CONTAINER)
        .filter_map(|container| container.args.as_ref()?.get(3))
        .filter_map(|argument| InterruptPayload::decode(argument).ok())
        .any(|payload| payload.type_ == AgentInterruptType::NodeRestart)
}

/// The variables the operator appends to the agent's environment, in upstream's order
/// ([`keys::OPERATOR_AGENT_ENV`]); `node_order` is the node's place in the rollout order.
pub fn operator_env(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    package: &str,
    version: &str,
    node_order: i64,
) -> Vec<EnvVar> {
    vec![
        env(
            keys::ENV_SKYHOOK_LOG_DIR,
            &format!("{}/{}", settings.agent_log_root, owner.name),
        ),
        env(
            keys::ENV_SKYHOOK_ROOT_DIR,
            &format!("{}/{}", settings.copy_dir_root, owner.name),
        ),
        env(keys::ENV_COPY_RESOLV, "false"),
        env(
            keys::ENV_SKYHOOK_RESOURCE_ID,
            &owner.package_resource_id(package, version),
        ),
        env(keys::ENV_SKYHOOK_NODE_ORDER, &node_order.to_string()),
    ]
}

/// The agent image of a package: its `agentImageOverride`, or the configured `AGENT_IMAGE`.
pub fn agent_image<'a>(settings: &'a PodSettings, package: &'a Package) -> &'a str {
    package
        .agent_image_override
        .as_deref()
        .filter(|image| !image.is_empty())
        .unwrap_or(&settings.agent_image)
}

/// The tolerations of every pod the controller creates: the cordon, the runtime-required taint
/// (always, so packages can run on nodes it gates) and the Skyhook's additional tolerations.
pub fn pod_tolerations(settings: &PodSettings, owner: &OwnerSkyhook<'_>) -> Vec<Toleration> {
    let cordon = Toleration {
        key: Some(UNSCHEDULABLE_TAINT_KEY.to_owned()),
        operator: Some("Exists".to_owned()),
        ..Toleration::default()
    };
    [cordon, toleration_for(&settings.runtime_required_taint)]
        .into_iter()
        .chain(owner.additional_tolerations.iter().cloned())
        .collect()
}

/// The pod of a stage Job, made from the package or interrupt pod built above (upstream v0.18's
/// `jobFromPod`, pod side only; the Job's own fields, restart policy and deadlines are the Job
/// builder's):
/// * the main container becomes [`DONE_CONTAINER`]: it runs the package image (already pulled by
///   the copy container, and known to have a shell, unlike a minimal agent image) and exits 0
///   at once, because a Job counts a pod as complete only once every container has terminated;
/// * `node.kubernetes.io/not-ready` and `node.kubernetes.io/unreachable` are tolerated with
///   `NoExecute` and no `tolerationSeconds`: otherwise admission adds 300s tolerations and the
///   taint manager evicts the node-bound pod when a reboot keeps the node NotReady longer, only
///   for the Job to create the same pod again.
pub fn job_pod(mut pod: Pod, package: &Package) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        for container in &mut spec.containers {
            if container.name == PAUSE_CONTAINER {
                *container = Container {
                    name: DONE_CONTAINER.to_owned(),
                    image: Some(pull_reference(
                        &package.image,
                        &package.version,
                        package.container_sha.as_deref(),
                    )),
                    command: Some(vec![
                        "/bin/sh".to_owned(),
                        "-c".to_owned(),
                        "exit 0".to_owned(),
                    ]),
                    ..std::mem::take(container)
                };
            }
        }
        let lifecycle = |key: &str| Toleration {
            key: Some(key.to_owned()),
            operator: Some("Exists".to_owned()),
            effect: Some("NoExecute".to_owned()),
            ..Toleration::default()
        };
        spec.tolerations.get_or_insert_default().extend([
            lifecycle(NOT_READY_TAINT_KEY),
            lifecycle(UNREACHABLE_TAINT_KEY),
        ]);
    }
    pod
}

/// The requests and limits a package's `resources` put on every init container.
pub fn package_resources(resources: &PackageResources) -> ResourceRequirements {
    let pair = |cpu: &Option<Quantity>, memory: &Option<Quantity>| {
        let list: BTreeMap<String, Quantity> = [("cpu", cpu), ("memory", memory)]
            .into_iter()
            .filter_map(|(name, quantity)| Some((name.to_owned(), quantity.clone()?)))
            .collect();
        Some(list).filter(|list| !list.is_empty())
    };
    ResourceRequirements {
        limits: pair(&resources.cpu_limit, &resources.memory_limit),
        requests: pair(&resources.cpu_request, &resources.memory_request),
        ..ResourceRequirements::default()
    }
}

/// The node a pod runs on, as the pod records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodNode<'a> {
    /// Node name.
    pub name: &'a str,
    /// The node's `status.nodeInfo.bootID` when the pod is created.
    pub boot_id: Option<&'a str>,
    /// The node's place in the Skyhook's rollout order (`SKYHOOK_NODE_ORDER`, see
    /// [`skyhook_api::budget::node_orders`]); 0 for a node not in it.
    pub order: i64,
}

impl<'a> PodNode<'a> {
    /// Node `name` with boot ID `boot_id`, first in the rollout order.
    pub fn new(name: &'a str, boot_id: Option<&'a str>) -> Self {
        PodNode {
            name,
            boot_id,
            order: 0,
        }
    }

    /// The same node at `order` in the rollout order.
    pub fn at_order(self, order: i64) -> Self {
        PodNode { order, ..self }
    }
}

/// What every pod the controller creates is for: the Skyhook and package it works for, and on
/// which node.
#[derive(Clone, Copy)]
struct PodContext<'a> {
    settings: &'a PodSettings,
    owner: &'a OwnerSkyhook<'a>,
    package: &'a Package,
    node: PodNode<'a>,
}

impl<'a> PodContext<'a> {
    fn new(
        settings: &'a PodSettings,
        owner: &'a OwnerSkyhook<'a>,
        package: &'a Package,
        node: PodNode<'a>,
    ) -> Self {
        PodContext {
            settings,
            owner,
            package,
            node,
        }
    }
}

/// Metadata and spec shared by package and interrupt pods.
fn base_pod(
    context: &PodContext<'_>,
    name: String,
    stage: Stage,
    init_containers: Vec<Container>,
    volumes: Vec<Volume>,
) -> Pod {
    let PodContext {
        settings,
        owner,
        package,
        node: PodNode {
            name: node,
            boot_id,
            ..
        },
    } = *context;
    let keys = owner.group.keys();
    let annotation = PodPackageAnnotation {
        name: package.name.clone(),
        version: package.version.clone(),
        skyhook: owner.name.to_owned(),
        stage,
        image: stored_image(&package.image),
        container_sha: package.container_sha.clone().unwrap_or_default(),
        invalid: false,
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(settings.namespace.clone()),
            labels: Some(BTreeMap::from([
                (keys.name_label.to_owned(), owner.name.to_owned()),
                (
                    keys.package_label.to_owned(),
                    names::package_label(&package.name, &package.version),
                ),
            ])),
            annotations: Some(
                std::iter::once((
                    keys.package_annotation.to_owned(),
                    annotation.to_annotation(),
                ))
                .chain(boot_id.map(|id| (keys.boot_id_annotation.to_owned(), id.to_owned())))
                .collect(),
            ),
            owner_references: Some(vec![owner.owner_reference()]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            restart_policy: Some("OnFailure".to_owned()),
            host_pid: Some(true),
            host_network: Some(true),
            init_containers: Some(init_containers),
            containers: vec![Container {
                name: PAUSE_CONTAINER.to_owned(),
                image: Some(settings.pause_image.clone()),
                resources: Some(fixed_resources("100m", "20Mi")),
                ..Container::default()
            }],
            image_pull_secrets: pull_secrets(
                settings.image_pull_secret.as_deref(),
                owner.image_pull_secrets,
            ),
            tolerations: Some(pod_tolerations(settings, owner)),
            priority_class_name: settings.priority_class_name.clone(),
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The pull secrets of a package or interrupt pod: the controller's `IMAGE_PULL_SECRET`, then
/// the Skyhook's `spec.imagePullSecrets`, each name once; `None` when there are none, as
/// upstream wrote it.
pub fn pull_secrets(
    global: Option<&str>,
    per_skyhook: &[LocalObjectReference],
) -> Option<Vec<LocalObjectReference>> {
    let mut secrets: Vec<LocalObjectReference> = Vec::new();
    let names = global
        .into_iter()
        .chain(per_skyhook.iter().map(|s| s.name.as_str()));
    for name in names.filter(|name| !name.is_empty()) {
        if !secrets.iter().any(|s| s.name == name) {
            secrets.push(LocalObjectReference {
                name: name.to_owned(),
            });
        }
    }
    (!secrets.is_empty()).then_some(secrets)
}

fn fixed_resources(cpu: &str, memory: &str) -> ResourceRequirements {
    let list = BTreeMap::from([
        ("cpu".to_owned(), Quantity(cpu.to_owned())),
        ("memory".to_owned(), Quantity(memory.to_owned())),
    ]);
    ResourceRequirements {
        limits: Some(list.clone()),
        requests: Some(list),
        ..ResourceRequirements::default()
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

fn root_volume() -> Volume {
    Volume {
        name: ROOT_VOLUME.to_owned(),
        host_path: Some(HostPathVolumeSource {
            path: "/".to_owned(),
            type_: None,
        }),
        ..Volume::default()
    }
}

fn root_mount() -> VolumeMount {
    VolumeMount {
        name: ROOT_VOLUME.to_owned(),
        mount_path: HOST_ROOT_MOUNT.to_owned(),
        mount_propagation: Some("HostToContainer".to_owned()),
        ..VolumeMount::default()
    }
}

fn configmap_volume(volume: &str, configmap: &str) -> Volume {
    Volume {
        name: volume.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: configmap.to_owned(),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

#[cfg(test)]
pub(crate) mod tests;
