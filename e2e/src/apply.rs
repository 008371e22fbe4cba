//! Applying YAML of any kind (server-side apply through API discovery) and patching Skyhooks.

use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{Scope, pinned_kind};
use kube::runtime::wait::{await_condition, conditions};
use serde::Deserialize;
use serde_json::{Value, json};

/// Field manager of everything the tests apply.
const FIELD_MANAGER: &str = "e2e";

/// How long a freshly applied CRD may take to be served on a loaded machine.
const CRD_ESTABLISHED: Duration = Duration::from_secs(60);

/// Server-side applies the `nodewright.nvidia.com` CRDs (which the devcluster does not install
/// by default) and returns once the API server serves each of them.
pub async fn apply_nodewright_crds(client: &kube::Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in skyhook_api::crd::nodewright_crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("applying CRD {name}"))?;
        tokio::time::timeout(
            CRD_ESTABLISHED,
            await_condition(crds.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .with_context(|| format!("CRD {name} was not established within {CRD_ESTABLISHED:?}"))?
        .with_context(|| format!("watching CRD {name}"))?;
    }
    Ok(())
}

/// Server-side applies every document of `yaml` (any kinds; namespaced objects without a
/// namespace go to `default`), forcing ownership of the fields it sets. Returns `Kind/name` of
/// each object, in order.
pub async fn apply_yaml(client: &kube::Client, yaml: &str) -> anyhow::Result<Vec<String>> {
    let mut applied = Vec::new();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let value = Value::deserialize(document).context("parsing a YAML document")?;
        if value.is_null() {
            continue;
        }
        let object: DynamicObject =
            serde_json::from_value(value).context("reading a YAML document as an object")?;
        applied.push(apply_object(client, &object).await?);
    }
    Ok(applied)
}

async fn apply_object(client: &kube::Client, object: &DynamicObject) -> anyhow::Result<String> {
    let Some(types) = object.types.as_ref() else {
        bail!("a document has no apiVersion/kind: {object:?}");
    };
    let name = object
        .metadata
        .name
        .as_deref()
        .with_context(|| format!("a {} has no metadata.name", types.kind))?;
    let gvk = GroupVersionKind::try_from(types).with_context(|| {
        format!(
            "{} {name}: bad apiVersion {}",
            types.kind, types.api_version
        )
    })?;
    let (resource, capabilities) = pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("discovering {gvk:?} for {name}"))?;
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Cluster => Api::all_with(client.clone(), &resource),
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            object.metadata.namespace.as_deref().unwrap_or("default"),
            &resource,
        ),
    };
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {} {name}", types.kind))?;
    Ok(format!("{}/{name}", types.kind))
}

/// JSON merge patch of the Skyhook `name`'s spec or metadata (`patch` is the whole patch object).
pub async fn merge_patch_skyhook(
    client: &kube::Client,
    name: &str,
    patch: &Value,
) -> anyhow::Result<()> {
    crate::skyhook_api(client)
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .with_context(|| format!("merge-patching Skyhook {name} with {patch}"))?;
    Ok(())
}

/// A Skyhook manifest (JSON, which is YAML) named `name` with `spec`, into which the top-level
/// fields of `extra_spec` are merged (a scenario's budget, policy or pause on a common spec).
pub fn skyhook_manifest(name: &str, mut spec: Value, extra_spec: Value) -> String {
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        spec.extend(extra.clone());
    }
    json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "Skyhook",
        "metadata": {"name": name},
        "spec": spec,
    })
    .to_string()
}

/// A DeploymentPolicy manifest (JSON, which is YAML) named `name` with `spec`.
pub fn policy_manifest(name: &str, spec: Value) -> String {
    json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": name},
        "spec": spec,
    })
    .to_string()
}
