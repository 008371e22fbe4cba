//! One reconcile, as a pipeline over one copy of the caches, in this order:
//!
//! 1. [`observe`]: list what the caches do not hold (the pods of cordoned nodes, the
//!    PodDisruptionBudgets), concurrently;
//! 2. [`snapshot`]: reduce the caches and the listings to the plain data the rules read,
//!    classifying each package pod's outcome at one time;
//! 3. [`plan`]: decide, purely, every write of the reconcile; [`event_budget`] then thins its
//!    Events as client-go's recorder would;
//! 4. [`apply`]: carry the plan out in a safe order, recording the writes that failed, and queue
//!    its Events for [`event_sender`], which publishes them in the background; [`job_logs`]
//!    reads the logs the plan copies onto stuck stage Jobs;
//! 5. [`report`]: publish each Skyhook's metrics and count the failed requests.
//!
//! [`Reconciler::reconcile`] runs the five steps in a `reconcile` tracing span and returns how
//! long the next reconcile may wait and the writes the caches must show before it starts.

/// 1. What the caches do not hold.
pub mod observe;

/// 2. The plain data the rules read.
pub mod snapshot;

/// 3. Every write, decided purely.
pub mod plan;

/// 3b. Events thinned across reconciles.
pub mod event_budget;

/// 4. The writes, carried out.
pub mod apply;

/// 4a. The logs a stuck stage Job keeps (read while applying).
pub mod job_logs;

/// 4b. Events, published off the reconcile's path.
pub mod event_sender;
pub mod event_series;

/// 5. Metrics.
pub mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use skyhook_api::conditions::LongList;
use tracing::{Instrument as _, debug, info, info_span, warn};

use crate::cache::CachedObjects;
use crate::cache::own_writes::OwnWrite;
use crate::config::Config;
use crate::drain::refusals::EvictionRefusals;
use crate::metrics::Metrics;
use event_budget::EventBudget;
use event_sender::EventSender;
use report::MetricsReporter;
use snapshot::Snapshot;

/// How soon a reconcile runs again after a request failed.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

/// What one reconcile leaves for the loop.
#[derive(Debug)]
pub struct Reconciled {
    /// How long the next reconcile may wait at most.
    pub wait: Duration,
    /// The writes that landed: the next reconcile waits until the caches show them.
    pub writes: Vec<OwnWrite>,
    /// How long each step took, for the logs.
    pub timings: Timings,
}

/// How long the steps of one reconcile took.
#[derive(Debug, Default, Clone, Copy)]
pub struct Timings {
    /// Listing what the caches do not hold.
    pub observe: Duration,
    /// Reducing the caches and listings to the snapshot.
    pub snapshot: Duration,
    /// Planning, and thinning the plan's Events.
    pub plan: Duration,
    /// Carrying the plan out.
    pub apply: Duration,
}

/// Runs reconciles one at a time, keeping what lasts between them: the Event budget and the
/// Skyhooks with published metrics.
pub struct Reconciler {
    client: Client,
    config: Config,
    events: EventSender,
    metrics: Arc<Metrics>,
    event_budget: EventBudget,
    reporter: MetricsReporter,
    /// Evictions PodDisruptionBudgets refused, per node: held between reconciles (in memory,
    /// as upstream's retry timer) so that a refused node waits while others go on.
    refusals: EvictionRefusals,
    /// The (Skyhook, node) pairs protected pods held in the last plan, so that the next one
    /// announces only new holds; `None` until the first plan (see
    /// [`Snapshot::non_interrupt_held`]).
    non_interrupt_held: Option<BTreeSet<(String, String)>>,
    /// The last plan's picks that reached neither node nor status ([`Snapshot::lost_picks`]).
    lost_picks: snapshot::LostPicks,
}

impl std::fmt::Debug for Reconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconciler")
            .field("event_budget", &self.event_budget)
            .finish_non_exhaustive()
    }
}

impl Reconciler {
    /// A reconciler writing with `client`, queueing Events to `events` and publishing metrics
    /// into `metrics`.
    pub fn new(client: Client, config: Config, events: EventSender, metrics: Arc<Metrics>) -> Self {
        Reconciler {
            client,
            config,
            events,
            reporter: MetricsReporter::new(metrics.clone()),
            metrics,
            event_budget: EventBudget::default(),
            refusals: EvictionRefusals::default(),
            non_interrupt_held: None,
            lost_picks: snapshot::LostPicks::new(),
        }
    }

    /// One reconcile over `cached`.
    pub async fn reconcile(&mut self, cached: &CachedObjects) -> Reconciled {
        let span = info_span!(
            "reconcile",
            skyhooks = cached.skyhooks.len(),
            nodes = cached.nodes.len()
        );
        self.pipeline(cached).instrument(span).await
    }

    async fn pipeline(&mut self, cached: &CachedObjects) -> Reconciled {
        let _timer = self.metrics.reconcile_started();
        let now = jiff::Timestamp::now();
        let started = Instant::now();
        let observe::Observed {
            workload_pods,
            pdbs,
            mut failures,
        } = observe::observe(&self.client, cached).await;
        let observed = Instant::now();
        let mut snapshot = Snapshot::build(
            cached,
            workload_pods,
            pdbs,
            now,
            self.config.reboot_deadline,
        );
        // A node no longer listed is no longer being drained: its refusals are forgotten.
        self.refusals
            .retain(|node| snapshot.workload_pods.contains_key(node));
        snapshot.refusals = self.refusals.clone();
        snapshot.non_interrupt_held = self.non_interrupt_held.take();
        snapshot.lost_picks = std::mem::take(&mut self.lost_picks);
        let built = Instant::now();
        let mut planned = plan::plan(&snapshot, &self.config, now);
        debug!(plan = ?planned, "planned");
        log_malformed_states(&planned.malformed_states);
        log_long_node_lists(&planned.long_node_lists);
        log_new_non_interrupt_holds(&planned.non_interrupt_holds);
        self.non_interrupt_held = Some(planned.non_interrupt_holds.keys().cloned().collect());
        let dropped = self.event_budget.admit(&mut planned.events, now);
        if dropped > 0 {
            debug!(
                dropped,
                "Normal Events over their objects' budget (client-go's 25, then one per 5 minutes)"
            );
        }
        let mut wait = self.config.default_interval;
        if let Some(after) = planned.requeue_after {
            wait = wait.min(after);
        }
        let namespace = &self.config.pods.namespace;
        let planned_at = Instant::now();
        let applied = apply::apply(&self.client, &self.events, namespace, &snapshot, planned).await;
        let timings = Timings {
            observe: observed - started,
            snapshot: built - observed,
            plan: planned_at - built,
            apply: planned_at.elapsed(),
        };
        self.refusals.record(&applied.evictions, now);
        self.lost_picks = applied.lost_picks;
        failures.merge(applied.failures);
        for landed in &applied.stage_durations {
            let finished = &landed.finished;
            self.metrics.observe_stage_duration(
                snapshot.owners.group_of(&landed.skyhook),
                &landed.skyhook,
                (&finished.package, finished.stage),
                finished.seconds,
            );
        }
        if !failures.is_empty() {
            wait = wait.min(RETRY_AFTER_FAILURE);
        }
        self.reporter.report(&snapshot, &cached.nodes);
        failures.count_into(&self.metrics);
        Reconciled {
            wait,
            writes: applied.writes,
            timings,
        }
    }
}

fn log_malformed_states(malformed: &[plan::MalformedNodeState]) {
    for malformed in malformed {
        warn!(
            node = %malformed.node,
            skyhook = %malformed.skyhook,
            error = %malformed.error,
            "node state annotation cannot be parsed; the Skyhook skips the node until the annotation is repaired or deleted"
        );
    }
}

/// Every pod of each hold this plan announces: the node's Event lists at most ten ("list
/// truncated; see controller logs").
fn log_new_non_interrupt_holds(holds: &BTreeMap<(String, String), plan::NonInterruptHold>) {
    for ((skyhook, node), hold) in holds.iter().filter(|(_, hold)| hold.announced) {
        info!(
            %skyhook,
            %node,
            package = %hold.package,
            count = hold.pods.len(),
            pods = %hold.pods.join(", "),
            "pods matching podNonInterruptLabels hold the node"
        );
    }
}

/// The node lists a Skyhook condition's message leaves out ("list truncated; see controller
/// logs").
fn log_long_node_lists(lists: &[(String, LongList)]) {
    for (skyhook, list) in lists {
        info!(
            %skyhook,
            condition = list.condition,
            group = %list.group,
            count = list.nodes.len(),
            nodes = %list.nodes.join(", "),
            "nodes left out of the condition's message"
        );
    }
}
