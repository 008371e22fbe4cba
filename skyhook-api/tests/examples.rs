//! Every Skyhook and DeploymentPolicy under `examples/` deserialises into the types without
//! losing or inventing fields, and passes the generated CRD schema. The schema is also shown to
//! reject the mistakes it is meant to catch.

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use skyhook_api::crd;
use skyhook_api::v1alpha1::{DeploymentPolicy, Skyhook};

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Every YAML document directly under `examples/`, `examples/drain/` and
/// `examples/rollout-gates/` (whose Skyhooks wait for windows and gates, so the devcluster
/// examples test leaves them out), with its file name.
fn example_documents() -> Vec<(String, Value)> {
    let dirs = [
        examples_dir(),
        examples_dir().join("drain"),
        examples_dir().join("rollout-gates"),
    ];
    let mut paths: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    paths.sort();
    let mut documents = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(document)
                .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
            if !value.is_null() {
                documents.push((file_name(&path), value));
            }
        }
    }
    documents
}

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// The `openAPIV3Schema` of the generated CRD for `kind`.
fn openapi_schema(kind: &str) -> Value {
    let generated = crd::crds()
        .into_iter()
        .find(|g| g.crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD for kind {kind}"));
    let schema = generated.crd.spec.versions[0].schema.clone().unwrap();
    serde_json::to_value(schema.open_api_v3_schema.unwrap()).unwrap()
}

/// Rewrites an OpenAPI v3 (Kubernetes structural) schema into JSON Schema draft 4:
/// `nullable` allows null, `x-kubernetes-int-or-string` is an integer or a string, and objects
/// with declared properties reject unknown fields (the apiserver would silently prune them,
/// which in an example is always a typo).
fn to_json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: Map<String, Value> = map
                .iter()
                .filter(|(key, _)| !key.starts_with("x-kubernetes-") && *key != "nullable")
                .map(|(key, value)| (key.clone(), to_json_schema(value)))
                .collect();
            if map.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
                out.insert("type".into(), json!(["integer", "string"]));
            }
            if map.get("nullable") == Some(&json!(true)) {
                let types = match out.remove("type") {
                    Some(Value::Array(mut types)) => {
                        types.push(json!("null"));
                        Value::Array(types)
                    }
                    Some(single) => json!([single, "null"]),
                    None => panic!("nullable without a type is not structural: {schema}"),
                };
                out.insert("type".into(), types);
            }
            let preserves_unknown =
                map.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
            if map.contains_key("properties")
                && !map.contains_key("additionalProperties")
                && !preserves_unknown
            {
                out.insert("additionalProperties".into(), json!(false));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(to_json_schema).collect()),
        other => other.clone(),
    }
}

/// Problems `instance` has against the CRD schema of `kind`, one line each.
fn schema_errors(kind: &str, instance: &Value) -> Vec<String> {
    let mut schema = to_json_schema(&openapi_schema(kind));
    // `apiVersion`, `kind` and `metadata` are validated by the apiserver itself, not by the CRD
    // schema, which does not list them.
    for field in ["apiVersion", "kind"] {
        schema["properties"][field] = json!({"type": "string"});
    }
    schema["properties"]["metadata"] = json!({"type": "object"});
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .should_validate_formats(false)
        .build(&schema)
        .unwrap();
    validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Fills in schema defaults the way the apiserver does before storing an object.
fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (name, property) in properties {
                    if !object.contains_key(name)
                        && let Some(default) = property.get("default")
                    {
                        object.insert(name.clone(), default.clone());
                    }
                    if let Some(child) = object.get_mut(name) {
                        apply_defaults(property, child);
                    }
                }
            }
            if let Some(additional) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for child in object.values_mut() {
                    apply_defaults(additional, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// The object as the apiserver would store it and as our types should reproduce it: schema
/// defaults applied, and each package's `name` filled from its key.
fn expected_round_trip(kind: &str, document: &Value) -> Value {
    let mut expected = document.clone();
    apply_defaults(&openapi_schema(kind), &mut expected);
    if let Some(Value::Object(packages)) = expected.pointer_mut("/spec/packages") {
        for (key, package) in packages.iter_mut() {
            package
                .as_object_mut()
                .unwrap()
                .entry("name")
                .or_insert_with(|| json!(key));
        }
    }
    expected
}

fn round_trip(kind: &str, document: &Value) -> Result<Value, serde_json::Error> {
    match kind {
        "Skyhook" => serde_json::from_value::<Skyhook>(document.clone())
            .map(|o| serde_json::to_value(o).unwrap()),
        "DeploymentPolicy" => serde_json::from_value::<DeploymentPolicy>(document.clone())
            .map(|o| serde_json::to_value(o).unwrap()),
        other => panic!("unexpected kind {other}"),
    }
}

#[test]
fn every_example_deserialises_round_trips_and_passes_the_schema() {
    let documents = example_documents();
    let mut seen = Vec::new();
    for (file, document) in &documents {
        let kind = document["kind"].as_str().unwrap_or_default();
        if kind != "Skyhook" && kind != "DeploymentPolicy" {
            continue;
        }
        let name = document["metadata"]["name"].as_str().unwrap_or_default();
        let errors = schema_errors(kind, document);
        assert!(
            errors.is_empty(),
            "{file} {kind}/{name} fails the CRD schema:\n{}",
            errors.join("\n")
        );

        let typed = round_trip(kind, document)
            .unwrap_or_else(|e| panic!("{file} {kind}/{name} does not deserialise: {e}"));
        let expected = expected_round_trip(kind, document);
        assert_eq!(
            typed, expected,
            "{file} {kind}/{name}: re-serialising the typed object changed it (left: typed, right: input with defaults)"
        );
        seen.push(format!("{file}:{kind}"));
    }
    // The files the README lists, so a broken glob cannot make this test vacuous.
    for required in [
        "demo.yaml:Skyhook",
        "skyhook-example.yaml:Skyhook",
        "shellscript-example.yaml:Skyhook",
        "policy-fixed.yaml:DeploymentPolicy",
        "policy-linear.yaml:DeploymentPolicy",
        "policy-exponential.yaml:DeploymentPolicy",
        "policy-overlapping-compartments.yaml:DeploymentPolicy",
    ] {
        assert!(
            seen.iter().any(|s| s == required),
            "missing example {required}; saw {seen:?}"
        );
    }
}

#[test]
fn every_example_policy_sets_exactly_one_strategy() {
    for (file, document) in example_documents() {
        if document["kind"] != "DeploymentPolicy" {
            continue;
        }
        let policy: DeploymentPolicy = serde_json::from_value(document).unwrap();
        assert_eq!(policy.spec.default.strategy.count_set(), 1, "{file}");
        for compartment in &policy.spec.compartments {
            if let Some(strategy) = &compartment.strategy {
                assert_eq!(
                    strategy.count_set(),
                    1,
                    "{file} compartment {}",
                    compartment.name
                );
            }
        }
    }
}

fn demo() -> Value {
    example_documents()
        .into_iter()
        .find(|(file, _)| file == "demo.yaml")
        .map(|(_, document)| document)
        .unwrap()
}

fn policy() -> Value {
    example_documents()
        .into_iter()
        .find(|(file, document)| {
            file == "policy-overlapping-compartments.yaml" && document["kind"] == "DeploymentPolicy"
        })
        .map(|(_, document)| document)
        .unwrap()
}

/// Each case breaks one thing in a valid manifest; the schema must reject it at that path.
#[test]
fn schema_rejects_invalid_manifests() {
    type Mutation = fn(&mut Value);
    let skyhook_cases: &[(&str, Mutation, &str)] = &[
        (
            "unknown drain onTimeout",
            |v| v["spec"]["drain"] = json!({"onTimeout": "evict-anyway"}),
            "/spec/drain/onTimeout",
        ),
        (
            "negative drain grace period",
            |v| v["spec"]["drain"] = json!({"gracePeriodSeconds": -1}),
            "/spec/drain/gracePeriodSeconds",
        ),
        (
            "onFailure uncordon not a boolean",
            |v| v["spec"]["onFailure"] = json!({"uncordon": "yes"}),
            "/spec/onFailure/uncordon",
        ),
        (
            "unknown interrupt type",
            |v| v["spec"]["packages"]["tuning"]["interrupt"] = json!({"type": "powercycle"}),
            "/spec/packages/tuning/interrupt/type",
        ),
        (
            "interrupt without type",
            |v| v["spec"]["packages"]["tuning"]["interrupt"] = json!({"services": ["cron"]}),
            "/spec/packages/tuning/interrupt",
        ),
        (
            "unknown config interrupt type",
            |v| {
                v["spec"]["packages"]["tuning"]["configInterrupts"] =
                    json!({"apply.sh": {"type": "restart_all_services"}})
            },
            "/spec/packages/tuning/configInterrupts/apply.sh/type",
        ),
        (
            "missing version",
            |v| {
                v["spec"]["packages"]["tuning"]
                    .as_object_mut()
                    .unwrap()
                    .remove("version");
            },
            "/spec/packages/tuning",
        ),
        (
            "missing image",
            |v| {
                v["spec"]["packages"]["tuning"]
                    .as_object_mut()
                    .unwrap()
                    .remove("image");
            },
            "/spec/packages/tuning",
        ),
        (
            "priority 0",
            |v| v["spec"]["priority"] = json!(0),
            "/spec/priority",
        ),
        (
            "name with uppercase",
            |v| v["spec"]["packages"]["tuning"]["name"] = json!("Tuning"),
            "/spec/packages/tuning/name",
        ),
        (
            "name of one letter",
            |v| v["spec"]["packages"]["tuning"]["name"] = json!("t"),
            "/spec/packages/tuning/name",
        ),
        (
            "name ending in a digit",
            |v| v["spec"]["packages"]["tuning"]["name"] = json!("tuning2"),
            "/spec/packages/tuning/name",
        ),
        (
            "name of 44 characters",
            |v| v["spec"]["packages"]["tuning"]["name"] = json!("a".repeat(44)),
            "/spec/packages/tuning/name",
        ),
        (
            "budget percent 101",
            |v| v["spec"]["interruptionBudget"] = json!({"percent": 101}),
            "/spec/interruptionBudget/percent",
        ),
        (
            "budget count -1",
            |v| v["spec"]["interruptionBudget"] = json!({"count": -1}),
            "/spec/interruptionBudget/count",
        ),
        (
            "sequencing sometimes",
            |v| v["spec"]["sequencing"] = json!("sometimes"),
            "/spec/sequencing",
        ),
        (
            "version as a number",
            |v| v["spec"]["packages"]["tuning"]["version"] = json!(1.2),
            "/spec/packages/tuning/version",
        ),
        (
            "misspelt field",
            |v| v["spec"]["packages"]["tuning"]["configmap"] = json!({}),
            "/spec/packages/tuning",
        ),
        (
            "unknown node status",
            |v| v["status"] = json!({"nodeStatus": {"n1": "done"}}),
            "/status/nodeStatus/n1",
        ),
        (
            "unknown stage",
            |v| v["status"] = json!({"nodeState": {"n1": {"a|1": {"name": "a", "version": "1", "image": "i", "stage": "install", "state": "complete"}}}}),
            "/status/nodeState/n1/a|1/stage",
        ),
    ];
    for (what, mutate, path) in skyhook_cases {
        let mut manifest = demo();
        mutate(&mut manifest);
        let errors = schema_errors("Skyhook", &manifest);
        assert!(
            errors.iter().any(|e| e.starts_with(&format!("{path}:"))),
            "{what}: expected an error at {path}, got {errors:?}"
        );
    }

    let policy_cases: &[(&str, Mutation, &str)] = &[
        (
            "budget percent 0",
            |v| v["spec"]["default"]["budget"] = json!({"percent": 0}),
            "/spec/default/budget/percent",
        ),
        (
            "budget count 0",
            |v| v["spec"]["compartments"][0]["budget"] = json!({"count": 0}),
            "/spec/compartments/0/budget/count",
        ),
        (
            "growthFactor 1",
            |v| v["spec"]["default"]["strategy"]["exponential"]["growthFactor"] = json!(1),
            "/spec/default/strategy/exponential/growthFactor",
        ),
        (
            "delta 0",
            |v| v["spec"]["compartments"][0]["strategy"]["linear"]["delta"] = json!(0),
            "/spec/compartments/0/strategy/linear/delta",
        ),
        (
            "initialBatch 0",
            |v| v["spec"]["compartments"][1]["strategy"]["fixed"]["initialBatch"] = json!(0),
            "/spec/compartments/1/strategy/fixed/initialBatch",
        ),
        (
            "batchThreshold 0",
            |v| v["spec"]["default"]["strategy"]["exponential"]["batchThreshold"] = json!(0),
            "/spec/default/strategy/exponential/batchThreshold",
        ),
        (
            "safetyLimit 101",
            |v| v["spec"]["default"]["strategy"]["exponential"]["safetyLimit"] = json!(101),
            "/spec/default/strategy/exponential/safetyLimit",
        ),
        (
            "failureThreshold 0",
            |v| v["spec"]["compartments"][1]["strategy"]["fixed"]["failureThreshold"] = json!(0),
            "/spec/compartments/1/strategy/fixed/failureThreshold",
        ),
        (
            "empty compartment name",
            |v| v["spec"]["compartments"][0]["name"] = json!(""),
            "/spec/compartments/0/name",
        ),
        (
            "compartment without selector",
            |v| {
                v["spec"]["compartments"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("selector");
            },
            "/spec/compartments/0",
        ),
        (
            "default without strategy",
            |v| {
                v["spec"]["default"]
                    .as_object_mut()
                    .unwrap()
                    .remove("strategy");
            },
            "/spec/default",
        ),
        (
            "no default",
            |v| {
                v["spec"].as_object_mut().unwrap().remove("default");
            },
            "/spec",
        ),
    ];
    for (what, mutate, path) in policy_cases {
        let mut manifest = policy();
        mutate(&mut manifest);
        let errors = schema_errors("DeploymentPolicy", &manifest);
        assert!(
            errors.iter().any(|e| e.starts_with(&format!("{path}:"))),
            "{what}: expected an error at {path}, got {errors:?}"
        );
    }
}

/// Values at the edges of each range are accepted, so the rejections above are not vacuous.
#[test]
fn schema_accepts_boundary_values() {
    let mut skyhook = demo();
    skyhook["spec"]["priority"] = json!(1);
    skyhook["spec"]["interruptionBudget"] = json!({"percent": 0, "count": null});
    skyhook["spec"]["sequencing"] = json!("all");
    skyhook["spec"]["packages"]["tuning"]["name"] = json!(format!("a{}z", "-".repeat(41)));
    skyhook["spec"]["packages"]["tuning"]["interrupt"] = json!({"type": "restartAllServices"});
    skyhook["spec"]["packages"]["tuning"]["resources"] =
        json!({"cpuRequest": "100m", "cpuLimit": 1, "memoryRequest": "64Mi", "memoryLimit": null});
    skyhook["status"] =
        json!({"status": "in_progress", "nodeStatus": {"n1": "erroring"}, "completeNodes": "1/3"});
    assert_eq!(schema_errors("Skyhook", &skyhook), Vec::<String>::new());

    let mut policy = policy();
    policy["spec"]["default"]["budget"] = json!({"percent": 100});
    policy["spec"]["default"]["strategy"]["exponential"] = json!({"initialBatch": 1, "growthFactor": 2, "batchThreshold": 1, "safetyLimit": 100, "failureThreshold": null});
    assert_eq!(
        schema_errors("DeploymentPolicy", &policy),
        Vec::<String>::new()
    );
}

/// A structural schema: every node has a type unless it is int-or-string or preserves unknown
/// fields, and there is no `nullable` without a type. Our own fields are all documented.
#[test]
fn generated_schemas_are_structural_and_documented() {
    fn walk(schema: &Value, path: &str, problems: &mut Vec<String>) {
        let Value::Object(map) = schema else { return };
        let exempt = map.contains_key("x-kubernetes-int-or-string")
            || map.contains_key("x-kubernetes-preserve-unknown-fields");
        if !map.contains_key("type") && !exempt {
            problems.push(format!("{path}: no type"));
        }
        for keyword in [
            "oneOf",
            "anyOf",
            "allOf",
            "not",
            "$ref",
            "definitions",
            "$defs",
        ] {
            if map.contains_key(keyword) {
                problems.push(format!("{path}: uses {keyword}"));
            }
        }
        if let Some(Value::Object(properties)) = map.get("properties") {
            for (name, property) in properties {
                walk(property, &format!("{path}.{name}"), problems);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(child) = map.get(key) {
                walk(child, &format!("{path}[]"), problems);
            }
        }
    }
    fn undocumented(schema: &Value, path: &str, out: &mut Vec<String>) {
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (name, property) in properties {
                let path = format!("{path}.{name}");
                if property
                    .get("description")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    out.push(path.clone());
                }
                undocumented(property, &path, out);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(child) = schema.get(key) {
                undocumented(child, &format!("{path}[]"), out);
            }
        }
    }
    for kind in ["Skyhook", "DeploymentPolicy"] {
        let schema = openapi_schema(kind);
        let mut problems = Vec::new();
        walk(&schema, kind, &mut problems);
        assert_eq!(
            problems,
            Vec::<String>::new(),
            "{kind} schema is not structural"
        );

        let mut missing = Vec::new();
        for root in ["spec", "status"] {
            if let Some(part) = schema["properties"].get(root) {
                undocumented(part, &format!("{kind}.{root}"), &mut missing);
            }
        }
        assert_eq!(
            missing,
            Vec::<String>::new(),
            "{kind} fields without a description"
        );
    }
}

/// The round-trip comparison notices a field the types would drop, so it is a real check.
#[test]
fn round_trip_comparison_notices_dropped_fields() {
    let mut manifest = demo();
    manifest["spec"]["packages"]["tuning"]["colour"] = json!("blue");
    let typed = round_trip("Skyhook", &manifest).unwrap();
    assert_ne!(typed, expected_round_trip("Skyhook", &manifest));
    assert_eq!(typed, expected_round_trip("Skyhook", &demo()));
}
