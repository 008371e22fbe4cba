//! Structural validation of `config.json` against the v1 JSON Schema shipped in this crate,
//! with each schema error turned into a problem that names the step and field and says how
//! to fix it.

use std::sync::OnceLock;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use crate::mode::Mode;
use crate::problem::{Location, Problem};

const SCHEMA_TEXT: &str = include_str!("../../schemas/v1/config.schema.json");

const STEP_FIELDS: &str =
    "name, path, arguments, returncodes, on_host, idempotence, upgrade_step, env";

fn validator() -> &'static Result<Validator, String> {
    static VALIDATOR: OnceLock<Result<Validator, String>> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let schema: Value = serde_json::from_str(SCHEMA_TEXT)
            .map_err(|err| format!("the bundled config schema is not JSON: {err}"))?;
        jsonschema::draft202012::new(&schema)
            .map_err(|err| format!("the bundled config schema does not compile: {err}"))
    })
}

/// Every schema violation of `document`, as problems.
pub fn check(document: &Value) -> Vec<Problem> {
    let validator = match validator() {
        Ok(validator) => validator,
        Err(reason) => {
            return vec![Problem::error(
                Location::Package,
                reason.clone(),
                "this is a bug in skyhook-agent; report it",
            )];
        }
    };
    validator
        .iter_errors(document)
        .map(|error| describe(document, &error))
        .collect()
}

/// The instance path as decoded JSON-pointer segments.
fn segments(error: &ValidationError<'_>) -> Vec<String> {
    error
        .instance_path()
        .as_str()
        .split('/')
        .skip(1)
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
        .collect()
}

fn locate(document: &Value, segments: &[String]) -> (Location, Option<String>) {
    match segments {
        [modes, mode, index, rest @ ..] if modes == "modes" => {
            let (Some(mode), Ok(index)) = (Mode::parse(mode), index.parse::<usize>()) else {
                return (Location::Field(segments.join(".")), None);
            };
            let name = document
                .pointer(&format!("/modes/{}/{index}/name", mode.as_str()))
                .and_then(Value::as_str)
                .map(str::to_string);
            let field = rest.first().cloned();
            let location = Location::Step {
                mode,
                index,
                name,
                field: (!rest.is_empty()).then(|| rest.join(".")),
            };
            (location, field)
        }
        _ => (
            Location::Field(segments.join(".")),
            segments.last().cloned(),
        ),
    }
}

fn describe(document: &Value, error: &ValidationError<'_>) -> Problem {
    let segments = segments(error);
    let (location, field) = locate(document, &segments);
    let in_step = matches!(location, Location::Step { .. });
    let field = field.unwrap_or_default();
    let (message, fix) = match error.kind() {
        ValidationErrorKind::Required { property } => {
            let property = property.as_str().unwrap_or_default().to_string();
            (
                format!("missing required field \"{property}\""),
                format!("add \"{property}\": {}", example(&property)),
            )
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let unexpected = unexpected.join(", ");
            if segments == ["modes"] {
                (
                    format!("unknown mode {unexpected}"),
                    format!(
                        "use only the modes {}; interrupts are set on the package in the Skyhook resource, not here",
                        Mode::STEP_MODES.map(Mode::as_str).join(", ")
                    ),
                )
            } else if in_step {
                (
                    format!("unknown step field {unexpected}"),
                    format!("remove it; a step has the fields {STEP_FIELDS}"),
                )
            } else {
                (
                    format!("unknown field {unexpected}"),
                    "remove it".to_string(),
                )
            }
        }
        ValidationErrorKind::Constant { .. } if field == "schema_version" => (
            format!("unsupported schema_version {}", error.instance()),
            "set \"schema_version\": \"v1\"".to_string(),
        ),
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(ts) => ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or "),
            };
            let found = json_type(error.instance());
            let fix = if segments.iter().any(|s| s == "returncodes") {
                "write returncodes as a list of whole numbers, e.g. [0] or [0, 2]".to_string()
            } else {
                format!("write {} as {}", display_field(&field), article(&expected))
            };
            (format!("must be {}, found {found}", article(&expected)), fix)
        }
        ValidationErrorKind::Pattern { .. } if field == "name" => (
            format!("step name {} has characters outside [a-zA-Z0-9_.-]", error.instance()),
            "rename the step using only letters, digits, '_', '-' and '.'".to_string(),
        ),
        ValidationErrorKind::Pattern { .. } if field == "package_version" => (
            format!("package_version {} is not a full semantic version", error.instance()),
            "use MAJOR.MINOR.PATCH with an optional -prerelease and +build, e.g. \"1.2.0\" (no leading v, three numbers)".to_string(),
        ),
        ValidationErrorKind::MinItems { .. } if field == "returncodes" => (
            "returncodes is empty, so no exit code could count as success".to_string(),
            "list the exit codes that mean success, usually [0]".to_string(),
        ),
        ValidationErrorKind::MinLength { .. } => (
            format!("{} must not be empty", display_field(&field)),
            format!("set {} to a non-empty string", display_field(&field)),
        ),
        _ => (
            error.to_string(),
            "make the field match the v1 schema (agent/schemas/v1/config.schema.json)".to_string(),
        ),
    };
    Problem::error(location, message, fix)
}

fn display_field(field: &str) -> String {
    if field.is_empty() {
        "the document".to_string()
    } else {
        field.to_string()
    }
}

fn article(type_name: &str) -> String {
    match type_name.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {type_name}"),
        _ => format!("a {type_name}"),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn example(property: &str) -> &'static str {
    match property {
        "schema_version" => "\"v1\"",
        "package_name" => "\"my-package\"",
        "package_version" => "\"1.0.0\"",
        "expected_config_files" => "[] (or the configMap keys the scripts need)",
        "modes" => "{\"apply\": [...], \"apply-check\": [...]}",
        "name" => "\"a-step-name\"",
        "path" => "\"script.sh\" (relative to skyhook_dir)",
        "arguments" => "[]",
        "returncodes" => "[0]",
        "on_host" => "true",
        "idempotence" => {
            "false (the agent runs the step until it succeeds once) or true (the script manages its own idempotence and runs every time)"
        }
        "upgrade_step" => "false",
        _ => "a value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::fixtures::minimal;

    fn problems_for(mutate: impl FnOnce(&mut Value)) -> Vec<String> {
        let mut doc = minimal();
        mutate(&mut doc);
        check(&doc).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_bundled_schema_compiles_and_accepts_the_minimal_config() {
        assert!(validator().is_ok());
        assert!(check(&minimal()).is_empty());
    }

    /// One row per schema rule: the mutation and text the single problem must contain.
    #[test]
    fn every_schema_rule_reports_location_and_fix() {
        type Mutation = fn(&mut Value);
        let cases: &[(&str, Mutation, &[&str])] = &[
            (
                "missing top-level field",
                |d| {
                    d.as_object_mut().unwrap().remove("package_version");
                },
                &[
                    "config.json: missing required field \"package_version\"",
                    "fix: add \"package_version\": \"1.0.0\"",
                ],
            ),
            (
                "wrong schema version",
                |d| d["schema_version"] = "v2".into(),
                &[
                    "config.json schema_version: unsupported schema_version \"v2\"",
                    "\"schema_version\": \"v1\"",
                ],
            ),
            (
                "empty package name",
                |d| d["package_name"] = "".into(),
                &["config.json package_name: package_name must not be empty"],
            ),
            (
                "version not semver",
                |d| d["package_version"] = "1.2".into(),
                &[
                    "config.json package_version: package_version \"1.2\" is not a full semantic version",
                    "MAJOR.MINOR.PATCH",
                ],
            ),
            (
                "version with v prefix",
                |d| d["package_version"] = "v1.2.3".into(),
                &["is not a full semantic version"],
            ),
            (
                "expected_config_files not a list",
                |d| d["expected_config_files"] = "a.conf".into(),
                &["config.json expected_config_files: must be an array, found a string"],
            ),
            (
                "unknown mode",
                |d| d["modes"]["install"] = serde_json::json!([]),
                &[
                    "config.json modes: unknown mode install",
                    "use only the modes apply, apply-check",
                ],
            ),
            (
                "interrupt as a mode",
                |d| d["modes"]["interrupt"] = serde_json::json!([]),
                &[
                    "unknown mode interrupt",
                    "interrupts are set on the package",
                ],
            ),
            (
                "missing step field",
                |d| {
                    d["modes"]["apply"][0]
                        .as_object_mut()
                        .unwrap()
                        .remove("idempotence");
                },
                &[
                    "config.json modes.apply[0] (step \"install\"): missing required field \"idempotence\"",
                    "runs every time",
                ],
            ),
            (
                "unknown step field",
                |d| d["modes"]["apply"][0]["timeout"] = 5.into(),
                &[
                    "modes.apply[0] (step \"install\"): unknown step field timeout",
                    "a step has the fields",
                ],
            ),
            (
                "bad step name",
                |d| d["modes"]["apply-check"][0]["name"] = "check install".into(),
                &[
                    "modes.apply-check[0] (step \"check install\") field name: step name \"check install\" has characters outside",
                    "rename the step",
                ],
            ),
            (
                "empty returncodes",
                |d| d["modes"]["apply"][0]["returncodes"] = serde_json::json!([]),
                &[
                    "modes.apply[0] (step \"install\") field returncodes: returncodes is empty",
                    "usually [0]",
                ],
            ),
            (
                "string returncode",
                |d| d["modes"]["apply"][0]["returncodes"] = serde_json::json!(["0"]),
                &[
                    "modes.apply[0] (step \"install\") field returncodes.0: must be an integer, found a string",
                    "whole numbers",
                ],
            ),
            (
                "argument not a string",
                |d| d["modes"]["apply"][0]["arguments"] = serde_json::json!([1]),
                &["field arguments.0: must be a string, found an integer"],
            ),
            (
                "on_host not a boolean",
                |d| d["modes"]["apply"][0]["on_host"] = "yes".into(),
                &[
                    "field on_host: must be a boolean, found a string",
                    "write on_host as a boolean",
                ],
            ),
            (
                "env value not a string",
                |d| d["modes"]["apply"][0]["env"] = serde_json::json!({"N": 1}),
                &["field env.N: must be a string, found an integer"],
            ),
            (
                "empty path",
                |d| d["modes"]["apply"][0]["path"] = "".into(),
                &["field path: path must not be empty"],
            ),
            (
                "steps not a list",
                |d| d["modes"]["config"] = serde_json::json!({}),
                &["config.json modes.config: must be an array, found an object"],
            ),
        ];
        for (label, mutate, expected) in cases {
            let problems = problems_for(*mutate);
            assert_eq!(problems.len(), 1, "{label}: {problems:#?}");
            for fragment in *expected {
                assert!(
                    problems[0].contains(fragment),
                    "{label}: {:?} lacks {fragment:?}",
                    problems[0]
                );
            }
        }
    }

    #[test]
    fn a_non_object_document_is_reported() {
        let problems = check(&serde_json::json!([1, 2]));
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0]
                .to_string()
                .contains("must be an object, found an array")
        );
    }

    #[test]
    fn requires_interrupt_is_accepted_for_compatibility() {
        let problems = problems_for(|d| d["modes"]["apply"][0]["requires_interrupt"] = true.into());
        assert!(problems.is_empty(), "{problems:?}");
    }
}
