//! The runtime-required taint: parsing it, auto-tainting new nodes, and deciding per node when
//! it can be removed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;

use crate::generation::Group;
use crate::keys::SKYHOOK;
use crate::node_keys::{has_operator_annotations, runtime_required_cordoned};
use crate::string_map::StringMap;

/// Why a taint specification did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "taint {input:?} is invalid: {problem}; write key[=value]:Effect, e.g. skyhook.nvidia.com=runtime-required:NoSchedule"
)]
pub struct TaintParseError {
    /// The rejected text.
    pub input: String,
    /// What is wrong.
    pub problem: &'static str,
}

/// Parses `key[=value]:Effect` as `kubectl taint` writes it. A removal (`key-` or
/// `key:Effect-`) is rejected: the runtime-required taint must be something to add.
pub fn parse_taint(input: &str) -> Result<Taint, TaintParseError> {
    let bad = |problem| TaintParseError {
        input: input.to_owned(),
        problem,
    };
    if input.ends_with('-') {
        return Err(bad("it is a taint removal (ends with '-')"));
    }
    let (key_value, effect) = input
        .rsplit_once(':')
        .ok_or_else(|| bad("the ':Effect' part is missing"))?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return Err(bad(
            "the effect is not NoSchedule, PreferNoSchedule or NoExecute",
        ));
    }
    let (key, value) = match key_value.split_once('=') {
        Some((key, value)) => (key, Some(value)),
        None => (key_value, None),
    };
    crate::selector::validate_label_key(key)
        .map_err(|_| bad("the key is not a valid label key"))?;
    if let Some(value) = value {
        crate::selector::validate_label_value(value)
            .map_err(|_| bad("the value is not a valid label value"))?;
    }
    Ok(Taint {
        key: key.to_owned(),
        value: value.filter(|v| !v.is_empty()).map(str::to_owned),
        effect: effect.to_owned(),
        time_added: None,
    })
}

/// `taint` as `kubectl taint` writes it: `key=value:Effect`, or `key:Effect` without a value.
pub fn taint_text(taint: &Taint) -> String {
    match taint.value.as_deref().filter(|v| !v.is_empty()) {
        Some(value) => format!("{}={value}:{}", taint.key, taint.effect),
        None => format!("{}:{}", taint.key, taint.effect),
    }
}

/// Whether `taints` holds `taint` (same key, value and effect).
pub fn has_taint(taints: &[Taint], taint: &Taint) -> bool {
    taints.iter().any(|t| {
        t.key == taint.key
            && t.effect == taint.effect
            && t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
    })
}

/// Whether a node matched by a `runtimeRequired` + `autoTaintNewNodes` Skyhook should get the
/// runtime-required taint: it does not carry it yet and no operator of either generation has
/// processed it (no annotation under either group's prefix,
/// [`crate::node_keys::has_operator_annotations`]), so nodes already worked on are never
/// re-tainted.
pub fn auto_taint_eligible(annotations: &dyn StringMap, taints: &[Taint], taint: &Taint) -> bool {
    !has_taint(taints, taint) && !has_operator_annotations(annotations)
}

/// A runtime-required Skyhook, for deciding taint removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRequiredSkyhook<'a> {
    /// Its group: a cordon it asks for is marked under this group's key.
    pub group: Group,
    /// Neither disabled nor paused. A disabled or paused Skyhook counts as incomplete.
    pub active: bool,
    /// `spec.runtimeRequiredCordonAfter`: removing the taint from its nodes cordons them.
    pub cordon_after: bool,
    /// Every node it targets → whether it is complete there.
    pub nodes: BTreeMap<&'a str, bool>,
}

/// Whether the runtime-required taint can be removed from `node`: at least one
/// runtime-required Skyhook targets it, and every one that does is active and complete on
/// that node. Decided per node, so a stuck node never holds back healthy ones.
pub fn runtime_taint_removable(node: &str, skyhooks: &[RuntimeRequiredSkyhook<'_>]) -> bool {
    let mut targeting = skyhooks
        .iter()
        .filter_map(|s| s.nodes.get(node).map(|complete| s.active && *complete))
        .peekable();
    targeting.peek().is_some() && targeting.all(|done| done)
}

/// Whether removing the runtime-required taint from `node` also cordons it, in the same patch:
/// some runtime-required workload targeting the node sets `runtimeRequiredCordonAfter`. Returns
/// the group of the first that does, whose
/// [`crate::keys::Keys::runtime_required_cordon_annotation`] marks the cordon (either group's
/// holds the node). Only asked for a node that carries the taint being removed: no taint, no
/// cordon.
pub fn cordon_after_removal(node: &str, skyhooks: &[RuntimeRequiredSkyhook<'_>]) -> Option<Group> {
    skyhooks
        .iter()
        .find(|s| s.cordon_after && s.nodes.contains_key(node))
        .map(|s| s.group)
}

/// Whether a node's runtime-required cordon annotation is stale: the node carries it yet is
/// schedulable (someone uncordoned it without removing the annotation), so it no longer holds
/// anything and is removed.
pub fn runtime_required_cordon_stale(annotations: &dyn StringMap, unschedulable: bool) -> bool {
    !unschedulable && runtime_required_cordoned(annotations)
}

/// The longest runtime-required taint key: the key names the node annotation
/// `autoTaint_<key>`, whose name part may be 63 characters, and `autoTaint_` takes 10.
pub const MAX_RUNTIME_REQUIRED_TAINT_KEY_LEN: usize = 53;

/// Why the runtime-required taint key cannot be used, if it cannot: it names the node
/// annotation [`crate::keys::Keys::auto_taint_annotation`], so it must not have a DNS prefix
/// (`/`) and must be at most [`MAX_RUNTIME_REQUIRED_TAINT_KEY_LEN`] characters. The controller
/// refuses to start with such a key.
pub fn runtime_required_taint_key_problem(key: &str) -> Option<String> {
    if key.contains('/') {
        return Some(format!(
            "the taint key {key:?} has a DNS prefix ('/'); it names the node annotation {}, which cannot hold a second '/': use a key without a prefix, e.g. {}",
            SKYHOOK.auto_taint_annotation(key),
            SKYHOOK.group
        ));
    }
    if key.len() > MAX_RUNTIME_REQUIRED_TAINT_KEY_LEN {
        return Some(format!(
            "the taint key {key:?} is {} characters long, more than {MAX_RUNTIME_REQUIRED_TAINT_KEY_LEN}; it names the node annotation {}, whose name part may be at most 63: use a shorter key",
            key.len(),
            SKYHOOK.auto_taint_annotation(key),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::taint;

    #[test]
    fn parse_table() {
        let ok = [
            (
                "skyhook.nvidia.com=runtime-required:NoSchedule",
                "skyhook.nvidia.com",
                Some("runtime-required"),
                "NoSchedule",
            ),
            ("dedicated:NoExecute", "dedicated", None, "NoExecute"),
            ("a=:PreferNoSchedule", "a", None, "PreferNoSchedule"),
            (
                "example.com/gpu=true:NoSchedule",
                "example.com/gpu",
                Some("true"),
                "NoSchedule",
            ),
        ];
        for (input, key, value, effect) in ok {
            let taint = parse_taint(input).unwrap();
            assert_eq!(
                (
                    taint.key.as_str(),
                    taint.value.as_deref(),
                    taint.effect.as_str()
                ),
                (key, value, effect),
                "{input}"
            );
        }
        for bad in [
            "skyhook.nvidia.com-",
            "a=b:NoSchedule-",
            "a=b",
            "a=b:Never",
            ":NoSchedule",
            "bad key=x:NoSchedule",
            "a=bad value:NoSchedule",
            "",
        ] {
            let err = parse_taint(bad).unwrap_err();
            assert!(err.to_string().contains("key[=value]:Effect"), "{err}");
        }
    }

    #[test]
    fn taint_text_round_trips() {
        for text in [
            "skyhook.nvidia.com=runtime-required:NoSchedule",
            "dedicated:NoExecute",
        ] {
            assert_eq!(taint_text(&parse_taint(text).unwrap()), text);
        }
    }

    #[test]
    fn auto_taint_only_untouched_nodes() {
        let runtime = taint("skyhook.nvidia.com", Some("runtime-required"), "NoSchedule");
        let fresh = BTreeMap::new();
        let touched = BTreeMap::from([(
            "skyhook.nvidia.com/nodeState_demo".to_owned(),
            "{}".to_owned(),
        )]);
        let foreign = BTreeMap::from([("example.com/x".to_owned(), "y".to_owned())]);
        assert!(auto_taint_eligible(&fresh, &[], &runtime));
        assert!(auto_taint_eligible(&foreign, &[], &runtime));
        assert!(!auto_taint_eligible(&touched, &[], &runtime));
        assert!(!auto_taint_eligible(
            &fresh,
            std::slice::from_ref(&runtime),
            &runtime
        ));
        let other_value = taint("skyhook.nvidia.com", Some("other"), "NoSchedule");
        assert!(auto_taint_eligible(&fresh, &[other_value], &runtime));
        let touched_by_nodewright = BTreeMap::from([(
            "nodewright.nvidia.com/nodeState_demo".to_owned(),
            "{}".to_owned(),
        )]);
        assert!(
            !auto_taint_eligible(&touched_by_nodewright, &[], &runtime),
            "a node an upstream v0.20 operator processed is not new"
        );
    }

    #[test]
    fn removal_is_per_node() {
        let a = RuntimeRequiredSkyhook {
            group: Group::Skyhook,
            active: true,
            cordon_after: false,
            nodes: BTreeMap::from([("w1", true), ("w2", false)]),
        };
        let b = RuntimeRequiredSkyhook {
            group: Group::NodeWright,
            active: true,
            cordon_after: false,
            nodes: BTreeMap::from([("w1", true)]),
        };
        assert!(runtime_taint_removable("w1", &[a.clone(), b.clone()]));
        assert!(
            !runtime_taint_removable("w2", &[a.clone(), b.clone()]),
            "w2 is still running a"
        );
        assert!(
            !runtime_taint_removable("w3", &[a.clone(), b]),
            "no runtime-required Skyhook targets w3"
        );
        let paused = RuntimeRequiredSkyhook {
            group: Group::Skyhook,
            active: false,
            cordon_after: false,
            nodes: BTreeMap::from([("w1", true)]),
        };
        assert!(
            !runtime_taint_removable("w1", &[a, paused]),
            "a paused Skyhook counts as incomplete"
        );
        assert!(!runtime_taint_removable("w1", &[]));
    }

    #[test]
    fn cordon_after_removal_table() {
        let rr = |group, cordon_after: bool, nodes: &[&'static str]| RuntimeRequiredSkyhook {
            group,
            active: true,
            cordon_after,
            nodes: nodes.iter().map(|n| (*n, true)).collect(),
        };
        let (skyhook, nodewright) = (Group::Skyhook, Group::NodeWright);
        // (case, workloads, node, the group marking the cordon)
        let cases = [
            (
                "no Skyhook asks for it",
                vec![rr(skyhook, false, &["w1"])],
                "w1",
                None,
            ),
            (
                "one targeting Skyhook asks",
                vec![rr(skyhook, false, &["w1"]), rr(skyhook, true, &["w1"])],
                "w1",
                Some(skyhook),
            ),
            (
                "a NodeWright asks: its group marks the cordon",
                vec![rr(skyhook, false, &["w1"]), rr(nodewright, true, &["w1"])],
                "w1",
                Some(nodewright),
            ),
            (
                "the one asking targets another node",
                vec![rr(skyhook, false, &["w1"]), rr(skyhook, true, &["w2"])],
                "w1",
                None,
            ),
            ("no Skyhook at all", vec![], "w1", None),
        ];
        for (case, skyhooks, node, cordoned) in cases {
            assert_eq!(cordon_after_removal(node, &skyhooks), cordoned, "{case}");
        }
    }

    #[test]
    fn stale_runtime_required_cordon() {
        let key = SKYHOOK.runtime_required_cordon_annotation;
        let marked = BTreeMap::from([(key.to_owned(), "true".to_owned())]);
        let marked_by_nodewright = BTreeMap::from([(
            crate::keys::NODEWRIGHT
                .runtime_required_cordon_annotation
                .to_owned(),
            "true".to_owned(),
        )]);
        let unmarked = BTreeMap::new();
        // (annotations, unschedulable, stale)
        let cases = [
            (&marked, true, false),
            (&marked, false, true),
            (&marked_by_nodewright, true, false),
            (&marked_by_nodewright, false, true),
            (&unmarked, false, false),
            (&unmarked, true, false),
        ];
        for (annotations, unschedulable, stale) in cases {
            assert_eq!(
                runtime_required_cordon_stale(annotations, unschedulable),
                stale,
                "{annotations:?} unschedulable={unschedulable}"
            );
        }
    }

    #[test]
    fn taint_key_problems() {
        let long = "k".repeat(54);
        let just = "k".repeat(53);
        // (key, problem mentions)
        let cases: [(&str, Option<&str>); 5] = [
            ("skyhook.nvidia.com", None),
            ("dedicated", None),
            (&just, None),
            ("example.com/gpu", Some("DNS prefix")),
            (&long, Some("more than 53")),
        ];
        for (key, problem) in cases {
            let found = runtime_required_taint_key_problem(key);
            match problem {
                None => assert_eq!(found, None, "{key}"),
                Some(text) => assert!(
                    found.as_deref().is_some_and(|f| f.contains(text)),
                    "{key}: {found:?}"
                ),
            }
        }
        // The longest accepted key still names a valid annotation.
        let annotation = SKYHOOK.auto_taint_annotation(&just);
        let name_part = annotation.rsplit_once('/').map_or("", |(_, n)| n);
        assert_eq!(name_part.len(), crate::keys::MAX_QUALIFIED_NAME_PART);
    }
}
