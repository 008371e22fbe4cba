//! `config.json`, schema v1: the typed package description and how it is checked.
//!
//! Loading is three passes: the JSON Schema in `schemas/v1/config.schema.json` (structure and
//! field types), then the semantic rules upstream enforces when it loads steps (see
//! [`semantic`]), then, with access to the package files, that every step's script exists.

mod description;
mod schema;
pub mod semantic;

pub use description::{PackageConfig, Step};

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::mode::Mode;
use crate::problem::{Location, Problem};

#[derive(Deserialize)]
struct RawConfig {
    package_name: String,
    package_version: String,
    expected_config_files: Vec<String>,
    modes: BTreeMap<String, Vec<Step>>,
}

/// The result of reading a `config.json`: the config when it has no errors, and every problem.
#[derive(Debug)]
pub struct Loaded {
    pub config: Option<PackageConfig>,
    pub problems: Vec<Problem>,
}

impl Loaded {
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.is_error())
    }
}

/// Parses and checks `config.json` text (schema and semantic rules, no file access).
pub fn parse(text: &str) -> Loaded {
    let document: serde_json::Value = match serde_json::from_str(text) {
        Ok(document) => document,
        Err(err) => {
            return Loaded {
                config: None,
                problems: vec![Problem::error(
                    Location::Field(String::new()),
                    format!(
                        "is not valid JSON (line {}, column {}): {err}",
                        err.line(),
                        err.column()
                    ),
                    "fix the JSON syntax; a JSON linter (`python3 -m json.tool config.json`) shows the spot",
                )],
            };
        }
    };
    let schema_problems = schema::check(&document);
    if !schema_problems.is_empty() {
        return Loaded {
            config: None,
            problems: schema_problems,
        };
    }
    let raw: RawConfig = match serde_json::from_value(document) {
        Ok(raw) => raw,
        Err(err) => {
            return Loaded {
                config: None,
                problems: vec![Problem::error(
                    Location::Field(String::new()),
                    format!("does not fit the v1 step model: {err}"),
                    "write returncodes as whole numbers without a decimal point, within 64-bit range",
                )],
            };
        }
    };
    let modes = raw
        .modes
        .into_iter()
        .filter_map(|(key, steps)| Mode::parse(&key).map(|mode| (mode, steps)))
        .collect();
    let config = PackageConfig {
        package_name: raw.package_name,
        package_version: raw.package_version,
        expected_config_files: raw.expected_config_files,
        modes,
    };
    let problems = semantic::check(&config);
    let has_errors = problems.iter().any(Problem::is_error);
    Loaded {
        config: (!has_errors).then_some(config),
        problems,
    }
}

/// Reports every step whose script is missing from `skyhook_dir`; `exists` answers for a path
/// relative to `skyhook_dir`.
pub fn missing_scripts(config: &PackageConfig, exists: impl Fn(&str) -> bool) -> Vec<Problem> {
    config
        .all_steps()
        .filter(|(_, _, step)| !exists(&step.path))
        .map(|(mode, index, step)| {
            Problem::error(
                step.location(mode, index, Some("path")),
                format!("script skyhook_dir/{} does not exist", step.path),
                format!(
                    "add the script at skyhook_dir/{} in the package image, or correct the step's path",
                    step.path
                ),
            )
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod fixtures {
    /// A valid config with an apply and an apply-check step.
    pub fn minimal() -> serde_json::Value {
        serde_json::json!({
            "schema_version": "v1",
            "package_name": "demo",
            "package_version": "1.0.0",
            "expected_config_files": [],
            "modes": {
                "apply": [{
                    "name": "install", "path": "install.sh", "arguments": [],
                    "returncodes": [0], "on_host": true, "idempotence": false, "upgrade_step": false
                }],
                "apply-check": [{
                    "name": "install_check", "path": "install_check.sh", "arguments": [],
                    "returncodes": [0], "on_host": true, "idempotence": false, "upgrade_step": false
                }]
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_config_loads_with_its_steps() {
        let loaded = parse(&fixtures::minimal().to_string());
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        let config = loaded.config.unwrap();
        assert_eq!(config.package_name, "demo");
        assert_eq!(config.steps(Mode::Apply)[0].path, "install.sh");
        assert_eq!(config.steps(Mode::Config), &[]);
        assert_eq!(config.all_steps().count(), 2);
    }

    #[test]
    fn unknown_top_level_keys_are_accepted_like_upstream() {
        // Upstream's own config.dump() writes a "root_dir" key.
        let mut doc = fixtures::minimal();
        doc["root_dir"] = serde_json::json!("/tmp/build");
        let loaded = parse(&doc.to_string());
        assert!(loaded.config.is_some(), "{:?}", loaded.problems);
    }

    #[test]
    fn invalid_json_names_line_and_column() {
        let loaded = parse("{\n  \"schema_version\": \"v1\",\n}");
        assert!(loaded.config.is_none());
        let message = &loaded.problems[0].message;
        assert!(message.contains("line 3"), "{message}");
    }

    #[test]
    fn fractional_returncodes_are_rejected_with_a_fix() {
        let mut doc = fixtures::minimal();
        doc["modes"]["apply"][0]["returncodes"] = serde_json::json!([1.0]);
        let text = doc.to_string();
        let loaded = parse(&text);
        assert!(loaded.config.is_none());
        assert!(loaded.problems[0].fix.contains("whole numbers"));
    }

    #[test]
    fn missing_scripts_are_reported_per_step() {
        let config = parse(&fixtures::minimal().to_string()).config.unwrap();
        let problems = missing_scripts(&config, |path| path == "install.sh");
        assert_eq!(problems.len(), 1);
        assert_eq!(
            problems[0].to_string(),
            "error: config.json modes.apply-check[0] (step \"install_check\") field path: script skyhook_dir/install_check.sh does not exist\n  fix: add the script at skyhook_dir/install_check.sh in the package image, or correct the step's path"
        );
    }
}
