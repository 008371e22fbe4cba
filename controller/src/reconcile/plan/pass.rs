//! One admitted Skyhook as its pass reads it: the Skyhook, its owner reference, the nodes it
//! works on and those it skips, and its uninstall rules. Plain data, handed to every step of
//! the pass.

use skyhook_api::keys::Keys;
use skyhook_api::uninstall::UninstallRules;
use skyhook_api::v1alpha1::Skyhook;

use crate::names::OwnerSkyhook;
use crate::reconcile::snapshot::NodeView;

/// What one pass reads of its Skyhook once admitted.
pub(super) struct Pass<'s> {
    pub(super) skyhook: &'s Skyhook,
    pub(super) owner: OwnerSkyhook<'s>,
    /// The nodes it targets and works on, by creation time then name.
    pub(super) matched: Vec<&'s NodeView>,
    /// The nodes it targets but skips: their node state does not parse (`node_states`).
    pub(super) malformed: Vec<&'s NodeView>,
    /// The controller's uninstall mode, and whether the Skyhook is being deleted.
    pub(super) rules: UninstallRules,
}

impl<'s> Pass<'s> {
    pub(super) fn name(&self) -> &str {
        self.owner.name
    }

    /// Its group's keys: every key the pass writes is this group's.
    pub(super) fn keys(&self) -> &'static Keys {
        self.owner.group.keys()
    }

    /// Every node it targets, skipped ones included.
    pub(super) fn targeted(&self) -> Vec<&'s NodeView> {
        self.matched
            .iter()
            .chain(&self.malformed)
            .copied()
            .collect()
    }
}
