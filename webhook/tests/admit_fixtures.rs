//! Every AdmissionReview under `tests/fixtures/{allow,deny}` through the pure review path, with
//! the expected verdict, message fragments and warnings. The cluster holds the policies
//! `linear-ramp` and `unused`, and the Skyhook `kernel-args` of `examples/policy-linear.yaml`,
//! which uses `linear-ramp`.
// Test helpers fail loudly on broken fixtures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize as _;
use serde_json::{Value, json};
use skyhook_api::v1alpha1::Skyhook;
use webhook::endpoint::Endpoint;
use webhook::lookups::ExistingObjects;
use webhook::review::{Verdict, review};

use Endpoint::{MutatePolicy, MutateSkyhook, ValidatePolicy, ValidateSkyhook};

struct Case {
    fixture: &'static str,
    endpoint: Endpoint,
    verdict: Verdict,
    /// Fragments the denial message must contain.
    message: &'static [&'static str],
    /// Fields the denial's causes must name.
    fields: &'static [&'static str],
    /// Fragments, one per expected warning, in order.
    warnings: &'static [&'static str],
}

const fn case(fixture: &'static str, endpoint: Endpoint, verdict: Verdict) -> Case {
    Case {
        fixture,
        endpoint,
        verdict,
        message: &[],
        fields: &[],
        warnings: &[],
    }
}

use Verdict::{Allowed, Denied, Malformed};

const CASES: &[Case] = &[
    case("allow/demo-create", ValidateSkyhook, Allowed),
    case("allow/skyhook-delete", ValidateSkyhook, Allowed),
    case("allow/skyhook-mutate-noop", MutateSkyhook, Allowed),
    Case {
        warnings: &["spec.pause is deprecated and ignored"],
        ..case("allow/pause-deprecated-warns", ValidateSkyhook, Allowed)
    },
    case("allow/skyhook-existing-policy", ValidateSkyhook, Allowed),
    case(
        "allow/skyhook-metadata-update-keeps-invalid-spec",
        ValidateSkyhook,
        Allowed,
    ),
    case("allow/skyhook-dependencies", ValidateSkyhook, Allowed),
    case("allow/policy-create-linear", ValidatePolicy, Allowed),
    case("allow/policy-defaults", MutatePolicy, Allowed),
    case("allow/policy-defaults-complete", MutatePolicy, Allowed),
    case("allow/policy-delete-unreferenced", ValidatePolicy, Allowed),
    Case {
        message: &["memoryLimit not set while other resources are"],
        fields: &["spec.packages.tuning.resources"],
        ..case("deny/resources-three-fields", ValidateSkyhook, Denied)
    },
    Case {
        message: &["cpuLimit is below cpuRequest"],
        fields: &["spec.packages.tuning.resources.cpuLimit"],
        ..case(
            "deny/resources-limit-below-request",
            ValidateSkyhook,
            Denied,
        )
    },
    Case {
        message: &["2024/07/06"],
        fields: &["spec.packages.tuning.version"],
        ..case("deny/bad-semver", ValidateSkyhook, Denied)
    },
    Case {
        message: &[
            "\"tuning-1.0.0-rc.1+build.5\" is not a valid label value",
            "drop the build metadata (write \"1.0.0-rc.1\")",
        ],
        fields: &["spec.packages.tuning.version"],
        ..case("deny/version-build-metadata", ValidateSkyhook, Denied)
    },
    Case {
        message: &[
            "has 51 characters, more than 50",
            "shorten it to at most 50",
        ],
        fields: &["metadata.name"],
        ..case("deny/name-too-long", ValidateSkyhook, Denied)
    },
    Case {
        message: &["base"],
        fields: &["spec.packages.top.dependsOn.base"],
        ..case("deny/depends-on-missing", ValidateSkyhook, Denied)
    },
    Case {
        message: &["1.3.0", "1.2.0"],
        fields: &["spec.packages.top.dependsOn.base"],
        ..case("deny/depends-on-ambiguous", ValidateSkyhook, Denied)
    },
    Case {
        message: &["cycle"],
        fields: &["spec.packages.aa.dependsOn"],
        ..case("deny/dependency-cycle", ValidateSkyhook, Denied)
    },
    Case {
        message: &["compartment name \"gpu\" is already used"],
        fields: &["spec.compartments[1].name"],
        ..case("deny/policy-duplicate-compartments", ValidatePolicy, Denied)
    },
    Case {
        message: &["both percent and count are set"],
        fields: &["spec.interruptionBudget"],
        ..case("deny/skyhook-budget-both-forms", ValidateSkyhook, Denied)
    },
    Case {
        fields: &["spec.default.budget"],
        ..case("deny/policy-budget-both-forms", ValidatePolicy, Denied)
    },
    Case {
        message: &["deploymentPolicy and interruptionBudget are both set"],
        fields: &["spec.deploymentPolicy"],
        ..case("deny/policy-and-budget", ValidateSkyhook, Denied)
    },
    Case {
        message: &["deploymentPolicy \"nope\" not found"],
        fields: &["spec.deploymentPolicy"],
        ..case("deny/missing-policy", ValidateSkyhook, Denied)
    },
    Case {
        message: &["matches no configMap key"],
        fields: &["spec.packages.tuning.configInterrupts.sysctl.conf"],
        ..case("deny/config-interrupt-missing-key", ValidateSkyhook, Denied)
    },
    Case {
        message: &["differs from the package key"],
        fields: &["spec.packages.tuning.name"],
        ..case("deny/name-differs-from-key", ValidateSkyhook, Denied)
    },
    Case {
        message: &["problems found:"],
        fields: &[
            "spec.interruptionBudget",
            "spec.packages.tuning.version",
            "spec.packages.tuning.resources",
            "spec.packages.top.dependsOn.missing",
        ],
        ..case("deny/many-violations", ValidateSkyhook, Denied)
    },
    Case {
        fields: &["spec.packages.tuning.version"],
        ..case("deny/skyhook-update-invalid", ValidateSkyhook, Denied)
    },
    Case {
        message: &["still referenced by", "kernel-args"],
        ..case("deny/policy-delete-referenced", ValidatePolicy, Denied)
    },
    Case {
        message: &["not JSON"],
        ..case("deny/malformed-not-json", ValidateSkyhook, Malformed)
    },
    Case {
        message: &["admission.k8s.io/v1beta1", "admissionReviewVersions"],
        ..case(
            "deny/malformed-wrong-api-version",
            ValidateSkyhook,
            Malformed,
        )
    },
    Case {
        message: &["has no request"],
        ..case("deny/malformed-missing-request", MutateSkyhook, Malformed)
    },
    Case {
        message: &["not a valid Skyhook"],
        ..case(
            "deny/malformed-object-not-a-skyhook",
            ValidateSkyhook,
            Denied,
        )
    },
    Case {
        message: &["/Pod", "webhook configuration"],
        ..case("deny/malformed-wrong-kind", ValidateSkyhook, Denied)
    },
];

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn cluster() -> ExistingObjects {
    let text = std::fs::read_to_string(examples_dir().join("policy-linear.yaml")).unwrap();
    let skyhooks: Vec<Skyhook> = serde_yaml::Deserializer::from_str(&text)
        .map(serde_yaml::Value::deserialize)
        .map(Result::unwrap)
        .filter(|doc| doc["kind"] == "Skyhook")
        .map(|doc| serde_yaml::from_value(doc).unwrap())
        .collect();
    assert_eq!(skyhooks.len(), 1);
    ExistingObjects {
        policy_names: BTreeSet::from(["linear-ramp".to_owned(), "unused".to_owned()]),
        skyhooks,
        ..ExistingObjects::default()
    }
}

fn run(fixture: &str, endpoint: Endpoint) -> (Value, Verdict) {
    let body = std::fs::read(fixtures_dir().join(format!("{fixture}.json"))).unwrap();
    let reviewed = review(endpoint, &body, &cluster());
    let json: Value = serde_json::from_slice(&reviewed.to_json()).unwrap();
    (json, reviewed.verdict)
}

fn request_uid(fixture: &str) -> String {
    let body = std::fs::read(fixtures_dir().join(format!("{fixture}.json"))).unwrap();
    serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.pointer("/request/uid")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[test]
fn every_fixture_gets_its_expected_answer() {
    let mut failures = Vec::new();
    for case in CASES {
        let (json, verdict) = run(case.fixture, case.endpoint);
        let response = &json["response"];
        let mut problems = Vec::new();
        if json["apiVersion"] != "admission.k8s.io/v1" || json["kind"] != "AdmissionReview" {
            problems.push("response is not an admission.k8s.io/v1 AdmissionReview".to_owned());
        }
        if response["uid"] != request_uid(case.fixture).as_str() {
            problems.push(format!("uid not echoed: {}", response["uid"]));
        }
        if verdict != case.verdict {
            problems.push(format!("verdict {verdict:?}, expected {:?}", case.verdict));
        }
        let allowed = case.verdict == Allowed;
        if response["allowed"] != allowed {
            problems.push(format!("allowed is {}", response["allowed"]));
        }
        if case.fixture.starts_with("allow/") != allowed {
            problems.push("fixture directory contradicts the expected verdict".to_owned());
        }
        let message = response["status"]["message"].as_str().unwrap_or_default();
        if !allowed && message.is_empty() {
            problems.push("denial without a message".to_owned());
        }
        for fragment in case.message {
            if !message.contains(fragment) {
                problems.push(format!("message lacks {fragment:?}: {message}"));
            }
        }
        let causes: Vec<&str> = response["status"]["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["field"].as_str())
            .collect();
        for field in case.fields {
            if !causes.contains(field) {
                problems.push(format!("no cause for {field}; causes: {causes:?}"));
            }
            if !message.contains(&format!("- {field}: ")) {
                problems.push(format!("message does not list {field}: {message}"));
            }
        }
        // 422 without a reason: kubectl then prints the whole message (see deny_invalid).
        if !case.fields.is_empty()
            && (response["status"]["code"] != 422 || response["status"].get("reason").is_some())
        {
            problems.push(format!(
                "status {}, expected code 422 without a reason",
                response["status"]
            ));
        }
        let warnings: Vec<&str> = response["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let warnings_match = warnings.len() == case.warnings.len()
            && warnings
                .iter()
                .zip(case.warnings)
                .all(|(got, want)| got.contains(want));
        if !warnings_match {
            problems.push(format!(
                "warnings {warnings:?}, expected {:?}",
                case.warnings
            ));
        }
        if !problems.is_empty() {
            failures.push(format!("{}:\n  {}", case.fixture, problems.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_fixture_file_has_a_case() {
    let mut files = BTreeSet::new();
    for dir in ["allow", "deny"] {
        for entry in std::fs::read_dir(fixtures_dir().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            files.insert(format!("{dir}/{}", name.trim_end_matches(".json")));
        }
    }
    let cased: BTreeSet<String> = CASES.iter().map(|c| c.fixture.to_owned()).collect();
    assert_eq!(files, cased);
}

#[test]
fn demo_fixture_is_the_demo_example() {
    let text = std::fs::read_to_string(examples_dir().join("demo.yaml")).unwrap();
    let example: Value = serde_yaml::from_str(&text).unwrap();
    let body = std::fs::read(fixtures_dir().join("allow/demo-create.json")).unwrap();
    let fixture: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(fixture["request"]["object"], example);
}

fn patch_of(fixture: &str) -> Option<Value> {
    let (json, _) = run(fixture, MutatePolicy);
    let patch = json["response"].get("patch")?;
    assert_eq!(json["response"]["patchType"], "JSONPatch");
    // kube-core writes the bytes as a JSON array of numbers, which the API server's decoder
    // reads into its []byte as readily as the base64 string Go itself would write.
    let bytes: Vec<u8> = serde_json::from_value(patch.clone()).unwrap();
    Some(serde_json::from_slice(&bytes).unwrap())
}

#[test]
fn policy_mutation_patches_in_exactly_the_missing_defaults() {
    let mut patch = patch_of("allow/policy-defaults").unwrap();
    let ops = patch.as_array_mut().unwrap();
    ops.sort_by_key(|op| op["path"].as_str().unwrap().to_owned());
    assert_eq!(
        patch,
        json!([
            {"op": "add", "path": "/spec/compartments/0/strategy/exponential/batchThreshold", "value": 100},
            {"op": "add", "path": "/spec/compartments/0/strategy/exponential/growthFactor", "value": 2},
            {"op": "add", "path": "/spec/compartments/0/strategy/exponential/initialBatch", "value": 1},
            {"op": "add", "path": "/spec/compartments/0/strategy/exponential/safetyLimit", "value": 50},
            {"op": "add", "path": "/spec/default/strategy/linear/batchThreshold", "value": 100},
            {"op": "add", "path": "/spec/default/strategy/linear/initialBatch", "value": 1},
            {"op": "add", "path": "/spec/default/strategy/linear/safetyLimit", "value": 50},
        ])
    );
    let mut object = request_object("allow/policy-defaults");
    let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(object["spec"]["default"]["strategy"]["linear"]["delta"], 3);
    assert!(object["spec"]["default"]["strategy"]["linear"]["failureThreshold"].is_null());
}

#[test]
fn a_policy_with_every_default_written_gets_no_patch() {
    assert_eq!(patch_of("allow/policy-defaults-complete"), None);
}

#[test]
fn skyhook_mutation_never_patches() {
    let (json, _) = run("allow/skyhook-mutate-noop", MutateSkyhook);
    assert!(json["response"].get("patch").is_none());
}

fn request_object(fixture: &str) -> Value {
    let body = std::fs::read(fixtures_dir().join(format!("{fixture}.json"))).unwrap();
    let review: Value = serde_json::from_slice(&body).unwrap();
    review["request"]["object"].clone()
}
