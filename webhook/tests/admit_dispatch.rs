//! Dispatch cases that fixtures cannot express: caches not yet synced, objects being deleted,
//! operations that need no decision, and the path table.
// Test helpers fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use serde_json::{Value, json};
use skyhook_api::generation::Group;
use skyhook_api::v1alpha1::Skyhook;
use skyhook_api::validate::PolicyReference;
use webhook::endpoint::Endpoint;
use webhook::lookups::{ExistingObjects, Lookups};
use webhook::review::review;

/// Caches that have not completed their first list.
struct NotSynced;

impl Lookups for NotSynced {
    fn policy_names(&self, _: Group) -> Option<BTreeSet<String>> {
        None
    }
    fn policy_references(&self, _: Group) -> Option<Vec<PolicyReference>> {
        None
    }
}

fn body(kind: &str, operation: &str, object: Value, old: Value) -> Vec<u8> {
    group_body("skyhook.nvidia.com", kind, operation, object, old)
}

fn group_body(group: &str, kind: &str, operation: &str, object: Value, old: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "dispatch",
            "kind": {"group": group, "version": "v1alpha1", "kind": kind},
            "resource": {"group": group, "version": "v1alpha1", "resource": "x"},
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
    check(cases);
}

fn check(cases: Vec<Case<'_>>) {
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

/// The status the controller writes on an object whose twin owns its name.
fn migrated() -> Value {
    json!({"conditions": [{"type": "Migrated", "status": "True", "reason": "OwnedByTwin", "message": "", "lastTransitionTime": "2026-12-01T10:00:00Z"}]})
}

/// A Skyhook at version 1.0.0 whose NodeWright twin owns its name.
fn inert_skyhook(metadata: Value) -> Value {
    let mut object = skyhook(package("1.0.0"), metadata);
    object["status"] = migrated();
    object
}

fn nodewright(spec: Value) -> Value {
    json!({"apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "NodeWright", "metadata": {"name": "subject"}, "spec": spec})
}

fn nodewright_body(kind: &str, operation: &str, object: Value, old: Value) -> Vec<u8> {
    group_body("nodewright.nvidia.com", kind, operation, object, old)
}

/// NodeWrights follow upstream v0.20's rules in upstream's words, and look up DeploymentPolicies
/// of their own group; the seeds' inline tags stay accepted on a Skyhook.
#[test]
fn nodewright_dispatch_table() {
    let image = |image: &str| json!({"packages": {"tuning": {"version": "1.0.0", "image": image}}});
    let bare = image("ghcr.io/nvidia/skyhook-packages/shellscript");
    let tagged = image("ghcr.io/nvidia/skyhook-packages/shellscript:1.0.0");
    let digested = image(
        "ghcr.io/nvidia/skyhook-packages/shellscript@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    );
    let named_policy = json!({"deploymentPolicy": "ramp", "packages": package("1.0.0")});
    let policy = json!({"apiVersion": "nodewright.nvidia.com/v1alpha1", "kind": "DeploymentPolicy", "metadata": {"name": "ramp"}, "spec": {"default": {"budget": {"count": 1}, "strategy": {"fixed": {}}}}});
    let user: Skyhook = serde_json::from_value(
        json!({"metadata": {"name": "user"}, "spec": {"deploymentPolicy": "subject"}}),
    )
    .unwrap();
    // "ramp" exists in the skyhook group only, or in the nodewright group, where the NodeWright
    // "user" names the policy "subject" (the request's name).
    let skyhook_group_only = ExistingObjects {
        policy_names: BTreeSet::from(["ramp".to_owned()]),
        ..ExistingObjects::default()
    };
    let nodewright_group = ExistingObjects {
        nodewright_policy_names: BTreeSet::from(["ramp".to_owned()]),
        nodewrights: vec![user],
        ..ExistingObjects::default()
    };
    let twin: Skyhook =
        serde_json::from_value(json!({"metadata": {"name": "subject"}, "spec": {}})).unwrap();
    let skyhook_twin = ExistingObjects {
        skyhooks: vec![twin.clone()],
        ..ExistingObjects::default()
    };
    let nodewright_twin = ExistingObjects {
        nodewrights: vec![twin],
        ..ExistingObjects::default()
    };
    let cases: Vec<Case<'_>> = vec![
        (
            "a NodeWright named like an existing Skyhook is accepted: it takes the name over",
            Endpoint::ValidateNodeWright,
            nodewright_body(
                "NodeWright",
                "CREATE",
                nodewright(bare.clone()),
                Value::Null,
            ),
            &skyhook_twin,
            true,
            "",
        ),
        (
            "and the other way round",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "CREATE",
                skyhook(package("1.0.0"), json!({"name": "subject"})),
                Value::Null,
            ),
            &nodewright_twin,
            true,
            "",
        ),
        (
            "an inert Skyhook's spec is read-only, in upstream's words",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "UPDATE",
                skyhook(package("2.0.0"), json!({"name": "subject"})),
                inert_skyhook(json!({"name": "subject"})),
            ),
            &nodewright_twin,
            false,
            "skyhook.nvidia.com Skyhook \"subject\" is migrated to NodeWright and is read-only; edit NodeWright \"subject\" instead (e.g. kubectl nodewright pause/disable/... or its spec)",
        ),
        (
            "so is its pause annotation",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "UPDATE",
                skyhook(
                    package("1.0.0"),
                    json!({"name": "subject", "annotations": {"skyhook.nvidia.com/pause": "true"}}),
                ),
                inert_skyhook(json!({"name": "subject"})),
            ),
            &nodewright_twin,
            false,
            "is read-only",
        ),
        (
            "a re-apply of the same spec with new labels goes through",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "UPDATE",
                skyhook(
                    package("1.0.0"),
                    json!({"name": "subject", "labels": {"team": "a"}}),
                ),
                inert_skyhook(json!({"name": "subject"})),
            ),
            &nodewright_twin,
            true,
            "",
        ),
        (
            "an inert Skyhook being deleted may be written",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "UPDATE",
                skyhook(
                    package("2.0.0"),
                    json!({"name": "subject", "deletionTimestamp": "2026-12-01T10:00:00Z"}),
                ),
                inert_skyhook(json!({"name": "subject"})),
            ),
            &nodewright_twin,
            true,
            "",
        ),
        (
            "a live Skyhook with a NodeWright waiting for it stays writable",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "UPDATE",
                skyhook(package("2.0.0"), json!({"name": "subject"})),
                skyhook(package("1.0.0"), json!({"name": "subject"})),
            ),
            &nodewright_twin,
            true,
            "",
        ),
        (
            "an inert NodeWright is read-only the other way round",
            Endpoint::ValidateNodeWright,
            nodewright_body(
                "NodeWright",
                "UPDATE",
                nodewright(image("ghcr.io/nvidia/skyhook-packages/other")),
                {
                    let mut old = nodewright(bare.clone());
                    old["status"] = migrated();
                    old
                },
            ),
            &skyhook_twin,
            false,
            "nodewright.nvidia.com NodeWright \"subject\" is migrated to Skyhook and is read-only; edit Skyhook \"subject\" instead (e.g. kubectl skyhook pause/disable/... or its spec)",
        ),
        (
            "a bare image is accepted",
            Endpoint::ValidateNodeWright,
            nodewright_body("NodeWright", "CREATE", nodewright(bare), Value::Null),
            &skyhook_group_only,
            true,
            "",
        ),
        (
            "an inline tag is refused, in upstream's words",
            Endpoint::ValidateNodeWright,
            nodewright_body(
                "NodeWright",
                "CREATE",
                nodewright(tagged.clone()),
                Value::Null,
            ),
            &skyhook_group_only,
            false,
            "validating NodeWright \"subject\": 1 problem found:\n- spec.packages.tuning.image: error package tuning's image 'ghcr.io/nvidia/skyhook-packages/shellscript:1.0.0' contains an inline tag '1.0.0'. Do not embed a tag in the image; the package version supplies the tag",
        ),
        (
            "an inline digest is refused",
            Endpoint::ValidateNodeWright,
            nodewright_body("NodeWright", "UPDATE", nodewright(digested), Value::Null),
            &skyhook_group_only,
            false,
            "contains an inline digest. Do not embed a digest in the image; pin the image bytes using the package's containerSHA field instead",
        ),
        (
            "the seeds' inline tag stays accepted on a Skyhook",
            Endpoint::ValidateSkyhook,
            body(
                "Skyhook",
                "CREATE",
                skyhook(tagged, json!({"name": "subject"})),
                Value::Null,
            ),
            &skyhook_group_only,
            true,
            "",
        ),
        (
            "a NodeWright's policy is looked up in the nodewright group",
            Endpoint::ValidateNodeWright,
            nodewright_body(
                "NodeWright",
                "CREATE",
                nodewright(named_policy.clone()),
                Value::Null,
            ),
            &skyhook_group_only,
            false,
            "deploymentPolicy \"ramp\" not found",
        ),
        (
            "and found there",
            Endpoint::ValidateNodeWright,
            nodewright_body(
                "NodeWright",
                "CREATE",
                nodewright(named_policy),
                Value::Null,
            ),
            &nodewright_group,
            true,
            "",
        ),
        (
            "a nodewright policy a NodeWright names cannot be deleted",
            Endpoint::ValidateNodeWrightPolicy,
            nodewright_body("DeploymentPolicy", "DELETE", Value::Null, policy.clone()),
            &nodewright_group,
            false,
            "user",
        ),
        (
            "a skyhook-group reference does not hold a nodewright policy",
            Endpoint::ValidateNodeWrightPolicy,
            nodewright_body("DeploymentPolicy", "DELETE", Value::Null, policy.clone()),
            &skyhook_group_only,
            true,
            "",
        ),
        (
            "a nodewright policy is validated like any",
            Endpoint::ValidateNodeWrightPolicy,
            nodewright_body("DeploymentPolicy", "CREATE", policy, Value::Null),
            &skyhook_group_only,
            true,
            "",
        ),
        (
            "a Skyhook sent to the NodeWright path is refused",
            Endpoint::ValidateNodeWright,
            body(
                "Skyhook",
                "CREATE",
                skyhook(json!({}), json!({"name": "subject"})),
                Value::Null,
            ),
            &skyhook_group_only,
            false,
            "admits nodewright.nvidia.com/NodeWright",
        ),
    ];
    check(cases);
}
