//! Builders shared by the unit tests of several modules, so each fixture is written once.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;

use crate::v1alpha1::{DeploymentStrategy, FixedStrategy};

/// A label map from `(key, value)` pairs.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

/// A taint as a node carries it, without the time it was added.
pub(crate) fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.map(Into::into),
        effect: effect.into(),
        time_added: None,
    }
}

/// A fixed strategy with only its initial batch set.
pub(crate) fn fixed(initial: i32) -> DeploymentStrategy {
    DeploymentStrategy {
        fixed: Some(FixedStrategy {
            initial_batch: Some(initial),
            ..FixedStrategy::default()
        }),
        ..DeploymentStrategy::default()
    }
}
