//! The Skyhooks the benchmark applies: pure functions of the case's parameters.

use serde_json::{Value, json};

use crate::{AGENTLESS_AGENT_IMAGE, TEST_NODE_LABEL, TEST_NODE_VALUE};

/// The package image: upstream's agentless test image, which exits at once with `SLEEP_LEN` 0,
/// so a rollout measures the controller and not the package.
const PACKAGE_IMAGE: &str = AGENTLESS_AGENT_IMAGE;

fn package(version: &str) -> Value {
    json!({
        "version": version,
        "image": PACKAGE_IMAGE,
        "env": [{"name": "SLEEP_LEN", "value": "0"}],
    })
}

fn skyhook(name: &str, budget_percent: u32, packages: Value) -> Value {
    json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "Skyhook",
        "metadata": {"name": name},
        "spec": {
            "nodeSelectors": {"matchLabels": {TEST_NODE_LABEL: TEST_NODE_VALUE}},
            "interruptionBudget": {"percent": budget_percent},
            "packages": packages,
        }
    })
}

/// One package without interrupt on every benchmark node, `budget_percent` of them at a time.
pub fn single_package(name: &str, budget_percent: u32) -> Value {
    skyhook(name, budget_percent, json!({"bench": package("1.0.0")}))
}

/// Three packages, each depending on the one before, the last with a service interrupt (cordon,
/// drain, the interrupt pod, uncordon on every node).
pub fn dependency_chain(name: &str, budget_percent: u32) -> Value {
    let first = package("1.0.0");
    let mut second = package("1.0.0");
    second["dependsOn"] = json!({"first": "1.0.0"});
    let mut third = package("1.0.0");
    third["dependsOn"] = json!({"second": "1.0.0"});
    third["interrupt"] = json!({"type": "service", "services": ["containerd"]});
    skyhook(
        name,
        budget_percent,
        json!({"first": first, "second": second, "third": third}),
    )
}

/// A Skyhook the webhook denies though the CRD schema accepts it: two packages depending on
/// each other (a cycle).
pub fn dependency_cycle(name: &str) -> Value {
    let mut one = package("1.0.0");
    one["dependsOn"] = json!({"two": "1.0.0"});
    let mut two = package("1.0.0");
    two["dependsOn"] = json!({"one": "1.0.0"});
    skyhook(name, 100, json!({"one": one, "two": two}))
}

/// The number of packages of a manifest.
pub fn package_count(manifest: &Value) -> usize {
    manifest["spec"]["packages"]
        .as_object()
        .map_or(0, serde_json::Map::len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skyhook_api::v1alpha1::Skyhook;

    #[test]
    fn manifests_are_skyhooks_with_the_intended_shape() -> Result<(), serde_json::Error> {
        let cases = [
            (single_package("a", 100), 1, 100, 0),
            (dependency_chain("b", 10), 3, 10, 2),
            (dependency_cycle("c"), 2, 100, 2),
        ];
        for (manifest, packages, percent, dependencies) in cases {
            let typed: Skyhook = serde_json::from_value(manifest.clone())?;
            assert_eq!(typed.spec.packages.len(), packages, "{manifest}");
            assert_eq!(package_count(&manifest), packages);
            assert_eq!(
                manifest["spec"]["interruptionBudget"]["percent"], percent,
                "{manifest}"
            );
            let depending = typed
                .spec
                .packages
                .values()
                .filter(|p| !p.depends_on.is_empty())
                .count();
            assert_eq!(depending, dependencies, "{manifest}");
        }
        Ok(())
    }

    #[test]
    fn only_the_last_package_of_the_chain_interrupts() {
        let chain = dependency_chain("b", 10);
        let interrupting: Vec<&String> = chain["spec"]["packages"]
            .as_object()
            .map(|packages| {
                packages
                    .iter()
                    .filter(|(_, p)| p.get("interrupt").is_some())
                    .map(|(name, _)| name)
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(interrupting, ["third"]);
    }
}
