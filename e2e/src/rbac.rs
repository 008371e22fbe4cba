//! What the chart's service accounts may do: one table of the requests the controller and the
//! webhook send (each with why) and of those they must not be able to send, checked two ways from
//! the same rows: against the rendered Roles ([`allowed_by`], no cluster) and against the API
//! server's authorizer after `helm install` ([`check_with_api_server`], SubjectAccessReviews).

use Scope::{Cluster, Namespace, Release};
use anyhow::{Context, ensure};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

use crate::metrics::Sample;

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A cluster-scoped object, or every namespace at once.
    Cluster,
    /// The release namespace.
    Release,
    /// Another namespace, named.
    Namespace(&'static str),
}

/// One request: `verb` on `group`/`resource` (with `/subresource`) in `scope`, optionally on one
/// object by `name`.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    pub verb: &'static str,
    pub group: &'static str,
    pub resource: &'static str,
    pub scope: Scope,
    pub name: Option<&'static str>,
    /// Why the component sends it, or why it must not be able to.
    pub why: &'static str,
}

const fn request(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    scope: Scope,
    why: &'static str,
) -> Request {
    Request {
        verb,
        group,
        resource,
        scope,
        name: None,
        why,
    }
}

const fn named(request: Request, name: &'static str) -> Request {
    Request {
        name: Some(name),
        ..request
    }
}

const SKYHOOK_GROUP: &str = "skyhook.nvidia.com";
const NODEWRIGHT_GROUP: &str = "nodewright.nvidia.com";
/// A namespace of workloads a drain meets.
pub const WORKLOADS: &str = "workloads";
/// Where Events about cluster-scoped objects are recorded.
const EVENTS_NAMESPACE: &str = "default";
/// The leader-election Lease (controller/src/leader.rs).
const LEASE: &str = "3c22c1ae.nvidia.com";

/// Every request the controller sends (grep `Api::` in controller/src: cache.rs, run.rs,
/// leader.rs, metrics_auth.rs, reconcile/observe.rs, reconcile/apply.rs, reconcile/event_series.rs).
#[rustfmt::skip]
pub const CONTROLLER_SENDS: &[Request] = &[
    request("list", SKYHOOK_GROUP, "skyhooks", Cluster, "cache; CRD check at start"),
    request("watch", SKYHOOK_GROUP, "skyhooks", Cluster, "cache"),
    request("patch", SKYHOOK_GROUP, "skyhooks", Cluster, "finalizer, annotations"),
    request("patch", SKYHOOK_GROUP, "skyhooks/status", Cluster, "status apply"),
    request("update", SKYHOOK_GROUP, "skyhooks/finalizers", Cluster, "blockOwnerDeletion on owned Jobs and ConfigMaps"),
    request("list", SKYHOOK_GROUP, "deploymentpolicies", Cluster, "cache"),
    request("watch", SKYHOOK_GROUP, "deploymentpolicies", Cluster, "cache"),
    request("list", NODEWRIGHT_GROUP, "nodewrights", Cluster, "served-group check at start; cache"),
    request("watch", NODEWRIGHT_GROUP, "nodewrights", Cluster, "cache, where the group is served"),
    request("patch", NODEWRIGHT_GROUP, "nodewrights", Cluster, "finalizer, annotations"),
    request("patch", NODEWRIGHT_GROUP, "nodewrights/status", Cluster, "status apply"),
    request("update", NODEWRIGHT_GROUP, "nodewrights/finalizers", Cluster, "blockOwnerDeletion on owned Jobs and ConfigMaps"),
    request("list", NODEWRIGHT_GROUP, "deploymentpolicies", Cluster, "cache, where the group is served"),
    request("watch", NODEWRIGHT_GROUP, "deploymentpolicies", Cluster, "cache, where the group is served"),
    request("list", "", "nodes", Cluster, "cache"),
    request("watch", "", "nodes", Cluster, "cache"),
    request("patch", "", "nodes", Cluster, "node state, cordon, taints"),
    request("patch", "", "nodes/status", Cluster, "node conditions"),
    request("list", "", "pods", Cluster, "pods on a node to drain, in any namespace"),
    request("create", "", "pods/eviction", Namespace(WORKLOADS), "drain"),
    request("delete", "", "pods", Namespace(WORKLOADS), "drain with disableEviction"),
    request("list", "policy", "poddisruptionbudgets", Cluster, "drain report"),
    request("watch", "", "pods", Release, "cache of stage pods"),
    request("list", "", "pods", Release, "cache of stage pods"),
    request("delete", "", "pods", Release, "failed attempts, bare pods of an earlier release"),
    request("create", "", "pods", Release, "pods pulling images before a cordon (prePullImages)"),
    request("get", "", "pods/log", Release, "last-logs of a Job stuck at FailureTarget"),
    request("list", "batch", "jobs", Release, "cache"),
    request("watch", "batch", "jobs", Release, "cache"),
    request("create", "batch", "jobs", Release, "stage runs"),
    request("patch", "batch", "jobs", Release, "record, suspend, restart limit"),
    request("delete", "batch", "jobs", Release, "stale or replaced runs"),
    request("list", "", "configmaps", Release, "cache"),
    request("watch", "", "configmaps", Release, "cache"),
    request("create", "", "configmaps", Release, "a server-side apply that creates"),
    request("patch", "", "configmaps", Release, "server-side apply"),
    request("delete", "", "configmaps", Release, "package removed"),
    request("create", "coordination.k8s.io", "leases", Release, "first leader"),
    named(request("get", "coordination.k8s.io", "leases", Release, "leader election"), LEASE),
    named(request("update", "coordination.k8s.io", "leases", Release, "renew, take over, release"), LEASE),
    request("create", "events.k8s.io", "events", Namespace(EVENTS_NAMESPACE), "Events"),
    request("patch", "events.k8s.io", "events", Namespace(EVENTS_NAMESPACE), "a repeat of a series"),
    request("create", "authentication.k8s.io", "tokenreviews", Cluster, "who a /metrics scrape's bearer token is (METRICS_SECURE)"),
    request("create", "authorization.k8s.io", "subjectaccessreviews", Cluster, "whether that user may get /metrics (METRICS_SECURE)"),
];

/// Requests the controller never sends, which the chart once granted or might be expected to.
#[rustfmt::skip]
pub const CONTROLLER_MUST_NOT: &[Request] = &[
    request("update", "", "pods", Release, "never written"),
    request("patch", "", "pods", Release, "never written"),
    request("deletecollection", "", "pods", Release, "deletes by name"),
    request("get", "", "pods/status", Release, "read through the watch"),
    request("watch", "", "pods", Namespace(WORKLOADS), "watches its own namespace only"),
    request("create", "batch", "jobs", Namespace(WORKLOADS), "Jobs only in its namespace"),
    request("create", SKYHOOK_GROUP, "skyhooks", Cluster, "users create them"),
    request("delete", SKYHOOK_GROUP, "skyhooks", Cluster, "users delete them"),
    request("update", SKYHOOK_GROUP, "deploymentpolicies", Cluster, "read only"),
    request("create", NODEWRIGHT_GROUP, "nodewrights", Cluster, "users create them"),
    request("update", NODEWRIGHT_GROUP, "deploymentpolicies", Cluster, "read only"),
    request("update", "", "nodes", Cluster, "writes are patches"),
    request("delete", "", "nodes", Cluster, "never"),
    request("create", "", "events", Namespace(EVENTS_NAMESPACE), "Events go through events.k8s.io"),
    named(request("update", "coordination.k8s.io", "leases", Release, "only its own Lease"), "another-lease"),
    request("get", "", "secrets", Release, "the webhook's"),
    request("list", "admissionregistration.k8s.io", "validatingwebhookconfigurations", Cluster, "the webhook's"),
];

/// Every request the webhook sends with self-managed certificates (webhook/src: cache.rs,
/// server.rs, cert_sync.rs), for a release named `skyhook-operator`.
#[rustfmt::skip]
pub const WEBHOOK_SENDS: &[Request] = &[
    request("list", SKYHOOK_GROUP, "skyhooks", Cluster, "cache"),
    request("watch", SKYHOOK_GROUP, "skyhooks", Cluster, "cache"),
    request("list", SKYHOOK_GROUP, "deploymentpolicies", Cluster, "cache"),
    request("watch", SKYHOOK_GROUP, "deploymentpolicies", Cluster, "cache"),
    request("get", SKYHOOK_GROUP, "deploymentpolicies", Cluster, "a policy not cached yet"),
    request("list", NODEWRIGHT_GROUP, "nodewrights", Cluster, "served-group check at start; cache"),
    request("watch", NODEWRIGHT_GROUP, "nodewrights", Cluster, "cache, where the group is served"),
    request("list", NODEWRIGHT_GROUP, "deploymentpolicies", Cluster, "cache, where the group is served"),
    request("watch", NODEWRIGHT_GROUP, "deploymentpolicies", Cluster, "cache, where the group is served"),
    request("get", NODEWRIGHT_GROUP, "deploymentpolicies", Cluster, "a policy not cached yet"),
    request("create", "", "secrets", Release, "first certificate"),
    named(request("get", "", "secrets", Release, "certificate"), "webhook-cert"),
    named(request("update", "", "secrets", Release, "renewed certificate"), "webhook-cert"),
    named(request("patch", "", "secrets", Release, "owner reference"), "webhook-cert"),
    named(request("get", "admissionregistration.k8s.io", "validatingwebhookconfigurations", Cluster, "caBundle"), "skyhook-operator-validating-webhook"),
    named(request("patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", Cluster, "caBundle"), "skyhook-operator-validating-webhook"),
    named(request("get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", Cluster, "caBundle"), "skyhook-operator-mutating-webhook"),
    named(request("patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", Cluster, "caBundle"), "skyhook-operator-mutating-webhook"),
];

/// Requests the webhook never sends.
#[rustfmt::skip]
pub const WEBHOOK_MUST_NOT: &[Request] = &[
    request("patch", SKYHOOK_GROUP, "skyhooks", Cluster, "admission only reads"),
    request("get", SKYHOOK_GROUP, "skyhooks", Cluster, "read through the watch"),
    named(request("get", "", "secrets", Release, "only its own Secret"), "another-secret"),
    named(request("patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", Cluster, "only its own"), "someone-elses"),
    request("list", "", "pods", Cluster, "never"),
];

/// Whether rendered Role or ClusterRole `rules` grant `request`: the rule's group, resource and
/// verb match, and its resourceNames (if any) contain the request's name. A Role's rules reach only
/// the release namespace.
pub fn allowed_by(rules: &Value, role_is_namespaced: bool, request: &Request) -> bool {
    if role_is_namespaced && request.scope != Release {
        return false;
    }
    let contains = |list: &Value, wanted: &str| {
        list.as_array()
            .into_iter()
            .flatten()
            .any(|item| item == wanted || item == "*")
    };
    rules.as_array().into_iter().flatten().any(|rule| {
        let names_match = match rule["resourceNames"].as_array() {
            None => true,
            Some(names) if names.is_empty() => true,
            Some(_) => request
                .name
                .is_some_and(|name| contains(&rule["resourceNames"], name)),
        };
        contains(&rule["apiGroups"], request.group)
            && contains(&rule["resources"], request.resource)
            && contains(&rule["verbs"], request.verb)
            && names_match
    })
}

/// Asks the API server whether `service_account` in `namespace` (the release namespace) may send
/// each request, and fails listing every answer that is not `expected`.
pub async fn check_with_api_server(
    client: &kube::Client,
    namespace: &str,
    service_account: &str,
    requests: &[Request],
    expected: bool,
) -> anyhow::Result<()> {
    let reviews = Api::<SubjectAccessReview>::all(client.clone());
    let reviews = &reviews;
    let answers = futures::future::join_all(requests.iter().map(|request| async move {
        let review = access_review(namespace, service_account, request);
        let answer = reviews
            .create(&PostParams::default(), &review)
            .await
            .with_context(|| format!("reviewing {request:?}"))?;
        let allowed = answer.status.is_some_and(|status| status.allowed);
        anyhow::Ok((request, allowed))
    }))
    .await;
    let mut wrong = Vec::new();
    for answer in answers {
        let (request, allowed) = answer?;
        if allowed != expected {
            wrong.push(format!(
                "{} {}/{} in {:?} (name {:?}; {}): allowed {allowed}",
                request.verb,
                request.group,
                request.resource,
                request.scope,
                request.name,
                request.why
            ));
        }
    }
    ensure!(
        wrong.is_empty(),
        "{service_account} should {}be allowed:\n{}",
        if expected { "" } else { "not " },
        wrong.join("\n")
    );
    Ok(())
}

/// The review of `request` by the service account, with the groups every service account token
/// carries (bindings to them grant too).
fn access_review(namespace: &str, service_account: &str, request: &Request) -> SubjectAccessReview {
    let (resource, subresource) = match request.resource.split_once('/') {
        Some((resource, subresource)) => (resource, Some(subresource.to_owned())),
        None => (request.resource, None),
    };
    let review_namespace = match request.scope {
        Cluster => None,
        Release => Some(namespace.to_owned()),
        Namespace(name) => Some(name.to_owned()),
    };
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!(
                "system:serviceaccount:{namespace}:{service_account}"
            )),
            groups: Some(vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_owned(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(request.verb.to_owned()),
                group: Some(request.group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource,
                namespace: review_namespace,
                name: request.name.map(str::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

/// The requests counted in the controller's `skyhook_api_requests_total` that no row of
/// [`CONTROLLER_SENDS`] names (by verb and resource: the counter has no group or namespace).
pub fn unlisted_controller_requests(samples: &[Sample]) -> Vec<String> {
    samples
        .iter()
        .filter(|sample| sample.name == "skyhook_api_requests_total" && sample.value > 0.0)
        .filter_map(|sample| {
            let verb = sample.labels.get("verb")?;
            let resource = sample.labels.get("resource")?;
            let listed = CONTROLLER_SENDS
                .iter()
                .any(|request| request.verb == verb && request.resource == resource);
            (!listed).then(|| format!("{verb} {resource} ({} requests)", sample.value))
        })
        .collect()
}
