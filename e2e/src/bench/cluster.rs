//! A benchmark cluster: a fresh devcluster of light nodes with the controller installed, and the
//! measurements taken around each case (controller and API server from `/proc`, the controller's
//! request counter from its `/metrics`).
//!
//! The simulated nodes and their kubelets run inside the benchmark process, so the controller's
//! and the API server's CPU seen in `/proc` exclude the package runtime by construction.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use devcluster::node::{Heartbeat, NodeSize};
use devcluster::state::{ClusterRecord, StateDir};
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::process::{self, Process};
use super::report::Requests;
use super::requests::{self, Counts, ReconcileTotals};
use crate::{Installed, Setup, install_built, skyhook_api, wait_for_skyhook_status};

/// How long one rollout may take before the case fails.
pub const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// How long the controller may take to list everything it caches, at start.
const CACHES_FILLED_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How often resident memory is sampled during a case (next to the kernel's own peak).
const RSS_SAMPLE: Duration = Duration::from_millis(500);

/// A running benchmark cluster.
pub struct BenchCluster {
    pub installed: Installed,
    pub nodes: usize,
    pub client: kube::Client,
    pub controller: Process,
    pub apiserver: Process,
    /// Names of the Skyhooks applied so far (all complete between cases).
    pub skyhooks: Vec<String>,
}

impl std::fmt::Debug for BenchCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchCluster")
            .field("installed", &self.installed)
            .field("nodes", &self.nodes)
            .field("controller", &self.controller)
            .field("apiserver", &self.apiserver)
            .field("skyhooks", &self.skyhooks)
            .finish_non_exhaustive()
    }
}

/// Readings at the start of a measured interval.
#[derive(Debug)]
pub struct Mark {
    started: Instant,
    controller_cpu: f64,
    apiserver_cpu: f64,
    /// The machine's (busy, total) CPU seconds.
    machine_cpu: (f64, f64),
    requests: Counts,
    /// The API server's counts, every client's.
    all_requests: Counts,
    reconciles: ReconcileTotals,
    peak_reset: bool,
    sampled_peak_kib: Arc<AtomicU64>,
    sampler: tokio::task::JoinHandle<()>,
}

/// What happened between a [`Mark`] and the end of the interval.
#[derive(Debug, Clone)]
pub struct Interval {
    pub seconds: f64,
    pub controller_cpu_seconds: f64,
    pub controller_peak_rss_mib: f64,
    pub apiserver_cpu_seconds: f64,
    /// Share of the whole machine's CPU time that was busy (every process, every core).
    pub machine_busy_percent: f64,
    pub requests: Requests,
    /// Every client's requests, from the API server's counter.
    pub all_requests: Requests,
    pub reconciles: ReconcileTotals,
}

impl BenchCluster {
    /// Starts `nodes` light nodes (agentless agent image) and the controller. The nodes renew
    /// their leases every 60 s ([`Heartbeat::RELAXED`]): at 5,000 nodes the kubelet default would
    /// be 500 lease writes a second, most of a two-core machine's API server, and nodes missing
    /// their renewals would be tainted unreachable and block the rollout being measured.
    pub async fn start(nodes: usize, node_size: NodeSize) -> anyhow::Result<Self> {
        let setup = Setup {
            heartbeat: Heartbeat::RELAXED,
            node_size,
            ..Setup::agentless(nodes)
        };
        let installed = install_built(setup).await.with_context(|| {
            format!("starting a devcluster of {nodes} light {node_size:?} nodes")
        })?;
        let client = installed.cluster.client()?;
        let state = StateDir::new(installed.cluster.state_dir());
        let record = ClusterRecord::read(&state.cluster_info())
            .with_context(|| format!("reading {}", state.cluster_info().display()))?
            .with_context(|| format!("no cluster record in {}", state.cluster_info().display()))?;
        let apiserver = *record.components.get("kube-apiserver").with_context(|| {
            format!(
                "no kube-apiserver pid in {}",
                state.cluster_info().display()
            )
        })?;
        let controller = Process {
            pid: installed.controller.record().pid,
        };
        let cluster = Self {
            installed,
            nodes,
            client,
            controller,
            apiserver: Process { pid: apiserver },
            skyhooks: Vec::new(),
        };
        cluster.until_caches_filled().await?;
        Ok(cluster)
    }

    /// Waits until the controller has filled its caches (see [`requests::caches_filled`]).
    async fn until_caches_filled(&self) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let (counts, _) = self.scrape().await?;
            if requests::caches_filled(&counts) {
                return Ok(());
            }
            if started.elapsed() > CACHES_FILLED_TIMEOUT {
                bail!(
                    "the controller did not start all its watches within {CACHES_FILLED_TIMEOUT:?} (requests so far: {counts:?})\nlast lines of its log:\n{}",
                    self.installed.controller_log_tail(20)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The controller's request counters and reconcile totals.
    async fn scrape(&self) -> anyhow::Result<(Counts, ReconcileTotals)> {
        let samples = crate::metrics::scrape(self.installed.metrics_port()).await?;
        Ok((requests::counts(&samples), ReconcileTotals::of(&samples)))
    }

    /// The API server's request counters (`GET /metrics` as the cluster's administrator).
    async fn scrape_apiserver(&self) -> anyhow::Result<Counts> {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .context("building GET /metrics")?;
        let text = self
            .client
            .request_text(request)
            .await
            .context("scraping the API server's /metrics")?;
        Ok(requests::apiserver_counts(&crate::metrics::parse(&text)))
    }

    /// Starts a measured interval.
    pub async fn mark(&self) -> anyhow::Result<Mark> {
        let peak_reset = self.controller.reset_peak_rss();
        let sampled_peak_kib = Arc::new(AtomicU64::new(0));
        let sampler = {
            let peak = sampled_peak_kib.clone();
            let controller = self.controller;
            tokio::spawn(async move {
                loop {
                    if let Ok(mib) = controller.rss_mib() {
                        peak.fetch_max((mib * 1024.0) as u64, Ordering::Relaxed);
                    }
                    tokio::time::sleep(RSS_SAMPLE).await;
                }
            })
        };
        let (requests, reconciles) = self.scrape().await?;
        let all_requests = self.scrape_apiserver().await?;
        Ok(Mark {
            requests,
            all_requests,
            reconciles,
            controller_cpu: self.controller.cpu_seconds()?,
            apiserver_cpu: self.apiserver.cpu_seconds()?,
            machine_cpu: process::machine_cpu()?,
            started: Instant::now(),
            peak_reset,
            sampled_peak_kib,
            sampler,
        })
    }

    /// Ends the interval started by `mark`.
    pub async fn measure(&self, mark: Mark) -> anyhow::Result<Interval> {
        let seconds = mark.started.elapsed().as_secs_f64();
        let controller_cpu = self.controller.cpu_seconds()?;
        let apiserver_cpu = self.apiserver.cpu_seconds()?;
        let (busy, total) = process::machine_cpu()?;
        let (after, reconciles) = self.scrape().await?;
        let all_after = self.scrape_apiserver().await?;
        mark.sampler.abort();
        let sampled = mark.sampled_peak_kib.load(Ordering::Relaxed) as f64 / 1024.0;
        let kernel_peak = if mark.peak_reset {
            self.controller.peak_rss_mib()?
        } else {
            0.0
        };
        Ok(Interval {
            seconds,
            controller_cpu_seconds: controller_cpu - mark.controller_cpu,
            controller_peak_rss_mib: kernel_peak.max(sampled),
            apiserver_cpu_seconds: apiserver_cpu - mark.apiserver_cpu,
            machine_busy_percent: 100.0 * (busy - mark.machine_cpu.0)
                / (total - mark.machine_cpu.1).max(f64::MIN_POSITIVE),
            requests: requests::between(&mark.requests, &after),
            all_requests: requests::between(&mark.all_requests, &all_after),
            reconciles: reconciles.since(mark.reconciles),
        })
    }

    /// Applies a Skyhook manifest (server-side apply) and waits until it is `complete`.
    pub async fn apply_and_complete(&mut self, manifest: &Value) -> anyhow::Result<()> {
        let name = manifest["metadata"]["name"]
            .as_str()
            .context("the manifest has no metadata.name")?
            .to_owned();
        skyhook_api(&self.client)
            .patch(&name, &PatchParams::apply("bench"), &Patch::Apply(manifest))
            .await
            .with_context(|| format!("applying Skyhook {name}"))?;
        let waited =
            wait_for_skyhook_status(&self.client, &name, "complete", ROLLOUT_TIMEOUT).await;
        if let Err(error) = waited {
            bail!(
                "{error:#}\nlast lines of the controller's log:\n{}",
                self.installed.controller_log_tail(20)
            );
        }
        self.skyhooks.push(name);
        Ok(())
    }
}
