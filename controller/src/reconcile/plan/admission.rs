//! Which Skyhooks get a pass, and in what order: every named Skyhook by (priority, name)
//! (spec §2.2 step 6), each admitted first (spec §2.3, §2.8): its finalizer, its deletion
//! (`deletion`), the validation of its spec and the controller-version annotation. A Skyhook
//! being deleted or invalid ends here; an admitted one is handed to its pass as a [`Pass`].

use skyhook_api::keys::operator_version_to_write;
use skyhook_api::ordering::priority_order;
use skyhook_api::uninstall::UninstallRules;
use skyhook_api::v1alpha1::Skyhook;
use skyhook_api::validate::{ValidationContext, validate_skyhook};

use super::context::Context;
use super::deletion::deletion;
use super::event_kinds;
use super::output::EventTarget;
use super::pass::Pass;
use super::status::invalid_status;
use super::taints::matched_nodes;
use super::workset::Workset;
use crate::names::OwnerSkyhook;
use crate::reconcile::snapshot::Workload;

/// The objects in the order their passes run: priority, then name.
pub(super) fn pass_order(skyhooks: &[Workload]) -> Vec<&Workload> {
    let mut order: Vec<&Workload> = skyhooks
        .iter()
        .filter(|s| s.metadata.name.is_some())
        .collect();
    order.sort_by(|a, b| {
        let key = |s: &Workload| (s.spec.priority, s.metadata.name.clone().unwrap_or_default());
        let (a, b) = (key(a), key(b));
        priority_order((a.0, &a.1), (b.0, &b.1))
    });
    order
}

/// Finalizer, deletion, validation and the version annotation: the pass of a Skyhook that
/// is deleted or invalid ends here.
pub(super) fn admit<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    workload: &'s Workload,
) -> Option<Pass<'s>> {
    let (skyhook, keys) = (&*workload.object, workload.group.keys());
    let name = skyhook.metadata.name.as_deref()?;
    let has_finalizer = skyhook
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == keys.finalizer);
    let deleting = skyhook.metadata.deletion_timestamp.is_some();
    if deleting && !(has_finalizer && deletion(context, workset, skyhook, name)) {
        return None;
    }
    if !has_finalizer {
        workset.plan.finalizers.insert(name.to_owned(), true);
    }
    let validation = ValidationContext {
        name: Some(name),
        known_policies: None,
        group: workload.group,
    };
    if let Err(violations) = validate_skyhook(&skyhook.spec, &validation) {
        invalid(context, workset, skyhook, name, &violations.to_string());
        return None;
    }
    let owner = match OwnerSkyhook::new(workload.group, skyhook) {
        Ok(owner) => owner,
        Err(error) => {
            let target = EventTarget::Skyhook(name.to_owned());
            workset.emit(target, event_kinds::INVALID, error.to_string());
            return None;
        }
    };
    let version = (skyhook.metadata.annotations.as_ref())
        .and_then(|a| a.get(keys.version_annotation))
        .map(String::as_str);
    if let Some(ours) = operator_version_to_write(version).filter(|_| !deleting) {
        (workset.plan.skyhook_annotations.entry(name.to_owned()))
            .or_default()
            .insert(keys.version_annotation.to_owned(), Some(ours.to_owned()));
    }
    // A node being auto-tainted joins no Skyhook until its taint landed.
    let matched = matched_nodes(skyhook, &context.snapshot.nodes)
        .into_iter()
        .filter(|node| !workset.awaiting_taint.contains(&node.name))
        .collect();
    let (matched, malformed) = workset.split_malformed(name, matched);
    Some(Pass {
        skyhook,
        owner,
        matched,
        malformed,
        rules: UninstallRules {
            mode: context.config.uninstall_mode,
            deleting,
        },
    })
}

/// Reports an invalid spec on the Skyhook; its nodes are left as they are.
fn invalid<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    skyhook: &Skyhook,
    name: &str,
    violations: &str,
) {
    if let Some(status) = invalid_status(skyhook, context.keys_of(name), violations, context.now) {
        let target = EventTarget::Skyhook(name.to_owned());
        workset.emit(target, event_kinds::SPEC_INVALID, violations.to_owned());
        workset.plan.statuses.insert(name.to_owned(), status);
    }
}
