//! The admission decision (pure): one AdmissionRequest and the cluster's [`Lookups`] in, one
//! AdmissionResponse out. Every rule comes from `skyhook_api::validate`; this module only
//! dispatches on the endpoint, kind and operation and shapes the answer so `kubectl apply`
//! prints every violation with its field.

use std::collections::BTreeSet;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::response::{StatusCause, StatusDetails, StatusSummary};
use serde::de::DeserializeOwned;
use skyhook_api::generation::Group;
use skyhook_api::keys;
use skyhook_api::nodewright_v1alpha1::{DeploymentPolicy as NodeWrightPolicy, NodeWright};
use skyhook_api::v1alpha1::{DeploymentPolicy, DeploymentPolicySpec, Skyhook};
use skyhook_api::validate::{
    UpdateVerdict, ValidationContext, Violation, Violations, default_policy,
    group_admission_warnings, policy_delete_blockers, policy_delete_message, skyhook_update,
    validate_policy, validate_skyhook,
};

use crate::endpoint::{Endpoint, Role};
use crate::lookups::Lookups;

/// Decides one admission request sent to `endpoint`.
pub fn admit(
    endpoint: Endpoint,
    request: &AdmissionRequest<DynamicObject>,
    lookups: &dyn Lookups,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    let kind = &request.kind;
    let group = endpoint.group();
    if kind.group != group.keys().group || kind.kind != endpoint.kind() {
        return deny_bad_request(
            response,
            format!(
                "{} admits {}/{}, but the request is for {}/{} {:?}; check the rules of the webhook configuration",
                endpoint.path(),
                group.keys().group,
                endpoint.kind(),
                kind.group,
                kind.kind,
                request.name
            ),
        );
    }
    match (endpoint.role(), &request.operation) {
        (Role::ValidateWorkload, Operation::Create | Operation::Update) => {
            validate_workload_request(group, response, request, lookups)
        }
        (Role::ValidatePolicy | Role::MutatePolicy, Operation::Create | Operation::Update) => {
            policy_write_request(endpoint, response, request)
        }
        (Role::ValidatePolicy, Operation::Delete) => {
            protect_policy_delete(group, response, request, lookups)
        }
        // Deleting a Skyhook or a NodeWright, and mutating one, need no decision.
        _ => response,
    }
}

/// A Skyhook or NodeWright, read as the one spec type both kinds share.
fn typed_workload(
    group: Group,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<Skyhook, String> {
    match group {
        Group::Skyhook => typed_object(request),
        Group::NodeWright => typed_object::<NodeWright>(request).map(Skyhook::from),
    }
}

fn validate_workload_request(
    group: Group,
    response: AdmissionResponse,
    request: &AdmissionRequest<DynamicObject>,
    lookups: &dyn Lookups,
) -> AdmissionResponse {
    if let Some(message) = read_only_twin(group, request) {
        return deny(response, message, 403, "Forbidden");
    }
    if is_unchanged_or_deleting(request) {
        // Metadata-only updates (finalizers, annotations such as pause) and the final updates
        // of a deletion must go through even if the spec no longer validates or decodes:
        // refusing them would leave the object stuck.
        return response;
    }
    let skyhook = match typed_workload(group, request) {
        Ok(skyhook) => skyhook,
        Err(reason) => return deny_bad_request(response, reason),
    };
    let update = update_verdict(group, request, &skyhook);
    let mut warnings = group_admission_warnings(group, &skyhook.spec);
    warnings.extend(update.warnings);
    let response = with_warnings(response, warnings);
    let names_policy = skyhook.spec.policy_name().is_some();
    let known_policies: Option<BTreeSet<String>> = lookups.policy_names(group);
    if names_policy && known_policies.is_none() {
        return deny_unavailable(
            response,
            "the webhook has not loaded the DeploymentPolicies yet, so spec.deploymentPolicy cannot be checked; retry in a few seconds",
        );
    }
    let name = skyhook
        .metadata
        .name
        .as_deref()
        .unwrap_or(request.name.as_str());
    let context = ValidationContext {
        name: Some(name).filter(|n| !n.is_empty()),
        known_policies: known_policies.as_ref(),
        group,
    };
    let mut violations: Vec<Violation> = match validate_skyhook(&skyhook.spec, &context) {
        Ok(()) => Vec::new(),
        Err(violations) => violations.into_iter().collect(),
    };
    violations.extend(update.violations);
    match Violations::check(violations) {
        Ok(()) => response,
        Err(violations) => deny_invalid(response, (group, group.keys().kind), name, &violations),
    }
}

/// The refusal of an UPDATE of an inert twin, one whose name its twin of the other group owns
/// (the controller says so in its `Migrated` condition): read-only, as upstream makes a
/// migrated Skyhook, in upstream's words. An update that keeps the spec and the pause and
/// disable annotations goes through (a GitOps re-apply, a finalizer removal, labels), and so
/// does every write once it is being deleted. Other objects of a name held in both groups are
/// writable: the live one does the work, and one waiting to take the name over may be edited.
fn read_only_twin(group: Group, request: &AdmissionRequest<DynamicObject>) -> Option<String> {
    if !matches!(request.operation, Operation::Update) {
        return None;
    }
    let (Some(new), Some(old)) = (&request.object, &request.old_object) else {
        return None;
    };
    if new.metadata.deletion_timestamp.is_some() || !owned_by_twin(old) {
        return None;
    }
    let keys = group.keys();
    let annotation = |object: &DynamicObject, key: &str| {
        (object.metadata.annotations.as_ref()).and_then(|a| a.get(key).cloned())
    };
    let same_switches = [keys.pause_annotation, keys.disable_annotation]
        .into_iter()
        .all(|key| annotation(new, key) == annotation(old, key));
    if new.data.get("spec") == old.data.get("spec") && same_switches {
        return None;
    }
    let name = &request.name;
    let other = group.other();
    let plugin = other.kind().to_lowercase();
    Some(format!(
        "{} {} {name:?} is migrated to {} and is read-only; edit {} {name:?} instead (e.g. kubectl {plugin} pause/disable/... or its spec)",
        group.name(),
        group.kind(),
        other.kind(),
        other.kind(),
    ))
}

/// The object's status says its twin owns its name (condition `Migrated`, reason
/// `OwnedByTwin`).
fn owned_by_twin(object: &DynamicObject) -> bool {
    let conditions = object
        .data
        .pointer("/status/conditions")
        .and_then(|c| c.as_array());
    conditions.into_iter().flatten().any(|condition| {
        condition.get("type").and_then(|v| v.as_str()) == Some(keys::CONDITION_MIGRATED)
            && condition.get("status").and_then(|v| v.as_str()) == Some("True")
            && condition.get("reason").and_then(|v| v.as_str())
                == Some(keys::MIGRATED_REASON_OWNED_BY_TWIN)
    })
}

/// The update rules of an UPDATE that carries the old object; nothing to check otherwise. An
/// old object that no longer decodes cannot be compared, which is said in a warning rather
/// than refused: refusing would keep the user from repairing it.
fn update_verdict(
    group: Group,
    request: &AdmissionRequest<DynamicObject>,
    new: &Skyhook,
) -> UpdateVerdict {
    if !matches!(request.operation, Operation::Update) {
        return UpdateVerdict::default();
    }
    let Some(old_object) = &request.old_object else {
        return UpdateVerdict::default();
    };
    let old = match group {
        Group::Skyhook => decode::<Skyhook>(old_object),
        Group::NodeWright => decode::<NodeWright>(old_object).map(Skyhook::from),
    };
    match old {
        Ok(old) => skyhook_update(&old, new),
        Err(err) => UpdateVerdict {
            violations: Vec::new(),
            warnings: vec![format!(
                "the stored {} {:?} is not readable ({err}), so the rules for removing or downgrading packages with uninstall.enabled were not checked",
                group.keys().kind,
                request.name
            )],
        },
    }
}

/// An UPDATE whose spec did not change, or of an object already being deleted.
fn is_unchanged_or_deleting(request: &AdmissionRequest<DynamicObject>) -> bool {
    if !matches!(request.operation, Operation::Update) {
        return false;
    }
    match (&request.object, &request.old_object) {
        (Some(new), _) if new.metadata.deletion_timestamp.is_some() => true,
        (Some(new), Some(old)) => new.data.get("spec") == old.data.get("spec"),
        _ => false,
    }
}

/// A DeploymentPolicy CREATE or UPDATE: decoded once, then validated or defaulted depending on
/// the endpoint.
fn policy_write_request(
    endpoint: Endpoint,
    response: AdmissionResponse,
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    let group = endpoint.group();
    let spec = match group {
        Group::Skyhook => typed_object::<DeploymentPolicy>(request).map(|p| p.spec),
        Group::NodeWright => typed_object::<NodeWrightPolicy>(request).map(|p| p.spec),
    };
    let spec = match spec {
        Ok(spec) => spec,
        Err(reason) => return deny_bad_request(response, reason),
    };
    if endpoint.role() == Role::MutatePolicy {
        return default_policy_response(response, &request.name, &spec);
    }
    match validate_policy(&spec) {
        Ok(()) => response,
        Err(violations) => deny_invalid(
            response,
            (group, "DeploymentPolicy"),
            &request.name,
            &violations,
        ),
    }
}

fn protect_policy_delete(
    group: Group,
    response: AdmissionResponse,
    request: &AdmissionRequest<DynamicObject>,
    lookups: &dyn Lookups,
) -> AdmissionResponse {
    let Some(references) = lookups.policy_references(group) else {
        return deny_unavailable(
            response,
            &format!(
                "the webhook has not loaded the {}s yet, so it cannot tell whether this DeploymentPolicy is still used; retry in a few seconds",
                group.keys().kind
            ),
        );
    };
    let blockers = policy_delete_blockers(&request.name, &references);
    if blockers.is_empty() {
        return response;
    }
    deny(
        response,
        policy_delete_message(&request.name, &blockers),
        403,
        "Forbidden",
    )
}

/// `response` with a JSON patch filling in the defaults `spec` leaves out, if it leaves any out.
fn default_policy_response(
    response: AdmissionResponse,
    name: &str,
    spec: &DeploymentPolicySpec,
) -> AdmissionResponse {
    let defaulted = default_policy(spec);
    if &defaulted == spec {
        return response;
    }
    // Diffing the typed spec before and after defaulting yields exactly the filled-in fields;
    // every parent they are added under exists in the request because defaults only go into
    // strategies the user wrote.
    let before = serde_json::json!({ "spec": spec });
    let after = serde_json::json!({ "spec": defaulted });
    let patch = json_patch::diff(&before, &after);
    match response.clone().with_patch(patch) {
        Ok(patched) => patched,
        Err(err) => deny_bad_request(
            response,
            format!("failed to encode the defaults patch of DeploymentPolicy {name:?}: {err}"),
        ),
    }
}

/// The request's `object` as the typed resource, or why it is not one.
fn typed_object<K: DeserializeOwned>(
    request: &AdmissionRequest<DynamicObject>,
) -> Result<K, String> {
    let kind = &request.kind.kind;
    let Some(object) = &request.object else {
        return Err(format!(
            "the {:?} request for {kind} {:?} carries no object",
            operation_name(&request.operation),
            request.name
        ));
    };
    decode(object)
        .map_err(|err| format!("the object is not a valid {kind} {:?}: {err}", request.name))
}

fn decode<K: DeserializeOwned>(object: &DynamicObject) -> Result<K, serde_json::Error> {
    serde_json::to_value(object).and_then(serde_json::from_value)
}

/// The operation as the API server spells it.
pub fn operation_name(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

fn with_warnings(mut response: AdmissionResponse, warnings: Vec<String>) -> AdmissionResponse {
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    response
}

/// A 422 denial listing every violation, in the message (what `kubectl apply` shows) and as
/// field causes (what API clients read). The reason stays empty on purpose: with reason
/// `Invalid`, kubectl prints only the causes and drops the message, and with it the
/// `admission webhook "<name>" denied the request` prefix that upstream's tests look for. A 422
/// without a known reason still counts as invalid for `apierrors.IsInvalid`.
fn deny_invalid(
    response: AdmissionResponse,
    (group, kind): (Group, &str),
    name: &str,
    violations: &Violations,
) -> AdmissionResponse {
    // A NodeWright's denial opens as upstream v0.20's does; ours lists every problem, with its
    // field, where upstream stops at the first.
    let message = match group {
        Group::Skyhook => format!("{kind} {name:?} is invalid: {violations}"),
        Group::NodeWright => format!("validating {kind} {name:?}: {violations}"),
    };
    let mut response = deny(response, message, 422, "");
    response.result.details = Some(StatusDetails {
        name: name.to_owned(),
        group: group.keys().group.to_owned(),
        kind: kind.to_owned(),
        causes: violations
            .as_slice()
            .iter()
            .map(|v| StatusCause {
                reason: "FieldValueInvalid".to_owned(),
                message: if v.hint.is_empty() {
                    v.message.clone()
                } else {
                    format!("{} (fix: {})", v.message, v.hint)
                },
                field: v.field.clone(),
            })
            .collect(),
        uid: String::new(),
        retry_after_seconds: 0,
    });
    response
}

fn deny_bad_request(response: AdmissionResponse, reason: String) -> AdmissionResponse {
    deny(response, reason, 400, "BadRequest")
}

fn deny_unavailable(response: AdmissionResponse, reason: &str) -> AdmissionResponse {
    deny(response, reason, 503, "ServiceUnavailable")
}

/// A denial with an HTTP-style status code and a Kubernetes `StatusReason`, which the API
/// server passes on to the client (`Error from server (<reason>)`).
fn deny(
    response: AdmissionResponse,
    message: impl ToString,
    code: u16,
    reason: &str,
) -> AdmissionResponse {
    let mut response = response.deny(message);
    response.result.status = Some(StatusSummary::Failure);
    response.result.code = code;
    response.result.reason = reason.to_owned();
    response
}
