//! What a workload moving between the two API groups reads of the caches (a migration, design
//! `nodewright.md` §3.3): whose runs are in flight (a takeover waits for them), which objects
//! are inert twins, and what an object of the other group than its name's live one left in the
//! controller's namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use skyhook_api::generation::{
    Candidate, Group, InertReason, Liveness, Owners, group_of_labels, liveness,
};
use skyhook_api::v1alpha1::Skyhook;

use crate::cache::{self, CachedObjects};
use crate::pre_pull::is_pre_pull;

/// An object of a name whose twin of the other group does the work, or holds it until the
/// twin settles (see [`liveness`]): it runs nothing, and only its status and finalizer are
/// written.
#[derive(Debug, Clone)]
pub struct Twin {
    /// The group it was read from.
    pub group: Group,
    /// The object, shared with the cache.
    pub object: Arc<Skyhook>,
    /// Why it is inert.
    pub reason: InertReason,
}

impl Twin {
    /// Its name.
    pub fn name(&self) -> &str {
        self.object.metadata.name.as_deref().unwrap_or_default()
    }
}

/// What a leftover is, with what moving it to the live object needs.
#[derive(Debug, Clone, PartialEq)]
pub enum LeftoverKind {
    /// A finished stage Job (its pods go with it).
    Job,
    /// A bare pod that ended, or a pre-pull pod.
    Pod,
    /// A package ConfigMap: moved to the live object, with its labels and owners as read.
    PackageConfigMap {
        /// Its labels.
        labels: BTreeMap<String, String>,
        /// Its owner references.
        owner_references: Vec<OwnerReference>,
    },
    /// A node-metadata ConfigMap: written again by the live object for each pod it starts.
    MetadataConfigMap,
}

/// An object in the controller's namespace that an object of `group` made for `owner`, a name
/// whose live object is of the other group.
#[derive(Debug, Clone, PartialEq)]
pub struct Leftover {
    /// What it is.
    pub kind: LeftoverKind,
    /// Its name.
    pub name: String,
    /// The group whose labels it carries.
    pub group: Group,
    /// The name of the workload it was made for.
    pub owner: String,
    /// Its uid: a deletion is conditional on it, so that an object of the same name the live
    /// object made since is never deleted in its place.
    pub uid: Option<String>,
    /// Its resource version, for the same reason (a ConfigMap keeps its uid when rewritten).
    pub resource_version: Option<String>,
}

impl Leftover {
    /// The leftover `kind` read from `metadata`, made by the object `owner` of `group`.
    fn of(kind: LeftoverKind, metadata: &ObjectMeta, group: Group, owner: String) -> Self {
        Leftover {
            kind,
            name: metadata.name.clone().unwrap_or_default(),
            group,
            owner,
            uid: metadata.uid.clone(),
            resource_version: metadata.resource_version.clone(),
        }
    }
}

/// Which object of each name is live, and the inert twins: the liveness rule over every name,
/// with each object's runs in flight.
pub(super) fn live_objects(cached: &CachedObjects) -> (Owners, Vec<Twin>) {
    live_objects_of(&cached.skyhooks, &cached.nodewrights, &busy(cached))
}

/// [`live_objects`] over the objects of each group, with the (group, name) pairs whose runs
/// are in flight (`busy`).
pub fn live_objects_of(
    skyhooks: &[Arc<Skyhook>],
    nodewrights: &[Arc<Skyhook>],
    busy: &BTreeSet<(Group, String)>,
) -> (Owners, Vec<Twin>) {
    let named = |objects: &[Arc<Skyhook>]| -> BTreeMap<String, Arc<Skyhook>> {
        (objects.iter())
            .filter_map(|o| Some((o.metadata.name.clone()?, Arc::clone(o))))
            .collect()
    };
    let (skyhooks, nodewrights) = (named(skyhooks), named(nodewrights));
    let names: BTreeSet<&String> = skyhooks.keys().chain(nodewrights.keys()).collect();
    let mut twins = Vec::new();
    let owners = Owners::new(names.into_iter().map(|name| {
        let skyhook = skyhooks.get(name);
        let nodewright = nodewrights.get(name);
        let skyhook_candidate = skyhook.map(|s| candidate(Group::Skyhook, s, busy));
        let nodewright_candidate = nodewright.map(|n| candidate(Group::NodeWright, n, busy));
        let (skyhook_liveness, nodewright_liveness) =
            liveness(skyhook_candidate, nodewright_candidate);
        for (group, object, liveness) in [
            (Group::Skyhook, skyhook, skyhook_liveness),
            (Group::NodeWright, nodewright, nodewright_liveness),
        ] {
            if let (Some(object), Some(Liveness::Inert(reason))) = (object, liveness) {
                twins.push(Twin {
                    group,
                    object: Arc::clone(object),
                    reason,
                });
            }
        }
        (name.as_str(), skyhook_candidate, nodewright_candidate)
    }));
    (owners, twins)
}

/// What the liveness rule reads of `object` of `group`.
fn candidate<'a>(
    group: Group,
    object: &'a Skyhook,
    busy: &BTreeSet<(Group, String)>,
) -> Candidate<'a> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    Candidate {
        status: object.status.as_ref().and_then(|s| s.status),
        annotations: object.metadata.annotations.as_ref().unwrap_or(&NONE),
        busy: (object.metadata.name.as_ref())
            .is_some_and(|name| busy.contains(&(group, name.clone()))),
    }
}

/// The (group, name) pairs with a run in flight: a stage Job not finished (a suspended one
/// too), or a bare package pod not ended. Pre-pull pods run nothing on the host and hold
/// nothing back.
fn busy(cached: &CachedObjects) -> BTreeSet<(Group, String)> {
    let jobs = (cached.jobs.iter())
        .filter(|job| !job.finished())
        .filter_map(|job| labelled_owner(job.template.metadata.labels.as_ref()));
    let pods = (cached.pods.iter())
        .filter(|pod| bare(pod) && !is_pre_pull(pod) && !ended(pod))
        .filter_map(|pod| labelled_owner(pod.metadata.labels.as_ref()));
    jobs.chain(pods).collect()
}

/// What the objects of the other group than each name's live one left: finished Jobs, ended
/// bare pods and pre-pull pods, package and node-metadata ConfigMaps. Runs still in flight are
/// not leftovers: the liveness rule keeps their object live until they end.
pub(super) fn leftovers(cached: &CachedObjects, owners: &Owners) -> Vec<Leftover> {
    let shadowed = |group: Group, name: &str| owners.live(name).is_some_and(|live| live != group);
    let of_labels = |labels: Option<&BTreeMap<String, String>>| {
        labelled_owner(labels).filter(|(group, name)| shadowed(*group, name))
    };
    let mut leftovers = Vec::new();
    for job in cached.jobs.iter().filter(|job| job.finished()) {
        if let Some((group, owner)) = of_labels(job.template.metadata.labels.as_ref()) {
            leftovers.push(Leftover::of(LeftoverKind::Job, &job.metadata, group, owner));
        }
    }
    let ended_pods =
        (cached.pods.iter()).filter(|pod| bare(pod) && (is_pre_pull(pod) || ended(pod)));
    for pod in ended_pods {
        if let Some((group, owner)) = of_labels(pod.metadata.labels.as_ref()) {
            leftovers.push(Leftover::of(LeftoverKind::Pod, &pod.metadata, group, owner));
        }
    }
    for configmap in &cached.package_configmaps {
        let metadata = &configmap.metadata;
        if let Some((group, owner)) = of_labels(metadata.labels.as_ref()) {
            let kind = LeftoverKind::PackageConfigMap {
                labels: metadata.labels.clone().unwrap_or_default(),
                owner_references: metadata.owner_references.clone().unwrap_or_default(),
            };
            leftovers.push(Leftover::of(kind, metadata, group, owner));
        }
    }
    for configmap in &cached.metadata_configmaps {
        let Some((group, owner)) = configmap.owner() else {
            continue;
        };
        if shadowed(group, owner) {
            let metadata = kube::Resource::meta(configmap.as_ref());
            let kind = LeftoverKind::MetadataConfigMap;
            leftovers.push(Leftover::of(kind, metadata, group, owner.to_owned()));
        }
    }
    leftovers
}

/// The group and name of the object whose `<group>/name` label an operator object carries.
fn labelled_owner(labels: Option<&BTreeMap<String, String>>) -> Option<(Group, String)> {
    let group = group_of_labels(labels);
    let name = labels?.get(group.keys().name_label)?;
    Some((group, name.clone()))
}

/// Not an attempt of a stage Job.
fn bare(pod: &cache::CachedPod) -> bool {
    (pod.metadata.owner_references.iter().flatten()).all(|reference| reference.kind != "Job")
}

/// Its phase is `Succeeded` or `Failed`.
fn ended(pod: &cache::CachedPod) -> bool {
    (pod.status.as_ref().and_then(|s| s.phase.as_deref()))
        .is_some_and(|phase| matches!(phase, "Succeeded" | "Failed"))
}
