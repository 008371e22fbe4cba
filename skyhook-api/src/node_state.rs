//! The node-state codec: the value of the node annotation
//! `skyhook.nvidia.com/nodeState_<skyhook>`, the source of truth of package progress.
//!
//! The value is a JSON object from `"<package>|<version>"` to a [`PackageStatus`]. We write it
//! byte for byte as upstream's Go `encoding/json` does (keys sorted, compact, `<`, `>`, `&`,
//! U+2028 and U+2029 escaped), so a node can move between the two operators and tools comparing
//! annotation values see no spurious change. We read whatever upstream writes: unknown fields
//! are ignored and omitted `restarts`/`containerSHA` read as zero/empty.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::ser::SerializeMap as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::v1alpha1::PackageStatus;

/// What is wrong with a node-state annotation value or key. The caller adds which node and
/// annotation it came from.
#[derive(Debug, thiserror::Error)]
pub enum NodeStateError {
    /// The value is not a JSON object of package statuses.
    #[error("node state is not a JSON object of package statuses")]
    Malformed {
        /// Where the JSON parser stopped and why.
        #[source]
        source: serde_json::Error,
    },
    /// A key is not of the form `<package>|<version>`.
    #[error("node state key {key:?} is not of the form \"<package>|<version>\"")]
    InvalidKey {
        /// The rejected key.
        key: String,
    },
}

/// Key of a node-state entry: `"<package>|<version>"`.
///
/// Ordered as its string form, which is the order upstream writes keys in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PackageKey {
    key: String,
    separator: usize,
}

impl PackageKey {
    /// The key of version `version` of package `name`.
    pub fn new(name: &str, version: &str) -> Self {
        PackageKey {
            key: format!("{name}|{version}"),
            separator: name.len(),
        }
    }

    /// Parses `"<package>|<version>"`, splitting at the first `|` (neither a package name nor a
    /// semantic version can contain one).
    pub fn parse(key: &str) -> Result<Self, NodeStateError> {
        match key.find('|') {
            Some(separator) => Ok(PackageKey {
                key: key.to_owned(),
                separator,
            }),
            None => Err(NodeStateError::InvalidKey {
                key: key.to_owned(),
            }),
        }
    }

    /// The package name part.
    pub fn name(&self) -> &str {
        &self.key[..self.separator]
    }

    /// The version part.
    pub fn version(&self) -> &str {
        &self.key[self.separator + 1..]
    }

    /// The key as written in the annotation.
    pub fn as_str(&self) -> &str {
        &self.key
    }
}

impl fmt::Display for PackageKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

impl Serialize for PackageKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.key)
    }
}

impl<'de> Deserialize<'de> for PackageKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let key = String::deserialize(deserializer)?;
        PackageKey::parse(&key).map_err(D::Error::custom)
    }
}

impl PackageStatus {
    /// The node-state key of this entry.
    pub fn key(&self) -> PackageKey {
        PackageKey::new(&self.name, &self.version)
    }
}

/// The progress of every package version of one Skyhook on one node.
///
/// The entries are a vector sorted by key, not a `BTreeMap`: a node state has one entry per
/// package version (one or a few), and a `BTreeMap` allocates room for eleven in its first node,
/// about 1.8 KB for one entry. The controller holds one node state per node in every Skyhook's
/// status and two per node and Skyhook in every plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeState {
    /// Sorted by key, keys unique.
    entries: Vec<(PackageKey, PackageStatus)>,
}

/// An entry of a [`NodeState`], as its iterators yield it.
pub type Entry<'a> = (&'a PackageKey, &'a PackageStatus);

/// The iterator over a [`NodeState`]'s entries, in key order.
pub type Iter<'a> = std::iter::Map<
    std::slice::Iter<'a, (PackageKey, PackageStatus)>,
    fn(&'a (PackageKey, PackageStatus)) -> Entry<'a>,
>;

fn as_entry((key, status): &(PackageKey, PackageStatus)) -> Entry<'_> {
    (key, status)
}

impl NodeState {
    /// An empty node state (no package has started on the node).
    pub fn new() -> Self {
        NodeState::default()
    }

    /// Reads an annotation value. An empty value reads as an empty state.
    pub fn parse(annotation: &str) -> Result<Self, NodeStateError> {
        if annotation.trim().is_empty() {
            return Ok(NodeState::new());
        }
        serde_json::from_str(annotation).map_err(|source| NodeStateError::Malformed { source })
    }

    /// The annotation value, byte-identical to what upstream writes for the same state.
    pub fn to_annotation(&self) -> String {
        go_json(self)
    }

    fn position(&self, key: &PackageKey) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.cmp(key))
    }

    /// The entry for `key`.
    pub fn get(&self, key: &PackageKey) -> Option<&PackageStatus> {
        let at = self.position(key).ok()?;
        self.entries.get(at).map(|(_, status)| status)
    }

    /// The entry for version `version` of package `name`.
    pub fn get_version(&self, name: &str, version: &str) -> Option<&PackageStatus> {
        self.get(&PackageKey::new(name, version))
    }

    /// Inserts or replaces the entry keyed by the status's own name and version, returning the
    /// entry it replaced.
    pub fn upsert(&mut self, status: PackageStatus) -> Option<PackageStatus> {
        let key = status.key();
        match self.position(&key) {
            Ok(at) => self
                .entries
                .get_mut(at)
                .map(|(_, old)| std::mem::replace(old, status)),
            Err(at) => {
                // Exactly one more: a vector's first growth makes room for four.
                self.entries.reserve_exact(1);
                self.entries.insert(at, (key, status));
                None
            }
        }
    }

    /// Removes the entry for `key`, returning it.
    pub fn remove(&mut self, key: &PackageKey) -> Option<PackageStatus> {
        let at = self.position(key).ok()?;
        Some(self.entries.remove(at).1)
    }

    /// Every entry of package `name`, whatever its version, in key order.
    pub fn entries_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = Entry<'a>> + 'a {
        self.iter().filter(move |(key, _)| key.name() == name)
    }

    /// Every entry, in key order.
    pub fn iter(&self) -> Iter<'_> {
        let as_entry: fn(&(PackageKey, PackageStatus)) -> Entry<'_> = as_entry;
        self.entries.iter().map(as_entry)
    }

    /// Every entry, mutable, in key order (an entry's name and version must not change).
    pub fn entries_mut(&mut self) -> impl Iterator<Item = &mut PackageStatus> {
        self.entries.iter_mut().map(|(_, status)| status)
    }

    /// Keeps only the entries for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&PackageKey, &PackageStatus) -> bool) {
        self.entries.retain(|(key, status)| keep(key, status));
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<'a> IntoIterator for &'a NodeState {
    type Item = Entry<'a>;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A JSON object, keys in order.
impl Serialize for NodeState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (key, status) in &self.entries {
            map.serialize_entry(key, status)?;
        }
        map.end()
    }
}

/// A JSON object; of a key given twice the last value counts, as for any JSON map.
impl<'de> Deserialize<'de> for NodeState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;

        impl<'de> Visitor<'de> for Entries {
            type Value = NodeState;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from \"<package>|<version>\" to a package status")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeState, A::Error> {
                let mut entries: Vec<(PackageKey, PackageStatus)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(1));
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                // Latest first, so that the stable sort keeps the last of equal keys first,
                // where `dedup_by` keeps it.
                entries.reverse();
                entries.sort_by(|(a, _), (b, _)| a.cmp(b));
                entries.dedup_by(|(later, _), (kept, _)| later == kept);
                entries.shrink_to_fit();
                Ok(NodeState { entries })
            }
        }

        deserializer.deserialize_map(Entries)
    }
}

impl FromIterator<PackageStatus> for NodeState {
    fn from_iter<I: IntoIterator<Item = PackageStatus>>(statuses: I) -> Self {
        let mut state = NodeState::new();
        for status in statuses {
            state.upsert(status);
        }
        state
    }
}

impl JsonSchema for NodeState {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NodeState".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <BTreeMap<String, PackageStatus>>::json_schema(generator)
    }

    fn inline_schema() -> bool {
        true
    }
}

/// Serialises `value` as Go's `encoding/json.Marshal` would: compact, struct fields in
/// declaration order, map keys sorted, and the HTML-sensitive characters `<`, `>`, `&` plus
/// U+2028 and U+2029 written as `\u` escapes.
#[allow(clippy::expect_used)]
pub(crate) fn go_json<T: Serialize + ?Sized>(value: &T) -> String {
    // Only called with plain data (strings, integers, booleans, string-keyed maps), which
    // serde_json serialises into a String without any failure path.
    let plain = serde_json::to_string(value).expect("plain data serialises to JSON");
    let mut out = String::with_capacity(plain.len());
    // Outside strings compact JSON never contains these characters, so replacing them
    // everywhere only touches string contents.
    for c in plain.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            other => out.push(other),
        }
    }
    out
}
