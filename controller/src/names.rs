//! Names, labels and identities of the objects the controller creates (spec §2.8), computed
//! exactly as upstream computes them so that pods, ConfigMaps and host directories keep their
//! names when a cluster moves from upstream's operator to ours.
//!
//! Contract: every function here is deterministic and pure. [`OwnerSkyhook`] is the one fallible
//! step: a Skyhook read from the API server always has a uid and a generation, and everything the
//! controller creates is owned by one, so a Skyhook without them is rejected once, here.

use k8s_openapi::api::core::v1::{LocalObjectReference, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use sha2::{Digest, Sha256};
use skyhook_api::generation::Group;
use skyhook_api::names;
use skyhook_api::v1alpha1::{Skyhook, Stage};

use crate::config::PodSettings;

/// Longest pod name and volume name the controller generates.
pub const MAX_POD_NAME: usize = 63;
/// Longest ConfigMap name the controller generates.
pub const MAX_CONFIGMAP_NAME: usize = 253;

pub use skyhook_api::names::{
    check_container_name, copy_container_name, package_configmap_name, package_label,
    stage_container_name,
};

/// Upstream's `generateSafeName`: the parts joined with `-`, `.` replaced by `-`, cut to
/// `max - 9` characters, lowercased, then `-` and the first 8 hex digits of the SHA-256 of the
/// joined (uncut, not lowercased) text. Unique per input and at most `max` characters.
pub fn safe_name(max: usize, parts: &[&str]) -> String {
    let joined = names::safe_name_text(parts);
    let digest = Sha256::digest(joined.as_bytes());
    let hash8: String = digest
        .iter()
        .take(4)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let keep = max.saturating_sub(hash8.len() + 1);
    let cut = match joined.char_indices().nth(keep) {
        Some((at, _)) => &joined[..at],
        None => joined.as_str(),
    };
    format!("{}-{hash8}", cut.to_lowercase())
}

/// Name of the pod that pulls `images` on `node` for `skyhook` before its cordon: another set
/// of images gets another name, so a stale pod never stands in the way of the new one.
pub fn pre_pull_pod_name(skyhook: &str, node: &str, images: &[String]) -> String {
    let digest = Sha256::digest(images.join("\n").as_bytes());
    let images: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    safe_name(MAX_POD_NAME, &[skyhook, "prepull", node, &images])
}

/// Name of the pod running `stage` of a package on a node.
pub fn package_pod_name(
    skyhook: &str,
    package: &str,
    version: &str,
    stage: Stage,
    node: &str,
) -> String {
    safe_name(
        MAX_POD_NAME,
        &names::package_pod_name_parts(skyhook, package, version, stage, node),
    )
}

/// Name of the interrupt pod of a node; `interrupt_type` is the CR spelling (`reboot`, `service`…).
pub fn interrupt_pod_name(skyhook: &str, interrupt_type: &str, node: &str) -> String {
    safe_name(MAX_POD_NAME, &[skyhook, "interrupt", interrupt_type, node])
}

/// Name of the interrupt pod that follows an explicit uninstall (upstream's
/// `<skyhook>-uninstall-interrupt-<type>-<node>`).
pub fn uninstall_interrupt_pod_name(skyhook: &str, interrupt_type: &str, node: &str) -> String {
    safe_name(
        MAX_POD_NAME,
        &[skyhook, "uninstall-interrupt", interrupt_type, node],
    )
}

/// Name of the node-metadata ConfigMap of a Skyhook on a node.
pub fn node_metadata_configmap_name(skyhook: &str, node: &str) -> String {
    safe_name(MAX_CONFIGMAP_NAME, &[skyhook, node, "metadata"])
}

/// Name of the volume through which a package pod mounts the node-metadata ConfigMap.
pub fn node_metadata_volume_name(node: &str) -> String {
    safe_name(MAX_POD_NAME, &["metadata", node])
}

/// The Skyhook that owns the objects being built, with what the builders need from it.
#[derive(Debug, Clone)]
pub struct OwnerSkyhook<'a> {
    /// The group it was read from: its owner references name this group's kind.
    pub group: Group,
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.uid`.
    pub uid: &'a str,
    /// `metadata.generation`.
    pub generation: i64,
    /// `spec.additionalTolerations`.
    pub additional_tolerations: &'a [Toleration],
    /// `spec.imagePullSecrets`.
    pub image_pull_secrets: &'a [LocalObjectReference],
}

/// A Skyhook lacks what every owned object needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnerError {
    /// No `metadata.name`.
    #[error(
        "the Skyhook has no metadata.name; only Skyhooks read from the API server can own pods"
    )]
    MissingName,
    /// No `metadata.uid` or `metadata.generation`.
    #[error(
        "Skyhook {name:?} has no metadata.{field}; only Skyhooks read from the API server can own pods"
    )]
    MissingField {
        /// The Skyhook.
        name: String,
        /// `uid` or `generation`.
        field: &'static str,
    },
}

impl<'a> OwnerSkyhook<'a> {
    /// Takes the identity of `skyhook`, an object of `group`.
    pub fn new(group: Group, skyhook: &'a Skyhook) -> Result<Self, OwnerError> {
        let meta = &skyhook.metadata;
        let name = meta.name.as_deref().ok_or(OwnerError::MissingName)?;
        let missing = |field| OwnerError::MissingField {
            name: name.to_owned(),
            field,
        };
        Ok(OwnerSkyhook {
            group,
            name,
            uid: meta.uid.as_deref().ok_or_else(|| missing("uid"))?,
            generation: meta.generation.ok_or_else(|| missing("generation"))?,
            additional_tolerations: &skyhook.spec.additional_tolerations,
            image_pull_secrets: &skyhook.spec.image_pull_secrets,
        })
    }

    /// The controller owner reference put on every pod and ConfigMap, so that they are garbage
    /// collected with the Skyhook.
    pub fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.group.api_version().to_owned(),
            kind: self.group.kind().to_owned(),
            name: self.name.to_owned(),
            uid: self.uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// `<skyhook>-<uid>-<generation>`: the prefix of `SKYHOOK_RESOURCE_ID`.
    pub fn resource_id(&self) -> String {
        format!("{}-{}-{}", self.name, self.uid, self.generation)
    }

    /// The host directory a package's files are copied to:
    /// `<COPY_DIR_ROOT>/<skyhook>/<package>-<version>-<uid>-<generation>`. New for every
    /// generation of the Skyhook.
    pub fn copy_dir(&self, settings: &PodSettings, package: &str, version: &str) -> String {
        format!(
            "{}/{}/{package}-{version}-{}-{}",
            settings.copy_dir_root, self.name, self.uid, self.generation
        )
    }

    /// `SKYHOOK_RESOURCE_ID` of a package: `<skyhook>-<uid>-<generation>_<package>_<version>`.
    /// The agent keys interrupt flags by it, so an interrupt runs once per generation.
    pub fn package_resource_id(&self, package: &str, version: &str) -> String {
        format!("{}_{package}_{version}", self.resource_id())
    }

    /// `SKYHOOK_RESOURCE_ID` of a run of `stage`: the uninstall interrupt's own
    /// ([`Self::uninstall_resource_id`]), otherwise the package's.
    pub fn stage_resource_id(&self, stage: Stage, package: &str, version: &str) -> String {
        match stage {
            Stage::UninstallInterrupt => self.uninstall_resource_id(package, version),
            _ => self.package_resource_id(package, version),
        }
    }

    /// `SKYHOOK_RESOURCE_ID` of the interrupt after an explicit uninstall:
    /// `<skyhook>-<uid>-<generation>-uninstall_<package>_<version>`, distinct from the
    /// install's, so the agent does not skip it as already done in this generation.
    pub fn uninstall_resource_id(&self, package: &str, version: &str) -> String {
        format!("{}-uninstall_{package}_{version}", self.resource_id())
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;
    use skyhook_api::v1alpha1::SkyhookSpec;

    use super::*;

    #[test]
    fn safe_name_vectors() {
        // Expected values computed independently with Python:
        //   name = "-".join(parts).replace(".", "-")
        //   h = hashlib.sha256(name.encode()).hexdigest()[:8]
        //   (name[:max - 9] + "-" + h).lower()
        let cases: &[(usize, &[&str], &str)] = &[
            (
                63,
                &["simple-skyhook", "spencer", "3.2.3", "apply", "kind-worker"],
                "simple-skyhook-spencer-3-2-3-apply-kind-worker-16feedd1",
            ),
            (
                63,
                &[
                    "interrupt-grouping",
                    "dax",
                    "1.2.3",
                    "post-interrupt",
                    "ip-10-0-1-23.ec2.internal",
                ],
                "interrupt-grouping-dax-1-2-3-post-interrupt-ip-10-0-1--9a60c736",
            ),
            (
                253,
                &["demo", "Node.Example.COM", "metadata"],
                "demo-node-example-com-metadata-0cdd8a59",
            ),
            (
                63,
                &["metadata", "kind-worker"],
                "metadata-kind-worker-8bfc3f3a",
            ),
            (
                63,
                &["interrupt", "interrupt", "reboot", "kind-worker"],
                "interrupt-interrupt-reboot-kind-worker-c82cb111",
            ),
        ];
        for (max, parts, want) in cases {
            let got = safe_name(*max, parts);
            assert_eq!(got, *want, "{parts:?}");
            assert!(got.len() <= *max);
        }
    }

    #[test]
    fn safe_name_is_deterministic_and_distinguishes_long_names() {
        let long = "n".repeat(80);
        let a = safe_name(63, &["sky", &long, "a"]);
        let b = safe_name(63, &["sky", &long, "b"]);
        assert_eq!(a.len(), 63);
        assert_eq!(a[..54], b[..54], "same cut prefix");
        assert_ne!(a, b, "the hash tells them apart");
        assert_eq!(a, safe_name(63, &["sky", &long, "a"]));
    }

    fn skyhook(uid: Option<&str>, generation: Option<i64>) -> Skyhook {
        Skyhook {
            metadata: ObjectMeta {
                name: Some("demo".into()),
                uid: uid.map(Into::into),
                generation,
                ..ObjectMeta::default()
            },
            spec: SkyhookSpec::default(),
            status: None,
        }
    }

    #[test]
    fn owner_identity() {
        let skyhook = skyhook(Some("1234-abcd"), Some(2));
        let owner = OwnerSkyhook::new(Group::Skyhook, &skyhook).unwrap();
        let settings = crate::pods::tests::settings();
        assert_eq!(owner.resource_id(), "demo-1234-abcd-2");
        assert_eq!(
            owner.package_resource_id("tuning", "1.1.4"),
            "demo-1234-abcd-2_tuning_1.1.4"
        );
        assert_eq!(
            owner.copy_dir(&settings, "tuning", "1.1.4"),
            "/var/lib/skyhook/demo/tuning-1.1.4-1234-abcd-2"
        );
        let reference = owner.owner_reference();
        assert_eq!(reference.api_version, "skyhook.nvidia.com/v1alpha1");
        assert_eq!(reference.kind, "Skyhook");
        assert_eq!(reference.controller, Some(true));
        assert_eq!(reference.block_owner_deletion, Some(true));
        let nodewright = OwnerSkyhook::new(Group::NodeWright, &skyhook).unwrap();
        let reference = nodewright.owner_reference();
        assert_eq!(
            (reference.api_version.as_str(), reference.kind.as_str()),
            ("nodewright.nvidia.com/v1alpha1", "NodeWright"),
            "a NodeWright's runs are collected with it"
        );
        assert_eq!(
            nodewright.resource_id(),
            owner.resource_id(),
            "names are group-free"
        );
    }

    #[test]
    fn owner_needs_uid_and_generation() {
        assert_eq!(
            OwnerSkyhook::new(Group::Skyhook, &skyhook(None, Some(1))).unwrap_err(),
            OwnerError::MissingField {
                name: "demo".into(),
                field: "uid"
            }
        );
        assert_eq!(
            OwnerSkyhook::new(Group::Skyhook, &skyhook(Some("u"), None)).unwrap_err(),
            OwnerError::MissingField {
                name: "demo".into(),
                field: "generation"
            }
        );
    }
}
