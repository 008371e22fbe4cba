//! When a rollout should end, from the pace its nodes completed at so far.
//!
//! Contract: [`estimate_end`] is pure. The pace is the rollout's own: nodes completed since the
//! rollout started (the Skyhook's `Ready` condition turned False) over the time from that start
//! to the last completion, which spans whole batches, their drains and interrupts. A node's
//! completion time is the latest transition time of its node-state entries (the node's
//! `stageTimes_<skyhook>` annotation, see `skyhook_api::transition`). The estimate
//! is the last completion plus the remaining nodes at that pace. It is `unknown`, with why,
//! when the rollout is halted, when no node completed since the start, when completed nodes
//! carry no transition times (written by upstream or an older controller), or when the
//! rollout is behind its own pace (the estimate would lie in the past).

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use skyhook_api::node_state::NodeState;
use skyhook_api::transition::{TransitionTimes, recorded_times};
use skyhook_api::v1alpha1::Skyhook;

use crate::cluster::{self, name_of};
use crate::rollout::Rollout;

/// What the estimate is computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutTimes {
    /// When the rollout started: the last transition of the `Ready` condition to False.
    pub started: Option<Timestamp>,
    /// When each complete node completed, `None` for one without transition times.
    pub completed: Vec<Option<Timestamp>>,
    /// Selected nodes not complete.
    pub remaining: usize,
    /// Why no node progresses (paused, disabled, stopped after failed batches), if so.
    pub halted: Option<String>,
}

/// The estimated end of a rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Estimate {
    /// Every selected node is complete.
    Done,
    /// Expected at `end`, from `completed` nodes completed within `observed`.
    At {
        /// The estimated end.
        end: Timestamp,
        /// Nodes the pace is measured on.
        completed: usize,
        /// From the rollout's start to its last completion.
        observed: SignedDuration,
    },
    /// Not enough data, and why.
    Unknown(String),
}

/// The estimated end of a rollout at `now`.
pub fn estimate_end(times: &RolloutTimes, now: Timestamp) -> Estimate {
    if times.remaining == 0 {
        return Estimate::Done;
    }
    if let Some(why) = &times.halted {
        return Estimate::Unknown(why.clone());
    }
    let Some(started) = times.started else {
        return Estimate::Unknown("the rollout's start is not recorded".into());
    };
    let since_start: Vec<Timestamp> = times
        .completed
        .iter()
        .flatten()
        .copied()
        .filter(|at| *at >= started)
        .collect();
    let Some(last) = since_start.iter().max().copied() else {
        let why = if times.completed.iter().any(Option::is_none) {
            "complete nodes carry no transition times yet"
        } else {
            "no node has completed since the rollout started"
        };
        return Estimate::Unknown(why.into());
    };
    let observed = last.duration_since(started);
    let per_node = observed.as_secs_f64() / since_start.len() as f64;
    let ahead = SignedDuration::try_from_secs_f64(per_node * times.remaining as f64).ok();
    let Some(end) = ahead.and_then(|ahead| last.checked_add(ahead).ok()) else {
        return Estimate::Unknown("the observed pace is out of range".into());
    };
    if end < now {
        return Estimate::Unknown(format!(
            "behind the observed pace: no node completed since {last}"
        ));
    }
    Estimate::At {
        end,
        completed: since_start.len(),
        observed,
    }
}

/// The estimated end of `rollout` at `now`.
pub fn rollout_estimate(rollout: &Rollout<'_>, now: Timestamp) -> Estimate {
    estimate_end(&rollout_times(rollout), now)
}

/// What [`estimate_end`] needs from a rollout.
pub fn rollout_times(rollout: &Rollout<'_>) -> RolloutTimes {
    let skyhook = rollout.skyhook;
    let keys = rollout.group.keys();
    let halted_by = |key: &str| {
        (skyhook.metadata.annotations.as_ref())
            .and_then(|a| a.get(key))
            .is_some_and(|v| v == "true")
    };
    let halted = if halted_by(keys.disable_annotation) {
        Some(format!("the {} is disabled", keys.kind))
    } else if halted_by(keys.pause_annotation) {
        Some(format!("the {} is paused", keys.kind))
    } else {
        (rollout.compartments.iter())
            .find(|c| c.batch_state.should_stop)
            .map(|c| format!("compartment {} stopped after failed batches", c.spec.name))
    };
    let complete = || rollout.nodes.iter().filter(|n| n.complete);
    RolloutTimes {
        started: rollout_started(skyhook),
        completed: complete()
            .map(|n| {
                let times = recorded_times(
                    cluster::annotations(n.node),
                    keys,
                    name_of(&skyhook.metadata),
                );
                completed_at(&n.state, &times)
            })
            .collect(),
        remaining: rollout.nodes.iter().filter(|n| !n.complete).count(),
        halted,
    }
}

/// The estimate as the `estimatedEnd` and `estimateBasis` fields of `status`.
pub fn describe(estimate: &Estimate, now: Timestamp) -> (String, String) {
    match estimate {
        Estimate::Done => ("done".into(), "every selected node is complete".into()),
        Estimate::At {
            end,
            completed,
            observed,
        } => (
            end.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            format!(
                "in {}, at the pace of {completed} node(s) completed in {} since the rollout started",
                short_duration(now.duration_until(*end)),
                short_duration(*observed)
            ),
        ),
        Estimate::Unknown(why) => ("unknown".into(), why.clone()),
    }
}

/// `1h20m`, `12m`, `45s`: minutes are enough for a rollout.
fn short_duration(duration: SignedDuration) -> String {
    let seconds = duration.as_secs().max(0);
    let (hours, minutes) = (seconds / 3600, seconds % 3600 / 60);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, _) => format!("{minutes}m"),
        _ => format!("{hours}h{minutes}m"),
    }
}

/// When a complete node completed: the latest transition time of its entries, `None` when an
/// entry has none recorded in `times`.
pub fn completed_at(state: &NodeState, times: &TransitionTimes) -> Option<Timestamp> {
    state
        .iter()
        .map(|(_, entry)| times.of(entry))
        .try_fold(None, |latest: Option<Timestamp>, at| {
            at.map(|at| Some(latest.map_or(at, |latest| latest.max(at))))
        })
        .flatten()
}

/// When the rollout of `skyhook` started: the last transition of its `Ready` condition, when
/// that condition is False.
pub fn rollout_started(skyhook: &Skyhook) -> Option<Timestamp> {
    let status = skyhook.status.as_ref()?;
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "False")
        .map(|c| c.last_transition_time.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minute: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + minute * 60).unwrap()
    }

    fn times(
        started: Option<i64>,
        completed: &[Option<i64>],
        remaining: usize,
        halted: Option<&str>,
    ) -> RolloutTimes {
        RolloutTimes {
            started: started.map(at),
            completed: completed.iter().map(|m| m.map(at)).collect(),
            remaining,
            halted: halted.map(str::to_owned),
        }
    }

    fn unknown(why: &str) -> Estimate {
        Estimate::Unknown(why.into())
    }

    #[test]
    fn estimates_from_the_pace_since_the_start() {
        let cases = [
            // Everything complete.
            (times(Some(0), &[Some(5)], 0, None), 100, Estimate::Done),
            (
                times(Some(0), &[], 3, Some("the Skyhook is paused")),
                1,
                unknown("the Skyhook is paused"),
            ),
            (
                times(None, &[Some(5)], 3, None),
                6,
                unknown("the rollout's start is not recorded"),
            ),
            (
                times(Some(0), &[], 3, None),
                6,
                unknown("no node has completed since the rollout started"),
            ),
            // Completed before this rollout started: not its pace.
            (
                times(Some(10), &[Some(5)], 3, None),
                12,
                unknown("no node has completed since the rollout started"),
            ),
            (
                times(Some(0), &[None], 3, None),
                6,
                unknown("complete nodes carry no transition times yet"),
            ),
            // Two nodes in 10 minutes, four left: 20 more minutes after the last.
            (
                times(Some(0), &[Some(4), Some(10), None], 4, None),
                12,
                Estimate::At {
                    end: at(30),
                    completed: 2,
                    observed: SignedDuration::from_mins(10),
                },
            ),
            // A batch of three completing together.
            (
                times(Some(0), &[Some(6), Some(6), Some(6)], 3, None),
                7,
                Estimate::At {
                    end: at(12),
                    completed: 3,
                    observed: SignedDuration::from_mins(6),
                },
            ),
            // Past the estimate with nodes left: the pace no longer holds.
            (
                times(Some(0), &[Some(6)], 1, None),
                13,
                unknown(&format!(
                    "behind the observed pace: no node completed since {}",
                    at(6)
                )),
            ),
        ];
        for (index, (times, now, expected)) in cases.into_iter().enumerate() {
            assert_eq!(estimate_end(&times, at(now)), expected, "case {index}");
        }
    }

    #[test]
    fn a_node_completes_at_its_latest_transition() {
        use skyhook_api::transition::stamp_transitions;
        use skyhook_api::v1alpha1::{PackageStatus, Stage, State};
        let entry = |name: &str| PackageStatus {
            name: name.into(),
            version: "1.0.0".into(),
            image: "ghcr.io/nvidia/skyhook/tuning".into(),
            container_sha: String::new(),
            stage: Stage::Config,
            state: State::Complete,
            restarts: 0,
        };
        let state = |entries: Vec<PackageStatus>| entries.into_iter().collect::<NodeState>();
        // a completed at minute 3, b at minute 7, as the controller stamps them.
        let a = state(vec![entry("a")]);
        let (at_3, _) =
            stamp_transitions(&NodeState::new(), &TransitionTimes::default(), &a, at(3));
        let both = state(vec![entry("a"), entry("b")]);
        let (at_7, _) = stamp_transitions(&a, &at_3, &both, at(7));
        assert_eq!(completed_at(&both, &at_7), Some(at(7)));
        // b has no time recorded (written by upstream).
        assert_eq!(completed_at(&both, &at_3), None);
        assert_eq!(completed_at(&state(Vec::new()), &at_7), None);
    }
}
