//! Package ConfigMaps (spec §2.6): create new ones, apply a changed one only when every node is
//! idle and complete for the package or some node is erroring after config (queue it
//! otherwise), record the changed keys in `configUpdates`, and delete the ConfigMaps of package
//! versions and nodes that left.

use std::collections::BTreeSet;

use skyhook_api::interrupt::{
    ConfigChangeDecision, ConfigChangeNode, changed_config_keys, config_change_decision,
    has_interrupt, record_config_updates,
};
use skyhook_api::stage::package_complete;
use skyhook_api::v1alpha1::{PackageStatus, Skyhook, SkyhookStatus, Stage, State, Status};

use super::Planner;
use super::packages::changed_keys;
use crate::configmaps::package_configmap;
use crate::names::{OwnerSkyhook, package_label};
use crate::reconcile::snapshot::NodeView;

impl Planner<'_> {
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
