//! The HTTP endpoints: `/metrics` on `METRICS_PORT`, `/healthz` and `/readyz` on `PROBE_PORT`.
//!
//! Contract: `/healthz` answers 200 while the process serves requests. `/readyz` answers 200 once
//! the controller has started (Kubernetes API reachable, Skyhook CRD installed), also on a replica
//! waiting for leadership, so that a standby replica counts as available; 503 before that.
//! `/metrics` serves [`Metrics::encode`] in the OpenMetrics text format: over plain HTTP with
//! [`metrics`] and [`serve`], or with [`secure_metrics`] and [`serve_tls`] over HTTPS with an
//! in-memory self-signed certificate, each request authorised by [`crate::metrics_auth`] (401
//! without a valid token, 403 without `get` on `/metrics`), as upstream v0.18+.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::metrics::{CONTENT_TYPE, Metrics};
use crate::metrics_auth::{self, Decision, DecisionCache};

/// How long a client may take to complete the TLS handshake; bounds what a stalled or hostile
/// client holds.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether the controller has started.
#[derive(Debug, Default)]
pub struct Readiness {
    ready: AtomicBool,
}

impl Readiness {
    /// Marks the controller ready.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Whether the controller is ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

/// The router of `/healthz` and `/readyz`.
pub fn probes(readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { (StatusCode::OK, "ok") }))
        .route("/readyz", get(readyz))
        .with_state(readiness)
}

/// The router of `/metrics`.
pub fn metrics(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(serve_metrics))
        .with_state(metrics)
}

/// What the secure `/metrics` handler needs.
#[derive(Clone)]
pub struct SecureMetrics {
    /// The registry served to authorised readers.
    pub metrics: Arc<Metrics>,
    /// Posts the TokenReviews and SubjectAccessReviews.
    pub client: kube::Client,
    /// Recent decisions by token digest.
    pub decisions: Arc<Mutex<DecisionCache>>,
}

impl std::fmt::Debug for SecureMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureMetrics").finish_non_exhaustive()
    }
}

/// The router of `/metrics` for authorised readers only.
pub fn secure_metrics(metrics: Arc<Metrics>, client: kube::Client) -> Router {
    Router::new()
        .route("/metrics", get(serve_secure_metrics))
        .with_state(SecureMetrics {
            metrics,
            client,
            decisions: Arc::new(Mutex::new(DecisionCache::default())),
        })
}

async fn serve_secure_metrics(State(state): State<SecureMetrics>, headers: HeaderMap) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    match metrics_auth::authorize(&state.client, &state.decisions, authorization).await {
        Ok(Decision::Allowed) => serve_metrics(State(state.metrics)).await.into_response(),
        Ok(Decision::Unauthenticated) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "Unauthorized: send a ServiceAccount token as 'Authorization: Bearer <token>'\n",
        )
            .into_response(),
        Ok(Decision::Forbidden) => (
            StatusCode::FORBIDDEN,
            "Forbidden: the token's user may not get the non-resource URL /metrics; bind it to the metrics-reader ClusterRole\n",
        )
            .into_response(),
        Err(error) => {
            tracing::warn!(error = %skyhook_api::errors::error_chain(&error), "could not authorise a /metrics request");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "could not review the request's token with the API server; see the controller's log\n",
            )
                .into_response()
        }
    }
}

async fn readyz(State(readiness): State<Arc<Readiness>>) -> (StatusCode, &'static str) {
    if readiness.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting")
    }
}

async fn serve_metrics(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    match metrics.encode() {
        Ok(text) => (StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "failed to encode metrics",
        )
            .into_response(),
    }
}

/// An endpoint could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address is taken or not available.
    #[error("failed to listen on {address}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The in-memory certificate for `/metrics` could not be made.
    #[error(
        "failed to make the self-signed certificate for HTTPS /metrics; set METRICS_SECURE=false to serve plain HTTP instead"
    )]
    Certificate(#[source] rcgen::Error),
    /// The TLS configuration for `/metrics` was refused.
    #[error(
        "failed to configure TLS for /metrics; set METRICS_SECURE=false to serve plain HTTP instead"
    )]
    Tls(#[source] rustls::Error),
    /// The server stopped with an error.
    #[error("the HTTP server on {address} failed")]
    Serve {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Serves `router` on `address` until the process ends.
pub async fn serve(address: SocketAddr, router: Router) -> Result<(), ServeError> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind { address, source })?;
    axum::serve(listener, router)
        .await
        .map_err(|source| ServeError::Serve { address, source })
}

/// The TLS configuration of `/metrics`: a self-signed certificate made now and kept in memory only,
/// since scrapers skip verification (Prometheus' `insecure_skip_verify`) as for upstream's.
pub fn self_signed_tls() -> Result<ServerConfig, ServeError> {
    let issued = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .map_err(ServeError::Certificate)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(issued.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(ServeError::Tls)?
        .with_no_client_auth()
        .with_single_cert(vec![issued.cert.der().clone()], key)
        .map_err(ServeError::Tls)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Serves `router` over TLS with `tls` on `address` until the process ends.
pub async fn serve_tls(
    address: SocketAddr,
    tls: ServerConfig,
    router: Router,
) -> Result<(), ServeError> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind { address, source })?;
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Running out of file descriptors is passing; the next accept may succeed.
                tracing::warn!(%address, %error, "failed to accept a /metrics connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let tls_stream =
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, %error, "tls handshake on /metrics failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "tls handshake on /metrics timed out");
                        return;
                    }
                };
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls_stream), service)
                .await
            {
                tracing::debug!(%peer, %error, "/metrics connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use axum::body::to_bytes;

    use super::*;

    #[tokio::test]
    async fn readyz_follows_readiness() {
        let readiness = Arc::new(Readiness::default());
        let (status, _) = readyz(State(readiness.clone())).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        readiness.set_ready();
        let (status, _) = readyz(State(readiness)).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[test]
    fn the_self_signed_certificate_makes_a_tls_config() {
        let config = self_signed_tls().unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[tokio::test]
    async fn metrics_endpoint() {
        let registry = Arc::new(Metrics::new(true));
        registry.reconcile_failed("kube-api", 1);
        let response = serve_metrics(State(registry)).await.into_response();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers().get(header::CONTENT_TYPE).unwrap(),
            CONTENT_TYPE
        );
        let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(
            body.contains("skyhook_controller_reconcile_failures_total{category=\"kube-api\"} 1"),
            "{body}"
        );
        assert!(body.ends_with("# EOF\n"), "{body}");
    }
}
