//! The CustomResourceDefinitions generated from the Rust types, as committed under
//! `chart/crds/`. A test keeps the committed files equal to this output.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::v1alpha1::{DeploymentPolicy, Skyhook};

/// First line of every generated file.
pub const HEADER: &str = "# Generated from skyhook-api by `cargo run -p skyhook-api --bin crdgen -- --write`. Do not edit.\n";

/// A CRD together with the name of its file under `chart/crds/`.
#[derive(Debug, Clone)]
pub struct GeneratedCrd {
    /// File name, `<group>_<plural>.yaml`.
    pub file_name: &'static str,
    /// The definition.
    pub crd: CustomResourceDefinition,
}

/// Every CRD this crate defines.
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

impl GeneratedCrd {
    /// The file content: [`HEADER`] followed by the CRD as YAML.
    pub fn to_yaml(&self) -> Result<String, serde_yaml::Error> {
        Ok(format!("{HEADER}{}", serde_yaml::to_string(&self.crd)?))
    }
}
