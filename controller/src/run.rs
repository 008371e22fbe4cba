//! Start-up wiring and the reconcile loop: connect to the API server, serve the endpoints, take the
//! leader Lease when asked, fill the caches, then reconcile one snapshot at a time whenever a
//! cache changes, and at least every `DEFAULT_INTERVAL`.
//!
//! Contract: only one reconcile runs at a time, always over one snapshot of the caches. A replica
//! that loses the Lease returns an error at once (the process then exits and restarts as a
//! standby), and so does one whose watches stopped (a panic while decoding an event): it must not
//! reconcile over caches that no longer change. SIGTERM and Ctrl-C release the Lease and return.
//!
//! Each reconcile is the pipeline of [`crate::reconcile`] (observe, snapshot, plan, apply,
//! report). It runs again on the next cache change, when the plan asks for it (drains, reboot
//! deadlines), shortly after a failed request, and at least every `DEFAULT_INTERVAL`.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::future;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::ListParams;
use kube::runtime::events::Reporter;
use kube::{Api, Client};
use skyhook_api::generation::Group;
use skyhook_api::nodewright_v1alpha1::NodeWright;
use skyhook_api::v1alpha1::Skyhook;
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, error, info, warn};

use crate::api_requests::counting_client;
use crate::cache::Caches;
use crate::config::{Config, MetricsEndpoint};
use crate::leader::{LeaderElector, LeaseTimings};
use crate::metrics::Metrics;
use crate::reconcile::Reconciler;
use crate::reconcile::event_series::EventRecorder;
use crate::server::{self, Readiness};

/// How long a response may send nothing before its connection counts as dead (counted from the
/// request, not from when its pooled connection went idle). The watches run for as long as the
/// API server allows (see `crate::cache`), and this is how one whose connection died silently
/// is noticed and started again: the API server sends every watch a bookmark about once a
/// minute however quiet its objects are, so a healthy watch never goes this long without a read,
/// and no request the controller makes takes this long to start answering.
pub const READ_TIMEOUT: Duration = Duration::from_secs(290);

/// Runs the controller until it is stopped or loses leadership.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let mut client_config = kube::Config::infer().await.context(
        "failed to configure a Kubernetes client; run in a pod with a service account or set KUBECONFIG",
    )?;
    // kube retries 429 answers for many minutes by default. An eviction refused by a
    // PodDisruptionBudget answers 429 and must come back at once as "blocked", or the one
    // reconcile at a time would stall behind it; the reconcile loop does its own retrying.
    client_config.default_retry = false;
    client_config.read_timeout = Some(READ_TIMEOUT);
    client_config.reset_reader_on_write = true;
    let metrics = Arc::new(Metrics::new(config.publish_legacy_metrics));
    let client = counting_client(client_config, metrics.clone())
        .context("failed to build a Kubernetes client from the inferred configuration")?;
    check_crd(&client).await?;
    let groups = served_groups(&client).await?;

    let readiness = Arc::new(Readiness::default());
    let mut servers = JoinSet::new();
    match config.metrics_addr {
        Some(MetricsEndpoint {
            address,
            secure: true,
        }) => {
            // Made before serving so that a broken TLS setup stops the start, not the first scrape.
            let tls = server::self_signed_tls()?;
            servers.spawn(server::serve_tls(
                address,
                tls,
                server::secure_metrics(metrics.clone(), client.clone()),
            ));
            info!(%address, "serving /metrics over HTTPS to readers allowed to get /metrics");
        }
        Some(MetricsEndpoint {
            address,
            secure: false,
        }) => {
            servers.spawn(server::serve(address, server::metrics(metrics.clone())));
            info!(%address, "serving /metrics over plain HTTP");
        }
        None => {}
    }
    if let Some(address) = config.probe_addr {
        servers.spawn(server::serve(address, server::probes(readiness.clone())));
        info!(%address, "serving /healthz and /readyz");
    }
    readiness.set_ready();

    let elector = config.leader_election.then(|| {
        LeaderElector::new(
            Api::<Lease>::namespaced(client.clone(), &config.pods.namespace),
            identity(),
            LeaseTimings::default(),
        )
    });

    let servers_failed = async {
        match servers.join_next().await {
            Some(Ok(Err(error))) => anyhow::Error::new(error),
            Some(Err(panic)) => anyhow::Error::new(panic).context("an HTTP server task failed"),
            Some(Ok(Ok(()))) | None => future::pending().await,
        }
    };
    let outcome = tokio::select! {
        result = lead_and_reconcile(&client, &config, &groups, metrics, elector.as_ref()) => result,
        error = servers_failed => Err(error),
        () = shutdown_signal() => {
            info!("shutting down");
            Ok(())
        }
    };
    if let Some(elector) = &elector {
        elector.release().await;
    }
    outcome
}

/// Fails with a clear message when the Skyhook CRD is not installed or not readable.
async fn check_crd(client: &Client) -> anyhow::Result<()> {
    let skyhooks = Api::<Skyhook>::all(client.clone());
    match skyhooks.list(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(anyhow::anyhow!(
            "the Skyhook CRD (skyhooks.skyhook.nvidia.com) is not installed; apply chart/crds before starting the controller"
        )),
        Err(error) => Err(anyhow::Error::new(error).context(
            "failed to list Skyhooks; check the API server address and the controller's RBAC",
        )),
    }
}

/// The API groups whose objects the controller watches: the skyhook group (whose CRD
/// [`check_crd`] requires), and the nodewright group where the API server serves it and the
/// controller may list it. The groups are read once, at start: a NodeWright CRD installed later
/// is watched from the controller's next start (`helm upgrade` installs it and restarts the
/// controller in one step).
async fn served_groups(client: &Client) -> anyhow::Result<Vec<Group>> {
    let nodewrights = Api::<NodeWright>::all(client.clone());
    match nodewrights
        .list_metadata(&ListParams::default().limit(1))
        .await
    {
        Ok(_) => Ok(vec![Group::Skyhook, Group::NodeWright]),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            info!(
                group = Group::NodeWright.name(),
                "the NodeWright CRD (nodewrights.nodewright.nvidia.com) is not installed; serving Skyhooks only"
            );
            Ok(vec![Group::Skyhook])
        }
        // A chart of an earlier release: its role does not cover the group.
        Err(kube::Error::Api(status)) if status.code == 403 => {
            warn!(
                group = Group::NodeWright.name(),
                "the controller may not list NodeWrights; serving Skyhooks only. Grant list and watch on nodewrights.nodewright.nvidia.com (the chart's controller role does) and restart the controller"
            );
            Ok(vec![Group::Skyhook])
        }
        // Starting without the group would ignore the NodeWrights that exist.
        Err(error) => Err(anyhow::Error::new(error).context(
            "failed to list NodeWrights; check the API server address and the controller's RBAC",
        )),
    }
}

/// Takes the Lease (when enabled), fills the caches and reconciles until leadership is lost.
async fn lead_and_reconcile(
    client: &Client,
    config: &Config,
    groups: &[Group],
    metrics: Arc<Metrics>,
    elector: Option<&LeaderElector>,
) -> anyhow::Result<()> {
    if let Some(elector) = elector {
        info!(identity = elector.identity(), "waiting to become leader");
        elector.acquire().await;
    }
    let changed = Arc::new(Notify::new());
    let (caches, drive) = Caches::start(client, &config.pods.namespace, groups, changed.clone());
    let watches = tokio::spawn(drive);
    let lead = async {
        caches
            .wait_ready()
            .await
            .context("the caches stopped before their first listing")?;
        info!("caches synced");
        let lost = async {
            match elector {
                Some(elector) => elector.hold().await,
                None => future::pending().await,
            }
        };
        tokio::select! {
            error = lost => Err(anyhow::Error::new(error)),
            never = reconcile_loop(client, config, &caches, &changed, metrics) => match never {},
        }
    };
    while_watching(watches, lead).await
}

/// Runs `lead` for as long as `watches` keeps the caches current, and stops the watches when
/// `lead` returns. Reconciling over caches that no longer follow the cluster would act on stale
/// state, so the end of the watches (a panic in one) ends the controller with an error, and it
/// restarts with fresh caches.
async fn while_watching<T>(
    mut watches: JoinHandle<()>,
    lead: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let result = tokio::select! {
        ended = &mut watches => Err(match ended {
            Err(failed) => anyhow::Error::new(failed),
            Ok(()) => anyhow::anyhow!("the watches ended"),
        }
        .context("the caches no longer follow the cluster; restarting to list everything again")),
        result = lead => result,
    };
    watches.abort();
    result
}

/// How long a reconcile waits at most for the caches to show the previous one's writes (see
/// [`crate::cache::own_writes`]): far above a healthy watch's delay, short enough that a lost
/// event costs little.
const OWN_WRITES_BOUND: Duration = Duration::from_secs(5);

/// Reconciles one copy of the caches at a time, each once the caches show the previous one's
/// writes: after every cache change, when the last plan asked for it, and at least every
/// `DEFAULT_INTERVAL`.
pub async fn reconcile_loop(
    client: &Client,
    config: &Config,
    caches: &Caches,
    changed: &Notify,
    metrics: Arc<Metrics>,
) -> Infallible {
    let recorder = EventRecorder::new(
        client.clone(),
        Reporter {
            controller: "skyhook-controller".to_owned(),
            instance: Some(identity()),
        },
    );
    let events = crate::reconcile::event_sender::EventSender::spawn(recorder);
    let mut reconciler = Reconciler::new(client.clone(), config.clone(), events, metrics);
    loop {
        let reconciled = reconciler.reconcile(&caches.objects()).await;
        let writes = reconciled.writes.len();
        let applied = Instant::now();
        if let Err(unseen) = caches
            .until_shown(reconciled.writes, OWN_WRITES_BOUND)
            .await
        {
            info!(
                unseen,
                "the caches did not show every write of the last reconcile in time; reconciling on"
            );
        }
        let timings = reconciled.timings;
        debug!(
            writes,
            observe_ms = timings.observe.as_millis(),
            snapshot_ms = timings.snapshot.as_millis(),
            plan_ms = timings.plan.as_millis(),
            apply_ms = timings.apply.as_millis(),
            until_shown_ms = applied.elapsed().as_millis(),
            "reconciled"
        );
        tokio::select! {
            () = changed.notified() => {}
            () = tokio::time::sleep(reconciled.wait) => {}
        }
    }
}

/// This replica's identity in the Lease: the pod name (hostname) and a per-process suffix, so a
/// restarted process never mistakes its predecessor's Lease for its own.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|name| name.trim().to_owned())
        })
        .unwrap_or_else(|| "skyhook-controller".to_owned());
    format!(
        "{host}_{}_{}",
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond()
    )
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                error!(error = %error, "failed to listen for SIGTERM");
                future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_panicking_watch_ends_the_controller() {
        let watches = tokio::spawn(async { panic!("decoder bug") });
        let outcome: anyhow::Result<()> = while_watching(watches, future::pending()).await;
        let error = format!("{:#}", outcome.expect_err("the controller must stop"));
        assert!(
            error.contains("no longer follow the cluster") && error.contains("decoder bug"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn the_watches_stop_when_the_controller_does() {
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let stopped = Arc::new(AtomicBool::new(false));
        let guard = SetOnDrop(stopped.clone());
        let watches = tokio::spawn(async move {
            let _guard = guard;
            future::pending::<()>().await;
        });
        let outcome = while_watching(watches, async { Ok(7) }).await;
        assert_eq!(outcome.ok(), Some(7));
        // An aborted task is dropped at its next poll; yield until the runtime has done it.
        for _ in 0..100 {
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the watches were left running");
    }
}
