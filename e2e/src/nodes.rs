//! Reading skyhook's bookkeeping on a Node (spec §2.5): the decoded `nodeState_<skyhook>`
//! annotation, `status_<skyhook>` (label and annotation), the per-Skyhook node conditions and the
//! cordon.

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use serde_json::{Map, Value};

/// `skyhook.nvidia.com/nodeState_<skyhook>`.
pub fn node_state_key(skyhook: &str) -> String {
    format!("skyhook.nvidia.com/nodeState_{skyhook}")
}

/// `skyhook.nvidia.com/status_<skyhook>` (an annotation and a label).
pub fn status_key(skyhook: &str) -> String {
    format!("skyhook.nvidia.com/status_{skyhook}")
}

/// The decoded node state of `skyhook` on `node`: `"<pkg>|<version>"` -> package status; empty
/// when the annotation is absent.
pub fn node_state(node: &Node, skyhook: &str) -> anyhow::Result<Map<String, Value>> {
    let key = node_state_key(skyhook);
    let Some(text) = node.metadata.annotations.as_ref().and_then(|a| a.get(&key)) else {
        return Ok(Map::new());
    };
    serde_json::from_str(text).with_context(|| {
        format!(
            "{key} on node {} is not a JSON object: {text}",
            node.metadata.name.as_deref().unwrap_or("?")
        )
    })
}

/// The node state reduced to `"<pkg>|<version>"` -> `(stage, state)`, the pair upstream's
/// assertions compare; an undecodable annotation reads as empty.
pub fn stages(node: &Node, skyhook: &str) -> BTreeMap<String, (String, String)> {
    node_state(node, skyhook)
        .unwrap_or_default()
        .into_iter()
        .map(|(key, entry)| {
            let field = |name: &str| entry[name].as_str().unwrap_or_default().to_owned();
            (key, (field("stage"), field("state")))
        })
        .collect()
}

/// Builds an expected [`stages`] map from `(key, stage, state)` rows.
pub fn expect_stages(rows: &[(&str, &str, &str)]) -> BTreeMap<String, (String, String)> {
    rows.iter()
        .map(|(key, stage, state)| {
            (
                (*key).to_owned(),
                ((*stage).to_owned(), (*state).to_owned()),
            )
        })
        .collect()
}

/// The `status_<skyhook>` label and annotation of `node`.
pub fn node_status<'a>(node: &'a Node, skyhook: &str) -> (Option<&'a str>, Option<&'a str>) {
    let key = status_key(skyhook);
    let label = node.metadata.labels.as_ref().and_then(|l| l.get(&key));
    let annotation = node.metadata.annotations.as_ref().and_then(|a| a.get(&key));
    (label.map(String::as_str), annotation.map(String::as_str))
}

/// Whether both the `status_<skyhook>` label and annotation say `status`.
pub fn has_status(node: &Node, skyhook: &str, status: &str) -> bool {
    node_status(node, skyhook) == (Some(status), Some(status))
}

/// The `(status, reason)` of the node condition `type_`.
pub fn node_condition<'a>(node: &'a Node, type_: &str) -> Option<(&'a str, &'a str)> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    let condition = conditions.iter().find(|c| c.type_ == type_)?;
    Some((
        condition.status.as_str(),
        condition.reason.as_deref().unwrap_or_default(),
    ))
}

/// Whether the node is cordoned (`spec.unschedulable`).
pub fn is_cordoned(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|spec| spec.unschedulable)
        .unwrap_or(false)
}

/// Every `skyhook.nvidia.com/*` annotation and label of `node`, for failure messages.
pub fn skyhook_keys(node: &Node) -> String {
    let pick = |map: Option<&BTreeMap<String, String>>| {
        map.into_iter()
            .flatten()
            .filter(|(key, _)| key.starts_with("skyhook.nvidia.com/"))
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
    };
    format!(
        "annotations {:?}; labels {:?}; unschedulable {}",
        pick(node.metadata.annotations.as_ref()),
        pick(node.metadata.labels.as_ref()),
        is_cordoned(node)
    )
}

/// Waits until `condition` holds for node `name`; on timeout the error shows the node's skyhook
/// annotations and labels as they were last.
pub async fn wait_for_node(
    client: &kube::Client,
    name: &str,
    what: &str,
    condition: impl Fn(&Node) -> bool,
) -> anyhow::Result<Node> {
    let nodes: Api<Node> = Api::all(client.clone());
    match crate::wait_for(&nodes, name, what, condition).await {
        Ok(node) => Ok(node),
        Err(error) => {
            let last = nodes.get_opt(name).await.ok().flatten();
            Err(error.context(format!(
                "node {name} last: {}",
                last.as_ref()
                    .map_or_else(|| "(gone)".to_owned(), skyhook_keys)
            )))
        }
    }
}

/// Waits until the node's [`stages`] for `skyhook` equal `expected`.
pub async fn wait_for_stages(
    client: &kube::Client,
    node: &str,
    skyhook: &str,
    expected: &[(&str, &str, &str)],
) -> anyhow::Result<Node> {
    let expected = expect_stages(expected);
    wait_for_node(
        client,
        node,
        &format!("{skyhook}'s node state on {node} to be {expected:?}"),
        |n| stages(n, skyhook) == expected,
    )
    .await
}
