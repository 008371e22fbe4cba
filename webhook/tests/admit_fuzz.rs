//! Arbitrary bodies never panic the review path and always come back as a well-formed
//! AdmissionReview response; anything that is not a usable request is denied with a reason.
// Test helpers fail loudly on broken fixtures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::{Value, json};
use webhook::endpoint::Endpoint;
use webhook::lookups::ExistingObjects;
use webhook::review::{Verdict, review};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-zA-Z0-9./:*-]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("Skyhook"),
            Just("CREATE"),
            Just("UPDATE"),
            Just("DELETE"),
            Just("admission.k8s.io/v1"),
            Just("AdmissionReview"),
            Just("skyhook.nvidia.com"),
            Just("1.0.0"),
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-zA-Z]{1,8}",
                    Just("spec".to_owned()),
                    Just("packages".to_owned()),
                    Just("version".to_owned()),
                    Just("resources".to_owned()),
                    Just("dependsOn".to_owned()),
                    Just("deploymentPolicy".to_owned()),
                    Just("interruptionBudget".to_owned()),
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_endpoint() -> impl Strategy<Value = Endpoint> {
    prop::sample::select(Endpoint::ALL.to_vec())
}

/// A well-formed review around an arbitrary object (and operation), reaching the rules.
fn arb_review() -> impl Strategy<Value = Value> {
    (
        arb_json(),
        prop::sample::select(vec!["CREATE", "UPDATE", "DELETE", "CONNECT"]),
        prop::sample::select(vec!["Skyhook", "DeploymentPolicy"]),
    )
        .prop_map(|(spec, operation, kind)| {
            json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "fuzz-uid",
                    "kind": {"group": "skyhook.nvidia.com", "version": "v1alpha1", "kind": kind},
                    "resource": {"group": "skyhook.nvidia.com", "version": "v1alpha1", "resource": "x"},
                    "name": "fuzz",
                    "operation": operation,
                    "userInfo": {},
                    "object": {"apiVersion": "skyhook.nvidia.com/v1alpha1", "kind": kind, "metadata": {"name": "fuzz"}, "spec": spec},
                }
            })
        })
}

fn assert_well_formed(endpoint: Endpoint, body: &[u8]) -> Value {
    let reviewed = review(endpoint, body, &ExistingObjects::default());
    let json: Value = serde_json::from_slice(&reviewed.to_json()).expect("response is JSON");
    assert_eq!(json["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(json["kind"], "AdmissionReview");
    let response = &json["response"];
    assert!(response["uid"].is_string());
    assert!(response["allowed"].is_boolean());
    if response["allowed"] == false {
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "denial without a reason: {json}");
        assert_eq!(response["status"]["status"], "Failure");
    }
    assert_eq!(
        reviewed.verdict == Verdict::Allowed,
        response["allowed"] == true
    );
    json
}

proptest! {
    #[test]
    fn arbitrary_bytes_are_denied_with_a_reason(endpoint in arb_endpoint(), body in prop::collection::vec(any::<u8>(), 0..256)) {
        let json = assert_well_formed(endpoint, &body);
        // Random bytes are almost never an AdmissionReview; whatever they are, no panic.
        if serde_json::from_slice::<Value>(&body).is_err() {
            prop_assert_eq!(&json["response"]["allowed"], &Value::Bool(false));
        }
    }

    #[test]
    fn arbitrary_json_bodies_are_denied_with_a_reason(endpoint in arb_endpoint(), body in arb_json()) {
        let json = assert_well_formed(endpoint, &serde_json::to_vec(&body).unwrap());
        prop_assert_eq!(&json["response"]["allowed"], &Value::Bool(false));
    }

    #[test]
    fn arbitrary_objects_in_real_reviews_get_an_answer(endpoint in arb_endpoint(), body in arb_review()) {
        let json = assert_well_formed(endpoint, &serde_json::to_vec(&body).unwrap());
        prop_assert_eq!(&json["response"]["uid"], "fuzz-uid");
    }
}
