//! Before anything interrupting runs on a node (spec §2.7): cordon with ownership, the
//! `podNonInterruptLabels` gate, the drain through evictions with its timeout report, and the
//! wave's single interrupt pod.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use skyhook_api::budget::fleet_admits;
use skyhook_api::keys;
use skyhook_api::stage::entry_for;
use skyhook_api::v1alpha1::{DrainTimeoutAction, Package, Stage, State, Status};

use super::packages::{NodeRun, NodeWave};
use super::skyhooks::Pass;
use super::{DRAIN_POLL, EventTarget, Eviction, Planner};
use crate::drain::{DrainRules, blockers, drain, interrupt_blockers};
use crate::names::package_label;
use crate::pods::{PodNode, interrupt_pod, uninstall_interrupt_pod};

/// Where a node stands before something interrupting runs on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Readiness {
    /// Cordoned and drained: go ahead.
    Ready,
    /// Still cordoning or draining; looked at again soon.
    Waiting,
    /// The drain timed out with `onTimeout: fail`: the package was marked `erroring` and the
    /// node released.
    Failed,
}

/// What a drain is for: the package and the stage that waits for it.
pub(super) type DrainFor<'p> = (&'p Package, Stage);

impl Planner<'_> {
    /// Cordons `node` for the pass's Skyhook, waits for protected pods, and drains it by the
    /// Skyhook's `spec.drain`. A drain past its timeout is reported in `run`, and with
    /// `onTimeout: fail` gives up on the node (see [`Planner::fail_drain`]).
    pub(super) fn ready_for_interrupt(
        &mut self,
        pass: &Pass<'_>,
        node: &str,
        drain_for: DrainFor<'_>,
        run: &mut NodeRun,
    ) -> Readiness {
        let name = pass.name();
        let now = self.now;
        if !self.fleet_admits(name, node) {
            run.fleet_waiting = true;
            return Readiness::Waiting;
        }
        let Some(work) = self.nodes.get_mut(node) else {
            return Readiness::Waiting;
        };
        let was_cordoned = work.view.unschedulable
            && work
                .view
                .annotations
                .contains_key(&keys::SKYHOOK.cordon_annotation(name));
        work.cordon(name, &now.to_string());
        self.draining.insert((name.to_owned(), node.to_owned()));
        if !was_cordoned {
            return Readiness::Waiting;
        }
        let cordoned_at = work
            .annotations()
            .get(&keys::SKYHOOK.cordoned_at_annotation(name))
            .and_then(|text| text.parse::<Timestamp>().ok());
        let snapshot = self.snapshot;
        let Some(pods) = snapshot.workload_pods.get(node) else {
            self.requeue(DRAIN_POLL);
            return Readiness::Waiting;
        };
        let Some(rules) = self.drain_rules(pass) else {
            return Readiness::Waiting;
        };
        if !self.interruptible(pass, pods) {
            return Readiness::Waiting;
        }
        let pending = drain(pods, &rules);
        if pending.is_complete() {
            return Readiness::Ready;
        }
        self.evict(pass, node, &pending.evict);
        let timeout = pass.skyhook.spec.drain_timeout(self.config.drain_timeout);
        let timed_out = cordoned_at.is_some_and(|at| {
            std::time::Duration::try_from(now.duration_since(at))
                .is_ok_and(|elapsed| elapsed >= timeout)
        });
        if timed_out {
            let message = blockers(&pending, &snapshot.pdbs).message(node);
            run.drain_blocked = Some(message.clone());
            if pass.skyhook.spec.drain_on_timeout() == DrainTimeoutAction::Fail {
                self.fail_drain(name, node, drain_for, message);
                return Readiness::Failed;
            }
            let target = EventTarget::Node(node.to_owned());
            self.event(target, true, "DrainBlocked", message);
        }
        self.requeue(DRAIN_POLL);
        Readiness::Waiting
    }

    /// Whether `skyhook` may cordon `node` under the fleet budget: always when no budget is
    /// set, when it already cordoned the node, or when the node holds a fleet slot for another
    /// Skyhook; otherwise only while fewer nodes than the ceiling hold one, counted on the
    /// nodes as this plan leaves them (its releases free slots, its cordons take them).
    pub(super) fn fleet_admits(&mut self, skyhook: &str, node: &str) -> bool {
        let Some(budget) = self.config.fleet_budget else {
            return true;
        };
        let node_holds = match self.nodes.get_mut(node) {
            Some(work) => {
                let own = work.unschedulable()
                    && work
                        .annotations()
                        .contains_key(&keys::SKYHOOK.cordon_annotation(skyhook));
                own || work.holds_fleet_slot()
            }
            None => return false,
        };
        if node_holds {
            return true;
        }
        let held = self.fleet_held();
        fleet_admits(budget.ceiling(self.nodes.len()), held, node_holds)
    }

    /// How many nodes hold a fleet slot as this plan leaves them so far.
    pub(super) fn fleet_held(&mut self) -> usize {
        self.nodes
            .values_mut()
            .filter_map(|work| work.holds_fleet_slot().then_some(()))
            .count()
    }

    /// Gives up on a drain that timed out with `onTimeout: fail`: the package waiting for it
    /// turns `erroring`, and the node is released (see `skyhook_api::budget::slot`): uncordoned,
    /// marked `drainFail_<skyhook>` so that the erroring entry holds no budget slot, and left
    /// for a later batch to try again.
    fn fail_drain(
        &mut self,
        skyhook: &str,
        node: &str,
        (package, stage): DrainFor<'_>,
        report: String,
    ) {
        self.set_entry(skyhook, node, entry_for(package, stage, State::Erroring));
        self.set_status(skyhook, node, Status::Erroring);
        let now = self.now.to_string();
        if let Some(work) = self.nodes.get_mut(node) {
            work.release_cordon(skyhook);
            work.mark_drain_failed(skyhook, &now);
        }
        self.event(
            EventTarget::Node(node.to_owned()),
            true,
            "DrainFailed",
            format!("{report}; package [{}:{}] of Skyhook [{skyhook}] is erroring and the node was uncordoned (spec.drain.onTimeout: fail); it is tried again in a later batch", package.name, package.version),
        );
    }

    /// The pass's `spec.drain` rules, or `None` (with a Warning Event, draining nothing) while
    /// its `podSelector` does not parse.
    fn drain_rules(&mut self, pass: &Pass<'_>) -> Option<DrainRules> {
        match DrainRules::of(pass.skyhook.spec.drain.as_ref()) {
            Ok(rules) => Some(rules),
            Err(problems) => {
                self.event(
                    EventTarget::Skyhook(pass.name().to_owned()),
                    true,
                    "Interrupt",
                    format!("spec.drain.podSelector is not a valid selector ({problems:?}); fix it, no node is drained until then"),
                );
                None
            }
        }
    }

    /// The `podNonInterruptLabels` gate: false (looking again soon) while a protected pod is
    /// on the node, or for good while the selector does not parse (with a Warning Event).
    fn interruptible(&mut self, pass: &Pass<'_>, pods: &[Pod]) -> bool {
        match interrupt_blockers(pass.skyhook.spec.pod_non_interrupt_labels.as_ref(), pods) {
            Err(problems) => {
                self.event(
                    EventTarget::Skyhook(pass.name().to_owned()),
                    true,
                    "Interrupt",
                    format!("podNonInterruptLabels is not a valid selector ({problems:?}); fix it, nothing is interrupted until then"),
                );
                false
            }
            Ok(protected) if !protected.is_empty() => {
                self.requeue(DRAIN_POLL);
                false
            }
            Ok(_) => true,
        }
    }

    /// Requests the evictions that drain `node`, with the Skyhook's grace period.
    fn evict(&mut self, pass: &Pass<'_>, node: &str, pods: &[&Pod]) {
        let skyhook = pass.name();
        let drain = pass.skyhook.spec.drain.as_ref();
        let grace_period_seconds = drain.and_then(|d| d.grace_period_seconds);
        for pod in pods {
            self.plan.evictions.push(Eviction {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                node: node.to_owned(),
                grace_period_seconds,
            });
        }
        if !pods.is_empty() {
            self.event(
                EventTarget::Node(node.to_owned()),
                false,
                "Interrupt",
                format!("draining node [{node}] for Skyhook [{skyhook}]"),
            );
        }
    }

    /// Creates the wave's interrupt pod once every interrupting package of the wave reached
    /// the interrupt stage, no pod on the node holds its interrupts, and the node is drained.
    pub(super) fn interrupt(&mut self, pass: &Pass<'_>, at: &NodeWave<'_>, run: &mut NodeRun) {
        let (node, wave) = (at.node, &at.wave);
        let name = pass.name();
        let packages = &pass.skyhook.spec.packages;
        let Some(merged) = &wave.merged else {
            return;
        };
        let Some(package) = packages.get(&merged.owner) else {
            return;
        };
        let others_waiting = wave
            .interrupts
            .keys()
            .filter(|p| **p != merged.owner)
            .all(|p| {
                packages
                    .get(p)
                    .and_then(|pkg| self.entry(name, node, pkg))
                    .is_some_and(|e| e.stage == Stage::Interrupt)
            });
        if !others_waiting
            || self.pods_hold_interrupts(node)
            || self.ready_for_interrupt(pass, node, (package, Stage::Interrupt), run)
                != Readiness::Ready
        {
            return;
        }
        let boot_id = self.view_of(node).and_then(|v| v.boot_id.clone());
        let pod = interrupt_pod(
            &self.config.pods,
            &pass.owner,
            package,
            &merged.interrupt,
            &PodNode::new(node, boot_id.as_deref()).at_order(at.order),
        );
        let message = format!(
            "Interrupting node [{node}] with {} for package [{}:{}]",
            merged.interrupt.type_, package.name, package.version
        );
        let launch = (node, package, Stage::Interrupt);
        self.start_interrupt(name, launch, pod, message, run);
    }

    /// Creates the interrupt `pod` running `stage` of `package` on `node`, records its entry
    /// `in_progress`, and reports the launch.
    fn start_interrupt(
        &mut self,
        skyhook: &str,
        (node, package, stage): (&str, &Package, Stage),
        pod: Pod,
        message: String,
        run: &mut NodeRun,
    ) {
        let Some(pod) = self.planned_pod(skyhook, &pod) else {
            return;
        };
        self.plan.create_pods.push(pod);
        self.created_on.entry(node.to_owned()).or_default().push((
            skyhook.to_owned(),
            package_label(&package.name, &package.version),
        ));
        self.set_entry(skyhook, node, entry_for(package, stage, State::InProgress));
        self.set_status(skyhook, node, Status::InProgress);
        run.applied = Some(message.clone());
        self.event(
            EventTarget::Skyhook(skyhook.to_owned()),
            false,
            "Interrupt",
            message,
        );
    }

    /// Runs `package`'s own interrupt after its explicit uninstall, once no pod on the node
    /// holds its interrupts and it is drained. Each package fires its own; nothing is merged or
    /// skipped. A package whose `interrupt` was removed meanwhile has nothing to run, so its
    /// cycle ends here instead of stranding the node (an upstream defect).
    pub(super) fn uninstall_interrupt(
        &mut self,
        pass: &Pass<'_>,
        at: &NodeWave<'_>,
        package: &Package,
        run: &mut NodeRun,
    ) {
        let (name, node) = (pass.name(), at.node);
        let Some(interrupt) = package.interrupt.clone() else {
            let done = entry_for(package, Stage::UninstallInterrupt, State::Complete);
            self.set_entry(name, node, done);
            return;
        };
        if self.pods_hold_interrupts(node)
            || self.ready_for_interrupt(pass, node, (package, Stage::UninstallInterrupt), run)
                != Readiness::Ready
        {
            return;
        }
        let boot_id = self.view_of(node).and_then(|v| v.boot_id.clone());
        let pod = uninstall_interrupt_pod(
            &self.config.pods,
            &pass.owner,
            package,
            &interrupt,
            &PodNode::new(node, boot_id.as_deref()).at_order(at.order),
        );
        let message = format!(
            "Interrupting node [{node}] with {} after uninstalling package [{}:{}]",
            interrupt.type_, package.name, package.version
        );
        let launch = (node, package, Stage::UninstallInterrupt);
        self.start_interrupt(name, launch, pod, message, run);
    }
}
