//! What every step of one plan reads and none changes: the snapshot, the configuration, the
//! time, and what the snapshot says once indexed (the controller's pods per node, and where the
//! Skyhook of each pod stands). Built once per plan, so a per-node question costs the node's
//! pods, not the cluster's.

use std::collections::HashMap;

use jiff::Timestamp;
use skyhook_api::generation::Group;
use skyhook_api::keys::Keys;
use skyhook_api::pod_owner::{PodFate, PodOwner, deletion_awaits, pod_fate};
use skyhook_api::resources::CpuMemory;
use skyhook_api::v1alpha1::Skyhook;

use crate::config::Config;
use crate::pod_outcome::PodOutcome;
use crate::reconcile::snapshot::{OwnedPod, Snapshot, Workload};

/// The read-only inputs of one plan.
pub(super) struct Context<'s> {
    pub(super) snapshot: &'s Snapshot,
    pub(super) config: &'s Config,
    pub(super) now: Timestamp,
    /// Per node, the controller's pods in the snapshot.
    pods_on: HashMap<&'s str, PodsOnNode<'s>>,
    /// Where the Skyhook of each pod in the snapshot stands, by pod name.
    pod_owners: HashMap<&'s str, PodOwner>,
}

/// The controller's pods the snapshot holds on one node, being deleted or not (they hold their
/// share of the node until they are gone), and what those with readable requests request. A
/// pod the kubelet refused holds its place among them but none of the node's resources.
#[derive(Debug, Default)]
struct PodsOnNode<'s> {
    pods: Vec<&'s OwnedPod>,
    /// How many of them run or will: all but the stage Jobs that have finished (a failed one is
    /// kept as the mark of its stage's failure, and runs nothing).
    running: usize,
    requests: CpuMemory,
}

impl<'s> Context<'s> {
    pub(super) fn new(snapshot: &'s Snapshot, config: &'s Config, now: Timestamp) -> Self {
        Context {
            snapshot,
            config,
            now,
            pods_on: pods_per_node(snapshot),
            pod_owners: pod_owners(snapshot),
        }
    }

    /// The controller's pods the snapshot holds on `node`.
    pub(super) fn snapshot_pods_on(&self, node: &str) -> impl Iterator<Item = &'s OwnedPod> + '_ {
        self.pods_on
            .get(node)
            .into_iter()
            .flat_map(|on_node| on_node.pods.iter().copied())
    }

    /// How many of the controller's pods the snapshot holds on `node`, being deleted or not,
    /// finished stage Jobs left out.
    pub(super) fn snapshot_pod_count(&self, node: &str) -> usize {
        self.pods_on.get(node).map_or(0, |on_node| on_node.running)
    }

    /// What the controller's pods the snapshot holds on `node` request, all together.
    pub(super) fn snapshot_requests_on(&self, node: &str) -> CpuMemory {
        self.pods_on
            .get(node)
            .map_or_else(CpuMemory::default, |on_node| on_node.requests)
    }

    /// Where the Skyhook `pod` works for stands. Every pod of the snapshot has an entry; one
    /// without would be taken as wanted, which deletes nothing.
    pub(super) fn owner_of(&self, pod: &OwnedPod) -> PodOwner {
        (self.pod_owners.get(pod.name.as_str()).copied()).unwrap_or(PodOwner::Live)
    }

    /// What becomes of `pod` whatever its status says (see [`skyhook_api::pod_owner`]).
    pub(super) fn fate_of(&self, pod: &OwnedPod) -> PodFate {
        pod_fate(self.owner_of(pod), pod.deleting)
    }

    /// The keys of the object named `name`: its live object's group's
    /// ([`skyhook_api::generation::Owners::keys_of`]).
    pub(super) fn keys_of(&self, name: &str) -> &'static Keys {
        self.snapshot.owners.keys_of(name)
    }

    /// The object named `name` in the snapshot, with its group.
    pub(super) fn skyhook(&self, name: &str) -> Option<&'s Workload> {
        (self.snapshot.skyhooks.iter()).find(|s| s.metadata.name.as_deref() == Some(name))
    }
}

/// The snapshot's pods by node, read once per plan: the per-node questions of a plan (is a pod
/// of this package there, may one more start) then cost the node's pods, not the cluster's.
fn pods_per_node(snapshot: &Snapshot) -> HashMap<&str, PodsOnNode<'_>> {
    let mut per_node: HashMap<&str, PodsOnNode<'_>> = HashMap::new();
    for pod in &snapshot.pods {
        let finished = pod.job.as_ref().is_some_and(|job| job.finished);
        let requests = pod
            .pod
            .spec
            .as_ref()
            .filter(|_| !matches!(pod.outcome, PodOutcome::Rejected { .. }) && !finished)
            .and_then(|spec| spec.requests)
            .unwrap_or_default();
        let on_node = per_node.entry(pod.node.as_str()).or_default();
        on_node.pods.push(pod);
        on_node.running += usize::from(!finished);
        on_node.requests = on_node.requests.plus(requests);
    }
    per_node
}

/// Where the Skyhook each of the snapshot's pods works for stands, by pod name (see
/// [`skyhook_api::pod_owner`]). A pod names its Skyhook by label and, when the operator made
/// it, by an owner reference: an owner reference to another UID than the Skyhook of its name
/// (or to a Skyhook no longer there) means its Skyhook is gone; no owner reference and no
/// Skyhook means a pod made by hand.
fn pod_owners(snapshot: &Snapshot) -> HashMap<&str, PodOwner> {
    let skyhooks: HashMap<&str, &Skyhook> = (snapshot.skyhooks.iter())
        .filter_map(|s| Some((s.metadata.name.as_deref()?, &**s)))
        .collect();
    // A run's owner is an object of either group: a migration re-parents runs in flight.
    let owner = |pod: &OwnedPod| {
        let owner_uid = (pod.pod.metadata.owner_references.iter().flatten())
            .find(|reference| Group::ALL.iter().any(|g| reference.kind == g.kind()))
            .map(|reference| reference.uid.as_str());
        let Some(skyhook) = skyhooks.get(pod.skyhook.as_str()) else {
            return match owner_uid {
                Some(_) => PodOwner::Gone,
                None => PodOwner::Unowned,
            };
        };
        if owner_uid.is_some_and(|uid| Some(uid) != skyhook.metadata.uid.as_deref()) {
            PodOwner::Gone
        } else if skyhook.metadata.deletion_timestamp.is_some() {
            let awaited = deletion_awaits(&skyhook.spec.packages, pod.annotation.as_ref());
            PodOwner::Deleting { awaited }
        } else {
            PodOwner::Live
        }
    };
    (snapshot.pods.iter())
        .map(|pod| (pod.name.as_str(), owner(pod)))
        .collect()
}
