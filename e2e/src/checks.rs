//! Checks upstream's e2e assertions make again and again: a node complete for a Skyhook, an
//! object owned by its Skyhook, a container's resources.

use std::collections::BTreeMap;

use anyhow::ensure;
use k8s_openapi::api::core::v1::{Container, Node};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;

use crate::nodes;

/// Upstream's "node complete" assertions: `status_<skyhook>` label and annotation `complete`,
/// `<skyhook>/NotReady` False/Complete, `<skyhook>/Erroring` False/"Not Erroring", not cordoned
/// and no taint left behind.
pub fn check_complete_node(node: &Node, skyhook: &str) -> anyhow::Result<()> {
    let summary = || nodes::skyhook_keys(node);
    ensure!(
        nodes::has_status(node, skyhook, "complete"),
        "status_{skyhook} is not complete: {}",
        summary()
    );
    ensure!(
        nodes::node_condition(node, &format!("skyhook.nvidia.com/{skyhook}/NotReady"))
            == Some(("False", "Complete")),
        "NotReady condition: {}",
        summary()
    );
    ensure!(
        nodes::node_condition(node, &format!("skyhook.nvidia.com/{skyhook}/Erroring"))
            == Some(("False", "Not Erroring")),
        "Erroring condition: {}",
        summary()
    );
    ensure!(
        !nodes::is_cordoned(node),
        "{skyhook} left the node cordoned"
    );
    let taints = node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.clone())
        .unwrap_or_default();
    ensure!(taints.is_empty(), "taints left on the node: {taints:?}");
    Ok(())
}

/// Whether the object has a controller ownerRef to the Skyhook `skyhook` that blocks owner
/// deletion (what upstream asserts on pods and ConfigMaps).
pub fn owned_by_skyhook(metadata: &ObjectMeta, skyhook: &str) -> bool {
    metadata.owner_references.iter().flatten().any(|owner| {
        owner.kind == "Skyhook"
            && owner.name == skyhook
            && owner.api_version == "skyhook.nvidia.com/v1alpha1"
            && owner.controller == Some(true)
            && owner.block_owner_deletion == Some(true)
    })
}

/// The object (a stage's pod) is controlled by a `batch/v1` Job: upstream v0.18's stage Jobs,
/// themselves owned by their Skyhook.
pub fn owned_by_job(metadata: &ObjectMeta) -> bool {
    metadata.owner_references.iter().flatten().any(|owner| {
        owner.kind == "Job" && owner.api_version == "batch/v1" && owner.controller == Some(true)
    })
}

/// `(cpu limit, memory limit, cpu request, memory request)` of a container, `""` where unset.
pub fn resources(container: &Container) -> (&str, &str, &str, &str) {
    fn get<'a>(map: Option<&'a BTreeMap<String, Quantity>>, key: &str) -> &'a str {
        map.and_then(|m| m.get(key)).map_or("", |q| q.0.as_str())
    }
    let resources = container.resources.as_ref();
    let limits = resources.and_then(|r| r.limits.as_ref());
    let requests = resources.and_then(|r| r.requests.as_ref());
    (
        get(limits, "cpu"),
        get(limits, "memory"),
        get(requests, "cpu"),
        get(requests, "memory"),
    )
}

/// Waits until [`check_complete_node`] passes for node `name` (a node's taints and conditions
/// follow its annotations in separate writes); on timeout the error is the check's.
pub async fn wait_for_complete_node(
    client: &kube::Client,
    name: &str,
    skyhook: &str,
) -> anyhow::Result<Node> {
    let what = format!("node {name} complete for {skyhook}");
    match nodes::wait_for_node(client, name, &what, |node| {
        check_complete_node(node, skyhook).is_ok()
    })
    .await
    {
        Ok(node) => Ok(node),
        Err(error) => {
            let nodes: kube::Api<Node> = kube::Api::all(client.clone());
            let node = nodes.get(name).await?;
            Err(match check_complete_node(&node, skyhook) {
                Err(check) => error.context(format!("{check:#}")),
                Ok(()) => error,
            })
        }
    }
}
