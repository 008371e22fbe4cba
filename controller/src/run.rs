//! Start-up wiring and the reconcile loop: connect to the API server, serve the endpoints, take the
//! leader Lease when asked, fill the caches, then reconcile one snapshot at a time whenever a
//! cache changes, and at least every `DEFAULT_INTERVAL`.
//!
//! Contract: only one reconcile runs at a time, always over one snapshot of the caches. A replica
//! that loses the Lease returns an error at once (the process then exits and restarts as a
//! standby). SIGTERM and Ctrl-C release the Lease and return.
//!
//! A reconcile publishes every Skyhook's metrics from its status ([`crate::report`]), lists the
//! pods of the nodes a Skyhook has cordoned (workload pods are not cached), builds the
//! [`Snapshot`], computes the pure [`plan`] and applies it ([`apply`]). It runs again on the next
//! cache change, when the plan asks for it (drains, reboot deadlines), shortly after a failed
//! write, and at least every `DEFAULT_INTERVAL`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::future;
use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::runtime::events::{Recorder, Reporter};
use kube::{Api, Client};
use skyhook_api::v1alpha1::Skyhook;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tracing::{debug, error, info, warn};

use crate::api_requests::counting_client;
use crate::cache::Caches;
use crate::config::Config;
use crate::leader::{LeaderElector, LeaseTimings};
use crate::metrics::Metrics;
use crate::reconcile::apply::{Failures, Operation, apply};
use crate::reconcile::event_budget::EventBudget;
use crate::reconcile::plan::plan;
use crate::reconcile::snapshot::Snapshot;
use crate::report::MetricsReporter;
use crate::server::{self, Readiness};

/// Runs the controller until it is stopped or loses leadership.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let mut client_config = kube::Config::infer().await.context(
        "failed to configure a Kubernetes client; run in a pod with a service account or set KUBECONFIG",
    )?;
    // kube retries 429 answers for many minutes by default. An eviction refused by a
    // PodDisruptionBudget answers 429 and must come back at once as "blocked", or the one
    // reconcile at a time would stall behind it; the reconcile loop does its own retrying.
    client_config.default_retry = false;
    let metrics = Arc::new(Metrics::new());
    let client = counting_client(client_config, metrics.clone())
        .context("failed to build a Kubernetes client from the inferred configuration")?;
    check_crd(&client).await?;

    let readiness = Arc::new(Readiness::default());
    let mut servers = JoinSet::new();
    if let Some(address) = config.metrics_addr {
        servers.spawn(server::serve(address, server::metrics(metrics.clone())));
        info!(%address, "serving /metrics");
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
        result = lead_and_reconcile(&client, &config, metrics, elector.as_ref()) => result,
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

/// Takes the Lease (when enabled), fills the caches and reconciles until leadership is lost.
async fn lead_and_reconcile(
    client: &Client,
    config: &Config,
    metrics: Arc<Metrics>,
    elector: Option<&LeaderElector>,
) -> anyhow::Result<()> {
    if let Some(elector) = elector {
        info!(identity = elector.identity(), "waiting to become leader");
        elector.acquire().await;
    }
    let changed = Arc::new(Notify::new());
    let (caches, drive) = Caches::start(client, &config.pods.namespace, changed.clone());
    let watches = tokio::spawn(drive);
    let result = async {
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
    }
    .await;
    watches.abort();
    result
}

/// How soon a reconcile runs again after a write failed.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

/// Reconciles one snapshot at a time: after every cache change, when the last plan asked for it,
/// and at least every `DEFAULT_INTERVAL`.
pub async fn reconcile_loop(
    client: &Client,
    config: &Config,
    caches: &Caches,
    changed: &Notify,
    metrics: Arc<Metrics>,
) -> Infallible {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "skyhook-controller".to_owned(),
            instance: Some(identity()),
        },
    );
    let mut reporter = MetricsReporter::new(metrics.clone());
    let mut event_budget = EventBudget::default();
    loop {
        let wait = {
            let _timer = metrics.reconcile_started();
            let cached = caches.snapshot();
            reporter.report(&cached);
            let (wait, failures) =
                reconcile_once(client, config, &recorder, &mut event_budget, &cached).await;
            failures.count_into(&metrics);
            wait
        };
        tokio::select! {
            () = changed.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Plans and applies once; returns how long to wait at most before the next reconcile, and the
/// requests that failed.
async fn reconcile_once(
    client: &Client,
    config: &Config,
    recorder: &Recorder,
    event_budget: &mut EventBudget,
    cached: &crate::cache::Snapshot,
) -> (Duration, Failures) {
    let now = jiff::Timestamp::now();
    let to_list = Snapshot::nodes_to_list(&cached.nodes);
    let mut observe_failures = Failures::default();
    let workload_pods = list_pods_on(client, &to_list, &mut observe_failures).await;
    let pdbs = if to_list.is_empty() {
        Vec::new()
    } else {
        match Api::<PodDisruptionBudget>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list.items,
            Err(error) => {
                observe_failures.record(Operation::ListPodDisruptionBudgets, "*", Err(error));
                debug!("drain reports will not name PodDisruptionBudgets this reconcile");
                Vec::new()
            }
        }
    };
    let snapshot = Snapshot::build(cached, workload_pods, pdbs, now, config.reboot_deadline);
    let mut planned = plan(&snapshot, config, now);
    for malformed in &planned.malformed_states {
        warn!(
            node = %malformed.node,
            skyhook = %malformed.skyhook,
            error = %malformed.error,
            "node state annotation cannot be parsed; rebuilding it from empty, so the Skyhook's packages run again on the node"
        );
    }
    let dropped = event_budget.admit(&mut planned.events, now);
    if dropped > 0 {
        debug!(
            dropped,
            "Normal Events over their objects' budget (client-go's 25, then one per 5 minutes)"
        );
    }
    let mut wait = config.default_interval;
    if let Some(after) = planned.requeue_after {
        wait = wait.min(after);
    }
    let failures = apply(client, recorder, &config.pods.namespace, &snapshot, planned).await;
    if !failures.is_empty() {
        wait = wait.min(RETRY_AFTER_FAILURE);
    }
    observe_failures.merge(failures);
    (wait, observe_failures)
}

/// All pods (any namespace) of each node in `nodes`. A node whose listing fails is left out, so
/// the plan waits for it instead of draining blind.
async fn list_pods_on(
    client: &Client,
    nodes: &[String],
    failures: &mut Failures,
) -> BTreeMap<String, Vec<Pod>> {
    let api = Api::<Pod>::all(client.clone());
    let mut listed = BTreeMap::new();
    for node in nodes {
        let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        match api.list(&params).await {
            Ok(list) => {
                listed.insert(node.clone(), list.items);
            }
            Err(error) => {
                failures.record(Operation::ListNodePods, node, Err(error));
            }
        }
    }
    listed
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
