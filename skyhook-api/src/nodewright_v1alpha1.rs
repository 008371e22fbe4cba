//! The `nodewright.nvidia.com/v1alpha1` API, upstream's since v0.18: the `NodeWright` and
//! `DeploymentPolicy` custom resources.
//!
//! Upstream renamed the `Skyhook` to `NodeWright` and moved both kinds to a new group with the
//! same fields (its converter copies them one by one). One spec type serves both groups here, so
//! that every rule reads one type: a NodeWright holds a [`SkyhookSpec`] and a
//! [`SkyhookStatus`], and converts to and from a [`Skyhook`] without a copy of any field. What
//! differs by group is the keys (`crate::keys::NODEWRIGHT`) and the admission rules
//! (`crate::validate`), never the shape. Both kinds are cluster-scoped; neither has a short name
//! (upstream's CRDs give none).

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ClusterResourceScope, Resource};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::generation::Group;
use crate::v1alpha1::{self, DeploymentPolicySpec, Skyhook, SkyhookSpec, SkyhookStatus};

/// The API version of both kinds.
pub const VERSION: &str = "v1alpha1";

/// A NodeWright: which packages to apply to which nodes, in which order. The same fields as a
/// [`Skyhook`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeWright {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The desired state, as a Skyhook's.
    pub spec: SkyhookSpec,
    /// The observed state, as a Skyhook's.
    pub status: Option<SkyhookStatus>,
}

/// A DeploymentPolicy of the nodewright group: the same fields as
/// [`v1alpha1::DeploymentPolicy`], referenced by NodeWrights.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentPolicy {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The compartments, budgets and strategies.
    pub spec: DeploymentPolicySpec,
}

impl NodeWright {
    /// A NodeWright named `name` with `spec`, as `kube`'s generated `Skyhook::new`.
    pub fn new(name: &str, spec: SkyhookSpec) -> Self {
        NodeWright {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

impl From<Skyhook> for NodeWright {
    /// The same object under the other kind: metadata, spec and status moved as they are (keys
    /// under the old group's prefix are rekeyed by the migration, not here).
    fn from(skyhook: Skyhook) -> Self {
        NodeWright {
            metadata: skyhook.metadata,
            spec: skyhook.spec,
            status: skyhook.status,
        }
    }
}

impl From<NodeWright> for Skyhook {
    /// See [`NodeWright::from`].
    fn from(nodewright: NodeWright) -> Self {
        let mut skyhook = Skyhook::new("", nodewright.spec);
        skyhook.metadata = nodewright.metadata;
        skyhook.status = nodewright.status;
        skyhook
    }
}

impl From<v1alpha1::DeploymentPolicy> for DeploymentPolicy {
    fn from(policy: v1alpha1::DeploymentPolicy) -> Self {
        DeploymentPolicy {
            metadata: policy.metadata,
            spec: policy.spec,
        }
    }
}

impl From<DeploymentPolicy> for v1alpha1::DeploymentPolicy {
    fn from(policy: DeploymentPolicy) -> Self {
        let mut converted = v1alpha1::DeploymentPolicy::new("", policy.spec);
        converted.metadata = policy.metadata;
        converted
    }
}

/// `kube::Resource` for a cluster-scoped kind of the nodewright group.
macro_rules! nodewright_resource {
    ($type:ty, $kind:literal, $plural:literal) => {
        impl Resource for $type {
            type DynamicType = ();
            type Scope = ClusterResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }

            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(Group::NodeWright.name())
            }

            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(VERSION)
            }

            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }

            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

nodewright_resource!(NodeWright, "NodeWright", "nodewrights");
nodewright_resource!(DeploymentPolicy, "DeploymentPolicy", "deploymentpolicies");

/// A NodeWright as JSON: `apiVersion` and `kind` written, ignored when read (a list's items
/// may omit them, as the API server's do).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeWrightOut<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: &'a ObjectMeta,
    spec: &'a SkyhookSpec,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: &'a Option<SkyhookStatus>,
}

#[derive(Deserialize)]
struct NodeWrightIn {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: SkyhookSpec,
    #[serde(default)]
    status: Option<SkyhookStatus>,
}

impl Serialize for NodeWright {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        NodeWrightOut {
            api_version: Group::NodeWright.api_version(),
            kind: "NodeWright",
            metadata: &self.metadata,
            spec: &self.spec,
            status: &self.status,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for NodeWright {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let NodeWrightIn {
            metadata,
            spec,
            status,
        } = NodeWrightIn::deserialize(deserializer)?;
        Ok(NodeWright {
            metadata,
            spec,
            status,
        })
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PolicyOut<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: &'a ObjectMeta,
    spec: &'a DeploymentPolicySpec,
}

#[derive(Deserialize)]
struct PolicyIn {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: DeploymentPolicySpec,
}

impl Serialize for DeploymentPolicy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        PolicyOut {
            api_version: Group::NodeWright.api_version(),
            kind: "DeploymentPolicy",
            metadata: &self.metadata,
            spec: &self.spec,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for DeploymentPolicy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let PolicyIn { metadata, spec } = PolicyIn::deserialize(deserializer)?;
        Ok(DeploymentPolicy { metadata, spec })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream v0.20 NodeWright manifest, with the fields it added.
    const MANIFEST: &str = r#"{
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": {"name": "gpu", "annotations": {"nodewright.nvidia.com/pause": "true"}},
        "spec": {
            "nodeSelectors": {"matchLabels": {"gpu": "true"}},
            "drainConfig": {"timeout": "10m", "force": true},
            "runtimeRequired": true,
            "runtimeRequiredCordonAfter": true,
            "packages": {
                "driver": {"version": "1.2.3", "image": "ghcr.io/example/driver",
                           "stageTimeout": "30m", "interrupt": {"type": "reboot"}}
            }
        },
        "status": {"status": "in_progress"}
    }"#;

    #[test]
    fn a_nodewright_reads_and_writes_as_upstreams() {
        let nodewright: NodeWright = serde_json::from_str(MANIFEST).expect("an upstream manifest");
        assert_eq!(nodewright.metadata.name.as_deref(), Some("gpu"));
        assert!(nodewright.spec.runtime_required_cordon_after);
        assert!(nodewright.spec.drain_config.is_some());
        let written = serde_json::to_value(&nodewright).expect("serialisable");
        assert_eq!(written["apiVersion"], "nodewright.nvidia.com/v1alpha1");
        assert_eq!(written["kind"], "NodeWright");
        assert_eq!(written["status"]["status"], "in_progress");
        let again: NodeWright = serde_json::from_value(written).expect("read back");
        assert_eq!(again, nodewright);
    }

    #[test]
    fn a_nodewright_is_a_skyhook_under_another_kind() {
        let nodewright: NodeWright = serde_json::from_str(MANIFEST).expect("an upstream manifest");
        let skyhook = Skyhook::from(nodewright.clone());
        assert_eq!(skyhook.spec, nodewright.spec);
        assert_eq!(skyhook.metadata, nodewright.metadata);
        assert_eq!(skyhook.status, nodewright.status);
        assert_eq!(NodeWright::from(skyhook), nodewright);
    }

    #[test]
    fn both_kinds_are_cluster_scoped_resources_of_the_nodewright_group() {
        assert_eq!(
            NodeWright::api_version(&()),
            "nodewright.nvidia.com/v1alpha1"
        );
        assert_eq!(NodeWright::plural(&()), "nodewrights");
        assert_eq!(NodeWright::kind(&()), "NodeWright");
        assert_eq!(
            DeploymentPolicy::api_version(&()),
            "nodewright.nvidia.com/v1alpha1"
        );
        assert_eq!(DeploymentPolicy::plural(&()), "deploymentpolicies");
        let policy: DeploymentPolicy = serde_json::from_str(
            r#"{"metadata": {"name": "p"}, "spec": {"default": {"budget": {"count": 1}, "strategy": {"fixed": {}}}}}"#,
        )
        .expect("a policy");
        let written = serde_json::to_value(&policy).expect("serialisable");
        assert_eq!(written["kind"], "DeploymentPolicy");
        assert_eq!(written["apiVersion"], "nodewright.nvidia.com/v1alpha1");
        let legacy = v1alpha1::DeploymentPolicy::from(policy.clone());
        assert_eq!(DeploymentPolicy::from(legacy), policy);
    }
}
