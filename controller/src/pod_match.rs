//! Pod validation (spec §2.8 "Pod validation", upstream's `ValidateRunningPackages`): whether a
//! running package or interrupt pod still belongs to the Skyhook's spec and to the node's state.
//! This is how a spec edit replaces running pods and how a node reset clears stray pods.
//!
//! Contract: [`validate_pod`] is pure and says whether one pod of a Skyhook on one node must be
//! invalidated (marked `invalid`, after which it is deleted) and why. A pod is kept when both hold:
//! * it matches a spec package ([`matches_package`]): the same `skyhook.nvidia.com/package` label;
//!   the same init containers, in order, with the same names and images (the agent's image
//!   only when the package sets `agentImageOverride`: otherwise it is the operator's
//!   `AGENT_IMAGE`, which an upgrade may move under a running stage); the same environment once
//!   the operator-injected variables are removed (they change with every generation); and,
//!   for package pods, the same resources when the package sets them, or none at all when it does
//!   not (unless the LimitRanger filled them in, which it records in the
//!   `kubernetes.io/limit-ranger` annotation). Legacy uninstall pods are exempt: their package
//!   version has left the spec by definition;
//! * the node state has an entry for the pod's package version, at the pod's stage.
//!
//! The operator-injected variables are upstream's four agent variables plus the copy container's
//! `SKYHOOK_DIR`. Upstream compared `SKYHOOK_DIR`, which holds the generation, so any edit of a
//! Skyhook restarted every running pod of it, against the intent of excluding the others; we do
//! not.
//!
//! Environment comparison tolerates what the API server adds on its own (an empty `value` dropped,
//! `fieldRef.apiVersion` defaulted to `v1`; the cache keeps a container's environment as a digest
//! of exactly what is compared, [`crate::cache::pod::EnvDigest`]) and compares resource
//! quantities by value, because the API server rewrites them in canonical form (`0.5` becomes
//! `500m`); a pod is therefore never invalidated in a loop because of defaulting.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use skyhook_api::keys;
use skyhook_api::node_state::NodeState;
use skyhook_api::pod_annotation::PodPackageAnnotation;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, Package, Stage};
use skyhook_api::validate::{QuantityValue, parse_quantity};

use crate::cache::CachedPod;
use crate::cache::pod::{CachedContainer, CachedResources};
use crate::config::PodSettings;
use crate::names::{self, OwnerSkyhook};
use crate::pods::{PodNode, interrupt_pod, package_pod};

/// Annotation the LimitRanger admission plugin puts on pods whose resources it set.
pub const LIMIT_RANGER_ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// Whether a pod stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The pod belongs to the spec and the node state.
    Keep,
    /// The pod must be invalidated.
    Invalidate(InvalidReason),
}

/// Why a pod is invalidated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidReason {
    /// It is already marked invalid and waits for deletion.
    AlreadyMarked,
    /// Its `skyhook.nvidia.com/package` annotation is missing or unreadable.
    Unreadable,
    /// No package of the spec matches it (the spec changed under it).
    NoMatchingPackage,
    /// The node state has no entry for its package version (for example after a node reset).
    NotInNodeState,
    /// The node state has moved its package to another stage.
    StageMismatch {
        /// The pod's stage.
        pod: Stage,
        /// The stage in the node state.
        node_state: Stage,
    },
}

/// Skyhook, package name and version, stage, and whether the pod is the interrupt's.
type ExpectedKey = (String, String, String, Stage, bool);

/// The init containers the pods of each package are expected to run, built once per (Skyhook,
/// package version, stage, package or interrupt pod) and reused for every pod validated against the same
/// spec: building a package's pod is most of what validating one of its pods costs, and a plan
/// validates every pod of the cluster. Keep one for as long as the specs do not change (one
/// plan).
#[derive(Debug, Default)]
pub struct ExpectedContainers {
    built: HashMap<ExpectedKey, Option<Vec<CachedContainer>>>,
}

impl ExpectedContainers {
    /// The init containers `stage` of `package` runs for `owner` (its interrupt pod's when
    /// `interrupt`); `None` when the package's pod cannot be built.
    fn of(
        &mut self,
        settings: &PodSettings,
        owner: &OwnerSkyhook<'_>,
        package: &Package,
        stage: Stage,
        interrupt: bool,
    ) -> Option<&[CachedContainer]> {
        let key = (
            owner.name.to_owned(),
            package.name.clone(),
            package.version.clone(),
            stage,
            interrupt,
        );
        self.built
            .entry(key)
            .or_insert_with(|| {
                let pod = expected_pod(settings, owner, package, stage, interrupt)?;
                let containers = pod.spec.and_then(|spec| spec.init_containers);
                Some(
                    containers
                        .into_iter()
                        .flatten()
                        .map(CachedContainer::from)
                        .collect(),
                )
            })
            .as_deref()
    }
}

/// Decides whether `pod`, a pod of `owner` on a node whose state for `owner` is `node_state`, is
/// kept, comparing it with the containers of `expected` (built from `packages` on first use).
/// See the module documentation.
pub fn validate_pod(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    packages: &BTreeMap<String, Package>,
    node_state: &NodeState,
    pod: &CachedPod,
    expected: &mut ExpectedContainers,
) -> Verdict {
    let keys = owner.group.keys();
    let Some(annotation) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(keys.package_annotation))
        .and_then(|text| PodPackageAnnotation::parse(text).ok())
    else {
        return Verdict::Invalidate(InvalidReason::Unreadable);
    };
    if annotation.invalid {
        return Verdict::Invalidate(InvalidReason::AlreadyMarked);
    }
    // A legacy uninstall (of a removed package or an old version) has no spec to match; an
    // explicit one (the spec version) is checked like any pod, so editing a failing uninstall's
    // env or image replaces its pod.
    let legacy_uninstall = annotation.stage == Stage::Uninstall
        && packages
            .get(&annotation.name)
            .is_none_or(|p| p.version != annotation.version);
    let in_spec = legacy_uninstall
        || packages.values().any(|package| {
            matches_package(settings, owner, pod, package, annotation.stage, expected)
        });
    if !in_spec {
        return Verdict::Invalidate(InvalidReason::NoMatchingPackage);
    }
    match node_state.get_version(&annotation.name, &annotation.version) {
        None => Verdict::Invalidate(InvalidReason::NotInNodeState),
        Some(entry) if entry.stage != annotation.stage => {
            Verdict::Invalidate(InvalidReason::StageMismatch {
                pod: annotation.stage,
                node_state: entry.stage,
            })
        }
        Some(_) => Verdict::Keep,
    }
}

/// Whether `pod` runs `stage` of `package` as the spec describes it now. See the module
/// documentation for what is compared.
fn matches_package(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    pod: &CachedPod,
    package: &Package,
    stage: Stage,
    expected: &mut ExpectedContainers,
) -> bool {
    let keys = owner.group.keys();
    let labels = pod.metadata.labels.as_ref();
    let label = |key: &str| {
        labels
            .and_then(|labels| labels.get(key))
            .map(String::as_str)
    };
    if label(keys.package_label) != Some(&names::package_label(&package.name, &package.version)) {
        return false;
    }
    let is_interrupt = label(keys.interrupt_label) == Some(keys::INTERRUPT_LABEL_VALUE);
    let Some(expected) = expected.of(settings, owner, package, stage, is_interrupt) else {
        return false;
    };
    let limit_ranged = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(LIMIT_RANGER_ANNOTATION));
    let check_resources = !is_interrupt;
    let package_sets_resources = package
        .resources
        .as_ref()
        .is_some_and(|resources| resources.any_set());

    // The operator's agent image (`AGENT_IMAGE`) is its setting, not the spec's: a stage
    // running with another agent (a `helm upgrade` moved it, or upstream's operator started the
    // stage) is the same step, and is not run again; the next stage uses the new agent.
    let operator_agent =
        (package.agent_image_override.is_none()).then_some(settings.agent_image.as_str());
    let actual = init_containers(pod);
    actual.len() == expected.len()
        && actual.iter().zip(expected).all(|(actual, expected)| {
            let agent = operator_agent.is_some() && expected.image.as_deref() == operator_agent;
            actual.name == expected.name
                && (actual.image == expected.image || agent)
                && actual.env == expected.env
                && (!check_resources
                    || resources_match(
                        actual.resources.as_ref(),
                        expected.resources.as_ref(),
                        package_sets_resources,
                        limit_ranged,
                    ))
        })
}

/// The pod `package`'s `stage` (or its interrupt, where only the container name and agent image
/// matter, so any interrupt serves) would get on a node; `None` when it cannot be built.
fn expected_pod(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    package: &Package,
    stage: Stage,
    interrupt: bool,
) -> Option<Pod> {
    let node = PodNode::new("", None);
    if interrupt {
        let any_interrupt = Interrupt {
            type_: InterruptType::Noop,
            services: Vec::new(),
        };
        Some(interrupt_pod(
            settings,
            owner,
            package,
            &any_interrupt,
            &node,
        ))
    } else {
        package_pod(settings, owner, package, &node, stage).ok()
    }
}

fn init_containers(pod: &CachedPod) -> &[CachedContainer] {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.init_containers.as_deref())
        .unwrap_or_default()
}

fn resources_match(
    actual: Option<&CachedResources>,
    expected: Option<&CachedResources>,
    package_sets_resources: bool,
    limit_ranged: bool,
) -> bool {
    if package_sets_resources {
        lists(actual) == lists(expected)
    } else {
        limit_ranged || lists(actual) == (None, None)
    }
}

/// Limits and requests by value.
fn lists(requirements: Option<&CachedResources>) -> (ResourceValues<'_>, ResourceValues<'_>) {
    requirements.map_or((None, None), |r| {
        (values(r.limits.as_deref()), values(r.requests.as_deref()))
    })
}

/// A resource list by value, `None` when absent or empty.
type ResourceValues<'a> = Option<BTreeMap<&'a str, QuantityOrText<'a>>>;

/// A resource list by value; a quantity that does not parse is kept as its text, so it still
/// compares equal only to itself. `None` for an absent or empty list.
fn values(list: Option<&[(String, Quantity)]>) -> ResourceValues<'_> {
    let list = list.filter(|list| !list.is_empty())?;
    Some(
        list.iter()
            .map(|(name, quantity)| {
                let value = parse_quantity(&quantity.0)
                    .map_or(QuantityOrText::Text(&quantity.0), QuantityOrText::Value);
                (name.as_str(), value)
            })
            .collect(),
    )
}

#[derive(Debug, PartialEq, Eq)]
enum QuantityOrText<'a> {
    Value(QuantityValue),
    Text(&'a str),
}

#[cfg(test)]
mod tests;
