//! The pure plan: from one [`Snapshot`], the configuration and the time, every write of one
//! reconcile (spec §2.2–§2.12).
//!
//! Contract: [`plan`] is synchronous, reads no clock and touches no client. Node bookkeeping is
//! computed on working copies of the nodes and returned as per-node patches of exactly what
//! changed, so a reconcile writes in proportion to what changed, never to cluster size. The
//! rules themselves live in `skyhook_api` (ordering, budget, stage, interrupt, status,
//! runtime_required, toleration) and in the controller's builders (`pods`, `configmaps`,
//! `drain`, `pod_match`); this module sequences them.
//!
//! Every step is a function of the read-only [`Context`] (`context`: snapshot, configuration,
//! time, pods per node) and the plan's one mutable [`Workset`] (`workset`: the nodes' working
//! copies in `node_work`, the plan being built, the pods this plan creates or deletes); what a
//! step leaves for a later one beyond the work set is its typed return value:
//!
//! 0. [`adoption`] lets a live object adopt the node state its twin of the other API group
//!    left (a migration), keeps and later prunes the twin's keys, and writes the twin's
//!    condition and finalizer;
//! 1. [`auto_taint`] taints new nodes (`taints`), which join no pass until the taint landed;
//! 2. [`pod_results`] turns pod outcomes into node-state edits, deletions and Events, and
//!    returns the reboots found not confirmed ([`PodResults`](pod_results::PodResults));
//! 3. per Skyhook in (priority, name) order ([`pass_order`]): [`admit`] (`admission`:
//!    finalizer, deletion in `deletion`, validation) returns the [`Pass`](pass::Pass) its
//!    steps read, and [`run_pass`] (`skyhooks`) runs it after the passes before it and returns
//!    its [`PassOutcome`](skyhooks::PassOutcome) (progress for the Skyhooks after it,
//!    completion per node): what changed since the last pass (`spec_changes`: reboots, version
//!    changes, pods that no longer match; `reboots`: lost interrupts; `configs`: ConfigMap
//!    changes), node statuses, the pure batch selection (`selection`), the packages of the
//!    selected nodes' waves (`wave`, `packages`) with cordon, drain and the wave's merged
//!    interrupt (`interrupts`), node conditions (`node_states`), and the pure next status
//!    (`status`);
//! 4. [`runtime_required`] removes the runtime-required taint per node by the passes'
//!    [`Completion`], cordoning the node in the same patch for `runtimeRequiredCordonAfter`
//!    (`taints`);
//! 5. [`finish`] writes the node-metadata ConfigMaps of the pods this plan starts and turns
//!    the nodes' working copies into patches.
//!
//! The types a plan returns are in `output`. Steps import only the modules below them, never
//! this one, which holds nothing but the sequence.
//!
//! Deliberate choices: a drain's start is recorded in the node annotation `drainStart_<skyhook>`
//! ([`skyhook_api::keys::Keys::drain_start_annotation`], upstream's) so that the drain timeout
//! survives restarts, while the evictions a PodDisruptionBudget refused are only remembered in
//! memory ([`crate::drain::refusals`], as upstream's retry timer); an invalidated pod is deleted
//! at once rather than first annotated `invalid`.

mod admission;
mod adoption;
mod configs;
mod context;
mod deletion;
pub mod event_kinds;
mod finish;
mod interrupts;
mod job_lifecycle;
mod node_states;
mod node_work;
mod output;
mod packages;
mod pass;
mod planned_pod;
mod pod_results;
mod pre_pulls;
mod readiness_gates;
mod reboots;
mod selection;
mod skyhooks;
mod spec_changes;
mod status;
mod taints;
mod wave;
mod workset;

#[cfg(test)]
mod tests;

use jiff::Timestamp;

use crate::config::Config;

use super::snapshot::Snapshot;
use admission::{admit, pass_order};
use adoption::adoption;
use context::Context;
use finish::finish;
use job_lifecycle::job_lifecycle;
pub use output::{
    ConfigMapMove, DRAIN_POLL, EventTarget, Eviction, MalformedNodeState, NodePatch,
    NonInterruptHold, Plan, PlannedEvent, StageDuration, TwinWrite, node_write_order,
};
pub use planned_pod::PlannedPod;
use pod_results::pod_results;
use pre_pulls::sweep_pre_pulls;
use skyhooks::run_pass;
use taints::{Completion, auto_taint, runtime_required};
use workset::Workset;

/// Computes the plan of one reconcile.
pub fn plan(snapshot: &Snapshot, config: &Config, now: Timestamp) -> Plan {
    let context = Context::new(snapshot, config, now);
    let mut workset = Workset::new(&context);
    // Each step reads what the steps before it left on the nodes.
    adoption(&context, &mut workset);
    auto_taint(&context, &mut workset);
    let pod_results = pod_results(&context, &mut workset);
    let mut earlier = Vec::new();
    let mut completion = Completion::new();
    for skyhook in pass_order(&snapshot.skyhooks) {
        let Some(pass) = admit(&context, &mut workset, skyhook) else {
            continue;
        };
        let outcome = run_pass(&context, &mut workset, &pass, &pod_results, &earlier);
        completion.extend(outcome.completion);
        earlier.push(outcome.progress);
    }
    runtime_required(&context, &mut workset, &completion);
    sweep_pre_pulls(&context, &mut workset);
    job_lifecycle(&context, &mut workset);
    finish(&context, workset)
}
