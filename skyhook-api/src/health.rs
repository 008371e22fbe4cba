//! The health gate of a DeploymentPolicy (issue #17 item 6): whether a compartment may start
//! its next batch, judged by the health of the nodes the Skyhook already worked on.
//!
//! A compartment starts a new batch only when
//! - no node of it that the Skyhook worked on is NotReady, and
//! - every node of it that the Skyhook finished has been Ready and schedulable for `settle`.
//!
//! Batch membership is not recorded per node, so "the previous batch" is read as every finished
//! node: nodes of earlier batches settled long ago and never hold the gate unless they are
//! NotReady or cordoned again. A node became schedulable again when the Skyhook finished it
//! (the Skyhook releases its cordon when the node's packages are complete), so the controller
//! feeds the time of the node's last package transition as `schedulable`.
//!
//! [`health_gate`] is a pure function of the nodes and the time; the controller requeues at
//! the `until` of a held gate instead of polling.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::duration;
use crate::v1alpha1::HealthGate;

/// Since when a node has been in a state (Ready, schedulable), if it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// It is not.
    Not,
    /// It has been since this time.
    At(Timestamp),
    /// It is, since a time nobody recorded (an entry written by upstream, a condition without
    /// `lastTransitionTime`): read as settled.
    Unknown,
}

/// What the gate reads of one node of a compartment that the Skyhook worked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateNode<'a> {
    /// Node name.
    pub name: &'a str,
    /// The kubelet's `Ready` condition.
    pub ready: Since,
    /// Schedulable (no cordon) since the Skyhook finished it.
    pub schedulable: Since,
    /// Every package of the Skyhook is complete on the node: it must have settled.
    pub finished: bool,
}

/// Whether a compartment may start a new batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateState {
    /// Yes.
    Open,
    /// No: `node` holds it.
    Hold {
        /// The node that holds the gate.
        node: String,
        /// Why.
        reason: HoldReason,
    },
}

/// Why a node holds the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldReason {
    /// The node is NotReady.
    NotReady,
    /// The node is finished and unschedulable (cordoned).
    Unschedulable,
    /// The node is Ready and schedulable, but has not been for `settle` yet; it settles at
    /// this time.
    Settling(Timestamp),
}

impl GateState {
    /// When the gate opens by itself (a settling node), for the plan to wake up then.
    pub fn opens_at(&self) -> Option<Timestamp> {
        match self {
            GateState::Hold {
                reason: HoldReason::Settling(at),
                ..
            } => Some(*at),
            _ => None,
        }
    }
}

/// Parses `settle`: a Go duration of zero or more.
pub fn parse_settle(gate: &HealthGate) -> Result<SignedDuration, duration::DurationError> {
    let parsed = duration::parse(&gate.settle)?;
    Ok(SignedDuration::try_from(parsed).unwrap_or(SignedDuration::MAX))
}

/// The gate of one compartment. A NotReady node holds it first (it does not open by itself),
/// then a finished node that is cordoned, then the finished node that settles last.
pub fn health_gate(settle: SignedDuration, nodes: &[GateNode<'_>], now: Timestamp) -> GateState {
    let hold = |node: &GateNode<'_>, reason| GateState::Hold {
        node: node.name.to_owned(),
        reason,
    };
    if let Some(node) = nodes.iter().find(|n| n.ready == Since::Not) {
        return hold(node, HoldReason::NotReady);
    }
    let finished = || nodes.iter().filter(|n| n.finished);
    if let Some(node) = finished().find(|n| n.schedulable == Since::Not) {
        return hold(node, HoldReason::Unschedulable);
    }
    let settling = finished()
        .filter_map(|node| {
            let since = [node.ready, node.schedulable]
                .into_iter()
                .filter_map(|s| match s {
                    Since::At(at) => Some(at),
                    Since::Not | Since::Unknown => None,
                })
                .max()?;
            let until = since.checked_add(settle).unwrap_or(Timestamp::MAX);
            (until > now).then_some((until, node))
        })
        .max_by_key(|(until, _)| *until);
    match settling {
        Some((until, node)) => hold(node, HoldReason::Settling(until)),
        None => GateState::Open,
    }
}

/// How long from `now` until `at`, when it is later.
pub fn wait_until(at: Timestamp, now: Timestamp) -> Option<Duration> {
    Duration::try_from(at.duration_since(now)).ok()
}

/// The Skyhook's message for the compartments its health gate holds, each with its node.
pub fn gate_hold_message(policy: &str, held: &[(String, GateState)]) -> String {
    let holds: Vec<String> = held
        .iter()
        .filter_map(|(compartment, state)| match state {
            GateState::Open => None,
            GateState::Hold { node, reason } => {
                let why = match reason {
                    HoldReason::NotReady => "is NotReady".to_owned(),
                    HoldReason::Unschedulable => "is unschedulable (cordoned)".to_owned(),
                    HoldReason::Settling(at) => {
                        format!("has not been Ready and schedulable for settle yet (until {at})")
                    }
                };
                Some(format!("[{compartment}] held by node {node}, which {why}"))
            }
        })
        .collect();
    format!(
        "health gate of DeploymentPolicy [{policy}]: {}; the next batch starts once the node is Ready and schedulable for spec.healthGate.settle; nodes already started finish",
        holds.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a valid timestamp literal")
    }

    fn node(name: &str, ready: Since, schedulable: Since, finished: bool) -> GateNode<'_> {
        GateNode {
            name,
            ready,
            schedulable,
            finished,
        }
    }

    fn settling(name: &str, until: &str) -> GateState {
        GateState::Hold {
            node: name.to_owned(),
            reason: HoldReason::Settling(at(until)),
        }
    }

    fn holding(name: &str, reason: HoldReason) -> GateState {
        GateState::Hold {
            node: name.to_owned(),
            reason,
        }
    }

    #[test]
    fn a_compartment_opens_once_its_finished_nodes_settle() {
        use Since::{At, Not, Unknown};
        let now = at("2026-01-01T00:10:00Z");
        let t = |minute: u32| At(at(&format!("2026-01-01T00:{minute:02}:00Z")));
        let five = SignedDuration::from_mins(5);
        #[rustfmt::skip]
        let cases: Vec<(&str, SignedDuration, Vec<GateNode<'_>>, GateState)> = vec![
            ("no node worked on", five, vec![], GateState::Open),
            ("settled long ago", five, vec![node("a", t(0), t(1), true)], GateState::Open),
            ("ready too recently", five, vec![node("a", t(8), t(1), true)], settling("a", "2026-01-01T00:13:00Z")),
            ("uncordoned too recently", five, vec![node("a", t(0), t(7), true)], settling("a", "2026-01-01T00:12:00Z")),
            ("settles exactly now", five, vec![node("a", t(0), t(5), true)], GateState::Open),
            ("the node settling last holds", five, vec![node("a", t(0), t(7), true), node("b", t(9), t(1), true)], settling("b", "2026-01-01T00:14:00Z")),
            ("unknown times read as settled", five, vec![node("a", Unknown, Unknown, true)], GateState::Open),
            ("zero settle", SignedDuration::ZERO, vec![node("a", t(10), t(10), true)], GateState::Open),
            ("cordoned finished node", five, vec![node("a", t(0), Not, true)], holding("a", HoldReason::Unschedulable)),
            ("NotReady finished node", five, vec![node("a", Not, t(1), true)], holding("a", HoldReason::NotReady)),
            ("NotReady node not finished", five, vec![node("a", t(0), t(1), true), node("b", Not, Not, false)], holding("b", HoldReason::NotReady)),
            ("NotReady goes before settling", five, vec![node("a", t(9), t(9), true), node("b", Not, t(1), true)], holding("b", HoldReason::NotReady)),
            ("a node in flight need not settle", five, vec![node("a", t(9), Not, false)], GateState::Open),
        ];
        for (case, settle, nodes, expected) in cases {
            assert_eq!(health_gate(settle, &nodes, now), expected, "{case}");
        }
    }

    #[test]
    fn settle_is_a_go_duration_of_zero_or_more() {
        let gate = |settle: &str| HealthGate {
            settle: settle.into(),
        };
        assert_eq!(
            parse_settle(&gate("90s")),
            Ok(SignedDuration::from_secs(90))
        );
        assert_eq!(parse_settle(&gate("0s")), Ok(SignedDuration::ZERO));
        assert!(parse_settle(&gate("-5m")).is_err());
        assert!(parse_settle(&gate("5 minutes")).is_err());
    }

    #[test]
    fn the_message_names_each_held_compartment_and_its_node() {
        let held = vec![
            (
                "__default__".to_owned(),
                holding("n1", HoldReason::NotReady),
            ),
            ("gpu".to_owned(), settling("n3", "2026-01-01T00:13:00Z")),
        ];
        assert_eq!(
            gate_hold_message("careful", &held),
            "health gate of DeploymentPolicy [careful]: [__default__] held by node n1, which is NotReady; [gpu] held by node n3, which has not been Ready and schedulable for settle yet (until 2026-01-01T00:13:00Z); the next batch starts once the node is Ready and schedulable for spec.healthGate.settle; nodes already started finish"
        );
    }
}
