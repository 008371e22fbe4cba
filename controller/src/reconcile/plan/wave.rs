//! The packages one selected node runs next (spec §2.7): the runnable wave after pending
//! uninstalls and the interrupt the wave shares, and what running them reports for the
//! Skyhook's status. Plain data, read by the package steps (`packages`) and the interrupt
//! steps (`interrupts`) alike.

use std::collections::BTreeMap;

use skyhook_api::graph::PackageGraph;
use skyhook_api::interrupt::{
    MergedInterrupt, changed_keys, effective_interrupts, has_interrupt, merge_interrupts,
};
use skyhook_api::node_state::NodeState;
use skyhook_api::stage::{package_complete, pending_uninstalls, uninstall_package};
use skyhook_api::uninstall::{UninstallRules, held_by_uninstall};
use skyhook_api::v1alpha1::{Interrupt, Package};

/// The packages one node runs next, and the interrupt they share.
pub(super) struct Wave {
    /// Uninstalls first: the legacy ones (removed packages and old versions, as minimal
    /// packages made from their entries) and the explicit ones (the full spec package).
    pub(super) uninstalls: Vec<Package>,
    /// Packages that are not complete and whose dependencies are, without those an uninstall
    /// holds.
    runnable: Vec<Package>,
    /// The effective interrupts of the runnable packages that have one.
    pub(super) interrupts: BTreeMap<String, Vec<Interrupt>>,
    /// The runnable packages' interrupts merged into one, with the package that owns it.
    pub(super) merged: Option<MergedInterrupt>,
}

impl Wave {
    pub(super) fn of(
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
    pub(super) fn items(&self) -> impl Iterator<Item = (&Package, bool)> {
        let uninstalls = self.uninstalls.iter().map(|p| (p, true));
        uninstalls.chain(self.runnable.iter().map(|p| (p, false)))
    }
}

/// What a drain is for: the package and the stage that waits for it.
pub(super) type DrainFor<'p> = (&'p Package, skyhook_api::v1alpha1::Stage);

/// What running one node's packages reports for the Skyhook's status.
#[derive(Debug, Default)]
pub(super) struct NodeRun {
    /// The last launch, for the `ApplyPackage` condition.
    pub(super) applied: Option<String>,
    /// The drain of the node is past its timeout: why.
    pub(super) drain_blocked: Option<String>,
    /// The pods that keep the node's drain from progressing (`DrainBlocked`).
    pub(super) drain_blockers: Vec<skyhook_api::drain::BlockedPod>,
    /// Pods matching `podNonInterruptLabels` hold the node (or their selector does not parse).
    pub(super) non_interrupt_hold: bool,
    /// The package the protected pods hold, `<name>:<version>`, and the pods
    /// (`<namespace>/<name>`, sorted); none for a selector that does not parse.
    pub(super) non_interrupt_pods: Option<(String, Vec<String>)>,
    /// The node waits for the fleet budget before its cordon.
    pub(super) fleet_waiting: bool,
    /// The node waits, uncordoned, for its images (`spec.prePullImages`).
    pub(super) pre_pull: Option<PrePullHold>,
}

/// Why the pre-pull gate holds a node before its cordon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PrePullHold {
    /// Its images are being pulled.
    Pulling,
    /// An image cannot be pulled: the image and the kubelet's reason.
    Failed(String),
}

/// One node's wave, as the package steps read it.
pub(super) struct NodeWave<'a> {
    pub(super) node: &'a str,
    /// The node's place in the rollout order (`SKYHOOK_NODE_ORDER`).
    pub(super) order: i64,
    pub(super) wave: Wave,
    /// The packages the node's pods last read, for removed packages' uninstalls.
    pub(super) previous: Option<BTreeMap<String, Package>>,
}
