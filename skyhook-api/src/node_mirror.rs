//! The per-node maps of `Skyhook.status` and where their truth lives.
//!
//! Upstream keeps a Skyhook's per-node bookkeeping only in its status: `nodeBootIds` (reboot
//! detection, spec §2.11) and `nodePriority` (batch stickiness, spec §2.4), next to the mirrors
//! `nodeState` and `nodeStatus`. Every one of them grows with the nodes, and server-side apply
//! repeats every map key in `managedFields`: past a few thousand nodes the status exceeds
//! etcd's 1.5 MiB request limit, the status write fails, and the Skyhook never reports
//! progress again. Here the boot ID and the pick time live on the node
//! ([`Keys::node_boot_id_annotation`], [`Keys::node_picked_annotation`]) and all four maps are
//! mirrors: kept while small, so a small cluster's status reads exactly as upstream's, and
//! dropped whole past a byte budget ([`bound_node_mirrors`]).
//!
//! Upgrade path: a node without the annotation falls back to its entry in the status map, so
//! a controller upgraded from a status-only version misses no reboot and keeps every pick.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::keys::Keys;
use crate::string_map::StringMap;
use crate::v1alpha1::SkyhookStatus;

/// The largest `status.nodeState` mirror (as JSON) the status keeps. At 5,000 nodes the whole
/// mirror made the status unwritable ("etcdserver: request is too large").
pub const NODE_STATE_MIRROR_MAX_BYTES: usize = 256 * 1024;

/// The largest applied size ([`applied_bytes`]) of `nodeStatus`, `nodeBootIds` and
/// `nodePriority` together that the status keeps: about 2,000 nodes fit (`nodeState` goes
/// first, near 1,650). With the `nodeState` bound and its managed fields, the status stays
/// under about 0.9 MiB, well under etcd's limit with the rest of the object.
pub const NODE_BOOKKEEPING_MIRROR_MAX_BYTES: usize = 384 * 1024;

/// The per-node annotation keys of one Skyhook, spelled once per pass rather than per node.
#[derive(Debug, Clone)]
pub struct NodeRecordKeys {
    boot_id: String,
    picked: String,
}

impl NodeRecordKeys {
    pub fn of(keys: &Keys, skyhook: &str) -> Self {
        NodeRecordKeys {
            boot_id: keys.node_boot_id_annotation(skyhook),
            picked: keys.node_picked_annotation(skyhook),
        }
    }

    pub fn boot_id_key(&self) -> &str {
        &self.boot_id
    }

    pub fn picked_key(&self) -> &str {
        &self.picked
    }

    /// The boot ID last recorded for `node`: its annotation, else (a node not yet migrated) the
    /// status entry.
    pub fn boot_id<'a>(
        &self,
        annotations: &'a dyn StringMap,
        status: Option<&'a SkyhookStatus>,
        node: &str,
    ) -> Option<&'a str> {
        annotations
            .value(&self.boot_id)
            .or_else(|| status?.node_boot_ids.get(node).map(String::as_str))
    }

    /// When `node` was picked for the current batch, `None` when it is not picked: its
    /// annotation, else (a node not yet migrated) the status entry. An annotation that does not
    /// parse still marks the node picked (at the epoch, so it ranks first): forgetting a pick
    /// could start more nodes than the budget allows.
    pub fn picked_at(
        &self,
        annotations: &dyn StringMap,
        status: Option<&SkyhookStatus>,
        node: &str,
    ) -> Option<Time> {
        match annotations.value(&self.picked) {
            Some(text) => Some(Time(text.parse().unwrap_or(Timestamp::UNIX_EPOCH))),
            None => status?.node_priority.get(node).cloned(),
        }
    }
}

/// A pick time as the annotation holds it: RFC 3339 in whole seconds, as `metav1.Time` is
/// written, so a pick reads back the same from the node as from the status.
pub fn pick_time_text(at: &Time) -> String {
    serde_json::to_value(at)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| at.0.to_string())
}

/// Empties the per-node mirrors of `status` that would make it too large to write: `nodeState`
/// past [`NODE_STATE_MIRROR_MAX_BYTES`], and `nodeStatus`, `nodeBootIds` and `nodePriority`
/// together past [`NODE_BOOKKEEPING_MIRROR_MAX_BYTES`]. Nothing is lost: the node annotations
/// are the truth, and the counters and compartment statuses still say where the rollout is.
pub fn bound_node_mirrors(status: &mut SkyhookStatus) {
    if json_bytes(&status.node_state) > NODE_STATE_MIRROR_MAX_BYTES {
        status.node_state.clear();
    }
    let bookkeeping = applied_bytes(&status.node_status)
        .saturating_add(applied_bytes(&status.node_boot_ids))
        .saturating_add(applied_bytes(&status.node_priority));
    if bookkeeping > NODE_BOOKKEEPING_MIRROR_MAX_BYTES {
        status.node_status.clear();
        status.node_boot_ids.clear();
        status.node_priority.clear();
    }
}

fn json_bytes(value: &impl Serialize) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |json| json.len())
}

/// The bytes `value` costs in a server-side apply: its JSON plus its estimated entry in
/// `managedFields`, which names every object key again (`{"f:<key>":{...}}`). Lists count as
/// one field: the per-node maps hold none.
pub fn applied_bytes(value: &impl Serialize) -> usize {
    match serde_json::to_value(value) {
        Ok(value) => json_bytes(&value).saturating_add(json_bytes(&managed_fields(&value))),
        Err(_) => usize::MAX,
    }
}

/// The `fieldsV1` server-side apply records for `value`.
fn managed_fields(value: &Value) -> Value {
    let Value::Object(fields) = value else {
        return Value::Object(Map::new());
    };
    let mut owned = Map::new();
    for (key, child) in fields {
        let mut entry = managed_fields(child);
        if let (Value::Object(nested), Value::Object(_)) = (&mut entry, child) {
            nested.insert(".".to_owned(), Value::Object(Map::new()));
        }
        owned.insert(format!("f:{key}"), entry);
    }
    Value::Object(owned)
}

#[cfg(test)]
#[path = "node_mirror_tests.rs"]
mod tests;
