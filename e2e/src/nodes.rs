//! Reading skyhook's bookkeeping on a Node (spec §2.5): the decoded `nodeState_<skyhook>`
//! annotation, `status_<skyhook>` (label and annotation), the per-Skyhook node conditions and the
//! cordon.

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Map, Value};

/// `skyhook.nvidia.com/nodeState_<skyhook>`.
pub fn node_state_key(skyhook: &str) -> String {
    format!("skyhook.nvidia.com/nodeState_{skyhook}")
}

/// `skyhook.nvidia.com/status_<skyhook>` (an annotation and a label).
pub fn status_key(skyhook: &str) -> String {
    format!("skyhook.nvidia.com/status_{skyhook}")
}

/// The decoded node state of `skyhook` on `node`: `"<pkg>|<version>"` -> package status, as
/// upstream writes it; empty when the annotation is absent.
pub fn node_state(node: &Node, skyhook: &str) -> anyhow::Result<Map<String, Value>> {
    raw_node_state(node, skyhook)
}

/// `skyhook.nvidia.com/stageTimes_<skyhook>`: when each node-state entry entered its stage and
/// state (ours; the node state itself stays upstream's JSON).
pub fn stage_times_key(skyhook: &str) -> String {
    format!("skyhook.nvidia.com/stageTimes_{skyhook}")
}

/// `"<pkg>|<version>"` -> when the entry entered its stage and state, `None` for an entry
/// without a recorded time (or one recorded for another stage or state).
pub fn transition_times(
    node: &Node,
    skyhook: &str,
) -> anyhow::Result<BTreeMap<String, Option<String>>> {
    let key = stage_times_key(skyhook);
    let times: Map<String, Value> =
        match node.metadata.annotations.as_ref().and_then(|a| a.get(&key)) {
            Some(text) => serde_json::from_str(text)
                .with_context(|| format!("{key} is not a JSON object: {text}"))?,
            None => Map::new(),
        };
    Ok(raw_node_state(node, skyhook)?
        .into_iter()
        .map(|(package, entry)| {
            let since = times
                .get(&package)
                .filter(|t| t["stage"] == entry["stage"] && t["state"] == entry["state"]);
            let since = since.and_then(|t| t["since"].as_str()).map(str::to_owned);
            (package, since)
        })
        .collect())
}

fn raw_node_state(node: &Node, skyhook: &str) -> anyhow::Result<Map<String, Value>> {
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

/// Merges `labels` into the labels of every node in `names`.
pub async fn label_nodes(
    client: &kube::Client,
    names: impl IntoIterator<Item = impl AsRef<str>>,
    labels: &[(&str, &str)],
) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": labels}}));
    for name in names {
        let name = name.as_ref();
        api.patch(name, &PatchParams::default(), &patch)
            .await
            .with_context(|| format!("labelling node {name} with {labels:?}"))?;
    }
    Ok(())
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
    let conditions = node
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_.starts_with("skyhook.nvidia.com/"))
        .map(|c| {
            format!(
                "{}={}/{}",
                c.type_,
                c.status,
                c.reason.as_deref().unwrap_or("")
            )
        })
        .collect::<Vec<_>>();
    format!(
        "annotations {:?}; labels {:?}; conditions {conditions:?}; unschedulable {}",
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
    crate::wait::wait_for_showing_last(&nodes, name, what, condition, |last| {
        let keys = last.map_or_else(|| "(gone)".to_owned(), skyhook_keys);
        format!("node {name} last: {keys}")
    })
    .await
}

/// The node's taints as `key=value:effect` (`key:effect` without a value), in order.
pub fn taints(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|taint| match &taint.value {
            Some(value) => format!("{}={value}:{}", taint.key, taint.effect),
            None => format!("{}:{}", taint.key, taint.effect),
        })
        .collect()
}

/// Adds the taint `key[=value]:effect` to node `name` (no-op if present).
pub async fn add_taint(client: &kube::Client, name: &str, taint: &str) -> anyhow::Result<()> {
    let parsed = parse_taint(taint)?;
    edit_taints(client, name, |taints| {
        if !taints.iter().any(|t| same_taint(t, &parsed)) {
            taints.push(parsed.clone());
        }
    })
    .await
}

/// Removes the taint `key[=value]:effect` from node `name` (no-op if absent).
pub async fn remove_taint(client: &kube::Client, name: &str, taint: &str) -> anyhow::Result<()> {
    let parsed = parse_taint(taint)?;
    edit_taints(client, name, |taints| {
        taints.retain(|t| !same_taint(t, &parsed));
    })
    .await
}

fn same_taint(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.value == b.value && a.effect == b.effect
}

fn parse_taint(text: &str) -> anyhow::Result<Taint> {
    let (key_value, effect) = text
        .rsplit_once(':')
        .with_context(|| format!("taint {text:?} has no :effect"))?;
    let (key, value) = match key_value.split_once('=') {
        Some((key, value)) => (key, Some(value.to_owned())),
        None => (key_value, None),
    };
    Ok(Taint {
        key: key.to_owned(),
        value,
        effect: effect.to_owned(),
        time_added: None,
    })
}

/// Read-modify-write of the node's taints, guarded by its resourceVersion so that a taint the
/// controller writes meanwhile is not lost (a conflict re-reads and retries).
async fn edit_taints(
    client: &kube::Client,
    name: &str,
    edit: impl Fn(&mut Vec<Taint>),
) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    loop {
        let node = nodes
            .get(name)
            .await
            .with_context(|| format!("reading node {name}"))?;
        let mut taints = node
            .spec
            .as_ref()
            .and_then(|spec| spec.taints.clone())
            .unwrap_or_default();
        edit(&mut taints);
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": taints}
        });
        match nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(response)) if response.code == 409 => continue,
            Err(error) => {
                return Err(error).with_context(|| format!("setting the taints of node {name}"));
            }
        }
    }
}

/// Waits until `condition` holds for all nodes at once (keyed by name); returns them then.
pub async fn wait_for_nodes(
    client: &kube::Client,
    what: &str,
    condition: impl Fn(&BTreeMap<String, Node>) -> bool,
) -> anyhow::Result<BTreeMap<String, Node>> {
    let by_name = |nodes: &[Node]| {
        nodes
            .iter()
            .map(|node| (node.metadata.name.clone().unwrap_or_default(), node.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    let nodes: Api<Node> = Api::all(client.clone());
    let config = kube::runtime::watcher::Config::default();
    let found = crate::wait::wait_for_all(nodes, config, what, |nodes| condition(&by_name(nodes)));
    Ok(by_name(&found.await?))
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
