//! Before anything interrupting runs on a node (spec §2.7): cordon with ownership, the
//! `podNonInterruptLabels` gate, the drain through evictions with its timeout report, and the
//! wave's single interrupt pod.

use std::collections::BTreeMap;

use jiff::Timestamp;
use skyhook_api::interrupt::MergedInterrupt;
use skyhook_api::stage::entry_for;
use skyhook_api::v1alpha1::{Interrupt, Skyhook, Stage, State, Status};

use super::status::Outcome;
use super::{DRAIN_POLL, EventTarget, Eviction, Planner};
use crate::drain::{blockers, drain, interrupt_blockers};
use crate::names::{OwnerSkyhook, package_label};
use crate::pods::interrupt_pod;

impl Planner<'_> {
    /// Cordons `node` for `skyhook`, waits for protected pods, and drains it. True when
    /// nothing is left to move.
    pub(super) fn ready_for_interrupt(
        &mut self,
        skyhook: &Skyhook,
        name: &str,
        node: &str,
        outcome: &mut Outcome,
    ) -> bool {
        let snapshot = self.snapshot;
        let now = self.now;
        let Some(work) = self.nodes.get_mut(node) else {
            return false;
        };
        let was_cordoned = work.view.unschedulable
            && work
                .view
                .annotations
                .contains_key(&skyhook_api::keys::cordon_annotation(name));
        work.cordon(name, &now.to_string());
        if !was_cordoned {
            return false;
        }
        let cordoned_at = work
            .annotations()
            .get(&skyhook_api::keys::cordoned_at_annotation(name))
            .and_then(|text| text.parse::<Timestamp>().ok());
        let Some(pods) = snapshot.workload_pods.get(node) else {
            self.requeue(DRAIN_POLL);
            return false;
        };
        match interrupt_blockers(skyhook.spec.pod_non_interrupt_labels.as_ref(), pods) {
            Err(problems) => {
                self.event(
                    EventTarget::Skyhook(name.to_owned()),
                    true,
                    "Interrupt",
                    format!("podNonInterruptLabels is not a valid selector ({problems:?}); fix it, nothing is interrupted until then"),
                );
                return false;
            }
            Ok(protected) if !protected.is_empty() => {
                self.requeue(DRAIN_POLL);
                return false;
            }
            Ok(_) => {}
        }
        let pending = drain(pods);
        if pending.is_complete() {
            return true;
        }
        for pod in &pending.evict {
            self.plan.evictions.push(Eviction {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                node: node.to_owned(),
            });
        }
        if !pending.evict.is_empty() {
            self.event(
                EventTarget::Node(node.to_owned()),
                false,
                "Interrupt",
                format!("draining node [{node}] for Skyhook [{name}]"),
            );
        }
        let timed_out = cordoned_at.is_some_and(|at| {
            std::time::Duration::try_from(now.duration_since(at))
                .is_ok_and(|elapsed| elapsed >= self.config.drain_timeout)
        });
        if timed_out {
            let message = blockers(&pending, &snapshot.pdbs).message(node);
            if !outcome.drain_blocked.contains(&message) {
                outcome.drain_blocked.push(message.clone());
            }
            self.event(
                EventTarget::Node(node.to_owned()),
                true,
                "DrainBlocked",
                message,
            );
        }
        self.requeue(DRAIN_POLL);
        false
    }

    /// Creates the wave's interrupt pod once every interrupting package of the wave reached
    /// the interrupt stage, no Skyhook pod is left on the node, and the node is drained.
    pub(super) fn interrupt(
        &mut self,
        skyhook: &Skyhook,
        owner: &OwnerSkyhook<'_>,
        node: &str,
        merged: &MergedInterrupt,
        wave: &BTreeMap<String, Vec<Interrupt>>,
        outcome: &mut Outcome,
    ) {
        let name = owner.name;
        let packages = &skyhook.spec.packages;
        let Some(package) = packages.get(&merged.owner) else {
            return;
        };
        let others_waiting = wave.keys().filter(|p| **p != merged.owner).all(|p| {
            packages
                .get(p)
                .and_then(|pkg| self.entry(name, node, pkg))
                .is_some_and(|e| e.stage == Stage::Interrupt)
        });
        if !others_waiting || self.any_skyhook_pod_on(node) {
            return;
        }
        if !self.ready_for_interrupt(skyhook, name, node, outcome) {
            return;
        }
        let boot_id = self.view(node).and_then(|v| v.boot_id.clone());
        let pod = interrupt_pod(
            &self.config.pods,
            owner,
            package,
            &merged.interrupt,
            node,
            boot_id.as_deref(),
        );
        self.plan.create_pods.push(pod);
        self.created_on.entry(node.to_owned()).or_default().push((
            name.to_owned(),
            package_label(&package.name, &package.version),
        ));
        self.set_entry(
            name,
            node,
            entry_for(package, Stage::Interrupt, State::InProgress),
        );
        self.set_status(name, node, Status::InProgress);
        let message = format!(
            "Interrupting node [{node}] with {} for package [{}:{}]",
            merged.interrupt.type_, package.name, package.version
        );
        outcome.applied = Some(message.clone());
        self.event(
            EventTarget::Skyhook(name.to_owned()),
            false,
            "Interrupt",
            message,
        );
    }
}
