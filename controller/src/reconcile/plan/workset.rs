//! The one thing a plan's steps change: the working copies of the nodes, the plan being built,
//! and what the plan decided so far that later decisions of the same plan must see (the pods it
//! creates and their requests, the pods it deletes because they succeeded, the drains it
//! starts, the node-metadata ConfigMaps it owes). Every step takes it `&mut`; its own questions
//! (may a pod start there, is a pod of that package there) are answered here, against the
//! snapshot and what this plan changed.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use skyhook_api::resources::CpuMemory;
use skyhook_api::v1alpha1::{Package, PackageStatus, Stage, Status};

use super::context::Context;
use super::event_kinds::{self, EventKind};
use super::node_work::NodeWork;
use super::output::{EventTarget, Plan, PlannedEvent};
use super::planned_pod::PlannedPod;
use crate::jobs::{JobInputs, JobKind};
use crate::names::OwnerSkyhook;
use crate::pod_match::ExpectedContainers;
use crate::pods::job_pod;
use crate::reconcile::snapshot::NodeView;

/// The working state of one plan.
pub(super) struct Workset<'s> {
    /// Per node, the node as this plan leaves it so far.
    pub(super) nodes: BTreeMap<&'s str, NodeWork<'s>>,
    pub(super) plan: Plan,
    /// The Events of [`Plan::events`], to add each once without searching the list.
    events_planned: HashSet<PlannedEvent>,
    /// Pods created by this plan, per node: (Skyhook, package label).
    created_on: BTreeMap<String, Vec<(String, String)>>,
    /// Per node, the requests of the package pods this plan creates.
    created_requests: BTreeMap<String, CpuMemory>,
    /// Pods this plan deletes because they succeeded.
    pub(super) succeeded: BTreeSet<String>,
    /// (Skyhook, node) pairs a package pod starts on: the last step brings their node-metadata
    /// ConfigMaps up to date with the node as this plan leaves it.
    pub(super) metadata_due: BTreeSet<(String, String)>,
    /// (Skyhook, node) pairs this plan cordons and drains, which `spec.onFailure.uncordon`
    /// leaves cordoned.
    pub(super) draining: BTreeSet<(String, String)>,
    /// The init containers each package's pods must run, for validating pods.
    pub(super) expected_containers: ExpectedContainers,
    /// The names of the runs that are stage Jobs (not bare pods), recorded or not: deleting one
    /// deletes the Job.
    jobs: HashSet<&'s str>,
    /// The names of the Jobs whose completion is recorded: a run created again under the same
    /// name waits until such a Job is gone.
    retained: HashSet<&'s str>,
    /// Nodes this plan auto-taints: no Skyhook works on them until the taint landed.
    pub(super) awaiting_taint: BTreeSet<String>,
    /// The pre-pull pods a gate of this plan waits for: the others are deleted.
    pub(super) pre_pulls_wanted: BTreeSet<String>,
}

impl<'s> Workset<'s> {
    pub(super) fn new(context: &Context<'s>) -> Self {
        Workset {
            nodes: (context.snapshot.nodes.iter())
                .map(|n| (n.name.as_str(), NodeWork::new(n, &context.snapshot.owners)))
                .collect(),
            plan: Plan::default(),
            events_planned: HashSet::new(),
            created_on: BTreeMap::new(),
            created_requests: BTreeMap::new(),
            succeeded: BTreeSet::new(),
            metadata_due: BTreeSet::new(),
            draining: BTreeSet::new(),
            expected_containers: ExpectedContainers::default(),
            jobs: (context.snapshot.pods.iter())
                .filter(|pod| pod.job.is_some())
                .map(|pod| pod.name.as_str())
                .chain(
                    context
                        .snapshot
                        .retained_jobs
                        .iter()
                        .map(|job| job.name.as_str()),
                )
                .collect(),
            retained: (context.snapshot.retained_jobs.iter())
                .map(|job| job.name.as_str())
                .collect(),
            awaiting_taint: BTreeSet::new(),
            pre_pulls_wanted: BTreeSet::new(),
        }
    }

    /// Creates the pre-pull pod `pod`.
    pub(super) fn create_pre_pull(&mut self, pod: k8s_openapi::api::core::v1::Pod) {
        self.plan.create_pre_pulls.push(pod);
    }

    /// Whether this plan creates the pre-pull pod `name`.
    pub(super) fn pre_pull_created(&self, name: &str) -> bool {
        (self.plan.create_pre_pulls.iter()).any(|pod| pod.metadata.name.as_deref() == Some(name))
    }

    pub(super) fn requeue(&mut self, after: Duration) {
        self.plan.requeue_after = Some(self.plan.requeue_after.map_or(after, |d| d.min(after)));
    }

    /// Adds an Event of `kind` about `target` unless this plan already emits the same one.
    pub(super) fn emit(&mut self, target: EventTarget, kind: EventKind, message: String) {
        let event = PlannedEvent {
            target,
            warning: kind.warning,
            reason: kind.reason,
            action: kind.action,
            message,
        };
        if self.events_planned.insert(event.clone()) {
            self.plan.events.push(event);
        }
    }

    /// `pod` of `package`, running `stage` as `kind`, wrapped in its stage Job, as the plan
    /// holds it until the apply sends it; `None`, with a Warning Event on the Skyhook, if it
    /// does not serialize (no pod the builders make fails to).
    pub(super) fn planned_pod(
        &mut self,
        context: &Context<'_>,
        owner: &OwnerSkyhook<'_>,
        (package, stage, kind): (&Package, Stage, JobKind),
        pod: &Pod,
    ) -> Option<PlannedPod> {
        let settings = &context.config.jobs;
        let stage_timeout = match package.stage_timeout(settings.stage_timeout) {
            Ok(timeout) => timeout,
            Err(error) => {
                let message = format!("{error}; no stage of it runs until it is fixed");
                let target = EventTarget::Skyhook(owner.name.to_owned());
                self.emit(target, event_kinds::POD_NOT_BUILT, message);
                return None;
            }
        };
        let inputs = JobInputs {
            stage,
            kind,
            resource_id: owner.stage_resource_id(stage, &package.name, &package.version),
            generation: owner.generation,
            stage_timeout,
            backoff_limit: settings.backoff_limit,
        };
        match PlannedPod::new(&job_pod(pod.clone(), package), inputs) {
            Ok(planned) => Some(planned),
            Err(error) => {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let message = format!("job {name} could not be serialized: {error}");
                self.emit(
                    EventTarget::Skyhook(owner.name.to_owned()),
                    event_kinds::POD_NOT_BUILT,
                    message,
                );
                None
            }
        }
    }

    /// Deletes the run `name`: its stage Job (with its attempts) or its bare pod.
    pub(super) fn delete_pod(&mut self, name: &str, why: impl Into<String>) {
        let deletes = if self.jobs.contains(name) {
            &mut self.plan.delete_jobs
        } else {
            &mut self.plan.delete_pods
        };
        deletes.entry(name.to_owned()).or_insert_with(|| why.into());
    }

    /// Deletes the pod `name` itself (a Job's attempt).
    pub(super) fn delete_attempt(&mut self, name: &str, why: impl Into<String>) {
        (self.plan.delete_pods)
            .entry(name.to_owned())
            .or_insert_with(|| why.into());
    }

    /// Writes on Job `name` that its end is recorded, to be collected `ttl` after it finished.
    pub(super) fn record_job(&mut self, name: &str, ttl: Duration) {
        let seconds = i32::try_from(ttl.as_secs()).unwrap_or(i32::MAX);
        self.plan.record_jobs.insert(name.to_owned(), seconds);
    }

    /// Suspends (`true`) or resumes (`false`) Job `name`.
    pub(super) fn suspend_job(&mut self, name: &str, suspend: bool) {
        self.plan.suspend_jobs.insert(name.to_owned(), suspend);
    }

    /// Creates `pod` of `skyhook`, labelled `package_label`, on `node`, counting it among the
    /// node's pods (and its `requests`, when given, among what they request).
    pub(super) fn create_pod(
        &mut self,
        (skyhook, node, package_label): (&str, &str, String),
        pod: PlannedPod,
        requests: Option<CpuMemory>,
    ) {
        if self.retained.contains(pod.name()) {
            // The stage runs again under the name of a Job kept for its logs: that Job, finished,
            // is deleted at once (its pods after it) and the new one created in its place.
            self.delete_pod(pod.name(), "its stage runs again");
        }
        self.plan.create_pods.push(pod);
        if let Some(requests) = requests {
            let created = self.created_requests.entry(node.to_owned()).or_default();
            *created = created.plus(requests);
        }
        self.created_on
            .entry(node.to_owned())
            .or_default()
            .push((skyhook.to_owned(), package_label));
    }

    /// Whether a pod of `skyhook` labelled `package_label` is on `node`. A pod this plan
    /// deletes because it succeeded no longer counts (the next stage's pod has another name);
    /// any other pod being deleted still does, so a replacement with the same name waits for
    /// it to be gone.
    pub(super) fn pod_exists(
        &self,
        context: &Context<'_>,
        skyhook: &str,
        node: &str,
        package_label: &str,
    ) -> bool {
        context.snapshot_pods_on(node).any(|p| {
            p.skyhook == skyhook
                && p.package_label == package_label
                && !self.succeeded.contains(&p.name)
        }) || self.created_on.get(node).is_some_and(|created| {
            created
                .iter()
                .any(|(s, label)| s == skyhook && label == package_label)
        })
    }

    /// Whether a pod of `skyhook` is on `node`, including those this plan deletes or creates.
    pub(super) fn skyhook_pod_on(&self, context: &Context<'_>, skyhook: &str, node: &str) -> bool {
        context.snapshot_pods_on(node).any(|p| p.skyhook == skyhook)
            || self
                .created_on
                .get(node)
                .is_some_and(|created| created.iter().any(|(s, _)| s == skyhook))
    }

    /// Whether a pod on `node` holds its interrupts: one a live Skyhook still wants, including
    /// those this plan deletes (they are still running until they are gone), one a deletion
    /// waits for, or one this plan creates. The pods of a Skyhook that is gone, or of one
    /// being deleted that the deletion does not wait for, hold nothing: nobody wants them, and
    /// they are removed. A stage Job that has finished (kept as the mark of its stage's failure)
    /// runs nothing and holds nothing, as upstream's in-flight gate.
    pub(super) fn pods_hold_interrupts(&self, context: &Context<'_>, node: &str) -> bool {
        skyhook_api::pod_owner::pods_hold_interrupts(
            context
                .snapshot_pods_on(node)
                .filter(|pod| !pod.job.as_ref().is_some_and(|job| job.finished))
                .map(|pod| context.fate_of(pod)),
        ) || self.created_on.get(node).is_some_and(|c| !c.is_empty())
    }

    /// How many of the controller's pods are on `node`, all Skyhooks together: those in the
    /// snapshot, including the ones being deleted, and those this plan creates.
    pub(super) fn pod_count(&self, context: &Context<'_>, node: &str) -> usize {
        context.snapshot_pod_count(node) + self.created_on.get(node).map_or(0, Vec::len)
    }

    /// Whether a package pod requesting `requests` may start on `node` now: fewer than
    /// `MAX_PODS_PER_NODE` of the controller's pods are there, and, when the node reports its
    /// allocatable CPU and memory, the requests of those pods plus this one fit in it. Workload
    /// pods are not cached, so the kubelet may still refuse a pod that passes; that rejection is
    /// retried (`pod_results`). A pod that would not fit the node even alone is not held back:
    /// waiting could never make room, so it starts and the kubelet's refusal is reported as a
    /// failure rather than waited on silently.
    pub(super) fn has_pod_slot(
        &self,
        context: &Context<'_>,
        node: &str,
        requests: CpuMemory,
    ) -> bool {
        let count = self.pod_count(context, node);
        if count >= context.config.max_pods_per_node {
            return false;
        }
        let Some(allocatable) = self.view_of(node).and_then(|view| view.allocatable) else {
            return true;
        };
        if count == 0 || !self.can_ever_fit(node, requests) {
            return true;
        }
        let held = context.snapshot_requests_on(node);
        let created = self.created_requests.get(node).copied().unwrap_or_default();
        held.plus(created).plus(requests).fits_within(allocatable)
    }

    /// Whether `requests` fit the node's allocatable CPU and memory with nothing else on it
    /// (true when the node does not report them). A pod that does not is refused by the kubelet
    /// and never holds any of the node's resources.
    pub(super) fn can_ever_fit(&self, node: &str, requests: CpuMemory) -> bool {
        self.view_of(node)
            .and_then(|view| view.allocatable)
            .is_none_or(|allocatable| requests.fits_within(allocatable))
    }

    pub(super) fn view_of(&self, node: &str) -> Option<&'s NodeView> {
        self.nodes.get(node).map(|work| work.view)
    }

    /// `package`'s entry in `skyhook`'s node state on `node`, as this plan leaves it so far.
    pub(super) fn entry(
        &mut self,
        skyhook: &str,
        node: &str,
        package: &Package,
    ) -> Option<PackageStatus> {
        self.nodes
            .get_mut(node)?
            .state(skyhook)
            .get_version(&package.name, &package.version)
            .cloned()
    }

    pub(super) fn set_entry(&mut self, skyhook: &str, node: &str, entry: PackageStatus) {
        if let Some(work) = self.nodes.get_mut(node) {
            work.state(skyhook).upsert(entry);
        }
    }

    pub(super) fn set_status(&mut self, skyhook: &str, node: &str, status: Status) {
        if let Some(work) = self.nodes.get_mut(node) {
            work.set_status(skyhook, status);
        }
    }

    /// Whether `node`'s node state of `skyhook` does not parse (false for an unknown node).
    pub(super) fn state_malformed(&mut self, node: &str, skyhook: &str) -> bool {
        self.nodes
            .get_mut(node)
            .is_some_and(|work| work.state_malformed(skyhook))
    }

    /// Splits the nodes `skyhook` targets into those whose node state parses and those whose
    /// does not.
    pub(super) fn split_malformed(
        &mut self,
        skyhook: &str,
        matched: Vec<&'s NodeView>,
    ) -> (Vec<&'s NodeView>, Vec<&'s NodeView>) {
        matched
            .into_iter()
            .partition(|node| !self.state_malformed(&node.name, skyhook))
    }

    /// How many nodes hold a fleet slot as this plan leaves them so far.
    pub(super) fn fleet_held(&mut self) -> usize {
        self.nodes
            .values_mut()
            .filter_map(|work| work.holds_fleet_slot().then_some(()))
            .count()
    }
}
