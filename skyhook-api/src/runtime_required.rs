//! The runtime-required taint: parsing it, auto-tainting new nodes, and deciding per node when
//! it can be removed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;

use crate::keys::SKYHOOK;
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

/// Whether `taints` holds `taint` (same key, value and effect).
pub fn has_taint(taints: &[Taint], taint: &Taint) -> bool {
    taints.iter().any(|t| {
        t.key == taint.key
            && t.effect == taint.effect
            && t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
    })
}

/// Whether a node carries any `skyhook.nvidia.com/*` annotation, i.e. some Skyhook has already
/// processed it.
pub fn has_skyhook_annotations(annotations: &dyn StringMap) -> bool {
    let prefix = format!("{}/", SKYHOOK.group);
    annotations.any_key(&mut |key| key.starts_with(&prefix))
}

/// Whether a node matched by a `runtimeRequired` + `autoTaintNewNodes` Skyhook should get the
/// runtime-required taint: it does not carry it yet and no Skyhook has processed it (no
/// `skyhook.nvidia.com/*` annotation), so nodes already worked on are never re-tainted.
pub fn auto_taint_eligible(annotations: &dyn StringMap, taints: &[Taint], taint: &Taint) -> bool {
    !has_taint(taints, taint) && !has_skyhook_annotations(annotations)
}

/// A runtime-required Skyhook, for deciding taint removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRequiredSkyhook<'a> {
    /// Neither disabled nor paused. A disabled or paused Skyhook counts as incomplete.
    pub active: bool,
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
        assert!(has_skyhook_annotations(&touched));
        assert!(!has_skyhook_annotations(&foreign));
    }

    #[test]
    fn removal_is_per_node() {
        let a = RuntimeRequiredSkyhook {
            active: true,
            nodes: BTreeMap::from([("w1", true), ("w2", false)]),
        };
        let b = RuntimeRequiredSkyhook {
            active: true,
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
            active: false,
            nodes: BTreeMap::from([("w1", true)]),
        };
        assert!(
            !runtime_taint_removable("w1", &[a, paused]),
            "a paused Skyhook counts as incomplete"
        );
        assert!(!runtime_taint_removable("w1", &[]));
    }
}
