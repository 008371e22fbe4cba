//! Packages on one selected node (spec §2.7): the runnable wave after pending uninstalls, the
//! wave's merged interrupt with its owner and `skipped` entries, cordon with ownership, the
//! `podNonInterruptLabels` gate and the drain before anything interrupting runs, one pod per
//! (node, package, stage); plus the package and node-metadata ConfigMaps (spec §2.6, §2.8).

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use skyhook_api::graph::PackageGraph;
use skyhook_api::interrupt::{
    ConfigChangeDecision, ConfigChangeNode, MergedInterrupt, changed_config_keys,
    config_change_decision, effective_interrupts, has_interrupt, merge_interrupts,
    record_config_updates,
};
use skyhook_api::stage::{
    NextStep, entry_for, next_step, package_complete, pending_uninstalls, uninstall_package,
};
use skyhook_api::v1alpha1::{
    Interrupt, Package, PackageStatus, Skyhook, SkyhookStatus, Stage, State, Status,
};

use super::status::Outcome;
use super::{DRAIN_POLL, EventTarget, Eviction, Planner};
use crate::configmaps::{NodeFacts, node_metadata_configmap, package_configmap};
use crate::drain::{blockers, drain, interrupt_blockers};
use crate::names::{OwnerSkyhook, package_label};
use crate::pods::{interrupt_pod, package_pod};
use crate::reconcile::snapshot::NodeView;

fn changed_keys<'u>(updates: &'u BTreeMap<String, Vec<String>>, package: &str) -> &'u [String] {
    updates.get(package).map_or(&[][..], Vec::as_slice)
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

        let mut owner_ready = false;
        let items = uninstalls
            .iter()
            .map(|p| (p, true))
            .chain(runnable.iter().map(|p| (p, false)));
        for (package, uninstall) in items {
            let label = package_label(&package.name, &package.version);
            let pod_exists = self.pod_exists(name, node, &label);
            let entry = self.entry(name, node, package);
            let interrupting = !uninstall && wave.contains_key(&package.name);
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
                    NextStep::Run(Stage::Apply)
                        if !self.ready_for_interrupt(skyhook, name, node, outcome) =>
                    {
                        let waiting = entry_for(package, Stage::Apply, State::InProgress);
                        if entry.as_ref() != Some(&waiting) {
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
                    self.launch(skyhook, owner, package, node, stage, outcome);
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

    fn entry(&mut self, skyhook: &str, node: &str, package: &Package) -> Option<PackageStatus> {
        self.nodes
            .get_mut(node)?
            .state(skyhook)
            .get_version(&package.name, &package.version)
            .cloned()
    }

    fn set_entry(&mut self, skyhook: &str, node: &str, entry: PackageStatus) {
        if let Some(work) = self.nodes.get_mut(node) {
            work.state(skyhook).upsert(entry);
        }
    }

    fn set_status(&mut self, skyhook: &str, node: &str, status: Status) {
        if let Some(work) = self.nodes.get_mut(node) {
            work.set_status(skyhook, status);
        }
    }

    fn view(&self, node: &str) -> Option<&'s NodeView> {
        let snapshot: &'s super::Snapshot = self.snapshot;
        snapshot.nodes.iter().find(|n| n.name == node)
    }

    /// Creates the pod running `stage` of `package`, after its node-metadata ConfigMap.
    fn launch(
        &mut self,
        skyhook: &Skyhook,
        owner: &OwnerSkyhook<'_>,
        package: &Package,
        node: &str,
        stage: Stage,
        outcome: &mut Outcome,
    ) {
        let Some(view) = self.view(node) else {
            return;
        };
        let boot_id = view.boot_id.clone();
        self.node_metadata(skyhook, owner, view);
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
        self.plan.create_pods.push(pod);
        self.created_on.entry(node.to_owned()).or_default().push((
            owner.name.to_owned(),
            package_label(&package.name, &package.version),
        ));
        self.set_entry(
            owner.name,
            node,
            entry_for(package, stage, State::InProgress),
        );
        self.set_status(owner.name, node, Status::InProgress);
        let message = format!(
            "Applying package [{}:{}] stage {stage} to node [{node}]",
            package.name, package.version
        );
        outcome.applied = Some(message.clone());
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

    /// Upserts the node-metadata ConfigMap of (`owner`, `node`) when it differs.
    fn node_metadata(&mut self, skyhook: &Skyhook, owner: &OwnerSkyhook<'_>, view: &NodeView) {
        let desired = node_metadata_configmap(
            &self.config.pods,
            owner,
            &skyhook.spec.packages,
            NodeFacts {
                name: &view.name,
                labels: &view.labels,
                annotations: &view.annotations,
            },
        );
        let name = desired.metadata.name.clone().unwrap_or_default();
        let current = self
            .snapshot
            .metadata_configmaps
            .get(&name)
            .map(|c| &c.data);
        let planned = self
            .plan
            .upsert_configmaps
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(name.as_str()));
        if !planned && current != desired.data.as_ref() {
            self.plan.upsert_configmaps.push(desired);
        }
    }

    /// Cordons `node` for `skyhook`, waits for protected pods, and drains it. True when
    /// nothing is left to move.
    fn ready_for_interrupt(
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
            .get(&format!("{}{name}", super::CORDONED_AT_PREFIX))
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
    fn interrupt(
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

    /// Package ConfigMaps: create new ones, apply or queue changed ones (spec §2.6), delete
    /// those of versions no longer in the spec and metadata ConfigMaps of nodes left behind.
    pub(super) fn config_updates(
        &mut self,
        skyhook: &Skyhook,
        owner: &OwnerSkyhook<'_>,
        matched: &[&NodeView],
        status: &mut SkyhookStatus,
    ) {
        let name = owner.name;
        let snapshot = self.snapshot;
        let mut wanted = BTreeSet::new();
        for package in skyhook.spec.packages.values() {
            let Some(desired) = package_configmap(&self.config.pods, owner, package) else {
                continue;
            };
            let cm_name = desired.metadata.name.clone().unwrap_or_default();
            wanted.insert(cm_name.clone());
            let Some(existing) = snapshot.package_configmaps.get(&cm_name) else {
                self.plan.upsert_configmaps.push(desired);
                continue;
            };
            if existing.data == package.config_map {
                continue;
            }
            let label = package_label(&package.name, &package.version);
            let interrupting =
                has_interrupt(package, changed_keys(&status.config_updates, &package.name));
            let per_node: Vec<(String, Option<PackageStatus>, bool)> = matched
                .iter()
                .map(|n| {
                    let entry = self.entry(name, &n.name, package);
                    let pod = self.pod_exists(name, &n.name, &label);
                    (n.name.clone(), entry, pod)
                })
                .collect();
            let nodes: Vec<ConfigChangeNode<'_>> = per_node
                .iter()
                .map(|(_, entry, pod)| ConfigChangeNode {
                    entry: entry.as_ref(),
                    pod_running: *pod,
                    complete: package_complete(entry.as_ref(), interrupting),
                })
                .collect();
            let ConfigChangeDecision::Apply {
                every_node_complete,
                delete_pods_on,
            } = config_change_decision(&nodes)
            else {
                continue;
            };
            let changed = changed_config_keys(&existing.data, &package.config_map);
            let previous = status
                .config_updates
                .get(&package.name)
                .cloned()
                .unwrap_or_default();
            status.config_updates.insert(
                package.name.clone(),
                record_config_updates(&previous, &changed, every_node_complete),
            );
            for (node, entry, _) in &per_node {
                if let Some(entry) = entry {
                    self.set_entry(
                        name,
                        node,
                        PackageStatus {
                            stage: Stage::Config,
                            state: State::InProgress,
                            ..entry.clone()
                        },
                    );
                    self.set_status(name, node, Status::InProgress);
                }
            }
            for index in delete_pods_on {
                let node = &per_node[index].0;
                let stale: Vec<String> = snapshot
                    .pods
                    .iter()
                    .filter(|p| p.skyhook == name && p.node == *node && p.package_label == label)
                    .map(|p| p.name.clone())
                    .collect();
                for pod in stale {
                    self.delete_pod(&pod, "its package's configMap changed");
                }
            }
            self.plan.upsert_configmaps.push(desired);
        }
        for (cm_name, owned) in &snapshot.package_configmaps {
            if owned.skyhook == name && !wanted.contains(cm_name) {
                self.plan.delete_configmaps.insert(cm_name.clone());
            }
        }
        for (cm_name, owned) in &snapshot.metadata_configmaps {
            let still = owned
                .node
                .as_deref()
                .is_some_and(|n| matched.iter().any(|m| m.name == n));
            if owned.skyhook == name && !still {
                self.plan.delete_configmaps.insert(cm_name.clone());
            }
        }
    }
}
