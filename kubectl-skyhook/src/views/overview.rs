//! `status` without a name: one row per Skyhook.

use serde::Serialize;

use crate::cluster::{Cluster, name_of, reported_status};
use crate::eta::{describe, rollout_estimate};
use crate::output::{Block, Cell, Table, View};
use crate::rollout::Rollout;

/// `status` JSON/YAML: `{skyhooks: [...]}` in priority order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkyhookOverview {
    /// One entry per Skyhook.
    pub skyhooks: Vec<SkyhookRow>,
    /// The API group of the objects, for the text (not serialised).
    #[serde(skip)]
    pub group: skyhook_api::generation::Group,
}

/// One Skyhook at a glance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkyhookRow {
    /// Name.
    pub name: String,
    /// Status as the operator last recorded it (`unknown` before its first reconcile).
    pub status: String,
    /// Priority (lower runs first).
    pub priority: i32,
    /// Selected nodes where every package is complete.
    pub complete_nodes: usize,
    /// Selected nodes.
    pub total_nodes: usize,
    /// Nodes `in_progress`.
    pub in_progress: usize,
    /// Nodes `erroring`.
    pub erroring: usize,
    /// The pause annotation is set.
    pub paused: bool,
    /// The disable annotation is set.
    pub disabled: bool,
    /// When the rollout should end: RFC 3339, `done`, or `unknown` (`status <name>` says why).
    pub estimated_end: String,
    /// The DeploymentPolicy, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl SkyhookOverview {
    /// Whether every Skyhook is complete on every node it selects (`status --watch` stops).
    pub fn complete(&self) -> bool {
        self.skyhooks
            .iter()
            .all(|s| s.complete_nodes == s.total_nodes)
    }
}

/// Summarises every Skyhook, in priority order (then name).
pub fn overview(cluster: &Cluster) -> SkyhookOverview {
    let mut skyhooks: Vec<SkyhookRow> = cluster
        .skyhooks
        .iter()
        .map(|skyhook| {
            let rollout = Rollout::new(skyhook, cluster);
            let count = |status| rollout.nodes.iter().filter(|n| n.status == status).count();
            SkyhookRow {
                name: name_of(&skyhook.metadata).to_owned(),
                status: reported_status(skyhook),
                priority: skyhook.spec.priority,
                complete_nodes: rollout.nodes.iter().filter(|n| n.complete).count(),
                total_nodes: rollout.nodes.len(),
                in_progress: count(skyhook_api::v1alpha1::Status::InProgress),
                erroring: count(skyhook_api::v1alpha1::Status::Erroring),
                paused: cluster.paused(skyhook),
                disabled: cluster.disabled(skyhook),
                estimated_end: describe(
                    &rollout_estimate(&rollout, cluster.read_at),
                    cluster.read_at,
                )
                .0,
                policy: skyhook.spec.policy_name().map(str::to_owned),
            }
        })
        .collect();
    skyhooks.sort_by(|a, b| (a.priority, &a.name).cmp(&(b.priority, &b.name)));
    SkyhookOverview {
        skyhooks,
        group: cluster.group,
    }
}

impl View for SkyhookOverview {
    fn blocks(&self, _wide: bool) -> Vec<Block> {
        if self.skyhooks.is_empty() {
            return vec![Block::Line(format!("No {}s found.", self.group.kind()))];
        }
        let headers = [
            "NAME",
            "STATUS",
            "PRIORITY",
            "COMPLETE",
            "IN-PROGRESS",
            "ERRORING",
            "PAUSED/DISABLED",
            "POLICY",
            "ESTIMATED-END",
        ];
        let mut table = Table::new(&headers);
        for row in &self.skyhooks {
            let held = match (row.paused, row.disabled) {
                (true, true) => "paused,disabled",
                (true, false) => "paused",
                (false, true) => "disabled",
                (false, false) => "-",
            };
            table.push(vec![
                Cell::plain(&row.name),
                Cell::status(&row.status),
                Cell::plain(row.priority.to_string()),
                Cell::plain(format!("{}/{}", row.complete_nodes, row.total_nodes)),
                Cell::plain(row.in_progress.to_string()),
                Cell::plain(row.erroring.to_string()),
                Cell::status(held),
                Cell::plain(row.policy.as_deref().unwrap_or("legacy")),
                Cell::plain(&row.estimated_end),
            ]);
        }
        vec![Block::Table(table)]
    }
}
