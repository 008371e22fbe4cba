//! Counting the controller's own API requests by verb and resource.
//!
//! The API server's `apiserver_request_total` has no client label, and on a devcluster the node
//! simulator shares the API server, so the controller counts what it sends itself: a tower layer
//! on its `kube::Client` classifies every request ([`classify`], pure) and increments
//! `skyhook_api_requests_total{verb,resource}`.
//!
//! Labels are bounded: the verb is one of Kubernetes' fixed verbs, and the resource is the
//! resource (and subresource) segment of the request path, which only names the API types the
//! controller's code calls.

use std::sync::Arc;

use http::{Method, Request};
use kube::client::{Body, ClientBuilder};

use crate::metrics::Metrics;

/// A request's Kubernetes verb and resource, as `apiserver_request_total` would label it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestClass {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or
    /// `other` for a method Kubernetes gives no verb.
    pub verb: &'static str,
    /// `pods`, `skyhooks/status`, `pods/eviction`..., or `nonresource` for paths such as
    /// `/version`.
    pub resource: String,
}

/// The verb and resource of a request from its method, path and query.
pub fn classify(method: &Method, path: &str, query: Option<&str>) -> RequestClass {
    let target = resource_target(path);
    let is_collection = target.as_ref().is_some_and(|target| target.name.is_none());
    let watching = query.is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    });
    let verb = match *method {
        Method::GET if watching => "watch",
        Method::GET if is_collection => "list",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if is_collection => "deletecollection",
        Method::DELETE => "delete",
        _ => "other",
    };
    let resource = target.map_or_else(
        || "nonresource".to_owned(),
        |target| match target.subresource {
            Some(sub) => format!("{}/{sub}", target.resource),
            None => target.resource.to_owned(),
        },
    );
    RequestClass { verb, resource }
}

/// The resource, object name and subresource a resource path addresses.
struct ResourceTarget<'a> {
    resource: &'a str,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
}

/// `/api/v1/...` or `/apis/<group>/<version>/...`, optionally under `namespaces/<ns>/`.
fn resource_target(path: &str) -> Option<ResourceTarget<'_>> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return None,
    };
    // `namespaces/<ns>` alone is a Namespace object; followed by a resource it is a scope.
    let rest = match rest {
        ["namespaces", _namespace, inner @ ..] if !inner.is_empty() => inner,
        _ => rest,
    };
    match rest {
        [resource] => Some(ResourceTarget {
            resource,
            name: None,
            subresource: None,
        }),
        [resource, name] => Some(ResourceTarget {
            resource,
            name: Some(name),
            subresource: None,
        }),
        [resource, name, subresource, ..] => Some(ResourceTarget {
            resource,
            name: Some(name),
            subresource: Some(subresource),
        }),
        [] => None,
    }
}

/// A client from `config` whose every request is counted in `metrics`.
pub fn counting_client(config: kube::Config, metrics: Arc<Metrics>) -> kube::Result<kube::Client> {
    let count = move |request: Request<Body>| {
        let class = classify(
            request.method(),
            request.uri().path(),
            request.uri().query(),
        );
        metrics.count_api_request(class.verb, class.resource);
        request
    };
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&tower::util::MapRequestLayer::new(count))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_classified_like_the_api_server() {
        let cases = [
            (Method::GET, "/api/v1/nodes", None, "list", "nodes"),
            (
                Method::GET,
                "/api/v1/nodes",
                Some("watch=true&resourceVersion=5"),
                "watch",
                "nodes",
            ),
            (
                Method::GET,
                "/apis/skyhook.nvidia.com/v1alpha1/skyhooks",
                Some("limit=1"),
                "list",
                "skyhooks",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/skyhook/pods",
                Some("labelSelector=a%3Db&watch=1"),
                "watch",
                "pods",
            ),
            (Method::GET, "/api/v1/nodes/node-1", None, "get", "nodes"),
            (
                Method::PATCH,
                "/api/v1/nodes/node-1",
                None,
                "patch",
                "nodes",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/skyhook/pods",
                None,
                "create",
                "pods",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/skyhook/pods/p",
                None,
                "delete",
                "pods",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/skyhook/configmaps",
                None,
                "deletecollection",
                "configmaps",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/default/pods/w/eviction",
                None,
                "create",
                "pods/eviction",
            ),
            (
                Method::PATCH,
                "/apis/skyhook.nvidia.com/v1alpha1/skyhooks/demo/status",
                None,
                "patch",
                "skyhooks/status",
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/skyhook/leases/l",
                None,
                "update",
                "leases",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/skyhook",
                None,
                "get",
                "namespaces",
            ),
            (Method::GET, "/version", None, "get", "nonresource"),
            (Method::HEAD, "/api/v1/nodes", None, "other", "nodes"),
        ];
        for (method, path, query, verb, resource) in cases {
            let class = classify(&method, path, query);
            assert_eq!(
                (class.verb, class.resource.as_str()),
                (verb, resource),
                "{method} {path}?{query:?}"
            );
        }
    }
}
