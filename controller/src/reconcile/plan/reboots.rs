//! Interrupts whose node did not come back: an interrupt pod that failed with
//! `RebootNotConfirmed`, or one that disappeared (evicted by kube-controller-manager, deleted
//! by hand) while its node is NotReady. Both are reported, with a Warning Event naming the node,
//! the package and how long ago the reboot was asked for, and the Skyhook condition
//! [`keys::Keys::condition_reboot_not_confirmed`]; the node keeps its budget slot (it stays cordoned
//! and its interrupt entry unconfirmed, see `skyhook_api::budget::slot_hold`). When the node is
//! back, a lost interrupt pod is created again (the agent's flags keep a done interrupt from
//! running twice).

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use skyhook_api::interrupt::{changed_keys, effective_interrupts};
use skyhook_api::v1alpha1::{InterruptType, PackageStatus, State, Status};

use super::context::Context;
use super::event_kinds;
use super::output::EventTarget;
use super::pass::Pass;
use super::workset::Workset;
use crate::pod_outcome::{deadline_after, humantime};
use crate::reconcile::snapshot::NodeView;

/// One node that was asked to reboot and has not come back in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct UnconfirmedReboot {
    /// `<package>:<version>` whose interrupt asked for the reboot.
    pub(super) package: String,
    /// When the reboot was asked for.
    pub(super) requested: Option<Timestamp>,
}

/// The unconfirmed reboots of one Skyhook, by node.
pub(super) type UnconfirmedReboots = BTreeMap<String, UnconfirmedReboot>;

/// The condition message listing every unconfirmed reboot, stable between reconciles (no
/// elapsed times, which would rewrite the status on every pass).
pub(super) fn condition_message(reboots: &UnconfirmedReboots) -> String {
    let nodes: Vec<String> = reboots
        .iter()
        .map(|(node, reboot)| match reboot.requested {
            Some(at) => format!(
                "{node} (package {}, reboot requested at {at})",
                reboot.package
            ),
            None => format!("{node} (package {})", reboot.package),
        })
        .collect();
    format!(
        "nodes asked to reboot that have not come back with a new boot ID within the reboot deadline: {}; they keep their budget slots until they are back or reset",
        nodes.join("; ")
    )
}

/// `31m20s`: the whole seconds between `since` and `now`.
fn elapsed(since: Timestamp, now: Timestamp) -> String {
    let seconds = Duration::try_from(now.duration_since(since)).map_or(0, |d| d.as_secs());
    humantime(Duration::from_secs(seconds))
}

/// How long a reboot of `skyhook`'s may take: its `spec.rebootDeadline`, else the
/// controller's.
fn reboot_deadline_of(context: &Context<'_>, skyhook: &str) -> Duration {
    let fallback = context.config.reboot_deadline;
    (context.skyhook(skyhook)).map_or(fallback, |s| s.spec.reboot_deadline(fallback))
}

/// The Warning Event of an unconfirmed reboot.
pub(super) fn reboot_not_confirmed_event<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    skyhook: &str,
    node: &str,
    package: &str,
    requested: Option<Timestamp>,
) {
    let ago = requested.map_or_else(String::new, |at| {
        format!(" {} ago", elapsed(at, context.now))
    });
    workset.emit(
        EventTarget::Node(node.to_owned()),
        event_kinds::REBOOT_NOT_CONFIRMED,
        format!(
            "Node [{node}] was asked to reboot{ago} by package [{package}] of Skyhook [{skyhook}] and has not come back with a new boot ID within the reboot deadline ({}); it stays cordoned and keeps its budget slot",
            humantime(reboot_deadline_of(context, skyhook))
        ),
    );
}

/// Interrupt pods of the pass's Skyhook that are gone while their node is NotReady: the
/// interrupt entry turns `erroring` (reported once), and a reboot not back within the
/// deadline, counted from when the node went NotReady, is returned as not confirmed.
pub(super) fn lost_interrupts<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
) -> UnconfirmedReboots {
    let name = pass.name();
    let mut unconfirmed = BTreeMap::new();
    for node in &pass.matched {
        if node.ready || workset.skyhook_pod_on(context, name, &node.name) {
            continue;
        }
        let Some(work) = workset.nodes.get_mut(node.name.as_str()) else {
            continue;
        };
        let lost: Vec<PackageStatus> = work
            .state(name)
            .iter()
            .filter(|(_, e)| {
                e.stage.interrupts_node() && matches!(e.state, State::InProgress | State::Erroring)
            })
            .map(|(_, e)| e.clone())
            .collect();
        for entry in lost {
            if entry.state == State::InProgress {
                report_lost_interrupt(workset, name, &node.name, entry.clone());
            }
            if let Some(reboot) = overdue_reboot(context, workset, pass, node, &entry) {
                unconfirmed.insert(node.name.clone(), reboot);
            }
        }
    }
    unconfirmed
}

/// Marks a lost interrupt `erroring`, with a Warning Event.
fn report_lost_interrupt<'s>(
    workset: &mut Workset<'s>,
    skyhook: &str,
    node: &str,
    mut entry: PackageStatus,
) {
    let package = format!("{}:{}", entry.name, entry.version);
    entry.state = State::Erroring;
    workset.set_entry(skyhook, node, entry);
    workset.set_status(skyhook, node, Status::Erroring);
    workset.emit(
        EventTarget::Node(node.to_owned()),
        event_kinds::INTERRUPT_LOST,
        format!(
            "The interrupt pod of package [{package}] of Skyhook [{skyhook}] on node [{node}] is gone while the node is NotReady (evicted or deleted); it is created again when the node is back"
        ),
    );
}

/// The lost interrupt `entry` as an unconfirmed reboot when it asked for a reboot and the
/// node has been NotReady past the deadline (with a Warning Event the first time); until
/// then, looks again when the deadline passes.
fn overdue_reboot<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    node: &NodeView,
    entry: &PackageStatus,
) -> Option<UnconfirmedReboot> {
    let keys = pass.keys();
    let skyhook = pass.skyhook;
    let updates = skyhook.status.as_ref().map(|s| &s.config_updates);
    let reboot = skyhook.spec.packages.get(&entry.name).is_some_and(|p| {
        let changed = updates.map_or(&[][..], |u| changed_keys(u, &entry.name));
        effective_interrupts(p, changed)
            .iter()
            .any(|i| i.type_ == InterruptType::Reboot)
    });
    let since = node.not_ready_since.filter(|_| reboot)?;
    let deadline = deadline_after(
        since,
        skyhook.spec.reboot_deadline(context.config.reboot_deadline),
    );
    if context.now < deadline {
        let wait = Duration::try_from(context.now.duration_until(deadline)).unwrap_or_default();
        workset.requeue(wait);
        return None;
    }
    let package = format!("{}:{}", entry.name, entry.version);
    let reported = skyhook.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == keys.condition_reboot_not_confirmed
                && c.status == "True"
                && c.message.contains(&format!("{} (", node.name))
        })
    });
    if !reported {
        reboot_not_confirmed_event(
            context,
            workset,
            pass.name(),
            &node.name,
            &package,
            Some(since),
        );
    }
    Some(UnconfirmedReboot {
        package,
        requested: Some(since),
    })
}
