//! `spec.prePullImages` (`PRE_PULL_IMAGES`) in one Skyhook's pass: before a node is cordoned
//! and drained for a package with an interrupt, the images of every package still to run on it
//! are pulled there by a short pod ([`crate::pre_pull`]) while the node keeps working.
//!
//! [`pre_pull`] is the gate the cordon waits behind: it creates the pod, waits for it, and on a
//! pull the kubelet reports failing turns the packages of that image `erroring` (the node
//! `erroring`, a Warning Event on the node and the Skyhook once) without ever cordoning the
//! node. The failing pod is kept, so the kubelet keeps retrying: a registry back, or the image
//! pushed, lets the node go on by itself; a corrected version in the spec is another image set,
//! hence another pod. A pod nobody waits for in this plan (its node cordoned, its Skyhook
//! paused, done or gone, its image set stale) is deleted by [`sweep_pre_pulls`]. A node whose
//! pull failed is released like any uncordoned failed node: it leaves the batch and a later
//! batch tries it again, while its failing pod is kept by [`keep_failed_pulls`]. A Skyhook
//! being deleted pulls nothing first.

use std::collections::BTreeMap;

use skyhook_api::keys;
use skyhook_api::stage::entry_for;
use skyhook_api::v1alpha1::{Package, Stage, State, Status};

use super::context::Context;
use super::event_kinds;
use super::node_work::NodeWork;
use super::output::EventTarget;
use super::pass::Pass;
use super::wave::{DrainFor, NodeRun, NodeWave, PrePullHold};
use super::workset::Workset;
use crate::pre_pull::{PullImage, PullState, images_to_pull, pre_pull_pod, references};

/// Whether a node may be cordoned for the pass's Skyhook, as far as its images go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PrePull {
    /// Nothing to pull first (off, already cordoned or draining for the Skyhook), or pulled.
    Open,
    /// The images are being pulled.
    Waiting,
    /// An image cannot be pulled: the packages needing it are `erroring`.
    Failed,
}

/// The pre-pull gate of `at.node` for the pass's Skyhook before `drain_for`'s cordon.
pub(super) fn pre_pull<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    at: &NodeWave<'_>,
    drain_for: DrainFor<'_>,
    run: &mut NodeRun,
) -> PrePull {
    let keys = pass.keys();
    let (name, node) = (pass.name(), at.node);
    if !pulls_first(context, pass) {
        return PrePull::Open;
    }
    let Some(work) = workset.nodes.get(node) else {
        return PrePull::Waiting;
    };
    let annotations = work.annotations();
    if cordoned_for(work, pass) || annotations.contains_key(&keys.drain_start_annotation(name)) {
        // The disruption has begun: what was to be found before it was.
        return PrePull::Open;
    }
    let packages = packages_to_run(workset, pass, at);
    let images = images_to_pull(&context.config.pods, packages.values().copied());
    let pod = pre_pull_pod(&context.config.pods, &pass.owner, node, &images);
    let Some(pod_name) = pod.metadata.name.clone() else {
        return PrePull::Waiting;
    };
    let existing = (context.snapshot.pre_pulls.iter()).find(|p| p.name == pod_name);
    workset.pre_pulls_wanted.insert(pod_name.clone());
    let Some(existing) = existing else {
        if workset.pre_pull_created(&pod_name) {
            run.pre_pull = Some(PrePullHold::Pulling);
            return PrePull::Waiting;
        }
        if workset.pod_count(context, node) < context.config.max_pods_per_node {
            let list = references(&images).join(", ");
            workset.emit(
                EventTarget::Node(node.to_owned()),
                event_kinds::PRE_PULL,
                format!(
                    "pulling [{list}] on node [{node}] for Skyhook [{name}] before it is cordoned"
                ),
            );
            workset.create_pre_pull(pod);
        }
        run.pre_pull = Some(PrePullHold::Pulling);
        return PrePull::Waiting;
    };
    match &existing.state {
        _ if existing.deleting => {
            run.pre_pull = Some(PrePullHold::Pulling);
            PrePull::Waiting
        }
        PullState::Pulling => {
            run.pre_pull = Some(PrePullHold::Pulling);
            PrePull::Waiting
        }
        PullState::Pulled => PrePull::Open,
        PullState::Refused(reason) => {
            // Made again once this one is gone.
            workset.pre_pulls_wanted.remove(&pod_name);
            let why = format!("the kubelet refused it ({reason}); it is made again");
            workset.delete_pod(&pod_name, why);
            run.pre_pull = Some(PrePullHold::Pulling);
            PrePull::Waiting
        }
        PullState::Failed(failure) => {
            let Some(image) = images.iter().find(|i| i.reference == failure.image) else {
                run.pre_pull = Some(PrePullHold::Pulling);
                return PrePull::Waiting;
            };
            let labels: Vec<String> = (image.packages.iter())
                .filter_map(|p| packages.get(p.as_str()))
                .map(|p| format!("{}:{}", p.name, p.version))
                .collect();
            let message = format!(
                "image [{}] of package [{}] cannot be pulled on node [{node}]: {}: {}; the node was not cordoned. Fix the image or version in spec.packages, or the registry or spec.imagePullSecrets: the kubelet keeps retrying",
                failure.image,
                labels.join(", "),
                failure.reason,
                failure.message
            );
            let newly = fail_packages(workset, pass, node, (image, &packages), drain_for);
            workset.set_status(name, node, Status::Erroring);
            if newly {
                for target in [
                    EventTarget::Node(node.to_owned()),
                    EventTarget::Skyhook(name.to_owned()),
                ] {
                    workset.emit(target, event_kinds::PRE_PULL_FAILED, message.clone());
                }
            }
            let short = format!("[{}] {}", failure.image, failure.reason);
            run.pre_pull = Some(PrePullHold::Failed(short));
            PrePull::Failed
        }
    }
}

/// Whether the pass's Skyhook pulls its images before a cordon. A Skyhook being deleted pulls
/// nothing first: nothing may keep its deletion from ending.
fn pulls_first(context: &Context<'_>, pass: &Pass<'_>) -> bool {
    (pass.skyhook.spec).pre_pulls_images(context.config.pre_pull_images) && !pass.rules.deleting
}

/// Whether `work`'s node is cordoned for the pass's Skyhook.
fn cordoned_for(work: &NodeWork<'_>, pass: &Pass<'_>) -> bool {
    let cordon = pass.keys().cordon_annotation(pass.name());
    work.unschedulable() && work.annotations().contains_key(&cordon)
}

/// The packages whose pods run on the node while it is cordoned, by name: the wave's
/// (uninstalls included) and every spec package not complete there at its version.
fn packages_to_run<'p>(
    workset: &mut Workset<'_>,
    pass: &'p Pass<'_>,
    at: &'p NodeWave<'_>,
) -> BTreeMap<&'p str, &'p Package> {
    let (name, node) = (pass.name(), at.node);
    let mut packages: BTreeMap<&str, &Package> = at
        .wave
        .items()
        .map(|(package, _)| (package.name.as_str(), package))
        .collect();
    for package in pass.skyhook.spec.packages.values() {
        let complete = workset
            .entry(name, node, package)
            .is_some_and(|entry| entry.state == State::Complete);
        if !complete {
            packages.entry(package.name.as_str()).or_insert(package);
        }
    }
    packages
}

/// Turns the packages needing `image` `erroring` on `node`: the one waiting for the drain at
/// its stage, the others at the stage they are in (at `apply` when not started). Returns
/// whether one of them was not `erroring` yet.
fn fail_packages(
    workset: &mut Workset<'_>,
    pass: &Pass<'_>,
    node: &str,
    (image, packages): (&PullImage, &BTreeMap<&str, &Package>),
    (waiting, waiting_stage): DrainFor<'_>,
) -> bool {
    let name = pass.name();
    let mut newly = false;
    for package in image
        .packages
        .iter()
        .filter_map(|p| packages.get(p.as_str()))
    {
        let entry = workset.entry(name, node, package);
        let stage = match &entry {
            _ if package.name == waiting.name => waiting_stage,
            Some(entry) if entry.state != State::Complete => entry.stage,
            _ => Stage::Apply,
        };
        let erroring = entry_for(package, stage, State::Erroring);
        if entry
            .as_ref()
            .is_none_or(|e| e.state != State::Erroring || e.stage != stage)
        {
            newly = true;
            let restarts = entry.map_or(0, |e| e.restarts);
            workset.set_entry(
                name,
                node,
                skyhook_api::v1alpha1::PackageStatus {
                    restarts,
                    ..erroring
                },
            );
        }
    }
    newly
}

/// Keeps the failing pulls of the pass's nodes that left the batch: while a node's packages
/// stay `erroring` for an image its pod cannot pull, that pod stays, so the kubelet keeps
/// retrying it with its own back-off, the node's next batch finds the failure at once (no pod
/// made, no Event sent again) and the status keeps naming the image. A pull of an image the
/// spec no longer asks for, or of a node now cordoned for the Skyhook, is not kept.
pub(super) fn keep_failed_pulls(context: &Context<'_>, workset: &mut Workset<'_>, pass: &Pass<'_>) {
    let name = pass.name();
    if !pulls_first(context, pass) {
        return;
    }
    let packages = &pass.skyhook.spec.packages;
    let images = images_to_pull(&context.config.pods, packages.values());
    for run in (context.snapshot.pre_pulls.iter()).filter(|r| r.skyhook == name && !r.deleting) {
        let PullState::Failed(failure) = &run.state else {
            continue;
        };
        let Some(image) = images.iter().find(|i| i.reference == failure.image) else {
            continue;
        };
        let cordoned = (workset.nodes.get(run.node.as_str())).is_none_or(|w| cordoned_for(w, pass));
        let erroring = (image.packages.iter())
            .filter_map(|p| packages.get(p))
            .any(|package| {
                workset
                    .entry(name, &run.node, package)
                    .is_some_and(|entry| entry.state == State::Erroring)
            });
        if erroring && !cordoned {
            workset.pre_pulls_wanted.insert(run.name.clone());
        }
    }
}

/// Deletes every pre-pull pod no gate of this plan waits for.
pub(super) fn sweep_pre_pulls(context: &Context<'_>, workset: &mut Workset<'_>) {
    for run in &context.snapshot.pre_pulls {
        if !run.deleting && !workset.pre_pulls_wanted.contains(&run.name) {
            workset.delete_pod(&run.name, "no node waits for this pull any more");
        }
    }
}

/// The `PrePullHeld` reason and message for the nodes the gate holds in one pass, if any.
pub(super) fn pre_pull_condition(held: &[(String, PrePullHold)]) -> Option<(&'static str, String)> {
    if held.is_empty() {
        return None;
    }
    let failed: Vec<String> = (held.iter())
        .filter_map(|(node, hold)| match hold {
            PrePullHold::Failed(what) => Some(format!("{node} ({what})")),
            PrePullHold::Pulling => None,
        })
        .collect();
    let pulling: Vec<&str> = (held.iter())
        .filter(|(_, hold)| *hold == PrePullHold::Pulling)
        .map(|(node, _)| node.as_str())
        .collect();
    let mut parts = Vec::new();
    if !failed.is_empty() {
        parts.push(format!(
            "{} cannot be pulled on {}: {}; those nodes stay uncordoned and their packages erroring",
            plural(failed.len(), "an image", "images"),
            plural(failed.len(), "1 node", &format!("{} nodes", failed.len())),
            bounded(&failed)
        ));
    }
    if !pulling.is_empty() {
        parts.push(format!(
            "pulling images before the cordon on {}: {}",
            plural(pulling.len(), "1 node", &format!("{} nodes", pulling.len())),
            bounded(&pulling)
        ));
    }
    let reason = match failed.is_empty() {
        true => keys::PRE_PULL_PULLING_REASON,
        false => keys::PRE_PULL_FAILED_REASON,
    };
    Some((reason, parts.join("; ")))
}

fn plural<'a>(count: usize, one: &'a str, many: &'a str) -> &'a str {
    if count == 1 { one } else { many }
}

/// At most [`LISTED`] items, then how many more.
fn bounded(items: &[impl AsRef<str>]) -> String {
    let listed: Vec<&str> = items.iter().take(LISTED).map(AsRef::as_ref).collect();
    match items.len().saturating_sub(LISTED) {
        0 => listed.join(", "),
        more => format!("{} and {more} more", listed.join(", ")),
    }
}

/// Nodes a condition message names before it counts the rest.
const LISTED: usize = 10;
