//! Packages on one selected node (spec §2.7): the runnable wave after pending uninstalls, the
//! wave's merged interrupt with its owner and `skipped` entries, one pod per (node, package,
//! stage) after its node-metadata ConfigMap. Cordon, drain and the interrupt pod are in
//! `interrupts`; package ConfigMaps in `configs`.

use std::collections::BTreeMap;

use skyhook_api::graph::PackageGraph;
use skyhook_api::interrupt::{
    MergedInterrupt, changed_keys, effective_interrupts, has_interrupt, merge_interrupts,
};
use skyhook_api::node_state::NodeState;
use skyhook_api::resources::{CpuMemory, pod_requests};
use skyhook_api::stage::{
    NextStep, entry_for, next_step, package_complete, pending_uninstalls, uninstall_package,
};
use skyhook_api::uninstall::{UninstallRules, held_by_uninstall};
use skyhook_api::v1alpha1::{Interrupt, Package, PackageStatus, Stage, State, Status};

use super::interrupts::{DrainFor, Readiness};
use super::skyhooks::Pass;
use super::{EventTarget, PlannedPod, Planner};
use crate::configmaps::{NodeFacts, node_metadata_configmap};
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

/// The packages one node runs next, and the interrupt they share.
pub(super) struct Wave {
    /// Uninstalls first: the legacy ones (removed packages and old versions, as minimal
    /// packages made from their entries) and the explicit ones (the full spec package).
    uninstalls: Vec<Package>,
    /// Packages that are not complete and whose dependencies are, without those an uninstall
    /// holds.
    runnable: Vec<Package>,
    /// The effective interrupts of the runnable packages that have one.
    pub(super) interrupts: BTreeMap<String, Vec<Interrupt>>,
    /// The runnable packages' interrupts merged into one, with the package that owns it.
    pub(super) merged: Option<MergedInterrupt>,
}

impl Wave {
    fn of(
        packages: &BTreeMap<String, Package>,
        graph: &PackageGraph,
        state: &NodeState,
        updates: &BTreeMap<String, Vec<String>>,
        rules: UninstallRules,
    ) -> Self {
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
            .filter(|p| !held_by_uninstall(state, p, rules.deleting))
            // A Skyhook being deleted starts no install of its own: only an uninstallable
            // package may finish the stages it is in, so that its uninstall can run.
            .filter(|p| !rules.deleting || p.uninstall_enabled())
            .collect();
        let explicit = packages
            .values()
            .filter(|p| {
                held_by_uninstall(state, p, rules.deleting)
                    && state.get_version(&p.name, &p.version).is_some()
            })
            .cloned();
        // A Skyhook being deleted runs only what its deletion waits for: the explicit
        // uninstalls, not the legacy ones of older versions (their pods would be removed as
        // abandoned, see `skyhook_api::pod_owner`).
        let legacy = if rules.deleting {
            Vec::new()
        } else {
            pending_uninstalls(state, packages, rules.mode)
        };
        let uninstalls = legacy
            .into_iter()
            .map(uninstall_package)
            .chain(explicit)
            .collect();
        let interrupts: BTreeMap<String, Vec<Interrupt>> = runnable
            .iter()
            .map(|p| {
                let changed = changed_keys(updates, &p.name);
                (p.name.clone(), effective_interrupts(p, changed))
            })
            .filter(|(_, interrupts)| !interrupts.is_empty())
            .collect();
        let merged = merge_interrupts(&interrupts);
        Wave {
            uninstalls,
            runnable,
            interrupts,
            merged,
        }
    }

    /// Every package of the wave with whether it is an uninstall, in the order they run.
    fn items(&self) -> impl Iterator<Item = (&Package, bool)> {
        let uninstalls = self.uninstalls.iter().map(|p| (p, true));
        uninstalls.chain(self.runnable.iter().map(|p| (p, false)))
    }
}

/// What running one node's packages reports for the Skyhook's status.
#[derive(Debug, Default)]
pub(super) struct NodeRun {
    /// The last launch, for the `ApplyPackage` condition.
    pub(super) applied: Option<String>,
    /// The drain of the node is past its timeout: why.
    pub(super) drain_blocked: Option<String>,
    /// The node waits for the fleet budget before its cordon.
    pub(super) fleet_waiting: bool,
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

/// One node's wave, as [`Planner::package_step`] reads it.
pub(super) struct NodeWave<'a> {
    pub(super) node: &'a str,
    /// The node's place in the rollout order (`SKYHOOK_NODE_ORDER`).
    pub(super) order: i64,
    pub(super) wave: Wave,
    /// The packages the node's pods last read, for removed packages' uninstalls.
    previous: Option<BTreeMap<String, Package>>,
}

impl<'s> Planner<'s> {
    /// Runs the next step of every package of the pass's Skyhook on `node`.
    pub(super) fn run_node(
        &mut self,
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
                self.event(
                    EventTarget::Skyhook(name.to_owned()),
                    true,
                    "Invalid",
                    message,
                );
                return run;
            }
        };
        let Some(work) = self.nodes.get_mut(node) else {
            return run;
        };
        // A pod pinned to a node whose kubelet is not Ready cannot start, and a node in that
        // state must not be cordoned or drained on Skyhook's behalf: wait for it.
        if !work.view.ready {
            return run;
        }
        let wave = Wave::of(packages, &graph, work.state(name), updates, pass.rules);
        let previous = (!wave.uninstalls.is_empty())
            .then(|| self.packages_last_read(name, node))
            .flatten();
        let at = NodeWave {
            node,
            order,
            wave,
            previous,
        };
        let mut owner_ready = false;
        for (package, uninstall) in at.wave.items() {
            match self.package_step(pass, &at, package, uninstall, &mut run) {
                Flow::Next => {}
                Flow::OwnerReady => owner_ready = true,
                Flow::NextUnlessSerial if pass.skyhook.spec.serial => break,
                Flow::NextUnlessSerial => {}
            }
        }
        if owner_ready {
            self.interrupt(pass, &at, &mut run);
        }
        run
    }

    /// The next step of one package of a node's wave.
    fn package_step(
        &mut self,
        pass: &Pass<'_>,
        at: &NodeWave<'_>,
        package: &Package,
        uninstall: bool,
        run: &mut NodeRun,
    ) -> Flow {
        let (name, node) = (pass.name(), at.node);
        let label = package_label(&package.name, &package.version);
        let pod_exists = self.pod_exists(name, node, &label);
        let entry = self.entry(name, node, package);
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
                    self.set_entry(name, node, skipped);
                    return Flow::Next;
                }
                // Uninstall and upgrade scripts change what running workloads use, so they
                // wait for the cordon and drain just as an apply does.
                NextStep::Run(stage @ (Stage::Apply | Stage::Upgrade | Stage::Uninstall)) => {
                    let drain_for = (package, stage);
                    match self.ready_for_interrupt(pass, node, drain_for, run) {
                        Readiness::Ready => {}
                        Readiness::Failed => return Flow::NextUnlessSerial,
                        Readiness::Waiting => {
                            self.wait_for_drain(name, node, drain_for, entry.as_ref());
                            return Flow::NextUnlessSerial;
                        }
                    }
                }
                _ => {}
            }
        }
        match step {
            NextStep::Run(Stage::UninstallInterrupt) => {
                self.uninstall_interrupt(pass, at, package, run);
            }
            NextStep::Run(stage) if stage != Stage::Interrupt => {
                if let Some(applied) = self.launch(&pass.owner, package, (node, at.order), stage) {
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
        &mut self,
        skyhook: &str,
        node: &str,
        (package, stage): DrainFor<'_>,
        entry: Option<&PackageStatus>,
    ) {
        let waiting = entry_for(package, Stage::Apply, State::InProgress);
        if stage == Stage::Apply && entry != Some(&waiting) {
            self.set_entry(skyhook, node, waiting);
        }
        self.set_status(skyhook, node, Status::InProgress);
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

    /// Creates the pod running `stage` of `package` when the node has a pod slot for it
    /// ([`Planner::has_pod_slot`]); otherwise the package waits and a later reconcile, woken
    /// when one of the node's pods is gone, starts it. Its node-metadata ConfigMap is written
    /// before it, as `finish` leaves it. Returns the `ApplyPackage` message of a launch.
    pub(super) fn launch(
        &mut self,
        owner: &OwnerSkyhook<'_>,
        package: &Package,
        (node, order): (&str, i64),
        stage: Stage,
    ) -> Option<String> {
        // Checked before the pod is built: with hundreds of packages waiting, most launches
        // of a reconcile end here.
        if self.pod_count(node) >= self.config.max_pods_per_node {
            return None;
        }
        let boot_id = self.view_of(node)?.boot_id.clone();
        let pod = match package_pod(
            &self.config.pods,
            owner,
            package,
            &PodNode::new(node, boot_id.as_deref()).at_order(order),
            stage,
        ) {
            Ok(pod) => pod,
            Err(error) => {
                let target = EventTarget::Skyhook(owner.name.to_owned());
                self.event(target, true, "Apply", error.to_string());
                return None;
            }
        };
        let requests = pod
            .spec
            .as_ref()
            .and_then(|spec| pod_requests(spec).ok())
            .unwrap_or_default();
        if !self.has_pod_slot(node, requests) {
            return None;
        }
        let pod = self.planned_pod(owner.name, &pod)?;
        self.record_pod(owner.name, node, package, pod, requests);
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
        let on_node = EventTarget::Node(node.to_owned());
        self.event(on_node, false, "Apply", message.clone());
        let on_skyhook = EventTarget::Skyhook(owner.name.to_owned());
        self.event(on_skyhook, false, "Apply", message);
        Some(skyhook_api::keys::apply_package_message(
            &package.name,
            &package.version,
            node,
        ))
    }

    /// Books a package pod this plan creates: its node's pod count and requests, and the
    /// node-metadata ConfigMap it reads.
    fn record_pod(
        &mut self,
        skyhook: &str,
        node: &str,
        package: &Package,
        pod: PlannedPod,
        requests: CpuMemory,
    ) {
        self.metadata_due
            .insert((skyhook.to_owned(), node.to_owned()));
        self.plan.create_pods.push(pod);
        if self.can_ever_fit(node, requests) {
            let created = self.created_requests.entry(node.to_owned()).or_default();
            *created = created.plus(requests);
        }
        self.created_on.entry(node.to_owned()).or_default().push((
            skyhook.to_owned(),
            package_label(&package.name, &package.version),
        ));
    }

    /// The packages the node-metadata ConfigMap of (`skyhook`, `node`) last gave the node's
    /// pods (its `packages.json`), if it exists and reads.
    fn packages_last_read(&self, skyhook: &str, node: &str) -> Option<BTreeMap<String, Package>> {
        let name = crate::names::node_metadata_configmap_name(skyhook, node);
        let text = self
            .snapshot
            .metadata_configmaps
            .get(&name)?
            .packages_json()?;
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
        let current = snapshot.metadata_configmaps.get(&name);
        if !current.is_some_and(|current| current.holds(desired.data.as_ref())) {
            self.plan.upsert_configmaps.push(desired);
        }
    }
}
