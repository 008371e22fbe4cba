//! The ConfigMaps the controller owns (spec §2.6, §2.8): one per package with a `configMap`, and
//! one node-metadata ConfigMap per (Skyhook, node) that package pods mount at
//! `/skyhook-package/node-metadata`.
//!
//! Contract: the builders are pure and return the complete desired object (name, namespace,
//! labels, annotations, controller owner reference, data). Comparing desired data with what exists,
//! and deciding when a changed package ConfigMap may be written (the config-update rules), belongs
//! to the plan.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use serde::Serialize;
use skyhook_api::image::stored_image;
use skyhook_api::string_map::PackedMap;
use skyhook_api::v1alpha1::{Interrupt, Package};

use crate::config::PodSettings;
use crate::names::{self, OwnerSkyhook};

/// Data key of the node's annotations in the node-metadata ConfigMap.
pub const ANNOTATIONS_KEY: &str = "annotations.json";
/// Data key of the node's labels in the node-metadata ConfigMap.
pub const LABELS_KEY: &str = "labels.json";
/// Data key of the agent version and package list in the node-metadata ConfigMap.
pub const PACKAGES_KEY: &str = "packages.json";

/// The ConfigMap `<skyhook>-<package>-<version>` holding a package's `configMap`, or `None` when
/// the package has none.
pub fn package_configmap(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    package: &Package,
) -> Option<ConfigMap> {
    let keys = owner.group.keys();
    if package.config_map.is_empty() {
        return None;
    }
    Some(ConfigMap {
        metadata: ObjectMeta {
            name: Some(names::package_configmap_name(
                owner.name,
                &package.name,
                &package.version,
            )),
            namespace: Some(settings.namespace.clone()),
            labels: Some(BTreeMap::from([(
                keys.name_label.to_owned(),
                owner.name.to_owned(),
            )])),
            annotations: Some(BTreeMap::from([
                (keys.name_label.to_owned(), owner.name.to_owned()),
                (
                    keys.package_name_annotation.to_owned(),
                    package.name.clone(),
                ),
                (
                    keys.package_version_annotation.to_owned(),
                    package.version.clone(),
                ),
            ])),
            owner_references: Some(vec![owner.owner_reference()]),
            ..ObjectMeta::default()
        },
        data: Some(package.config_map.clone()),
        ..ConfigMap::default()
    })
}

/// What the node-metadata ConfigMap describes: one node as the controller last saw it.
#[derive(Debug, Clone, Copy)]
pub struct NodeFacts<'a> {
    /// The node name.
    pub name: &'a str,
    /// The node's labels.
    pub labels: &'a PackedMap,
    /// The node's annotations.
    pub annotations: &'a BTreeMap<String, String>,
}

/// The node-metadata ConfigMap of `owner` on a node: the node's annotations and labels, and the
/// agent version with the Skyhook's packages, for the agent and package scripts to read.
pub fn node_metadata_configmap(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    packages: &BTreeMap<String, Package>,
    node: NodeFacts<'_>,
) -> ConfigMap {
    let keys = owner.group.keys();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(names::node_metadata_configmap_name(owner.name, node.name)),
            namespace: Some(settings.namespace.clone()),
            labels: Some(BTreeMap::from([(
                keys.node_meta_label.to_owned(),
                owner.name.to_owned(),
            )])),
            annotations: Some(BTreeMap::from([
                (keys.name_label.to_owned(), owner.name.to_owned()),
                (keys.node_name_annotation.to_owned(), node.name.to_owned()),
            ])),
            owner_references: Some(vec![owner.owner_reference()]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            (ANNOTATIONS_KEY.to_owned(), json(node.annotations)),
            (LABELS_KEY.to_owned(), json(node.labels)),
            (
                PACKAGES_KEY.to_owned(),
                packages_json(&settings.agent_version, packages),
            ),
        ])),
        ..ConfigMap::default()
    }
}

/// `packages.json`: `{"agentVersion": ..., "packages": {<name>: {name, version, image,
/// agentImageOverride?, interrupt?, configInterrupts?}}}`, with images stored without tag.
pub fn packages_json(agent_version: &str, packages: &BTreeMap<String, Package>) -> String {
    let metadata = PackagesJson {
        agent_version,
        packages: packages
            .iter()
            .map(|(key, package)| {
                (
                    key.as_str(),
                    PackageMetadata {
                        name: &package.name,
                        version: &package.version,
                        image: stored_image(&package.image),
                        agent_image_override: package
                            .agent_image_override
                            .as_deref()
                            .filter(|image| !image.is_empty()),
                        interrupt: package.interrupt.as_ref(),
                        config_interrupts: &package.config_interrupts,
                    },
                )
            })
            .collect(),
    };
    json(&metadata)
}

/// Reads the packages back from a [`packages_json`] text, as far as it describes them (name,
/// version, image, agent image override and interrupts); `None` when it does not read.
pub fn read_packages_json(text: &str) -> Option<BTreeMap<String, Package>> {
    #[derive(serde::Deserialize)]
    struct Written {
        packages: BTreeMap<String, Package>,
    }
    serde_json::from_str::<Written>(text)
        .ok()
        .map(|written| written.packages)
}

#[derive(Serialize)]
struct PackagesJson<'a> {
    #[serde(rename = "agentVersion")]
    agent_version: &'a str,
    packages: BTreeMap<&'a str, PackageMetadata<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PackageMetadata<'a> {
    name: &'a str,
    version: &'a str,
    image: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_image_override: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupt: Option<&'a Interrupt>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    config_interrupts: &'a BTreeMap<String, Interrupt>,
}

/// Compact JSON with sorted keys (maps are `BTreeMap`s).
fn json<T: Serialize + ?Sized>(value: &T) -> String {
    // Maps of strings and plain structs serialise without a failure path.
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use skyhook_api::v1alpha1::InterruptType;

    use super::*;
    use crate::pods::tests::{package, settings, skyhook};

    #[test]
    fn package_configmap_shape() {
        let sky = skyhook("simple-skyhook", vec![]);
        let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
        let dexter = Package {
            config_map: BTreeMap::from([
                ("game.properties".into(), "lives=3".into()),
                ("ui.properties".into(), "color=blue".into()),
            ]),
            ..package("dexter", "1.2.3", "ghcr.io/nvidia/skyhook/agentless")
        };
        let cm = package_configmap(&settings(), &owner, &dexter).unwrap();
        assert_eq!(
            cm.metadata.name.as_deref(),
            Some("simple-skyhook-dexter-1.2.3")
        );
        assert_eq!(cm.metadata.namespace.as_deref(), Some("skyhook"));
        assert_eq!(
            cm.metadata.labels.unwrap(),
            BTreeMap::from([("skyhook.nvidia.com/name".into(), "simple-skyhook".into())])
        );
        assert_eq!(
            cm.metadata.annotations.unwrap(),
            BTreeMap::from([
                ("skyhook.nvidia.com/name".into(), "simple-skyhook".into()),
                ("skyhook.nvidia.com/Package.Name".into(), "dexter".into()),
                ("skyhook.nvidia.com/Package.Version".into(), "1.2.3".into()),
            ])
        );
        assert_eq!(cm.metadata.owner_references.unwrap()[0].kind, "Skyhook");
        assert_eq!(cm.data.unwrap(), dexter.config_map);

        let plain = package("spencer", "3.2.3", "ghcr.io/nvidia/skyhook/agentless");
        assert!(package_configmap(&settings(), &owner, &plain).is_none());
    }

    #[test]
    fn packages_json_reads_back_the_interrupts() {
        let mut dexter = package("dexter", "1.2.3", "ghcr.io/nvidia/skyhook/agentless:1.2.3");
        dexter.interrupt = Some(Interrupt {
            type_: InterruptType::Service,
            services: vec!["cron".into()],
        });
        let plain = package("spencer", "3.2.3", "ghcr.io/nvidia/skyhook/agentless");
        let packages =
            BTreeMap::from([("dexter".to_owned(), dexter), ("spencer".to_owned(), plain)]);
        let read = read_packages_json(&packages_json("6.4.0", &packages)).unwrap();
        assert_eq!(read["dexter"].interrupt, packages["dexter"].interrupt);
        assert_eq!(read["spencer"].interrupt, None);
        assert_eq!(read["spencer"].version, "3.2.3");
        assert!(read_packages_json("{not json").is_none());
    }

    #[test]
    fn node_metadata_configmap_shape() {
        let sky = skyhook("simple-skyhook", vec![]);
        let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
        let dexter = Package {
            interrupt: Some(Interrupt {
                type_: InterruptType::Reboot,
                services: vec![],
            }),
            config_interrupts: BTreeMap::from([(
                "game.properties".into(),
                Interrupt {
                    type_: InterruptType::Service,
                    services: vec!["rsyslog".into()],
                },
            )]),
            ..package("dexter", "1.2.3", "ghcr.io/nvidia/skyhook/agentless:bogus")
        };
        let jason = Package {
            agent_image_override: Some("ghcr.io/nvidia/skyhook/agentless:6.1.0".into()),
            ..package("jason", "1.3.2", "ghcr.io/nvidia/skyhook/agentless")
        };
        let packages = BTreeMap::from([("dexter".into(), dexter), ("jason".into(), jason)]);
        let labels = PackedMap::from_iter([("kubernetes.io/hostname", "kind-worker")]);
        let annotations = BTreeMap::from([("b".into(), "<2>".into()), ("a".into(), "1".into())]);
        let node = NodeFacts {
            name: "kind-worker",
            labels: &labels,
            annotations: &annotations,
        };
        let cm = node_metadata_configmap(&settings(), &owner, &packages, node);

        assert_eq!(
            cm.metadata.name.as_deref(),
            Some(names::node_metadata_configmap_name("simple-skyhook", "kind-worker").as_str())
        );
        assert_eq!(
            cm.metadata.labels.unwrap(),
            BTreeMap::from([(
                "skyhook.nvidia.com/skyhook-node-meta".into(),
                "simple-skyhook".into()
            )])
        );
        assert_eq!(
            cm.metadata.annotations.unwrap(),
            BTreeMap::from([
                ("skyhook.nvidia.com/name".into(), "simple-skyhook".into()),
                ("skyhook.nvidia.com/Node.name".into(), "kind-worker".into()),
            ])
        );
        assert_eq!(cm.metadata.owner_references.unwrap().len(), 1);
        let data = cm.data.unwrap();
        assert_eq!(data.len(), 3, "exactly three keys");
        assert_eq!(data[ANNOTATIONS_KEY], r#"{"a":"1","b":"<2>"}"#);
        assert_eq!(
            data[LABELS_KEY],
            r#"{"kubernetes.io/hostname":"kind-worker"}"#
        );
        assert_eq!(
            data[PACKAGES_KEY],
            concat!(
                r#"{"agentVersion":"6.2.0","packages":{"#,
                r#""dexter":{"name":"dexter","version":"1.2.3","image":"ghcr.io/nvidia/skyhook/agentless","#,
                r#""interrupt":{"type":"reboot"},"configInterrupts":{"game.properties":{"type":"service","services":["rsyslog"]}}},"#,
                r#""jason":{"name":"jason","version":"1.3.2","image":"ghcr.io/nvidia/skyhook/agentless","#,
                r#""agentImageOverride":"ghcr.io/nvidia/skyhook/agentless:6.1.0"}}}"#
            )
        );
    }
}
