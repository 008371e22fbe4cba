//! Pod results (spec §2.9 with our fixes): a succeeded pod advances the node state and is
//! deleted; a failed one marks its package `erroring` with the reason and is left for the
//! kubelet to retry; an invalidated one is deleted; an interrupt pod killed by its own reboot
//! is waited for, not reported. A failed pod of an active Skyhook that no longer belongs to its
//! spec or to the node state as read (a node reset under a crash-looping pod) is deleted without
//! reporting: writing its failure back would recreate the very entry it no longer matches, and
//! the stray pod would then hold the node in `erroring` for good.
//!
//! Before any of that, a pod whose Skyhook is gone, or is being deleted and does not wait for
//! what the pod runs, is deleted and its outcome ignored ([`skyhook_api::pod_owner`]): a
//! crash-looping pod of a deleted Skyhook otherwise rewrote the node state its deletion had
//! just cleaned, at every restart, and the deletion never ended.
//!
//! A stage Job's attempt the kubelet refused at admission is reported with a Warning Event and
//! left to the Job controller, which runs the next attempt after its backoff. A bare pod (made by
//! an earlier release) the kubelet refused at admission ([`PodOutcome::Rejected`]) because the node was full
//! is not a package failure and the kubelet never retries it, so the controller does: the refused
//! pod stays
//! until its backoff ([`rejection_backoff`], 10 s doubling up to 5 min with the entry's
//! `restarts`) has passed since its creation, then it is deleted with a Warning Event, its entry
//! keeps its stage with one more restart, and the next reconcile after it is gone creates it again
//! when the node has a slot. The refused pod itself records when the attempt was made, so the
//! backoff survives a controller restart and costs no write while it runs. A pod that requests
//! more CPU or memory than the node's allocatable can never be admitted there: its refusal is a
//! failure (`erroring` with the kubelet's reason), fixed by correcting the package's resources.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use skyhook_api::pod_annotation::PodPackageAnnotation;
use skyhook_api::pod_owner::{PodOwner, pod_fate};
use skyhook_api::stage::{NodeStateEdit, apply_edits, on_pod_failed, on_pod_succeeded};
use skyhook_api::v1alpha1::{Package, Status};

use super::context::Context;
use super::event_kinds;
use super::output::EventTarget;
use super::reboots::{UnconfirmedReboot, UnconfirmedReboots, reboot_not_confirmed_event};
use super::spec_changes::invalid_reason;
use super::workset::Workset;
use crate::names::OwnerSkyhook;
use crate::pod_match::InvalidReason;
use crate::pod_outcome::{PodFailure, PodOutcome, REBOOT_NOT_CONFIRMED};
use crate::reconcile::snapshot::{OwnedPod, Workload};

/// What the pod results leave for the Skyhooks' passes besides their node-state edits.
#[derive(Debug, Default)]
pub(super) struct PodResults {
    /// Per Skyhook, the reboots its interrupt pods found not confirmed in time: each Skyhook's
    /// pass takes its own into its status.
    unconfirmed_reboots: BTreeMap<String, UnconfirmedReboots>,
}

impl PodResults {
    /// The reboots of `skyhook` its pods found not confirmed in time, by node.
    pub(super) fn unconfirmed_reboots_of(&self, skyhook: &str) -> UnconfirmedReboots {
        (self.unconfirmed_reboots.get(skyhook).cloned()).unwrap_or_default()
    }

    /// Records that `node` did not come back from the reboot asked for by `package` of
    /// `skyhook`, for the Skyhook's condition.
    fn unconfirmed_reboot(
        &mut self,
        skyhook: &str,
        node: &str,
        package: String,
        requested: Option<Timestamp>,
    ) {
        self.unconfirmed_reboots
            .entry(skyhook.to_owned())
            .or_default()
            .insert(node.to_owned(), UnconfirmedReboot { package, requested });
    }
}

/// Turns every pod's outcome into node-state edits, deletions and Events.
pub(super) fn pod_results<'s>(context: &Context<'s>, workset: &mut Workset<'s>) -> PodResults {
    let mut results = PodResults::default();
    let snapshot = context.snapshot;
    let empty = BTreeMap::new();
    for pod in &snapshot.pods {
        let owner = context.owner_of(pod);
        let fate = pod_fate(owner, pod.deleting);
        if !fate.record_outcome {
            if fate.remove {
                workset.delete_pod(&pod.name, abandoned(owner));
            }
            continue;
        }
        let Some(annotation) = &pod.annotation else {
            continue;
        };
        // A node whose state does not parse is left as it is, its pods included.
        if workset.state_malformed(&pod.node, &annotation.skyhook) {
            continue;
        }
        let skyhook = context.skyhook(&annotation.skyhook);
        let packages: &BTreeMap<String, Package> = skyhook.map_or(&empty, |s| &s.spec.packages);
        match &pod.outcome {
            PodOutcome::Invalid => workset.delete_pod(&pod.name, "invalidated"),
            PodOutcome::Unrecognised { .. } | PodOutcome::Running => {}
            PodOutcome::AwaitingReboot { deadline } => {
                let wait = context.now.duration_until(*deadline);
                let wait = std::time::Duration::try_from(wait).unwrap_or_default();
                workset.requeue(wait);
            }
            PodOutcome::RecreateAfterReboot => {
                workset.delete_pod(&pod.name, "the node rebooted under it");
            }
            PodOutcome::Succeeded { restarts, .. } => {
                succeeded_pod(context, workset, pod, annotation, *restarts, packages);
            }
            PodOutcome::FailedWithoutCause => workset.delete_pod(
                &pod.name,
                "its node refused every attempt; the stage runs again",
            ),
            PodOutcome::Retrying(failure) => {
                if let Some(reason) =
                    skyhook.and_then(|skyhook| stray(context, workset, pod, skyhook))
                {
                    workset.delete_pod(&pod.name, format!("invalidated: {reason:?}"));
                    continue;
                }
                let failed = (pod, annotation);
                record_failure(context, workset, &mut results, failed, failure, false);
            }
            PodOutcome::Rejected { reason, message } => {
                let refusal = (reason.as_str(), message.as_deref());
                rejected_pod(
                    context,
                    workset,
                    &mut results,
                    (pod, annotation),
                    skyhook,
                    refusal,
                );
            }
            PodOutcome::Failed(failure) => {
                if let Some(reason) =
                    skyhook.and_then(|skyhook| stray(context, workset, pod, skyhook))
                {
                    workset.delete_pod(&pod.name, format!("invalidated: {reason:?}"));
                    continue;
                }
                record_failure(
                    context,
                    workset,
                    &mut results,
                    (pod, annotation),
                    failure,
                    true,
                );
                if pod
                    .job
                    .as_ref()
                    .is_some_and(|job| job.finished && !job.recorded)
                {
                    workset.record_job(&pod.name, context.config.jobs.ttl_failed);
                    workset.emit(
                        EventTarget::Node(pod.node.clone()),
                        event_kinds::JOB_FAILED,
                        format!(
                            "Package [{}:{}] stage {} failed on [{}:{}]: {}",
                            annotation.name,
                            annotation.version,
                            annotation.stage,
                            pod.group.keys().word,
                            annotation.skyhook,
                            failure.reason
                        ),
                    );
                }
            }
        }
    }
    results
}

/// A succeeded pod advances its node's state and is deleted; a completed stage Job is marked
/// recorded instead and kept until its TTL, for its logs.
fn succeeded_pod<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pod: &OwnedPod,
    annotation: &PodPackageAnnotation,
    restarts: i32,
    packages: &BTreeMap<String, Package>,
) {
    if pod.deleting {
        return;
    }
    let Some(work) = workset.nodes.get_mut(pod.node.as_str()) else {
        workset.delete_pod(&pod.name, "its node is gone");
        return;
    };
    let state = work.state(&annotation.skyhook);
    let edits = on_pod_succeeded(state, annotation, restarts, packages);
    apply_edits(state, &edits);
    // One Event per recorded stage, as upstream: its Job reconciler reports a Job's completion
    // (`JobComplete`) and no longer the pod watch's `UpdateNodeState` beside it.
    if pod.job.is_some() {
        workset.record_job(&pod.name, context.config.jobs.ttl_succeeded);
        workset.emit(
            EventTarget::Node(pod.node.clone()),
            event_kinds::JOB_COMPLETE,
            format!(
                "Package [{}:{}] state complete on [{}:{}]",
                annotation.name,
                annotation.version,
                pod.group.keys().word,
                annotation.skyhook
            ),
        );
    } else {
        workset.delete_pod(&pod.name, "succeeded");
        workset.emit(
            EventTarget::Node(pod.node.clone()),
            event_kinds::UPDATE_NODE_STATE,
            format!(
                "Package [{}:{}] state complete on [{}:{}] stage {}",
                annotation.name,
                annotation.version,
                pod.group.keys().word,
                annotation.skyhook,
                annotation.stage
            ),
        );
    }
    workset.succeeded.insert(pod.name.clone());
}

/// A pod its node refused: deleted when stray, a failure when it can never fit, retried
/// after its backoff otherwise.
fn rejected_pod<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    results: &mut PodResults,
    (pod, annotation): (&OwnedPod, &PodPackageAnnotation),
    skyhook: Option<&Workload>,
    (reason, message): (&str, Option<&str>),
) {
    if pod.deleting {
        return;
    }
    if let Some(invalid) = skyhook.and_then(|skyhook| stray(context, workset, pod, skyhook)) {
        workset.delete_pod(&pod.name, format!("invalidated: {invalid:?}"));
        return;
    }
    if pod.job.is_some() && !never_fits(workset, pod) {
        // The Job controller runs the next attempt after its own backoff.
        refused_attempt_event(workset, pod, annotation, reason, message);
        return;
    }
    if never_fits(workset, pod) {
        let failure = PodFailure {
            container: None,
            exit_code: None,
            reason: reason.to_owned(),
            message: message.map(str::to_owned),
            restarts: 0,
            reboot_requested: None,
        };
        record_failure(context, workset, results, (pod, annotation), &failure, true);
        return;
    }
    retry_rejected(context, workset, pod, annotation, reason, message);
}

/// Marks the package of a failed pod `erroring` with the reason, with a Warning Event when
/// that changes something; the pod is left for the kubelet to retry. The node reads `erroring`
/// too when the failure `ends_stage` (a bare pod's, or a stage Job's final one); while a Job
/// retries, the node stays `in_progress` (upstream v0.20).
fn record_failure<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    results: &mut PodResults,
    (pod, annotation): (&OwnedPod, &PodPackageAnnotation),
    failure: &PodFailure,
    ends_stage: bool,
) {
    let Some(work) = workset.nodes.get_mut(pod.node.as_str()) else {
        return;
    };
    let edit = on_pod_failed(annotation, failure.restarts);
    let state = work.state(&annotation.skyhook);
    let changed = match &edit {
        NodeStateEdit::Upsert(entry) => !state
            .get_version(&entry.name, &entry.version)
            .is_some_and(|old| old == entry),
        NodeStateEdit::Remove(_) => true,
    };
    apply_edits(state, std::slice::from_ref(&edit));
    let was_erroring = work.status(&annotation.skyhook) == Status::Erroring;
    if ends_stage {
        work.set_status(&annotation.skyhook, Status::Erroring);
    }
    if failure.reason == REBOOT_NOT_CONFIRMED {
        let package = format!("{}:{}", annotation.name, annotation.version);
        if changed || !was_erroring {
            reboot_not_confirmed_event(
                context,
                workset,
                &annotation.skyhook,
                &pod.node,
                &package,
                failure.reboot_requested,
            );
        }
        results.unconfirmed_reboot(
            &annotation.skyhook,
            &pod.node,
            package,
            failure.reboot_requested,
        );
    } else if changed || !was_erroring {
        workset.emit(
            EventTarget::Node(pod.node.clone()),
            event_kinds::PACKAGE_ERRORING,
            format!(
                "Package [{}:{}] state erroring on [{}:{}] stage {}: {}{}",
                annotation.name,
                annotation.version,
                pod.group.keys().word,
                annotation.skyhook,
                annotation.stage,
                failure.reason,
                failure
                    .container
                    .as_ref()
                    .map(|c| format!(" in container {c}"))
                    .unwrap_or_default(),
            ),
        );
    }
}

/// Reports an attempt of a stage Job that its node refused.
fn refused_attempt_event(
    workset: &mut Workset<'_>,
    pod: &OwnedPod,
    annotation: &PodPackageAnnotation,
    reason: &str,
    message: Option<&str>,
) {
    workset.emit(
        EventTarget::Node(pod.node.clone()),
        event_kinds::POD_REJECTED,
        format!(
            "Package [{}:{}] of [{}:{}] stage {} was rejected by node [{}]: {reason}{}; \
             its job runs it again",
            annotation.name,
            annotation.version,
            pod.group.keys().word,
            annotation.skyhook,
            annotation.stage,
            pod.node,
            message.map(|m| format!(" ({m})")).unwrap_or_default(),
        ),
    );
}

/// Whether `pod` requests more CPU or memory than its node can give even with nothing else
/// on it: refusing it is then no passing lack of room, and retrying cannot help.
fn never_fits(workset: &Workset<'_>, pod: &OwnedPod) -> bool {
    let Some(allocatable) = workset.view_of(&pod.node).and_then(|view| view.allocatable) else {
        return false;
    };
    pod.pod
        .spec
        .as_ref()
        .and_then(|spec| spec.requests)
        .is_some_and(|requests| !requests.fits_within(allocatable))
}

/// Deletes a pod the node refused once its backoff has passed, counting the attempt in its
/// entry; until then, looks again when it ends.
fn retry_rejected<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pod: &OwnedPod,
    annotation: &PodPackageAnnotation,
    reason: &str,
    message: Option<&str>,
) {
    let Some(work) = workset.nodes.get_mut(pod.node.as_str()) else {
        workset.delete_pod(&pod.name, "its node is gone");
        return;
    };
    let state = work.state(&annotation.skyhook);
    let entry = state
        .get_version(&annotation.name, &annotation.version)
        .filter(|entry| entry.stage == annotation.stage)
        .cloned();
    let attempts = entry.as_ref().map_or(0, |entry| entry.restarts.max(0));
    let backoff = rejection_backoff(attempts);
    let created = pod
        .pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(Timestamp::UNIX_EPOCH, |time| time.0);
    let retry_at = SignedDuration::try_from(backoff)
        .ok()
        .and_then(|backoff| created.checked_add(backoff).ok())
        .unwrap_or(context.now);
    if context.now < retry_at {
        let wait = context.now.duration_until(retry_at);
        workset.requeue(Duration::try_from(wait).unwrap_or(backoff));
        return;
    }
    if let Some(mut entry) = entry {
        entry.restarts = attempts.saturating_add(1);
        state.upsert(entry);
    }
    workset.delete_pod(&pod.name, format!("rejected by its node: {reason}"));
    workset.emit(
        EventTarget::Node(pod.node.clone()),
        event_kinds::POD_REJECTED,
        format!(
            "Package [{}:{}] of [{}:{}] stage {} was rejected by node [{}]: {reason}{}; \
             creating its pod again (retry {} after {})",
            annotation.name,
            annotation.version,
            pod.group.keys().word,
            annotation.skyhook,
            annotation.stage,
            pod.node,
            message.map(|m| format!(" ({m})")).unwrap_or_default(),
            attempts.saturating_add(1),
            describe(backoff),
        ),
    );
}

/// Why `pod` of `skyhook` no longer belongs to that Skyhook's spec or to its node's state as
/// read; `None` when it does, or when the Skyhook is paused or being deleted (its pods are
/// then not validated at all, as in their passes).
fn stray<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pod: &OwnedPod,
    skyhook: &Workload,
) -> Option<InvalidReason> {
    if skyhook.is_paused() || skyhook.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let owner = OwnerSkyhook::new(skyhook.group, skyhook).ok()?;
    invalid_reason(context, workset, &owner, &skyhook.spec.packages, pod)
}

/// Why a pod nobody wants any more is deleted.
fn abandoned(owner: PodOwner) -> &'static str {
    match owner {
        PodOwner::Gone => "its Skyhook is gone",
        _ => "its Skyhook is being deleted and waits for nothing it runs",
    }
}

/// Wait before the first retry of a pod its node refused.
pub const REJECTION_BACKOFF_FIRST: Duration = Duration::from_secs(10);
/// Longest wait between retries of a refused pod.
pub const REJECTION_BACKOFF_MAX: Duration = Duration::from_secs(300);

/// How long a pod refused by its node waits before it is created again, after `attempts` earlier
/// refusals of the same stage: 10 s, doubling, at most 5 min.
pub fn rejection_backoff(attempts: i32) -> Duration {
    let doublings = u32::try_from(attempts).unwrap_or(0).min(16);
    REJECTION_BACKOFF_FIRST
        .saturating_mul(1 << doublings)
        .min(REJECTION_BACKOFF_MAX)
}

/// `10s`, `2m40s`, `5m`.
fn describe(value: Duration) -> String {
    match (value.as_secs() / 60, value.as_secs() % 60) {
        (0, secs) => format!("{secs}s"),
        (mins, 0) => format!("{mins}m"),
        (mins, secs) => format!("{mins}m{secs}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejection_backoff_doubles_up_to_five_minutes() {
        let cases = [
            (-1, "10s"),
            (0, "10s"),
            (1, "20s"),
            (2, "40s"),
            (3, "1m20s"),
            (4, "2m40s"),
            (5, "5m"),
            (6, "5m"),
            (i32::MAX, "5m"),
        ];
        for (attempts, want) in cases {
            assert_eq!(describe(rejection_backoff(attempts)), want, "{attempts}");
        }
    }
}
