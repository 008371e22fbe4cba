//! Before anything interrupting runs on a node (spec §2.7): cordon with ownership, the
//! `podNonInterruptLabels` gate, the drain through evictions with its timeout report, and the
//! wave's single interrupt pod.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use skyhook_api::budget::fleet_admits;
use skyhook_api::drain::{
    BlockReason, BlockedPod, EffectiveDrain, OnDrainTimeout, effective_drain,
};
use skyhook_api::stage::entry_for;
use skyhook_api::v1alpha1::{InterruptType, Package, Stage, State, Status};

use super::context::Context;
use super::event_kinds;
use super::output::{DRAIN_POLL, EventTarget, Eviction};
use super::pass::Pass;
use super::pre_pulls::{PrePull, pre_pull};
use super::wave::{DrainFor, NodeRun, NodeWave};
use super::workset::Workset;
use crate::drain::{Drain, DrainRules, Held, blockers, drain, interrupt_blockers};
use crate::jobs::JobKind;
use crate::names::{OwnerSkyhook, package_label};
use crate::pods::{PodNode, interrupt_pod, uninstall_interrupt_pod};

/// Where a node stands before something interrupting runs on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Readiness {
    /// Cordoned and drained: go ahead.
    Ready,
    /// Still cordoning or draining; looked at again soon.
    Waiting,
    /// The drain timed out and the package was marked `erroring` (the node stays cordoned,
    /// upstream's rule, or is released with `onTimeout: fail`).
    Failed,
}

/// Cordons `node` for the pass's Skyhook, waits for protected pods, and drains it by the
/// Skyhook's effective drain settings ([`effective_drain`]), as upstream v0.20 does:
/// * a node someone else cordoned (no Skyhook's `cordon_*`) is drained without taking the
///   cordon over, and stays cordoned afterwards;
/// * the drain's start is stamped in `drainStart_<skyhook>` on the first pass that finds the
///   node not drained, and removed once it is; the timeout counts from it;
/// * the pods that block it are recorded in `drainBlocked_<skyhook>` and reported in `run`
///   (the `DrainBlocked` condition); a PodDisruptionBudget refusal is one, and the node's
///   evictions then wait [`crate::drain::refusals::RETRY_REFUSED_AFTER`] while other nodes go on;
/// * past the timeout the package turns `erroring` (see [`OnDrainTimeout`]).
pub(super) fn ready_for_interrupt<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    at: &NodeWave<'_>,
    drain_for: DrainFor<'_>,
    run: &mut NodeRun,
) -> Readiness {
    let keys = pass.keys();
    let (name, node) = (pass.name(), at.node);
    let now = context.now;
    // Before the fleet budget: a node may pull while it waits for a fleet slot.
    match pre_pull(context, workset, pass, at, drain_for, run) {
        PrePull::Open => {}
        PrePull::Waiting => return Readiness::Waiting,
        PrePull::Failed => return Readiness::Failed,
    }
    if !fleet_admits_node(context, workset, name, node) {
        run.fleet_waiting = true;
        return Readiness::Waiting;
    }
    let Some(work) = workset.nodes.get_mut(node) else {
        return Readiness::Waiting;
    };
    workset.draining.insert((name.to_owned(), node.to_owned()));
    if !work.foreign_cordon() {
        let was_cordoned = work.view.unschedulable
            && work
                .view
                .annotations
                .contains_key(&keys.cordon_annotation(name));
        work.cordon(name, &now.to_string());
        if !was_cordoned {
            // The cordon must reach the API server before pods are removed, or they could
            // be scheduled straight back.
            return Readiness::Waiting;
        }
    }
    let snapshot = context.snapshot;
    let Some(pods) = snapshot.workload_pods.get(node) else {
        if work.foreign_cordon() {
            // Without a cordon of ours, the stamp is what has the node's pods listed.
            work.start_drain(name, &now.to_string());
        }
        workset.requeue(DRAIN_POLL);
        return Readiness::Waiting;
    };
    let effective = effective_drain(&pass.skyhook.spec, context.config.drain_timeout);
    let Some(rules) = drain_rules(workset, pass, &effective, &context.config.pods.namespace) else {
        return Readiness::Waiting;
    };
    match non_interrupt_gate(workset, pass, pods) {
        NonInterruptGate::Open => {}
        NonInterruptGate::InvalidSelector => {
            run.non_interrupt_hold = true;
            return Readiness::Waiting;
        }
        NonInterruptGate::Held(protected) => {
            run.non_interrupt_hold = true;
            let (package, _) = drain_for;
            let label = format!("{}:{}", package.name, package.version);
            run.non_interrupt_pods = Some((label, protected));
            return Readiness::Waiting;
        }
    }
    let pending = drain(pods, &rules);
    let Some(work) = workset.nodes.get_mut(node) else {
        return Readiness::Waiting;
    };
    if pending.is_complete() {
        work.clear_drain(name);
        return Readiness::Ready;
    }
    let blocked = blocked_pods(&pending, snapshot.refusals.refused(node));
    let json = (!blocked.is_empty())
        .then(|| serde_json::to_string(&blocked).ok())
        .flatten();
    work.set_drain_blocked(name, json.as_deref());
    run.drain_blockers = blocked;
    let started = match work
        .annotations()
        .get(&keys.drain_start_annotation(name))
        .and_then(|text| text.parse::<Timestamp>().ok())
    {
        Some(started) => started,
        None => {
            // The first pass that finds the node not drained: the drain starts now (and
            // its pods are removed in this same pass).
            work.start_drain(name, &now.to_string());
            workset.set_status(name, node, Status::InProgress);
            now
        }
    };
    let timed_out = effective.timeout.is_some_and(|timeout| {
        std::time::Duration::try_from(now.duration_since(started))
            .is_ok_and(|elapsed| elapsed >= timeout)
    });
    if timed_out {
        let timeout = effective.timeout.unwrap_or_default();
        let report = blockers(&pending, &snapshot.pdbs).message(node);
        match effective.on_timeout {
            OnDrainTimeout::KeepWaiting => {
                run.drain_blocked = Some(report.clone());
                let target = EventTarget::Node(node.to_owned());
                workset.emit(target, event_kinds::DRAIN_BLOCKED, report);
            }
            OnDrainTimeout::Erroring => {
                // Also our condition (and `skyhook_drain_blocked`): a drain past its timeout.
                run.drain_blocked = Some(report.clone());
                time_out_drain(workset, name, node, drain_for, timeout, &report);
                return Readiness::Failed;
            }
            OnDrainTimeout::ErroringAndUncordon => {
                run.drain_blocked = Some(report.clone());
                time_out_drain(workset, name, node, drain_for, timeout, &report);
                fail_drain(context, workset, name, node, drain_for, report);
                return Readiness::Failed;
            }
        }
    }
    match snapshot.refusals.wait(node, now) {
        // A budget refused this node's last evictions: try again once the wait is over.
        Some(left) if !effective.disable_eviction => workset.requeue(left.min(DRAIN_POLL * 6)),
        _ => evict(workset, pass, node, &pending.evict, &effective),
    }
    workset.requeue(DRAIN_POLL);
    Readiness::Waiting
}

/// The pods that keep a drain from progressing, with upstream's reasons: those the settings
/// keep from being removed, and those whose eviction a PodDisruptionBudget refused (with the
/// API server's message). A DaemonSet pod held by the deprecated `spec.drain` has no upstream
/// reason and is reported by the timeout report only.
fn blocked_pods(pending: &Drain<'_>, refused: &[BlockedPod]) -> Vec<BlockedPod> {
    let mut blocked: Vec<BlockedPod> = pending
        .held
        .iter()
        .filter_map(|(pod, held)| {
            let reason = match held {
                Held::Unowned => BlockReason::UnmanagedPod,
                Held::EmptyDir => BlockReason::EmptyDirData,
                Held::DaemonSet => return None,
            };
            Some(BlockedPod {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                reason,
                detail: None,
            })
        })
        .collect();
    // A refused pod still to evict blocks; one gone or already leaving no longer does.
    blocked.extend(
        refused
            .iter()
            .filter(|r| {
                pending.evict.iter().any(|pod| {
                    pod.metadata.namespace.as_deref() == Some(r.namespace.as_str())
                        && pod.metadata.name.as_deref() == Some(r.name.as_str())
                })
            })
            .cloned(),
    );
    blocked.sort();
    blocked
}

/// Upstream's drain timeout: the package waiting for the drain turns `erroring`, the node
/// `erroring`, a Warning Event `Drain` goes to the node and the Skyhook, and nothing more is
/// removed from the node. It stays cordoned; a reset after the blocker is gone tries again.
fn time_out_drain<'s>(
    workset: &mut Workset<'s>,
    skyhook: &str,
    node: &str,
    (package, stage): DrainFor<'_>,
    timeout: std::time::Duration,
    report: &str,
) {
    workset.set_entry(skyhook, node, entry_for(package, stage, State::Erroring));
    workset.set_status(skyhook, node, Status::Erroring);
    let message = format!(
        "drain timed out after [{}] for node [{node}] package [{}:{}]: {report}",
        go_duration(timeout),
        package.name,
        package.version
    );
    workset.emit(
        EventTarget::Node(node.to_owned()),
        event_kinds::DRAIN_TIMEOUT,
        message.clone(),
    );
    workset.emit(
        EventTarget::Skyhook(skyhook.to_owned()),
        event_kinds::DRAIN_TIMEOUT,
        message,
    );
}

/// A duration as Go prints it (`5m0s`, `1h30m0s`, `45s`), as upstream's message does.
fn go_duration(d: std::time::Duration) -> String {
    let total = d.as_secs();
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, _) => format!("{minutes}m{seconds}s"),
        _ => format!("{hours}h{minutes}m{seconds}s"),
    }
}

/// Whether `skyhook` may cordon `node` under the fleet budget: always when no budget is
/// set, when it already cordoned the node, or when the node holds a fleet slot for another
/// Skyhook; otherwise only while fewer nodes than the ceiling hold one, counted on the
/// nodes as this plan leaves them (its releases free slots, its cordons take them).
fn fleet_admits_node<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    skyhook: &str,
    node: &str,
) -> bool {
    let keys = context.keys_of(skyhook);
    let Some(budget) = context.config.fleet_budget else {
        return true;
    };
    let node_holds = match workset.nodes.get_mut(node) {
        Some(work) => {
            let own = work.unschedulable()
                && work
                    .annotations()
                    .contains_key(&keys.cordon_annotation(skyhook));
            own || work.holds_fleet_slot()
        }
        None => return false,
    };
    if node_holds {
        return true;
    }
    let held = workset.fleet_held();
    fleet_admits(budget.ceiling(workset.nodes.len()), held, node_holds)
}

/// Gives up on a drain that timed out with `onTimeout: fail`: the package waiting for it
/// turns `erroring`, and the node is released (see `skyhook_api::budget::slot`): uncordoned,
/// marked `drainFail_<skyhook>` so that the erroring entry holds no budget slot, and left
/// for a later batch to try again.
fn fail_drain<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    skyhook: &str,
    node: &str,
    (package, stage): DrainFor<'_>,
    report: String,
) {
    workset.set_entry(skyhook, node, entry_for(package, stage, State::Erroring));
    workset.set_status(skyhook, node, Status::Erroring);
    let now = context.now.to_string();
    if let Some(work) = workset.nodes.get_mut(node) {
        work.release_cordon(skyhook);
        work.mark_drain_failed(skyhook, &now);
    }
    workset.emit(
        EventTarget::Node(node.to_owned()),
        event_kinds::DRAIN_FAILED,
        format!("{report}; package [{}:{}] of Skyhook [{skyhook}] is erroring and the node was uncordoned (spec.drain.onTimeout: fail); it is tried again in a later batch", package.name, package.version),
    );
}

/// The pass's drain rules, or `None` (with a Warning Event, draining nothing) while its
/// `podSelector` does not parse.
fn drain_rules<'s>(
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    effective: &EffectiveDrain,
    own_namespace: &str,
) -> Option<DrainRules> {
    match DrainRules::of(effective, Some(own_namespace)) {
        Ok(rules) => Some(rules),
        Err(problems) => {
            workset.emit(
                EventTarget::Skyhook(pass.name().to_owned()),
                event_kinds::INTERRUPT_SELECTOR_INVALID,
                format!("the drain's podSelector is not a valid selector ({problems:?}); fix it, no node is drained until then"),
            );
            None
        }
    }
}

/// Where the `podNonInterruptLabels` gate stands on a node.
enum NonInterruptGate {
    Open,
    /// Closed for good while the selector does not parse (with a Warning Event).
    InvalidSelector,
    /// Closed while these protected pods (`<namespace>/<name>`, sorted) are on the node;
    /// looked at again soon.
    Held(Vec<String>),
}

fn non_interrupt_gate<'s>(
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    pods: &[Pod],
) -> NonInterruptGate {
    match interrupt_blockers(pass.skyhook.spec.pod_non_interrupt_labels.as_ref(), pods) {
        Err(problems) => {
            workset.emit(
                EventTarget::Skyhook(pass.name().to_owned()),
                event_kinds::INTERRUPT_SELECTOR_INVALID,
                format!("podNonInterruptLabels is not a valid selector ({problems:?}); fix it, nothing is interrupted until then"),
            );
            NonInterruptGate::InvalidSelector
        }
        Ok(protected) if !protected.is_empty() => {
            workset.requeue(DRAIN_POLL);
            let mut names: Vec<String> = protected
                .iter()
                .map(|pod| {
                    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                    let name = pod.metadata.name.as_deref().unwrap_or_default();
                    format!("{namespace}/{name}")
                })
                .collect();
            names.sort_unstable();
            NonInterruptGate::Held(names)
        }
        Ok(_) => NonInterruptGate::Open,
    }
}

/// Requests the evictions (or, with `disableEviction`, the deletions) that drain `node`,
/// with the Skyhook's grace period.
fn evict<'s>(
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    node: &str,
    pods: &[&Pod],
    effective: &EffectiveDrain,
) {
    let skyhook = pass.name();
    for pod in pods {
        workset.plan.evictions.push(Eviction {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            node: node.to_owned(),
            grace_period_seconds: effective.grace_period_seconds,
            delete: effective.disable_eviction,
        });
    }
    if !pods.is_empty() {
        workset.emit(
            EventTarget::Node(node.to_owned()),
            event_kinds::DRAIN_NODE,
            format!("draining node [{node}] for Skyhook [{skyhook}]"),
        );
    }
}

/// Creates the wave's interrupt pod once every interrupting package of the wave reached
/// the interrupt stage, no pod on the node holds its interrupts, and the node is drained.
pub(super) fn interrupt<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    at: &NodeWave<'_>,
    run: &mut NodeRun,
) {
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
                .and_then(|pkg| workset.entry(name, node, pkg))
                .is_some_and(|e| e.stage == Stage::Interrupt)
        });
    if !others_waiting
        || workset.pods_hold_interrupts(context, node)
        || ready_for_interrupt(context, workset, pass, at, (package, Stage::Interrupt), run)
            != Readiness::Ready
    {
        return;
    }
    let boot_id = workset.view_of(node).and_then(|v| v.boot_id.clone());
    let pod = interrupt_pod(
        &context.config.pods,
        &pass.owner,
        package,
        &merged.interrupt,
        &PodNode::new(node, boot_id.as_deref()).at_order(at.order),
    );
    let message = format!(
        "Interrupting node [{node}] with {} for package [{}:{}]",
        merged.interrupt.type_, package.name, package.version
    );
    let launch = (node, package, Stage::Interrupt, merged.interrupt.type_);
    start_interrupt(workset, context, &pass.owner, launch, pod, message, run);
}

/// Creates the interrupt `pod` (of type `interrupt`) running `stage` of `package` on `node`,
/// records its entry `in_progress`, and reports the launch.
fn start_interrupt<'s>(
    workset: &mut Workset<'s>,
    context: &Context<'s>,
    owner: &OwnerSkyhook<'_>,
    (node, package, stage, interrupt): (&str, &Package, Stage, InterruptType),
    pod: Pod,
    message: String,
    run: &mut NodeRun,
) {
    let skyhook = owner.name;
    let kind = JobKind::Interrupt {
        reboot: interrupt == InterruptType::Reboot,
    };
    let Some(pod) = workset.planned_pod(context, owner, (package, stage, kind), &pod) else {
        return;
    };
    let label = package_label(&package.name, &package.version);
    workset.create_pod((skyhook, node, label), pod, None);
    workset.set_entry(skyhook, node, entry_for(package, stage, State::InProgress));
    workset.set_status(skyhook, node, Status::InProgress);
    run.applied = Some(message.clone());
    workset.emit(
        EventTarget::Skyhook(skyhook.to_owned()),
        event_kinds::INTERRUPT_NODE,
        message,
    );
}

/// Runs `package`'s own interrupt after its explicit uninstall, once no pod on the node
/// holds its interrupts and it is drained. Each package fires its own; nothing is merged or
/// skipped. A package whose `interrupt` was removed meanwhile has nothing to run, so its
/// cycle ends here instead of stranding the node (an upstream defect).
pub(super) fn uninstall_interrupt<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    at: &NodeWave<'_>,
    package: &Package,
    run: &mut NodeRun,
) {
    let (name, node) = (pass.name(), at.node);
    let Some(interrupt) = package.interrupt.clone() else {
        let done = entry_for(package, Stage::UninstallInterrupt, State::Complete);
        workset.set_entry(name, node, done);
        return;
    };
    if workset.pods_hold_interrupts(context, node)
        || ready_for_interrupt(
            context,
            workset,
            pass,
            at,
            (package, Stage::UninstallInterrupt),
            run,
        ) != Readiness::Ready
    {
        return;
    }
    let boot_id = workset.view_of(node).and_then(|v| v.boot_id.clone());
    let pod = uninstall_interrupt_pod(
        &context.config.pods,
        &pass.owner,
        package,
        &interrupt,
        &PodNode::new(node, boot_id.as_deref()).at_order(at.order),
    );
    let message = format!(
        "Interrupting node [{node}] with {} after uninstalling package [{}:{}]",
        interrupt.type_, package.name, package.version
    );
    let launch = (node, package, Stage::UninstallInterrupt, interrupt.type_);
    start_interrupt(workset, context, &pass.owner, launch, pod, message, run);
}
