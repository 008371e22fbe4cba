//! Skyhooks and NodeWrights as the cache holds them: decoded without `managedFields`.
//!
//! The controller writes a Skyhook's status with server-side apply, so the API server lists in
//! the Skyhook's `managedFields` every field of that status the controller owns: each node's
//! entry of `nodeState`, `nodeStatus`, `nodeBootIds` and `nodePriority` (185 KB of the 453 KB
//! of JSON of a Skyhook over 1,000 nodes). Decoded, that list is a tree of small maps and
//! strings several MiB large, kept for every Skyhook and allocated again on every watch event
//! of it; nothing in the controller reads it. The cache decodes the rest as a [`Skyhook`] and
//! shares it with every snapshot.
//!
//! A NodeWright has a Skyhook's fields (`skyhook_api::nodewright_v1alpha1`), so both kinds are
//! held in the Skyhook's shape: every rule reads one type, and the group an object belongs to
//! is carried beside it, never guessed from its fields.

use std::marker::PhantomData;
use std::sync::Arc;

use serde::{Deserialize, Deserializer};
use skyhook_api::nodewright_v1alpha1::NodeWright;
use skyhook_api::v1alpha1::{Skyhook, SkyhookSpec, SkyhookStatus};

use super::slim::WireMeta;

/// A workload object of kind `K` (a [`Skyhook`] or a [`NodeWright`]) as the cache holds it, in
/// the Skyhook's shape (see the module documentation). `K` only names the kind the watch
/// lists.
#[derive(Debug)]
pub struct CachedWorkload<K> {
    skyhook: Arc<Skyhook>,
    kind: PhantomData<fn() -> K>,
}

/// A Skyhook as the cache holds it.
pub type CachedSkyhook = CachedWorkload<Skyhook>;

/// A NodeWright as the cache holds it.
pub type CachedNodeWright = CachedWorkload<NodeWright>;

// Derived, `Clone` would ask `K: Clone` of a marker.
impl<K> Clone for CachedWorkload<K> {
    fn clone(&self) -> Self {
        CachedWorkload {
            skyhook: Arc::clone(&self.skyhook),
            kind: PhantomData,
        }
    }
}

impl<K> CachedWorkload<K> {
    /// The object in the Skyhook's shape, shared.
    pub fn skyhook(&self) -> &Arc<Skyhook> {
        &self.skyhook
    }

    fn new(skyhook: Skyhook) -> Self {
        CachedWorkload {
            skyhook: Arc::new(skyhook),
            kind: PhantomData,
        }
    }
}

impl From<Skyhook> for CachedSkyhook {
    fn from(mut skyhook: Skyhook) -> Self {
        skyhook.metadata.managed_fields = None;
        CachedWorkload::new(skyhook)
    }
}

impl From<NodeWright> for CachedNodeWright {
    fn from(nodewright: NodeWright) -> Self {
        let mut skyhook = Skyhook::from(nodewright);
        skyhook.metadata.managed_fields = None;
        CachedWorkload::new(skyhook)
    }
}

resource_of!(impl[K: kube::Resource<DynamicType = ()>] CachedWorkload<K> as K {
    meta: |cached| cached.skyhook.metadata,
    meta_mut: |cached| Arc::make_mut(&mut cached.skyhook).metadata,
});

impl<'de, K> Deserialize<'de> for CachedWorkload<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The fields of a Skyhook's (or NodeWright's) JSON, with the metadata's
        /// `managedFields` skipped.
        #[derive(Deserialize)]
        struct WireSkyhook {
            #[serde(default)]
            metadata: WireMeta,
            spec: SkyhookSpec,
            status: Option<SkyhookStatus>,
        }
        let WireSkyhook {
            metadata,
            spec,
            status,
        } = WireSkyhook::deserialize(deserializer)?;
        Ok(CachedWorkload::new(Skyhook {
            metadata: metadata.into_meta(),
            spec,
            status,
        }))
    }
}

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;

    fn skyhook_json() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "skyhook.nvidia.com/v1alpha1", "kind": "Skyhook",
            "metadata": {
                "name": "gpu", "uid": "u-1", "resourceVersion": "42", "generation": 3,
                "creationTimestamp": "2026-11-27T10:00:00Z",
                "labels": {"team": "hpc"},
                "annotations": {"skyhook.nvidia.com/version": "v0.13.0"},
                "finalizers": ["skyhook.nvidia.com/skyhook"],
                "managedFields": [{"manager": "skyhook-controller", "operation": "Apply",
                                   "subresource": "status", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:status": {"f:nodeState": {"f:node-1": {}}}}}]
            },
            "spec": {
                "nodeSelectors": {"matchLabels": {"gpu": "true"}},
                "interruptionBudget": {"percent": 25},
                "packages": {"driver": {"version": "1.0.0", "image": "ghcr.io/x/driver",
                                        "env": [{"name": "A", "value": "1"}]}}
            },
            "status": {
                "status": "in_progress",
                "nodeState": {"node-1": {"driver|1.0.0": {
                    "name": "driver", "version": "1.0.0", "image": "ghcr.io/x/driver",
                    "stage": "apply", "state": "in_progress"}}},
                "nodeStatus": {"node-1": "in_progress"},
                "nodeBootIds": {"node-1": "boot-1"},
                "completeNodes": "0/1"
            }
        })
    }

    #[test]
    fn a_cached_skyhook_is_the_skyhook_without_its_managed_fields() {
        let full: Skyhook = serde_json::from_value(skyhook_json()).unwrap();
        assert!(full.metadata.managed_fields.is_some());
        let cached: CachedSkyhook = serde_json::from_value(skyhook_json()).unwrap();
        assert!(cached.skyhook().metadata.managed_fields.is_none());
        let json = |skyhook: &Skyhook| serde_json::to_value(skyhook).unwrap();
        let from_full = CachedSkyhook::from(full.clone());
        assert_eq!(json(cached.skyhook()), json(from_full.skyhook()));
        let mut without = full;
        without.metadata.managed_fields = None;
        assert_eq!(json(cached.skyhook()), json(&without));
        assert_eq!(cached.meta(), &without.metadata);
    }

    #[test]
    fn a_cached_nodewright_is_listed_as_a_nodewright_and_read_as_a_skyhook() {
        let mut json = skyhook_json();
        json["apiVersion"] = "nodewright.nvidia.com/v1alpha1".into();
        json["kind"] = "NodeWright".into();
        let cached: CachedNodeWright = serde_json::from_value(json).unwrap();
        fn listed<K: kube::Resource<DynamicType = ()>>() -> [String; 3] {
            [K::group(&()), K::kind(&()), K::plural(&())].map(|part| part.into_owned())
        }
        assert_eq!(
            listed::<CachedNodeWright>(),
            ["nodewright.nvidia.com", "NodeWright", "nodewrights"]
        );
        assert_eq!(
            listed::<CachedSkyhook>(),
            ["skyhook.nvidia.com", "Skyhook", "skyhooks"]
        );
        let expected: CachedSkyhook = serde_json::from_value(skyhook_json()).unwrap();
        let json = |skyhook: &Skyhook| serde_json::to_value(skyhook).unwrap();
        assert_eq!(json(cached.skyhook()), json(expected.skyhook()));
        assert!(cached.skyhook().metadata.managed_fields.is_none());
        let converted = CachedNodeWright::from(NodeWright::from(
            serde_json::from_value::<Skyhook>(skyhook_json()).unwrap(),
        ));
        assert_eq!(json(converted.skyhook()), json(expected.skyhook()));
    }

    #[test]
    fn changing_a_shared_cached_skyhook_leaves_the_snapshots_copy_alone() {
        let mut cached: CachedSkyhook = serde_json::from_value(skyhook_json()).unwrap();
        let shared = cached.skyhook().clone();
        cached.meta_mut().resource_version = Some("43".into());
        assert_eq!(shared.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(cached.meta().resource_version.as_deref(), Some("43"));
    }
}
