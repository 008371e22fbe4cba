//! Labels and annotations as the rules read them, however they are held.
//!
//! The rules only look values up and test keys ([`StringMap`]); the plugin hands them a Node's
//! `BTreeMap`s, the controller its cached [`PackedMap`]s. A `BTreeMap<String, String>` costs a
//! tree node per eleven entries and two allocations per entry, held for every node for as long
//! as the controller runs; a [`PackedMap`] holds the same entries in two allocations (the
//! controller's view of a realistic node, 25 labels and 10 annotations: 5,933 bytes with
//! `BTreeMap`s, 3,693 packed).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Read access to a map of strings (a node's labels or annotations).
pub trait StringMap: fmt::Debug {
    /// The value of `key`.
    fn value(&self, key: &str) -> Option<&str>;

    /// Whether some key satisfies `test`.
    fn any_key(&self, test: &mut dyn FnMut(&str) -> bool) -> bool;

    /// Whether `key` is present.
    fn has(&self, key: &str) -> bool {
        self.value(key).is_some()
    }
}

impl StringMap for BTreeMap<String, String> {
    fn value(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }

    fn any_key(&self, test: &mut dyn FnMut(&str) -> bool) -> bool {
        self.keys().any(|key| test(key))
    }
}

impl<M: StringMap + ?Sized> StringMap for &M {
    fn value(&self, key: &str) -> Option<&str> {
        (**self).value(key)
    }

    fn any_key(&self, test: &mut dyn FnMut(&str) -> bool) -> bool {
        (**self).any_key(test)
    }
}

/// A map of strings sorted by key, packed into one text and one list of offsets: cheap to hold
/// and to look up in, and rebuilt whole by every edit, so meant for maps read far more often
/// than changed. Serializes as a JSON object, like the `BTreeMap` it replaces.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct PackedMap {
    /// Each entry's key followed by its value, in key order.
    text: Box<str>,
    /// Where each entry's key and value end in `text`; an entry starts where the one before
    /// it ends.
    ends: Box<[(usize, usize)]>,
}

impl PackedMap {
    /// An empty map.
    pub fn new() -> Self {
        PackedMap::default()
    }

    /// Packs `entries`, which must be sorted by key without repeats (a `BTreeMap`'s order).
    fn from_sorted<'a>(entries: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Self {
        let (count, bytes) = entries
            .clone()
            .fold((0, 0), |(count, bytes), (key, value)| {
                (count + 1, bytes + key.len() + value.len())
            });
        let mut text = String::with_capacity(bytes);
        let mut ends = Vec::with_capacity(count);
        for (key, value) in entries {
            text.push_str(key);
            let key_end = text.len();
            text.push_str(value);
            ends.push((key_end, text.len()));
        }
        PackedMap {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the map has no entry.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The entry at `index` (in key order).
    fn entry(&self, index: usize) -> (&str, &str) {
        let start = index
            .checked_sub(1)
            .and_then(|before| self.ends.get(before))
            .map_or(0, |&(_, value_end)| value_end);
        let (key_end, value_end) = self.ends[index];
        (&self.text[start..key_end], &self.text[key_end..value_end])
    }

    /// Where `key` is, or where it would go.
    fn search(&self, key: &str) -> Result<usize, usize> {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let middle = low + (high - low) / 2;
            match self.entry(middle).0.cmp(key) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Ok(middle),
            }
        }
        Err(low)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.search(key).ok().map(|index| self.entry(index).1)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.search(key).is_ok()
    }

    /// The entries in key order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { map: self, next: 0 }
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(key, _)| key)
    }

    /// Sets `key` to `value` (rebuilding the map).
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        let mut entries: Vec<(&str, &str)> = self.iter().collect();
        match self.search(key) {
            Ok(index) => entries[index].1 = value,
            Err(index) => entries.insert(index, (key, value)),
        }
        *self = PackedMap::from_sorted(entries.iter().copied());
    }

    /// Removes `key`; whether it was present (the map is rebuilt only then).
    pub fn remove(&mut self, key: &str) -> bool {
        self.retain(|other, _| other != key)
    }

    /// Keeps the entries `keep` accepts; whether any went (the map is rebuilt only then).
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) -> bool {
        let kept: Vec<(&str, &str)> = self.iter().filter(|&(k, v)| keep(k, v)).collect();
        if kept.len() == self.len() {
            return false;
        }
        *self = PackedMap::from_sorted(kept.iter().copied());
        true
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        *self = PackedMap::new();
    }

    /// The entries as a `BTreeMap`.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect()
    }
}

impl StringMap for PackedMap {
    fn value(&self, key: &str) -> Option<&str> {
        self.get(key)
    }

    fn any_key(&self, test: &mut dyn FnMut(&str) -> bool) -> bool {
        self.keys().any(test)
    }
}

/// The entries of a [`PackedMap`] in key order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    map: &'a PackedMap,
    next: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        (self.next < self.map.len()).then(|| {
            self.next += 1;
            self.map.entry(self.next - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.map.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a PackedMap {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl From<&BTreeMap<String, String>> for PackedMap {
    fn from(map: &BTreeMap<String, String>) -> Self {
        PackedMap::from_sorted(map.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
}

impl From<BTreeMap<String, String>> for PackedMap {
    fn from(map: BTreeMap<String, String>) -> Self {
        PackedMap::from(&map)
    }
}

/// Entries given twice keep the last value, as collecting into a `BTreeMap` does.
impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for PackedMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        let map: BTreeMap<String, String> = entries
            .into_iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect();
        PackedMap::from(&map)
    }
}

impl fmt::Debug for PackedMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for PackedMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for PackedMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BTreeMap::<String, String>::deserialize(deserializer).map(PackedMap::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn btree(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const PAIRS: [(&str, &str); 4] = [
        ("kubernetes.io/hostname", "node-1"),
        ("a", ""),
        ("", "empty key"),
        ("zone", "us-west-2a"),
    ];

    #[test]
    fn a_packed_map_reads_as_the_btree_map_it_was_made_from() {
        let tree = btree(&PAIRS);
        let packed = PackedMap::from(&tree);
        assert_eq!(packed.len(), 4);
        assert!(!packed.is_empty());
        assert_eq!(packed.to_map(), tree);
        assert!(
            packed
                .iter()
                .eq(tree.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        );
        for key in [
            "kubernetes.io/hostname",
            "a",
            "",
            "zone",
            "absent",
            "b",
            "zzz",
        ] {
            assert_eq!(
                packed.get(key),
                tree.get(key).map(String::as_str),
                "{key:?}"
            );
            assert_eq!(packed.contains_key(key), tree.contains_key(key), "{key:?}");
            assert_eq!(StringMap::value(&packed, key), tree.value(key), "{key:?}");
            assert_eq!(packed.has(key), tree.has(key), "{key:?}");
        }
        assert_eq!(packed.iter().len(), 4);
        assert!(PackedMap::new().is_empty() && PackedMap::new().get("").is_none());
    }

    #[test]
    fn edits_leave_what_the_same_edits_leave_in_a_btree_map() {
        let mut tree = btree(&PAIRS);
        let mut packed = PackedMap::from(&tree);
        packed.insert("b", "new");
        tree.insert("b".into(), "new".into());
        packed.insert("zone", "us-west-2b");
        tree.insert("zone".into(), "us-west-2b".into());
        packed.insert("zzz", "last");
        tree.insert("zzz".into(), "last".into());
        assert_eq!(packed.to_map(), tree);
        assert!(packed.remove("a"));
        assert!(!packed.remove("a"));
        tree.remove("a");
        assert_eq!(packed.to_map(), tree);
        assert!(packed.retain(|key, _| !key.starts_with('z')));
        assert!(!packed.retain(|_, _| true));
        tree.retain(|key, _| !key.starts_with('z'));
        assert_eq!(packed, PackedMap::from(&tree));
        packed.insert(String::from("owned"), String::from("too"));
        assert_eq!(packed.get("owned"), Some("too"));
        packed.clear();
        assert_eq!(packed, PackedMap::new());
    }

    #[test]
    fn any_key_and_equality() {
        let packed = PackedMap::from(btree(&PAIRS));
        assert!(packed.any_key(&mut |key| key.starts_with("kubernetes.io/")));
        assert!(!packed.any_key(&mut |key| key.starts_with("skyhook.nvidia.com/")));
        let by_reference: &dyn StringMap = &&packed;
        assert_eq!(by_reference.value("zone"), Some("us-west-2a"));
        let collected: PackedMap = PAIRS.iter().rev().copied().collect();
        assert_eq!(collected, packed);
        let repeated: PackedMap = [("k", "first"), ("k", "last")].into_iter().collect();
        assert_eq!(repeated.get("k"), Some("last"));
        assert_ne!(packed, PackedMap::new());
    }

    #[test]
    fn serializes_as_a_json_object() {
        let packed = PackedMap::from(btree(&PAIRS));
        let json = serde_json::to_string(&packed).unwrap();
        assert_eq!(json, serde_json::to_string(&btree(&PAIRS)).unwrap());
        let back: PackedMap = serde_json::from_str(&json).unwrap();
        assert_eq!(back, packed);
        assert_eq!(
            format!("{packed:?}"),
            format!("{:?}", btree(&PAIRS)),
            "debug output"
        );
    }
}
