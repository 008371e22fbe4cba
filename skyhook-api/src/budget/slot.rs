//! The budget invariant: which nodes occupy one of their compartment's budget slots.
//!
//! **Invariant.** In every compartment, the nodes that hold a slot never outnumber the
//! compartment's ceiling, except when the ceiling itself shrank under nodes already holding
//! one. A node holds a slot for a Skyhook from the moment the Skyhook starts working on it
//! until it is back and finished, whatever happens to the node in between:
//!
//! - the Skyhook cordoned it (`cordon_<skyhook>` and `spec.unschedulable`): from the drain
//!   of an interrupting package until the Skyhook completes on the node;
//! - an interrupt of the Skyhook was requested on the node and is not confirmed yet (an
//!   `interrupt` entry `in_progress`, `erroring` or `skipped`): the node is rebooting, waiting
//!   for its new boot ID, or reported as not having rebooted in time;
//! - the Skyhook is working on it (`in_progress`) and one of its pods is still on the node.
//!
//! A node is *released* when the Skyhook gives up on it for now: a drain that timed out with
//! `spec.drain.onTimeout: fail` (the node is uncordoned, its interrupting package turns
//! `erroring` and the node is marked `drainFail_<skyhook>`), or an `erroring` node uncordoned by
//! `spec.onFailure.uncordon`. A released node holds no slot through a cordon, and an interrupt
//! entry `erroring` on a node marked `drainFail_` holds none either, since no interrupt ran: the
//! drain failed before it. An unconfirmed reboot still holds its slot when uncordoned: the
//! node may be down. A released node is `erroring`, so it leaves the current batch and is
//! picked again only by a later batch, like any failed node.
//!
//! A node that holds a slot keeps it when it becomes ineligible: a reboot makes the node
//! NotReady and kube-controller-manager taints it `node.kubernetes.io/not-ready` or
//! `unreachable`, which the Skyhook does not tolerate. Treating that node as blocked freed its
//! slot and let the next nodes go down while the first were still rebooting. Only nodes that
//! hold nothing (picked but not started, or in progress with no pod left) are skipped when
//! they become ineligible (nodewright #586).
//!
//! [`slot_hold`] states the rule for one node; [`super::CompartmentNodes::select`] enforces
//! the invariant when it picks nodes.

use crate::keys::Keys;
use crate::node_state::NodeState;
use crate::string_map::StringMap;
use crate::v1alpha1::{State, Status};

/// Why a node holds one of its compartment's budget slots whatever its eligibility.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SlotHold {
    /// The Skyhook cordoned the node.
    Cordoned,
    /// An interrupt of the Skyhook was requested on the node and is not confirmed.
    Interrupting,
    /// One of the Skyhook's pods is on the node while the node is `in_progress`.
    Working,
}

/// What [`slot_hold`] reads of one node, for one Skyhook.
#[derive(Debug, Clone, Copy)]
pub struct NodeActivity<'a> {
    /// The keys of the Skyhook's API group.
    pub keys: &'a Keys,
    /// The Skyhook's name.
    pub skyhook: &'a str,
    /// The node's annotations.
    pub annotations: &'a dyn StringMap,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// The Skyhook's node state on the node.
    pub state: &'a NodeState,
    /// The node's status for the Skyhook.
    pub status: Status,
    /// Whether a package or interrupt pod of the Skyhook is on the node.
    pub pod_on_node: bool,
}

/// Why the node holds a budget slot for the Skyhook, if it does (see the module docs).
pub fn slot_hold(node: NodeActivity<'_>) -> Option<SlotHold> {
    let cordoned = node.unschedulable
        && node
            .annotations
            .has(&node.keys.cordon_annotation(node.skyhook));
    if cordoned {
        return Some(SlotHold::Cordoned);
    }
    let drain_failed = node
        .annotations
        .has(&node.keys.drain_failed_annotation(node.skyhook));
    let interrupting = node.state.iter().any(|(_, entry)| {
        entry.stage.interrupts_node()
            && matches!(
                entry.state,
                State::InProgress | State::Erroring | State::Skipped
            )
            && !(drain_failed && entry.state == State::Erroring)
    });
    if interrupting {
        return Some(SlotHold::Interrupting);
    }
    (node.status == Status::InProgress && node.pod_on_node).then_some(SlotHold::Working)
}

/// Whether `spec.onFailure.uncordon` releases the Skyhook's cordon on a node: when it is set,
/// a package of the Skyhook is `erroring` on the node, and the Skyhook is not draining the node
/// right now (a failed package being tried again cordons and drains anew, and must keep that
/// cordon until its pod runs).
pub fn uncordon_on_failure(uncordon: bool, state: &NodeState, draining: bool) -> bool {
    uncordon && !draining && state.iter().any(|(_, e)| e.state == State::Erroring)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::keys;
    use crate::v1alpha1::{PackageStatus, Stage};

    fn entry(stage: Stage, state: State) -> NodeState {
        let mut node_state = NodeState::new();
        node_state.upsert(PackageStatus {
            name: "pkg".into(),
            version: "1.0.0".into(),
            image: "img".into(),
            stage,
            state,
            container_sha: String::new(),
            restarts: 0,
        });
        node_state
    }

    #[test]
    fn on_failure_uncordons_only_erroring_nodes_not_being_drained() {
        let erroring = entry(Stage::Apply, State::Erroring);
        let unconfirmed = entry(Stage::Interrupt, State::Erroring);
        let applying = entry(Stage::Apply, State::InProgress);
        let empty = NodeState::new();
        #[rustfmt::skip]
        let cases = [
            ("default false keeps the cordon", false, &erroring, false, false),
            ("erroring package", true, &erroring, false, true),
            ("unconfirmed reboot", true, &unconfirmed, false, true),
            ("erroring package drained again", true, &erroring, true, false),
            ("in progress", true, &applying, false, false),
            ("nothing", true, &empty, false, false),
        ];
        for (case, uncordon, state, draining, expected) in cases {
            assert_eq!(
                uncordon_on_failure(uncordon, state, draining),
                expected,
                "{case}"
            );
        }
    }

    /// Case, annotations, unschedulable, node state, status, pod on node, expected hold.
    type Case<'a> = (
        &'a str,
        &'a BTreeMap<String, String>,
        bool,
        &'a NodeState,
        Status,
        bool,
        Option<SlotHold>,
    );

    #[test]
    fn holds_by_cordon_interrupt_or_running_pod() {
        let cordon = BTreeMap::from([(keys::SKYHOOK.cordon_annotation("s"), "true".to_owned())]);
        let other_cordon =
            BTreeMap::from([(keys::SKYHOOK.cordon_annotation("t"), "true".to_owned())]);
        let drain_failed =
            BTreeMap::from([(keys::SKYHOOK.drain_failed_annotation("s"), "t".to_owned())]);
        let mut cordon_after_failure = drain_failed.clone();
        cordon_after_failure.extend(cordon.clone());
        let other_drain_failed =
            BTreeMap::from([(keys::SKYHOOK.drain_failed_annotation("t"), "t".to_owned())]);
        let none = BTreeMap::new();
        let empty = NodeState::new();
        let interrupting = entry(Stage::Interrupt, State::InProgress);
        let unconfirmed = entry(Stage::Interrupt, State::Erroring);
        let skipped = entry(Stage::Interrupt, State::Skipped);
        let interrupted = entry(Stage::Interrupt, State::Complete);
        let applying = entry(Stage::Apply, State::InProgress);
        use Status::*;
        #[rustfmt::skip]
        let cases: [Case<'_>; 15] = [
            ("cordoned by the skyhook", &cordon, true, &empty, Erroring, false, Some(SlotHold::Cordoned)),
            ("cordon annotation but uncordoned", &cordon, false, &empty, Erroring, false, None),
            ("cordoned by another skyhook", &other_cordon, true, &empty, Waiting, false, None),
            ("interrupt requested", &none, false, &interrupting, InProgress, false, Some(SlotHold::Interrupting)),
            ("reboot not confirmed", &none, false, &unconfirmed, Erroring, false, Some(SlotHold::Interrupting)),
            ("interrupt owned by another package", &none, false, &skipped, InProgress, false, Some(SlotHold::Interrupting)),
            ("interrupt confirmed, no pod", &none, false, &interrupted, InProgress, false, None),
            ("in progress with a pod", &none, false, &applying, InProgress, true, Some(SlotHold::Working)),
            ("in progress between pods", &none, false, &applying, InProgress, false, None),
            ("erroring pod left in place", &none, false, &applying, Erroring, true, None),
            ("nothing", &none, false, &empty, Waiting, false, None),
            ("drain failed before the interrupt", &drain_failed, false, &unconfirmed, Erroring, false, None),
            ("another skyhook's drain failed", &other_drain_failed, false, &unconfirmed, Erroring, false, Some(SlotHold::Interrupting)),
            ("drain failed, cordoned again", &cordon_after_failure, true, &unconfirmed, InProgress, false, Some(SlotHold::Cordoned)),
            ("interrupt started after a failed drain", &drain_failed, false, &interrupting, InProgress, false, Some(SlotHold::Interrupting)),
        ];
        for (case, annotations, unschedulable, state, status, pod_on_node, expected) in cases {
            let activity = NodeActivity {
                keys: &keys::SKYHOOK,
                skyhook: "s",
                annotations,
                unschedulable,
                state,
                status,
                pod_on_node,
            };
            assert_eq!(slot_hold(activity), expected, "{case}");
        }
    }
}
