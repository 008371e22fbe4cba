//! Pod results (spec §2.9 with our fixes): a succeeded pod advances the node state and is
//! deleted; a failed one marks its package `erroring` with the reason and is left for the
//! kubelet to retry; an invalidated one is deleted; an interrupt pod killed by its own reboot
//! is waited for, not reported. A failed pod of an active Skyhook that no longer belongs to its
//! spec or to the node state as read (a node reset under a crash-looping pod) is deleted without
//! reporting: writing its failure back would recreate the very entry it no longer matches, and
//! the stray pod would then hold the node in `erroring` for good.

use std::collections::BTreeMap;

use skyhook_api::stage::{NodeStateEdit, apply_edits, on_pod_failed, on_pod_succeeded};
use skyhook_api::v1alpha1::{Package, Skyhook, Status};

use super::{EventTarget, Planner};
use crate::names::OwnerSkyhook;
use crate::pod_match::InvalidReason;
use crate::pod_outcome::{PodOutcome, REBOOT_NOT_CONFIRMED};
use crate::reconcile::snapshot::OwnedPod;

impl Planner<'_> {
    pub(super) fn pod_results(&mut self) {
        let snapshot = self.snapshot;
        let empty = BTreeMap::new();
        for pod in &snapshot.pods {
            let Some(annotation) = &pod.annotation else {
                continue;
            };
            let skyhook = snapshot
                .skyhooks
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(annotation.skyhook.as_str()));
            let packages: &BTreeMap<String, Package> = skyhook.map_or(&empty, |s| &s.spec.packages);
            match &pod.outcome {
                PodOutcome::Invalid => self.delete_pod(&pod.name, "invalidated"),
                PodOutcome::Unrecognised { .. } | PodOutcome::Running => {}
                PodOutcome::AwaitingReboot { deadline } => {
                    let wait = self.now.duration_until(*deadline);
                    let wait = std::time::Duration::try_from(wait).unwrap_or_default();
                    self.requeue(wait);
                }
                PodOutcome::RecreateAfterReboot => {
                    self.delete_pod(&pod.name, "the node rebooted under it");
                }
                PodOutcome::Succeeded { restarts, .. } => {
                    if pod.deleting {
                        continue;
                    }
                    let Some(work) = self.nodes.get_mut(pod.node.as_str()) else {
                        self.delete_pod(&pod.name, "its node is gone");
                        continue;
                    };
                    let state = work.state(&annotation.skyhook);
                    let edits = on_pod_succeeded(state, annotation, *restarts, packages);
                    apply_edits(state, &edits);
                    self.delete_pod(&pod.name, "succeeded");
                    self.succeeded.insert(pod.name.clone());
                    self.event(
                        EventTarget::Node(pod.node.clone()),
                        false,
                        "Apply",
                        format!(
                            "Package [{}:{}] state complete on [skyhook:{}] stage {}",
                            annotation.name,
                            annotation.version,
                            annotation.skyhook,
                            annotation.stage
                        ),
                    );
                }
                PodOutcome::Failed(failure) => {
                    if let Some(reason) = skyhook.and_then(|skyhook| self.stray(pod, skyhook)) {
                        self.delete_pod(&pod.name, format!("invalidated: {reason:?}"));
                        continue;
                    }
                    let Some(work) = self.nodes.get_mut(pod.node.as_str()) else {
                        continue;
                    };
                    let edit = on_pod_failed(annotation, failure.restarts);
                    let state = work.state(&annotation.skyhook);
                    let changed = match &edit {
                        NodeStateEdit::Upsert(entry) => {
                            state.get_version(&entry.name, &entry.version) != Some(entry)
                        }
                        NodeStateEdit::Remove(_) => true,
                    };
                    apply_edits(state, std::slice::from_ref(&edit));
                    let was_erroring = work.status(&annotation.skyhook) == Status::Erroring;
                    work.set_status(&annotation.skyhook, Status::Erroring);
                    if failure.reason == REBOOT_NOT_CONFIRMED {
                        let package = format!("{}:{}", annotation.name, annotation.version);
                        if changed || !was_erroring {
                            self.reboot_not_confirmed_event(
                                &annotation.skyhook,
                                &pod.node,
                                &package,
                                failure.reboot_requested,
                            );
                        }
                        self.unconfirmed_reboot(
                            &annotation.skyhook,
                            &pod.node,
                            package,
                            failure.reboot_requested,
                        );
                    } else if changed || !was_erroring {
                        self.event(
                            EventTarget::Node(pod.node.clone()),
                            true,
                            "Apply",
                            format!(
                                "Package [{}:{}] state erroring on [skyhook:{}] stage {}: {}{}",
                                annotation.name,
                                annotation.version,
                                annotation.skyhook,
                                annotation.stage,
                                failure.reason,
                                failure
                                    .container
                                    .as_ref()
                                    .map(|c| format!(" in container {c}"))
                                    .unwrap_or_default(),
                            ),
                        );
                    }
                }
            }
        }
    }

    /// Why `pod` of `skyhook` no longer belongs to that Skyhook's spec or to its node's state as
    /// read; `None` when it does, or when the Skyhook is paused or being deleted (its pods are
    /// then not validated at all, as in [`Planner::skyhooks`]).
    fn stray(&mut self, pod: &OwnedPod, skyhook: &Skyhook) -> Option<InvalidReason> {
        if skyhook.is_paused() || skyhook.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let owner = OwnerSkyhook::new(skyhook).ok()?;
        self.invalid_reason(&owner, &skyhook.spec.packages, pod)
    }
}
