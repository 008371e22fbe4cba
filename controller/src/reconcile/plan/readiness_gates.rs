//! `spec.readinessGates` in one Skyhook's pass: a node whose packages finished after an
//! interrupt counts as complete only once its gates are met ([`skyhook_api::readiness`]).
//! Until then it is incomplete, so it keeps its cordon, its batch slot and the runtime-required
//! taint; past a gate's timeout it is also `erroring`.
//!
//! The interrupt is recorded when a package of the Skyhook enters an interrupting stage on the
//! node ([`record_gate`]), the wait when the packages have all finished
//! ([`hold_gated_nodes`]); the record goes once the node completes. A Skyhook being deleted
//! gates nothing: its uninstalls are not judged by the validator of its installs.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use skyhook_api::health::wait_until;
use skyhook_api::keys;
use skyhook_api::readiness::{
    GateRecord, ObservedCondition, Verdict, held_message, judge, timed_out_event,
};

use super::context::Context;
use super::event_kinds;
use super::output::EventTarget;
use super::pass::Pass;
use super::workset::Workset;

/// The nodes the gates hold in this pass, with their verdicts.
#[derive(Debug, Default)]
pub(super) struct GateHolds<'s> {
    verdicts: BTreeMap<&'s str, Verdict>,
}

impl GateHolds<'_> {
    /// Whether the gates hold `node` past a timeout.
    pub(super) fn timed_out(&self, node: &str) -> bool {
        self.verdicts.get(node).is_some_and(Verdict::timed_out)
    }

    /// The `ReadinessGateHeld` reason and message, when the gates hold a node.
    pub(super) fn condition(&self, now: Timestamp) -> Option<(&'static str, String)> {
        if self.verdicts.is_empty() {
            return None;
        }
        let reason = if self.verdicts.values().any(Verdict::timed_out) {
            keys::READINESS_GATE_TIMED_OUT_REASON
        } else {
            keys::READINESS_GATE_WAITING_REASON
        };
        let held: Vec<(&str, &Verdict)> = self.verdicts.iter().map(|(n, v)| (*n, v)).collect();
        Some((reason, held_message(&held, now)))
    }
}

/// Whether the pass judges readiness gates at all.
fn gated(pass: &Pass<'_>) -> bool {
    !pass.skyhook.spec.readiness_gates.is_empty() && !pass.rules.deleting
}

/// Marks incomplete, in `complete`, each node whose packages finished after an interrupt but
/// whose gates are not met; records when its wait began, reports a timeout once per wait on
/// the node, and wakes the plan at the next deadline (a condition changing wakes it too).
pub(super) fn hold_gated_nodes<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'s>,
    complete: &mut BTreeMap<&'s str, bool>,
) -> GateHolds<'s> {
    let keys = pass.keys();
    let mut holds = GateHolds::default();
    if !gated(pass) {
        return holds;
    }
    let name = pass.name();
    let key = keys.ready_gate_annotation(name);
    let now = context.now;
    for node in &pass.matched {
        let Some(done) = complete.get_mut(node.name.as_str()).filter(|done| **done) else {
            continue;
        };
        let Some(work) = workset.nodes.get_mut(node.name.as_str()) else {
            continue;
        };
        let Some(mut record) = work
            .annotations()
            .get(&key)
            .and_then(|text| GateRecord::parse(text).ok())
        else {
            continue;
        };
        let waiting_since = record.waiting_since.get_or_insert(Time(now)).0;
        let conditions: Vec<ObservedCondition<'_>> = node
            .foreign_conditions
            .iter()
            .map(|c| ObservedCondition {
                type_: &c.type_,
                true_: c.true_,
                last_transition: c.last_transition,
            })
            .collect();
        let verdict = judge(
            &pass.skyhook.spec.readiness_gates,
            &record,
            waiting_since,
            &conditions,
            now,
        );
        match &verdict {
            Verdict::Met => {
                workset.emit(
                    EventTarget::Node(node.name.clone()),
                    event_kinds::READINESS_GATE_MET,
                    format!(
                        "{} [{name}]: every readiness gate is met; the node completes",
                        pass.keys().kind
                    ),
                );
                continue;
            }
            Verdict::Waiting { wake_at, .. } => {
                if let Some(wait) = wait_until(*wake_at, now) {
                    workset.requeue(wait);
                }
            }
            Verdict::TimedOut { .. } if !record.timed_out => {
                record.timed_out = true;
                workset.emit(
                    EventTarget::Node(node.name.clone()),
                    event_kinds::READINESS_GATE_TIMED_OUT,
                    timed_out_event(name, &verdict),
                );
            }
            Verdict::TimedOut { .. } => {}
        }
        if let Some(work) = workset.nodes.get_mut(node.name.as_str()) {
            work.set_annotation(key.clone(), record.to_annotation());
        }
        *done = false;
        holds.verdicts.insert(node.name.as_str(), verdict);
    }
    holds
}

/// After the pass's launches, on one targeted node: records the interrupt when a package of
/// the Skyhook is in an interrupting stage there and none is recorded; removes the record once
/// the node is complete (or the Skyhook gates nothing).
pub(super) fn record_gate(
    workset: &mut Workset<'_>,
    pass: &Pass<'_>,
    node: &str,
    done: bool,
    now: Timestamp,
) {
    let keys = pass.keys();
    let name = pass.name();
    let key = keys.ready_gate_annotation(name);
    let Some(work) = workset.nodes.get_mut(node) else {
        return;
    };
    let recorded = work.annotations().contains_key(&key);
    if done || !gated(pass) {
        if recorded {
            work.set_or_remove_annotation(&key, None);
        }
        return;
    }
    let interrupting = work
        .state(name)
        .iter()
        .any(|(_, entry)| entry.stage.interrupts_node());
    if interrupting && !recorded {
        work.set_annotation(key, GateRecord::interrupted(now).to_annotation());
    }
}
