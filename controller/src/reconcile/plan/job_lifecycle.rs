//! The stage Jobs' own lifecycle (upstream v0.18-v0.20, §2.3 and §2.5), after every other step
//! has decided what runs:
//! * pause suspends a Skyhook's unfinished Jobs (the Job controller stops the running attempt
//!   without spending a retry); a Skyhook neither paused nor disabled resumes them, unless this
//!   plan deletes them for a stale spec first; disable alone never resumes;
//! * of a Job's genuinely failed attempts only the first and the newest stay, for `kubectl logs`;
//! * a Job kept after its recorded completion is deleted when its node is gone or when its node
//!   state no longer records its stage as done (the entry is gone, or back at that stage and
//!   not complete), so the stage can run again under the same name. Otherwise its TTL collects it.

use skyhook_api::v1alpha1::State;

use super::context::Context;
use super::workset::Workset;

/// Suspends, resumes, prunes and sweeps (see the module documentation).
pub(super) fn job_lifecycle<'s>(context: &Context<'s>, workset: &mut Workset<'s>) {
    for pod in &context.snapshot.pods {
        let Some(job) = &pod.job else {
            continue;
        };
        for attempt in &job.prune {
            workset.delete_attempt(attempt, "a failed attempt between the first and the newest");
        }
        if job.finished || pod.deleting || workset.plan.delete_jobs.contains_key(&pod.name) {
            continue;
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
        let due_again = entry.is_none_or(|entry| {
            entry.stage == annotation.stage && entry.state != State::Complete
        });
        if due_again {
            workset.delete_pod(&retained.name, "its stage is due again");
        }
    }
}
