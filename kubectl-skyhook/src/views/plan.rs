//! `plan -f SCR.yaml`: a dry run of a Skyhook against the current cluster. Which nodes match,
//! which compartment and batch each falls in, which stages and interrupt each would get, and
//! which would be blocked and why. Every decision comes from the rules in `skyhook-api`;
//! nothing is changed.

use std::collections::BTreeMap;
use std::iter::successors;

use serde::Serialize;
use skyhook_api::budget::{BlockReason, Domain, domain_of};
use skyhook_api::generation::Group;
use skyhook_api::interrupt::{changed_keys, effective_interrupts, has_interrupt, merge_interrupts};
use skyhook_api::node_state::NodeState;
use skyhook_api::rollout::{RolloutNode, batch_numbers};
use skyhook_api::stage::{
    apply_edits, package_complete, pending_uninstalls, stage_after, version_changes,
};
use skyhook_api::status::{NodeStatusInput, node_erroring, node_status};
use skyhook_api::uninstall::{UninstallMode, UninstallRules, held_by_uninstall, node_uninstalls};
use skyhook_api::v1alpha1::{InterruptType, Package, Skyhook, Stage, State};

use crate::cluster::{self, Cluster, name_of};
use crate::output::{Block, Cell, Table, Tone, View};
use crate::rollout::{NodeFacts, Rollout};

/// `plan` JSON/YAML.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanView {
    /// The planned Skyhook.
    pub skyhook_name: String,
    /// Whether a Skyhook of that name already exists (its progress and batch state are used).
    pub exists: bool,
    /// Its DeploymentPolicy, absent in legacy mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Every node the selector matches, by name.
    pub nodes: Vec<PlannedNode>,
    /// Remarks that apply to the whole plan.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The API group of the object, for the text (not serialised).
    #[serde(skip)]
    pub group: Group,
}

/// What would happen on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedNode {
    /// Node name.
    pub node_name: String,
    /// Its compartment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compartment: Option<String>,
    /// Its failure domain, when its compartment's budget has a `topology`: the value of the
    /// topology label, or `-` without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The batch it would be worked on in, assuming every earlier batch succeeds; absent
    /// when it is complete or blocked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<i32>,
    /// The packages with stages still to run.
    pub packages: Vec<PlannedPackage>,
    /// The interrupt the node would get, as `type` or `service(a,b)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupt: Option<String>,
    /// Why the node would not be worked on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
}

/// The stages one package would run on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedPackage {
    /// Package name.
    pub name: String,
    /// Version the stages run for.
    pub version: String,
    /// Stages in order.
    pub stages: Vec<String>,
}

/// Plans `planned` (typically read from a file) against `cluster`. If a Skyhook of the same
/// name exists, its status (batch states, picked nodes, config updates) is carried over.
pub fn plan(cluster: &Cluster, planned: &Skyhook, mode: UninstallMode) -> PlanView {
    let rules = UninstallRules {
        mode,
        deleting: planned.metadata.deletion_timestamp.is_some(),
    };
    let name = name_of(&planned.metadata);
    let existing = cluster.skyhook(name);
    let effective = with_existing_status(planned, existing);
    let rollout = Rollout::new(&effective, cluster);
    let batches = predicted_batches(&rollout);
    let held = held_note(cluster, &effective, rollout.policy_missing);
    let mut notes: Vec<String> = held.iter().cloned().collect();
    if rollout.nodes.is_empty() {
        notes.push("no node matches spec.nodeSelectors".into());
    }
    let no_updates = BTreeMap::new();
    let updates = (effective.status.as_ref()).map_or(&no_updates, |s| &s.config_updates);
    let nodes = rollout
        .nodes
        .iter()
        .enumerate()
        .map(|(index, facts)| {
            let packages =
                planned_packages(&facts.state, &planned.spec.packages, rules, |pkg, p| {
                    has_interrupt(p, changed_keys(updates, pkg))
                });
            let interrupt = node_interrupt(&packages, &planned.spec.packages, |pkg, p| {
                effective_interrupts(p, changed_keys(updates, pkg))
            });
            let blocked = held.clone().or_else(|| node_blocked(&rollout, facts));
            let compartment = rollout.compartment_of(index);
            let domain =
                (compartment.and_then(|c| c.spec.budget.topology.as_ref())).map(
                    |t| match domain_of(cluster::labels(facts.node), t) {
                        Domain::Of(value) => value.to_owned(),
                        Domain::Unlabelled => "-".to_owned(),
                    },
                );
            PlannedNode {
                node_name: facts.name.to_owned(),
                compartment: compartment.map(|c| c.spec.name.clone()),
                domain,
                batch: if blocked.is_some() {
                    None
                } else {
                    batches.get(facts.name).copied()
                },
                packages,
                interrupt,
                blocked,
            }
        })
        .collect();
    PlanView {
        skyhook_name: name.to_owned(),
        exists: existing.is_some(),
        policy: planned.spec.policy_name().map(str::to_owned),
        nodes,
        notes,
        group: cluster.group,
    }
}

/// `planned` with the status and annotations (pause, disable) of the existing Skyhook of the
/// same name, if there is one.
fn with_existing_status(planned: &Skyhook, existing: Option<&Skyhook>) -> Skyhook {
    let mut effective = planned.clone();
    if let Some(existing) = existing {
        effective.status.clone_from(&existing.status);
        effective
            .metadata
            .annotations
            .clone_from(&existing.metadata.annotations);
    }
    effective
}

/// The batch each node would be picked in, compartment by compartment: the rules' own
/// [`batch_numbers`].
fn predicted_batches<'c>(rollout: &Rollout<'c>) -> BTreeMap<&'c str, i32> {
    let nodes: Vec<RolloutNode<'c>> = (rollout.selection_nodes.iter())
        .zip(&rollout.nodes)
        .map(|(node, facts)| {
            // The status the operator would introspect before selecting: e.g. a node marked
            // complete that a new version makes incomplete goes back to `unknown`.
            let mut node = *node;
            let candidate = &mut node.candidate;
            candidate.status = node_status(NodeStatusInput {
                current: candidate.status,
                complete: candidate.complete,
                failing: node_erroring(&facts.state),
                ready: candidate.ready,
                disabled: false,
                paused: false,
                has_compartments: true,
            });
            node
        })
        .collect();
    (rollout.compartments.iter())
        .flat_map(|compartment| batch_numbers(compartment, &nodes, &rollout.tolerations))
        .collect()
}

/// Why no node of the Skyhook would be worked on at all, if none would.
fn held_note(cluster: &Cluster, skyhook: &Skyhook, policy_missing: bool) -> Option<String> {
    let kind = cluster.group.kind();
    let (disabled, paused) = (cluster.disabled(skyhook), cluster.paused(skyhook));
    if policy_missing {
        Some(format!(
            "DeploymentPolicy {:?} does not exist: no node would be worked on",
            skyhook.spec.policy_name().unwrap_or_default()
        ))
    } else if disabled || paused {
        Some(format!(
            "the {kind} is {}: no node would be worked on until it is {}",
            if disabled { "disabled" } else { "paused" },
            if disabled { "enabled" } else { "resumed" },
        ))
    } else {
        None
    }
}

/// Why this incomplete node would not be picked, if it would not.
fn node_blocked(rollout: &Rollout<'_>, facts: &NodeFacts<'_>) -> Option<String> {
    if facts.complete {
        None
    } else if let Some(reason) = rollout.block_reason(facts.name) {
        Some(match reason {
            BlockReason::Ignored => {
                format!("ignored (label {}=true)", rollout.group.keys().ignore_label)
            }
            BlockReason::IntolerableTaints(taints) => {
                format!("does not tolerate {}", taints.join(", "))
            }
            BlockReason::NoTopologyLabel(key) => {
                format!("no {key} label for the budget's topology (allowUnlabelled is false)")
            }
        })
    } else if !facts.ready {
        Some(format!(
            "waits for higher-priority {}s to complete",
            rollout.group.kind()
        ))
    } else {
        None
    }
}

/// The stages every package would still run on a node with `state`: spec packages in name
/// order, then uninstalls of packages no longer in the spec. The version changes and the
/// explicit uninstall requests are the controller's own ([`version_changes`],
/// [`node_uninstalls`]), applied to a copy of the node state first.
pub fn planned_packages(
    state: &NodeState,
    packages: &BTreeMap<String, Package>,
    rules: UninstallRules,
    has_interrupt: impl Fn(&str, &Package) -> bool,
) -> Vec<PlannedPackage> {
    let mut state = state.clone();
    let edits = version_changes(&state, packages, rules.mode).edits;
    apply_edits(&mut state, &edits);
    let edits = node_uninstalls(&state, packages, rules.deleting).edits;
    apply_edits(&mut state, &edits);
    let mut planned: Vec<PlannedPackage> = packages
        .iter()
        .map(|(name, package)| {
            let stages = if held_by_uninstall(&state, package, rules.deleting) {
                uninstall_stages(&state, package)
            } else {
                package_stages(&state, name, package, has_interrupt(name, package))
            };
            PlannedPackage {
                name: name.clone(),
                version: package.version.clone(),
                stages: stages.iter().map(|s| s.as_str().to_owned()).collect(),
            }
        })
        .filter(|p| !p.stages.is_empty())
        .collect();
    planned.extend(
        pending_uninstalls(&state, packages, rules.mode)
            .into_iter()
            .filter(|entry| !packages.contains_key(&entry.name))
            .map(|entry| PlannedPackage {
                name: entry.name.clone(),
                version: entry.version.clone(),
                stages: vec![Stage::Uninstall.as_str().to_owned()],
            }),
    );
    planned
}

/// What an explicit uninstall still runs: `uninstall`, then the package's own interrupt;
/// nothing once it is done.
fn uninstall_stages(state: &NodeState, package: &Package) -> Vec<Stage> {
    let interrupt = package
        .interrupt
        .is_some()
        .then_some(Stage::UninstallInterrupt);
    match state.get_version(&package.name, &package.version) {
        Some(entry) if entry.stage == Stage::Uninstall => {
            std::iter::once(Stage::Uninstall).chain(interrupt).collect()
        }
        Some(entry) if entry.stage == Stage::UninstallInterrupt => interrupt.into_iter().collect(),
        _ => Vec::new(),
    }
}

/// The stages one spec package still runs, from its node-state entry after the version
/// changes: none when complete; a downgrade's placeholder `(skipped, uninstall)` runs the old
/// version's uninstall, then the new one from `apply`.
fn package_stages(state: &NodeState, name: &str, package: &Package, interrupt: bool) -> Vec<Stage> {
    let chain = |start: Stage| -> Vec<Stage> {
        successors(Some(start), |stage| stage_after(*stage, interrupt))
            .take(Stage::ALL.len())
            .collect()
    };
    match state.get_version(name, &package.version) {
        None => chain(Stage::Apply),
        Some(entry) if package_complete(Some(entry), interrupt) => Vec::new(),
        Some(entry) if entry.state == State::Complete => stage_after(entry.stage, interrupt)
            .map(chain)
            .unwrap_or_default(),
        Some(entry) => chain(entry.stage),
    }
}

/// The one interrupt the node would get from the packages that reach `interrupt`.
fn node_interrupt(
    planned: &[PlannedPackage],
    packages: &BTreeMap<String, Package>,
    interrupts_of: impl Fn(&str, &Package) -> Vec<skyhook_api::v1alpha1::Interrupt>,
) -> Option<String> {
    let wave: BTreeMap<String, Vec<skyhook_api::v1alpha1::Interrupt>> = planned
        .iter()
        .filter(|p| p.stages.iter().any(|s| s == Stage::Interrupt.as_str()))
        .filter_map(|p| {
            packages
                .get(&p.name)
                .map(|package| (p.name.clone(), interrupts_of(&p.name, package)))
        })
        .collect();
    let merged = merge_interrupts(&wave)?;
    let kind = match merged.interrupt.type_ {
        InterruptType::Reboot => "reboot",
        InterruptType::Service => "service",
        InterruptType::Noop => "noop",
        InterruptType::RestartAllServices => "restartAllServices",
    };
    Some(if merged.interrupt.services.is_empty() {
        format!("{kind} (by {})", merged.owner)
    } else {
        format!(
            "{kind}({}) (by {})",
            merged.interrupt.services.join(","),
            merged.owner
        )
    })
}

impl View for PlanView {
    fn blocks(&self, _wide: bool) -> Vec<Block> {
        let mut blocks = vec![Block::Heading(format!(
            "Plan for {} {} ({}), policy {}: {} matching node(s). Nothing is changed.",
            self.group.kind(),
            self.skyhook_name,
            if self.exists { "exists" } else { "new" },
            self.policy.as_deref().unwrap_or("legacy"),
            self.nodes.len(),
        ))];
        for note in &self.notes {
            blocks.push(Block::Line(format!("Note: {note}")));
        }
        if self.nodes.is_empty() {
            return blocks;
        }
        // DOMAIN only where a budget has a topology, so that other plans read as before.
        let domains = self.nodes.iter().any(|n| n.domain.is_some());
        let headers: Vec<&str> = ["NODE", "COMPARTMENT", "DOMAIN", "BATCH", "STAGES"]
            .into_iter()
            .filter(|h| domains || *h != "DOMAIN")
            .chain(["INTERRUPT", "BLOCKED"])
            .collect();
        let mut table = Table::new(&headers);
        for node in &self.nodes {
            let stages = if node.packages.is_empty() {
                "complete".to_owned()
            } else {
                node.packages
                    .iter()
                    .map(|p| format!("{}@{}: {}", p.name, p.version, p.stages.join(">")))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let mut row = vec![
                Cell::plain(&node.node_name),
                Cell::plain(node.compartment.as_deref().unwrap_or("-")),
            ];
            if domains {
                row.push(Cell::plain(node.domain.as_deref().unwrap_or("-")));
            }
            row.extend([
                Cell::plain(node.batch.map_or_else(|| "-".to_owned(), |b| b.to_string())),
                Cell::plain(stages),
                Cell::plain(node.interrupt.as_deref().unwrap_or("-")),
                Cell {
                    text: node.blocked.clone().unwrap_or_else(|| "-".to_owned()),
                    tone: if node.blocked.is_some() {
                        Tone::Warn
                    } else {
                        Tone::Plain
                    },
                },
            ]);
            table.push(row);
        }
        blocks.push(Block::Table(table));
        blocks
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_missing_policy_or_a_paused_or_disabled_skyhook_holds_every_node() {
        let skyhook = |annotations: serde_json::Value| -> Skyhook {
            serde_json::from_value(json!({
                "apiVersion": "skyhook.nvidia.com/v1alpha1",
                "kind": "Skyhook",
                "metadata": {"name": "s", "annotations": annotations},
                "spec": {"deploymentPolicy": "rollout", "packages": {}},
            }))
            .unwrap()
        };
        let paused = json!({"skyhook.nvidia.com/pause": "true"});
        let disabled = json!({"skyhook.nvidia.com/disable": "true"});
        let both =
            json!({"skyhook.nvidia.com/pause": "true", "skyhook.nvidia.com/disable": "true"});
        let cases = [
            (json!({}), false, None),
            (
                json!({}),
                true,
                Some("DeploymentPolicy \"rollout\" does not exist: no node would be worked on"),
            ),
            (
                paused.clone(),
                true,
                Some("DeploymentPolicy \"rollout\" does not exist: no node would be worked on"),
            ),
            (
                paused,
                false,
                Some("the Skyhook is paused: no node would be worked on until it is resumed"),
            ),
            (
                disabled,
                false,
                Some("the Skyhook is disabled: no node would be worked on until it is enabled"),
            ),
            (
                both,
                false,
                Some("the Skyhook is disabled: no node would be worked on until it is enabled"),
            ),
        ];
        for (annotations, policy_missing, expected) in cases {
            assert_eq!(
                held_note(
                    &Cluster::default(),
                    &skyhook(annotations.clone()),
                    policy_missing
                )
                .as_deref(),
                expected,
                "{annotations} policy_missing={policy_missing}"
            );
        }
    }
}
