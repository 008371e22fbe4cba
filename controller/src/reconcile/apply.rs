//! Carries out a [`Plan`] against the API server, in an order that keeps the cluster safe if a
//! step fails half-way: finalizers first (nothing is owned before it can be cleaned up), node
//! patches (node state, cordons) before the ConfigMaps and evictions that follow from them,
//! ConfigMaps before the pods that mount them, pod deletions before creations, statuses, and
//! finalizer removals last; Events are queued for the background sender, not waited on.
//!
//! Contract: every write is a patch or a create/delete of one object; a Node is never replaced
//! whole. Node metadata and spec use a JSON merge patch (removals as `null`), node conditions a
//! strategic merge patch of the status keyed by condition type, ConfigMaps and Skyhook statuses
//! server-side apply with the field manager [`FIELD_MANAGER`], so fields the plan drops are
//! removed. A failed write is logged with its object and counted in [`Failures`] (by the kind of
//! write, a bounded metric label); the next reconcile plans again from what the caches then show. `Plan` is destructured exhaustively so a new field cannot be ignored.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;

use futures::{StreamExt, stream};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Client};
use serde::Serialize;
use serde_json::{Map, Value, json};
use skyhook_api::generation::Group;
use skyhook_api::nodewright_v1alpha1::NodeWright;
use skyhook_api::string_map::PackedMap;
use skyhook_api::v1alpha1::{Skyhook, SkyhookStatus};
use tracing::{debug, info, warn};

use super::event_sender::{EventSender, Outgoing};
use super::job_logs;
use super::plan::{
    ConfigMapMove, EventTarget, Eviction, NodePatch, Plan, PlannedEvent, PlannedPod, StageDuration,
    TwinWrite, event_kinds, node_write_order,
};
use super::snapshot::{Leftover, LeftoverKind, NodeView, OwnedConfigMap, Snapshot};
use crate::cache::CachedNode;
use crate::cache::answer::{self, Answer};
use crate::cache::own_writes::{CachedKind, Landed, OwnWrite, OwnWrites};
use crate::drain::refusals::EvictionOutcome;
use crate::metrics::Metrics;

/// Field manager of every server-side apply the controller makes.
pub const FIELD_MANAGER: &str = "skyhook-controller";

/// What carrying out a plan did.
#[derive(Debug, Default)]
pub struct Applied {
    /// The writes that failed.
    pub failures: Failures,
    /// The writes that landed, for the next reconcile to wait until the caches show them.
    pub writes: Vec<OwnWrite>,
    /// The plan's stage durations whose node patch landed, for the metrics (a refused patch
    /// is planned again, so each stage is counted once).
    pub stage_durations: Vec<StageDuration>,
    /// What each eviction sent came to (deletions and failed requests are not listed), for the
    /// per-node record of refusals.
    pub evictions: Vec<EvictionOutcome>,
    /// The plan's picks whose node patch was refused while its statuses went unwritten (see
    /// [`super::snapshot::lost_picks`]).
    pub lost_picks: super::snapshot::LostPicks,
}

/// Applies `plan`.
pub async fn apply(
    client: &Client,
    events_out: &EventSender,
    namespace: &str,
    snapshot: &Snapshot,
    plan: Plan,
) -> Applied {
    log_size(&plan);
    let Plan {
        nodes,
        create_pods,
        create_pre_pulls,
        delete_pods,
        delete_jobs,
        record_jobs,
        suspend_jobs,
        restart_limits,
        last_logs,
        evictions,
        upsert_configmaps,
        delete_configmaps,
        statuses,
        finalizers,
        skyhook_annotations,
        mut events,
        requeue_after: _,
        malformed_states: _,
        long_node_lists: _,
        stage_durations,
        auto_taints,
        reboot_resets: _,
        non_interrupt_holds: _,
        twins,
        move_configmaps,
        delete_leftovers,
    } = plan;
    let mut writer = Writer::new(client, namespace, snapshot);
    let mut failures = Failures::default();
    writer
        .set_finalizers(&finalizers, true, &mut failures)
        .await;
    writer
        .annotate_skyhooks(&skyhook_annotations, &mut failures)
        .await;
    let written = writer.patch_nodes(&nodes, &mut failures).await;
    let stage_durations = landed_durations(stage_durations, &written.waiting);
    let waiting = Waiting::after_node_patches(
        written.waiting.clone(),
        written.changed_under_plan,
        &upsert_configmaps,
        &snapshot.package_configmaps,
    );
    if !waiting.configmaps.is_empty() {
        debug!(configmaps = ?waiting.configmaps, "a node changed under the plan; changed ConfigMaps and the pods mounting them wait for the next plan");
    }
    writer
        .apply_configmaps(upsert_configmaps, &waiting, &mut failures)
        .await;
    writer.move_configmaps(move_configmaps, &mut failures).await;
    writer
        .delete_leftovers(delete_leftovers, &mut failures)
        .await;
    let eviction_outcomes = writer.evict(evictions, &waiting, &mut failures).await;
    writer.delete_pods(delete_pods, &mut failures).await;
    writer.delete_jobs(delete_jobs, &mut failures).await;
    let last_logs = job_logs::snapshot(client, namespace, last_logs).await;
    // Recorded after the node patches: a completion is marked on its Job only once the node
    // state holds it; were the node patch refused, the unmarked Job is read again next time.
    writer
        .patch_jobs(
            JobPatches {
                records: record_jobs,
                suspends: suspend_jobs,
                restart_limits,
                last_logs,
            },
            &written.waiting,
            &mut failures,
        )
        .await;
    writer
        .create_pods(create_pods, &waiting, &mut failures)
        .await;
    writer
        .create_pre_pulls(create_pre_pulls, &mut failures)
        .await;
    writer
        .delete_configmaps(delete_configmaps, &mut failures)
        .await;
    // The statuses mirror the node state and record boot IDs that must follow a node reset:
    // written only when every node patch landed, else the next plan computes them again.
    let mut lost_picks = super::snapshot::LostPicks::new();
    let unwritten = if written.waiting.is_empty() {
        writer.apply_statuses(statuses, &mut failures).await
    } else {
        lost_picks = super::snapshot::lost_picks(&statuses, &written.waiting);
        statuses.into_keys().collect()
    };
    events.extend(auto_taint_refusals(&auto_taints, &written.rejected));
    queue_events(events_out, snapshot, events);
    let removals = finalizer_removals(finalizers, &unwritten);
    writer.set_finalizers(&removals, false, &mut failures).await;
    writer.write_twins(twins, &mut failures).await;
    Applied {
        failures,
        writes: writer.own_writes.into_inner(),
        stage_durations,
        evictions: eviction_outcomes,
        lost_picks,
    }
}

/// The Warning Events `AutoTaint` of the nodes whose patch adding the runtime-required taint
/// was refused (`rejected`: node → error; a 409 only means the node changed under the plan and
/// is not one): the node joins no Skyhook until the taint lands, and the taint is tried again
/// at every reconcile.
fn auto_taint_refusals(
    auto_taints: &BTreeMap<String, String>,
    rejected: &BTreeMap<String, String>,
) -> Vec<PlannedEvent> {
    auto_taints
        .iter()
        .filter_map(|(node, taint)| {
            let error = rejected.get(node)?;
            let kind = event_kinds::AUTO_TAINT;
            Some(PlannedEvent {
                target: EventTarget::Node(node.clone()),
                warning: kind.warning,
                reason: kind.reason,
                action: kind.action,
                message: format!(
                    "adding the runtime-required taint {taint} to node [{node}] failed: {error}; no Skyhook works on the node until it is tainted, and it is tried again at every reconcile"
                ),
            })
        })
        .collect()
}

/// The finalizer removals to make once the statuses were written: a deleted Skyhook keeps its
/// finalizer while its last status (`unwritten`: refused, or held back behind a refused node
/// patch) is not written, as upstream writes the status before removing the finalizer;
/// removing it first would lose what the deletion reported.
fn finalizer_removals(
    finalizers: BTreeMap<String, bool>,
    unwritten: &BTreeSet<String>,
) -> BTreeMap<String, bool> {
    finalizers
        .into_iter()
        .filter(|(name, add)| !*add && !unwritten.contains(name))
        .collect()
}

/// The stage durations whose node patch was written: a refused patch is planned again.
fn landed_durations(
    mut durations: Vec<StageDuration>,
    waiting: &BTreeSet<String>,
) -> Vec<StageDuration> {
    durations.retain(|d| !waiting.contains(&d.node));
    durations
}

/// One line per plan that writes anything, with how much of each kind.
fn log_size(plan: &Plan) {
    let writes = plan.nodes.len()
        + plan.create_pods.len()
        + plan.create_pre_pulls.len()
        + plan.delete_pods.len()
        + plan.delete_jobs.len()
        + plan.record_jobs.len()
        + plan.suspend_jobs.len()
        + plan.restart_limits.len()
        + plan.last_logs.len()
        + plan.evictions.len()
        + plan.upsert_configmaps.len()
        + plan.delete_configmaps.len()
        + plan.statuses.len()
        + plan.finalizers.len()
        + plan.skyhook_annotations.len();
    if writes > 0 {
        info!(
            nodes = plan.nodes.len(),
            create_pods = plan.create_pods.len(),
            create_pre_pulls = plan.create_pre_pulls.len(),
            delete_pods = plan.delete_pods.len(),
            delete_jobs = plan.delete_jobs.len(),
            record_jobs = plan.record_jobs.len(),
            suspend_jobs = plan.suspend_jobs.len(),
            last_logs = plan.last_logs.len(),
            evictions = plan.evictions.len(),
            upsert_configmaps = plan.upsert_configmaps.len(),
            delete_configmaps = plan.delete_configmaps.len(),
            statuses = plan.statuses.len(),
            finalizers = plan.finalizers.len(),
            events = plan.events.len(),
            "applying plan"
        );
    }
}

/// The clients of one apply, and the snapshot its plan was made from.
struct Writer<'a> {
    client: &'a Client,
    snapshot: &'a Snapshot,
    /// Writes answered with the written object's name and version only ([`Answer`]): the
    /// answers are the whole objects, a Skyhook's several MiB decoded at 1,000 nodes.
    workloads: WorkloadApis,
    pods: Api<Answer<Pod>>,
    jobs: Api<Answer<Job>>,
    configmaps: Api<Answer<ConfigMap>>,
    /// Decodes what a node patch returns as the cache does: a realistic Node is 10-40 KB of
    /// JSON, and a phase's answers are all held until its last patch lands.
    nodes: Api<CachedNode>,
    ssa: PatchParams,
    own_writes: OwnWrites,
}

/// The workload objects of both groups, each written through its own group's API.
struct WorkloadApis {
    skyhooks: Api<Answer<Skyhook>>,
    nodewrights: Api<Answer<NodeWright>>,
}

impl WorkloadApis {
    /// Patches the object `name` of `group`.
    async fn patch<P: Serialize + std::fmt::Debug>(
        &self,
        (group, name): (Group, &str),
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<Landed, kube::Error> {
        match group {
            Group::Skyhook => (self.skyhooks.patch(name, params, patch).await)
                .map(|answer| Landed::written(&answer)),
            Group::NodeWright => (self.nodewrights.patch(name, params, patch).await)
                .map(|answer| Landed::written(&answer)),
        }
    }

    /// Patches the status of the object `name` of `group`.
    async fn patch_status<P: Serialize + std::fmt::Debug>(
        &self,
        (group, name): (Group, &str),
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<Landed, kube::Error> {
        match group {
            Group::Skyhook => (self.skyhooks.patch_status(name, params, patch).await)
                .map(|answer| Landed::written(&answer)),
            Group::NodeWright => (self.nodewrights.patch_status(name, params, patch).await)
                .map(|answer| Landed::written(&answer)),
        }
    }
}

/// What a plan changes on its stage Jobs, by Job name: one merge patch per Job.
struct JobPatches {
    /// Recorded, with the TTL to set (seconds).
    records: BTreeMap<String, i32>,
    /// Suspended (`true`) or resumed.
    suspends: BTreeMap<String, bool>,
    /// Restart allowance spent, with the restart count that spent it.
    restart_limits: BTreeMap<String, i32>,
    /// The `last-logs` text.
    last_logs: BTreeMap<String, String>,
}

/// How the node patches went.
struct NodesWritten {
    /// Nodes whose patch failed, or was held back behind one that failed: their pods and
    /// evictions wait for the next plan.
    waiting: BTreeSet<String>,
    /// Some patch was refused because its node changed since the plan read it (409).
    changed_under_plan: bool,
    /// The nodes whose patch failed for another reason than a conflict, with the error.
    rejected: BTreeMap<String, String>,
}

impl<'a> Writer<'a> {
    fn new(client: &'a Client, namespace: &str, snapshot: &'a Snapshot) -> Self {
        Writer {
            client,
            snapshot,
            workloads: WorkloadApis {
                skyhooks: Api::all(client.clone()),
                nodewrights: Api::all(client.clone()),
            },
            pods: Api::namespaced(client.clone(), namespace),
            jobs: Api::namespaced(client.clone(), namespace),
            configmaps: Api::namespaced(client.clone(), namespace),
            nodes: Api::all(client.clone()),
            ssa: PatchParams::apply(FIELD_MANAGER).force(),
            own_writes: OwnWrites::default(),
        }
    }

    /// The finalizer additions (`add`) or removals of the plan.
    async fn set_finalizers(
        &mut self,
        finalizers: &BTreeMap<String, bool>,
        add: bool,
        failures: &mut Failures,
    ) {
        let operation = if add {
            Operation::AddFinalizer
        } else {
            Operation::RemoveFinalizer
        };
        for (name, _) in finalizers.iter().filter(|(_, wanted)| **wanted == add) {
            let result = match set_finalizer(&self.workloads, self.snapshot, name, add).await {
                Ok(Some((group, landed))) => {
                    (self.own_writes).landed(CachedKind::Workload(group), name, Ok(landed))
                }
                Ok(None) => Ok(()),
                Err(error) => Err(error),
            };
            failures.record(operation, name, result);
        }
    }

    async fn annotate_skyhooks(
        &mut self,
        annotations: &BTreeMap<String, BTreeMap<String, Option<String>>>,
        failures: &mut Failures,
    ) {
        for (name, annotations) in annotations {
            let patch = json!({"metadata": {"annotations": annotations}});
            let group = self.snapshot.owners.group_of(name);
            let result = (self.workloads)
                .patch((group, name), &PatchParams::default(), &Patch::Merge(patch))
                .await;
            let result = (self.own_writes).landed(CachedKind::Workload(group), name, result);
            failures.record(Operation::AnnotateSkyhook, name, result);
        }
    }

    /// Releases before takes, and takes only once every release landed: a plan never holds a
    /// newly picked node next to one it failed to release (see `node_write_order`).
    async fn patch_nodes(
        &mut self,
        nodes: &BTreeMap<String, NodePatch>,
        failures: &mut Failures,
    ) -> NodesWritten {
        let read_versions: HashMap<&str, Option<&str>> = self
            .snapshot
            .nodes
            .iter()
            .map(|node| (node.name.as_str(), node.resource_version.as_deref()))
            .collect();
        let (others, takes) = node_write_order(nodes);
        let mut outcome = NodePatchOutcome {
            refused: BTreeSet::new(),
            rejected: BTreeMap::new(),
            failures,
            own_writes: &mut self.own_writes,
        };
        let mut changed_under_plan =
            patch_nodes(&self.nodes, nodes, &read_versions, others, &mut outcome).await;
        if outcome.refused.is_empty() {
            changed_under_plan |=
                patch_nodes(&self.nodes, nodes, &read_versions, takes, &mut outcome).await;
        } else {
            debug!(nodes = ?takes, "a node patch failed; the nodes this plan takes wait for the next plan");
            outcome.refused.extend(takes.into_iter().map(str::to_owned));
        }
        NodesWritten {
            waiting: outcome.refused,
            changed_under_plan,
            rejected: outcome.rejected,
        }
    }

    async fn apply_configmaps(
        &mut self,
        upserts: Vec<ConfigMap>,
        waiting: &Waiting,
        failures: &mut Failures,
    ) {
        let (configmaps, ssa) = (&self.configmaps, &self.ssa);
        let results = concurrently(
            upserts
                .into_iter()
                .filter(|configmap| waiting.writes_configmap(configmap)),
            |configmap| async move {
                let name = configmap.metadata.name.clone().unwrap_or_default();
                let mut configmap = configmap;
                configmap.metadata.managed_fields = None;
                let body = ConfigMapApply {
                    api_version: "v1",
                    kind: "ConfigMap",
                    metadata: &configmap.metadata,
                    data: configmap.data.as_ref(),
                };
                let result = configmaps
                    .patch(&name, ssa, &Patch::Apply(body))
                    .await
                    .map(|configmap| Landed::written(&configmap));
                (name, result)
            },
        )
        .await;
        for (name, result) in results {
            let result = self.own_writes.landed(CachedKind::ConfigMap, &name, result);
            failures.record(Operation::ApplyConfigMap, &name, result);
        }
    }

    /// Sends the plan's evictions, or deletions with `disableEviction`. An eviction a
    /// PodDisruptionBudget refuses (429 with a `DisruptionBudget` cause) is no failure: it is
    /// reported, and that node waits before trying again (upstream v0.20).
    async fn evict(
        &self,
        evictions: Vec<Eviction>,
        waiting: &Waiting,
        failures: &mut Failures,
    ) -> Vec<EvictionOutcome> {
        let results = concurrently(
            evictions
                .into_iter()
                .filter(|eviction| !waiting.nodes.contains(&eviction.node)),
            |eviction| async move {
                let api = Api::<Pod>::namespaced(self.client.clone(), &eviction.namespace);
                let delete_options = eviction.grace_period_seconds.map(|seconds| DeleteParams {
                    grace_period_seconds: u32::try_from(seconds).ok(),
                    ..DeleteParams::default()
                });
                let result = if eviction.delete {
                    let params = delete_options.unwrap_or_default();
                    api.delete(&eviction.name, &params).await.map(|_| ())
                } else {
                    let params = EvictParams {
                        delete_options,
                        ..EvictParams::default()
                    };
                    api.evict(&eviction.name, &params).await.map(|_| ())
                };
                (eviction, result)
            },
        )
        .await;
        let mut outcomes = Vec::new();
        let (mut sent, mut refused) = (0_usize, 0_usize);
        for (eviction, result) in results {
            let outcome = |refused| EvictionOutcome {
                node: eviction.node.clone(),
                namespace: eviction.namespace.clone(),
                name: eviction.name.clone(),
                refused,
            };
            match result {
                Ok(()) => {
                    sent += 1;
                    debug!(pod = %eviction.name, node = %eviction.node, delete = eviction.delete, "removed");
                    if !eviction.delete {
                        outcomes.push(outcome(None));
                    }
                }
                // Already gone: nothing left to remove.
                Err(error) if is_status(&error, 404) => {}
                Err(error) if budget_refusal(&error).is_some() => {
                    refused += 1;
                    let message = budget_refusal(&error).unwrap_or_default();
                    debug!(pod = %eviction.name, node = %eviction.node, %message, "eviction refused by a disruption budget");
                    outcomes.push(outcome(Some(message)));
                }
                Err(error) => {
                    let operation = if eviction.delete {
                        Operation::DeletePod
                    } else {
                        Operation::EvictPod
                    };
                    failures.record(operation, &eviction.name, Err(error));
                }
            }
        }
        if sent + refused > 0 {
            debug!(sent, refused, "evictions");
        }
        outcomes
    }

    async fn delete_pods(&mut self, pods: BTreeMap<String, String>, failures: &mut Failures) {
        let api = &self.pods;
        let results = concurrently(pods, |(name, why)| async move {
            debug!(pod = %name, reason = %why, "deleting pod");
            let result = api
                .delete(&name, &DeleteParams::default())
                .await
                .map(|answer| Landed::deleted(&answer));
            (name, result)
        })
        .await;
        for (name, result) in results {
            let result = self.own_writes.landed(CachedKind::Pod, &name, result);
            failures.record(Operation::DeletePod, &name, result);
        }
    }

    /// Deletes stage Jobs. An unfinished one in the foreground: it is gone only once its pods
    /// are, so a run created again under its name never meets the old attempt on the node.
    /// A finished Job (kept for its logs, or as the mark of its stage's failure) runs nothing: it
    /// is deleted at once and its pods after it, so that a run of the same stage can be created
    /// under its name in the same apply.
    async fn delete_jobs(&mut self, jobs: BTreeMap<String, String>, failures: &mut Failures) {
        let api = &self.jobs;
        let snapshot = self.snapshot;
        // Read once: a plan can delete a Job on every node.
        let finished: HashSet<&str> = (snapshot.retained_jobs.iter())
            .map(|job| job.name.as_str())
            .chain(
                (snapshot.pods.iter())
                    .filter(|pod| pod.job.as_ref().is_some_and(|job| job.finished))
                    .map(|pod| pod.name.as_str()),
            )
            .collect();
        let results = concurrently(jobs, |(name, why)| {
            let params = if finished.contains(name.as_str()) {
                DeleteParams::background()
            } else {
                DeleteParams::foreground()
            };
            async move {
                debug!(job = %name, reason = %why, "deleting job");
                let result = api
                    .delete(&name, &params)
                    .await
                    .map(|answer| Landed::deleted(&answer));
                (name, result)
            }
        })
        .await;
        for (name, result) in results {
            let result = self.own_writes.landed(CachedKind::Job, &name, result);
            failures.record(Operation::DeleteJob, &name, result);
        }
    }

    /// Marks Jobs recorded (with their TTL), suspends or resumes Jobs, spends restart
    /// allowances and writes `last-logs`, one merge patch per Job; a record on a node whose patch
    /// did not land waits for the next plan.
    async fn patch_jobs(
        &mut self,
        JobPatches {
            records,
            suspends,
            restart_limits,
            last_logs,
        }: JobPatches,
        waiting: &BTreeSet<String>,
        failures: &mut Failures,
    ) {
        // Read once: a plan can record a Job on every node.
        let runs: HashMap<&str, (&str, Group)> = (self.snapshot.pods.iter())
            .map(|pod| (pod.name.as_str(), (pod.node.as_str(), pod.group)))
            .chain(
                (self.snapshot.retained_jobs.iter())
                    .map(|job| (job.name.as_str(), (job.node.as_str(), job.group))),
            )
            .collect();
        let node_of = |name: &str| runs.get(name).map(|(node, _)| *node);
        // A Job carries the keys of its object's group.
        let keys_of = |name: &str| runs.get(name).map_or(Group::Skyhook, |(_, g)| *g).keys();
        let mut patches: BTreeMap<String, serde_json::Value> = BTreeMap::new();
        for (name, ttl) in records {
            if node_of(&name).is_some_and(|node| waiting.contains(node)) {
                continue;
            }
            let recorded = keys_of(&name).state_recorded_annotation;
            patches.insert(
                name,
                serde_json::json!({
                    "metadata": {"annotations": {recorded: "true"}},
                    "spec": {"ttlSecondsAfterFinished": ttl},
                }),
            );
        }
        for (name, suspend) in suspends {
            let patch = patches.entry(name).or_insert_with(|| serde_json::json!({}));
            patch["spec"]["suspend"] = serde_json::Value::Bool(suspend);
        }
        for (name, restarts) in restart_limits {
            let key = keys_of(&name).restart_limit_exceeded_annotation;
            let patch = patches.entry(name).or_insert_with(|| serde_json::json!({}));
            patch["metadata"]["annotations"][key] = serde_json::Value::String(restarts.to_string());
            patch["spec"]["backoffLimit"] = serde_json::Value::from(0);
        }
        for (name, text) in last_logs {
            let key = keys_of(&name).last_logs_annotation;
            let patch = patches.entry(name).or_insert_with(|| serde_json::json!({}));
            patch["metadata"]["annotations"][key] = serde_json::Value::String(text);
        }
        let api = &self.jobs;
        let results = concurrently(patches, |(name, patch)| async move {
            let result = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|answer| Landed::written(&answer));
            (name, result)
        })
        .await;
        for (name, result) in results {
            let result = self.own_writes.landed(CachedKind::Job, &name, result);
            failures.record(Operation::PatchJob, &name, result);
        }
    }

    async fn create_pods(
        &mut self,
        pods: Vec<PlannedPod>,
        waiting: &Waiting,
        failures: &mut Failures,
    ) {
        let (client, namespace) = (self.client, self.pods.namespace());
        let results = concurrently(
            pods.into_iter().filter(|pod| waiting.creates_pod(pod)),
            |pod| async move {
                let name = pod.name().to_owned();
                let result = answer::create_json::<Job>(client, namespace, pod.into_json())
                    .await
                    .map(|created| Landed::written(&created));
                (name, result)
            },
        )
        .await;
        self.record_creations(results, (CachedKind::Job, Operation::CreateJob), failures);
    }

    /// Records the outcomes of creating objects under deterministic names: one that exists
    /// already (created by a previous leader whose writes this cache had not shown yet) is the
    /// one wanted.
    fn record_creations(
        &mut self,
        results: Vec<(String, Result<Landed, kube::Error>)>,
        (kind, operation): (CachedKind, Operation),
        failures: &mut Failures,
    ) {
        for (name, result) in results {
            let result = match result {
                Err(error) if is_status(&error, 409) => Ok(()),
                other => self.own_writes.landed(kind, &name, other),
            };
            failures.record(operation, &name, result);
        }
    }

    /// Creates the pods pulling images before a cordon (each name says which images it pulls).
    async fn create_pre_pulls(&mut self, pods: Vec<Pod>, failures: &mut Failures) {
        let (client, namespace) = (self.client, self.pods.namespace());
        let results = concurrently(pods, |pod| async move {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let result = answer::create::<Pod>(client, namespace, &pod)
                .await
                .map(|created| Landed::written(&created));
            (name, result)
        })
        .await;
        self.record_creations(
            results,
            (CachedKind::Pod, Operation::CreatePrePull),
            failures,
        );
    }

    async fn delete_configmaps(&mut self, names: BTreeSet<String>, failures: &mut Failures) {
        for name in names {
            let result = self
                .configmaps
                .delete(&name, &DeleteParams::default())
                .await
                .map(|answer| Landed::deleted(&answer));
            let result = self.own_writes.landed(CachedKind::ConfigMap, &name, result);
            failures.record(Operation::DeleteConfigMap, &name, result);
        }
    }

    /// Moves a twin's package ConfigMaps to their live object: its labels under the new
    /// prefix and the live object as controller, so that deleting the twin collects nothing.
    async fn move_configmaps(
        &mut self,
        moves: BTreeMap<String, ConfigMapMove>,
        failures: &mut Failures,
    ) {
        for (name, moved) in moves {
            let patch = json!({"metadata": {
                "labels": moved.labels,
                "ownerReferences": moved.owner_references,
            }});
            let result = (self.configmaps)
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|answer| Landed::written(&answer));
            let result = self.own_writes.landed(CachedKind::ConfigMap, &name, result);
            failures.record(Operation::ApplyConfigMap, &name, result);
        }
    }

    /// Deletes what twins left, each only while it is the object read (uid and resource
    /// version as preconditions): one of the same name the live object made since is kept,
    /// and the refusal (409) is no failure.
    async fn delete_leftovers(&mut self, leftovers: Vec<Leftover>, failures: &mut Failures) {
        for leftover in leftovers {
            let preconditions = Preconditions {
                uid: leftover.uid.clone(),
                resource_version: leftover.resource_version.clone(),
            };
            let params = DeleteParams {
                preconditions: Some(preconditions),
                ..DeleteParams::background()
            };
            let name = leftover.name.as_str();
            debug!(object = %name, owner = %leftover.owner, "deleting what a migrated object left");
            let (kind, operation, result) = match leftover.kind {
                LeftoverKind::Job => (
                    CachedKind::Job,
                    Operation::DeleteJob,
                    (self.jobs.delete(name, &params).await).map(|a| Landed::deleted(&a)),
                ),
                LeftoverKind::Pod => (
                    CachedKind::Pod,
                    Operation::DeletePod,
                    (self.pods.delete(name, &params).await).map(|a| Landed::deleted(&a)),
                ),
                LeftoverKind::MetadataConfigMap | LeftoverKind::PackageConfigMap { .. } => (
                    CachedKind::ConfigMap,
                    Operation::DeleteConfigMap,
                    (self.configmaps.delete(name, &params).await).map(|a| Landed::deleted(&a)),
                ),
            };
            let result = match result {
                Err(error) if is_status(&error, 409) || is_status(&error, 404) => continue,
                other => other,
            };
            let result = self.own_writes.landed(kind, name, result);
            failures.record(operation, name, result);
        }
    }

    /// Writes the inert twins' conditions, and removes the finalizer of those deleted.
    async fn write_twins(&mut self, twins: BTreeMap<String, TwinWrite>, failures: &mut Failures) {
        for (name, write) in twins {
            let Some(twin) = (self.snapshot.twins.iter()).find(|t| t.name() == name) else {
                continue;
            };
            let group = twin.group;
            if let Some(status) = &write.status {
                let result = self.apply_status(group, &name, status).await;
                failures.record(Operation::ApplySkyhookStatus, &name, result);
            }
            if write.remove_finalizer {
                let result =
                    patch_finalizer(&self.workloads, group, &twin.object, &name, false).await;
                let result = (self.own_writes).landed(CachedKind::Workload(group), &name, result);
                failures.record(Operation::RemoveFinalizer, &name, result);
            }
        }
    }

    /// Writes `statuses`; returns the Skyhooks whose status write failed.
    async fn apply_statuses(
        &mut self,
        statuses: BTreeMap<String, SkyhookStatus>,
        failures: &mut Failures,
    ) -> BTreeSet<String> {
        let mut unwritten = BTreeSet::new();
        for (name, status) in statuses {
            let group = self.snapshot.owners.group_of(&name);
            let result = self.apply_status(group, &name, &status).await;
            if result.is_err() {
                unwritten.insert(name.clone());
            }
            failures.record(Operation::ApplySkyhookStatus, &name, result);
        }
        unwritten
    }

    /// Applies `status` to the object `name` of `group` (server-side apply of the status
    /// subresource), recording the write for the cache.
    async fn apply_status(
        &mut self,
        group: Group,
        name: &str,
        status: &SkyhookStatus,
    ) -> Result<(), kube::Error> {
        let body = StatusApply {
            api_version: Cow::Borrowed(group.api_version()),
            kind: Cow::Borrowed(group.kind()),
            status,
        };
        let result = (self.workloads)
            .patch_status((group, name), &self.ssa, &Patch::Apply(body))
            .await;
        (self.own_writes).landed(CachedKind::Workload(group), name, result)
    }
}

/// The body of a Skyhook status apply, serialized straight from the planned status: `json!`
/// would first copy it into a `Value` tree (several MiB for a status over 1,000 nodes).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusApply<'a> {
    api_version: Cow<'a, str>,
    kind: Cow<'a, str>,
    status: &'a SkyhookStatus,
}

/// The body of a ConfigMap apply, serialized straight from the planned ConfigMap (not copied
/// into a `Value` first, as for [`StatusApply`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfigMapApply<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: &'a ObjectMeta,
    data: Option<&'a BTreeMap<String, String>>,
}

/// Queues the plan's Events for the background sender (see [`super::event_sender`]): the
/// reconcile does not wait for them.
fn queue_events(sender: &EventSender, snapshot: &Snapshot, events: Vec<PlannedEvent>) {
    let outgoing = events.into_iter().map(|event| {
        let regarding = reference(snapshot, &event);
        let PlannedEvent {
            target: _,
            warning,
            reason,
            action,
            message,
        } = event;
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        Outgoing {
            event: Event {
                type_,
                reason: reason.to_owned(),
                note: Some(message),
                action: action.to_owned(),
                secondary: None,
            },
            regarding,
        }
    });
    sender.send(outgoing);
}

/// How many writes of one phase are in flight at once: a plan for thousands of nodes must not
/// take minutes of round trips (nodes change meanwhile and refuse the conditional patches), and
/// 32 stays far below the API server's default limit of 200 mutating requests in flight.
const WRITES_IN_FLIGHT: usize = 32;

/// Runs `write` over `items` with at most [`WRITES_IN_FLIGHT`] at once; results in any order.
/// The writes of one phase touch distinct objects, so their order within the phase is free.
async fn concurrently<T, R, F, Fut>(items: impl IntoIterator<Item = T>, write: F) -> Vec<R>
where
    F: FnMut(T) -> Fut,
    Fut: Future<Output = R>,
{
    stream::iter(items)
        .map(write)
        .buffer_unordered(WRITES_IN_FLIGHT)
        .collect()
        .await
}

/// The work of a plan that waits for the next one, decided once the node patches are done.
/// Pods, evictions and ConfigMaps were planned from the node states as read: on a node whose
/// patch was refused or held back that state is gone or not yet written, so its pods and
/// evictions wait. A changed package ConfigMap waits too when any node changed under the plan
/// (409): its new data without the node states that send those nodes back to `config` would
/// lose the config change for good; the pods mounting it wait with it. New ConfigMaps (a first
/// rollout, a new version) carry no such change and never wait, so a large rollout whose nodes
/// keep changing (heartbeats, labels) is never starved of them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Waiting {
    nodes: BTreeSet<String>,
    configmaps: BTreeSet<String>,
}

impl Waiting {
    fn after_node_patches(
        nodes: BTreeSet<String>,
        node_changed_under_plan: bool,
        upserts: &[ConfigMap],
        existing: &BTreeMap<String, OwnedConfigMap>,
    ) -> Self {
        let configmaps = upserts
            .iter()
            .filter_map(|configmap| configmap.metadata.name.clone())
            .filter(|name| node_changed_under_plan && existing.contains_key(name))
            .collect();
        Waiting { nodes, configmaps }
    }

    fn writes_configmap(&self, configmap: &ConfigMap) -> bool {
        configmap
            .metadata
            .name
            .as_ref()
            .is_none_or(|name| !self.configmaps.contains(name))
    }

    fn creates_pod(&self, pod: &PlannedPod) -> bool {
        let on_waiting_node = self.nodes.contains(pod.node());
        let mounts_waiting_configmap =
            (pod.configmaps().iter()).any(|configmap| self.configmaps.contains(configmap));
        !on_waiting_node && !mounts_waiting_configmap
    }
}

/// What a reconcile asks of the API server, as the bounded `category` label of
/// `skyhook_controller_reconcile_failures_total` and in the log line of each failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Listing the pods of a node to drain (observe).
    ListNodePods,
    /// Listing the PodDisruptionBudgets (observe).
    ListPodDisruptionBudgets,
    /// Adding the finalizer to a Skyhook.
    AddFinalizer,
    /// Patching a Skyhook's annotations.
    AnnotateSkyhook,
    /// Patching a node's metadata, spec or conditions.
    PatchNode,
    /// Applying a ConfigMap.
    ApplyConfigMap,
    /// Evicting a workload pod.
    EvictPod,
    /// Deleting a package or interrupt pod.
    DeletePod,
    /// Creating a stage Job.
    CreateJob,
    /// Creating a pod pulling a node's images before its cordon.
    CreatePrePull,
    /// Deleting a stage Job.
    DeleteJob,
    /// Patching a stage Job (recorded, suspended, its restart allowance spent, `last-logs`).
    PatchJob,
    /// Deleting a ConfigMap.
    DeleteConfigMap,
    /// Applying a Skyhook's status.
    ApplySkyhookStatus,
    /// Removing the finalizer from a Skyhook.
    RemoveFinalizer,
}

impl Operation {
    /// The metric label.
    pub const fn category(self) -> &'static str {
        match self {
            Operation::ListNodePods => "list-node-pods",
            Operation::ListPodDisruptionBudgets => "list-pod-disruption-budgets",
            Operation::AddFinalizer => "add-finalizer",
            Operation::AnnotateSkyhook => "annotate-skyhook",
            Operation::PatchNode => "patch-node",
            Operation::ApplyConfigMap => "apply-configmap",
            Operation::EvictPod => "evict-pod",
            Operation::DeletePod => "delete-pod",
            Operation::CreateJob => "create-job",
            Operation::CreatePrePull => "create-pre-pull",
            Operation::DeleteJob => "delete-job",
            Operation::PatchJob => "patch-job",
            Operation::DeleteConfigMap => "delete-configmap",
            Operation::ApplySkyhookStatus => "apply-skyhook-status",
            Operation::RemoveFinalizer => "remove-finalizer",
        }
    }

    /// The kind of the object it is about.
    const fn kind(self) -> &'static str {
        match self {
            Operation::ListNodePods | Operation::PatchNode => "Node",
            Operation::ListPodDisruptionBudgets => "PodDisruptionBudget",
            Operation::AddFinalizer
            | Operation::AnnotateSkyhook
            | Operation::ApplySkyhookStatus
            | Operation::RemoveFinalizer => "Skyhook",
            Operation::ApplyConfigMap | Operation::DeleteConfigMap => "ConfigMap",
            Operation::EvictPod | Operation::DeletePod | Operation::CreatePrePull => "Pod",
            Operation::CreateJob | Operation::DeleteJob | Operation::PatchJob => "Job",
        }
    }
}

/// The requests of one reconcile that failed, by operation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failures {
    by_operation: BTreeMap<Operation, u64>,
}

impl Failures {
    /// Records `result` of `operation` on the object `name`: a failure worth retrying is logged
    /// with the object and counted; success and 404 (already gone, or the object left
    /// meanwhile, which the next plan sees) are not. Returns whether it counted a failure.
    pub fn record(
        &mut self,
        operation: Operation,
        name: &str,
        result: Result<(), kube::Error>,
    ) -> bool {
        match result {
            Err(error) if !is_status(&error, 404) => {
                warn!(
                    category = operation.category(),
                    kind = operation.kind(),
                    name,
                    error = %error,
                    "request failed; the next reconcile retries"
                );
                *self.by_operation.entry(operation).or_default() += 1;
                true
            }
            _ => false,
        }
    }

    /// Adds the failures of `other`.
    pub fn merge(&mut self, other: Failures) {
        for (operation, count) in other.by_operation {
            *self.by_operation.entry(operation).or_default() += count;
        }
    }

    /// Whether nothing failed.
    pub fn is_empty(&self) -> bool {
        self.by_operation.is_empty()
    }

    /// Adds the failures to `skyhook_controller_reconcile_failures_total`.
    pub fn count_into(&self, metrics: &Metrics) {
        for (operation, count) in &self.by_operation {
            metrics.reconcile_failed(operation.category(), *count);
        }
    }
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

/// The API server's message when `error` is an eviction a PodDisruptionBudget refused: 429
/// with a `DisruptionBudget` cause (a 429 without it is API priority and fairness throttling,
/// an ordinary failure).
fn budget_refusal(error: &kube::Error) -> Option<String> {
    match error {
        kube::Error::Api(status)
            if status.code == 429
                && status.details.as_ref().is_some_and(|details| {
                    details
                        .causes
                        .iter()
                        .any(|cause| cause.reason == "DisruptionBudget")
                }) =>
        {
            Some(status.message.clone())
        }
        _ => None,
    }
}

fn is_status_result(result: &Result<(), kube::Error>, code: u16) -> bool {
    result.as_ref().is_err_and(|error| is_status(error, code))
}

/// Writes the Skyhook's finalizer list with ours added or removed, guarded by the
/// resourceVersion read so that a concurrent edit of the list is not lost.
async fn set_finalizer(
    apis: &WorkloadApis,
    snapshot: &Snapshot,
    name: &str,
    add: bool,
) -> Result<Option<(Group, Landed)>, kube::Error> {
    let Some(skyhook) = snapshot
        .skyhooks
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(name))
    else {
        return Ok(None);
    };
    patch_finalizer(apis, skyhook.group, &skyhook.object, name, add)
        .await
        .map(|landed| Some((skyhook.group, landed)))
}

/// Adds or removes the finalizer of `group` on `object`, conditional on its resource version.
async fn patch_finalizer(
    apis: &WorkloadApis,
    group: Group,
    object: &Skyhook,
    name: &str,
    add: bool,
) -> Result<Landed, kube::Error> {
    let finalizer = group.keys().finalizer;
    let mut finalizers: Vec<String> = object.metadata.finalizers.clone().unwrap_or_default();
    finalizers.retain(|f| f != finalizer);
    if add {
        finalizers.push(finalizer.to_owned());
    }
    let patch = json!({
        "metadata": {
            "resourceVersion": object.metadata.resource_version,
            "finalizers": finalizers,
        }
    });
    apis.patch((group, name), &PatchParams::default(), &Patch::Merge(patch))
        .await
}

/// Patches the nodes `names` concurrently, adding those whose patch failed to `refused`;
/// returns whether any was refused because the node changed since the plan read it (409).
/// Where [`patch_nodes`] records how its patches went.
struct NodePatchOutcome<'a> {
    /// The nodes whose patch failed.
    refused: BTreeSet<String>,
    /// The nodes whose patch failed for another reason than a conflict (409), with the error.
    rejected: BTreeMap<String, String>,
    failures: &'a mut Failures,
    own_writes: &'a mut OwnWrites,
}

async fn patch_nodes(
    api: &Api<CachedNode>,
    nodes: &BTreeMap<String, NodePatch>,
    read_versions: &HashMap<&str, Option<&str>>,
    names: Vec<&str>,
    outcome: &mut NodePatchOutcome<'_>,
) -> bool {
    let results = concurrently(names, |name| async move {
        let result = match nodes.get(name) {
            Some(patch) => {
                let version = read_versions.get(name).copied().flatten();
                patch_node(api, name, patch, version)
                    .await
                    .map(|node| node.map(|node| Landed::written(&node)))
            }
            None => Ok(None),
        };
        (name, result)
    })
    .await;
    let mut changed_under_plan = false;
    for (name, result) in results {
        let result = match result {
            Ok(Some(landed)) => outcome
                .own_writes
                .landed(CachedKind::Node, name, Ok(landed)),
            Ok(None) => Ok(()),
            Err(error) => Err(error),
        };
        let conflict = is_status_result(&result, 409);
        changed_under_plan |= conflict;
        if let Err(error) = &result
            && !conflict
            && !is_status(error, 404)
        {
            outcome.rejected.insert(name.to_owned(), error.to_string());
        }
        if outcome.failures.record(Operation::PatchNode, name, result) {
            outcome.refused.insert(name.to_owned());
        }
    }
    changed_under_plan
}

/// Writes one node's patch with the requests of [`node_writes`]. A status write carrying
/// metadata that the API server did not keep (a server resetting metadata on the status
/// subresource) is followed by the same metadata through the object, so the node state always
/// lands.
async fn patch_node(
    api: &Api<CachedNode>,
    name: &str,
    patch: &NodePatch,
    resource_version: Option<&str>,
) -> Result<Option<CachedNode>, kube::Error> {
    let now = jiff::Timestamp::now().to_string();
    let mut written = None;
    for write in node_writes(patch, resource_version, &now) {
        let node = match write {
            NodeWrite::Object(body) => {
                api.patch(name, &PatchParams::default(), &Patch::Merge(body))
                    .await?
            }
            NodeWrite::Status(body) => {
                let node = api
                    .patch_status(name, &PatchParams::default(), &Patch::Strategic(body))
                    .await?;
                if metadata_landed(&node, patch) {
                    node
                } else {
                    warn!(
                        node = name,
                        "the API server ignored metadata sent with the node's status; writing it to the node object instead"
                    );
                    let body = node_merge_patch(
                        &NodePatch {
                            annotations: patch.annotations.clone(),
                            labels: patch.labels.clone(),
                            ..NodePatch::default()
                        },
                        None,
                    );
                    match body {
                        Some(body) => {
                            api.patch(name, &PatchParams::default(), &Patch::Merge(body))
                                .await?
                        }
                        None => node,
                    }
                }
            }
        };
        written = Some(node);
    }
    Ok(written)
}

/// One request writing (part of) a node patch.
#[derive(Debug, Clone, PartialEq)]
enum NodeWrite {
    /// A JSON merge patch of the node object: metadata and spec.
    Object(Value),
    /// A strategic merge patch of the node's status subresource: the conditions, keyed by type,
    /// and the metadata when no spec changes with them.
    Status(Value),
}

/// The requests that write `patch`, as few as the API allows: the status subresource cannot
/// change the spec, and the object cannot change the conditions, but a Node's status subresource
/// takes metadata (only its spec is reset on a status write). So metadata changing with the
/// conditions and without the spec (a package starting on a node, a node completing) is one
/// write instead of two. The metadata is conditional on `resource_version` either way (see
/// [`node_merge_patch`]); conditions are stamped `now`.
fn node_writes(patch: &NodePatch, resource_version: Option<&str>, now: &str) -> Vec<NodeWrite> {
    let conditions = conditions_patch(patch, now);
    let spec_changes = patch.unschedulable.is_some() || patch.taints.is_some();
    match (node_merge_patch(patch, resource_version), conditions) {
        (None, None) => vec![],
        (Some(object), None) => vec![NodeWrite::Object(object)],
        (None, Some(conditions)) => vec![NodeWrite::Status(status_body(None, conditions))],
        (Some(object), Some(conditions)) if spec_changes => vec![
            NodeWrite::Object(object),
            NodeWrite::Status(status_body(None, conditions)),
        ],
        (Some(object), Some(conditions)) => {
            let metadata = object.get("metadata").cloned();
            vec![NodeWrite::Status(status_body(metadata, conditions))]
        }
    }
}

fn status_body(metadata: Option<Value>, conditions: Vec<Value>) -> Value {
    let mut body = Map::new();
    if let Some(metadata) = metadata {
        body.insert("metadata".into(), metadata);
    }
    body.insert("status".into(), json!({"conditions": conditions}));
    Value::Object(body)
}

/// The conditions set and removed by `patch`, as strategic merge patch entries; `None` when
/// none change.
fn conditions_patch(patch: &NodePatch, now: &str) -> Option<Vec<Value>> {
    if patch.conditions.is_empty() && patch.remove_conditions.is_empty() {
        return None;
    }
    let removals = patch
        .remove_conditions
        .iter()
        .map(|type_| json!({"type": type_, "$patch": "delete"}));
    let conditions = patch
        .conditions
        .iter()
        .map(|condition| {
            json!({
                "type": condition.type_,
                "status": condition.status,
                "reason": condition.reason,
                "message": condition.message,
                "lastTransitionTime": now,
                "lastHeartbeatTime": now,
            })
        })
        .chain(removals)
        .collect();
    Some(conditions)
}

/// Whether `node`, as a write returned it, carries the annotations and labels of `patch`.
fn metadata_landed(node: &NodeView, patch: &NodePatch) -> bool {
    let holds = |map: &PackedMap, wanted: &BTreeMap<String, Option<String>>| {
        wanted
            .iter()
            .all(|(key, value)| map.get(key) == value.as_deref())
    };
    holds(&node.annotations, &patch.annotations) && holds(&node.labels, &patch.labels)
}

/// The object an Event is about.
fn reference(snapshot: &Snapshot, event: &PlannedEvent) -> ObjectReference {
    match &event.target {
        EventTarget::Node(name) => ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(name.clone()),
            ..ObjectReference::default()
        },
        EventTarget::Skyhook(name) => {
            let found = (snapshot.skyhooks.iter())
                .find(|s| s.metadata.name.as_deref() == Some(name.as_str()));
            let group = found.map_or(Group::Skyhook, |s| s.group);
            ObjectReference {
                api_version: Some(group.api_version().to_owned()),
                kind: Some(group.kind().to_owned()),
                name: Some(name.clone()),
                uid: found.and_then(|s| s.metadata.uid.clone()),
                resource_version: found.and_then(|s| s.metadata.resource_version.clone()),
                ..ObjectReference::default()
            }
        }
    }
}

/// The merge patch of the node's metadata and spec, `None` when neither changes. The
/// annotations, labels and taint list written were computed from the node as read at
/// `resource_version`, so the patch carries it: a node edited since (an administrator's node
/// reset, a taint added) makes the API server answer 409 instead of the write undoing the edit.
fn node_merge_patch(patch: &NodePatch, resource_version: Option<&str>) -> Option<Value> {
    let mut metadata = Map::new();
    if !patch.annotations.is_empty() {
        metadata.insert("annotations".into(), json!(patch.annotations));
    }
    if !patch.labels.is_empty() {
        metadata.insert("labels".into(), json!(patch.labels));
    }
    let mut spec = Map::new();
    if let Some(unschedulable) = patch.unschedulable {
        spec.insert("unschedulable".into(), json!(unschedulable));
    }
    if let Some(taints) = &patch.taints {
        spec.insert("taints".into(), json!(taints));
    }
    if metadata.is_empty() && spec.is_empty() {
        return None;
    }
    if let Some(resource_version) = resource_version {
        metadata.insert("resourceVersion".into(), json!(resource_version));
    }
    let mut body = Map::new();
    body.insert("metadata".into(), Value::Object(metadata));
    if !spec.is_empty() {
        body.insert("spec".into(), Value::Object(spec));
    }
    Some(Value::Object(body))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_finalizer_stays_until_the_status_is_written() {
        use std::collections::BTreeSet;
        let finalizers = BTreeMap::from([
            ("added".to_owned(), true),
            ("written".to_owned(), false),
            ("unwritten".to_owned(), false),
        ]);
        let unwritten = BTreeSet::from(["unwritten".to_owned()]);
        assert_eq!(
            super::finalizer_removals(finalizers, &unwritten),
            BTreeMap::from([("written".to_owned(), false)])
        );
    }

    use std::collections::BTreeMap;

    use serde_json::json;

    use k8s_openapi::api::core::v1::{ConfigMap, Pod};

    use super::{
        ConfigMapApply, Failures, NodePatch, NodeWrite, Operation, OwnedConfigMap, PlannedPod,
        StatusApply, Waiting, metadata_landed, node_merge_patch, node_writes,
    };
    use crate::metrics::Metrics;
    use crate::reconcile::snapshot::NodeConditionView;

    fn api_error(code: u16) -> Result<(), kube::Error> {
        Err(kube::Error::Api(
            kube::core::Status::failure("refused", "Test")
                .with_code(code)
                .boxed(),
        ))
    }

    /// Failed requests reach `skyhook_controller_reconcile_failures_total` by operation; success
    /// and 404 (already gone) do not count.
    #[test]
    fn failed_requests_move_the_failure_counter() {
        let mut failures = Failures::default();
        let cases = [
            (Operation::PatchNode, "node-1", api_error(409), true),
            (Operation::PatchNode, "node-2", api_error(500), true),
            (Operation::CreateJob, "job-1", api_error(403), true),
            (Operation::DeletePod, "pod-2", api_error(404), false),
            (Operation::ApplySkyhookStatus, "demo", Ok(()), false),
        ];
        for (operation, name, result, counted) in cases {
            assert_eq!(failures.record(operation, name, result), counted, "{name}");
        }
        let mut observed = Failures::default();
        observed.record(Operation::ListNodePods, "node-3", api_error(500));
        observed.merge(failures);
        assert!(!observed.is_empty());

        let metrics = Metrics::new(true);
        observed.count_into(&metrics);
        observed.count_into(&metrics);
        let text = metrics.encode().unwrap();
        for line in [
            "skyhook_controller_reconcile_failures_total{category=\"patch-node\"} 4",
            "skyhook_controller_reconcile_failures_total{category=\"create-job\"} 2",
            "skyhook_controller_reconcile_failures_total{category=\"list-node-pods\"} 2",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        for absent in ["delete-pod", "apply-skyhook-status"] {
            assert!(!text.contains(absent), "{absent} in\n{text}");
        }
        assert!(Failures::default().is_empty());
    }

    fn configmap(name: &str) -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    }

    fn pod(node: &str, mounts: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{node}-{mounts}")},
            "spec": {
                "nodeName": node,
                "containers": [],
                "volumes": [{"name": "config", "configMap": {"name": mounts}}],
            }
        }))
        .unwrap()
    }

    /// A refused node holds back only its own pods; a 409 anywhere holds back changed package
    /// ConfigMaps and the pods mounting them, never new ones.
    #[test]
    fn only_the_work_planned_from_a_lost_node_state_waits() {
        let upserts = [configmap("changed"), configmap("new")];
        let existing = BTreeMap::from([(
            "changed".to_owned(),
            OwnedConfigMap::new(
                skyhook_api::generation::Group::Skyhook,
                "s".to_owned(),
                None,
                std::sync::Arc::new(ConfigMap::default()),
            ),
        )]);
        let refused = || ["node-2".to_owned()].into();
        // (refused nodes, a 409 among them, configmap, pod) -> (written, created)
        let cases = [
            (
                refused(),
                true,
                "changed",
                ("node-1", "changed"),
                (false, false),
            ),
            (refused(), true, "new", ("node-1", "new"), (true, true)),
            (refused(), true, "new", ("node-2", "new"), (true, false)),
            (
                refused(),
                false,
                "changed",
                ("node-1", "changed"),
                (true, true),
            ),
            (
                refused(),
                false,
                "changed",
                ("node-2", "changed"),
                (true, false),
            ),
            (
                Default::default(),
                true,
                "changed",
                ("node-1", "new"),
                (false, true),
            ),
            (
                Default::default(),
                false,
                "new",
                ("node-1", "changed"),
                (true, true),
            ),
        ];
        for (nodes, conflict, written, (node, mounts), expected) in cases {
            let waiting = Waiting::after_node_patches(nodes, conflict, &upserts, &existing);
            let got = (
                waiting.writes_configmap(&configmap(written)),
                waiting.creates_pod(
                    &PlannedPod::new(
                        &pod(node, mounts),
                        crate::jobs::JobInputs {
                            stage: skyhook_api::v1alpha1::Stage::Apply,
                            kind: crate::jobs::JobKind::PackageStage,
                            resource_id: "s-uid-1_p_1.0.0".to_owned(),
                            generation: 1,
                            stage_timeout: None,
                            backoff_limit: 3,
                        },
                    )
                    .unwrap(),
                ),
            );
            assert_eq!(
                got, expected,
                "409: {conflict}, {written}, pod on {node} mounting {mounts}"
            );
        }
    }

    #[test]
    fn node_merge_patches_are_conditional_on_the_version_read() {
        let state = NodePatch {
            annotations: BTreeMap::from([("a".to_owned(), Some("1".to_owned()))]),
            ..NodePatch::default()
        };
        let cordon = NodePatch {
            unschedulable: Some(true),
            labels: BTreeMap::from([("s".to_owned(), None)]),
            ..NodePatch::default()
        };
        let conditions_only = NodePatch {
            conditions: vec![NodeConditionView {
                type_: "T".into(),
                status: "True".into(),
                reason: "R".into(),
                message: "M".into(),
            }],
            ..NodePatch::default()
        };
        let cases = [
            (
                &state,
                Some("42"),
                Some(json!({"metadata": {"annotations": {"a": "1"}, "resourceVersion": "42"}})),
            ),
            (
                &state,
                None,
                Some(json!({"metadata": {"annotations": {"a": "1"}}})),
            ),
            (
                &cordon,
                Some("7"),
                Some(json!({
                    "metadata": {"labels": {"s": null}, "resourceVersion": "7"},
                    "spec": {"unschedulable": true}
                })),
            ),
            (&conditions_only, Some("7"), None),
        ];
        for (patch, version, expected) in cases {
            assert_eq!(
                node_merge_patch(patch, version),
                expected,
                "{patch:?} at {version:?}"
            );
        }
    }

    fn not_ready(status: &str) -> NodeConditionView {
        NodeConditionView {
            type_: "skyhook.nvidia.com/demo_NotReady".into(),
            status: status.into(),
            reason: "Incomplete".into(),
            message: "m".into(),
        }
    }

    fn condition_json(status: &str) -> serde_json::Value {
        json!({
            "type": "skyhook.nvidia.com/demo_NotReady",
            "status": status,
            "reason": "Incomplete",
            "message": "m",
            "lastTransitionTime": "T",
            "lastHeartbeatTime": "T",
        })
    }

    /// Metadata changing with the conditions goes in one status write; a spec change keeps its
    /// own object write, since the status subresource resets the spec.
    #[test]
    fn node_patches_take_as_few_writes_as_the_api_allows() {
        let state = BTreeMap::from([("a".to_owned(), Some("1".to_owned()))]);
        let status = BTreeMap::from([("s".to_owned(), Some("in_progress".to_owned()))]);
        let started = NodePatch {
            annotations: state.clone(),
            labels: status.clone(),
            conditions: vec![not_ready("True")],
            ..NodePatch::default()
        };
        let cordoned = NodePatch {
            unschedulable: Some(true),
            ..started.clone()
        };
        let removed = NodePatch {
            annotations: BTreeMap::from([("a".to_owned(), None)]),
            remove_conditions: vec!["skyhook.nvidia.com/demo_NotReady".into()],
            ..NodePatch::default()
        };
        let only_state = NodePatch {
            annotations: state,
            ..NodePatch::default()
        };
        let only_conditions = NodePatch {
            conditions: vec![not_ready("False")],
            ..NodePatch::default()
        };
        let cases = [
            (NodePatch::default(), vec![]),
            (
                started,
                vec![NodeWrite::Status(json!({
                    "metadata": {
                        "annotations": {"a": "1"},
                        "labels": {"s": "in_progress"},
                        "resourceVersion": "9",
                    },
                    "status": {"conditions": [condition_json("True")]},
                }))],
            ),
            (
                cordoned,
                vec![
                    NodeWrite::Object(json!({
                        "metadata": {
                            "annotations": {"a": "1"},
                            "labels": {"s": "in_progress"},
                            "resourceVersion": "9",
                        },
                        "spec": {"unschedulable": true},
                    })),
                    NodeWrite::Status(json!({"status": {"conditions": [condition_json("True")]}})),
                ],
            ),
            (
                removed,
                vec![NodeWrite::Status(json!({
                    "metadata": {"annotations": {"a": null}, "resourceVersion": "9"},
                    "status": {"conditions": [
                        {"type": "skyhook.nvidia.com/demo_NotReady", "$patch": "delete"}
                    ]},
                }))],
            ),
            (
                only_state,
                vec![NodeWrite::Object(json!({
                    "metadata": {"annotations": {"a": "1"}, "resourceVersion": "9"},
                }))],
            ),
            (
                only_conditions,
                vec![NodeWrite::Status(
                    json!({"status": {"conditions": [condition_json("False")]}}),
                )],
            ),
        ];
        for (patch, expected) in cases {
            assert_eq!(node_writes(&patch, Some("9"), "T"), expected, "{patch:?}");
        }
    }

    #[test]
    fn metadata_sent_with_the_status_is_checked_on_the_node_returned() {
        let patch = NodePatch {
            annotations: BTreeMap::from([
                ("a".to_owned(), Some("1".to_owned())),
                ("gone".to_owned(), None),
            ]),
            labels: BTreeMap::from([("s".to_owned(), Some("complete".to_owned()))]),
            ..NodePatch::default()
        };
        let node = |annotations: serde_json::Value, labels: serde_json::Value| {
            serde_json::from_value::<crate::cache::CachedNode>(json!({
                "metadata": {"name": "n", "annotations": annotations, "labels": labels}
            }))
            .unwrap()
        };
        let cases = [
            (
                node(json!({"a": "1", "b": "2"}), json!({"s": "complete"})),
                true,
            ),
            (
                node(json!({"a": "1", "gone": "x"}), json!({"s": "complete"})),
                false,
            ),
            (node(json!({"a": "0"}), json!({"s": "complete"})), false),
            (node(json!({"a": "1"}), json!({"s": "in_progress"})), false),
            (node(json!({}), json!({})), false),
        ];
        for (node, landed) in cases {
            assert_eq!(
                metadata_landed(&node, &patch),
                landed,
                "{:?} {:?}",
                node.annotations,
                node.labels
            );
        }
        assert!(metadata_landed(
            &node(json!({}), json!({})),
            &NodePatch::default()
        ));
    }

    /// The apply bodies are serialized from the planned objects directly; they must read as the
    /// `json!` documents the API server was sent before.
    #[test]
    fn apply_bodies_serialize_as_the_documents_they_replace() {
        use kube::Resource;
        use skyhook_api::v1alpha1::{Skyhook, SkyhookStatus, Status};

        let mut status = SkyhookStatus::default();
        status.node_status.insert("node-1".into(), Status::Complete);
        status.complete_nodes = "1/1".into();
        let body = StatusApply {
            api_version: Skyhook::api_version(&()),
            kind: Skyhook::kind(&()),
            status: &status,
        };
        let expected = json!({
            "apiVersion": "skyhook.nvidia.com/v1alpha1",
            "kind": "Skyhook",
            "status": status,
        });
        assert_eq!(serde_json::to_value(&body).unwrap(), expected);

        let mut configmap = ConfigMap::default();
        configmap.metadata.name = Some("meta".into());
        configmap.metadata.labels = Some(BTreeMap::from([("a".into(), "b".into())]));
        for data in [None, Some(BTreeMap::from([("k".into(), "v".into())]))] {
            configmap.data = data;
            let body = ConfigMapApply {
                api_version: "v1",
                kind: "ConfigMap",
                metadata: &configmap.metadata,
                data: configmap.data.as_ref(),
            };
            let expected = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": configmap.metadata,
                "data": configmap.data,
            });
            assert_eq!(serde_json::to_value(&body).unwrap(), expected);
        }
    }
}
