//! What a stage Job and its attempts mean for the node state (upstream v0.18-v0.20, §2.3).
//!
//! Contract: [`outcome`] is pure. It reads the Job's true conditions and counts, its attempts'
//! pods and the node's boot ID, and answers with the same [`PodOutcome`] a bare pod's status
//! gives, so that the planner treats a Job's run as it treats a pod:
//! * `Complete` → [`PodOutcome::Succeeded`], `restarts` = the failed attempts.
//! * `Failed` → [`PodOutcome::Failed`] when the failure is genuine (the Job's reason is not
//!   `BackoffLimitExceeded`, as `DeadlineExceeded`; or it spent a restart allowance; or one of
//!   its attempts [`failed_genuinely`]), else [`PodOutcome::FailedWithoutCause`]: only attempts
//!   the node refused, which the stage re-runs.
//! * Unfinished: the newest attempt's pod outcome, where an attempt's failure is
//!   [`PodOutcome::Retrying`] (the Job controller runs another; the node stays `in_progress`),
//!   an attempt the node refused stays [`PodOutcome::Rejected`] (reported; the Job controller
//!   runs another), and a pod the reboot ended or an attempt that succeeded before the Job says
//!   so are [`PodOutcome::Running`]: the Job controller handles them. A reboot that
//!   was never confirmed stays a failure (ours: `REBOOT_DEADLINE`).
//! * At `FailureTarget` for more than [`FAILURE_TARGET_GRACE`] without `Failed`
//!   ([`failure_target_stale`]): [`PodOutcome::Failed`], with the condition's reason. The Job
//!   controller has decided the Job fails (its retries are spent or its deadline passed) but
//!   cannot finish it, because a pod never terminates (its node is unreachable): the failure is
//!   recorded as the Job's failure would be, while the Job itself is marked recorded only once
//!   it does fail.

use jiff::Timestamp;
use skyhook_api::generation::group_of_labels;

use crate::cache::CachedPod;
use crate::cache::job::{CachedJob, JobCondition};
use crate::cache::pod::{CachedContainerStatus, CachedPodStatus};
use crate::pod_outcome::{
    self, CRASH_LOOP_BACK_OFF, OutcomeContext, PodFailure, PodOutcome, REBOOT_NOT_CONFIRMED,
};

/// The Job controller's reason for a Job whose retries are spent.
pub const BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
/// The reason of a pod or Job killed by its `activeDeadlineSeconds`.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// The condition the Job controller sets as soon as it decides a Job fails; `Failed` follows
/// once every pod of the Job has terminated.
pub const FAILURE_TARGET: &str = "FailureTarget";
/// How long a Job may sit at `FailureTarget` before its failure is recorded without waiting for
/// `Failed` (upstream's grace): long enough for any pod that can terminate to do so.
pub const FAILURE_TARGET_GRACE: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// What `job` means, given its attempts' pods (any order). See the module documentation.
pub fn outcome(
    job: &CachedJob,
    attempts: &[&CachedPod],
    context: OutcomeContext<'_>,
) -> PodOutcome {
    let restarts = job.failed;
    if job.complete() {
        let container = last_init_container(&job.template);
        return PodOutcome::Succeeded {
            container,
            restarts,
        };
    }
    if let Some(failed) = job.condition("Failed") {
        let reason = failed.reason.clone().unwrap_or_else(|| "Failed".to_owned());
        let genuine_attempts: Vec<&&CachedPod> = attempts
            .iter()
            .filter(|pod| failed_genuinely(pod.status.as_ref()))
            .collect();
        let limit_spent = job.metadata.annotations.as_ref().is_some_and(|a| {
            let keys = group_of_labels(job.metadata.labels.as_ref()).keys();
            a.contains_key(keys.restart_limit_exceeded_annotation)
        });
        if reason == BACKOFF_LIMIT_EXCEEDED && !limit_spent && genuine_attempts.is_empty() {
            return PodOutcome::FailedWithoutCause;
        }
        let last = newest(genuine_attempts.into_iter().copied());
        let from_attempt = last.and_then(|pod| match pod_outcome::outcome(pod, context) {
            PodOutcome::Failed(failure) => Some(failure),
            _ => None,
        });
        let failure = match from_attempt {
            Some(failure) if reason == BACKOFF_LIMIT_EXCEEDED => failure,
            Some(failure) => PodFailure {
                reason,
                message: failed.message.clone(),
                ..failure
            },
            None => PodFailure {
                container: None,
                exit_code: None,
                reason,
                message: failed.message.clone(),
                restarts,
                reboot_requested: None,
            },
        };
        return PodOutcome::Failed(PodFailure {
            restarts,
            ..failure
        });
    }
    if let Some(target) = job.condition(FAILURE_TARGET)
        && failure_target_stale(target.since, context.now)
    {
        return PodOutcome::Failed(stuck_failure(job, target, attempts));
    }
    if job.suspend {
        return PodOutcome::Running;
    }
    let Some(attempt) = newest(
        attempts
            .iter()
            .copied()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none()),
    ) else {
        return PodOutcome::Running;
    };
    match pod_outcome::outcome(attempt, context) {
        PodOutcome::Failed(failure) if failure.reason == REBOOT_NOT_CONFIRMED => {
            PodOutcome::Failed(failure)
        }
        // A package stage's attempts fail as pods (`restartPolicy: Never`); an interrupt's
        // container restarts inside its one pod (`OnFailure`): both count.
        PodOutcome::Failed(failure) => PodOutcome::Retrying(PodFailure {
            restarts: restarts.saturating_add(failure.restarts),
            ..failure
        }),
        PodOutcome::RecreateAfterReboot | PodOutcome::Succeeded { .. } => PodOutcome::Running,
        other => other,
    }
}

/// Whether a Job at `FailureTarget` since `since` has waited more than [`FAILURE_TARGET_GRACE`]
/// for its pods at `now`. A condition without a time is never stale: its age is unknown.
pub fn failure_target_stale(since: Option<Timestamp>, now: Timestamp) -> bool {
    failure_target_remaining(since, now).is_some_and(|remaining| remaining.is_zero())
}

/// How long a Job at `FailureTarget` since `since` still waits at `now` before it is stale
/// (zero once it is); `None` without a time.
pub fn failure_target_remaining(
    since: Option<Timestamp>,
    now: Timestamp,
) -> Option<std::time::Duration> {
    let waited = std::time::Duration::try_from(now.duration_since(since?)).unwrap_or_default();
    Some(if waited > FAILURE_TARGET_GRACE {
        std::time::Duration::ZERO
    } else {
        // A second past the boundary: stale means strictly longer than the grace.
        FAILURE_TARGET_GRACE - waited + std::time::Duration::from_secs(1)
    })
}

/// The failure of a Job stuck at `FailureTarget`: the condition's reason and message, the stuck
/// container of its newest attempt, and as restarts the failed attempts plus that container's
/// own restarts (an interrupt restarts its container inside its pod).
fn stuck_failure(job: &CachedJob, target: &JobCondition, attempts: &[&CachedPod]) -> PodFailure {
    let stuck = newest(attempts.iter().copied()).and_then(stuck_container);
    PodFailure {
        container: stuck.map(|status| status.name.clone()),
        exit_code: None,
        reason: (target.reason.clone()).unwrap_or_else(|| FAILURE_TARGET.to_owned()),
        message: target.message.clone(),
        restarts: (job.failed).saturating_add(stuck.map_or(0, |status| status.restart_count)),
        reboot_requested: None,
    }
}

/// The first init container of `pod` that has not exited 0: the one that hangs, crashed or
/// never started.
pub fn stuck_container(pod: &CachedPod) -> Option<&CachedContainerStatus> {
    let statuses = pod.status.as_ref()?.init_container_statuses.as_deref()?;
    statuses.iter().find(|status| {
        (status.state.as_ref())
            .and_then(|state| state.terminated.as_ref())
            .is_none_or(|terminated| terminated.exit_code != 0)
    })
}

/// Upstream's one predicate of a genuine failure: the pod failed, not by a disruption, and was
/// killed by its deadline, or an init container ended non-zero for a reason other than an
/// unknown status (OOM kills included), or one waits in `CrashLoopBackOff`. A pod its node
/// refused at admission ran no container: not genuine.
pub fn failed_genuinely(status: Option<&CachedPodStatus>) -> bool {
    let Some(status) = status else {
        return false;
    };
    if status.disruption_target {
        return false;
    }
    let statuses = status
        .init_container_statuses
        .as_deref()
        .unwrap_or_default();
    let crash_looping = statuses.iter().any(|container| {
        container
            .state
            .as_ref()
            .and_then(|state| state.waiting.as_ref())
            .is_some_and(|waiting| waiting.reason.as_deref() == Some(CRASH_LOOP_BACK_OFF))
    });
    if crash_looping {
        return true;
    }
    if status.phase.as_deref() != Some("Failed") {
        return false;
    }
    if status.reason.as_deref() == Some(DEADLINE_EXCEEDED) {
        return true;
    }
    statuses
        .iter()
        .filter_map(|container| container.state.as_ref()?.terminated.as_ref())
        .find(|terminated| terminated.exit_code != 0)
        .is_some_and(|terminated| terminated.reason.as_deref() != Some("ContainerStatusUnknown"))
}

/// The attempts kept for `kubectl logs` as failures: failed genuinely, not being deleted.
pub fn genuine_archives<'a, 'p>(
    attempts: &'a [&'p CachedPod],
) -> impl Iterator<Item = &'p CachedPod> + use<'a, 'p> {
    attempts
        .iter()
        .copied()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| failed_genuinely(pod.status.as_ref()))
}

/// The attempts to delete so that only the first and the newest genuine failures stay for
/// `kubectl logs`: the others among the genuine failures, oldest first.
pub fn attempts_to_prune<'p>(attempts: &[&'p CachedPod]) -> Vec<&'p CachedPod> {
    let mut genuine: Vec<&CachedPod> = genuine_archives(attempts).collect();
    genuine.sort_by(|a, b| order_key(a).cmp(&order_key(b)));
    if genuine.len() <= 2 {
        return Vec::new();
    }
    genuine[1..genuine.len() - 1].to_vec()
}

/// Creation time, then name.
fn order_key(pod: &CachedPod) -> (Option<jiff::Timestamp>, Option<&str>) {
    (
        pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
        pod.metadata.name.as_deref(),
    )
}

/// The newest of `pods` by creation time, then name.
pub fn newest<'p>(pods: impl Iterator<Item = &'p CachedPod>) -> Option<&'p CachedPod> {
    pods.max_by(|a, b| order_key(a).cmp(&order_key(b)))
}

/// The last init container of the template (the check, or `interrupt`).
fn last_init_container(template: &CachedPod) -> String {
    template
        .spec
        .as_ref()
        .and_then(|spec| spec.init_containers.as_ref())
        .and_then(|containers| containers.last())
        .map(|container| container.name.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
