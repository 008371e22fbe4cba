//! One admitted Skyhook's pass (spec §2.2 step 7, §2.3, §2.11, §2.12), after the passes of the
//! Skyhooks before it:
//!
//! 1. what changed since the last pass (`spec_changes`, `reboots`, `configs`): reboots, lost
//!    interrupts, version changes, config updates, pods that no longer match;
//! 2. node statuses with per-node priority gating;
//! 3. selection ([`super::selection::select`]) and the packages of the selected nodes
//!    (`packages`);
//! 4. node conditions, state mirror and uncordon; the Skyhook status ([`super::status`]).
//!
//! It returns a [`PassOutcome`]: its progress, which gates the Skyhooks after it, and its
//! completion per node, which the runtime-required taint waits for.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use skyhook_api::budget::{
    CompartmentSpec, NodeActivity, fleet_wait_message, next_node_order_offset, node_orders,
    skyhook_compartments, slot_hold, uncordon_on_failure,
};
use skyhook_api::deletion::erroring_block;
use skyhook_api::health::{GateState, gate_hold_message, parse_settle, wait_until};
use skyhook_api::interrupt::{changed_keys, has_interrupt};
use skyhook_api::keys::{self, Keys, operator_version_to_write};
use skyhook_api::node_mirror::{NodeRecordKeys, pick_time_text};
use skyhook_api::ordering::{SkyhookProgress, node_ready};
use skyhook_api::stage::node_complete;
use skyhook_api::status::{NodeStatusInput, node_erroring, node_status};
use skyhook_api::toleration::node_selection_tolerations;
use skyhook_api::v1alpha1::{DeploymentPolicySpec, PolicyBudget, Skyhook, SkyhookStatus, Status};
use skyhook_api::window::{WindowState, window_budget_message, window_wait_message, windows_now};

use super::configs::config_updates;
use super::context::Context;
use super::deletion::{deletion_blocked_event, deletion_input};
use super::event_kinds::{self, EventKind};
use super::node_states::report_node_states;
use super::output::{EventTarget, NonInterruptHold, StageDuration};
use super::packages::run_node;
use super::pass::Pass;
use super::pod_results::PodResults;
use super::pre_pulls::{keep_failed_pulls, pre_pull_condition};
use super::readiness_gates::{GateHolds, hold_gated_nodes, record_gate};
use super::reboots::lost_interrupts;
use super::selection::{NodeFacts, Selection, SelectionInput, select};
use super::spec_changes::{
    apply_version_changes, track_reboots, uninstall_requests, validate_pods,
};
use super::status::{NextStatus, Outcome, next_status};
use super::taints::Completion;
use super::workset::Workset;
use crate::reconcile::snapshot::NodeView;

/// What a pass's batch selection is bound by: its compartments, and its policy (name and spec)
/// with the maintenance windows and the health gate, when it has one.
struct Batch<'a> {
    compartments: &'a [CompartmentSpec],
    policy: Option<(&'a str, &'a DeploymentPolicySpec)>,
}

/// Per targeted node: every package complete, and whether its turn has come.
struct NodeProgress<'s> {
    complete: BTreeMap<&'s str, bool>,
    ready: BTreeMap<&'s str, bool>,
}

impl NodeProgress<'_> {
    fn complete(&self, node: &str) -> bool {
        self.complete.get(node).copied().unwrap_or(false)
    }

    fn ready(&self, node: &str) -> bool {
        self.ready.get(node).copied().unwrap_or(false)
    }
}

/// `old` reduced to the nodes the Skyhook targets now, each node's boot ID and pick read from
/// the node (falling back on `old` for a node not yet migrated, see [`skyhook_api::node_mirror`],
/// then on the previous plan's picks that reached neither, `lost`), and a skipped node's status
/// read from its annotation when the mirror no longer holds it.
fn targeted_status(
    (keys, name): (&Keys, &str),
    old: Option<&SkyhookStatus>,
    lost: Option<&BTreeMap<String, Time>>,
    targeted: &[&NodeView],
) -> SkyhookStatus {
    let mut status = old.cloned().unwrap_or_default();
    let names: BTreeSet<&str> = targeted.iter().map(|n| n.name.as_str()).collect();
    let keep = |node: &String| names.contains(node.as_str());
    status.node_state.retain(|n, _| keep(n));
    status.node_status.retain(|n, _| keep(n));
    let records = NodeRecordKeys::of(keys, name);
    status.node_boot_ids = targeted
        .iter()
        .filter_map(|n| {
            let boot_id = records.boot_id(&n.annotations, old, &n.name)?;
            Some((n.name.clone(), boot_id.to_owned()))
        })
        .collect();
    status.node_priority = targeted
        .iter()
        .filter_map(|n| {
            let picked = records
                .picked_at(&n.annotations, old, &n.name)
                .or_else(|| lost?.get(&n.name).cloned())?;
            Some((n.name.clone(), picked))
        })
        .collect();
    let status_key = keys.node_status_key(name);
    for node in targeted {
        let annotated = node
            .annotations
            .get(&status_key)
            .and_then(|s| s.parse().ok());
        if let Some(annotated) = annotated.filter(|_| !status.node_status.contains_key(&node.name))
        {
            status.node_status.insert(node.name.clone(), annotated);
        }
    }
    status
}

/// What one Skyhook's pass leaves for the steps after it.
pub(super) struct PassOutcome<'s> {
    /// Its progress, which gates the Skyhooks after it.
    pub(super) progress: SkyhookProgress<'s>,
    /// Per node it works on, whether it is complete there, for the runtime-required taint.
    pub(super) completion: Completion,
}

/// One admitted Skyhook's pass, after the passes of the Skyhooks before it (`earlier`).
pub(super) fn run_pass<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'s>,
    pod_results: &PodResults,
    earlier: &[SkyhookProgress<'s>],
) -> PassOutcome<'s> {
    let skyhook = pass.skyhook;
    let name = pass.owner.name;
    let lost = context.snapshot.lost_picks.get(name);
    let old = skyhook.status.as_ref();
    let mut status = targeted_status((pass.keys(), name), old, lost, &pass.targeted());
    let picked_before = picked_before(context, name, skyhook.status.as_ref());
    let mut outcome = Outcome {
        unconfirmed_reboots: pod_results.unconfirmed_reboots_of(name),
        ..Outcome::default()
    };
    spec_changes(context, workset, pass, &mut status, &mut outcome);
    let mut complete = completion_of(workset, pass, &status);
    let gate_holds = hold_gated_nodes(context, workset, pass, &mut complete);
    outcome.readiness_gate_held = gate_holds.condition(context.now);
    let progress = SkyhookProgress {
        name,
        priority: skyhook.spec.priority,
        disabled: skyhook.is_disabled(),
        sequencing: skyhook.spec.sequencing,
        nodes: complete.clone(),
    };
    let ready = pass
        .matched
        .iter()
        .map(|n| (n.name.as_str(), node_ready(earlier, &progress, &n.name)))
        .collect();
    let nodes = NodeProgress { complete, ready };
    let policy_name = skyhook.spec.policy_name();
    // A workload's policy is of its own group.
    let policy = policy_name
        .and_then(|p| (context.snapshot.policies).get(&(pass.owner.group, p.to_owned())));
    outcome.policy_missing = policy_name.is_some() && policy.is_none();
    set_node_statuses(workset, pass, &nodes, &gate_holds, outcome.policy_missing);
    let compartments = skyhook_compartments(&skyhook.spec, policy, pass.matched.len());
    if let Some(compartments) =
        compartments.filter(|_| !skyhook.is_disabled() && !skyhook.is_paused())
    {
        let batch = Batch {
            compartments: &compartments,
            policy: policy.map(|p| (policy_name.unwrap_or_default(), p)),
        };
        run_batch(
            context,
            workset,
            pass,
            &batch,
            &nodes,
            &mut status,
            &mut outcome,
        );
        keep_failed_pulls(context, workset, pass);
    }
    record_nodes(context, workset, pass, (&nodes, &gate_holds), &mut status);
    record_bookkeeping(workset, pass, &status);
    let offset = next_node_order_offset(
        &picked_before,
        &status.node_priority,
        status.node_order_offset.into(),
    );
    status.node_order_offset = i32::try_from(offset).unwrap_or(i32::MAX);
    report_node_states(workset, pass, &nodes.complete, &mut status, &mut outcome);
    if pass.rules.deleting {
        let input = deletion_input(workset, skyhook, (pass.keys(), name));
        if let Some((reason, message)) = erroring_block(&input) {
            deletion_blocked_event(workset, skyhook, name, reason, &message);
            outcome.deletion_blocked = Some((reason, message));
        }
    }
    let next = next_status(skyhook, pass.keys(), policy, status, outcome, context.now);
    write_status(workset, skyhook, pass, next);
    let completion = (pass.matched.iter())
        .map(|node| {
            let done = nodes.complete(&node.name);
            ((name.to_owned(), node.name.clone()), done)
        })
        .collect();
    PassOutcome {
        progress,
        completion,
    }
}

/// Every node the Skyhook had picked before this pass, targeted or not: the nodes that leave
/// the picks advance the rollout order's offset.
fn picked_before<'s>(
    context: &Context<'s>,
    name: &str,
    old: Option<&SkyhookStatus>,
) -> BTreeMap<String, Time> {
    let keys = context.keys_of(name);
    let records = NodeRecordKeys::of(keys, name);
    let mut picked = old.map(|s| s.node_priority.clone()).unwrap_or_default();
    for node in &context.snapshot.nodes {
        if let Some(at) = records.picked_at(&node.annotations, None, &node.name) {
            picked.insert(node.name.clone(), at);
        }
    }
    picked
}

/// Writes each node's boot ID and pick onto the node, where they are the truth (the status
/// maps only mirror them, and only while small); a node that left the maps (no longer
/// targeted, or complete) loses them. A reset and the new boot ID that caused it land in
/// the same node patch, so the reset is never lost behind a recorded boot ID (spec §2.11).
/// A skipped node (unreadable state) keeps its annotations as they are.
fn record_bookkeeping<'s>(workset: &mut Workset<'s>, pass: &Pass<'s>, status: &SkyhookStatus) {
    let keys = pass.keys();
    let records = NodeRecordKeys::of(keys, pass.name());
    let skipped: BTreeSet<&str> = pass.malformed.iter().map(|n| n.name.as_str()).collect();
    for (node, work) in &mut workset.nodes {
        if skipped.contains(node) {
            continue;
        }
        let boot_id = status.node_boot_ids.get(*node).map(String::as_str);
        let picked = status.node_priority.get(*node).map(pick_time_text);
        work.set_or_remove_annotation(records.boot_id_key(), boot_id);
        work.set_or_remove_annotation(records.picked_key(), picked.as_deref());
    }
}

/// Records the Skyhook's next status when it differs, with its transition Event and the
/// node lists too long for its conditions.
fn write_status(workset: &mut Workset<'_>, skyhook: &Skyhook, pass: &Pass<'_>, next: NextStatus) {
    let name = pass.name();
    if let Some(transition) = &next.transition {
        let message = format!("{} transitioned {transition}", pass.keys().kind);
        workset.emit(
            EventTarget::Skyhook(name.to_owned()),
            event_kinds::TRANSITION,
            message,
        );
    }
    let long = next.long_lists.into_iter().map(|l| (name.to_owned(), l));
    workset.plan.long_node_lists.extend(long);
    if skyhook.status.clone().unwrap_or_default() != next.status {
        workset.plan.statuses.insert(name.to_owned(), next.status);
    }
}

/// What changed since the last pass, as node-state edits: reboots, uninstall requests,
/// lost interrupts, version changes, config updates and pods that no longer match.
fn spec_changes<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'s>,
    status: &mut SkyhookStatus,
    outcome: &mut Outcome,
) {
    let skyhook = pass.skyhook;
    track_reboots(context, workset, pass, status);
    // A removed package's queued config keys mean nothing any more.
    let packages = &skyhook.spec.packages;
    status
        .config_updates
        .retain(|p, _| packages.contains_key(p));
    // A paused Skyhook changes nothing on its nodes (upstream skips it right after
    // reporting its state), so a spec edit made while paused, and a lost interrupt pod,
    // are looked at again on resume.
    if skyhook.is_paused() {
        return;
    }
    if !skyhook.is_disabled() {
        uninstall_requests(workset, pass);
    }
    outcome
        .unconfirmed_reboots
        .extend(lost_interrupts(context, workset, pass));
    outcome.version_changed = apply_version_changes(context, workset, pass, status);
    outcome.config_waiting = config_updates(context, workset, pass, status);
    validate_pods(context, workset, pass);
}

/// Per targeted node, whether every package is complete after this pass's edits so far.
fn completion_of<'s>(
    workset: &mut Workset<'s>,
    pass: &Pass<'s>,
    status: &SkyhookStatus,
) -> BTreeMap<&'s str, bool> {
    let packages = &pass.skyhook.spec.packages;
    let updates = &status.config_updates;
    let has_int = |pkg: &str| {
        packages
            .get(pkg)
            .is_some_and(|p| has_interrupt(p, changed_keys(updates, pkg)))
    };
    let mut complete = BTreeMap::new();
    for node in &pass.matched {
        if let Some(work) = workset.nodes.get_mut(node.name.as_str()) {
            let done = node_complete(work.state(pass.name()), packages, pass.rules, has_int);
            complete.insert(node.name.as_str(), done);
        }
    }
    // A skipped node is incomplete, so it still holds back the Skyhooks after this one.
    for node in &pass.malformed {
        complete.insert(node.name.as_str(), false);
    }
    complete
}

fn set_node_statuses<'s>(
    workset: &mut Workset<'s>,
    pass: &Pass<'s>,
    nodes: &NodeProgress<'s>,
    gate_holds: &GateHolds<'s>,
    policy_missing: bool,
) {
    let skyhook = pass.skyhook;
    for node in &pass.matched {
        let Some(work) = workset.nodes.get_mut(node.name.as_str()) else {
            continue;
        };
        let gate_timed_out = gate_holds.timed_out(&node.name);
        let failing = node_erroring(work.state(pass.name())) || gate_timed_out;
        let next = node_status(NodeStatusInput {
            current: work.status(pass.name()),
            complete: nodes.complete(&node.name),
            failing,
            ready: nodes.ready(&node.name),
            disabled: skyhook.is_disabled(),
            paused: skyhook.is_paused(),
            has_compartments: !policy_missing,
        });
        // No pod failed, so nothing else marks a node its gates timed out on.
        let next = if gate_timed_out && next == Status::InProgress {
            Status::Erroring
        } else {
            next
        };
        work.set_status(pass.name(), next);
    }
}

/// Whether new batches may start under the pass's policy windows, and the budgets of the
/// windows open now; a closed window wakes the plan again when it opens.
fn window_open<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    window: Option<(&str, &DeploymentPolicySpec)>,
) -> (WindowState, Vec<Option<PolicyBudget>>) {
    let Some((_, policy)) = window else {
        return (WindowState::Open { closes_at: None }, Vec::new());
    };
    let (state, budgets) = windows_now(&policy.maintenance_windows, context.now);
    if let WindowState::Closed {
        opens_at: Some(opens_at),
    } = state
        && let Ok(wait) = std::time::Duration::try_from(opens_at.duration_since(context.now))
    {
        workset.requeue(wait);
    }
    (state, budgets)
}

/// Reports the compartments the health gate holds, and wakes the plan when the first of
/// them settles (a NotReady or cordoned node wakes it by changing).
fn report_gate_held<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    policy: Option<(&str, &DeploymentPolicySpec)>,
    held: &[(String, GateState)],
    outcome: &mut Outcome,
) {
    let Some((policy, _)) = policy.filter(|_| !held.is_empty()) else {
        return;
    };
    if let Some(wait) = held
        .iter()
        .filter_map(|(_, gate)| gate.opens_at())
        .min()
        .and_then(|at| wait_until(at, context.now))
    {
        workset.requeue(wait);
    }
    outcome.health_gate_held = Some(gate_hold_message(policy, held));
}

/// Sends `kind` on the Skyhook when the hold its condition `type_` reports begins (the
/// condition is not True yet): the condition says a hold lasts, the Event when it began.
fn announce_hold(
    workset: &mut Workset<'_>,
    pass: &Pass<'_>,
    type_: &str,
    kind: EventKind,
    message: &str,
) {
    let held_before = (pass.skyhook.status.iter())
        .flat_map(|status| &status.conditions)
        .any(|c| c.type_ == type_ && c.status == "True");
    if !held_before {
        let target = EventTarget::Skyhook(pass.name().to_owned());
        workset.emit(target, kind, message.to_owned());
    }
}

/// Selects the nodes to work on and runs their packages.
fn run_batch<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'s>,
    batch: &Batch<'_>,
    nodes: &NodeProgress<'s>,
    status: &mut SkyhookStatus,
    outcome: &mut Outcome,
) {
    let keys = pass.keys();
    let compartments = batch.compartments;
    let (window, window_budgets) = window_open(context, workset, batch.policy);
    let skyhook = pass.skyhook;
    let runtime_taint = context.config.pods.runtime_required_taint.clone();
    let tolerations = node_selection_tolerations(
        &skyhook.spec.additional_tolerations,
        skyhook.spec.runtime_required.then_some(&runtime_taint),
    );
    let settle = batch
        .policy
        .and_then(|(_, p)| p.health_gate.as_ref())
        .and_then(|gate| parse_settle(gate).ok());
    let facts: Vec<NodeFacts<'s>> = pass
        .matched
        .iter()
        .map(|node| {
            node_facts(
                context,
                workset,
                pass.name(),
                node,
                nodes,
                status,
                settle.is_some(),
            )
        })
        .collect();
    let selection = select(&SelectionInput {
        compartments,
        tolerations: &tolerations,
        nodes: &facts,
        status,
        may_start: matches!(window, WindowState::Open { .. }),
        window_budgets: &window_budgets,
        settle,
        now: context.now,
    });
    let Selection {
        picks,
        newly_picked,
        blocked,
        compartment_statuses,
        blocking,
        held,
        gate_held,
        window_held,
        topology_held,
        topology_unlabelled,
    } = selection;
    if let (Some((policy, _)), WindowState::Closed { opens_at }) = (batch.policy, window)
        && !held.is_empty()
    {
        outcome.window_closed = Some(window_wait_message(policy, &held, opens_at));
    }
    if let Some((policy, _)) = batch.policy.filter(|_| !window_held.is_empty()) {
        let message = window_budget_message(policy, &window_held);
        announce_hold(
            workset,
            pass,
            keys.condition_window_budget_held,
            event_kinds::WINDOW_BUDGET_HELD,
            &message,
        );
        outcome.window_budget_held = Some(message);
    }
    if !topology_held.is_empty() {
        let message = topology_held.join("; ");
        announce_hold(
            workset,
            pass,
            keys.condition_topology_budget_held,
            event_kinds::TOPOLOGY_BUDGET_HELD,
            &message,
        );
        let reason = if topology_unlabelled {
            keys::TOPOLOGY_LABEL_MISSING_REASON
        } else {
            keys::TOPOLOGY_DOMAINS_BUSY_REASON
        };
        outcome.topology_budget_held = Some((reason, message));
    }
    report_gate_held(context, workset, batch.policy, &gate_held, outcome);
    for node in &blocked {
        workset.set_status(pass.name(), node, Status::Blocked);
    }
    for node in newly_picked {
        status.node_priority.insert(node, Time(context.now));
    }
    status.compartment_statuses = compartment_statuses;
    outcome.blocking = blocking;
    let mut fleet_waiting = Vec::new();
    let mut pre_pull_held = Vec::new();
    let mut held_by_pods = Vec::new();
    let orders = node_orders(&status.node_priority, status.node_order_offset.into());
    for node in &picks {
        let order = orders.get(node.as_str()).copied().unwrap_or(0);
        let run = run_node(
            context,
            workset,
            pass,
            (node, order),
            &status.config_updates,
        );
        outcome.applied = run.applied.or(outcome.applied.take());
        if let Some(message) = run.drain_blocked
            && !outcome.drain_blocked.contains(&message)
        {
            outcome.drain_blocked.push(message);
        }
        if run.fleet_waiting {
            fleet_waiting.push(node.clone());
        }
        if let Some(hold) = run.pre_pull {
            pre_pull_held.push((node.clone(), hold));
        }
        if !run.drain_blockers.is_empty() {
            outcome
                .drain_blockers
                .insert(node.clone(), run.drain_blockers);
        }
        if run.non_interrupt_hold {
            outcome.non_interrupt_holds.push(node.clone());
        }
        if let Some((package, pods)) = run.non_interrupt_pods {
            held_by_pods.push((node.as_str(), package, pods));
        }
    }
    outcome.pre_pull_held = pre_pull_condition(&pre_pull_held);
    announce_non_interrupt_hold(workset, pass, &outcome.non_interrupt_holds);
    announce_node_holds(context, workset, pass, held_by_pods);
    // A node skipped for its unreadable node state keeps its last blockers (upstream v0.20).
    let blocked_key = keys.drain_blocked_annotation(pass.name());
    for node in &pass.malformed {
        let last = node.annotations.get(&blocked_key);
        if let Some(pods) = last.and_then(|json| serde_json::from_str(json).ok()) {
            outcome.drain_blockers.insert(node.name.clone(), pods);
        }
    }
    if let Some(budget) = context.config.fleet_budget
        && !fleet_waiting.is_empty()
    {
        let ceiling = budget.ceiling(workset.nodes.len());
        let held = workset.fleet_held();
        outcome.fleet_wait = Some(fleet_wait_message(budget, ceiling, held, &fleet_waiting));
    }
}

/// Upstream v0.20: a Warning Event `Drain` on the Skyhook when pods matching
/// `podNonInterruptLabels` start holding nodes, that is when its `Blocked` condition is not
/// already `NonInterruptPodsRunning`; not on every pass while they keep holding.
fn announce_non_interrupt_hold<'s>(workset: &mut Workset<'s>, pass: &Pass<'s>, holds: &[String]) {
    if holds.is_empty() {
        return;
    }
    if !announced_hold(pass.skyhook) {
        let nodes: Vec<&str> = holds.iter().map(String::as_str).collect();
        workset.emit(
            EventTarget::Skyhook(pass.name().to_owned()),
            event_kinds::NON_INTERRUPT_PODS_RUNNING,
            skyhook_api::drain::non_interrupt_message(&nodes),
        );
    }
}

/// Whether the Skyhook's `Blocked` condition already says that protected pods hold nodes.
fn announced_hold(skyhook: &Skyhook) -> bool {
    skyhook.status.as_ref().is_some_and(|status| {
        status.conditions.iter().any(|c| {
            c.type_ == keys::CONDITION_BLOCKED
                && c.reason == keys::NON_INTERRUPT_PODS_RUNNING_REASON
        })
    })
}

/// Upstream v0.20: a Warning Event on each node that protected pods start holding, naming the
/// package and the pods (with the Skyhook's Event's reason and action), and the holds for the
/// next plan. A node is new when the previous plan did not hold it; before this process's first
/// plan, when the Skyhook's condition does not already report holds (a restart or a new leader
/// does not announce again what its predecessor did).
fn announce_node_holds<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'s>,
    held: Vec<(&str, String, Vec<String>)>,
) {
    let name = pass.name();
    for (node, package, pods) in held {
        let key = (name.to_owned(), node.to_owned());
        let held_before = match &context.snapshot.non_interrupt_held {
            Some(previous) => previous.contains(&key),
            None => announced_hold(pass.skyhook),
        };
        if !held_before {
            workset.emit(
                EventTarget::Node(node.to_owned()),
                event_kinds::NON_INTERRUPT_PODS_RUNNING,
                skyhook_api::drain::non_interrupt_node_message(node, &package, &pods),
            );
        }
        let hold = NonInterruptHold {
            package,
            pods,
            announced: !held_before,
        };
        workset.plan.non_interrupt_holds.insert(key, hold);
    }
}

/// The node as selection sees it for the Skyhook of `skyhook`, with the budget slot it
/// holds; with its last transition only when `gated` (a health gate reads it).
fn node_facts<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    skyhook: &str,
    node: &'s NodeView,
    nodes: &NodeProgress<'s>,
    status: &SkyhookStatus,
    gated: bool,
) -> NodeFacts<'s> {
    let keys = context.keys_of(skyhook);
    let pod_on_node = workset.skyhook_pod_on(context, skyhook, &node.name);
    let picked = status.node_priority.contains_key(&node.name);
    let mut facts = NodeFacts {
        node,
        taints: Vec::new(),
        status: Status::Unknown,
        hold: None,
        complete: nodes.complete(&node.name),
        ready: nodes.ready(&node.name),
        worked_on: picked,
        unschedulable: node.unschedulable,
        last_transition: None,
    };
    let Some(work) = workset.nodes.get_mut(node.name.as_str()) else {
        return facts;
    };
    facts.status = work.status(skyhook);
    facts.taints = work.taints.clone();
    let unschedulable = work.unschedulable();
    let state = work.state(skyhook).clone();
    facts.unschedulable = unschedulable;
    facts.worked_on |= !state.is_empty();
    if gated && facts.complete {
        facts.last_transition = work.last_transition(skyhook, context.now);
    }
    facts.hold = slot_hold(NodeActivity {
        keys,
        skyhook,
        annotations: work.annotations(),
        unschedulable,
        state: &state,
        status: facts.status,
        pod_on_node,
    });
    facts
}

/// Per targeted node: the cordon released once complete, the node conditions, the status
/// mirrors and the controller version; the `State` Event of a node that just completed. Nodes
/// no longer targeted lose the cordon.
fn record_nodes<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'s>,
    (nodes, gate_holds): (&NodeProgress<'s>, &GateHolds<'s>),
    status: &mut SkyhookStatus,
) {
    let keys = pass.keys();
    let name = pass.name();
    let uncordon = pass.skyhook.spec.uncordon_on_failure();
    for node in &pass.matched {
        let done = nodes.complete(&node.name);
        let draining = workset
            .draining
            .contains(&(name.to_owned(), node.name.clone()));
        if let Some(work) = workset.nodes.get_mut(node.name.as_str())
            && uncordon_on_failure(uncordon, work.state(name), draining)
        {
            work.release_cordon(name);
        }
        if done {
            status.node_priority.remove(&node.name);
        }
        record_gate(workset, pass, &node.name, done, context.now);
        let gate_timed_out = gate_holds.timed_out(&node.name);
        let Some(node_status) =
            record_node(context, workset, name, node, (done, gate_timed_out), status)
        else {
            continue;
        };
        let was = node.annotations.get(&keys.node_status_key(name));
        if node_status == Status::Complete && was != Some("complete") {
            let message = format!("{} [{name}] complete.", keys.kind);
            workset.emit(
                EventTarget::Node(node.name.clone()),
                event_kinds::MARK_COMPLETE,
                message,
            );
        }
        status.node_status.insert(node.name.clone(), node_status);
    }
    let targeted: BTreeSet<&str> = pass.targeted().iter().map(|n| n.name.as_str()).collect();
    for (node, work) in &mut workset.nodes {
        if !targeted.contains(node) {
            work.release_cordon(name);
        }
    }
}

/// One node of [`record_nodes`]; returns its status, `None` when it is unknown.
fn record_node<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    name: &str,
    node: &NodeView,
    (done, gate_timed_out): (bool, bool),
    status: &mut SkyhookStatus,
) -> Option<Status> {
    let keys = context.keys_of(name);
    let work = workset.nodes.get_mut(node.name.as_str())?;
    if done {
        work.release_cordon(name);
    }
    let (not_ready, reason) = if done {
        ("False", keys::NODE_NOT_READY_REASON_COMPLETE)
    } else {
        ("True", keys::NODE_NOT_READY_REASON_INCOMPLETE)
    };
    work.set_condition(
        keys.node_not_ready_condition(name),
        not_ready,
        reason,
        keys.node_not_ready_message(name, done),
    );
    let erroring = node_erroring(work.state(name)) || gate_timed_out;
    let reason = if erroring {
        keys::NODE_ERRORING_REASON
    } else {
        keys::NODE_NOT_ERRORING_REASON
    };
    work.set_condition(
        keys.node_erroring_condition(name),
        if erroring { "True" } else { "False" },
        reason,
        keys.node_erroring_message(name, erroring),
    );
    let finished = work.stamp_transitions(name, context.now);
    if work.state(name).is_empty() {
        status.node_state.remove(&node.name);
    } else {
        let mirror = work.state(name).clone();
        status.node_state.insert(node.name.clone(), mirror);
    }
    workset
        .plan
        .stage_durations
        .extend(finished.into_iter().map(|finished| StageDuration {
            node: node.name.clone(),
            skyhook: name.to_owned(),
            finished,
        }));
    let version_key = keys.node_version_annotation(name);
    if let Some(ours) = operator_version_to_write(node.annotations.get(&version_key)) {
        work.set_annotation(version_key, ours.to_owned());
    }
    Some(work.status(name))
}
