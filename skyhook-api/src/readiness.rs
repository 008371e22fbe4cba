//! Readiness gates (`spec.readinessGates`): after a node's interrupt, the node counts as
//! complete only once each named node condition is `True` and last transitioned after the
//! interrupt began, so a node whose GPU failed its post-reboot validation is not handed back to
//! the scheduler.
//!
//! What the gate needs to remember lives in the node annotation
//! `<group>/readyGate_<skyhook>` ([`crate::keys::Keys::ready_gate_annotation`]), a
//! [`GateRecord`]: when the interrupt began (a condition that turned `True` before it says
//! nothing about the node after it), when the node's packages finished and the wait began (each
//! gate's timeout counts from there), and whether the timeout was already reported. It is
//! written when a package of the Skyhook enters an interrupting stage on the node, and removed
//! when the node completes: a node completed without an interrupt is not gated.
//!
//! Contract: [`judge`] is a pure function of the gates, the record, the node's conditions and
//! the time. A gate is met by a `True` condition whose `lastTransitionTime` is at or after the
//! interrupt; a gate not met by its deadline makes the verdict [`Verdict::TimedOut`] (the
//! node is `erroring` and stays cordoned), and a condition that turns `True` later still lets
//! the node complete.

use std::fmt::Write as _;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use crate::duration;
use crate::node_state::go_json;
use crate::v1alpha1::ReadinessGate;

/// A gate's timeout when `timeout` is left out.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);

/// The node conditions no readiness gate may name: the kubelet's own, which say nothing about
/// an interrupt's outcome (`Ready` is already required by the health gate and the drain).
pub const KUBELET_CONDITIONS: [&str; 5] = [
    "Ready",
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
];

/// The gate's timeout: `timeout`, else [`DEFAULT_TIMEOUT`]; one that does not parse (the
/// webhook refuses it) falls back too.
pub fn gate_timeout(gate: &ReadinessGate) -> Duration {
    gate.timeout
        .as_deref()
        .and_then(|text| duration::parse(text).ok())
        .unwrap_or(DEFAULT_TIMEOUT)
}

/// The value of the node annotation `readyGate_<skyhook>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateRecord {
    /// When a package of the Skyhook entered an interrupting stage on the node.
    pub interrupted_at: Time,
    /// When the node's packages had all finished and the gates began to hold it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<Time>,
    /// The timeout was reported (its Event is sent once per wait).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
}

impl GateRecord {
    /// The record of an interrupt beginning at `at`.
    pub fn interrupted(at: Timestamp) -> Self {
        GateRecord {
            interrupted_at: Time(at),
            waiting_since: None,
            timed_out: false,
        }
    }

    /// Reads an annotation value.
    pub fn parse(annotation: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(annotation)
    }

    /// The annotation value: compact JSON.
    pub fn to_annotation(&self) -> String {
        go_json(self)
    }
}

/// What a gate reads of one node condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObservedCondition<'a> {
    /// `type`.
    pub type_: &'a str,
    /// `status` is `True`.
    pub true_: bool,
    /// `lastTransitionTime`, when set.
    pub last_transition: Option<Timestamp>,
}

/// Why a gate is not met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmet {
    /// The node has no condition of that type.
    Absent,
    /// The condition is `False` or `Unknown`.
    NotTrue,
    /// The condition is `True`, but has been since before the interrupt.
    BeforeInterrupt,
}

impl Unmet {
    fn describe(self) -> &'static str {
        match self {
            Unmet::Absent => "not reported",
            Unmet::NotTrue => "not True",
            Unmet::BeforeInterrupt => "True only since before the interrupt",
        }
    }
}

/// One gate a node does not meet yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingGate {
    /// The condition type.
    pub condition_type: String,
    /// Why it is not met.
    pub unmet: Unmet,
    /// When the gate times out.
    pub deadline: Timestamp,
}

/// A node's readiness after its interrupt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every gate is met: the node completes.
    Met,
    /// Gates are pending, none past its deadline; look again at `wake_at` at the latest.
    Waiting {
        /// The gates not met yet.
        pending: Vec<PendingGate>,
        /// The earliest deadline.
        wake_at: Timestamp,
    },
    /// A pending gate is past its deadline: the node is `erroring` and stays cordoned.
    TimedOut {
        /// The gates not met yet.
        pending: Vec<PendingGate>,
    },
}

impl Verdict {
    /// Whether the gates hold the node past a timeout.
    pub fn timed_out(&self) -> bool {
        matches!(self, Verdict::TimedOut { .. })
    }
}

/// Judges the gates of a node whose packages finished, waiting since `waiting_since`, after an
/// interrupt recorded in `record`. See the module documentation.
pub fn judge(
    gates: &[ReadinessGate],
    record: &GateRecord,
    waiting_since: Timestamp,
    conditions: &[ObservedCondition<'_>],
    now: Timestamp,
) -> Verdict {
    let interrupted_at = record.interrupted_at.0;
    let pending: Vec<PendingGate> = gates
        .iter()
        .filter_map(|gate| {
            let found = conditions.iter().find(|c| c.type_ == gate.condition_type);
            let unmet = match found {
                None => Unmet::Absent,
                Some(c) if !c.true_ => Unmet::NotTrue,
                Some(c) if c.last_transition.is_none_or(|at| at < interrupted_at) => {
                    Unmet::BeforeInterrupt
                }
                Some(_) => return None,
            };
            let timeout =
                SignedDuration::try_from(gate_timeout(gate)).unwrap_or(SignedDuration::MAX);
            let deadline = waiting_since.checked_add(timeout).unwrap_or(Timestamp::MAX);
            Some(PendingGate {
                condition_type: gate.condition_type.clone(),
                unmet,
                deadline,
            })
        })
        .collect();
    let Some(wake_at) = pending.iter().map(|p| p.deadline).min() else {
        return Verdict::Met;
    };
    if wake_at <= now {
        Verdict::TimedOut { pending }
    } else {
        Verdict::Waiting { pending, wake_at }
    }
}

/// The Skyhook's `ReadinessGateHeld` message: per held node, the gates it waits for and why,
/// and until when (or that the wait timed out).
pub fn held_message(held: &[(&str, &Verdict)], now: Timestamp) -> String {
    let mut parts = Vec::with_capacity(held.len());
    for (node, verdict) in held {
        let pending = match verdict {
            Verdict::Met => continue,
            Verdict::Waiting { pending, .. } | Verdict::TimedOut { pending } => pending,
        };
        let mut part = format!("node {node} waits for ");
        for (at, gate) in pending.iter().enumerate() {
            if at > 0 {
                part.push_str(", ");
            }
            let _ = write!(part, "{} ({})", gate.condition_type, gate.unmet.describe());
            if gate.deadline <= now {
                let _ = write!(part, " timed out at {}", gate.deadline);
            } else {
                let _ = write!(part, " until {}", gate.deadline);
            }
        }
        parts.push(part);
    }
    format!(
        "{}; a node stays cordoned until each condition is True and turned True after its interrupt",
        parts.join("; ")
    )
}

/// The message of the Event on a node whose gate timed out.
pub fn timed_out_event(skyhook: &str, verdict: &Verdict) -> String {
    let Verdict::TimedOut { pending } = verdict else {
        return String::new();
    };
    let gates: Vec<String> = pending
        .iter()
        .map(|g| format!("{} ({})", g.condition_type, g.unmet.describe()))
        .collect();
    format!(
        "Skyhook [{skyhook}]: readiness gate timed out: {}; the node is erroring and stays cordoned until each condition is True",
        gates.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + seconds).unwrap()
    }

    fn gate(condition_type: &str, timeout: Option<&str>) -> ReadinessGate {
        ReadinessGate {
            condition_type: condition_type.into(),
            timeout: timeout.map(Into::into),
        }
    }

    fn condition(type_: &str, true_: bool, since: i64) -> ObservedCondition<'_> {
        ObservedCondition {
            type_,
            true_,
            last_transition: Some(at(since)),
        }
    }

    #[test]
    fn a_gate_is_met_only_by_a_true_condition_turned_true_after_the_interrupt() {
        let record = GateRecord::interrupted(at(100));
        let gates = [gate("GpuHealthy", Some("10m"))];
        let waiting = at(200);
        let pending = |unmet| Verdict::Waiting {
            pending: vec![PendingGate {
                condition_type: "GpuHealthy".into(),
                unmet,
                deadline: at(800),
            }],
            wake_at: at(800),
        };
        let cases = [
            ("absent", vec![], pending(Unmet::Absent)),
            (
                "false",
                vec![condition("GpuHealthy", false, 150)],
                pending(Unmet::NotTrue),
            ),
            (
                "true before the interrupt",
                vec![condition("GpuHealthy", true, 99)],
                pending(Unmet::BeforeInterrupt),
            ),
            (
                "true without a transition time",
                vec![ObservedCondition {
                    type_: "GpuHealthy",
                    true_: true,
                    last_transition: None,
                }],
                pending(Unmet::BeforeInterrupt),
            ),
            (
                "true at the interrupt",
                vec![condition("GpuHealthy", true, 100)],
                Verdict::Met,
            ),
            (
                "true after, among others",
                vec![
                    condition("Other", false, 0),
                    condition("GpuHealthy", true, 300),
                ],
                Verdict::Met,
            ),
        ];
        for (case, conditions, expected) in cases {
            assert_eq!(
                judge(&gates, &record, waiting, &conditions, at(300)),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn each_gate_times_out_after_its_own_timeout_from_the_start_of_the_wait() {
        let record = GateRecord::interrupted(at(0));
        let gates = [gate("GpuHealthy", Some("10m")), gate("NcclOk", None)];
        let conditions = [condition("NcclOk", true, 50)];
        let waiting = judge(&gates, &record, at(100), &[], at(650));
        assert!(
            matches!(&waiting, Verdict::Waiting { pending, wake_at } if pending.len() == 2 && *wake_at == at(700)),
            "{waiting:?}"
        );
        let timed_out = judge(&gates, &record, at(100), &[], at(700));
        assert!(timed_out.timed_out(), "{timed_out:?}");
        // The default timeout is an hour; the one met gate drops out of the verdict.
        let one = judge(&gates[1..], &record, at(100), &[], at(3_699));
        assert!(matches!(one, Verdict::Waiting { wake_at, .. } if wake_at == at(3_700)));
        assert_eq!(
            judge(&gates[1..], &record, at(100), &conditions, at(9_999)),
            Verdict::Met
        );
        // Met late, after the timeout: the node completes.
        let late = [
            condition("GpuHealthy", true, 900),
            condition("NcclOk", true, 50),
        ];
        assert_eq!(
            judge(&gates, &record, at(100), &late, at(1_000)),
            Verdict::Met
        );
    }

    #[test]
    fn the_record_round_trips_and_omits_what_is_unset() {
        let record = GateRecord::interrupted(at(0));
        assert_eq!(
            record.to_annotation(),
            r#"{"interruptedAt":"2026-01-01T00:00:00Z"}"#
        );
        let full = GateRecord {
            waiting_since: Some(Time(at(60))),
            timed_out: true,
            ..record
        };
        assert_eq!(GateRecord::parse(&full.to_annotation()).unwrap(), full);
        assert!(GateRecord::parse("{}").is_err());
    }

    #[test]
    fn messages_name_each_node_gate_and_deadline() {
        let record = GateRecord::interrupted(at(0));
        let gates = [gate("GpuHealthy", Some("10m"))];
        let waiting = judge(&gates, &record, at(60), &[], at(60));
        let timed_out = judge(
            &gates,
            &record,
            at(0),
            &[condition("GpuHealthy", false, 5)],
            at(600),
        );
        assert_eq!(
            held_message(&[("n1", &waiting), ("n2", &timed_out)], at(600)),
            "node n1 waits for GpuHealthy (not reported) until 2026-01-01T00:11:00Z; node n2 waits for GpuHealthy (not True) timed out at 2026-01-01T00:10:00Z; a node stays cordoned until each condition is True and turned True after its interrupt"
        );
        assert_eq!(
            timed_out_event("demo", &timed_out),
            "Skyhook [demo]: readiness gate timed out: GpuHealthy (not True); the node is erroring and stays cordoned until each condition is True"
        );
    }
}
