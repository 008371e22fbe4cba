//! Transition times of node-state entries, and the stage attempts they reveal as finished.
//!
//! Contract: [`stamp_transitions`] is the one rule that sets `lastTransitionTime`. It compares
//! a node state as this reconcile leaves it with the same node state as last written: an entry
//! whose stage or state differ gets `now`; any other keeps the time it had (so code building a
//! fresh entry with the same stage and state loses nothing). An entry with no time (upstream's,
//! or written before the field existed) keeps none until it next changes, so unchanged nodes
//! are not rewritten.
//!
//! A stage attempt finished when an entry that was neither complete nor skipped either became
//! complete in the same stage, or moved on to the stage that follows it (a pod result and the
//! next launch can land in one reconcile, so the `complete` in between is never written). Its
//! duration is the time since the entry's previous transition: the last attempt of the stage,
//! not the retries before it. Entries without a previous time give no duration.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::node_state::NodeState;
use crate::stage::stage_after;
use crate::v1alpha1::{PackageStatus, Stage, State};

/// A stage attempt that finished on a node.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedStage {
    /// The package.
    pub package: String,
    /// The stage that finished.
    pub stage: Stage,
    /// Seconds since the entry's previous transition (never negative).
    pub seconds: f64,
}

/// Stamps the entries of `current` that changed since `written` with `now` (whole seconds, as
/// the annotation stores them) and returns the stage attempts they finished.
pub fn stamp_transitions(
    written: &NodeState,
    current: &mut NodeState,
    now: Timestamp,
) -> Vec<FinishedStage> {
    let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
    current
        .entries_mut()
        .filter_map(|entry| stamp(written.get(&entry.key()), entry, now))
        .collect()
}

/// [`stamp_transitions`] for one entry.
fn stamp(
    previous: Option<&PackageStatus>,
    entry: &mut PackageStatus,
    now: Timestamp,
) -> Option<FinishedStage> {
    let unchanged = previous.is_some_and(|p| p.stage == entry.stage && p.state == entry.state);
    if unchanged {
        entry.last_transition_time = previous.and_then(|p| p.last_transition_time.clone());
        return None;
    }
    entry.last_transition_time = Some(Time(now));
    let previous = previous?;
    if !finishes(previous, entry) {
        return None;
    }
    let since = previous.last_transition_time.as_ref()?.0;
    let seconds = now.duration_since(since).as_secs_f64().max(0.0);
    Some(FinishedStage {
        package: entry.name.clone(),
        stage: previous.stage,
        seconds,
    })
}

/// Whether going from `previous` to `next` ends an attempt of `previous.stage`.
fn finishes(previous: &PackageStatus, next: &PackageStatus) -> bool {
    let running = !matches!(previous.state, State::Complete | State::Skipped);
    let completed_here = next.stage == previous.stage && next.state == State::Complete;
    // The chain with an interrupt is the only one that moves forward at every step; without
    // one, `interrupt` and `post-interrupt` go back to `config`, which a config change does too.
    let moved_on = stage_after(previous.stage, true) == Some(next.stage);
    running && (completed_here || moved_on)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Stage::*;
    use State::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    fn entry(stage: Stage, state: State, time: Option<i64>) -> PackageStatus {
        PackageStatus {
            name: "tuning".into(),
            version: "1.0.0".into(),
            image: "ghcr.io/nvidia/skyhook/tuning".into(),
            container_sha: String::new(),
            stage,
            state,
            restarts: 0,
            last_transition_time: time.map(|s| Time(at(s))),
        }
    }

    /// (previous as written, entry as left, expected time, expected finished stage, seconds)
    type Case = (
        Option<PackageStatus>,
        PackageStatus,
        Option<i64>,
        Option<(Stage, f64)>,
    );

    #[test]
    fn stamps_changes_and_reports_finished_attempts() {
        let now = 100;
        let cases: &[Case] = &[
            // A new entry: stamped, nothing finished (no start known).
            (None, entry(Apply, InProgress, None), Some(now), None),
            // Unchanged: keeps its time, even when the caller built it afresh.
            (
                Some(entry(Apply, InProgress, Some(10))),
                entry(Apply, InProgress, None),
                Some(10),
                None,
            ),
            // Unchanged upstream entry without a time: stays without one (no rewrite).
            (
                Some(entry(Config, Complete, None)),
                entry(Config, Complete, None),
                None,
                None,
            ),
            // Completed in the same stage: the attempt took now - previous time.
            (
                Some(entry(Apply, InProgress, Some(40))),
                entry(Apply, Complete, None),
                Some(now),
                Some((Apply, 60.0)),
            ),
            // Completed and the next stage launched in one reconcile.
            (
                Some(entry(Apply, InProgress, Some(70))),
                entry(Config, InProgress, None),
                Some(now),
                Some((Apply, 30.0)),
            ),
            (
                Some(entry(Config, InProgress, Some(0))),
                entry(Interrupt, InProgress, None),
                Some(now),
                Some((Config, 100.0)),
            ),
            // A retry that succeeded: the last attempt, from when it went erroring.
            (
                Some(entry(Config, Erroring, Some(90))),
                entry(Config, Complete, None),
                Some(now),
                Some((Config, 10.0)),
            ),
            // Failing is not finishing.
            (
                Some(entry(Apply, InProgress, Some(40))),
                entry(Apply, Erroring, None),
                Some(now),
                None,
            ),
            // Starting the next stage after a complete one finishes nothing more.
            (
                Some(entry(Apply, Complete, Some(40))),
                entry(Config, InProgress, None),
                Some(now),
                None,
            ),
            // Sent back to an earlier stage (a config change): not a finish.
            (
                Some(entry(Interrupt, InProgress, Some(40))),
                entry(Config, InProgress, None),
                Some(now),
                None,
            ),
            (
                Some(entry(PostInterrupt, InProgress, Some(40))),
                entry(Apply, InProgress, None),
                Some(now),
                None,
            ),
            // A previous entry without a time (upstream's): stamped, no duration.
            (
                Some(entry(Apply, InProgress, None)),
                entry(Apply, Complete, None),
                Some(now),
                None,
            ),
            // A clock behind the previous writer's: never a negative duration.
            (
                Some(entry(Apply, InProgress, Some(130))),
                entry(Apply, Complete, None),
                Some(now),
                Some((Apply, 0.0)),
            ),
        ];
        for (index, (previous, next, time, finished)) in cases.iter().enumerate() {
            let mut stamped = next.clone();
            let got = stamp(previous.as_ref(), &mut stamped, at(now));
            assert_eq!(
                stamped.last_transition_time,
                time.map(|s| Time(at(s))),
                "case {index}: time"
            );
            let got = got.map(|f| (f.stage, f.seconds));
            assert_eq!(got, *finished, "case {index}: finished");
        }
    }

    #[test]
    fn stamps_whole_nodes_in_whole_seconds() {
        let written: NodeState = [entry(Apply, InProgress, Some(5))].into_iter().collect();
        let mut current: NodeState = [
            entry(Apply, Complete, None),
            PackageStatus {
                name: "other".into(),
                ..entry(Apply, InProgress, None)
            },
        ]
        .into_iter()
        .collect();
        let now = at(20)
            .checked_add(k8s_openapi::jiff::SignedDuration::from_millis(700))
            .unwrap();
        let finished = stamp_transitions(&written, &mut current, now);
        assert_eq!(
            finished,
            vec![FinishedStage {
                package: "tuning".into(),
                stage: Apply,
                seconds: 15.0,
            }]
        );
        for (_, entry) in &current {
            assert_eq!(entry.last_transition_time, Some(Time(at(20))));
        }
    }
}
