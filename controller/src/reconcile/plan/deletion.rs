//! A Skyhook being deleted (upstream §2.8): its finalizer holds the object while the packages
//! with `uninstall.enabled` are uninstalled from its nodes, reports why it waits
//! (`DeletionBlocked`), then removes every trace of the Skyhook from the nodes and lets go.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use skyhook_api::conditions::set_condition;
use skyhook_api::deletion::{DeletionInput, DeletionStep, deletion_step};
use skyhook_api::keys::{self, Keys};
use skyhook_api::migration::prune_node;
use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::{Skyhook, State};

use super::context::Context;
use super::event_kinds;
use super::node_states::uninstall_conditions_of;
use super::output::EventTarget;
use super::status::{end_non_interrupt_hold, set_uninstall_conditions};
use super::taints::matched_nodes;
use super::workset::Workset;

/// The deletion of `skyhook`: true when its pass goes on to run the uninstalls.
pub(super) fn deletion<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    skyhook: &Skyhook,
    name: &str,
) -> bool {
    let input = deletion_input(workset, skyhook, (context.keys_of(name), name));
    match deletion_step(&input) {
        DeletionStep::Uninstall => true,
        DeletionStep::CleanUp => {
            let mut forgotten = false;
            // The other group's keys of the name, which a migration kept, go too: with no
            // object of the name left they would read as an orphan's, holding cordons. A twin
            // still there keeps them: it becomes live again and resumes from them.
            let shadows = context.snapshot.owners.group_of(name).other();
            let twin_left = (context.snapshot.twins.iter()).any(|twin| twin.name() == name);
            for work in workset.nodes.values_mut() {
                forgotten |= work.forget_skyhook(name);
                let edit = prune_node(shadows, name, work.annotations(), work.labels());
                if let Some(edit) = edit.filter(|_| !twin_left) {
                    work.apply_edit(&edit);
                    forgotten = true;
                }
            }
            // The finalizer goes once the nodes read clean, not with the patches that clean
            // them: a refused patch (409) would leave the Skyhook's keys on a node for good.
            if !forgotten {
                workset.plan.finalizers.insert(name.to_owned(), false);
            }
            // Nothing is drained for it any more (the status is written before the
            // finalizer goes, so this lands even in the plan that lets the Skyhook go).
            let old = skyhook.status.clone().unwrap_or_default();
            let mut status = old.clone();
            end_non_interrupt_hold(&mut status.conditions);
            if status != old {
                workset.plan.statuses.insert(name.to_owned(), status);
            }
            false
        }
        DeletionStep::Blocked { reason, message } => {
            deletion_blocked(context, workset, skyhook, name, reason, message);
            if reason == keys::DELETION_BLOCKED_MALFORMED_REASON {
                workset.requeue(MALFORMED_RETRY);
            }
            false
        }
    }
}

pub(super) fn deletion_input<'s>(
    workset: &mut Workset<'s>,
    skyhook: &Skyhook,
    (keys, name): (&Keys, &str),
) -> DeletionInput {
    let packages = &skyhook.spec.packages;
    let key = keys.node_state_annotation(name);
    let mut input = DeletionInput {
        any_enabled: packages.values().any(|p| p.uninstall_enabled()),
        paused: skyhook.is_paused(),
        disabled: skyhook.is_disabled(),
        ..DeletionInput::default()
    };
    for (node, work) in &workset.nodes {
        let Some(text) = work.annotations().get(&key) else {
            continue;
        };
        let Ok(state) = NodeState::parse(text) else {
            input.malformed.push((*node).to_owned());
            continue;
        };
        let mut pending = false;
        for package in packages.values().filter(|p| p.uninstall_enabled()) {
            let Some(entry) = state.get_version(&package.name, &package.version) else {
                continue;
            };
            pending = true;
            if entry.state == State::Erroring {
                let at = format!("{node} ({}, {})", package.name, entry.stage);
                input.erroring.push(at);
            }
        }
        if pending {
            input.pending.push((*node).to_owned());
        }
    }
    input
}

/// The Warning Event of a deletion newly blocked for `reason` (none when its
/// `DeletionBlocked` condition already says so).
pub(super) fn deletion_blocked_event<'s>(
    workset: &mut Workset<'s>,
    skyhook: &Skyhook,
    name: &str,
    reason: &'static str,
    message: &str,
) {
    let previous_reason = (skyhook.status.iter())
        .flat_map(|status| &status.conditions)
        .find(|c| c.type_ == keys::CONDITION_DELETION_BLOCKED)
        .map(|c| c.reason.as_str());
    if previous_reason != Some(reason) {
        let target = EventTarget::Skyhook(name.to_owned());
        workset.emit(target, event_kinds::DELETION_BLOCKED, message.to_owned());
    }
}

/// Sets `DeletionBlocked` (and refreshes the uninstall conditions) and, when it is new or
/// its reason changed, says so in a Warning Event.
fn deletion_blocked<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    skyhook: &Skyhook,
    name: &str,
    reason: &'static str,
    message: String,
) {
    deletion_blocked_event(workset, skyhook, name, reason, &message);
    let old = skyhook.status.clone().unwrap_or_default();
    let mut status = old.clone();
    // Upstream refreshes these on every reconcile, a blocked deletion included.
    let matched = matched_nodes(skyhook, &context.snapshot.nodes);
    let (parsed, malformed) = workset.split_malformed(name, matched);
    let config_updates = &old.config_updates;
    let uninstall =
        uninstall_conditions_of(workset, skyhook, (&parsed, &malformed), config_updates);
    let keys = context.keys_of(name);
    set_uninstall_conditions(
        skyhook,
        keys,
        &mut status.conditions,
        &uninstall,
        context.now,
    );
    // A blocked deletion runs no pass, so no node waits for protected pods.
    end_non_interrupt_hold(&mut status.conditions);
    let blocked = Condition {
        type_: keys::CONDITION_DELETION_BLOCKED.to_owned(),
        status: "True".to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: skyhook.metadata.generation,
        last_transition_time: Time(context.now),
    };
    set_condition(&mut status.conditions, blocked);
    if status == old {
        return;
    }
    workset.plan.statuses.insert(name.to_owned(), status);
}

/// How soon a deletion blocked by an unreadable node state looks again (upstream returns an
/// error, which backs off).
const MALFORMED_RETRY: std::time::Duration = std::time::Duration::from_secs(30);
