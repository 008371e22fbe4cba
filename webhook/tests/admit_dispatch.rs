//! Dispatch cases that fixtures cannot express: caches not yet synced, objects being deleted,
//! operations that need no decision, and the path table.
// Test helpers fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use serde_json::{Value, json};
use skyhook_api::validate::PolicyReference;
use webhook::endpoint::Endpoint;
use webhook::lookups::{ExistingObjects, Lookups};
use webhook::review::review;

/// Caches that have not completed their first list.
struct NotSynced;

impl Lookups for NotSynced {
    fn policy_names(&self) -> Option<BTreeSet<String>> {
        None
    }
    fn policy_references(&self) -> Option<Vec<PolicyReference>> {
        None
    }
}

fn body(kind: &str, operation: &str, object: Value, old: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "dispatch",
            "kind": {"group": "skyhook.nvidia.com", "version": "v1alpha1", "kind": kind},
            "resource": {"group": "skyhook.nvidia.com", "version": "v1alpha1", "resource": "x"},
            "name": "subject",
            "operation": operation,
            "userInfo": {},
            "object": object,
            "oldObject": old,
        }
    }))
    .unwrap()
}

fn skyhook(spec: Value, metadata: Value) -> Value {
    json!({"apiVersion": "skyhook.nvidia.com/v1alpha1", "kind": "Skyhook", "metadata": metadata, "spec": spec})
}

fn package(version: &str) -> Value {
    json!({"tuning": {"version": version, "image": "ghcr.io/nvidia/skyhook-packages/shellscript"}})
}

/// (case, endpoint, body, lookups, allowed, fragment of the message)
type Case<'a> = (&'a str, Endpoint, Vec<u8>, &'a dyn Lookups, bool, &'a str);

#[test]
fn dispatch_table() {
    let valid = json!({"packages": package("1.0.0")});
    let invalid = json!({"packages": package("bogus")});
    let with_policy = json!({"deploymentPolicy": "ramp", "packages": package("1.0.0")});
    let named = json!({"name": "subject"});
    let deleting = json!({"name": "subject", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["skyhook.nvidia.com/cleanup"]});
    let policy = json!({"apiVersion": "skyhook.nvidia.com/v1alpha1", "kind": "DeploymentPolicy", "metadata": {"name": "subject"}, "spec": {"default": {"budget": {"count": 1}, "strategy": {"fixed": {}}}}});
    let not_synced: &dyn Lookups = &NotSynced;
    let empty: &dyn Lookups = &ExistingObjects::default();
    let cases: Vec<Case<'_>> = vec![
        (
            "a policy reference cannot be checked before the cache syncs",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "CREATE",
                skyhook(with_policy.clone(), named.clone()),
                Value::Null,
            ),
            not_synced,
            false,
            "retry",
        ),
        (
            "without a policy reference the cache is not needed",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "CREATE",
                skyhook(valid.clone(), named.clone()),
                Value::Null,
            ),
            not_synced,
            true,
            "",
        ),
        (
            "policy delete waits for the skyhook cache",
            Endpoint::ValidatePolicy,
            body("DeploymentPolicy", "DELETE", Value::Null, policy.clone()),
            not_synced,
            false,
            "retry",
        ),
        (
            "a skyhook being deleted may drop its finalizer despite an invalid spec",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "UPDATE",
                skyhook(invalid.clone(), deleting),
                skyhook(invalid.clone(), named.clone()),
            ),
            empty,
            true,
            "",
        ),
        (
            "a metadata-only update of an object that no longer decodes is allowed",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "UPDATE",
                skyhook(json!({"packages": ["not", "a", "map"]}), named.clone()),
                skyhook(json!({"packages": ["not", "a", "map"]}), named.clone()),
            ),
            empty,
            true,
            "",
        ),
        (
            "a spec change to an invalid spec is refused",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "UPDATE",
                skyhook(invalid.clone(), named.clone()),
                skyhook(valid.clone(), named.clone()),
            ),
            empty,
            false,
            "spec.packages.tuning.version",
        ),
        (
            "an update without the old object is validated",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "UPDATE",
                skyhook(invalid.clone(), named.clone()),
                Value::Null,
            ),
            empty,
            false,
            "spec.packages.tuning.version",
        ),
        (
            "a create without an object is refused with a reason",
            Endpoint::ValidateSkyhook,
            body("Skyhook", "CREATE", Value::Null, Value::Null),
            empty,
            false,
            "carries no object",
        ),
        (
            "CONNECT needs no decision",
            Endpoint::ValidateSkyhook,
            body("Skyhook", "CONNECT", Value::Null, Value::Null),
            empty,
            true,
            "",
        ),
        (
            "a policy sent to the skyhook path is refused",
            Endpoint::ValidateSkyhook,
            body("DeploymentPolicy", "CREATE", policy.clone(), Value::Null),
            empty,
            false,
            "admits skyhook.nvidia.com/Skyhook",
        ),
        (
            "the metadata name is validated too",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "CREATE",
                skyhook(valid, json!({"name": "Not_A_Label"})),
                Value::Null,
            ),
            empty,
            false,
            "metadata.name",
        ),
    ];
    let mut failures = Vec::new();
    for (name, endpoint, body, lookups, allowed, fragment) in cases {
        let reviewed = review(endpoint, &body, lookups);
        let response: Value = serde_json::from_slice(&reviewed.to_json()).unwrap();
        let response = &response["response"];
        let message = response["status"]["message"].as_str().unwrap_or_default();
        if response["allowed"] != allowed
            || !message.contains(fragment)
            || response["uid"] != "dispatch"
        {
            failures.push(format!("{name}: {response}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_endpoint_is_found_by_its_path() {
    for endpoint in Endpoint::ALL {
        assert_eq!(Endpoint::from_path(endpoint.path()), Some(endpoint));
    }
    assert_eq!(Endpoint::from_path("/validate"), None);
}
