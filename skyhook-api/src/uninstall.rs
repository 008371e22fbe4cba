//! Explicit uninstall (`packages.<p>.uninstall`): which packages uninstall on a node, and which
//! stay out of its wave meanwhile. The mode and rules it shares with the stage machine are
//! [`crate::uninstall_rules`]'s, re-exported here for the crate's users.
//!
//! Terms, as upstream's newest release defines them:
//! - *requested*: `uninstall.enabled && uninstall.apply`, or the Skyhook is being deleted and
//!   `enabled` is true ([`crate::v1alpha1::Package::uninstall_requested`]);
//! - *in cycle* on a node: the entry of the spec version is at stage `uninstall` or
//!   `uninstall-interrupt`, in any state;
//! - *uninstalled* on a node: the spec version has no entry there.

use std::collections::BTreeMap;

use crate::node_state::{NodeState, PackageKey};
use crate::stage::{NodeStateEdit, entry_for};
pub use crate::uninstall_rules::{
    UninstallMode, UninstallRules, UnknownUninstallMode, in_cycle_stage,
};
use crate::v1alpha1::{Package, PackageStatus, Stage, State};

/// What the uninstall requests and cancels of one Skyhook do on one node this pass (upstream's
/// `HandleUninstallRequests` and `HandleCancelledUninstalls`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUninstalls {
    /// Edits to the node state, applied before anything else looks at it.
    pub edits: Vec<NodeStateEdit>,
    /// Packages whose uninstall or uninstall interrupt runs on the node, in name order: they
    /// go before the node's wave.
    pub listed: Vec<String>,
    /// The edits started or ended work on the node: its status becomes `in_progress`.
    pub node_in_progress: bool,
    /// Packages whose uninstall finished on the node: their metric series go.
    pub finished: Vec<String>,
}

/// The uninstall requests and cancels of one node, per spec package whose spec version has an
/// entry there:
/// - `(complete, uninstall-interrupt)`: the cycle is over; the entry is deleted (even if the
///   request was withdrawn: an uninstall interrupt cannot be cancelled);
/// - `uninstall-interrupt` in any other state: listed;
/// - `uninstall` running (`in_progress`, `erroring`, `unknown`): listed while requested;
///   otherwise cancelled, so the package installs again from `(in_progress, apply)`;
/// - an install stage that is `complete` while requested: `(in_progress, uninstall)`, listed.
///   An install that has not finished its stage is never cut short.
pub fn node_uninstalls(
    state: &NodeState,
    packages: &BTreeMap<String, Package>,
    deleting: bool,
) -> NodeUninstalls {
    let mut out = NodeUninstalls::default();
    for (name, package) in packages {
        let Some(entry) = state.get_version(name, &package.version) else {
            continue;
        };
        let requested = package.uninstall_requested(deleting);
        match (entry.stage, entry.state) {
            (Stage::UninstallInterrupt, State::Complete) => {
                let key = PackageKey::new(name, &package.version);
                out.edits.push(NodeStateEdit::Remove(key));
                out.finished.push(name.clone());
                out.node_in_progress = true;
            }
            (Stage::UninstallInterrupt, _) => out.listed.push(name.clone()),
            (Stage::Uninstall, State::InProgress | State::Erroring | State::Unknown) => {
                if requested {
                    out.listed.push(name.clone());
                } else {
                    let reinstall = entry_for(package, Stage::Apply, State::InProgress);
                    out.edits.push(NodeStateEdit::Upsert(reinstall));
                    out.node_in_progress = true;
                }
            }
            (Stage::Uninstall, State::Complete | State::Skipped) => {}
            (_, State::Complete) if requested => {
                let start = entry_for(package, Stage::Uninstall, State::InProgress);
                out.edits.push(NodeStateEdit::Upsert(start));
                out.listed.push(name.clone());
                out.node_in_progress = true;
            }
            _ => {}
        }
    }
    out
}

/// Whether `package` stays out of the node's ordinary wave: its uninstall or uninstall
/// interrupt is running there ([`node_uninstalls`] lists it), or its uninstall is requested
/// and done (no entry). A legacy `(skipped, uninstall)` placeholder or `(complete, uninstall)`
/// entry of the spec version stays in the wave, which waits or installs it.
pub fn held_by_uninstall(state: &NodeState, package: &Package, deleting: bool) -> bool {
    match state.get_version(&package.name, &package.version) {
        Some(entry) => match entry.stage {
            Stage::UninstallInterrupt => true,
            Stage::Uninstall => {
                matches!(
                    entry.state,
                    State::InProgress | State::Erroring | State::Unknown
                )
            }
            _ => false,
        },
        None => package.uninstall_requested(deleting),
    }
}

/// The entry of `package`'s spec version on a node when it is in its uninstall cycle.
pub fn in_cycle<'a>(state: &'a NodeState, package: &Package) -> Option<&'a PackageStatus> {
    state
        .get_version(&package.name, &package.version)
        .filter(|entry| in_cycle_stage(entry.stage))
}
