//! The thin HTTP layer: the admission paths of both API groups over rustls, and a plain-HTTP admin port with
//! `/healthz`, `/readyz` and `/metrics`. Every admission request is answered with HTTP 200 and
//! an AdmissionReview, whatever the body holds; the decision itself is [`crate::review`].

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use kube::api::{Api, PartialObjectMeta};
use rustls::ServerConfig;
use skyhook_api::generation::Group;
use skyhook_api::nodewright_v1alpha1::DeploymentPolicy as NodeWrightPolicy;
use skyhook_api::v1alpha1::DeploymentPolicy;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::endpoint::Endpoint;
use crate::lookups::{Lookups, WithPolicies, unknown_policy};
use crate::metrics::Metrics;
use crate::review::{Reviewed, Verdict, malformed, review};

/// The largest AdmissionReview accepted. The API server caps objects at about 1.5 MiB and a
/// review can carry the old and the new object.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How long a client may take to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the admission handlers share.
#[derive(Clone)]
pub struct Admission {
    /// Cluster state for the checks that need it.
    pub lookups: Arc<dyn Lookups + Send + Sync>,
    /// Where answers are counted.
    pub metrics: Arc<Metrics>,
    /// Asks the API server about a DeploymentPolicy the cache does not know yet; `None`: the
    /// cache is the only source (tests without a cluster).
    pub policies: Option<Api<PartialObjectMeta<DeploymentPolicy>>>,
    /// The same for the nodewright group's DeploymentPolicies.
    pub nodewright_policies: Option<Api<PartialObjectMeta<NodeWrightPolicy>>>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission").finish_non_exhaustive()
    }
}

/// Whether the webhook is shutting down: set on SIGTERM, some time before the server stops
/// accepting connections (`--shutdown-delay`).
#[derive(Debug, Clone, Default)]
pub struct Draining(Arc<AtomicBool>);

impl Draining {
    /// From now on every answer closes its connection and `/readyz` fails.
    pub fn start(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether [`Draining::start`] was called.
    pub fn is_draining(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// While `draining`, every answer of `router` carries `Connection: close`, so the API server
/// sends its next request on a new connection, which the Service routes to a replica that is
/// not terminating. Closing a kept-alive connection from this side instead races the API
/// server's next request on it, which it then reports as `EOF` and refuses the object.
pub fn close_connections_while(router: Router, draining: Draining) -> Router {
    router.layer(axum::middleware::map_response(
        move |mut response: Response| {
            let close = draining.is_draining();
            async move {
                if close {
                    response.headers_mut().insert(
                        header::CONNECTION,
                        header::HeaderValue::from_static("close"),
                    );
                }
                response
            }
        },
    ))
}

/// The admission routes.
pub fn admission_router(state: Admission) -> Router {
    Endpoint::ALL
        .into_iter()
        .fold(Router::new(), |router, endpoint| {
            router.route(
                endpoint.path(),
                any(move |state: State<Admission>, request: Request| {
                    handle(endpoint, state, request)
                }),
            )
        })
        .with_state(state)
}

async fn handle(endpoint: Endpoint, State(state): State<Admission>, request: Request) -> Response {
    let started = Instant::now();
    let reviewed = match axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await {
        Ok(body) => {
            let confirmed = confirm_policy(&state, endpoint, &body).await;
            let lookups = WithPolicies {
                inner: state.lookups.as_ref(),
                group: endpoint.group(),
                confirmed: confirmed.into_iter().collect(),
            };
            review(endpoint, &body, &lookups)
        }
        Err(err) => malformed(
            "",
            format!(
                "failed to read the request body (at most {MAX_BODY_BYTES} bytes are accepted): {err}"
            ),
        ),
    };
    let body = reviewed.to_json();
    state.metrics.observe(
        endpoint.kind(),
        reviewed.operation,
        reviewed.verdict,
        started.elapsed().as_secs_f64(),
    );
    log_outcome(endpoint, &reviewed);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// How long admission waits for the API server to say whether a DeploymentPolicy exists.
const POLICY_LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// The DeploymentPolicy the request names, if the cache does not know it but the API server
/// does (the watch has not delivered a policy created a moment ago).
async fn confirm_policy(state: &Admission, endpoint: Endpoint, body: &[u8]) -> Option<String> {
    let name = unknown_policy(endpoint, body, state.lookups.as_ref())?;
    let lookup = async {
        match endpoint.group() {
            Group::Skyhook => {
                let api = state.policies.as_ref()?;
                Some(api.get_metadata_opt(&name).await.map(|p| p.is_some()))
            }
            Group::NodeWright => {
                let api = state.nodewright_policies.as_ref()?;
                Some(api.get_metadata_opt(&name).await.map(|p| p.is_some()))
            }
        }
    };
    match tokio::time::timeout(POLICY_LOOKUP_TIMEOUT, lookup).await {
        Ok(None) => None,
        Ok(Some(Ok(true))) => {
            tracing::debug!(policy = %name, "DeploymentPolicy not cached yet; the API server has it");
            Some(name)
        }
        Ok(Some(Ok(false))) => None,
        Ok(Some(Err(error))) => {
            tracing::warn!(policy = %name, %error, "could not ask the API server whether the DeploymentPolicy exists");
            None
        }
        Err(_) => {
            tracing::warn!(policy = %name, "the API server did not say within 3 s whether the DeploymentPolicy exists");
            None
        }
    }
}

fn log_outcome(endpoint: Endpoint, reviewed: &Reviewed) {
    let kind = endpoint.kind();
    match (reviewed.verdict, reviewed.denial_message()) {
        (Verdict::Allowed, _) | (_, None) => {
            tracing::debug!(kind, operation = reviewed.operation, name = %reviewed.name, "admission allowed");
        }
        (Verdict::Denied, Some(reason)) => {
            tracing::info!(kind, operation = reviewed.operation, name = %reviewed.name, %reason, "admission denied");
        }
        (Verdict::Malformed, Some(reason)) => {
            tracing::warn!(kind, path = endpoint.path(), %reason, "malformed admission review");
        }
    }
}

/// Serves `router` over TLS on `listener` until `shutdown` resolves, then lets in-flight
/// requests finish.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let (stop, stopped) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "failed to accept a connection");
                    continue;
                }
            },
            // Reap finished connections so the set does not grow without bound.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        let mut stopped = stopped.clone();
        connections.spawn(async move {
            let tls_stream =
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(err)) => {
                        tracing::debug!(%peer, error = %err, "tls handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "tls handshake timed out");
                        return;
                    }
                };
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls_stream), service);
            tokio::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                _ = stopped.changed() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = result {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
        });
    }
    // Idle keep-alive connections close at once; requests in flight are answered first.
    let _ = stop.send(true);
    while connections.join_next().await.is_some() {}
}

/// What the admin port reports on.
#[derive(Clone)]
pub struct Admin {
    /// Where answers are counted.
    pub metrics: Arc<Metrics>,
    /// Whether the webhook can answer correctly now (certificate loaded, caches synced).
    pub ready: Arc<dyn Fn() -> bool + Send + Sync>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin").finish_non_exhaustive()
    }
}

/// `/healthz`, `/readyz` and `/metrics`.
pub fn admin_router(state: Admin) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(state): State<Admin>) -> Response {
    if (state.ready)() {
        (StatusCode::OK, "ready").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: serving certificate or cluster caches not loaded yet",
        )
            .into_response()
    }
}

async fn metrics(State(state): State<Admin>) -> Response {
    match state.metrics.encode() {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            Body::from(text),
        )
            .into_response(),
        Err(err) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to encode metrics: {err}"),
        )
            .into_response(),
    }
}
