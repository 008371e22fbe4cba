//! The explicit uninstall part of `status <name>`: per package that is requested or still in its
//! uninstall cycle somewhere, how many nodes are at `uninstall` and `uninstall-interrupt`, and
//! how many no longer have it.

use serde::Serialize;
use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::{Skyhook, Stage, State};

use crate::output::{Cell, Table, Tone};

/// One package's explicit uninstall across the Skyhook's nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UninstallRow {
    /// `<package>@<spec version>`.
    pub package: String,
    /// Whether the uninstall is requested (`uninstall.apply`, or the Skyhook is being deleted).
    pub requested: bool,
    /// Nodes whose entry is at stage `uninstall`.
    pub uninstall: usize,
    /// Nodes whose entry is at stage `uninstall-interrupt`.
    pub uninstall_interrupt: usize,
    /// Of those, the nodes where it is `erroring`.
    pub erroring: usize,
    /// While requested, the nodes without the spec version's entry (uninstalled, or never
    /// installed: the two look the same).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uninstalled: Option<usize>,
    /// Nodes whose node state could be read.
    pub nodes: usize,
}

/// The uninstall progress of every package of `skyhook` that is requested or in its cycle on
/// one of `states` (the readable node states of its nodes), in spec order.
pub fn uninstall_progress(skyhook: &Skyhook, states: &[&NodeState]) -> Vec<UninstallRow> {
    let deleting = skyhook.metadata.deletion_timestamp.is_some();
    skyhook
        .spec
        .packages
        .iter()
        .filter_map(|(name, package)| {
            let requested = package.uninstall_requested(deleting);
            let entries: Vec<_> = states
                .iter()
                .filter_map(|state| state.get_version(name, &package.version))
                .collect();
            let at = |stage: Stage| entries.iter().filter(|e| e.stage == stage).count();
            let row = UninstallRow {
                package: format!("{name}@{}", package.version),
                requested,
                uninstall: at(Stage::Uninstall),
                uninstall_interrupt: at(Stage::UninstallInterrupt),
                erroring: entries
                    .iter()
                    .filter(|e| {
                        skyhook_api::uninstall::in_cycle_stage(e.stage)
                            && e.state == State::Erroring
                    })
                    .count(),
                uninstalled: requested.then(|| states.len() - entries.len()),
                nodes: states.len(),
            };
            (requested || row.uninstall + row.uninstall_interrupt > 0).then_some(row)
        })
        .collect()
}

/// The `UNINSTALL` table of `status <name>`, or `None` when no package has uninstall work.
pub fn uninstall_table(rows: &[UninstallRow]) -> Option<Table> {
    if rows.is_empty() {
        return None;
    }
    let mut table = Table::new(&[
        "UNINSTALL PACKAGE",
        "REQUESTED",
        "UNINSTALL",
        "UNINSTALL-INTERRUPT",
        "ERRORING",
        "UNINSTALLED",
    ]);
    for row in rows {
        table.push(vec![
            Cell::plain(&row.package),
            // In its cycle without a request: cancelled, and finishing its interrupt first.
            Cell::plain(if row.requested {
                "yes"
            } else {
                "no (cancelled)"
            }),
            Cell::plain(row.uninstall.to_string()),
            Cell::plain(row.uninstall_interrupt.to_string()),
            Cell {
                text: row.erroring.to_string(),
                tone: if row.erroring > 0 {
                    Tone::Bad
                } else {
                    Tone::Plain
                },
            },
            Cell::plain(
                row.uninstalled
                    .map_or_else(|| "-".to_owned(), |n| format!("{n}/{}", row.nodes)),
            ),
        ]);
    }
    Some(table)
}
