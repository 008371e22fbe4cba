//! Kubernetes taint/toleration matching, and the toleration set a Skyhook's pods carry.
//!
//! Matching follows Kubernetes' `Toleration.ToleratesTaint`: an empty effect matches every
//! effect, an empty key matches every key (only meaningful with `Exists`), `Exists` ignores the
//! value, `Equal` (or an empty operator) compares it. Any other operator matches nothing.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Key of the taint a cordoned node carries.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

/// Whether `toleration` tolerates `taint`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// The taints of a node that no toleration tolerates, in the node's order. Every effect counts,
/// `PreferNoSchedule` included, as upstream Skyhook decides.
pub fn intolerable_taints<'a>(tolerations: &[Toleration], taints: &'a [Taint]) -> Vec<&'a Taint> {
    taints
        .iter()
        .filter(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
        .collect()
}

/// Whether every taint is tolerated.
pub fn tolerates_all(tolerations: &[Toleration], taints: &[Taint]) -> bool {
    taints
        .iter()
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)))
}

/// `node.kubernetes.io/unschedulable` Exists NoSchedule: package pods run on cordoned nodes.
pub fn unschedulable_toleration() -> Toleration {
    Toleration {
        key: Some(UNSCHEDULABLE_TAINT_KEY.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some("NoSchedule".to_owned()),
        ..Toleration::default()
    }
}

/// The toleration matching exactly `taint` (key, value and effect, operator `Equal`).
pub fn toleration_for(taint: &Taint) -> Toleration {
    Toleration {
        key: Some(taint.key.clone()),
        operator: Some("Equal".to_owned()),
        value: taint.value.clone(),
        effect: Some(taint.effect.clone()),
        ..Toleration::default()
    }
}

/// The tolerations used to decide whether a Skyhook can work on a node: the unschedulable
/// toleration, the Skyhook's `additionalTolerations`, and the runtime-required toleration only
/// when the Skyhook is `runtimeRequired`. A Skyhook that is not runtime-required therefore sees
/// a node still carrying the runtime-required taint as blocked, which is how that taint gates
/// other work.
pub fn node_selection_tolerations(
    additional: &[Toleration],
    runtime_required_taint: Option<&Taint>,
) -> Vec<Toleration> {
    std::iter::once(unschedulable_toleration())
        .chain(additional.iter().cloned())
        .chain(runtime_required_taint.map(toleration_for))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::taint;

    fn toleration(
        key: &str,
        op: Option<&str>,
        value: Option<&str>,
        effect: Option<&str>,
    ) -> Toleration {
        Toleration {
            key: Some(key.into()).filter(|k: &String| !k.is_empty()),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        }
    }

    #[test]
    fn matching_table() {
        let gpu = taint("nvidia.com/gpu", None, "NoSchedule");
        let dedicated = taint("dedicated", Some("system-cpu"), "NoSchedule");
        let cases = [
            (
                toleration("nvidia.com/gpu", Some("Exists"), None, None),
                &gpu,
                true,
            ),
            (
                toleration("nvidia.com/gpu", Some("Exists"), None, Some("NoSchedule")),
                &gpu,
                true,
            ),
            (
                toleration("nvidia.com/gpu", Some("Exists"), None, Some("NoExecute")),
                &gpu,
                false,
            ),
            (toleration("nvidia.com/gpu", None, None, None), &gpu, true),
            (
                toleration("nvidia.com/gpu", Some("Equal"), Some("x"), None),
                &gpu,
                false,
            ),
            (toleration("other", Some("Exists"), None, None), &gpu, false),
            (toleration("", Some("Exists"), None, None), &gpu, true),
            (
                toleration("", Some("Exists"), None, Some("NoExecute")),
                &gpu,
                false,
            ),
            (
                toleration("dedicated", Some("Equal"), Some("system-cpu"), None),
                &dedicated,
                true,
            ),
            (
                toleration("dedicated", None, Some("system-cpu"), Some("NoSchedule")),
                &dedicated,
                true,
            ),
            (
                toleration("dedicated", Some("Equal"), Some("bogus"), None),
                &dedicated,
                false,
            ),
            (
                toleration("dedicated", Some("Equal"), None, None),
                &dedicated,
                false,
            ),
            (
                toleration("dedicated", Some("Exists"), None, None),
                &dedicated,
                true,
            ),
            (
                toleration("dedicated", Some("Gt"), Some("1"), None),
                &dedicated,
                false,
            ),
        ];
        for (i, (tol, taint, want)) in cases.iter().enumerate() {
            assert_eq!(
                tolerates(tol, taint),
                *want,
                "case {i}: {tol:?} vs {taint:?}"
            );
        }
    }

    #[test]
    fn node_selection_set() {
        let runtime = taint("skyhook.nvidia.com", Some("runtime-required"), "NoSchedule");
        let cordon = taint(UNSCHEDULABLE_TAINT_KEY, None, "NoSchedule");
        let gpu = taint("nvidia.com/gpu", None, "NoSchedule");
        let prefer = taint("soft", None, "PreferNoSchedule");

        let plain = node_selection_tolerations(&[], None);
        assert!(tolerates_all(&plain, std::slice::from_ref(&cordon)));
        assert!(!tolerates_all(&plain, std::slice::from_ref(&runtime)));
        assert!(!tolerates_all(&plain, std::slice::from_ref(&prefer)));
        assert!(tolerates_all(&plain, &[]));

        let required = node_selection_tolerations(&[], Some(&runtime));
        assert!(tolerates_all(&required, &[cordon.clone(), runtime.clone()]));
        let other_value = taint("skyhook.nvidia.com", Some("other"), "NoSchedule");
        assert!(!tolerates_all(&required, &[other_value]));

        let with_gpu = node_selection_tolerations(
            &[toleration("nvidia.com/gpu", Some("Exists"), None, None)],
            None,
        );
        let taints = [gpu.clone(), runtime.clone(), cordon];
        let missing = intolerable_taints(&with_gpu, &taints);
        assert_eq!(missing, [&runtime]);
    }
}
