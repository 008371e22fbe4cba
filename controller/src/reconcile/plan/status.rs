//! The Skyhook status subresource (spec §2.5, §2.13): node statuses and states mirrored from
//! the nodes, counters, compartments, conditions (with `Ready`) and `observedGeneration`.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use skyhook_api::budget::{reset_batch_state_enabled, reset_batch_states};
use skyhook_api::conditions::{
    LongList, ReadyNode, UNINSTALL_CONDITION_TYPES, UninstallConditions, ignored_message,
    intolerable_message, ready_summary, set_condition, set_or_remove, transition_text,
};
use skyhook_api::drain::{
    BlockedPod, drain_blocked_message, drain_blocked_reason, non_interrupt_message,
};
use skyhook_api::keys::{self, Keys};
use skyhook_api::node_mirror::bound_node_mirrors;
use skyhook_api::status::{SkyhookOverrides, counters, skyhook_status};
use skyhook_api::v1alpha1::{DeploymentPolicySpec, Skyhook, SkyhookStatus, Status};

use super::reboots::{UnconfirmedReboots, condition_message};
use super::selection::Blocking;

/// What one Skyhook's pass found, for its status.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub(super) version_changed: bool,
    pub(super) policy_missing: bool,
    pub(super) blocking: Blocking,
    /// The last package launch, for the `ApplyPackage` condition.
    pub(super) applied: Option<String>,
    /// Drains past their timeout, one message per node.
    pub(super) drain_blocked: Vec<String>,
    /// Per node, the pods that keep its drain from progressing (`DrainBlocked`).
    pub(super) drain_blockers: BTreeMap<String, Vec<BlockedPod>>,
    /// The nodes pods matching `podNonInterruptLabels` hold (`Blocked`).
    pub(super) non_interrupt_holds: Vec<String>,
    /// Why nodes wait for the fleet budget before their cordon, when some do.
    pub(super) fleet_wait: Option<String>,
    /// Which compartments hold their next batch until a maintenance window opens, and when.
    pub(super) window_closed: Option<String>,
    /// The message while an open window's budget holds compartments to fewer nodes than their
    /// own budgets.
    pub(super) window_budget_held: Option<String>,
    /// Which compartments the health gate holds, and the node that holds each.
    pub(super) health_gate_held: Option<String>,
    /// The `ReadinessGateHeld` reason and message while readiness gates hold nodes.
    pub(super) readiness_gate_held: Option<(&'static str, String)>,
    /// The `TopologyBudgetHeld` reason and message while budget topologies hold nodes back.
    pub(super) topology_budget_held: Option<(&'static str, String)>,
    /// The `PrePullHeld` reason and message while nodes wait for their images before a cordon.
    pub(super) pre_pull_held: Option<(&'static str, String)>,
    /// Reboots not confirmed in time, by node.
    pub(super) unconfirmed_reboots: UnconfirmedReboots,
    /// A package ConfigMap change waits for its nodes: the generation is not observed yet.
    pub(super) config_waiting: bool,
    /// Per targeted node, whether every package is complete there (false for a node whose
    /// state does not parse), for `Ready`.
    pub(super) complete: BTreeMap<String, bool>,
    /// The explicit-uninstall conditions that hold.
    pub(super) uninstall: UninstallConditions,
    /// Why the Skyhook's deletion waits although its uninstalls run: `DeletionBlocked`'s
    /// reason and message.
    pub(super) deletion_blocked: Option<(&'static str, String)>,
}

/// The status one Skyhook's pass leaves, and the transition it makes, if any.
#[derive(Debug)]
pub(super) struct NextStatus {
    pub(super) status: SkyhookStatus,
    /// `[<from>] -> [<to>]` when the Skyhook's status changes: its `State` Event says so.
    pub(super) transition: Option<String>,
    /// The node lists the conditions' messages left out, for the log; empty when the status
    /// does not change (the lists are then as last logged).
    pub(super) long_lists: Vec<LongList>,
}

/// The conditions of one Skyhook's status: its generation and this plan's time.
struct Conditions {
    /// The keys of the object's group: its prefixed condition types are this group's.
    keys: &'static Keys,
    generation: Option<i64>,
    now: Timestamp,
}

impl Conditions {
    fn of(skyhook: &Skyhook, keys: &'static Keys, now: Timestamp) -> Self {
        Conditions {
            keys,
            generation: skyhook.metadata.generation,
            now,
        }
    }

    fn condition(&self, type_: &str, true_: bool, reason: &str, message: String) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: if true_ { "True" } else { "False" }.to_owned(),
            reason: reason.to_owned(),
            message,
            observed_generation: self.generation,
            last_transition_time: Time(self.now),
        }
    }
}

/// The status of a Skyhook whose spec breaks the validation rules (its nodes are left as they
/// are); `None` when it already says so.
pub(super) fn invalid_status(
    skyhook: &Skyhook,
    keys: &'static Keys,
    violations: &str,
    now: Timestamp,
) -> Option<SkyhookStatus> {
    let old = skyhook.status.clone().unwrap_or_default();
    let mut status = old.clone();
    // Nothing is drained until the spec is fixed, so no protected pod holds a node.
    end_non_interrupt_hold(&mut status.conditions);
    end_migrated(&mut status.conditions);
    let conditions = Conditions::of(skyhook, keys, now);
    set_condition(
        &mut status.conditions,
        conditions.condition(
            conditions.keys.condition_spec_invalid,
            true,
            "SpecInvalid",
            format!("nothing runs until the spec is fixed: {violations}"),
        ),
    );
    (status != old).then_some(status)
}

/// The status one Skyhook's pass leaves: `status` carries the node maps as the pass left them;
/// this adds the overall status, the counts, the batch-state reset and the conditions.
pub(super) fn next_status(
    skyhook: &Skyhook,
    keys: &'static Keys,
    policy: Option<&DeploymentPolicySpec>,
    mut status: SkyhookStatus,
    outcome: Outcome,
    now: Timestamp,
) -> NextStatus {
    let previous = skyhook.status.as_ref().and_then(|s| s.status);
    let next = skyhook_status(
        status.node_status.values().copied(),
        SkyhookOverrides {
            disabled: skyhook.is_disabled(),
            paused: skyhook.is_paused(),
            policy_missing: outcome.policy_missing,
        },
    );
    let counted = counters(&status.node_status, &skyhook.spec.packages);
    status.complete_nodes = counted.complete_nodes;
    status.nodes_in_progress = counted.nodes_in_progress;
    status.package_list = counted.package_list;
    status.status = Some(next);
    let entering_complete = next == Status::Complete && previous != Some(Status::Complete);
    // A spec whose ConfigMap change still waits is not done, even if every node is complete
    // with the old configuration: tools waiting on `observedGeneration` must keep waiting.
    if next == Status::Complete && !outcome.config_waiting {
        status.observed_generation = skyhook.metadata.generation;
    }
    if (entering_complete || outcome.version_changed)
        && reset_batch_state_enabled(skyhook.spec.deployment_policy_options.as_ref(), policy)
    {
        reset_batch_states(&mut status.compartment_statuses);
    }
    let conditions = Conditions::of(skyhook, keys, now);
    let transition = (previous != Some(next)).then(|| {
        let from = previous.map_or_else(|| "none".to_owned(), |s| s.to_string());
        format!("[{from}] -> [{next}]")
    });
    let mut long_lists =
        ready_conditions(&mut status, &conditions, transition.as_deref(), &outcome);
    pass_conditions(skyhook, &mut status.conditions, &conditions, &outcome);
    end_migrated(&mut status.conditions);
    set_uninstall_conditions(
        skyhook,
        keys,
        &mut status.conditions,
        &outcome.uninstall,
        now,
    );
    // After the uninstall conditions: a `Blocked` of theirs wins over the drain's.
    drain_conditions(&mut status.conditions, &conditions, &outcome);
    long_lists.extend(outcome.uninstall.long_lists);
    bound_node_mirrors(&mut status);
    if skyhook.status.as_ref() == Some(&status) {
        long_lists.clear();
    }
    NextStatus {
        status,
        transition,
        long_lists,
    }
}

/// Sets the explicit-uninstall conditions that hold and removes the others (also for a Skyhook
/// being deleted, whose pass does not reach [`next_status`]).
pub(super) fn set_uninstall_conditions(
    skyhook: &Skyhook,
    keys: &'static Keys,
    list: &mut Vec<Condition>,
    uninstall: &UninstallConditions,
    now: Timestamp,
) {
    let conditions = Conditions::of(skyhook, keys, now);
    for type_ in UNINSTALL_CONDITION_TYPES {
        let holding = uninstall.holding.iter().find(|c| c.type_ == type_);
        let condition =
            holding.map(|c| conditions.condition(type_, true, c.reason, c.message.clone()));
        // `Blocked` also says that pods matching `podNonInterruptLabels` hold nodes; that one
        // is the drain's to set and remove ([`drain_conditions`]).
        let drains = list
            .iter()
            .any(|c| c.type_ == type_ && c.reason == keys::NON_INTERRUPT_PODS_RUNNING_REASON);
        if condition.is_none() && drains {
            continue;
        }
        set_or_remove(list, type_, condition);
    }
}

/// `Ready`, its mirror `skyhook.nvidia.com/Ready` and `skyhook.nvidia.com/Transition`; returns
/// the node lists `Ready`'s message left out.
fn ready_conditions(
    status: &mut SkyhookStatus,
    conditions: &Conditions,
    transition: Option<&str>,
    outcome: &Outcome,
) -> Vec<LongList> {
    let nodes: Vec<ReadyNode<'_>> = outcome
        .complete
        .iter()
        .map(|(name, complete)| ReadyNode {
            name,
            status: status
                .node_status
                .get(name)
                .copied()
                .unwrap_or(Status::Unknown),
            complete: *complete,
        })
        .collect();
    let summary = ready_summary(status.status.unwrap_or(Status::Unknown), &nodes);
    let ready = conditions.condition(
        keys::CONDITION_READY,
        summary.ready,
        summary.reason,
        summary.message.clone(),
    );
    let list = &mut status.conditions;
    set_twins(
        list,
        keys::CONDITION_READY,
        conditions.keys.condition_ready_prefixed,
        Some(ready),
    );
    let (reason, message) = transition_text(status.status, transition, &summary.message);
    let transition = conditions.condition(
        conditions.keys.condition_transition,
        summary.ready,
        &reason,
        message,
    );
    set_condition(list, transition);
    summary.long_lists
}

/// Sets `condition` under its bare type and its deprecated prefixed twin, or removes both. The
/// twin is a copy of the bare condition, transition time included, so the two never differ.
fn set_twins(list: &mut Vec<Condition>, bare: &str, prefixed: &str, condition: Option<Condition>) {
    set_or_remove(list, bare, condition);
    let twin = list.iter().find(|c| c.type_ == bare).map(|c| Condition {
        type_: prefixed.to_owned(),
        ..c.clone()
    });
    match (twin, list.iter().position(|c| c.type_ == prefixed)) {
        (Some(twin), Some(at)) => list[at] = twin,
        (Some(twin), None) => list.push(twin),
        (None, _) => list.retain(|c| c.type_ != prefixed),
    }
}

/// The conditions that report what the pass found: the last launch, blocked and ignored nodes,
/// a missing policy, blocked drains and unconfirmed reboots.
fn pass_conditions(
    skyhook: &Skyhook,
    list: &mut Vec<Condition>,
    conditions: &Conditions,
    outcome: &Outcome,
) {
    if let Some(applied) = &outcome.applied {
        let condition = conditions.condition(
            keys::CONDITION_APPLY_PACKAGE_BARE,
            true,
            keys::APPLY_PACKAGE_REASON,
            applied.clone(),
        );
        set_twins(
            list,
            keys::CONDITION_APPLY_PACKAGE_BARE,
            conditions.keys.condition_apply_package,
            Some(condition),
        );
    }
    // A pass runs only for a deletion whose uninstalls run: the other waits are set before it
    // (and the pass never reached).
    let deletion_blocked = (outcome.deletion_blocked.as_ref()).map(|(reason, message)| {
        let type_ = keys::CONDITION_DELETION_BLOCKED;
        conditions.condition(type_, true, reason, message.clone())
    });
    set_or_remove(list, keys::CONDITION_DELETION_BLOCKED, deletion_blocked);
    blocking_conditions(list, conditions, &outcome.blocking);
    let policy_missing = outcome.policy_missing.then(|| {
        conditions.condition(
            keys::CONDITION_DEPLOYMENT_POLICY_NOT_FOUND_BARE,
            true,
            "DeploymentPolicyNotFound",
            format!(
                "DeploymentPolicy {:?} does not exist; create it or fix spec.deploymentPolicy",
                skyhook.spec.policy_name().unwrap_or_default()
            ),
        )
    });
    set_twins(
        list,
        keys::CONDITION_DEPLOYMENT_POLICY_NOT_FOUND_BARE,
        conditions.keys.condition_deployment_policy_not_found,
        policy_missing,
    );
    list.retain(|c| c.type_ != conditions.keys.condition_spec_invalid);
    set_or_remove(
        list,
        conditions.keys.condition_drain_blocked,
        (!outcome.drain_blocked.is_empty()).then(|| {
            conditions.condition(
                conditions.keys.condition_drain_blocked,
                true,
                "DrainTimeout",
                outcome.drain_blocked.join("; "),
            )
        }),
    );
    wait_conditions(list, conditions, outcome);
    let unconfirmed = &outcome.unconfirmed_reboots;
    set_or_remove(
        list,
        conditions.keys.condition_reboot_not_confirmed,
        (!unconfirmed.is_empty()).then(|| {
            conditions.condition(
                conditions.keys.condition_reboot_not_confirmed,
                true,
                "RebootNotConfirmed",
                condition_message(unconfirmed),
            )
        }),
    );
}

/// Removes `Blocked` when it says that protected pods hold nodes, for a Skyhook whose pass
/// drains nothing (an invalid spec, a blocked deletion); another reason's `Blocked` stays.
pub(super) fn end_non_interrupt_hold(list: &mut Vec<Condition>) {
    list.retain(|c| {
        !(c.type_ == keys::CONDITION_BLOCKED && c.reason == keys::NON_INTERRUPT_PODS_RUNNING_REASON)
    });
}

/// Removes `Migrated`, which an object carries while its twin of the other group does its
/// name's work: a live object does its own (and the webhook reads the condition as read-only).
fn end_migrated(list: &mut Vec<Condition>) {
    list.retain(|c| c.type_ != keys::CONDITION_MIGRATED);
}

/// Upstream v0.20's drain conditions: `DrainBlocked` while some node's drain cannot progress,
/// and `Blocked`/`NonInterruptPodsRunning` while pods matching `podNonInterruptLabels` hold
/// nodes. The latter is left alone while `Blocked` carries another reason (that one wins), and
/// removed without touching another reason's.
fn drain_conditions(list: &mut Vec<Condition>, conditions: &Conditions, outcome: &Outcome) {
    let blocked = drain_blocked_reason(outcome.drain_blockers.values().flatten()).map(|reason| {
        let total = outcome.complete.len().max(outcome.drain_blockers.len());
        let message = drain_blocked_message(total, &outcome.drain_blockers);
        conditions.condition(keys::CONDITION_DRAIN_BLOCKED, true, reason, message)
    });
    set_or_remove(list, keys::CONDITION_DRAIN_BLOCKED, blocked);
    let other_reason = list.iter().any(|c| {
        c.type_ == keys::CONDITION_BLOCKED && c.reason != keys::NON_INTERRUPT_PODS_RUNNING_REASON
    });
    if other_reason {
        return;
    }
    let held = (!outcome.non_interrupt_holds.is_empty()).then(|| {
        let nodes: Vec<&str> = outcome
            .non_interrupt_holds
            .iter()
            .map(String::as_str)
            .collect();
        conditions.condition(
            keys::CONDITION_BLOCKED,
            true,
            keys::NON_INTERRUPT_PODS_RUNNING_REASON,
            non_interrupt_message(&nodes),
        )
    });
    set_or_remove(list, keys::CONDITION_BLOCKED, held);
}

/// The conditions of new work that waits for a gate: the fleet budget, a maintenance window
/// (closed, or open with a smaller budget), the health gate, and of the nodes readiness gates
/// hold. Each is removed once nothing waits for it.
fn wait_conditions(list: &mut Vec<Condition>, conditions: &Conditions, outcome: &Outcome) {
    let waits = [
        (
            conditions.keys.condition_fleet_budget_wait,
            keys::FLEET_BUDGET_FULL_REASON,
            &outcome.fleet_wait,
        ),
        (
            conditions.keys.condition_outside_maintenance_window,
            keys::MAINTENANCE_WINDOW_CLOSED_REASON,
            &outcome.window_closed,
        ),
        (
            conditions.keys.condition_health_gate_held,
            keys::HEALTH_GATE_HELD_REASON,
            &outcome.health_gate_held,
        ),
        (
            conditions.keys.condition_window_budget_held,
            keys::WINDOW_BUDGET_FULL_REASON,
            &outcome.window_budget_held,
        ),
    ];
    for (type_, reason, message) in waits {
        let condition = message
            .clone()
            .map(|message| conditions.condition(type_, true, reason, message));
        set_or_remove(list, type_, condition);
    }
    let reasoned = [
        (
            conditions.keys.condition_readiness_gate_held,
            &outcome.readiness_gate_held,
        ),
        (
            conditions.keys.condition_topology_budget_held,
            &outcome.topology_budget_held,
        ),
        (
            conditions.keys.condition_pre_pull_held,
            &outcome.pre_pull_held,
        ),
    ];
    for (type_, held) in reasoned {
        let condition = (held.clone())
            .map(|(reason, message)| conditions.condition(type_, true, reason, message));
        set_or_remove(list, type_, condition);
    }
}

/// `TaintNotTolerable` and `NodesIgnored` (bare and prefixed), written False with upstream's
/// messages when no node is blocked.
fn blocking_conditions(list: &mut Vec<Condition>, conditions: &Conditions, blocking: &Blocking) {
    let intolerable = &blocking.intolerable;
    let condition = conditions.condition(
        keys::CONDITION_TAINT_NOT_TOLERABLE_BARE,
        !intolerable.is_empty(),
        keys::TAINT_NOT_TOLERABLE_REASON,
        if intolerable.is_empty() {
            keys::ALL_TAINTS_TOLERABLE_MESSAGE.to_owned()
        } else {
            intolerable_message(intolerable.clone())
        },
    );
    set_twins(
        list,
        keys::CONDITION_TAINT_NOT_TOLERABLE_BARE,
        conditions.keys.condition_taint_not_tolerable,
        Some(condition),
    );
    let ignored = &blocking.ignored;
    let condition = conditions.condition(
        keys::CONDITION_NODES_IGNORED_BARE,
        !ignored.is_empty(),
        keys::NODES_IGNORED_REASON,
        if ignored.is_empty() {
            keys::NO_NODES_IGNORED_MESSAGE.to_owned()
        } else {
            ignored_message(ignored.clone())
        },
    );
    set_twins(
        list,
        keys::CONDITION_NODES_IGNORED_BARE,
        conditions.keys.condition_nodes_ignored,
        Some(condition),
    );
}
