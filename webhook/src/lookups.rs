//! What admission needs to know about other objects in the cluster: which DeploymentPolicies
//! exist (a Skyhook may only name an existing one) and which Skyhooks exist (a policy cannot be
//! deleted while one uses it). The I/O layer answers from reflector caches; tests use
//! [`ExistingObjects`].

use std::collections::BTreeSet;

use skyhook_api::generation::Group;
use skyhook_api::v1alpha1::Skyhook;
use skyhook_api::validate::PolicyReference;

use crate::endpoint::{Endpoint, Role};

/// Cluster state consulted by admission, per API group: a NodeWright names a DeploymentPolicy
/// of the nodewright group, a Skyhook one of its own. `None` means "not known yet" (the caches
/// have not synced), in which case a check that needs the answer denies and asks for a retry
/// rather than guessing.
pub trait Lookups {
    /// Names of the DeploymentPolicies of `group` that exist.
    fn policy_names(&self, group: Group) -> Option<BTreeSet<String>>;
    /// Which DeploymentPolicy each existing workload object of `group` names.
    fn policy_references(&self, group: Group) -> Option<Vec<PolicyReference>>;
}

/// A fixed set of the DeploymentPolicies and workload objects that exist, per group.
#[derive(Debug, Clone, Default)]
pub struct ExistingObjects {
    /// Existing DeploymentPolicy names of the skyhook group.
    pub policy_names: BTreeSet<String>,
    /// Existing Skyhooks.
    pub skyhooks: Vec<Skyhook>,
    /// Existing DeploymentPolicy names of the nodewright group.
    pub nodewright_policy_names: BTreeSet<String>,
    /// Existing NodeWrights (as Skyhooks: the same spec).
    pub nodewrights: Vec<Skyhook>,
}

impl Lookups for ExistingObjects {
    fn policy_names(&self, group: Group) -> Option<BTreeSet<String>> {
        Some(match group {
            Group::Skyhook => self.policy_names.clone(),
            Group::NodeWright => self.nodewright_policy_names.clone(),
        })
    }

    fn policy_references(&self, group: Group) -> Option<Vec<PolicyReference>> {
        let objects = match group {
            Group::Skyhook => &self.skyhooks,
            Group::NodeWright => &self.nodewrights,
        };
        Some(objects.iter().map(PolicyReference::from).collect())
    }
}

/// [`Lookups`] plus DeploymentPolicies confirmed to exist by asking the API server: a cache
/// fed by a watch can lag behind a policy created a moment ago (`kubectl apply` of a file that
/// holds a policy and then the Skyhook that names it), and refusing that Skyhook would be wrong.
pub struct WithPolicies<'a> {
    /// The cache.
    pub inner: &'a dyn Lookups,
    /// The group of the confirmed names.
    pub group: Group,
    /// Names known to exist although the cache does not have them yet.
    pub confirmed: BTreeSet<String>,
}

impl std::fmt::Debug for WithPolicies<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithPolicies")
            .field("confirmed", &self.confirmed)
            .finish_non_exhaustive()
    }
}

impl Lookups for WithPolicies<'_> {
    fn policy_names(&self, group: Group) -> Option<BTreeSet<String>> {
        self.inner.policy_names(group).map(|mut names| {
            if group == self.group {
                names.extend(self.confirmed.iter().cloned());
            }
            names
        })
    }

    fn policy_references(&self, group: Group) -> Option<Vec<PolicyReference>> {
        self.inner.policy_references(group)
    }
}

/// The DeploymentPolicy a Skyhook admission request names that `lookups` does not know: the
/// one name worth asking the API server about before the request is refused. `None` for any
/// other request, an empty name, or caches that have not synced (that denial asks for a retry).
pub fn unknown_policy(endpoint: Endpoint, body: &[u8], lookups: &dyn Lookups) -> Option<String> {
    if endpoint.role() != Role::ValidateWorkload {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let name = value
        .pointer("/request/object/spec/deploymentPolicy")?
        .as_str()
        .filter(|name| !name.is_empty())?;
    let known = lookups.policy_names(endpoint.group())?;
    (!known.contains(name)).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(policy: Option<&str>) -> Vec<u8> {
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"object": {"spec": {"deploymentPolicy": policy}}}
        })
        .to_string()
        .into_bytes()
    }

    /// Case, endpoint, `spec.deploymentPolicy`, the cache, the name to ask about.
    type Case<'a> = (
        &'a str,
        Endpoint,
        Option<&'a str>,
        &'a dyn Lookups,
        Option<&'a str>,
    );

    #[test]
    fn only_a_named_policy_the_cache_does_not_know_is_asked_about() {
        let cache = ExistingObjects {
            policy_names: BTreeSet::from(["known".to_owned()]),
            nodewright_policy_names: BTreeSet::from(["nw-known".to_owned()]),
            ..ExistingObjects::default()
        };
        struct Unsynced;
        impl Lookups for Unsynced {
            fn policy_names(&self, _: Group) -> Option<BTreeSet<String>> {
                None
            }
            fn policy_references(&self, _: Group) -> Option<Vec<PolicyReference>> {
                None
            }
        }
        let cases: [Case<'_>; 8] = [
            (
                "a NodeWright's policy, looked up in its group",
                Endpoint::ValidateNodeWright,
                Some("known"),
                &cache,
                Some("known"),
            ),
            (
                "a NodeWright's cached policy",
                Endpoint::ValidateNodeWright,
                Some("nw-known"),
                &cache,
                None,
            ),
            (
                "new policy",
                Endpoint::ValidateSkyhook,
                Some("fresh"),
                &cache,
                Some("fresh"),
            ),
            (
                "cached policy",
                Endpoint::ValidateSkyhook,
                Some("known"),
                &cache,
                None,
            ),
            ("no policy", Endpoint::ValidateSkyhook, None, &cache, None),
            (
                "empty policy",
                Endpoint::ValidateSkyhook,
                Some(""),
                &cache,
                None,
            ),
            (
                "other endpoint",
                Endpoint::MutateSkyhook,
                Some("fresh"),
                &cache,
                None,
            ),
            (
                "caches not synced",
                Endpoint::ValidateSkyhook,
                Some("fresh"),
                &Unsynced,
                None,
            ),
        ];
        for (case, endpoint, policy, lookups, expected) in cases {
            assert_eq!(
                unknown_policy(endpoint, &body(policy), lookups).as_deref(),
                expected,
                "{case}"
            );
        }
        assert_eq!(
            unknown_policy(Endpoint::ValidateSkyhook, b"{not json", &cache),
            None
        );
    }

    #[test]
    fn confirmed_policies_are_added_to_the_cached_ones() {
        let cache = ExistingObjects {
            policy_names: BTreeSet::from(["known".to_owned()]),
            nodewright_policy_names: BTreeSet::from(["nw-known".to_owned()]),
            ..ExistingObjects::default()
        };
        let with = WithPolicies {
            inner: &cache,
            group: Group::Skyhook,
            confirmed: BTreeSet::from(["fresh".to_owned()]),
        };
        assert_eq!(
            with.policy_names(Group::Skyhook),
            Some(BTreeSet::from(["fresh".to_owned(), "known".to_owned()]))
        );
        assert_eq!(
            with.policy_names(Group::NodeWright),
            Some(BTreeSet::from(["nw-known".to_owned()])),
            "confirmed in the other group only"
        );
    }
}
