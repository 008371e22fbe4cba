//! The stage Jobs' own lifecycle (upstream v0.18-v0.20, §2.3 and §2.5), after every other step
//! has decided what runs:
//! * pause suspends a Skyhook's unfinished Jobs (the Job controller stops the running attempt
//!   without spending a retry); a Skyhook neither paused nor disabled resumes them, unless this
//!   plan deletes them for a stale spec first; disable alone never resumes;
//! * a non-reboot interrupt whose container restarted as often as its Job's `restart-allowance`
//!   has spent it (v0.20): its Job is marked `restart-limit-exceeded` and its `backoffLimit`
//!   dropped to 0, so the Job controller fails it, with a Warning Event on the node and the
//!   Skyhook; a reboot is never counted;
//! * of a Job's genuinely failed attempts only the first and the newest stay, for `kubectl logs`;
//! * a Job stuck at `FailureTarget` gets its `last-logs` annotation ([`crate::last_logs`]), and
//!   the plan looks again when it has waited
//!   [`FAILURE_TARGET_GRACE`](crate::job_outcome::FAILURE_TARGET_GRACE) for its pods: no event
//!   marks that moment on an unreachable node, and its failure is then recorded
//!   ([`crate::job_outcome`]);
//! * a node reset after its reboot (`REAPPLY_ON_REBOOT`) loses every Job of the Skyhook that
//!   reset it, unfinished or kept, as upstream's reboot-reset sweep;
//! * a Job kept after its recorded completion is deleted when its node is gone or when its node
//!   state no longer records its stage as done (the entry is gone, or back at that stage and
//!   not complete), or once the package's uninstall starts (upstream clears the package's
//!   retained Jobs then), so the stage can run again under the same name. Otherwise its TTL
//!   collects it.

use skyhook_api::v1alpha1::{PackageStatus, Stage, State};

use super::context::Context;
use super::event_kinds;
use super::output::EventTarget;
use super::workset::Workset;
use crate::job_outcome::failure_target_remaining;
use crate::pod_outcome::PodOutcome;
use crate::reconcile::snapshot::OwnedPod;

/// Suspends, resumes, prunes and sweeps (see the module documentation).
pub(super) fn job_lifecycle<'s>(context: &Context<'s>, workset: &mut Workset<'s>) {
    let resets = workset.plan.reboot_resets.clone();
    let reset = |skyhook: &str, node: &str| resets.contains(&(skyhook.to_owned(), node.to_owned()));
    for pod in &context.snapshot.pods {
        if pod.job.is_some() && reset(&pod.skyhook, &pod.node) {
            workset.delete_pod(
                &pod.name,
                "its node rebooted and its Skyhook starts over there",
            );
            continue;
        }
        let Some(job) = &pod.job else {
            continue;
        };
        for attempt in &job.prune {
            workset.delete_attempt(attempt, "a failed attempt between the first and the newest");
        }
        if let (Some(allowance), PodOutcome::Retrying(failure)) =
            (job.restart_allowance, &pod.outcome)
            && !job.restart_limit_exceeded
            && !job.finished
            && failure.restarts >= allowance
        {
            restart_limit_exceeded(workset, pod, failure.restarts);
        }
        if job.finished || pod.deleting || workset.plan.delete_jobs.contains_key(&pod.name) {
            continue;
        }
        if let Some(last_logs) = &job.last_logs {
            (workset.plan.last_logs).insert(pod.name.clone(), last_logs.clone());
        }
        if let Some(wait) = failure_target_remaining(job.failure_target_since, context.now)
            && !wait.is_zero()
        {
            workset.requeue(wait);
        }
        let Some(skyhook) = context.skyhook(&pod.skyhook) else {
            continue;
        };
        let paused = skyhook.is_paused();
        if paused && !job.suspended {
            workset.suspend_job(&pod.name, true);
        } else if !paused && !skyhook.is_disabled() && job.suspended {
            workset.suspend_job(&pod.name, false);
        }
    }
    for retained in &context.snapshot.retained_jobs {
        if retained.deleting {
            continue;
        }
        let Some(annotation) = &retained.annotation else {
            continue;
        };
        if reset(&annotation.skyhook, &retained.node) {
            workset.delete_pod(
                &retained.name,
                "its node rebooted and its Skyhook starts over there",
            );
            continue;
        }
        if workset.view_of(&retained.node).is_none() {
            workset.delete_pod(&retained.name, "its node is gone");
            continue;
        }
        if workset.state_malformed(&retained.node, &annotation.skyhook) {
            continue;
        }
        let Some(work) = workset.nodes.get_mut(retained.node.as_str()) else {
            continue;
        };
        let entry = work
            .state(&annotation.skyhook)
            .get_version(&annotation.name, &annotation.version);
        if retained_job_due(entry, annotation.stage) {
            workset.delete_pod(&retained.name, "its stage is due again");
        }
    }
}

/// Spends the restart allowance of the interrupt Job behind `pod` (see the module documentation).
fn restart_limit_exceeded(workset: &mut Workset<'_>, pod: &OwnedPod, restarts: i32) {
    workset
        .plan
        .restart_limits
        .insert(pod.name.clone(), restarts);
    let package = pod
        .annotation
        .as_ref()
        .map(|a| format!("{}:{}", a.name, a.version))
        .unwrap_or_default();
    let message = format!(
        "Interrupt of package [{package}] on node [{}] restarted {restarts} times, its allowance: failing its job",
        pod.node
    );
    for target in [
        EventTarget::Node(pod.node.clone()),
        EventTarget::Skyhook(pod.skyhook.clone()),
    ] {
        workset.emit(target, event_kinds::RESTART_LIMIT_EXCEEDED, message.clone());
    }
}

/// Whether a Job kept after its recorded completion of `stage` must go, given its package's
/// entry in the node state (see the module documentation).
fn retained_job_due(entry: Option<&PackageStatus>, stage: Stage) -> bool {
    let uninstalling = |stage: Stage| matches!(stage, Stage::Uninstall | Stage::UninstallInterrupt);
    entry.is_none_or(|entry| {
        (entry.stage == stage && entry.state != State::Complete)
            || (uninstalling(entry.stage) && !uninstalling(stage))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retained_job_goes_when_its_stage_is_due_again_or_its_package_uninstalls() {
        let entry = |stage: Stage, state: State| PackageStatus {
            name: "driver".into(),
            version: "1.0.0".into(),
            image: "x".into(),
            stage,
            state,
            container_sha: String::new(),
            restarts: 0,
        };
        let cases = [
            (None, Stage::Apply, true),
            (
                Some(entry(Stage::Apply, State::Complete)),
                Stage::Apply,
                false,
            ),
            (
                Some(entry(Stage::Config, State::InProgress)),
                Stage::Apply,
                false,
            ),
            (
                Some(entry(Stage::Config, State::Complete)),
                Stage::Config,
                false,
            ),
            (
                Some(entry(Stage::Config, State::InProgress)),
                Stage::Config,
                true,
            ),
            (
                Some(entry(Stage::Config, State::Erroring)),
                Stage::Config,
                true,
            ),
            (
                Some(entry(Stage::Uninstall, State::InProgress)),
                Stage::Apply,
                true,
            ),
            (
                Some(entry(Stage::Uninstall, State::InProgress)),
                Stage::Uninstall,
                true,
            ),
            (
                Some(entry(Stage::UninstallInterrupt, State::InProgress)),
                Stage::Uninstall,
                false,
            ),
        ];
        for (entry, stage, due) in cases {
            assert_eq!(
                retained_job_due(entry.as_ref(), stage),
                due,
                "{entry:?} {stage:?}"
            );
        }
    }
}
