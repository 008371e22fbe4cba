//! What admission needs to know about other objects in the cluster: which DeploymentPolicies
//! exist (a Skyhook may only name an existing one) and which Skyhooks exist (a policy cannot be
//! deleted while one uses it). The I/O layer answers from reflector caches; tests use
//! [`Snapshot`].

use std::collections::BTreeSet;

use skyhook_api::v1alpha1::Skyhook;
use skyhook_api::validate::PolicyReference;

/// Cluster state consulted by admission. `None` means "not known yet" (the caches have not
/// synced), in which case a check that needs the answer denies and asks for a retry rather
/// than guessing.
pub trait Lookups {
    /// Names of the DeploymentPolicies that exist.
    fn policy_names(&self) -> Option<BTreeSet<String>>;
    /// Which DeploymentPolicy each existing Skyhook names.
    fn policy_references(&self) -> Option<Vec<PolicyReference>>;
}

/// A fixed view of the cluster.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Existing DeploymentPolicy names.
    pub policy_names: BTreeSet<String>,
    /// Existing Skyhooks.
    pub skyhooks: Vec<Skyhook>,
}

impl Lookups for Snapshot {
    fn policy_names(&self) -> Option<BTreeSet<String>> {
        Some(self.policy_names.clone())
    }

    fn policy_references(&self) -> Option<Vec<PolicyReference>> {
        Some(self.skyhooks.iter().map(PolicyReference::from).collect())
    }
}
