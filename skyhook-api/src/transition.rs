//! When each node-state entry entered its stage and state, and the stage attempts that reveals
//! as finished.
//!
//! The times live beside the node state, in the node annotation
//! `skyhook.nvidia.com/stageTimes_<skyhook>` ([`crate::keys::Keys::stage_times_annotation`]): the
//! node-state annotation stays exactly upstream's JSON (tools and upstream's checks compare it as
//! a string). Each time is recorded with the stage and state it belongs to, so a time is used
//! only while its entry is still in that stage and state: a node state edited by someone else
//! (upstream's operator, a hand edit, a CLI reset) never lends an entry a stale time.
//!
//! Contract: [`stamp_transitions`] is the one rule that sets the times. It compares a node state
//! as this reconcile leaves it with the same node state as last written: an entry whose stage or
//! state differ gets `now`; any other keeps the time recorded for it (so code building a fresh
//! entry with the same stage and state loses nothing). An entry with no time (upstream's, or one
//! whose time no longer matches it) keeps none until it next changes, so unchanged nodes are not
//! rewritten.
//!
//! A stage attempt finished when an entry that was neither complete nor skipped either became
//! complete in the same stage, or moved on to the stage that follows it (a pod result and the
//! next launch can land in one reconcile, so the `complete` in between is never written). Its
//! duration is the time since the entry's previous transition: the last attempt of the stage,
//! not the retries before it. Entries without a previous time give no duration.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::keys::Keys;
use crate::node_state::{NodeState, PackageKey, go_json};
use crate::stage::stage_after;
use crate::string_map::StringMap;
use crate::v1alpha1::{PackageStatus, Stage, State};

/// When an entry entered a stage and state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Since {
    /// The stage the entry entered.
    pub stage: Stage,
    /// The state it entered.
    pub state: State,
    /// When (RFC 3339, whole seconds).
    pub since: Time,
}

/// The value of the node annotation `stageTimes_<skyhook>`: per node-state key, when the entry
/// entered its stage and state. Keys sorted, as the node state's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TransitionTimes {
    entries: BTreeMap<PackageKey, Since>,
}

/// The field our releases before the times moved to their own annotation added to each
/// node-state entry.
const LEGACY_FIELD: &str = "lastTransitionTime";

impl TransitionTimes {
    /// Reads an annotation value.
    pub fn parse(annotation: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(annotation)
    }

    /// The annotation value: compact JSON, keys sorted.
    pub fn to_annotation(&self) -> String {
        go_json(self)
    }

    /// Whether no entry has a time.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// When `entry` entered its stage and state; `None` when that is not recorded (or what is
    /// recorded belongs to another stage or state).
    pub fn of(&self, entry: &PackageStatus) -> Option<Timestamp> {
        self.entries
            .get(&entry.key())
            .filter(|since| since.stage == entry.stage && since.state == entry.state)
            .map(|since| since.since.0)
    }

    /// The latest transition recorded.
    pub fn latest(&self) -> Option<Timestamp> {
        self.entries.values().map(|since| since.since.0).max()
    }

    /// The times our earlier releases wrote into the node-state entries themselves
    /// (`lastTransitionTime`), so that an upgrade keeps the timing of the stages in flight;
    /// `None` when `node_state` carries none (upstream's, or already migrated).
    pub fn from_legacy_node_state(node_state: &str) -> Option<Self> {
        if !carries_legacy_times(node_state) {
            return None;
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Legacy {
            stage: Stage,
            state: State,
            last_transition_time: Option<Time>,
        }
        let legacy: BTreeMap<PackageKey, Legacy> = serde_json::from_str(node_state).ok()?;
        let entries: BTreeMap<PackageKey, Since> = legacy
            .into_iter()
            .filter_map(|(key, entry)| {
                let since = entry.last_transition_time?;
                let (stage, state) = (entry.stage, entry.state);
                Some((
                    key,
                    Since {
                        stage,
                        state,
                        since,
                    },
                ))
            })
            .collect();
        (!entries.is_empty()).then_some(TransitionTimes { entries })
    }
}

/// The times recorded on a node, whose annotations are `annotations`, for the node state of
/// workload `skyhook` of the group whose keys are `keys`: its `stageTimes_<skyhook>` annotation,
/// else (a node our earlier releases wrote) the times inside its node state; empty when neither
/// says anything readable.
pub fn recorded_times(annotations: &dyn StringMap, keys: &Keys, skyhook: &str) -> TransitionTimes {
    let written = annotations
        .value(&keys.stage_times_annotation(skyhook))
        .and_then(|text| TransitionTimes::parse(text).ok());
    written
        .or_else(|| {
            let node_state = annotations.value(&keys.node_state_annotation(skyhook))?;
            TransitionTimes::from_legacy_node_state(node_state)
        })
        .unwrap_or_default()
}

/// Whether a node-state annotation value may carry the times our earlier releases wrote into
/// its entries, which upstream's form has not: such a value is written again in upstream's form.
/// A cheap test, true for every such value (and for the rare value whose text merely mentions
/// the field, which rewriting leaves as it is).
pub fn carries_legacy_times(node_state: &str) -> bool {
    node_state.contains(LEGACY_FIELD)
}

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

/// The times of `current` against the node state as last `written` with its `times`: entries
/// that changed get `now` (whole seconds, as the annotation stores them); the stage attempts
/// they finished.
pub fn stamp_transitions(
    written: &NodeState,
    times: &TransitionTimes,
    current: &NodeState,
    now: Timestamp,
) -> (TransitionTimes, Vec<FinishedStage>) {
    let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
    let mut stamped = TransitionTimes::default();
    let mut finished = Vec::new();
    for (key, entry) in current {
        let previous = written.get(key);
        let (since, done) = stamp(previous, times, entry, now);
        if let Some(since) = since {
            let (stage, state, since) = (entry.stage, entry.state, Time(since));
            stamped.entries.insert(
                key.clone(),
                Since {
                    stage,
                    state,
                    since,
                },
            );
        }
        finished.extend(done);
    }
    (stamped, finished)
}

/// [`stamp_transitions`] for one entry: its time, and the attempt it finished.
fn stamp(
    previous: Option<&PackageStatus>,
    times: &TransitionTimes,
    entry: &PackageStatus,
    now: Timestamp,
) -> (Option<Timestamp>, Option<FinishedStage>) {
    let Some(previous) = previous else {
        return (Some(now), None);
    };
    if previous.stage == entry.stage && previous.state == entry.state {
        return (times.of(previous), None);
    }
    let finished = finishes(previous, entry)
        .then(|| times.of(previous))
        .flatten()
        .map(|since| FinishedStage {
            package: entry.name.clone(),
            stage: previous.stage,
            seconds: now.duration_since(since).as_secs_f64().max(0.0),
        });
    (Some(now), finished)
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
    use crate::keys;
    use Stage::*;
    use State::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    fn entry(stage: Stage, state: State) -> PackageStatus {
        PackageStatus {
            name: "tuning".into(),
            version: "1.0.0".into(),
            image: "ghcr.io/nvidia/skyhook/tuning".into(),
            container_sha: String::new(),
            stage,
            state,
            restarts: 0,
        }
    }

    fn times_of(entries: &[(&PackageStatus, Stage, State, i64)]) -> TransitionTimes {
        TransitionTimes {
            entries: entries
                .iter()
                .map(|(e, stage, state, second)| {
                    let since = Time(at(*second));
                    let (stage, state) = (*stage, *state);
                    (
                        e.key(),
                        Since {
                            stage,
                            state,
                            since,
                        },
                    )
                })
                .collect(),
        }
    }

    /// (previous as written, its recorded time, entry as left, expected time, finished stage
    /// and seconds)
    type Case = (
        Option<PackageStatus>,
        Option<i64>,
        PackageStatus,
        Option<i64>,
        Option<(Stage, f64)>,
    );

    #[test]
    fn stamps_changes_and_reports_finished_attempts() {
        let now = 100;
        let cases: &[Case] = &[
            // A new entry: stamped, nothing finished (no start known).
            (None, None, entry(Apply, InProgress), Some(now), None),
            // Unchanged: keeps its time.
            (
                Some(entry(Apply, InProgress)),
                Some(10),
                entry(Apply, InProgress),
                Some(10),
                None,
            ),
            // Unchanged upstream entry without a time: stays without one (no rewrite).
            (
                Some(entry(Config, Complete)),
                None,
                entry(Config, Complete),
                None,
                None,
            ),
            // Completed in the same stage: the attempt took now - previous time.
            (
                Some(entry(Apply, InProgress)),
                Some(40),
                entry(Apply, Complete),
                Some(now),
                Some((Apply, 60.0)),
            ),
            // Completed and the next stage launched in one reconcile.
            (
                Some(entry(Apply, InProgress)),
                Some(70),
                entry(Config, InProgress),
                Some(now),
                Some((Apply, 30.0)),
            ),
            (
                Some(entry(Config, InProgress)),
                Some(0),
                entry(Interrupt, InProgress),
                Some(now),
                Some((Config, 100.0)),
            ),
            // A retry that succeeded: the last attempt, from when it went erroring.
            (
                Some(entry(Config, Erroring)),
                Some(90),
                entry(Config, Complete),
                Some(now),
                Some((Config, 10.0)),
            ),
            // Failing is not finishing.
            (
                Some(entry(Apply, InProgress)),
                Some(40),
                entry(Apply, Erroring),
                Some(now),
                None,
            ),
            // Starting the next stage after a complete one finishes nothing more.
            (
                Some(entry(Apply, Complete)),
                Some(40),
                entry(Config, InProgress),
                Some(now),
                None,
            ),
            // Sent back to an earlier stage (a config change): not a finish.
            (
                Some(entry(Interrupt, InProgress)),
                Some(40),
                entry(Config, InProgress),
                Some(now),
                None,
            ),
            (
                Some(entry(PostInterrupt, InProgress)),
                Some(40),
                entry(Apply, InProgress),
                Some(now),
                None,
            ),
            // A previous entry without a time (upstream's): stamped, no duration.
            (
                Some(entry(Apply, InProgress)),
                None,
                entry(Apply, Complete),
                Some(now),
                None,
            ),
            // A clock behind the previous writer's: never a negative duration.
            (
                Some(entry(Apply, InProgress)),
                Some(130),
                entry(Apply, Complete),
                Some(now),
                Some((Apply, 0.0)),
            ),
        ];
        for (index, (previous, recorded, next, time, finished)) in cases.iter().enumerate() {
            let times = match (previous, recorded) {
                (Some(p), Some(second)) => times_of(&[(p, p.stage, p.state, *second)]),
                _ => TransitionTimes::default(),
            };
            let (got_time, got) = stamp(previous.as_ref(), &times, next, at(now));
            assert_eq!(got_time, time.map(at), "case {index}: time");
            let got = got.map(|f| (f.stage, f.seconds));
            assert_eq!(got, *finished, "case {index}: finished");
        }
    }

    #[test]
    fn a_time_recorded_for_another_stage_or_state_is_not_used() {
        // Someone else (upstream's operator, a hand edit) moved the entry on without the time.
        let written: NodeState = [entry(Config, InProgress)].into_iter().collect();
        let stale = times_of(&[(&entry(Apply, InProgress), Apply, InProgress, 5)]);
        let (stamped, finished) = stamp_transitions(&written, &stale, &written, at(20));
        assert!(stamped.is_empty(), "{stamped:?}");
        assert!(finished.is_empty());
        let done: NodeState = [entry(Config, Complete)].into_iter().collect();
        let (_, finished) = stamp_transitions(&written, &stale, &done, at(20));
        assert!(finished.is_empty(), "no duration from a stale start");
    }

    #[test]
    fn stamps_whole_nodes_in_whole_seconds() {
        let started = entry(Apply, InProgress);
        let written: NodeState = [started.clone()].into_iter().collect();
        let times = times_of(&[(&started, Apply, InProgress, 5)]);
        let other = PackageStatus {
            name: "other".into(),
            ..entry(Apply, InProgress)
        };
        let current: NodeState = [entry(Apply, Complete), other.clone()]
            .into_iter()
            .collect();
        let now = at(20)
            .checked_add(k8s_openapi::jiff::SignedDuration::from_millis(700))
            .unwrap();
        let (stamped, finished) = stamp_transitions(&written, &times, &current, now);
        assert_eq!(
            finished,
            vec![FinishedStage {
                package: "tuning".into(),
                stage: Apply,
                seconds: 15.0,
            }]
        );
        assert_eq!(stamped.of(&entry(Apply, Complete)), Some(at(20)));
        assert_eq!(stamped.of(&other), Some(at(20)));
        assert_eq!(stamped.latest(), Some(at(20)));
    }

    #[test]
    fn the_annotation_is_compact_sorted_json() {
        let other = PackageStatus {
            name: "a-other".into(),
            ..entry(Config, Complete)
        };
        let times = times_of(&[
            (&entry(Apply, InProgress), Apply, InProgress, 0),
            (&other, Config, Complete, 60),
        ]);
        let text = times.to_annotation();
        assert_eq!(
            text,
            r#"{"a-other|1.0.0":{"stage":"config","state":"complete","since":"2027-01-15T08:01:00Z"},"tuning|1.0.0":{"stage":"apply","state":"in_progress","since":"2027-01-15T08:00:00Z"}}"#
        );
        assert_eq!(TransitionTimes::parse(&text).unwrap(), times);
    }

    #[test]
    fn a_nodes_times_come_from_its_annotation_else_from_its_legacy_node_state() {
        let legacy = r#"{"tuning|1.0.0":{"name":"tuning","version":"1.0.0","image":"i","stage":"config","state":"in_progress","lastTransitionTime":"2027-01-15T08:00:00Z"}}"#;
        let mut annotations = BTreeMap::from([(
            keys::SKYHOOK.node_state_annotation("demo"),
            legacy.to_owned(),
        )]);
        let config = entry(Config, InProgress);
        assert_eq!(
            recorded_times(&annotations, &keys::SKYHOOK, "demo").of(&config),
            Some(at(0))
        );
        assert!(recorded_times(&annotations, &keys::SKYHOOK, "other").is_empty());
        let written = times_of(&[(&config, Config, InProgress, 60)]);
        annotations.insert(
            keys::SKYHOOK.stage_times_annotation("demo"),
            written.to_annotation(),
        );
        assert_eq!(
            recorded_times(&annotations, &keys::SKYHOOK, "demo"),
            written
        );
    }

    #[test]
    fn times_our_earlier_releases_wrote_into_the_node_state_are_taken_over() {
        let upstream = r#"{"tuning|1.0.0":{"name":"tuning","version":"1.0.0","image":"i","stage":"apply","state":"complete"}}"#;
        assert_eq!(TransitionTimes::from_legacy_node_state(upstream), None);
        let ours = r#"{"a|1":{"name":"a","version":"1","image":"i","stage":"apply","state":"complete"},"tuning|1.0.0":{"name":"tuning","version":"1.0.0","image":"i","stage":"config","state":"in_progress","restarts":2,"lastTransitionTime":"2027-01-15T08:00:00Z"}}"#;
        let times = TransitionTimes::from_legacy_node_state(ours).unwrap();
        assert_eq!(times.of(&entry(Config, InProgress)), Some(at(0)));
        assert_eq!(times.of(&entry(Apply, InProgress)), None);
        assert_eq!(times.latest(), Some(at(0)));
    }
}
