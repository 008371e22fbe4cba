//! The plain data one reconcile reads: every Skyhook and DeploymentPolicy, the nodes reduced to
//! what the rules look at, the controller's own pods with their outcome already classified, its
//! ConfigMaps, the workload pods of the nodes being drained, and the PodDisruptionBudgets.
//!
//! Contract: [`Snapshot::build`] is pure. It takes the reflector snapshot plus the per-node pod
//! listings the I/O layer fetched (only for nodes a Skyhook has cordoned, see
//! [`Snapshot::nodes_to_list`]) and classifies each owned pod with [`pod_outcome::outcome`] at the
//! given time, so that the plan never reads a clock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use skyhook_api::generation::{Group, InertReason, Owners, group_of_labels};
use skyhook_api::keys;
use skyhook_api::migration::seed_status;
use skyhook_api::pod_annotation::PodPackageAnnotation;
use skyhook_api::v1alpha1::{DeploymentPolicySpec, Skyhook};

use crate::cache;
use crate::cache::node_metadata::CachedNodeMetadata;
use crate::drain::refusals::EvictionRefusals;
use crate::job_outcome;
use crate::last_logs::{self, LastLogs};
pub use crate::node_view::{ForeignCondition, NodeConditionView, NodeView, node_view};
use crate::pod_outcome::{self, OutcomeContext, PodOutcome};
use crate::pre_pull::{PullState, is_pre_pull, pull_state, recorded_images};

mod handover;
pub use handover::{Leftover, LeftoverKind, Twin, live_objects_of};

/// Everything a plan reads.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The live object of every name, of either group, with its group.
    pub skyhooks: Vec<Workload>,
    /// Which group's object is live for each name: the keys of the other group are a
    /// migration's shadows, which hold no cordon and no slot.
    pub owners: Owners,
    /// The objects whose twin of the other group does their name's work, or holds it until
    /// they settle.
    pub twins: Vec<Twin>,
    /// What objects of the other group than their name's live one left in the namespace.
    pub leftovers: Vec<Leftover>,
    /// Every DeploymentPolicy spec, by group and name: a workload names a policy of its own
    /// group.
    pub policies: BTreeMap<(Group, String), DeploymentPolicySpec>,
    /// Every node, shared with the cache.
    pub nodes: Vec<Arc<NodeView>>,
    /// The controller's runs of package stages and interrupts: each stage Job not yet recorded
    /// as complete (read through its pod template and its newest attempt), and each bare pod
    /// an earlier release made.
    pub pods: Vec<OwnedPod>,
    /// The stage Jobs whose completion is recorded, kept for their logs until their TTL or
    /// until their stage is due again.
    pub retained_jobs: Vec<RetainedJob>,
    /// The pods pulling images before a cordon ([`crate::pre_pull`]), with where each stands.
    pub pre_pulls: Vec<PrePullRun>,
    /// The package ConfigMaps, by name.
    pub package_configmaps: BTreeMap<String, OwnedConfigMap>,
    /// The node-metadata ConfigMaps, by name.
    pub metadata_configmaps: BTreeMap<String, OwnedConfigMap<CachedNodeMetadata>>,
    /// All pods (any namespace) of the nodes listed in [`Snapshot::nodes_to_list`], by node. A
    /// node missing here has not been listed: the plan waits rather than guess.
    pub workload_pods: BTreeMap<String, Vec<Pod>>,
    /// Every PodDisruptionBudget, to explain a stuck drain.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// The evictions PodDisruptionBudgets refused, per node (kept by the reconcile loop
    /// between reconciles).
    pub refusals: EvictionRefusals,
    /// The (Skyhook, node) pairs pods matching `podNonInterruptLabels` held in the previous
    /// plan (kept by the reconcile loop, in memory); `None` before this process's first plan,
    /// when the Skyhook's `Blocked` condition stands in for it.
    pub non_interrupt_held: Option<BTreeSet<(String, String)>>,
    /// The picks of the previous plan that reached neither the node nor the status (kept by
    /// the reconcile loop, in memory; see [`lost_picks`]), by Skyhook and node.
    pub lost_picks: LostPicks,
}

/// An object that rolls packages out, of either group: a `Skyhook` or a `NodeWright` (the two
/// share one spec), with the group it was read from beside it, never inside the spec. It reads
/// as the object it holds.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The group the object was read from; every key it writes is this group's.
    pub group: Group,
    /// The object, shared with the cache: its status mirrors its nodes (about 2 MiB at 1,000
    /// nodes), too much to copy into every snapshot.
    pub object: Arc<Skyhook>,
}

impl Workload {
    /// The object `object` of `group`.
    pub fn new(group: Group, object: impl Into<Arc<Skyhook>>) -> Self {
        Workload {
            group,
            object: object.into(),
        }
    }
}

impl std::ops::Deref for Workload {
    type Target = Skyhook;

    fn deref(&self) -> &Skyhook {
        &self.object
    }
}

/// Picks by Skyhook, then node: when the node was picked for the current batch.
pub type LostPicks =
    BTreeMap<String, BTreeMap<String, k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>>;

/// The batch picks of a plan whose node patch was refused (`refused`): a pick lives on its
/// node (`pickedAt_<skyhook>`) and in the status mirror, and a plan with a refused node patch
/// writes no status, so without this the next plan forgets that the node is in the current
/// batch. It then waits for a later batch, which never starts while the batch's other nodes
/// are held (a blocked drain): a node picked together with nodes whose patches landed would be
/// left out of its own batch. The next plan counts these nodes as picked.
pub fn lost_picks(
    statuses: &BTreeMap<String, skyhook_api::v1alpha1::SkyhookStatus>,
    refused: &BTreeSet<String>,
) -> LostPicks {
    statuses
        .iter()
        .filter_map(|(skyhook, status)| {
            let picks: BTreeMap<_, _> = status
                .node_priority
                .iter()
                .filter(|(node, _)| refused.contains(node.as_str()))
                .map(|(node, at)| (node.clone(), at.clone()))
                .collect();
            (!picks.is_empty()).then(|| (skyhook.clone(), picks))
        })
        .collect()
}

/// One of the controller's pods, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedPod {
    /// The pod as cached, shared with the cache (validation compares its containers with the
    /// spec).
    pub pod: std::sync::Arc<cache::CachedPod>,
    /// Pod name.
    pub name: String,
    /// `spec.nodeName`.
    pub node: String,
    /// The group of the object it runs for: the group whose `<group>/name` label it carries.
    pub group: Group,
    /// The `<group>/name` label.
    pub skyhook: String,
    /// The `<group>/package` label (`<pkg>-<version>`).
    pub package_label: String,
    /// The parsed `<group>/package` annotation.
    pub annotation: Option<PodPackageAnnotation>,
    /// It is an interrupt pod.
    pub interrupt: bool,
    /// It has a deletion timestamp.
    pub deleting: bool,
    /// What its status means.
    pub outcome: PodOutcome,
    /// For a stage Job's run, the Job's own state; `None` for a bare pod.
    pub job: Option<JobRun>,
}

/// The state of the stage Job behind an [`OwnedPod`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobRun {
    /// `spec.suspend` is set.
    pub suspended: bool,
    /// It completed or failed for good.
    pub finished: bool,
    /// Its end is written to the node state (annotation `state-recorded`).
    pub recorded: bool,
    /// Its failed attempts to delete, keeping the first and the newest for `kubectl logs`.
    pub prune: Vec<String>,
    /// For an interrupt other than a reboot: the restarts of its container allowed
    /// (annotation `restart-allowance`, stamped at creation).
    pub restart_allowance: Option<i32>,
    /// The allowance is spent (annotation `restart-limit-exceeded`).
    pub restart_limit_exceeded: bool,
    /// Since when the Job controller has decided that the Job fails (condition
    /// `FailureTarget`), while the Job is unfinished: its failure is recorded once that is
    /// [`job_outcome::FAILURE_TARGET_GRACE`] old.
    pub failure_target_since: Option<Timestamp>,
    /// What its `last-logs` annotation must hold, when it needs one now
    /// ([`crate::last_logs::needed`]).
    pub last_logs: Option<LastLogs>,
}

/// A pod pulling a node's images for a Skyhook before its cordon.
#[derive(Debug, Clone, PartialEq)]
pub struct PrePullRun {
    /// Pod name.
    pub name: String,
    /// The Skyhook (label `<group>/name`).
    pub skyhook: String,
    /// `spec.nodeName`.
    pub node: String,
    /// The images it pulls, in order (its annotation).
    pub images: Vec<String>,
    /// Where it stands.
    pub state: PullState,
    /// It has a deletion timestamp.
    pub deleting: bool,
}

/// A stage Job whose completion is recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct RetainedJob {
    /// Job name.
    pub name: String,
    /// The group of the object it ran for.
    pub group: Group,
    /// The node it ran on.
    pub node: String,
    /// Its package annotation.
    pub annotation: Option<PodPackageAnnotation>,
    /// It is being deleted.
    pub deleting: bool,
}

/// A ConfigMap the controller owns: its owner and node, and the cached object itself (a
/// package ConfigMap whole, a node-metadata ConfigMap as [`CachedNodeMetadata`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedConfigMap<C = ConfigMap> {
    /// The owning object's group: the group of its label.
    pub group: Group,
    /// The owning object (label `<group>/name` or `<group>/skyhook-node-meta`).
    pub skyhook: String,
    /// For node-metadata ConfigMaps, the node (annotation `<group>/Node.name`).
    pub node: Option<String>,
    /// The ConfigMap as cached, shared with the cache: a node-metadata ConfigMap carries its
    /// node's labels and annotations, and copying every one into every snapshot cost a reconcile
    /// megabytes (one per node and Skyhook).
    configmap: std::sync::Arc<C>,
}

impl<C> OwnedConfigMap<C> {
    /// The ConfigMap `configmap` of the object `skyhook` of `group` (and of `node`, for a
    /// node-metadata ConfigMap).
    pub fn new(
        group: Group,
        skyhook: String,
        node: Option<String>,
        configmap: std::sync::Arc<C>,
    ) -> Self {
        OwnedConfigMap {
            group,
            skyhook,
            node,
            configmap,
        }
    }
}

impl OwnedConfigMap<CachedNodeMetadata> {
    /// Whether the ConfigMap holds exactly `data`.
    pub fn holds(&self, data: Option<&BTreeMap<String, String>>) -> bool {
        self.configmap.holds(data)
    }

    /// Its `packages.json`, if it has one.
    pub fn packages_json(&self) -> Option<&str> {
        self.configmap.packages_json()
    }
}

impl OwnedConfigMap {
    /// Its data; empty when it has none.
    pub fn data(&self) -> &BTreeMap<String, String> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        self.configmap.data.as_ref().unwrap_or(&NONE)
    }
}

impl Snapshot {
    /// Builds the snapshot from the caches, the workload pods listed per node and the budgets.
    pub fn build(
        cached: &cache::CachedObjects,
        workload_pods: BTreeMap<String, Vec<Pod>>,
        pdbs: Vec<PodDisruptionBudget>,
        now: Timestamp,
        reboot_deadline: Duration,
    ) -> Snapshot {
        let nodes: Vec<Arc<NodeView>> = cached.nodes.iter().map(|n| Arc::clone(n.view())).collect();
        let (owners, twins) = handover::live_objects(cached);
        let leftovers = handover::leftovers(cached, &owners);
        // A run of the other group than its name's live object is a migration's: left alone.
        let live = |group: Group, labels: Option<&BTreeMap<String, String>>| {
            (labels.and_then(|l| l.get(group.keys().name_label)))
                .is_none_or(|name| owners.is_live(group, name))
        };
        let boot_ids: BTreeMap<&str, Option<&str>> = nodes
            .iter()
            .map(|n| (n.name.as_str(), n.boot_id.as_deref()))
            .collect();
        let deadlines = reboot_deadlines(
            [
                (Group::Skyhook, cached.skyhooks.as_slice()),
                (Group::NodeWright, cached.nodewrights.as_slice()),
            ],
            reboot_deadline,
        );
        let context_of =
            |group: Group, labels: Option<&BTreeMap<String, String>>, node: &str| OutcomeContext {
                node_boot_id: boot_ids.get(node).copied().flatten(),
                now,
                reboot_deadline: labels
                    .and_then(|l| l.get(group.keys().name_label))
                    .and_then(|name| deadlines.get(&(group, name.as_str())).copied())
                    .unwrap_or(reboot_deadline),
            };
        let mut attempts: BTreeMap<&str, Vec<&cache::CachedPod>> = BTreeMap::new();
        for pod in &cached.pods {
            if let Some(job) = job_of(pod) {
                attempts.entry(job).or_default().push(pod);
            }
        }
        let mut retained_jobs = Vec::new();
        let mut pods: Vec<OwnedPod> = Vec::new();
        for job in &cached.jobs {
            let Some(name) = job.metadata.name.as_deref() else {
                continue;
            };
            let run = &job.template;
            // The template's labels, as the attempts' (the Job controller copies them).
            let group = group_of_labels(run.metadata.labels.as_ref());
            if !live(group, run.metadata.labels.as_ref()) {
                continue;
            }
            let keys = group.keys();
            let node = run
                .spec
                .as_ref()
                .and_then(|spec| spec.node_name.as_deref())
                .unwrap_or_default();
            let annotations = job.metadata.annotations.as_ref();
            let recorded = annotations
                .and_then(|a| a.get(keys.state_recorded_annotation))
                .is_some_and(|value| value == "true");
            if recorded && job.complete() {
                retained_jobs.push(RetainedJob {
                    name: name.to_owned(),
                    group,
                    node: node.to_owned(),
                    annotation: package_annotation_of(group, run),
                    deleting: job.metadata.deletion_timestamp.is_some(),
                });
                continue;
            }
            let tried = attempts.get(name).map(Vec::as_slice).unwrap_or_default();
            let context = context_of(group, run.metadata.labels.as_ref(), node);
            let outcome = job_outcome::outcome(job, tried, context);
            let prune = job_outcome::attempts_to_prune(tried)
                .iter()
                .filter_map(|pod| pod.metadata.name.clone())
                .collect();
            if let Some(mut owned) = OwnedPod::new(std::sync::Arc::clone(run), outcome) {
                owned.job = Some(JobRun {
                    suspended: job.suspend,
                    finished: job.finished(),
                    recorded,
                    prune,
                    restart_allowance: annotations
                        .and_then(|a| a.get(keys.restart_allowance_annotation))
                        .and_then(|value| value.parse().ok()),
                    restart_limit_exceeded: annotations
                        .is_some_and(|a| a.contains_key(keys.restart_limit_exceeded_annotation)),
                    failure_target_since: (job.condition(job_outcome::FAILURE_TARGET))
                        .filter(|_| !job.finished())
                        .and_then(|target| target.since),
                    last_logs: last_logs::needed(job, tried),
                });
                pods.push(owned);
            }
        }
        let pre_pulls = (cached.pods.iter())
            .filter(|pod| job_of(pod).is_none() && is_pre_pull(pod))
            .filter_map(|pod| {
                let images = recorded_images(pod);
                let labels = pod.metadata.labels.as_ref()?;
                let group = group_of_labels(Some(labels));
                if !live(group, Some(labels)) {
                    return None;
                }
                Some(PrePullRun {
                    name: pod.metadata.name.clone()?,
                    skyhook: labels.get(group.keys().name_label)?.clone(),
                    node: pod.spec.as_ref()?.node_name.clone()?,
                    state: pull_state(pod, &images),
                    images,
                    deleting: pod.metadata.deletion_timestamp.is_some(),
                })
            })
            .collect();
        let bare = cached
            .pods
            .iter()
            .filter(|pod| job_of(pod).is_none() && !is_pre_pull(pod))
            .filter_map(|pod| {
                let labels = pod.metadata.labels.as_ref();
                let group = group_of_labels(labels);
                if !live(group, labels) {
                    return None;
                }
                let node = pod.spec.as_ref()?.node_name.as_deref()?;
                let outcome = pod_outcome::outcome(pod, context_of(group, labels, node));
                OwnedPod::new(std::sync::Arc::clone(pod), outcome)
            });
        pods.extend(bare);
        let package_configmaps = package_configmaps(&cached.package_configmaps, &owners);
        let metadata_configmaps = owned_configmaps(&cached.metadata_configmaps, &owners, |cm| {
            let name = kube::Resource::meta(cm).name.as_deref()?;
            let (group, owner) = cm.owner()?;
            Some((name, group, owner, cm.node()))
        });
        Snapshot {
            retained_jobs,
            pre_pulls,
            skyhooks: workloads(cached, &owners, &twins),
            policies: (cached.policies.iter())
                .filter_map(|p| Some(((Group::Skyhook, p.metadata.name.clone()?), p.spec.clone())))
                .chain((cached.nodewright_policies.iter()).filter_map(|p| {
                    Some((
                        (Group::NodeWright, p.metadata.name.clone()?),
                        p.spec.clone(),
                    ))
                }))
                .collect(),
            nodes,
            pods,
            package_configmaps,
            metadata_configmaps,
            workload_pods,
            pdbs,
            refusals: EvictionRefusals::default(),
            non_interrupt_held: None,
            lost_picks: LostPicks::new(),
            owners,
            twins,
            leftovers,
        }
    }

    /// The nodes whose pods the I/O layer must list before planning: those a Skyhook cordoned
    /// or is draining (a node someone else cordoned is drained without a Skyhook cordon),
    /// which are the only ones a plan may drain or hold for `podNonInterruptLabels`.
    pub fn nodes_to_list(nodes: &[std::sync::Arc<cache::CachedNode>]) -> Vec<String> {
        nodes
            .iter()
            .filter(|node| {
                node.annotations.keys().any(|k| {
                    Group::ALL.into_iter().any(|group| {
                        let keys = group.keys();
                        k.starts_with(keys.cordon_annotation_prefix)
                            || k.starts_with(keys.drain_start_prefix)
                    })
                })
            })
            .map(|node| node.name.clone())
            .collect()
    }
}

/// The live object of every name, with its group: the object of the other group sharing its
/// name is left out (see [`handover::live_objects`]). An object taking its name over from a
/// twin starts from the twin's rollout bookkeeping until its first status write
/// ([`seed_status`]).
fn workloads(cached: &cache::CachedObjects, owners: &Owners, twins: &[Twin]) -> Vec<Workload> {
    let of = |group: Group, objects: &[Arc<Skyhook>]| {
        (objects.iter())
            .filter(|object| {
                (object.metadata.name.as_deref())
                    .is_some_and(|name| owners.live(name) == Some(group))
            })
            .map(move |object| Workload::new(group, Arc::clone(object)))
            .collect::<Vec<_>>()
    };
    let mut workloads: Vec<Workload> = [
        (Group::Skyhook, cached.skyhooks.as_slice()),
        (Group::NodeWright, cached.nodewrights.as_slice()),
    ]
    .into_iter()
    .flat_map(|(group, objects)| of(group, objects))
    .collect();
    for workload in &mut workloads {
        let name = workload.metadata.name.as_deref().unwrap_or_default();
        let twin = (twins.iter()).find(|twin| {
            twin.name() == name && twin.reason == InertReason::OwnedByTwin(workload.group)
        });
        let seeded = twin
            .and_then(|twin| twin.object.status.as_ref())
            .and_then(|status| seed_status(status, workload.status.as_ref()));
        if let Some(seeded) = seeded {
            Arc::make_mut(&mut workload.object).status = Some(seeded);
        }
    }
    workloads
}

/// Each object's reboot deadline, by group and name: its `spec.rebootDeadline`, else the
/// controller's `fallback`.
fn reboot_deadlines(
    objects: [(Group, &[std::sync::Arc<Skyhook>]); 2],
    fallback: Duration,
) -> BTreeMap<(Group, &str), Duration> {
    objects
        .into_iter()
        .flat_map(|(group, objects)| objects.iter().map(move |s| (group, s)))
        .filter_map(|(group, s)| {
            Some((
                (group, s.metadata.name.as_deref()?),
                s.spec.reboot_deadline(fallback),
            ))
        })
        .collect()
}

impl OwnedPod {
    /// Reads the pod's name, node, group, Skyhook and package from its labels and annotation,
    /// with its `outcome` already classified; `None` for a pod not bound to a node.
    pub fn new(pod: std::sync::Arc<cache::CachedPod>, outcome: PodOutcome) -> Option<OwnedPod> {
        let node = pod.spec.as_ref()?.node_name.clone()?;
        let group = group_of_labels(pod.metadata.labels.as_ref());
        let keys = group.keys();
        let label = |key: &str| {
            pod.metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get(key))
        };
        Some(OwnedPod {
            name: pod.metadata.name.clone().unwrap_or_default(),
            node,
            group,
            skyhook: label(keys.name_label).cloned().unwrap_or_default(),
            package_label: label(keys.package_label).cloned().unwrap_or_default(),
            annotation: package_annotation_of(group, &pod),
            interrupt: label(keys.interrupt_label)
                .is_some_and(|value| value == keys::INTERRUPT_LABEL_VALUE),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            outcome,
            pod,
            job: None,
        })
    }
}

/// The Job a pod is an attempt of (label `batch.kubernetes.io/job-name`, or `job-name` as
/// older Job controllers set it); `None` for a bare pod.
fn job_of(pod: &cache::CachedPod) -> Option<&str> {
    let labels = pod.metadata.labels.as_ref()?;
    labels
        .get(cache::pod::JOB_NAME_LABEL)
        .or_else(|| labels.get(cache::pod::LEGACY_JOB_NAME_LABEL))
        .map(String::as_str)
}

/// A run's parsed package annotation, under its group's key.
fn package_annotation_of(group: Group, pod: &cache::CachedPod) -> Option<PodPackageAnnotation> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(group.keys().package_annotation))
        .and_then(|text| PodPackageAnnotation::parse(text).ok())
}

/// The package ConfigMaps by name, with the object their label `<group>/name` names.
fn package_configmaps(
    configmaps: &[std::sync::Arc<ConfigMap>],
    owners: &Owners,
) -> BTreeMap<String, OwnedConfigMap> {
    owned_configmaps(configmaps, owners, |cm| {
        let metadata = &cm.metadata;
        let labels = metadata.labels.as_ref();
        let group = group_of_labels(labels);
        let skyhook = labels?.get(group.keys().name_label)?;
        let node = metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(group.keys().node_name_annotation));
        let name = metadata.name.as_deref()?;
        Some((name, group, skyhook.as_str(), node.map(String::as_str)))
    })
}

/// The ConfigMaps that `owner` names (name, group, owning object, node), by name; those it
/// names none of, and those of a name whose live object is of the other group (a migration's),
/// are left out.
fn owned_configmaps<C>(
    configmaps: &[std::sync::Arc<C>],
    owners: &Owners,
    owner: impl Fn(&C) -> Option<(&str, Group, &str, Option<&str>)>,
) -> BTreeMap<String, OwnedConfigMap<C>> {
    configmaps
        .iter()
        .filter_map(|cm| {
            let (name, group, skyhook, node) = owner(cm)?;
            if !owners.is_live(group, skyhook) {
                return None;
            }
            let owned = OwnedConfigMap::new(
                group,
                skyhook.to_owned(),
                node.map(str::to_owned),
                cm.clone(),
            );
            Some((name.to_owned(), owned))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo};
    use kube::api::ObjectMeta;
    use skyhook_api::resources::CpuMemory;

    use super::*;
    use skyhook_api::v1alpha1::SkyhookSpec;

    fn node(name: &str, annotations: &[(&str, &str)], ready: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                unschedulable: Some(true),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![
                    NodeCondition {
                        type_: "Ready".into(),
                        status: ready.into(),
                        message: Some("kubelet is posting ready status".into()),
                        ..NodeCondition::default()
                    },
                    NodeCondition {
                        type_: "skyhook.nvidia.com/a/NotReady".into(),
                        status: "True".into(),
                        reason: Some("NotReady".into()),
                        message: Some("Skyhook a is not ready".into()),
                        ..NodeCondition::default()
                    },
                ]),
                node_info: Some(NodeSystemInfo {
                    boot_id: "b-1".into(),
                    ..NodeSystemInfo::default()
                }),
                ..NodeStatus::default()
            }),
        }
    }

    #[test]
    fn only_cordoned_nodes_have_their_pods_listed() {
        let nodes = vec![
            Arc::new(node("plain", &[], "True").into()),
            Arc::new(
                node(
                    "cordoned",
                    &[("skyhook.nvidia.com/cordon_a", "true")],
                    "True",
                )
                .into(),
            ),
            Arc::new(
                node(
                    "other",
                    &[("skyhook.nvidia.com/status_a", "complete")],
                    "True",
                )
                .into(),
            ),
        ];
        assert_eq!(Snapshot::nodes_to_list(&nodes), vec!["cordoned".to_owned()]);
    }

    #[test]
    fn a_node_view_keeps_what_the_rules_read() {
        let cases = [("True", true), ("False", false), ("Unknown", false)];
        for (condition, ready) in cases {
            let view = node_view(node("n", &[], condition));
            assert_eq!(view.ready, ready, "Ready={condition}");
            assert!(view.unschedulable);
            assert_eq!(view.boot_id.as_deref(), Some("b-1"));
            // The kubelet's are read into `ready`; only the Skyhooks' are kept.
            assert_eq!(
                view.conditions,
                vec![NodeConditionView {
                    type_: "skyhook.nvidia.com/a/NotReady".to_owned(),
                    status: "True".to_owned(),
                    reason: "NotReady".to_owned(),
                    message: "Skyhook a is not ready".to_owned(),
                }]
            );
        }
    }

    #[test]
    fn a_node_view_reads_the_allocatable_cpu_and_memory() {
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let with = |list: &[(&str, &str)]| {
            let mut n = node("n", &[], "True");
            if let Some(status) = n.status.as_mut() {
                status.allocatable = Some(
                    list.iter()
                        .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                        .collect(),
                );
            }
            node_view(n).allocatable
        };
        let cases = [
            (
                vec![("cpu", "7800m"), ("memory", "16Gi"), ("pods", "110")],
                Some(CpuMemory {
                    cpu_millis: 7800,
                    memory: 16 << 30,
                }),
            ),
            // Half a report would make every pod look too big for the node.
            (vec![("cpu", "2")], None),
            (vec![("cpu", "a lot")], None),
        ];
        for (list, want) in cases {
            assert_eq!(with(&list), want, "{list:?}");
        }
        assert_eq!(node_view(node("n", &[], "True")).allocatable, None);
    }

    #[test]
    fn each_skyhook_has_its_own_reboot_deadline() {
        let skyhook = |name: &str, deadline: Option<&str>| {
            let mut s = Skyhook::new(name, SkyhookSpec::default());
            s.spec.reboot_deadline = deadline.map(str::to_owned);
            Arc::new(s)
        };
        let skyhooks = [skyhook("fast", Some("5m")), skyhook("default", None)];
        let fallback = Duration::from_secs(1800);
        let deadlines = reboot_deadlines(
            [(Group::Skyhook, &skyhooks), (Group::NodeWright, &[])],
            fallback,
        );
        assert_eq!(
            deadlines.get(&(Group::Skyhook, "fast")),
            Some(&Duration::from_secs(300))
        );
        assert_eq!(deadlines.get(&(Group::Skyhook, "default")), Some(&fallback));
    }

    #[test]
    fn the_nodes_of_either_groups_cordons_and_drains_are_listed() {
        let nodes = vec![
            Arc::new(
                node(
                    "skyhook",
                    &[("skyhook.nvidia.com/cordon_a", "true")],
                    "True",
                )
                .into(),
            ),
            Arc::new(
                node(
                    "nodewright",
                    &[("nodewright.nvidia.com/drainStart_b", "2026-12-01T10:00:00Z")],
                    "True",
                )
                .into(),
            ),
            Arc::new(node("plain", &[("example.com/cordon_a", "true")], "True").into()),
        ];
        assert_eq!(
            Snapshot::nodes_to_list(&nodes),
            vec!["skyhook".to_owned(), "nodewright".to_owned()]
        );
    }

    /// A bare run labelled under `group`'s keys, of the object `owner`, on node `n`.
    fn run_of(group: Group, name: &str, owner: &str) -> Arc<cache::CachedPod> {
        let keys = group.keys();
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([
                    (keys.name_label.to_owned(), owner.to_owned()),
                    (keys.package_label.to_owned(), "one-1.0.0".to_owned()),
                ])),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                node_name: Some("n".into()),
                ..Default::default()
            }),
            status: None,
        };
        Arc::new(pod.into())
    }

    fn build_at_noon(cached: &cache::CachedObjects) -> Snapshot {
        let now: Timestamp = "2026-01-01T12:00:00Z"
            .parse()
            .expect("a valid timestamp literal");
        Snapshot::build(
            cached,
            BTreeMap::new(),
            Vec::new(),
            now,
            Duration::from_secs(60),
        )
    }

    #[test]
    fn a_run_is_read_under_the_keys_of_its_group_and_a_shadow_groups_runs_are_left_alone() {
        let configmap = |group: Group, name: &str| {
            let keys = group.keys();
            Arc::new(ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    labels: Some(BTreeMap::from([(
                        keys.name_label.to_owned(),
                        "gpu".to_owned(),
                    )])),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            })
        };
        let mut both = run_of(Group::Skyhook, "copied", "gpu").as_ref().clone();
        if let Some(labels) = both.metadata.labels.as_mut() {
            labels.insert(keys::NODEWRIGHT.name_label.to_owned(), "gpu".to_owned());
        }
        let object = |name: &str| {
            Arc::new(Skyhook {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..ObjectMeta::default()
                },
                spec: SkyhookSpec::default(),
                status: None,
            })
        };
        let cached =
            |skyhooks: Vec<Arc<Skyhook>>, nodewrights: Vec<Arc<Skyhook>>| cache::CachedObjects {
                skyhooks,
                nodewrights,
                nodes: vec![Arc::new(node("n", &[], "True").into())],
                pods: vec![
                    run_of(Group::Skyhook, "legacy", "gpu"),
                    run_of(Group::NodeWright, "new", "gpu"),
                    Arc::new(both.clone()),
                ],
                package_configmaps: vec![
                    configmap(Group::Skyhook, "gpu-legacy"),
                    configmap(Group::NodeWright, "gpu-new"),
                ],
                ..cache::CachedObjects::default()
            };
        // (case, Skyhooks, NodeWrights, runs in the snapshot, ConfigMaps in the snapshot)
        let cases = [
            (
                "a Skyhook holds the name: the NodeWright-labelled ones are shadows",
                vec![object("gpu")],
                vec![],
                vec![
                    ("legacy", Group::Skyhook, "gpu", "one-1.0.0"),
                    ("copied", Group::Skyhook, "gpu", "one-1.0.0"),
                ],
                vec![("gpu-legacy", Group::Skyhook, "gpu")],
            ),
            (
                "a NodeWright holds it",
                vec![],
                vec![object("gpu")],
                vec![("new", Group::NodeWright, "gpu", "one-1.0.0")],
                vec![("gpu-new", Group::NodeWright, "gpu")],
            ),
            (
                "both do, with a run of the Skyhook in flight: the Skyhook keeps the name",
                vec![object("gpu")],
                vec![object("gpu")],
                vec![
                    ("legacy", Group::Skyhook, "gpu", "one-1.0.0"),
                    ("copied", Group::Skyhook, "gpu", "one-1.0.0"),
                ],
                vec![("gpu-legacy", Group::Skyhook, "gpu")],
            ),
            (
                "neither does: each run is its own group's, to clean up",
                vec![],
                vec![],
                vec![
                    ("legacy", Group::Skyhook, "gpu", "one-1.0.0"),
                    ("new", Group::NodeWright, "gpu", "one-1.0.0"),
                    ("copied", Group::Skyhook, "gpu", "one-1.0.0"),
                ],
                vec![
                    ("gpu-legacy", Group::Skyhook, "gpu"),
                    ("gpu-new", Group::NodeWright, "gpu"),
                ],
            ),
        ];
        for (case, skyhooks, nodewrights, expected_runs, expected_configmaps) in cases {
            let snapshot = build_at_noon(&cached(skyhooks, nodewrights));
            let runs: Vec<_> = (snapshot.pods.iter())
                .map(|p| {
                    (
                        p.name.as_str(),
                        p.group,
                        p.skyhook.as_str(),
                        p.package_label.as_str(),
                    )
                })
                .collect();
            assert_eq!(runs, expected_runs, "{case}");
            let configmaps: Vec<_> = (snapshot.package_configmaps.iter())
                .map(|(name, cm)| (name.as_str(), cm.group, cm.skyhook.as_str()))
                .collect();
            assert_eq!(configmaps, expected_configmaps, "{case}");
            let workloads: Vec<_> = (snapshot.skyhooks.iter()).map(|w| w.group).collect();
            assert!(workloads.len() <= 1, "{case}: one live object per name");
        }
    }

    #[test]
    fn a_settled_twin_hands_its_name_over_and_what_it_left_is_listed() {
        let ended = |group: Group, name: &str| {
            let mut pod = run_of(group, name, "gpu").as_ref().clone();
            pod.status = Some(cache::pod::CachedPodStatus {
                phase: Some("Succeeded".into()),
                ..Default::default()
            });
            Arc::new(pod)
        };
        let object = |name: &str| {
            Arc::new(Skyhook {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..ObjectMeta::default()
                },
                spec: SkyhookSpec::default(),
                status: None,
            })
        };
        let configmap = Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some("gpu-tools-1.0.0".into()),
                labels: Some(BTreeMap::from([(
                    keys::SKYHOOK.name_label.to_owned(),
                    "gpu".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        });
        let mut paused = object("gpu").as_ref().clone();
        paused.status = Some(skyhook_api::v1alpha1::SkyhookStatus {
            status: Some(skyhook_api::v1alpha1::Status::Paused),
            node_order_offset: 2,
            ..Default::default()
        });
        let cached = cache::CachedObjects {
            skyhooks: vec![Arc::new(paused), object("alone")],
            nodewrights: vec![object("gpu")],
            nodes: vec![Arc::new(node("n", &[], "True").into())],
            pods: vec![
                ended(Group::Skyhook, "legacy-done"),
                ended(Group::NodeWright, "new-done"),
                run_of(Group::Skyhook, "alone-running", "alone"),
            ],
            package_configmaps: vec![configmap],
            ..cache::CachedObjects::default()
        };
        let snapshot = build_at_noon(&cached);
        assert_eq!(snapshot.owners.live("gpu"), Some(Group::NodeWright));
        let twins: Vec<_> = (snapshot.twins.iter())
            .map(|t| (t.name(), t.group, t.reason))
            .collect();
        assert_eq!(
            twins,
            [(
                "gpu",
                Group::Skyhook,
                InertReason::OwnedByTwin(Group::NodeWright)
            )]
        );
        let leftovers: Vec<_> = (snapshot.leftovers.iter())
            .map(|l| (l.name.as_str(), l.group, l.owner.as_str()))
            .collect();
        assert_eq!(
            leftovers,
            [
                ("legacy-done", Group::Skyhook, "gpu"),
                ("gpu-tools-1.0.0", Group::Skyhook, "gpu")
            ],
            "the twin's ended pod and ConfigMap; nothing of the live object or of another name"
        );
        assert!(
            !(snapshot.pods.iter()).any(|p| p.name == "legacy-done"),
            "a twin's run is no run of the live object"
        );
        let adopter = (snapshot.skyhooks.iter())
            .find(|w| w.group == Group::NodeWright)
            .expect("the live NodeWright");
        let seeded = adopter.status.as_ref().expect("seeded from the twin");
        assert_eq!(
            (seeded.node_order_offset, seeded.status),
            (2, None),
            "the twin's bookkeeping, and no overall status of its own yet"
        );
    }

    #[test]
    fn each_groups_object_has_its_own_reboot_deadline() {
        let object = |name: &str, deadline: &str| {
            let mut s = Skyhook::new(name, SkyhookSpec::default());
            s.spec.reboot_deadline = Some(deadline.to_owned());
            Arc::new(s)
        };
        let skyhooks = [object("gpu", "5m")];
        let nodewrights = [object("gpu", "7m")];
        let fallback = Duration::from_secs(1800);
        let deadlines = reboot_deadlines(
            [
                (Group::Skyhook, skyhooks.as_slice()),
                (Group::NodeWright, nodewrights.as_slice()),
            ],
            fallback,
        );
        assert_eq!(
            deadlines.get(&(Group::Skyhook, "gpu")),
            Some(&Duration::from_secs(300))
        );
        assert_eq!(
            deadlines.get(&(Group::NodeWright, "gpu")),
            Some(&Duration::from_secs(420))
        );
    }

    #[test]
    fn owned_pods_are_classified_against_their_nodes_boot_id() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                labels: Some(BTreeMap::from([
                    (keys::SKYHOOK.name_label.to_owned(), "s".to_owned()),
                    (
                        keys::SKYHOOK.package_label.to_owned(),
                        "one-1.0.0".to_owned(),
                    ),
                ])),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                node_name: Some("n".into()),
                ..Default::default()
            }),
            status: None,
        };
        let cached = cache::CachedObjects {
            nodes: vec![Arc::new(node("n", &[], "True").into())],
            pods: vec![Arc::new(pod.into())],
            ..cache::CachedObjects::default()
        };
        let now: Timestamp = "2026-01-01T00:00:00Z"
            .parse()
            .expect("a valid timestamp literal");
        let snapshot = Snapshot::build(
            &cached,
            BTreeMap::new(),
            Vec::new(),
            now,
            Duration::from_secs(60),
        );
        let owned = &snapshot.pods[0];
        assert_eq!(
            (
                owned.node.as_str(),
                owned.skyhook.as_str(),
                owned.package_label.as_str()
            ),
            ("n", "s", "one-1.0.0")
        );
        assert!(owned.annotation.is_none());
        assert!(
            matches!(owned.outcome, PodOutcome::Unrecognised { .. }),
            "{:?}",
            owned.outcome
        );
    }
}
