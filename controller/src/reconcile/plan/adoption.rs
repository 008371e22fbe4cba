//! A name moving between the two API groups (design `nodewright.md` §3.2-§3.3, upstream's
//! migration): the live object adopts the node state its twin of the other group left, takes
//! over or removes what the twin left in the namespace, keeps the twin's node keys for
//! `LEGACY_CLEANUP_DELAY` (a rollback still finds them) and prunes them after; the twin says
//! that it is inert and, once deleted, only lets go of its finalizer.
//!
//! The first step of a plan: every later step reads the adopted keys in the same working
//! copies, so the plan that adopts a node already runs the live object's pass over it, and no
//! completed step runs again.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use skyhook_api::conditions::set_condition;
use skyhook_api::generation::{Group, InertReason, migrated_at_annotation};
use skyhook_api::keys;
use skyhook_api::migration::{
    AdoptionKind, Window, adopt_node, adoption_kind, migrated_at_value, moved_labels, prune_node,
    window,
};

use super::context::Context;
use super::event_kinds;
use super::output::{ConfigMapMove, EventTarget};
use super::workset::Workset;
use crate::names::OwnerSkyhook;
use crate::reconcile::snapshot::{LeftoverKind, Twin, Workload};

/// Adopts, keeps or prunes for every live object taking a name over, and writes each twin's
/// condition and finalizer.
pub(super) fn adoption<'s>(context: &Context<'s>, workset: &mut Workset<'s>) {
    let snapshot = context.snapshot;
    for twin in &snapshot.twins {
        twin_write(context, workset, twin);
    }
    for workload in &snapshot.skyhooks {
        let Some(name) = workload.metadata.name.as_deref() else {
            continue;
        };
        let twin = (snapshot.twins.iter()).find(|twin| {
            twin.name() == name && twin.reason == InertReason::OwnedByTwin(workload.group)
        });
        let stamped = (workload.metadata.annotations.as_ref())
            .is_some_and(|a| a.contains_key(&migrated_at_annotation(workload.group)));
        // Deleting it cleans its own keys and the twin's (`deletion`).
        if (twin.is_some() || stamped) && workload.metadata.deletion_timestamp.is_none() {
            adopt(context, workset, workload, name, twin);
        }
    }
}

/// The takeover of `name` by `workload`, from its twin of the other group (`twin`, `None` once
/// deleted: its leftovers are still kept, then pruned).
fn adopt<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    workload: &Workload,
    name: &str,
    twin: Option<&Twin>,
) {
    let (from, to) = (workload.group.other(), workload.group);
    let Ok(owner) = OwnerSkyhook::new(to, workload) else {
        return; // Admission reports it; nothing is adopted by an object that cannot own.
    };
    let kind = twin.map_or(AdoptionKind::Upstream, |twin| {
        let annotations = twin.object.metadata.annotations.clone().unwrap_or_default();
        adoption_kind(&annotations, from, to)
    });
    let mut adopted = 0;
    let mut prunable = Vec::new();
    for (node, work) in &mut workset.nodes {
        let (annotations, labels) = (work.annotations(), work.labels());
        if let Some(edit) = adopt_node(from, to, name, owner.uid, kind, annotations, labels) {
            work.adopt(name, &edit);
            adopted += 1;
        } else if let Some(edit) = prune_node(from, name, annotations, labels) {
            // Adopted by this very object already (or never its twin's to copy).
            prunable.push((*node, edit));
        }
    }
    let leftovers: Vec<_> = (context.snapshot.leftovers.iter())
        .filter(|leftover| leftover.group == from && leftover.owner == name)
        .collect();
    let legacy_left =
        twin.is_some() || adopted > 0 || !prunable.is_empty() || !leftovers.is_empty();
    let stamp_key = migrated_at_annotation(to);
    let stamp = (workload.metadata.annotations.as_ref()).and_then(|a| a.get(&stamp_key));
    let delay = jiff::SignedDuration::try_from(context.config.legacy_cleanup_delay)
        .unwrap_or(jiff::SignedDuration::MAX);
    let decision = window(stamp.map(String::as_str), delay, legacy_left, context.now);
    match decision {
        Window::Converge => {
            let value = migrated_at_value(context.now);
            (workset.plan.skyhook_annotations.entry(name.to_owned()))
                .or_default()
                .insert(stamp_key, Some(value));
            let message = format!(
                "took over the work of {} {name} ({}): adopted its node state on {adopted} node(s); its node keys stay for {} before they are pruned",
                from.kind(),
                from.name(),
                crate::pod_outcome::humantime(context.config.legacy_cleanup_delay),
            );
            let target = EventTarget::Skyhook(name.to_owned());
            workset.emit(target, event_kinds::ADOPTED, message);
        }
        Window::Keep { until } => {
            let wait = context.now.duration_until(until).unsigned_abs();
            workset.requeue(wait);
        }
        Window::Prune => {
            for (node, edit) in prunable {
                if let Some(work) = workset.nodes.get_mut(node) {
                    work.apply_edit(&edit);
                }
            }
        }
        Window::Done => {
            if stamp.is_some() {
                (workset.plan.skyhook_annotations.entry(name.to_owned()))
                    .or_default()
                    .insert(stamp_key, None);
            }
            return;
        }
    }
    for leftover in leftovers {
        match &leftover.kind {
            LeftoverKind::PackageConfigMap {
                labels,
                owner_references,
            } => {
                // Another controller's ConfigMap is not ours to move (upstream skips it too);
                // it stays a leftover, which keeps the window open.
                let foreign = (owner_references.iter()).any(|reference| {
                    reference.controller == Some(true)
                        && !Group::ALL
                            .iter()
                            .any(|group| reference.kind == group.kind())
                });
                if foreign {
                    continue;
                }
                let mut references: Vec<_> = (owner_references.iter())
                    .filter(|reference| !Group::ALL.iter().any(|g| reference.kind == g.kind()))
                    .cloned()
                    .collect();
                references.push(owner.owner_reference());
                let labels = moved_labels(labels, from, to).unwrap_or_default();
                let moved = ConfigMapMove {
                    labels,
                    owner_references: references,
                };
                workset
                    .plan
                    .move_configmaps
                    .insert(leftover.name.clone(), moved);
            }
            LeftoverKind::Job | LeftoverKind::Pod | LeftoverKind::MetadataConfigMap => {
                workset.plan.delete_leftovers.push(leftover.clone());
            }
        }
    }
}

/// The twin's `Migrated` condition, or its finalizer's removal once it is being deleted: an
/// inert object's deletion uninstalls nothing and leaves the nodes to its live twin.
fn twin_write<'s>(context: &Context<'s>, workset: &mut Workset<'s>, twin: &Twin) {
    let object = &twin.object;
    let name = twin.name();
    if object.metadata.deletion_timestamp.is_some() {
        let finalizer = twin.group.keys().finalizer;
        let held = (object.metadata.finalizers.iter().flatten()).any(|f| f == finalizer);
        if held {
            (workset.plan.twins.entry(name.to_owned()))
                .or_default()
                .remove_finalizer = true;
        }
        return;
    }
    let other = twin.group.other();
    let (status, reason, message) = match twin.reason {
        InertReason::OwnedByTwin(live) => (
            "True",
            keys::MIGRATED_REASON_OWNED_BY_TWIN,
            format!(
                "{} {name} ({}) does the work of this name: this {} runs nothing, and deleting it uninstalls nothing",
                live.kind(),
                live.name(),
                twin.group.kind(),
            ),
        ),
        InertReason::HeldForMigration => (
            "False",
            keys::MIGRATED_REASON_WAITING,
            format!(
                "{} {name} ({}) is mid-rollout or has a stage running: this {} takes the name over once it is complete, paused or disabled with no stage in flight",
                other.kind(),
                other.name(),
                twin.group.kind(),
            ),
        ),
    };
    let old = object.status.clone().unwrap_or_default();
    let mut new = old.clone();
    let condition = Condition {
        type_: keys::CONDITION_MIGRATED.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: object.metadata.generation,
        last_transition_time: Time(context.now),
    };
    set_condition(&mut new.conditions, condition);
    if new != old {
        (workset.plan.twins.entry(name.to_owned()))
            .or_default()
            .status = Some(new);
    }
}
