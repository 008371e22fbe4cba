//! What a package or interrupt pod is worth once its Skyhook is being deleted or is gone: whether
//! its outcome is still recorded, whether it is removed, and whether it holds the interrupts of
//! every other Skyhook on its node.
//!
//! An interrupt (a reboot, a service restart) waits until no package pod runs on the node, so a
//! pod that nobody wants any more, and that nobody deletes, holds every Skyhook with an interrupt
//! on that node for good: a crash-looping pod of a Skyhook being deleted did exactly that, and
//! kept rewriting the node state the deletion had cleaned, so the deletion never ended either.
//! The rule: a pod holds interrupts only while a live Skyhook still wants it, or while it runs
//! something the deletion of its Skyhook waits for. Every other pod is removed (with its grace
//! period) and its outcome ignored.

use std::collections::BTreeMap;

use crate::pod_annotation::PodPackageAnnotation;
use crate::v1alpha1::Package;

/// Where the Skyhook a pod works for stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodOwner {
    /// The Skyhook exists and is not being deleted; its own rules (pod validation) decide what
    /// becomes of the pod.
    Live,
    /// The Skyhook is being deleted. `awaited`: the pod works for a package whose uninstall the
    /// deletion waits for ([`deletion_awaits`]).
    Deleting {
        /// The deletion waits for what the pod runs.
        awaited: bool,
    },
    /// The pod's owner reference names a Skyhook that no longer exists: none of that name, or
    /// one with another UID (deleted and created again).
    Gone,
    /// The pod names no owner and no Skyhook of its name exists: a pod made by hand, whose
    /// outcome upstream records all the same (its `pod-finalizer` test relies on that). Not
    /// ours to delete, and no Skyhook wants it.
    Unowned,
}

/// What the controller does with one pod, whatever its status says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodFate {
    /// Its outcome (success, failure, refusal) is written to the node state.
    pub record_outcome: bool,
    /// It is deleted now, with its grace period.
    pub remove: bool,
    /// Other Skyhooks' interrupts on its node wait until it is gone.
    pub holds_interrupts: bool,
}

/// The fate of a pod whose Skyhook stands as `owner`; `terminating`: its deletion was already
/// asked for (it is not asked for again).
pub fn pod_fate(owner: PodOwner, terminating: bool) -> PodFate {
    match owner {
        PodOwner::Live | PodOwner::Deleting { awaited: true } => PodFate {
            record_outcome: true,
            remove: false,
            holds_interrupts: true,
        },
        PodOwner::Deleting { awaited: false } | PodOwner::Gone => PodFate {
            record_outcome: false,
            remove: !terminating,
            holds_interrupts: false,
        },
        PodOwner::Unowned => PodFate {
            record_outcome: true,
            remove: false,
            holds_interrupts: false,
        },
    }
}

/// Whether the deletion of a Skyhook whose spec holds `packages` waits for the pod described by
/// `annotation`: the pod works for the spec version of a package with `uninstall.enabled`. The
/// deletion uninstalls such a package, and first lets the stage it is in finish (an uninstall
/// runs only from a completed install). A pod of any other package, or of an older version (a
/// legacy uninstall), works for nothing the deletion needs. A pod without a readable annotation
/// (`None`) works for nothing known.
pub fn deletion_awaits(
    packages: &BTreeMap<String, Package>,
    annotation: Option<&PodPackageAnnotation>,
) -> bool {
    annotation.is_some_and(|pod| {
        packages
            .get(&pod.name)
            .is_some_and(|package| package.version == pod.version && package.uninstall_enabled())
    })
}

/// Whether any of the pods on a node, given by their fates, holds the node's interrupts.
pub fn pods_hold_interrupts(fates: impl IntoIterator<Item = PodFate>) -> bool {
    fates.into_iter().any(|fate| fate.holds_interrupts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1alpha1::{Stage, Uninstall};

    const fn fate(record_outcome: bool, remove: bool, holds_interrupts: bool) -> PodFate {
        PodFate {
            record_outcome,
            remove,
            holds_interrupts,
        }
    }

    #[test]
    fn only_wanted_pods_hold_interrupts_and_unwanted_ones_go() {
        let awaited = PodOwner::Deleting { awaited: true };
        let abandoned = PodOwner::Deleting { awaited: false };
        // (owner, terminating, fate)
        let cases = [
            // A live Skyhook's pods are its own business: pod validation removes the stray
            // ones, and a pod it deletes still runs until it is gone.
            (PodOwner::Live, false, fate(true, false, true)),
            (PodOwner::Live, true, fate(true, false, true)),
            // An uninstall the deletion waits for, or the install it lets finish first.
            (awaited, false, fate(true, false, true)),
            (awaited, true, fate(true, false, true)),
            // Anything else of a Skyhook being deleted: removed, ignored, holds nothing.
            (abandoned, false, fate(false, true, false)),
            (abandoned, true, fate(false, false, false)),
            // The Skyhook is gone (or was created again under the same name).
            (PodOwner::Gone, false, fate(false, true, false)),
            (PodOwner::Gone, true, fate(false, false, false)),
            // Made by hand for no Skyhook: recorded as upstream does, left alone.
            (PodOwner::Unowned, false, fate(true, false, false)),
        ];
        for (owner, terminating, expected) in cases {
            assert_eq!(
                pod_fate(owner, terminating),
                expected,
                "{owner:?}, terminating {terminating}"
            );
        }
    }

    #[test]
    fn a_node_is_held_while_one_wanted_pod_is_on_it() {
        let held = |owners: &[(PodOwner, bool)]| {
            pods_hold_interrupts(owners.iter().map(|(o, t)| pod_fate(*o, *t)))
        };
        let abandoned = PodOwner::Deleting { awaited: false };
        assert!(!held(&[]));
        assert!(!held(&[
            (abandoned, false),
            (PodOwner::Gone, true),
            (PodOwner::Unowned, false)
        ]));
        assert!(held(&[(abandoned, false), (PodOwner::Live, false)]));
        assert!(held(&[(PodOwner::Deleting { awaited: true }, true)]));
    }

    fn package(name: &str, version: &str, enabled: Option<bool>) -> (String, Package) {
        let package = Package {
            name: name.to_owned(),
            version: version.to_owned(),
            image: "ghcr.io/nvidia/skyhook/agentless".to_owned(),
            uninstall: enabled.map(|enabled| Uninstall {
                enabled,
                apply: false,
            }),
            ..Package::default()
        };
        (name.to_owned(), package)
    }

    fn pod(name: &str, version: &str, stage: Stage) -> PodPackageAnnotation {
        PodPackageAnnotation {
            name: name.to_owned(),
            version: version.to_owned(),
            skyhook: "demo".to_owned(),
            stage,
            image: "ghcr.io/nvidia/skyhook/agentless".to_owned(),
            container_sha: String::new(),
            invalid: false,
        }
    }

    #[test]
    fn the_deletion_awaits_the_pods_of_uninstallable_spec_packages() {
        let packages = BTreeMap::from([
            package("aa", "1.2.3", None),
            package("bb", "1.2.3", Some(false)),
            package("cc", "2.0.0", Some(true)),
        ]);
        let cases = [
            (Some(pod("cc", "2.0.0", Stage::Uninstall)), true),
            (Some(pod("cc", "2.0.0", Stage::UninstallInterrupt)), true),
            // The install the uninstall waits for.
            (Some(pod("cc", "2.0.0", Stage::Config)), true),
            (Some(pod("cc", "2.0.0", Stage::Interrupt)), true),
            // An older version's (legacy) uninstall.
            (Some(pod("cc", "1.0.0", Stage::Uninstall)), false),
            (Some(pod("aa", "1.2.3", Stage::Apply)), false),
            (Some(pod("bb", "1.2.3", Stage::Config)), false),
            (Some(pod("gone", "1.0.0", Stage::Uninstall)), false),
            (None, false),
        ];
        for (annotation, expected) in cases {
            assert_eq!(
                deletion_awaits(&packages, annotation.as_ref()),
                expected,
                "{annotation:?}"
            );
        }
    }
}
