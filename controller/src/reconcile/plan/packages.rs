//! Packages on one selected node (spec §2.7): the next step of each package of the node's wave
//! ([`wave`](super::wave)), the wave's `skipped` interrupt entries, one pod per (node,
//! package, stage) after its node-metadata ConfigMap. Cordon, drain and the interrupt pod are
//! in `interrupts`; package ConfigMaps in `configs`.

use std::collections::BTreeMap;

use skyhook_api::graph::PackageGraph;
use skyhook_api::interrupt::has_interrupt;
use skyhook_api::resources::{CpuMemory, pod_requests};
use skyhook_api::stage::{NextStep, entry_for, next_step};
use skyhook_api::v1alpha1::{Package, PackageStatus, Stage, State, Status};

use super::context::Context;
use super::event_kinds;
use super::interrupts::{Readiness, interrupt, ready_for_interrupt, uninstall_interrupt};
use super::output::EventTarget;
use super::pass::Pass;
use super::planned_pod::PlannedPod;
use super::wave::{DrainFor, NodeRun, NodeWave, Wave};
use super::workset::Workset;
use crate::jobs::JobKind;
use crate::names::{OwnerSkyhook, package_label};
use crate::pods::{PodNode, package_pod};

/// Whether uninstalling `package` needs the node cordoned and drained first. The node-state
/// entry records no interrupt. A downgraded package is judged by its spec version's interrupt.
/// A package removed from the spec is judged by the spec as it was when the node's last
/// package pod started: the `packages.json` of the node-metadata ConfigMap (`previous`), which
/// is rewritten only when the next pod starts there. When that does not say (no ConfigMap, or
/// it does not list the package), the uninstall counts as interrupting: a needless drain is
/// safer than changing what running workloads use under them.
fn uninstall_interrupts(
    packages: &BTreeMap<String, Package>,
    previous: Option<&BTreeMap<String, Package>>,
    package: &str,
) -> bool {
    match packages.get(package) {
        Some(spec) => has_interrupt(spec, &[]),
        None => previous
            .and_then(|packages| packages.get(package))
            .is_none_or(|was| was.interrupt.is_some() || !was.config_interrupts.is_empty()),
    }
}

/// Where a node's wave goes after one package.
enum Flow {
    /// To the next package, whatever `serial` says.
    Next,
    /// To the next package unless the Skyhook is `serial`.
    NextUnlessSerial,
    /// The package owns the wave's interrupt and is ready for it.
    OwnerReady,
}

/// Runs the next step of every package of the pass's Skyhook on `node`.
pub(super) fn run_node<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    (node, order): (&str, i64),
    updates: &BTreeMap<String, Vec<String>>,
) -> NodeRun {
    let mut run = NodeRun::default();
    let name = pass.name();
    let packages = &pass.skyhook.spec.packages;
    let graph = match PackageGraph::from_packages(packages) {
        Ok(graph) => graph,
        Err(errors) => {
            let message =
                format!("the package dependencies are invalid: {errors}; fix spec.packages");
            workset.emit(
                EventTarget::Skyhook(name.to_owned()),
                event_kinds::INVALID,
                message,
            );
            return run;
        }
    };
    let Some(work) = workset.nodes.get_mut(node) else {
        return run;
    };
    // A pod pinned to a node whose kubelet is not Ready cannot start, and a node in that
    // state must not be cordoned or drained on Skyhook's behalf: wait for it.
    if !work.view.ready {
        return run;
    }
    let wave = Wave::of(packages, &graph, work.state(name), updates, pass.rules);
    let previous = (!wave.uninstalls.is_empty())
        .then(|| packages_last_read(context, name, node))
        .flatten();
    let at = NodeWave {
        node,
        order,
        wave,
        previous,
    };
    let mut owner_ready = false;
    for (package, uninstall) in at.wave.items() {
        match package_step(context, workset, pass, &at, package, uninstall, &mut run) {
            Flow::Next => {}
            Flow::OwnerReady => owner_ready = true,
            Flow::NextUnlessSerial if pass.skyhook.spec.serial => break,
            Flow::NextUnlessSerial => {}
        }
    }
    if owner_ready {
        interrupt(context, workset, pass, &at, &mut run);
    }
    run
}

/// The next step of one package of a node's wave.
fn package_step<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    at: &NodeWave<'_>,
    package: &Package,
    uninstall: bool,
    run: &mut NodeRun,
) -> Flow {
    let (name, node) = (pass.name(), at.node);
    let label = package_label(&package.name, &package.version);
    let pod_exists = workset.pod_exists(context, name, node, &label);
    let entry = workset.entry(name, node, package);
    let interrupting = if uninstall {
        uninstall_interrupts(
            &pass.skyhook.spec.packages,
            at.previous.as_ref(),
            &package.name,
        )
    } else {
        at.wave.interrupts.contains_key(&package.name)
    };
    let step = next_step(entry.as_ref(), interrupting, pod_exists);
    if interrupting {
        if entry.as_ref().is_some_and(|e| e.state == State::Skipped) {
            return Flow::Next;
        }
        match step {
            NextStep::Run(Stage::Interrupt) => {
                if at
                    .wave
                    .merged
                    .as_ref()
                    .is_some_and(|m| m.owner == package.name)
                {
                    return Flow::OwnerReady;
                }
                let skipped = entry_for(package, Stage::Interrupt, State::Skipped);
                workset.set_entry(name, node, skipped);
                return Flow::Next;
            }
            // Uninstall and upgrade scripts change what running workloads use, so they
            // wait for the cordon and drain just as an apply does.
            NextStep::Run(stage @ (Stage::Apply | Stage::Upgrade | Stage::Uninstall)) => {
                let drain_for = (package, stage);
                match ready_for_interrupt(context, workset, pass, at, drain_for, run) {
                    Readiness::Ready => {}
                    Readiness::Failed => return Flow::NextUnlessSerial,
                    Readiness::Waiting => {
                        wait_for_drain(workset, name, node, drain_for, entry.as_ref());
                        return Flow::NextUnlessSerial;
                    }
                }
            }
            _ => {}
        }
    }
    match step {
        NextStep::Run(Stage::UninstallInterrupt) => {
            uninstall_interrupt(context, workset, pass, at, package, run);
        }
        NextStep::Run(stage) if stage != Stage::Interrupt => {
            if let Some(applied) = launch(
                context,
                workset,
                &pass.owner,
                package,
                (node, at.order),
                stage,
            ) {
                run.applied = Some(applied);
            }
        }
        NextStep::Complete => return Flow::Next,
        NextStep::Run(_) | NextStep::Wait => {}
    }
    Flow::NextUnlessSerial
}

/// Records a package whose stage waits for the drain: `in_progress` at its apply (an
/// upgrade or uninstall keeps its entry).
fn wait_for_drain(
    workset: &mut Workset<'_>,
    skyhook: &str,
    node: &str,
    (package, stage): DrainFor<'_>,
    entry: Option<&PackageStatus>,
) {
    let waiting = entry_for(package, Stage::Apply, State::InProgress);
    if stage == Stage::Apply && entry != Some(&waiting) {
        workset.set_entry(skyhook, node, waiting);
    }
    workset.set_status(skyhook, node, Status::InProgress);
}

/// Creates the pod running `stage` of `package` when the node has a pod slot for it
/// ([`Workset::has_pod_slot`]); otherwise the package waits and a later reconcile, woken
/// when one of the node's pods is gone, starts it. Its node-metadata ConfigMap is written
/// before it, as `finish` leaves it. Returns the `ApplyPackage` message of a launch.
pub(super) fn launch<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    owner: &OwnerSkyhook<'_>,
    package: &Package,
    (node, order): (&str, i64),
    stage: Stage,
) -> Option<String> {
    // Checked before the pod is built: with hundreds of packages waiting, most launches
    // of a reconcile end here.
    if workset.pod_count(context, node) >= context.config.max_pods_per_node {
        return None;
    }
    let boot_id = workset.view_of(node)?.boot_id.clone();
    let pod = match package_pod(
        &context.config.pods,
        owner,
        package,
        &PodNode::new(node, boot_id.as_deref()).at_order(order),
        stage,
    ) {
        Ok(pod) => pod,
        Err(error) => {
            let target = EventTarget::Skyhook(owner.name.to_owned());
            workset.emit(target, event_kinds::POD_NOT_BUILT, error.to_string());
            return None;
        }
    };
    let requests = pod
        .spec
        .as_ref()
        .and_then(|spec| pod_requests(spec).ok())
        .unwrap_or_default();
    if !workset.has_pod_slot(context, node, requests) {
        return None;
    }
    let job = (package, stage, JobKind::PackageStage);
    let pod = workset.planned_pod(context, owner, job, &pod)?;
    record_pod(workset, (owner.name, node), package, pod, requests);
    let mut entry = entry_for(package, stage, State::InProgress);
    // A stage created again after its pod was refused by the node keeps its count of
    // attempts: the backoff of the next refusal grows from it.
    if let Some(previous) = workset
        .entry(owner.name, node, package)
        .filter(|previous| previous.stage == stage && previous.state == State::InProgress)
    {
        entry.restarts = previous.restarts;
    }
    workset.set_entry(owner.name, node, entry);
    workset.set_status(owner.name, node, Status::InProgress);
    let message = format!(
        "Applying package [{}:{}] stage {stage} to node [{node}]",
        package.name, package.version
    );
    let on_node = EventTarget::Node(node.to_owned());
    workset.emit(on_node, event_kinds::APPLY_PACKAGE, message.clone());
    let on_skyhook = EventTarget::Skyhook(owner.name.to_owned());
    workset.emit(on_skyhook, event_kinds::APPLY_PACKAGE, message);
    Some(skyhook_api::keys::apply_package_message(
        &package.name,
        &package.version,
        node,
    ))
}

/// The packages the node-metadata ConfigMap of (`skyhook`, `node`) last gave the node's
/// pods (its `packages.json`), if it exists and reads.
fn packages_last_read(
    context: &Context<'_>,
    skyhook: &str,
    node: &str,
) -> Option<BTreeMap<String, Package>> {
    let name = crate::names::node_metadata_configmap_name(skyhook, node);
    let text = context
        .snapshot
        .metadata_configmaps
        .get(&name)?
        .packages_json()?;
    crate::configmaps::read_packages_json(text)
}

/// Books a package pod this plan creates: its node's pod count and requests, and the
/// node-metadata ConfigMap it reads.
fn record_pod(
    workset: &mut Workset<'_>,
    (skyhook, node): (&str, &str),
    package: &Package,
    pod: PlannedPod,
    requests: CpuMemory,
) {
    workset
        .metadata_due
        .insert((skyhook.to_owned(), node.to_owned()));
    // A pod the node can never fit is refused and holds none of its resources.
    let held = workset.can_ever_fit(node, requests).then_some(requests);
    let label = package_label(&package.name, &package.version);
    workset.create_pod((skyhook, node, label), pod, held);
}
