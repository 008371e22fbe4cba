//! `node list --skyhook X` and `node status [patterns]`: progress computed by the plugin from
//! the node-state annotations.

use serde::Serialize;
use skyhook_api::generation::Group;
use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::State;

use crate::cluster::{self, Cluster, name_of};
use crate::output::{Block, Cell, Table, View};
use crate::pattern::{NodePattern, matches_any};

/// `node list` JSON/YAML: `{skyhookName, nodes: [{nodeName, status, packagesComplete,
/// packagesTotal, restarts}]}` (upstream's structure).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeList {
    /// The Skyhook.
    pub skyhook_name: String,
    /// Nodes carrying its node state, by name.
    pub nodes: Vec<NodeListEntry>,
    /// Annotations that could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The API group of the object, for the text (not serialised).
    #[serde(skip)]
    pub group: Group,
}

/// One node of `node list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeListEntry {
    /// Node name.
    pub node_name: String,
    /// `erroring`, `complete`, `in_progress` or `unknown`.
    pub status: String,
    /// Entries in state `complete`.
    pub packages_complete: usize,
    /// Entries.
    pub packages_total: usize,
    /// Restarts over all entries.
    pub restarts: i32,
}

/// `node status` JSON/YAML: `{nodes: [...]}`, one entry per (node, Skyhook).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatusView {
    /// One entry per node and Skyhook with node state on it.
    pub nodes: Vec<NodeStatusEntry>,
    /// Annotations that could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The API group of the object, for the text (not serialised).
    #[serde(skip)]
    pub group: Group,
}

/// One (node, Skyhook).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatusEntry {
    /// Node name.
    pub node_name: String,
    /// Skyhook name.
    pub skyhook: String,
    /// Status computed from the entries, as in `node list`.
    pub status: String,
    /// Entries in state `complete`.
    pub packages_complete: usize,
    /// Entries.
    pub packages_total: usize,
    /// Every entry.
    pub packages: Vec<NodePackageRow>,
    /// The node is cordoned (`spec.unschedulable`).
    pub cordoned: bool,
    /// The node carries the runtime-required cordon annotation: it stays cordoned until
    /// someone releases it (see `runtimeRequiredCordonAfter`).
    pub runtime_required_cordon: bool,
}

/// One node-state entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePackageRow {
    /// Package name.
    pub name: String,
    /// Package version.
    pub version: String,
    /// Stage.
    pub stage: String,
    /// State.
    pub state: String,
    /// Restarts.
    pub restarts: i32,
    /// Image.
    pub image: String,
}

/// The plugin's status of a node from its entries: any erroring → `erroring`; every entry
/// complete → `complete`; any started → `in_progress`; otherwise `unknown`.
pub fn state_status(state: &NodeState) -> &'static str {
    let entries = || state.iter().map(|(_, e)| e);
    if entries().any(|e| e.state == State::Erroring) {
        "erroring"
    } else if !state.is_empty() && entries().all(|e| e.state == State::Complete) {
        "complete"
    } else if entries().any(|e| matches!(e.state, State::InProgress | State::Complete)) {
        "in_progress"
    } else {
        "unknown"
    }
}

fn completed(state: &NodeState) -> usize {
    state
        .iter()
        .filter(|(_, e)| e.state == State::Complete)
        .count()
}

/// Every node carrying `nodeState_<skyhook>`, by name.
pub fn node_list(cluster: &Cluster, skyhook: &str) -> NodeList {
    let annotation = cluster.keys().node_state_annotation(skyhook);
    let mut warnings = Vec::new();
    let mut nodes: Vec<NodeListEntry> = cluster
        .nodes
        .iter()
        .filter_map(|node| {
            let value = cluster::annotations(node).get(&annotation)?;
            let name = name_of(&node.metadata);
            let state = parse_or_warn(value, name, &annotation, &mut warnings)?;
            Some(NodeListEntry {
                node_name: name.to_owned(),
                status: state_status(&state).to_owned(),
                packages_complete: completed(&state),
                packages_total: state.len(),
                restarts: state.iter().map(|(_, e)| e.restarts).sum(),
            })
        })
        .collect();
    nodes.sort_by(|a, b| a.node_name.cmp(&b.node_name));
    NodeList {
        skyhook_name: skyhook.to_owned(),
        nodes,
        warnings,
        group: cluster.group,
    }
}

/// One entry per (node, Skyhook) for every `nodeState_*` annotation on the nodes matching
/// `patterns`, optionally only for `skyhook`.
pub fn node_status(
    cluster: &Cluster,
    patterns: &[NodePattern],
    skyhook: Option<&str>,
) -> NodeStatusView {
    let keys = cluster.keys();
    let prefix = keys.node_state_annotation("");
    let mut warnings = Vec::new();
    let mut nodes = Vec::new();
    for node in &cluster.nodes {
        let name = name_of(&node.metadata);
        if !matches_any(patterns, name) {
            continue;
        }
        let cordoned = cluster::unschedulable(node);
        let runtime_required_cordon =
            cluster::annotations(node).contains_key(keys.runtime_required_cordon_annotation);
        for (key, value) in cluster::annotations(node) {
            let Some(owner) = key.strip_prefix(&prefix) else {
                continue;
            };
            if skyhook.is_some_and(|wanted| wanted != owner) {
                continue;
            }
            let Some(state) = parse_or_warn(value, name, key, &mut warnings) else {
                continue;
            };
            nodes.push(NodeStatusEntry {
                node_name: name.to_owned(),
                skyhook: owner.to_owned(),
                status: state_status(&state).to_owned(),
                packages_complete: completed(&state),
                packages_total: state.len(),
                packages: state
                    .iter()
                    .map(|(_, e)| NodePackageRow {
                        name: e.name.clone(),
                        version: e.version.clone(),
                        stage: e.stage.as_str().to_owned(),
                        state: e.state.as_str().to_owned(),
                        restarts: e.restarts,
                        image: e.image.clone(),
                    })
                    .collect(),
                cordoned,
                runtime_required_cordon,
            });
        }
    }
    nodes.sort_by(|a, b| (&a.node_name, &a.skyhook).cmp(&(&b.node_name, &b.skyhook)));
    NodeStatusView {
        nodes,
        warnings,
        group: cluster.group,
    }
}

fn parse_or_warn(
    value: &str,
    node: &str,
    annotation: &str,
    warnings: &mut Vec<String>,
) -> Option<NodeState> {
    match NodeState::parse(value) {
        Ok(state) => Some(state),
        Err(error) => {
            warnings.push(format!(
                "node {node}: annotation {annotation} is unreadable ({error}); skipped"
            ));
            None
        }
    }
}

/// The column naming the object: `SKYHOOK` or `NODEWRIGHT`.
const fn object_header(group: Group) -> &'static str {
    match group {
        Group::Skyhook => "SKYHOOK",
        Group::NodeWright => "NODEWRIGHT",
    }
}

fn warning_blocks(warnings: &[String]) -> impl Iterator<Item = Block> + '_ {
    warnings
        .iter()
        .map(|w| Block::Line(format!("Warning: {w}")))
}

impl View for NodeList {
    fn blocks(&self, wide: bool) -> Vec<Block> {
        let count = |status: &str| self.nodes.iter().filter(|n| n.status == status).count();
        let mut blocks = vec![
            Block::Line(format!("{}: {}", self.group.kind(), self.skyhook_name)),
            Block::Line(format!(
                "Summary: {} nodes ({} complete, {} erroring, {} in progress)",
                self.nodes.len(),
                count("complete"),
                count("erroring"),
                count("in_progress"),
            )),
        ];
        blocks.extend(warning_blocks(&self.warnings));
        if self.nodes.is_empty() {
            blocks.push(Block::Line(format!(
                "No nodes have node state for {} {:?}.",
                self.group.kind(),
                self.skyhook_name
            )));
            return blocks;
        }
        let mut headers = vec!["NODE", "STATUS", "PACKAGES"];
        if wide {
            headers.push("RESTARTS");
        }
        let mut table = Table::new(&headers);
        for node in &self.nodes {
            let status = if node.status == "erroring" {
                "ERRORING".to_owned()
            } else {
                node.status.clone()
            };
            let mut row = vec![
                Cell::plain(&node.node_name),
                Cell::status(status),
                Cell::plain(format!(
                    "{}/{}",
                    node.packages_complete, node.packages_total
                )),
            ];
            if wide {
                row.push(Cell::plain(node.restarts.to_string()));
            }
            table.push(row);
        }
        blocks.push(Block::Line(String::new()));
        blocks.push(Block::Table(table));
        blocks
    }
}

impl View for NodeStatusView {
    fn blocks(&self, wide: bool) -> Vec<Block> {
        let mut blocks: Vec<Block> = warning_blocks(&self.warnings).collect();
        if self.nodes.is_empty() {
            blocks.push(Block::Line(format!(
                "No node has {} node state.",
                self.group.kind()
            )));
            return blocks;
        }
        let table = if wide {
            let mut table = Table::new(&[
                "NODE",
                object_header(self.group),
                "PACKAGE",
                "VERSION",
                "STAGE",
                "STATE",
                "RESTARTS",
                "IMAGE",
                "CORDONED",
                "RUNTIME-REQUIRED-CORDON",
            ]);
            for node in &self.nodes {
                for p in &node.packages {
                    table.push(vec![
                        Cell::plain(&node.node_name),
                        Cell::plain(&node.skyhook),
                        Cell::plain(&p.name),
                        Cell::plain(&p.version),
                        Cell::plain(&p.stage),
                        Cell::status(&p.state),
                        Cell::plain(p.restarts.to_string()),
                        Cell::plain(&p.image),
                        Cell::plain(node.cordoned.to_string()),
                        Cell::plain(node.runtime_required_cordon.to_string()),
                    ]);
                }
            }
            table
        } else {
            let mut table = Table::new(&[
                "NODE",
                object_header(self.group),
                "STATUS",
                "PACKAGES",
                "CORDONED",
                "RUNTIME-REQUIRED-CORDON",
            ]);
            for node in &self.nodes {
                table.push(vec![
                    Cell::plain(&node.node_name),
                    Cell::plain(&node.skyhook),
                    Cell::status(&node.status),
                    Cell::plain(format!(
                        "{}/{}",
                        node.packages_complete, node.packages_total
                    )),
                    Cell::plain(node.cordoned.to_string()),
                    Cell::plain(node.runtime_required_cordon.to_string()),
                ]);
            }
            table
        };
        blocks.push(Block::Table(table));
        blocks
    }
}
