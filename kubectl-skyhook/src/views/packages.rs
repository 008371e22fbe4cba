//! `package status <pkg> --skyhook X [--node P...]`: one package on every node.

use serde::Serialize;
use skyhook_api::generation::Group;
use skyhook_api::node_state::NodeState;

use crate::cluster::{self, Cluster, name_of};
use crate::output::{Block, Cell, Table, View};
use crate::pattern::{NodePattern, matches_any};

/// `package status` JSON/YAML: `{skyhookName, package, nodes: [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageStatusView {
    /// The Skyhook.
    pub skyhook_name: String,
    /// The package.
    pub package: String,
    /// One row per node and version of the package.
    pub nodes: Vec<PackageRow>,
    /// The API group of the object, for the text (not serialised).
    #[serde(skip)]
    pub group: Group,
}

/// One node's entry for the package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageRow {
    /// Node name.
    pub node_name: String,
    /// Version of the entry.
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

/// The entries of `package` in `nodeState_<skyhook>` on the nodes matching `patterns`.
/// Unreadable annotations are skipped.
pub fn package_status(
    cluster: &Cluster,
    skyhook: &str,
    package: &str,
    patterns: &[NodePattern],
) -> PackageStatusView {
    let annotation = cluster.keys().node_state_annotation(skyhook);
    let mut nodes: Vec<PackageRow> = cluster
        .nodes
        .iter()
        .filter(|node| matches_any(patterns, name_of(&node.metadata)))
        .filter_map(|node| {
            let state = NodeState::parse(cluster::annotations(node).get(&annotation)?).ok()?;
            let name = name_of(&node.metadata);
            Some(
                state
                    .iter()
                    .filter(|(key, _)| key.name() == package)
                    .map(|(_, e)| PackageRow {
                        node_name: name.to_owned(),
                        version: e.version.clone(),
                        stage: e.stage.as_str().to_owned(),
                        state: e.state.as_str().to_owned(),
                        restarts: e.restarts,
                        image: e.image.clone(),
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .flatten()
        .collect();
    nodes.sort_by(|a, b| (&a.node_name, &a.version).cmp(&(&b.node_name, &b.version)));
    PackageStatusView {
        skyhook_name: skyhook.to_owned(),
        package: package.to_owned(),
        nodes,
        group: cluster.group,
    }
}

impl View for PackageStatusView {
    fn blocks(&self, wide: bool) -> Vec<Block> {
        if self.nodes.is_empty() {
            return vec![Block::Line(format!(
                "Package {:?} of {} {:?} has not started on any matching node.",
                self.package,
                self.group.kind(),
                self.skyhook_name
            ))];
        }
        let mut headers = vec!["NODE", "PACKAGE", "VERSION", "STAGE", "STATE"];
        if wide {
            headers.extend(["RESTARTS", "IMAGE"]);
        }
        let mut table = Table::new(&headers);
        for row in &self.nodes {
            let mut cells = vec![
                Cell::plain(&row.node_name),
                Cell::plain(&self.package),
                Cell::plain(&row.version),
                Cell::plain(&row.stage),
                Cell::status(&row.state),
            ];
            if wide {
                cells.push(Cell::plain(row.restarts.to_string()));
                cells.push(Cell::plain(&row.image));
            }
            table.push(cells);
        }
        vec![Block::Table(table)]
    }
}
