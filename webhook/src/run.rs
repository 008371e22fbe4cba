//! Startup wiring: flags, certificate reloading, cluster caches, the two servers, and shutdown
//! on SIGTERM or Ctrl-C.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use rustls::crypto::CryptoProvider;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cache::cluster_cache;
use crate::cert_sync::CertSync;
use crate::metrics::Metrics;
use crate::server::{
    Admin, Admission, Draining, admin_router, admission_router, close_connections_while, serve_tls,
};
use crate::telemetry::LogFormat;
use crate::tls::{self, ReloadingCert};

/// How often the certificate files are checked for a rotation. Kubernetes refreshes mounted
/// Secrets within about a minute, so a few seconds adds little to that.
const CERT_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// Command-line flags of `skyhook-webhook`.
#[derive(Debug, clap::Parser)]
#[command(
    version,
    about = "Admission webhook for Skyhook and DeploymentPolicy objects"
)]
pub struct Args {
    /// Directory holding tls.crt and tls.key (PEM); re-read when they change.
    #[arg(long, env = "WEBHOOK_CERT_DIR", default_value_os_t = default_cert_dir())]
    pub cert_dir: PathBuf,
    /// HTTPS port of the admission endpoints.
    #[arg(long, env = "WEBHOOK_PORT", default_value_t = 9443)]
    pub port: u16,
    /// Plain-HTTP port of /healthz, /readyz and /metrics.
    #[arg(long, env = "WEBHOOK_ADMIN_PORT", default_value_t = 8081)]
    pub admin_port: u16,
    /// Log line format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Plain)]
    pub log_format: LogFormat,
    /// Namespace the webhook runs in; its Service and certificate Secret live there.
    #[arg(long, env = "POD_NAMESPACE", default_value = "skyhook")]
    pub namespace: String,
    /// Manage the certificate: issue it into --cert-secret, keep the caBundle of both webhook
    /// configurations current, renew it 7 days before expiry, and serve it. Without this flag
    /// the files in --cert-dir come from elsewhere (a mounted Secret, cert-manager).
    #[arg(long, env = "WEBHOOK_MANAGE_CERTS")]
    pub manage_certs: bool,
    /// Secret holding the managed certificate.
    #[arg(long, env = "WEBHOOK_CERT_SECRET", default_value = "webhook-cert")]
    pub cert_secret: String,
    /// Name of the webhook's Service; the certificate is issued for <name>.<namespace>.svc.
    #[arg(long, env = "WEBHOOK_SERVICE", default_value = "skyhook-webhook")]
    pub service: String,
    /// With --manage-certs: a further DNS name or IP address the certificate is issued for
    /// (repeatable, or comma-separated in the variable), e.g. 127.0.0.1 when the API server
    /// calls the webhook by `clientConfig.url` rather than through the Service.
    #[arg(
        long = "cert-extra-name",
        env = "WEBHOOK_CERT_EXTRA_NAMES",
        value_delimiter = ','
    )]
    pub cert_extra_names: Vec<String>,
    /// ValidatingWebhookConfiguration whose caBundle is kept current.
    #[arg(long, default_value = "skyhook-operator-validating-webhook")]
    pub validating_webhook_configuration: String,
    /// MutatingWebhookConfiguration whose caBundle is kept current.
    #[arg(long, default_value = "skyhook-operator-mutating-webhook")]
    pub mutating_webhook_configuration: String,
    /// Seconds the webhook keeps answering after SIGTERM, not ready and closing each connection
    /// after its answer, before it stops accepting: long enough for the Service to stop
    /// routing to this replica. Keep it below the pod's terminationGracePeriodSeconds.
    #[arg(long, env = "WEBHOOK_SHUTDOWN_DELAY_SECONDS", default_value_t = 5)]
    pub shutdown_delay_seconds: u64,
}

/// Upstream's default: `<tmp>/k8s-webhook-server/serving-certs`.
fn default_cert_dir() -> PathBuf {
    std::env::temp_dir().join("k8s-webhook-server/serving-certs")
}

/// Runs the webhook until SIGTERM or Ctrl-C.
pub async fn run(args: Args) -> anyhow::Result<()> {
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        cert_dir = %args.cert_dir.display(),
        port = args.port,
        admin_port = args.admin_port,
        namespace = %args.namespace,
        manage_certs = args.manage_certs,
        "starting skyhook-webhook"
    );
    let provider = tls::provider();
    let certs = watched_certs(&args.cert_dir, &provider);

    let client = kube::Client::try_default()
        .await
        .context("failed to create a Kubernetes client (in-cluster config or KUBECONFIG)")?;
    let nodewright = serves_nodewright(&client).await;
    let (cache, fill_cache) = cluster_cache(client.clone(), nodewright);
    let policies = kube::Api::all(client.clone());
    let client_for_policies = client.clone();
    tokio::spawn(fill_cache);
    let certs_trusted = Arc::new(AtomicBool::new(!args.manage_certs));
    if args.manage_certs {
        let sync = cert_sync(&args);
        tokio::spawn(sync.run(client, Arc::clone(&certs), Arc::clone(&certs_trusted)));
    }

    let metrics = Arc::new(Metrics::default());
    let draining = Draining::default();
    let admission = admission_router(Admission {
        lookups: Arc::new(cache.clone()),
        metrics: Arc::clone(&metrics),
        policies: Some(policies),
        nodewright_policies: Some(kube::Api::all(client_for_policies)),
    });
    let admission = close_connections_while(admission, draining.clone());
    let ready_certs = Arc::clone(&certs);
    let ready_draining = draining.clone();
    let admin = admin_router(Admin {
        metrics,
        ready: Arc::new(move || {
            !ready_draining.is_draining()
                && ready_certs.has_cert()
                && certs_trusted.load(Ordering::Acquire)
                && cache.is_synced()
        }),
    });
    let tls_config = Arc::new(tls::server_config(certs, provider)?);
    serve_until_signal(&args, tls_config, (admission, admin), draining).await
}

/// The serving certificate, loaded now if the files are there and re-read when they change.
fn watched_certs(cert_dir: &Path, provider: &Arc<CryptoProvider>) -> Arc<ReloadingCert> {
    let certs = Arc::new(ReloadingCert::new(cert_dir, Arc::clone(provider)));
    if let Err(err) = certs.reload() {
        // The mount may lag behind the container start; the watcher below keeps trying and
        // /readyz stays false until a certificate is served.
        tracing::warn!(error = %skyhook_api::errors::error_chain(&err), "no serving certificate yet");
    }
    tokio::spawn(Arc::clone(&certs).watch(CERT_POLL_INTERVAL));
    certs
}

/// What --manage-certs keeps current, from the flags.
fn cert_sync(args: &Args) -> CertSync {
    CertSync {
        namespace: args.namespace.clone(),
        secret: args.cert_secret.clone(),
        service: format!("{}.{}.svc", args.service, args.namespace),
        extra_names: args.cert_extra_names.clone(),
        validating: args.validating_webhook_configuration.clone(),
        mutating: args.mutating_webhook_configuration.clone(),
    }
}

/// Serves admission over TLS and the admin endpoints over plain HTTP until SIGTERM or Ctrl-C,
/// drains for `--shutdown-delay-seconds`, then lets both servers finish their requests.
async fn serve_until_signal(
    args: &Args,
    tls_config: Arc<rustls::ServerConfig>,
    (admission, admin): (axum::Router, axum::Router),
    draining: Draining,
) -> anyhow::Result<()> {
    let admission_addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, args.port));
    let admin_addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, args.admin_port));
    let admission_listener = TcpListener::bind(admission_addr)
        .await
        .with_context(|| format!("failed to listen on {admission_addr} for admission"))?;
    let admin_listener = TcpListener::bind(admin_addr)
        .await
        .with_context(|| format!("failed to listen on {admin_addr} for the admin port"))?;

    let (stop, stopped) = watch::channel(false);
    let until_stopped = |mut stopped: watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let admission_server = serve_tls(
        admission_listener,
        tls_config,
        admission,
        until_stopped(stopped.clone()),
    );
    let admin_server = async {
        axum::serve(admin_listener, admin)
            .with_graceful_shutdown(until_stopped(stopped.clone()))
            .await
            .context("admin server failed")
    };
    let signals = async {
        let signal = shutdown_signal().await;
        let delay = Duration::from_secs(args.shutdown_delay_seconds);
        tracing::info!(
            signal,
            delay_seconds = args.shutdown_delay_seconds,
            "draining: not ready, closing each connection after its answer"
        );
        draining.start();
        // A second signal cuts the drain short.
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            second = shutdown_signal() => tracing::info!(signal = second, "drain cut short"),
        }
        tracing::info!("shutting down");
        let _ = stop.send(true);
        Ok::<(), anyhow::Error>(())
    };
    tracing::info!(%admission_addr, %admin_addr, "serving");
    let ((), admin_result, signal_result) = tokio::join!(admission_server, admin_server, signals);
    admin_result?;
    signal_result?;
    tracing::info!("stopped");
    Ok(())
}

/// Waits for SIGTERM (how Kubernetes stops a pod) or Ctrl-C, and names it.
async fn shutdown_signal() -> &'static str {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for SIGTERM; only Ctrl-C stops the webhook");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => "SIGINT",
        () = term => "SIGTERM",
    }
}

/// Whether the API server serves the nodewright group and the webhook may read it, asked once
/// at start (a NodeWright CRD installed later is read from the webhook's next start; `helm
/// upgrade` restarts it). Never fatal: without the group only Skyhooks are admitted with the
/// cluster's objects in view.
async fn serves_nodewright(client: &kube::Client) -> bool {
    let api = kube::Api::<skyhook_api::nodewright_v1alpha1::NodeWright>::all(client.clone());
    match api
        .list_metadata(&kube::api::ListParams::default().limit(1))
        .await
    {
        Ok(_) => true,
        Err(kube::Error::Api(status)) if status.code == 404 => {
            tracing::info!(
                "the NodeWright CRD (nodewrights.nodewright.nvidia.com) is not installed; admitting with Skyhooks in view only"
            );
            false
        }
        Err(error) => {
            tracing::warn!(%error, "could not list NodeWrights (grant list and watch on nodewrights and deploymentpolicies of nodewright.nvidia.com, as the chart's webhook role does, and restart the webhook); admitting with Skyhooks in view only");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[test]
    fn managed_certificate_is_issued_for_the_service_and_the_extra_names() {
        let cases: [(&[&str], &str, &[&str]); 3] = [
            (&[], "skyhook-webhook.skyhook.svc", &[]),
            (
                &["--namespace", "ops", "--service", "hook"],
                "hook.ops.svc",
                &[],
            ),
            (
                &[
                    "--cert-extra-name",
                    "127.0.0.1",
                    "--cert-extra-name",
                    "hook.local",
                ],
                "skyhook-webhook.skyhook.svc",
                &["127.0.0.1", "hook.local"],
            ),
        ];
        for (flags, service, extra_names) in cases {
            let args = Args::try_parse_from(
                std::iter::once("skyhook-webhook").chain(flags.iter().copied()),
            )
            .expect("flags parse");
            let sync = cert_sync(&args);
            assert_eq!(sync.service, service, "{flags:?}");
            assert_eq!(sync.extra_names, extra_names, "{flags:?}");
            assert_eq!(sync.secret, "webhook-cert", "{flags:?}");
        }
    }
}
