//! What the `cli_*` tests share besides [`e2e::Kubectl::with_plugin`] (which runs `kubectl
//! skyhook …` through the real `kubectl`): the agentless Skyhooks they roll out and reading the
//! tables the plugin prints.

use serde_json::{Value, json};

/// The agentless package the CLI tests install (spec §6.1's test image: every stage sleeps
/// `SLEEP_LEN` seconds and exits `EXIT_CODE`).
pub const PACKAGE: &str = "agentless";
pub const VERSION: &str = "1.2.3";

/// A Skyhook of one agentless package with `env`, on the nodes matching `match_labels`;
/// `extra_spec` is merged into the spec.
pub fn agentless_skyhook(
    name: &str,
    match_labels: Value,
    env: &[(&str, &str)],
    extra_spec: Value,
) -> String {
    let env: Vec<Value> = env
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    let spec = json!({
        "nodeSelectors": {"matchLabels": match_labels},
        "packages": {PACKAGE: {
            "version": VERSION,
            "image": "ghcr.io/nvidia/skyhook/agentless",
            "env": env,
        }},
    });
    e2e::skyhook_manifest(name, spec, extra_spec)
}

/// `"<package>|<version>"`, the key of the agentless package in a node state.
pub fn package_key() -> String {
    format!("{PACKAGE}|{VERSION}")
}

/// The lines of `text` whose whitespace-separated columns start with `columns`.
pub fn rows_starting<'t>(text: &'t str, columns: &[&str]) -> Vec<&'t str> {
    text.lines()
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() >= columns.len() && fields[..columns.len()] == *columns
        })
        .collect()
}
