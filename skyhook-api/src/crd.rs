//! The CustomResourceDefinitions generated from the Rust types: the skyhook group's as committed
//! under `chart/crds/` (a test keeps the committed files equal to this output), and the
//! nodewright group's, the same schemas under upstream's v0.18 names.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames,
};
use kube::CustomResourceExt;

use crate::generation::Group;
use crate::v1alpha1::{DeploymentPolicy, Skyhook};

/// First line of every generated file.
pub const HEADER: &str = "# Generated from skyhook-api by `cargo run -p skyhook-api --bin crdgen -- --write`. Do not edit.\n";

/// The annotation that keeps a CRD, and with it every object of its kind, through `helm
/// uninstall` and `helm rollback` (upstream's on its nodewright CRDs).
pub const HELM_KEEP: (&str, &str) = ("helm.sh/resource-policy", "keep");

/// A CRD together with the name of its file under `chart/crds/`.
#[derive(Debug, Clone)]
pub struct GeneratedCrd {
    /// File name, `<group>_<plural>.yaml`.
    pub file_name: &'static str,
    /// The definition.
    pub crd: CustomResourceDefinition,
}

/// The skyhook group's CRDs, the files of `chart/crds/`.
pub fn crds() -> [GeneratedCrd; 2] {
    [
        GeneratedCrd {
            file_name: "skyhook.nvidia.com_skyhooks.yaml",
            crd: Skyhook::crd(),
        },
        GeneratedCrd {
            file_name: "skyhook.nvidia.com_deploymentpolicies.yaml",
            crd: DeploymentPolicy::crd(),
        },
    ]
}

/// The nodewright group's CRDs: `NodeWright` and its `DeploymentPolicy`, the skyhook group's
/// schemas, printer columns and status subresource under the new group and names, kept by Helm
/// ([`HELM_KEEP`]).
pub fn nodewright_crds() -> [CustomResourceDefinition; 2] {
    let description = "NodeWright applies packages (container images with lifecycle scripts) to the host OS of the selected nodes, rolling through the cluster within a disruption budget.";
    [
        relabel(
            Skyhook::crd(),
            Group::NodeWright,
            ("NodeWright", "nodewrights", "nodewright"),
            Some(description),
        ),
        relabel(
            DeploymentPolicy::crd(),
            Group::NodeWright,
            ("DeploymentPolicy", "deploymentpolicies", "deploymentpolicy"),
            None,
        ),
    ]
}

/// `crd` served under `group` as `(kind, plural, singular)`, without short names (upstream's
/// nodewright CRDs have none, and `sky`/`dp` stay the skyhook group's), with `description` as
/// the top-level schema description when given.
pub fn relabel(
    mut crd: CustomResourceDefinition,
    group: Group,
    (kind, plural, singular): (&str, &str, &str),
    description: Option<&str>,
) -> CustomResourceDefinition {
    crd.metadata.name = Some(format!("{plural}.{}", group.name()));
    crd.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(HELM_KEEP.0.to_owned(), HELM_KEEP.1.to_owned());
    crd.spec.group = group.name().to_owned();
    crd.spec.names = CustomResourceDefinitionNames {
        kind: kind.to_owned(),
        list_kind: Some(format!("{kind}List")),
        plural: plural.to_owned(),
        singular: Some(singular.to_owned()),
        short_names: None,
        categories: crd.spec.names.categories.take(),
    };
    if let Some(description) = description {
        for version in &mut crd.spec.versions {
            if let Some(schema) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                schema.description = Some(description.to_owned());
            }
        }
    }
    crd
}

impl GeneratedCrd {
    /// The file content: [`HEADER`] followed by the CRD as YAML.
    pub fn to_yaml(&self) -> Result<String, serde_yaml::Error> {
        Ok(format!("{HEADER}{}", serde_yaml::to_string(&self.crd)?))
    }
}

/// Where the nodewright group's CRDs are committed: a chart template, not `chart/crds/`, since
/// Helm installs `crds/` on the first install only and an upgraded release would lack them (they
/// carry [`HELM_KEEP`], as upstream's).
pub const NODEWRIGHT_CRDS_TEMPLATE: &str = "chart/templates/nodewright-crds.yaml";

/// The text of [`NODEWRIGHT_CRDS_TEMPLATE`]: both CRDs, as YAML documents.
pub fn nodewright_crds_template() -> Result<String, serde_yaml::Error> {
    let mut text = HEADER.to_owned();
    for crd in nodewright_crds() {
        text.push_str("---\n");
        text.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nodewright_crds_are_the_skyhook_schemas_under_the_new_names() {
        let [nodewright, policy] = nodewright_crds();
        let skyhook = Skyhook::crd();
        assert_eq!(
            nodewright.metadata.name.as_deref(),
            Some("nodewrights.nodewright.nvidia.com")
        );
        assert_eq!(nodewright.spec.group, "nodewright.nvidia.com");
        assert_eq!(nodewright.spec.names.kind, "NodeWright");
        assert_eq!(
            nodewright.spec.names.list_kind.as_deref(),
            Some("NodeWrightList")
        );
        assert_eq!(
            nodewright.spec.names.singular.as_deref(),
            Some("nodewright")
        );
        assert_eq!(nodewright.spec.names.short_names, None);
        assert_eq!(nodewright.spec.scope, "Cluster");
        let (ours, theirs) = (&nodewright.spec.versions[0], &skyhook.spec.versions[0]);
        assert_eq!(ours.name, "v1alpha1");
        assert_eq!(ours.subresources, theirs.subresources);
        assert_eq!(
            ours.additional_printer_columns,
            theirs.additional_printer_columns
        );
        let properties = |v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion| {
            v.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).and_then(|s| s.properties.clone())
        };
        assert_eq!(properties(ours), properties(theirs));
        assert_eq!(
            policy.metadata.name.as_deref(),
            Some("deploymentpolicies.nodewright.nvidia.com")
        );
        assert_eq!(policy.spec.names.short_names, None);
        for crd in [&nodewright, &policy] {
            assert_eq!(
                crd.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("helm.sh/resource-policy"))
                    .map(String::as_str),
                Some("keep")
            );
        }
        for generated in crds() {
            assert!(
                generated.crd.metadata.annotations.is_none(),
                "the skyhook CRDs stay as they were"
            );
        }
    }
}
