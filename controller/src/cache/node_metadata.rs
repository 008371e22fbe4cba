//! Node-metadata ConfigMaps as the cache holds them: a digest of their data, the one entry the
//! plan reads, and whose they are (Skyhook and node).
//!
//! There is one such ConfigMap per node and Skyhook, and each copies its node's labels and
//! annotations as JSON (about 2.6 KB of data per realistic node). The plan reads two things of
//! it: whether it holds exactly the data the plan would write now (it writes only when not), and
//! the `packages.json` its node's package pods last read. So the cache keeps a digest of the data
//! and that entry, not the data: at 1,000 nodes and three Skyhooks, 3,000 copies of node labels
//! and annotations that no rule reads.
//!
//! The digest is SipHash over the data's entries in key order (std's `DefaultHasher`, whose keys
//! are fixed): equal data always gives equal digests, and two different data a 1 in 2^64 chance
//! of an equal one, where the only cost would be one ConfigMap write skipped until the node next
//! changes.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};

use skyhook_api::generation::Group;

use super::slim::WireMeta;
use crate::configmaps::PACKAGES_KEY;

/// A digest of a ConfigMap's data (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataDigest(u64);

impl DataDigest {
    /// The digest of `data`; an absent data is the empty one.
    pub fn of(data: Option<&BTreeMap<String, String>>) -> Self {
        let mut hasher = DefaultHasher::new();
        match data {
            Some(data) => data.hash(&mut hasher),
            None => BTreeMap::<String, String>::new().hash(&mut hasher),
        }
        DataDigest(hasher.finish())
    }
}

/// A node-metadata ConfigMap as the cache holds it (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct CachedNodeMetadata {
    /// Name, namespace, uid and resource version: what the watch and the own-write check read.
    /// The labels, annotations and owner reference are left out: every one of the thousands of
    /// these ConfigMaps carries the same few, and a one-entry map alone takes about 550 bytes.
    metadata: ObjectMeta,
    /// The owning object's group and name (label `<group>/skyhook-node-meta`).
    owner: Option<(Group, String)>,
    /// The node (annotation `<group>/Node.name`).
    node: Option<String>,
    digest: DataDigest,
    packages_json: Option<String>,
}

impl CachedNodeMetadata {
    /// Whether the ConfigMap holds exactly `data`.
    pub fn holds(&self, data: Option<&BTreeMap<String, String>>) -> bool {
        self.digest == DataDigest::of(data)
    }

    /// Its `packages.json`, if it has one.
    pub fn packages_json(&self) -> Option<&str> {
        self.packages_json.as_deref()
    }

    /// The group and name of the object it belongs to, from its label; `None` for a ConfigMap
    /// without one.
    pub fn owner(&self) -> Option<(Group, &str)> {
        (self.owner.as_ref()).map(|(group, name)| (*group, name.as_str()))
    }

    /// The node it describes, from its annotation.
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }
}

impl From<ConfigMap> for CachedNodeMetadata {
    fn from(configmap: ConfigMap) -> Self {
        let ConfigMap { metadata, data, .. } = configmap;
        let ObjectMeta {
            name,
            namespace,
            uid,
            resource_version,
            mut labels,
            mut annotations,
            ..
        } = metadata;
        let owner = Group::ALL.into_iter().find_map(|group| {
            let name = labels.as_mut()?.remove(group.keys().node_meta_label)?;
            Some((group, name))
        });
        CachedNodeMetadata {
            metadata: ObjectMeta {
                name,
                namespace,
                uid,
                resource_version,
                ..ObjectMeta::default()
            },
            owner: owner.clone(),
            node: owner.and_then(|(group, _)| {
                annotations
                    .as_mut()
                    .and_then(|a| a.remove(group.keys().node_name_annotation))
            }),
            digest: DataDigest::of(data.as_ref()),
            packages_json: data.and_then(|mut data| data.remove(PACKAGES_KEY)),
        }
    }
}

resource_of!(CachedNodeMetadata, ConfigMap);

impl<'de> Deserialize<'de> for CachedNodeMetadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The fields of a ConfigMap's JSON, with the metadata's `managedFields` skipped.
        #[derive(Deserialize)]
        struct WireConfigMap {
            #[serde(default)]
            metadata: WireMeta,
            data: Option<BTreeMap<String, String>>,
        }
        let WireConfigMap { metadata, data } = WireConfigMap::deserialize(deserializer)?;
        Ok(CachedNodeMetadata::from(ConfigMap {
            metadata: metadata.into_meta(),
            data,
            ..ConfigMap::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use skyhook_api::keys;

    use super::*;

    fn data(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_cached_configmap_holds_its_data_and_no_other() {
        let written = data(&[
            ("labels.json", r#"{"tier":"gpu"}"#),
            ("annotations.json", "{}"),
            (PACKAGES_KEY, r#"{"packages":{}}"#),
        ]);
        let cached: CachedNodeMetadata = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "meta-node-1", "namespace": "skyhook", "resourceVersion": "3",
                         "uid": "u-1",
                         "labels": {keys::SKYHOOK.node_meta_label: "gpu-init", "other": "x"},
                         "annotations": {keys::SKYHOOK.node_name_annotation: "node-1", "other": "y"},
                         "ownerReferences": [{"apiVersion": "skyhook.nvidia.com/v1alpha1",
                                              "kind": "Skyhook", "name": "gpu-init", "uid": "s-1"}],
                         "managedFields": [{"manager": "skyhook", "operation": "Apply"}]},
            "data": written,
        }))
        .unwrap();
        assert!(cached.holds(Some(&written)));
        assert_eq!(cached.packages_json(), Some(r#"{"packages":{}}"#));
        assert_eq!(cached.owner(), Some((Group::Skyhook, "gpu-init")));
        assert_eq!(cached.node(), Some("node-1"));
        // What the watch needs, and nothing else of the metadata.
        let only_identity = ObjectMeta {
            name: Some("meta-node-1".into()),
            namespace: Some("skyhook".into()),
            uid: Some("u-1".into()),
            resource_version: Some("3".into()),
            ..ObjectMeta::default()
        };
        assert_eq!(cached.metadata, only_identity);
        let cases = [
            data(&[("labels.json", r#"{"tier":"cpu"}"#)]),
            data(&[
                ("labels.json", r#"{"tier":"gpu"}"#),
                ("annotations.json", "{}"),
            ]),
            // Entries moved between keys are different data.
            data(&[
                ("labels.json", r#"{"tier":"gpu"}{}"#),
                ("annotations.json", ""),
                (PACKAGES_KEY, r#"{"packages":{}}"#),
            ]),
            BTreeMap::new(),
        ];
        for other in cases {
            assert!(!cached.holds(Some(&other)), "{other:?}");
        }
        assert!(!cached.holds(None));
    }

    #[test]
    fn a_configmap_without_data_holds_the_empty_data() {
        let cached = CachedNodeMetadata::from(ConfigMap::default());
        assert!(cached.holds(None));
        assert!(cached.holds(Some(&BTreeMap::new())));
        assert_eq!(cached.packages_json(), None);
        assert_eq!((cached.owner(), cached.node()), (None, None));
    }

    #[test]
    fn a_nodewright_configmap_is_read_under_its_groups_keys() {
        let keys = Group::NodeWright.keys();
        let cached: CachedNodeMetadata = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "meta-node-1", "namespace": "skyhook",
                         "labels": {keys.node_meta_label: "gpu-init"},
                         "annotations": {keys.node_name_annotation: "node-1",
                                         keys::SKYHOOK.node_name_annotation: "other"}},
        }))
        .unwrap();
        assert_eq!(cached.owner(), Some((Group::NodeWright, "gpu-init")));
        assert_eq!(cached.node(), Some("node-1"));
    }
}
