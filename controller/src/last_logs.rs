//! The `last-logs` snapshot of a stage Job stuck at `FailureTarget` (upstream v0.20, §2.3).
//!
//! Once the Job controller has decided a Job fails, it deletes the attempt still running; the
//! kubelet then drops that attempt's logs with its pod. While no genuinely failed attempt is
//! kept for `kubectl logs`, the controller copies what the stuck init container said onto the
//! Job, annotation `last-logs`, so the Job kept as the stage's failure still names the problem.
//!
//! Contract: [`needed`] is pure and decides which Job needs a snapshot and of what; the apply
//! step reads the logs and writes [`annotation`]'s text. One attempt per Job: the annotation is
//! written whatever the read gives (the logs, or why they could not be read), and a Job that
//! carries it is never read again. Only a refused patch of the annotation makes the next
//! reconcile read again.
//!
//! * A Job that is finished, being deleted, not at `FailureTarget`, or already annotated needs
//!   nothing; nor one with a genuine archive ([`job_outcome::genuine_archives`]).
//! * The stuck container is the first init container of the newest live attempt (phase
//!   `Pending` or `Running`) that has not exited 0 ([`job_outcome::stuck_container`]).
//! * A container that ran (it runs, or it ended) or waits in `CrashLoopBackOff` has logs: they
//!   are tailed ([`LastLogs::Tail`]), the last [`MAX_BYTES`]. A container waiting for another
//!   reason (an image pull, a missing ConfigMap) never started, and logs of an earlier run would
//!   be stale: `<container>: <waitingReason>: <message>` is recorded ([`LastLogs::Record`]).

use crate::cache::CachedPod;
use crate::cache::job::CachedJob;
use crate::job_outcome::{self, FAILURE_TARGET};
use crate::pod_outcome::CRASH_LOOP_BACK_OFF;

/// The most of a log kept in the annotation: annotations share an object's 256 KiB metadata
/// budget.
pub const MAX_BYTES: usize = 16 * 1024;

/// What to write into a Job's `last-logs` annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LastLogs {
    /// Tail the logs of `container` of the attempt `pod`.
    Tail {
        /// The attempt's pod.
        pod: String,
        /// The stuck init container.
        container: String,
        /// What to record instead when the logs cannot be read; `None`: the read error.
        instead: Option<String>,
    },
    /// Record this text: the container never started.
    Record(String),
}

/// What the `last-logs` annotation of `job`, with its attempts' pods (any order), must hold;
/// `None` when it needs none (see the module documentation).
pub fn needed(job: &CachedJob, attempts: &[&CachedPod]) -> Option<LastLogs> {
    if job.last_logs
        || job.finished()
        || job.metadata.deletion_timestamp.is_some()
        || job.condition(FAILURE_TARGET).is_none()
        || job_outcome::genuine_archives(attempts).next().is_some()
    {
        return None;
    }
    let live = attempts.iter().copied().filter(|pod| {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        matches!(phase, Some("Pending" | "Running"))
    });
    let attempt = job_outcome::newest(live)?;
    let stuck = job_outcome::stuck_container(attempt)?;
    let waiting = (stuck.state.as_ref()).and_then(|state| state.waiting.as_ref());
    let waiting_text = waiting.map(|waiting| {
        format!(
            "{}: {}: {}",
            stuck.name,
            waiting.reason.as_deref().unwrap_or_default(),
            waiting.message.as_deref().unwrap_or_default()
        )
    });
    let has_logs = waiting.is_none_or(|waiting| {
        matches!(waiting.reason.as_deref(), None | Some(CRASH_LOOP_BACK_OFF))
    });
    if !has_logs {
        return waiting_text.map(LastLogs::Record);
    }
    Some(LastLogs::Tail {
        pod: attempt.metadata.name.clone().unwrap_or_default(),
        container: stuck.name.clone(),
        instead: waiting_text,
    })
}

/// The annotation's text for `request`, given what reading the logs gave (`read`: the log's
/// bytes, or the error): `<container>:\n<the last MAX_BYTES of the log>`, else the waiting
/// text, else `<container>: logs unavailable: <error>`.
pub fn annotation(request: &LastLogs, read: Result<&[u8], String>) -> String {
    match (request, read) {
        (LastLogs::Record(text), _) => text.clone(),
        (LastLogs::Tail { container, .. }, Ok(log)) => format!("{container}:\n{}", tail(log)),
        (
            LastLogs::Tail {
                instead: Some(text),
                ..
            },
            Err(_),
        ) => text.clone(),
        (LastLogs::Tail { container, .. }, Err(error)) => {
            format!("{container}: logs unavailable: {error}")
        }
    }
}

/// At most the last [`MAX_BYTES`] of `log` as text: a character the cut split, or any byte that
/// is not UTF-8, reads as U+FFFD (and the text is cut again at a character, should the
/// replacements have made it longer).
pub fn tail(log: &[u8]) -> String {
    let start = log.len().saturating_sub(MAX_BYTES);
    let text = String::from_utf8_lossy(log.get(start..).unwrap_or_default()).into_owned();
    let mut cut = text.len().saturating_sub(MAX_BYTES);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.get(cut..).map(str::to_owned).unwrap_or_default()
}

#[cfg(test)]
mod tests;
