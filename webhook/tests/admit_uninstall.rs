//! The explicit uninstall rules (#14) through the pure review path: the base rule on CREATE and
//! UPDATE, the update rules that read the old object's status, and the cancel warning.
// Test helpers fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use webhook::endpoint::Endpoint;
use webhook::lookups::ExistingObjects;
use webhook::review::review;

const APPLY_NEEDS_ENABLED: &str =
    "package \"tuning\": uninstall.apply requires uninstall.enabled to be true";
const REMOVE_BLOCKED: &str = "package \"tuning\" has uninstall.enabled=true; set uninstall.apply=true and wait for completion before removing from spec";
const DOWNGRADE_NEEDS_APPLY: &str = "package \"tuning\": downgrade not allowed — set uninstall.apply=true first, wait for uninstall to complete, then change version";
const DOWNGRADE_NOT_DONE: &str = "package \"tuning\": downgrade not allowed — uninstall has not yet completed on all nodes. Wait for the uninstall to finish, then change version";
const CANCELLED: &str = "package \"tuning\": uninstall cancelled — nodes where uninstall completed will need to re-install";

fn body(operation: &str, object: &Value, old: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uninstall",
            "kind": {"group": "skyhook.nvidia.com", "version": "v1alpha1", "kind": "Skyhook"},
            "resource": {"group": "skyhook.nvidia.com", "version": "v1alpha1", "resource": "skyhooks"},
            "name": "demo",
            "operation": operation,
            "userInfo": {},
            "object": object,
            "oldObject": old,
        }
    }))
    .unwrap()
}

/// A Skyhook `demo` with `packages`, whose status tracks `node_state` (node to entries).
fn skyhook(packages: Value, node_state: Value) -> Value {
    json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "Skyhook",
        "metadata": {"name": "demo"},
        "spec": {"packages": packages},
        "status": {"nodeState": node_state},
    })
}

/// The package `tuning` at `version` with `uninstall: {enabled, apply}`.
fn tuning(version: &str, enabled: bool, apply: bool) -> Value {
    json!({"tuning": {
        "version": version,
        "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
        "uninstall": {"enabled": enabled, "apply": apply},
    }})
}

/// A node state in which `node-a` holds `tuning|<version>`.
fn held(version: &str) -> Value {
    json!({"node-a": {format!("tuning|{version}"): {
        "name": "tuning", "version": version, "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
        "stage": "apply", "state": "complete",
    }}})
}

struct Case {
    name: &'static str,
    operation: &'static str,
    object: Value,
    old: Value,
    allowed: bool,
    /// Fragments the denial message must contain.
    message: &'static [&'static str],
    /// Fields the denial's causes must name, in order.
    fields: &'static [&'static str],
    /// The warnings that must end each warning, in order.
    warnings: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    let none = json!({});
    let allowed = |name, operation, object, old| Case {
        name,
        operation,
        object,
        old,
        allowed: true,
        message: &[],
        fields: &[],
        warnings: &[],
    };
    let mut deleting = skyhook(json!({}), held("2.0.0"));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    vec![
        Case {
            allowed: false,
            message: &[APPLY_NEEDS_ENABLED],
            fields: &["spec.packages.tuning.uninstall.apply"],
            ..allowed(
                "create: apply without enabled",
                "CREATE",
                skyhook(tuning("1.0.0", false, true), none.clone()),
                Value::Null,
            )
        },
        Case {
            allowed: false,
            message: &[APPLY_NEEDS_ENABLED],
            fields: &["spec.packages.tuning.uninstall.apply"],
            ..allowed(
                "update: apply without enabled",
                "UPDATE",
                skyhook(tuning("1.0.0", false, true), none.clone()),
                skyhook(tuning("1.0.0", false, false), none.clone()),
            )
        },
        allowed(
            "create: apply with enabled",
            "CREATE",
            skyhook(tuning("1.0.0", true, true), none.clone()),
            Value::Null,
        ),
        Case {
            allowed: false,
            message: &[REMOVE_BLOCKED, "tuning|2.0.0 is still on node-a"],
            fields: &["spec.packages.tuning"],
            ..allowed(
                "removing an enabled package a node holds",
                "UPDATE",
                skyhook(json!({}), held("2.0.0")),
                skyhook(tuning("2.0.0", true, false), held("2.0.0")),
            )
        },
        allowed(
            "removing an enabled package no node holds",
            "UPDATE",
            skyhook(json!({}), none.clone()),
            skyhook(tuning("2.0.0", true, true), held("1.0.0")),
        ),
        allowed(
            "removing a disabled package a node holds",
            "UPDATE",
            skyhook(json!({}), held("2.0.0")),
            skyhook(tuning("2.0.0", false, false), held("2.0.0")),
        ),
        Case {
            allowed: false,
            message: &[DOWNGRADE_NEEDS_APPLY],
            fields: &["spec.packages.tuning.version"],
            ..allowed(
                "downgrade without apply",
                "UPDATE",
                skyhook(tuning("1.0.0", true, false), none.clone()),
                skyhook(tuning("2.0.0", true, false), none.clone()),
            )
        },
        Case {
            allowed: false,
            message: &[DOWNGRADE_NOT_DONE],
            fields: &["spec.packages.tuning.version"],
            ..allowed(
                "downgrade before the uninstall finished",
                "UPDATE",
                skyhook(tuning("1.0.0", true, true), held("2.0.0")),
                skyhook(tuning("2.0.0", true, true), held("2.0.0")),
            )
        },
        allowed(
            "downgrade once uninstalled",
            "UPDATE",
            skyhook(tuning("1.0.0", true, true), none.clone()),
            skyhook(tuning("2.0.0", true, true), held("1.0.0")),
        ),
        allowed(
            "upgrade",
            "UPDATE",
            skyhook(tuning("3.0.0", true, false), held("2.0.0")),
            skyhook(tuning("2.0.0", true, false), held("2.0.0")),
        ),
        Case {
            warnings: &[CANCELLED],
            ..allowed(
                "cancelling a requested uninstall warns",
                "UPDATE",
                skyhook(tuning("2.0.0", true, false), held("2.0.0")),
                skyhook(tuning("2.0.0", true, true), held("2.0.0")),
            )
        },
        Case {
            allowed: false,
            message: &[
                APPLY_NEEDS_ENABLED,
                "package \"other\" has uninstall.enabled=true",
            ],
            fields: &[
                "spec.packages.other",
                "spec.packages.tuning.uninstall.apply",
            ],
            warnings: &[CANCELLED],
            ..allowed(
                "base and update violations are refused together, with the warning",
                "UPDATE",
                skyhook(
                    json!({"tuning": tuning("2.0.0", false, true)["tuning"]}),
                    none.clone(),
                ),
                skyhook(
                    json!({"tuning": tuning("2.0.0", true, true)["tuning"], "other": tuning("1.0.0", true, false)["tuning"]}),
                    json!({"node-b": {"other|1.0.0": {"name": "other", "version": "1.0.0", "image": "i", "stage": "config", "state": "erroring"}}}),
                ),
            )
        },
        allowed(
            "an object being deleted may drop an enabled package",
            "UPDATE",
            deleting,
            skyhook(tuning("2.0.0", true, false), held("2.0.0")),
        ),
        allowed(
            "an update without the old object gets the base rules only",
            "UPDATE",
            skyhook(json!({}), none.clone()),
            Value::Null,
        ),
        Case {
            warnings: &["were not checked"],
            ..allowed(
                "an unreadable old object is reported, not refused",
                "UPDATE",
                skyhook(json!({}), none.clone()),
                skyhook(json!({"tuning": {"version": 7}}), none.clone()),
            )
        },
    ]
}

#[test]
fn uninstall_admission_table() {
    let lookups = ExistingObjects::default();
    let mut failures = Vec::new();
    for case in cases() {
        let reviewed = review(
            Endpoint::ValidateSkyhook,
            &body(case.operation, &case.object, &case.old),
            &lookups,
        );
        let response: Value = serde_json::from_slice(&reviewed.to_json()).unwrap();
        let response = &response["response"];
        let message = response["status"]["message"].as_str().unwrap_or_default();
        let fields: Vec<&str> = response["status"]["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|cause| cause["field"].as_str())
            .collect();
        let warnings: Vec<&str> = response["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let warned = warnings.len() == case.warnings.len()
            && warnings
                .iter()
                .zip(case.warnings)
                .all(|(got, want)| got.ends_with(want));
        if response["allowed"] != case.allowed
            || !case.message.iter().all(|m| message.contains(m))
            || fields != case.fields
            || !warned
        {
            failures.push(format!("{}: {response}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
