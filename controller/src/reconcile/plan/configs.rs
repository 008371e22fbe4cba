//! Package ConfigMaps (spec §2.6): create new ones, apply a changed one only when every node is
//! idle and complete for the package or some node is erroring after config (queue it
//! otherwise), record the changed keys in `configUpdates`, and delete the ConfigMaps of package
//! versions and nodes that left.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use skyhook_api::interrupt::{
    ConfigChangeDecision, ConfigChangeNode, changed_config_keys, changed_keys,
    config_change_decision, has_interrupt, record_config_updates,
};
use skyhook_api::stage::package_complete;
use skyhook_api::uninstall::in_cycle_stage;
use skyhook_api::v1alpha1::{Package, PackageStatus, SkyhookStatus, Stage, State, Status};

use super::context::Context;
use super::pass::Pass;
use super::workset::Workset;
use crate::configmaps::package_configmap;
use crate::names::package_label;
use crate::reconcile::snapshot::Snapshot;

/// Per targeted node, for one package whose ConfigMap changed: its entry and whether its pod
/// is on the node.
struct NodeEntry {
    node: String,
    entry: Option<PackageStatus>,
    pod_running: bool,
}

/// Package ConfigMaps: create new ones, apply or queue changed ones (spec §2.6), delete
/// those of versions no longer in the spec and metadata ConfigMaps of nodes left behind.
/// Returns whether a change waits (queued until the nodes are idle, or held by an
/// uninstall): the spec is then not fully observed yet.
pub(super) fn config_updates<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    status: &mut SkyhookStatus,
) -> bool {
    let mut waiting = false;
    let mut wanted = BTreeSet::new();
    for package in pass.skyhook.spec.packages.values() {
        let Some(desired) = package_configmap(&context.config.pods, &pass.owner, package) else {
            continue;
        };
        let cm_name = desired.metadata.name.clone().unwrap_or_default();
        wanted.insert(cm_name.clone());
        match context.snapshot.package_configmaps.get(&cm_name) {
            None => workset.plan.upsert_configmaps.push(desired),
            // An uninstall runs with the configuration the package was installed with: a
            // change waits until no node has the package in its uninstall cycle.
            Some(existing) if *existing.data() != package.config_map => {
                if !in_uninstall_cycle(workset, pass, package)
                    && config_change(context, workset, pass, package, existing.data(), status)
                {
                    workset.plan.upsert_configmaps.push(desired);
                } else {
                    waiting = true;
                }
            }
            Some(_) => {}
        }
    }
    let stale = stale_configmaps(context.snapshot, pass, &wanted);
    workset.plan.delete_configmaps.extend(stale);
    waiting
}

/// Whether some targeted node has `package`'s spec version in its uninstall cycle.
fn in_uninstall_cycle<'s>(workset: &mut Workset<'s>, pass: &Pass<'_>, package: &Package) -> bool {
    pass.matched.iter().any(|node| {
        workset
            .entry(pass.name(), &node.name, package)
            .is_some_and(|entry| in_cycle_stage(entry.stage))
    })
}

/// Applies the change of `package`'s ConfigMap when [`config_change_decision`] allows it:
/// records the changed keys, sends the package's nodes back to `config` and deletes the
/// pods it names. Returns whether the ConfigMap is written now (or stays queued).
fn config_change<'s>(
    context: &Context<'s>,
    workset: &mut Workset<'s>,
    pass: &Pass<'_>,
    package: &Package,
    existing: &BTreeMap<String, String>,
    status: &mut SkyhookStatus,
) -> bool {
    let name = pass.name();
    let label = package_label(&package.name, &package.version);
    let interrupting = has_interrupt(package, changed_keys(&status.config_updates, &package.name));
    let per_node: Vec<NodeEntry> = pass
        .matched
        .iter()
        .map(|n| NodeEntry {
            node: n.name.clone(),
            entry: workset.entry(name, &n.name, package),
            pod_running: workset.pod_exists(context, name, &n.name, &label),
        })
        .collect();
    let nodes: Vec<ConfigChangeNode<'_>> = per_node
        .iter()
        .map(|n| ConfigChangeNode {
            entry: n.entry.as_ref(),
            pod_running: n.pod_running,
            complete: package_complete(n.entry.as_ref(), interrupting),
        })
        .collect();
    let ConfigChangeDecision::Apply {
        every_node_complete,
        delete_pods_on,
    } = config_change_decision(&nodes)
    else {
        return false;
    };
    let changed = changed_config_keys(existing, &package.config_map);
    let previous = status
        .config_updates
        .get(&package.name)
        .cloned()
        .unwrap_or_default();
    status.config_updates.insert(
        package.name.clone(),
        record_config_updates(&previous, &changed, every_node_complete),
    );
    for NodeEntry { node, entry, .. } in &per_node {
        if let Some(entry) = entry {
            let config = PackageStatus {
                stage: Stage::Config,
                state: State::InProgress,
                ..entry.clone()
            };
            workset.set_entry(name, node, config);
            workset.set_status(name, node, Status::InProgress);
        }
    }
    for index in delete_pods_on {
        let node = &per_node[index].node;
        let snapshot = context.snapshot;
        for pod in snapshot
            .pods
            .iter()
            .filter(|p| p.skyhook == name && p.node == *node && p.package_label == label)
        {
            workset.delete_pod(&pod.name, "its package's configMap changed");
        }
    }
    true
}

/// The Skyhook's ConfigMaps to delete: package ConfigMaps it no longer wants, and
/// node-metadata ConfigMaps of nodes it no longer targets.
fn stale_configmaps(
    snapshot: &Snapshot,
    pass: &Pass<'_>,
    wanted: &BTreeSet<String>,
) -> Vec<String> {
    let name = pass.name();
    let packages = snapshot
        .package_configmaps
        .iter()
        .filter(|(cm_name, owned)| owned.skyhook == name && !wanted.contains(*cm_name));
    let matched: HashSet<&str> = pass.matched.iter().map(|m| m.name.as_str()).collect();
    let metadata = snapshot.metadata_configmaps.iter().filter(|(_, owned)| {
        let targeted = owned.node.as_deref().is_some_and(|n| matched.contains(n));
        owned.skyhook == name && !targeted
    });
    packages
        .map(|(cm_name, _)| cm_name)
        .chain(metadata.map(|(cm_name, _)| cm_name))
        .cloned()
        .collect()
}
