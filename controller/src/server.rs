//! The HTTP endpoints: `/metrics` on `METRICS_PORT`, `/healthz` and `/readyz` on `PROBE_PORT`.
//!
//! Contract: `/healthz` answers 200 while the process serves requests. `/readyz` answers 200 once
//! the controller has started (Kubernetes API reachable, Skyhook CRD installed), also on a replica
//! waiting for leadership, so that a standby replica counts as available; 503 before that.
//! `/metrics` serves [`Metrics::encode`] in the OpenMetrics text format.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::metrics::{CONTENT_TYPE, Metrics};

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

    #[tokio::test]
    async fn metrics_endpoint() {
        let registry = Arc::new(Metrics::new());
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
