//! Packages on one selected node (spec §2.7): the runnable wave after pending uninstalls, the
//! wave's merged interrupt with its owner and `skipped` entries, one pod per (node, package,
//! stage) after its node-metadata ConfigMap. Cordon, drain and the interrupt pod are in
//! `interrupts`; package ConfigMaps in `configs`.

use std::collections::BTreeMap;

use skyhook_api::graph::PackageGraph;
use skyhook_api::interrupt::{effective_interrupts, has_interrupt, merge_interrupts};
use skyhook_api::resources::pod_requests;
use skyhook_api::stage::{
    NextStep, entry_for, next_step, package_complete, pending_uninstalls, uninstall_package,
};
use skyhook_api::v1alpha1::{Interrupt, Package, PackageStatus, Skyhook, Stage, State, Status};

use super::status::Outcome;
use super::{EventTarget, Planner};
use crate::configmaps::{NodeFacts, node_metadata_configmap};
use crate::names::{OwnerSkyhook, package_label};
use crate::pods::package_pod;
use crate::reconcile::snapshot::NodeView;

pub(super) fn changed_keys<'u>(
    updates: &'u BTreeMap<String, Vec<String>>,
    package: &str,
) -> &'u [String] {
    updates.get(package).map_or(&[][..], Vec::as_slice)
}

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

impl<'s> Planner<'s> {
    /// Runs the next step of every package of `skyhook` on `node`.
    pub(super) fn run_node(
        &mut self,
        skyhook: &Skyhook,
        owner: &OwnerSkyhook<'_>,
        node: &str,
        updates: &BTreeMap<String, Vec<String>>,
        outcome: &mut Outcome,
    ) {
        let name = owner.name;
        let packages = &skyhook.spec.packages;
        let graph = match PackageGraph::from_packages(packages) {
            Ok(graph) => graph,
            Err(errors) => {
                self.event(
                    EventTarget::Skyhook(name.to_owned()),
                    true,
                    "Invalid",
                    format!("the package dependencies are invalid: {errors}; fix spec.packages"),
                );
                return;
            }
        };
        let Some(work) = self.nodes.get_mut(node) else {
            return;
        };
        // A pod pinned to a node whose kubelet is not Ready cannot start, and a node in that
        // state must not be cordoned or drained on Skyhook's behalf: wait for it.
        if !work.view.ready {
            return;
        }
        let state = work.state(name).clone();
        let runnable: Vec<Package> = graph
            .runnable(|p| {
                packages.get(p.name).is_some_and(|package| {
                    package_complete(
                        state.get_version(p.name, p.version),
                        has_interrupt(package, changed_keys(updates, p.name)),
                    )
                })
            })
            .into_iter()
            .filter_map(|p| packages.get(p.name).cloned())
            .collect();
        let uninstalls: Vec<Package> = pending_uninstalls(&state)
            .into_iter()
            .map(uninstall_package)
            .collect();
        let wave: BTreeMap<String, Vec<Interrupt>> = runnable
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    effective_interrupts(p, changed_keys(updates, &p.name)),
                )
            })
            .filter(|(_, interrupts)| !interrupts.is_empty())
            .collect();
        let merged = merge_interrupts(&wave);

        let previous = (!uninstalls.is_empty())
            .then(|| self.packages_last_read(name, node))
            .flatten();
        let mut owner_ready = false;
        let items = uninstalls
            .iter()
            .map(|p| (p, true))
            .chain(runnable.iter().map(|p| (p, false)));
        for (package, uninstall) in items {
            let label = package_label(&package.name, &package.version);
            let pod_exists = self.pod_exists(name, node, &label);
            let entry = self.entry(name, node, package);
            let interrupting = if uninstall {
                uninstall_interrupts(packages, previous.as_ref(), &package.name)
            } else {
                wave.contains_key(&package.name)
            };
            let step = next_step(entry.as_ref(), interrupting, pod_exists);
            if interrupting {
                if entry.as_ref().is_some_and(|e| e.state == State::Skipped) {
                    continue;
                }
                match step {
                    NextStep::Run(Stage::Interrupt) => {
                        if merged.as_ref().is_some_and(|m| m.owner == package.name) {
                            owner_ready = true;
                        } else {
                            self.set_entry(
                                name,
                                node,
                                entry_for(package, Stage::Interrupt, State::Skipped),
                            );
                        }
                        continue;
                    }
                    // Uninstall and upgrade scripts change what running workloads use, so
                    // they wait for the cordon and drain just as an apply does.
                    NextStep::Run(stage @ (Stage::Apply | Stage::Upgrade | Stage::Uninstall))
                        if !self.ready_for_interrupt(skyhook, name, node, outcome) =>
                    {
                        let waiting = entry_for(package, Stage::Apply, State::InProgress);
                        if stage == Stage::Apply && entry.as_ref() != Some(&waiting) {
                            self.set_entry(name, node, waiting);
                        }
                        self.set_status(name, node, Status::InProgress);
                        if skyhook.spec.serial {
                            break;
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            match step {
                NextStep::Run(stage) if stage != Stage::Interrupt => {
                    self.launch(owner, package, node, stage, outcome);
                }
                NextStep::Complete => continue,
                NextStep::Run(_) | NextStep::Wait => {}
            }
            if skyhook.spec.serial {
                break;
            }
        }
        if let (true, Some(merged)) = (owner_ready, merged) {
            self.interrupt(skyhook, owner, node, &merged, &wave, outcome);
        }
    }

    pub(super) fn entry(
        &mut self,
        skyhook: &str,
        node: &str,
        package: &Package,
    ) -> Option<PackageStatus> {
        self.nodes
            .get_mut(node)?
            .state(skyhook)
            .get_version(&package.name, &package.version)
            .cloned()
    }

    pub(super) fn set_entry(&mut self, skyhook: &str, node: &str, entry: PackageStatus) {
        if let Some(work) = self.nodes.get_mut(node) {
            work.state(skyhook).upsert(entry);
        }
    }

    pub(super) fn set_status(&mut self, skyhook: &str, node: &str, status: Status) {
        if let Some(work) = self.nodes.get_mut(node) {
            work.set_status(skyhook, status);
        }
    }

    pub(super) fn view(&self, node: &str) -> Option<&'s NodeView> {
        let snapshot: &'s super::Snapshot = self.snapshot;
        snapshot.nodes.iter().find(|n| n.name == node)
    }

    /// Creates the pod running `stage` of `package` when the node has a pod slot for it
    /// ([`Planner::has_pod_slot`]); otherwise the package waits and a later reconcile, woken
    /// when one of the node's pods is gone, starts it. Its node-metadata ConfigMap is written
    /// before it, as `finish` leaves it.
    pub(super) fn launch(
        &mut self,
        owner: &OwnerSkyhook<'_>,
        package: &Package,
        node: &str,
        stage: Stage,
        outcome: &mut Outcome,
    ) {
        // Checked before the pod is built: with hundreds of packages waiting, most launches
        // of a reconcile end here.
        if self.pod_count(node) >= self.config.max_pods_per_node {
            return;
        }
        let Some(view) = self.view_of(node) else {
            return;
        };
        let boot_id = view.boot_id.clone();
        let pod = match package_pod(
            &self.config.pods,
            owner,
            package,
            node,
            stage,
            boot_id.as_deref(),
        ) {
            Ok(pod) => pod,
            Err(error) => {
                self.event(
                    EventTarget::Skyhook(owner.name.to_owned()),
                    true,
                    "Apply",
                    error.to_string(),
                );
                return;
            }
        };
        let requests = pod
            .spec
            .as_ref()
            .and_then(|spec| pod_requests(spec).ok())
            .unwrap_or_default();
        if !self.has_pod_slot(node, requests) {
            return;
        }
        self.metadata_due
            .insert((owner.name.to_owned(), node.to_owned()));
        self.plan.create_pods.push(pod);
        if self.can_ever_fit(node, requests) {
            let created = self.created_requests.entry(node.to_owned()).or_default();
            *created = created.plus(requests);
        }
        self.created_on.entry(node.to_owned()).or_default().push((
            owner.name.to_owned(),
            package_label(&package.name, &package.version),
        ));
        let mut entry = entry_for(package, stage, State::InProgress);
        // A stage created again after its pod was refused by the node keeps its count of
        // attempts: the backoff of the next refusal grows from it.
        if let Some(previous) = self
            .entry(owner.name, node, package)
            .filter(|previous| previous.stage == stage && previous.state == State::InProgress)
        {
            entry.restarts = previous.restarts;
        }
        self.set_entry(owner.name, node, entry);
        self.set_status(owner.name, node, Status::InProgress);
        let message = format!(
            "Applying package [{}:{}] stage {stage} to node [{node}]",
            package.name, package.version
        );
        outcome.applied = Some(skyhook_api::keys::apply_package_message(
            &package.name,
            &package.version,
            node,
        ));
        self.event(
            EventTarget::Node(node.to_owned()),
            false,
            "Apply",
            message.clone(),
        );
        self.event(
            EventTarget::Skyhook(owner.name.to_owned()),
            false,
            "Apply",
            message,
        );
    }

    /// The packages the node-metadata ConfigMap of (`skyhook`, `node`) last gave the node's
    /// pods (its `packages.json`), if it exists and reads.
    fn packages_last_read(&self, skyhook: &str, node: &str) -> Option<BTreeMap<String, Package>> {
        let name = crate::names::node_metadata_configmap_name(skyhook, node);
        let text = self
            .snapshot
            .metadata_configmaps
            .get(&name)?
            .data
            .get(crate::configmaps::PACKAGES_KEY)?;
        crate::configmaps::read_packages_json(text)
    }

    /// Upserts the node-metadata ConfigMap of (`skyhook`, `node`), which the package pods
    /// starting there read, when it differs from the one read. It is built from the node as
    /// this plan leaves it (state entries, status, cordon), not from the snapshot: the pods
    /// start after the node patch, and the snapshot is one plan behind it.
    pub(super) fn node_metadata(&mut self, skyhook: &str, node: &str) {
        let snapshot: &'s super::Snapshot = self.snapshot;
        let Some(skyhook) = snapshot
            .skyhooks
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(skyhook))
        else {
            return;
        };
        let (Ok(owner), Some(work)) = (OwnerSkyhook::new(skyhook), self.nodes.get(node)) else {
            return;
        };
        let annotations = work.current_annotations();
        let desired = node_metadata_configmap(
            &self.config.pods,
            &owner,
            &skyhook.spec.packages,
            NodeFacts {
                name: node,
                labels: work.labels(),
                annotations: &annotations,
            },
        );
        let name = desired.metadata.name.clone().unwrap_or_default();
        let current = snapshot.metadata_configmaps.get(&name).map(|c| &c.data);
        if current != desired.data.as_ref() {
            self.plan.upsert_configmaps.push(desired);
        }
    }
}
