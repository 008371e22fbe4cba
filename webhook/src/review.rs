//! From request body to response body (pure). The body is parsed here rather than by the HTTP
//! framework so that anything malformed becomes a denial with a reason: an HTTP error would
//! count as a webhook failure at the API server, and with `failurePolicy: Fail` the user would
//! see a useless "failed calling webhook" instead.

use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::response::StatusSummary;
use kube::core::{DynamicObject, TypeMeta};
use serde_json::Value;

use crate::admit::{admit, operation_name};
use crate::endpoint::Endpoint;
use crate::lookups::Lookups;

/// The only AdmissionReview version served; webhook configurations must list it in
/// `admissionReviewVersions`.
pub const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";
const REVIEW_KIND: &str = "AdmissionReview";

/// How a review ended, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Admitted (possibly with a patch or warnings).
    Allowed,
    /// A well-formed request that was refused.
    Denied,
    /// The body was not a usable AdmissionReview.
    Malformed,
}

impl Verdict {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Denied => "denied",
            Verdict::Malformed => "malformed",
        }
    }
}

/// The outcome of one review.
#[derive(Debug)]
pub struct Reviewed {
    /// The AdmissionReview to send back (always with a response, always status 200).
    pub review: AdmissionReview<DynamicObject>,
    /// The request's operation (`CREATE`, ...), or `unknown` when the body did not say.
    pub operation: &'static str,
    /// How it ended.
    pub verdict: Verdict,
    /// The object's name, empty when unknown.
    pub name: String,
}

impl Reviewed {
    /// The response body.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising plain strings, maps and byte vectors cannot fail; fall back to a
        // hand-written denial rather than panic should that ever change.
        serde_json::to_vec(&self.review).unwrap_or_else(|err| {
            let message = serde_json::to_string(&format!("failed to encode the response: {err}"))
                .unwrap_or_else(|_| "\"failed to encode the response\"".to_owned());
            format!(
                r#"{{"apiVersion":"{REVIEW_API_VERSION}","kind":"{REVIEW_KIND}","response":{{"uid":"","allowed":false,"status":{{"status":"Failure","code":500,"message":{message}}}}}}}"#
            )
            .into_bytes()
        })
    }

    /// The denial message, when denied.
    pub fn denial_message(&self) -> Option<&str> {
        self.review
            .response
            .as_ref()
            .filter(|r| !r.allowed)
            .map(|r| r.result.message.as_str())
    }
}

/// Parses `body` as an `admission.k8s.io/v1` AdmissionReview and decides it.
pub fn review(endpoint: Endpoint, body: &[u8], lookups: &dyn Lookups) -> Reviewed {
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(err) => return malformed("", format!("the request body is not JSON: {err}")),
    };
    let uid = value
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if let Err(reason) = check_envelope(&value) {
        return malformed(&uid, reason);
    }
    let parsed: AdmissionReview<DynamicObject> = match serde_json::from_value(value) {
        Ok(parsed) => parsed,
        Err(err) => {
            return malformed(
                &uid,
                format!("the AdmissionReview request is malformed: {err}"),
            );
        }
    };
    let request: AdmissionRequest<DynamicObject> = match parsed.try_into() {
        Ok(request) => request,
        Err(_) => return malformed(&uid, "the AdmissionReview has no request".to_owned()),
    };
    let response = admit(endpoint, &request, lookups);
    let verdict = if response.allowed {
        Verdict::Allowed
    } else {
        Verdict::Denied
    };
    Reviewed {
        review: into_review(response),
        operation: operation_name(&request.operation),
        verdict,
        name: request.name,
    }
}

fn check_envelope(value: &Value) -> Result<(), String> {
    let Some(object) = value.as_object() else {
        return Err(format!(
            "the request body is JSON but not an object (got {}); expected an {REVIEW_API_VERSION} {REVIEW_KIND}",
            json_type(value)
        ));
    };
    let api_version = object.get("apiVersion").and_then(Value::as_str);
    if api_version != Some(REVIEW_API_VERSION) {
        return Err(format!(
            "unsupported AdmissionReview apiVersion {api_version:?}: only {REVIEW_API_VERSION} is served; set admissionReviewVersions: [v1] in the webhook configuration"
        ));
    }
    let kind = object.get("kind").and_then(Value::as_str);
    if kind != Some(REVIEW_KIND) {
        return Err(format!(
            "the request body has kind {kind:?}, expected {REVIEW_KIND}"
        ));
    }
    match object.get("request") {
        None | Some(Value::Null) => Err("the AdmissionReview has no request".to_owned()),
        Some(Value::Object(_)) => Ok(()),
        Some(other) => Err(format!(
            "the AdmissionReview request is {}, expected an object",
            json_type(other)
        )),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A denial of a request that could not be read as an AdmissionReview.
pub fn malformed(uid: &str, reason: String) -> Reviewed {
    let mut response = AdmissionResponse::invalid(reason);
    response.uid = uid.to_owned();
    response.result.status = Some(StatusSummary::Failure);
    response.result.code = 400;
    response.result.reason = "BadRequest".to_owned();
    Reviewed {
        review: into_review(response),
        operation: "unknown",
        verdict: Verdict::Malformed,
        name: String::new(),
    }
}

fn into_review(mut response: AdmissionResponse) -> AdmissionReview<DynamicObject> {
    response.types = TypeMeta {
        api_version: REVIEW_API_VERSION.to_owned(),
        kind: REVIEW_KIND.to_owned(),
    };
    response.into_review()
}
