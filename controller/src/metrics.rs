//! Prometheus metrics: upstream's per-Skyhook gauges with upstream's names and labels (spec
//! §2.13), and the controller's own reconcile counters and latency.
//!
//! Contract:
//! * [`skyhook_series`] is pure: from a Skyhook (its spec packages and its status), the status
//!   and node state of each node it targets ([`NodeReadings`]), the number of nodes it targets
//!   and the strategy of each compartment, it computes the complete set of series upstream
//!   publishes for it: every status, node status, package state and package stage, zeros
//!   included.
//! * [`Metrics::publish`] replaces what was published for that Skyhook, removing label sets that
//!   disappeared (a package version that left the spec, a compartment that was removed), and
//!   [`Metrics::remove`] deletes every series of a deleted Skyhook, as upstream's e2e tests check.
//! * Labels are bounded: Skyhook, package, version, compartment and policy names come from the
//!   cluster's own objects, and statuses, states, stages and strategies from fixed enums. No node
//!   name, pod name or error text is ever a label. Reconcile failures are labelled by a fixed
//!   category.
//!
//! Deliberate difference: upstream set each package's state and stage gauges inside one nested
//! loop, so a state count held only the count of the last stage seen; here each is a true count.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use skyhook_api::keys;
use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::{
    PackageStatus, Skyhook, SkyhookStatus, Stage, State, Status, StrategyKind,
};

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels `skyhook_name`.
#[derive(Debug, Clone, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SkyhookLabels {
    /// The Skyhook.
    pub skyhook_name: String,
}

/// Labels `skyhook_name`, `status`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    /// The Skyhook.
    pub skyhook_name: String,
    /// A [`Status`] value.
    pub status: String,
}

/// Labels `skyhook_name`, `package_name`, `package_version`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct PackageLabels {
    /// The Skyhook.
    pub skyhook_name: String,
    /// The package.
    pub package_name: String,
    /// The package version.
    pub package_version: String,
}

/// Labels of the package state gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PackageStateLabels {
    /// The Skyhook.
    pub skyhook_name: String,
    /// The package.
    pub package_name: String,
    /// The package version.
    pub package_version: String,
    /// A [`State`] value.
    pub state: String,
}

/// Labels of the package stage gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PackageStageLabels {
    /// The Skyhook.
    pub skyhook_name: String,
    /// The package.
    pub package_name: String,
    /// The package version.
    pub package_version: String,
    /// A [`Stage`] value.
    pub stage: String,
}

/// Labels of the rollout gauges.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct RolloutLabels {
    /// The Skyhook.
    pub skyhook_name: String,
    /// The DeploymentPolicy, or `legacy` without one.
    pub policy_name: String,
    /// The compartment, `__default__` for the default one.
    pub compartment_name: String,
    /// `fixed`, `linear`, `exponential` or `unknown`.
    pub strategy: String,
}

/// Labels of the stage duration histogram.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageDurationLabels {
    /// The Skyhook.
    pub skyhook_name: String,
    /// The package (no version: a rollout's durations stay one series across versions).
    pub package_name: String,
    /// The [`Stage`] that finished.
    pub stage: &'static str,
}

/// Labels of the reconcile failure counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CategoryLabels {
    /// A fixed error category.
    pub category: &'static str,
}

/// Labels of the controller's API request counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiRequestLabels {
    /// A Kubernetes verb (fixed set).
    pub verb: &'static str,
    /// The resource, with its subresource (`skyhooks/status`).
    pub resource: String,
}

/// The values of the eight rollout gauges of one compartment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RolloutValues {
    /// `skyhook_rollout_matched_nodes`.
    pub matched: i64,
    /// `skyhook_rollout_ceiling`.
    pub ceiling: i64,
    /// `skyhook_rollout_in_progress`.
    pub in_progress: i64,
    /// `skyhook_rollout_completed`.
    pub completed: i64,
    /// `skyhook_rollout_progress_percent`.
    pub progress_percent: i64,
    /// `skyhook_rollout_current_batch` (0 without batch state).
    pub current_batch: i64,
    /// `skyhook_rollout_consecutive_failures`.
    pub consecutive_failures: i64,
    /// `skyhook_rollout_should_stop` (1 when stopped).
    pub should_stop: i64,
}

/// Every series upstream publishes for one Skyhook.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkyhookSeries {
    /// `skyhook_status`: 1 for the current status, 0 for every other.
    pub status: Vec<(StatusLabels, i64)>,
    /// `skyhook_node_status_count`: nodes per status.
    pub node_status: Vec<(StatusLabels, i64)>,
    /// `skyhook_node_target_count`.
    pub target_count: (SkyhookLabels, i64),
    /// `skyhook_package_state_count`: nodes per spec package and state.
    pub package_state: Vec<(PackageStateLabels, i64)>,
    /// `skyhook_package_stage_count`: nodes per spec package and stage.
    pub package_stage: Vec<(PackageStageLabels, i64)>,
    /// `skyhook_package_restarts_count`: restarts summed over nodes per spec package.
    pub package_restarts: Vec<(PackageLabels, i64)>,
    /// `skyhook_rollout_*`, one entry per compartment with a status.
    pub rollout: Vec<(RolloutLabels, RolloutValues)>,
    /// `skyhook_drain_blocked`: 1 while a drain is blocked past its timeout (ours).
    pub drain_blocked: (SkyhookLabels, i64),
    /// `skyhook_readiness_gate_held`: 1 while readiness gates hold nodes (ours).
    pub readiness_gate_held: (SkyhookLabels, i64),
    /// `skyhook_readiness_gate_timed_out`: 1 while a held node is past a gate's timeout (ours).
    pub readiness_gate_timed_out: (SkyhookLabels, i64),
    /// `skyhook_topology_budget_held`: 1 while a budget's topology holds nodes back (ours).
    pub topology_budget_held: (SkyhookLabels, i64),
    /// `skyhook_pre_pull_held`: 1 while nodes wait, uncordoned, for their images (ours).
    pub pre_pull_held: (SkyhookLabels, i64),
    /// `skyhook_pre_pull_failed`: 1 while an image cannot be pulled on a held node (ours).
    pub pre_pull_failed: (SkyhookLabels, i64),
}

/// What the node and package counts of a Skyhook's series count: the status and the node
/// state of each node it targets. The controller reads them from the nodes' annotations, since
/// past a few thousand nodes the status no longer mirrors them; the states are borrowed where
/// the status still mirrors them, so a reconcile does not copy the Skyhook to count them.
#[derive(Debug, Clone, Default)]
pub struct NodeReadings<'a> {
    /// The status of each node.
    pub statuses: Vec<Status>,
    /// The node state of each node.
    pub states: Vec<Cow<'a, NodeState>>,
}

impl<'a> NodeReadings<'a> {
    /// The readings of a status that mirrors every node (`nodeStatus` and `nodeState`).
    pub fn mirrored(status: Option<&'a SkyhookStatus>) -> Self {
        status.map_or_else(Self::default, |status| NodeReadings {
            statuses: status.node_status.values().copied().collect(),
            states: status.node_state.values().map(Cow::Borrowed).collect(),
        })
    }
}

/// Computes the series of `skyhook`, whose targeted nodes read `nodes`, which targets
/// `target_nodes` nodes and whose compartments use `strategies` (compartments absent from it are
/// labelled `unknown`).
pub fn skyhook_series(
    skyhook: &Skyhook,
    nodes: &NodeReadings<'_>,
    target_nodes: usize,
    strategies: &BTreeMap<String, StrategyKind>,
) -> SkyhookSeries {
    let name = skyhook.metadata.name.clone().unwrap_or_default();
    let no_status = SkyhookStatus::default();
    let status = skyhook.status.as_ref().unwrap_or(&no_status);
    let mut series = SkyhookSeries {
        status: status_series(&name, status.status.unwrap_or(Status::Unknown)),
        node_status: node_status_series(&name, &nodes.statuses),
        target_count: (
            SkyhookLabels {
                skyhook_name: name.clone(),
            },
            count_i64(target_nodes),
        ),
        rollout: rollout_series(skyhook, &name, status, strategies),
        drain_blocked: (
            SkyhookLabels {
                skyhook_name: name.clone(),
            },
            i64::from(status.conditions.iter().any(|c| {
                c.type_ == skyhook_api::keys::SKYHOOK.condition_drain_blocked && c.status == "True"
            })),
        ),
        ..SkyhookSeries::default()
    };
    let gate = status.conditions.iter().find(|c| {
        c.type_ == skyhook_api::keys::SKYHOOK.condition_readiness_gate_held && c.status == "True"
    });
    let labels = || SkyhookLabels {
        skyhook_name: name.clone(),
    };
    series.readiness_gate_held = (labels(), i64::from(gate.is_some()));
    series.readiness_gate_timed_out = (
        labels(),
        i64::from(
            gate.is_some_and(|c| c.reason == skyhook_api::keys::READINESS_GATE_TIMED_OUT_REASON),
        ),
    );
    let topology_held = status.conditions.iter().any(|c| {
        c.type_ == skyhook_api::keys::SKYHOOK.condition_topology_budget_held && c.status == "True"
    });
    series.topology_budget_held = (labels(), i64::from(topology_held));
    let pre_pull = status.conditions.iter().find(|c| {
        c.type_ == skyhook_api::keys::SKYHOOK.condition_pre_pull_held && c.status == "True"
    });
    series.pre_pull_held = (labels(), i64::from(pre_pull.is_some()));
    series.pre_pull_failed = (
        labels(),
        i64::from(pre_pull.is_some_and(|c| c.reason == skyhook_api::keys::PRE_PULL_FAILED_REASON)),
    );
    for package in skyhook.spec.packages.values() {
        let entries: Vec<&PackageStatus> = nodes
            .states
            .iter()
            .filter_map(|node| node.get_version(&package.name, &package.version))
            .collect();
        let labels = PackageLabels {
            skyhook_name: name.clone(),
            package_name: package.name.clone(),
            package_version: package.version.clone(),
        };
        series
            .package_state
            .extend(package_state_series(&labels, &entries));
        series
            .package_stage
            .extend(package_stage_series(&labels, &entries));
        let restarts = entries.iter().map(|entry| i64::from(entry.restarts)).sum();
        series.package_restarts.push((labels, restarts));
    }
    series
}

/// `skyhook_status`: 1 for `current`, 0 for every other status.
fn status_series(name: &str, current: Status) -> Vec<(StatusLabels, i64)> {
    Status::ALL
        .iter()
        .map(|s| {
            (
                StatusLabels {
                    skyhook_name: name.to_owned(),
                    status: s.as_str().to_owned(),
                },
                i64::from(*s == current),
            )
        })
        .collect()
}

/// `skyhook_node_status_count`: the nodes of each status, zeros included.
fn node_status_series(name: &str, statuses: &[Status]) -> Vec<(StatusLabels, i64)> {
    Status::ALL
        .iter()
        .map(|s| {
            let count = statuses.iter().filter(|value| *value == s).count();
            (
                StatusLabels {
                    skyhook_name: name.to_owned(),
                    status: s.as_str().to_owned(),
                },
                count_i64(count),
            )
        })
        .collect()
}

/// `skyhook_package_state_count` of one package: its node-state `entries` per state.
fn package_state_series(
    labels: &PackageLabels,
    entries: &[&PackageStatus],
) -> Vec<(PackageStateLabels, i64)> {
    State::ALL
        .iter()
        .map(|state| {
            let count = entries.iter().filter(|entry| entry.state == *state).count();
            (
                PackageStateLabels {
                    skyhook_name: labels.skyhook_name.clone(),
                    package_name: labels.package_name.clone(),
                    package_version: labels.package_version.clone(),
                    state: state.as_str().to_owned(),
                },
                count_i64(count),
            )
        })
        .collect()
}

/// `skyhook_package_stage_count` of one package: its node-state `entries` per stage.
fn package_stage_series(
    labels: &PackageLabels,
    entries: &[&PackageStatus],
) -> Vec<(PackageStageLabels, i64)> {
    Stage::ALL
        .iter()
        .map(|stage| {
            let count = entries.iter().filter(|entry| entry.stage == *stage).count();
            (
                PackageStageLabels {
                    skyhook_name: labels.skyhook_name.clone(),
                    package_name: labels.package_name.clone(),
                    package_version: labels.package_version.clone(),
                    stage: stage.as_str().to_owned(),
                },
                count_i64(count),
            )
        })
        .collect()
}

/// `skyhook_rollout_*`: one entry per compartment with a status.
fn rollout_series(
    skyhook: &Skyhook,
    name: &str,
    status: &SkyhookStatus,
    strategies: &BTreeMap<String, StrategyKind>,
) -> Vec<(RolloutLabels, RolloutValues)> {
    let policy = skyhook
        .spec
        .policy_name()
        .unwrap_or(keys::LEGACY_POLICY_NAME)
        .to_owned();
    status
        .compartment_statuses
        .iter()
        .map(|(compartment, counters)| {
            let strategy = strategies
                .get(compartment)
                .copied()
                .unwrap_or(StrategyKind::Unknown);
            let batch = counters.batch_state.clone().unwrap_or_default();
            (
                RolloutLabels {
                    skyhook_name: name.to_owned(),
                    policy_name: policy.clone(),
                    compartment_name: compartment.clone(),
                    strategy: strategy.as_str().to_owned(),
                },
                RolloutValues {
                    matched: counters.matched.into(),
                    ceiling: counters.ceiling.into(),
                    in_progress: counters.in_progress.into(),
                    completed: counters.completed.into(),
                    progress_percent: counters.progress_percent.into(),
                    current_batch: batch.current_batch.into(),
                    consecutive_failures: batch.consecutive_failures.into(),
                    should_stop: i64::from(batch.should_stop),
                },
            )
        })
        .collect()
}

fn count_i64(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// The rollout gauge families, in the order of [`RolloutValues`]'s fields.
#[derive(Debug, Default)]
struct RolloutFamilies {
    matched: Family<RolloutLabels, Gauge>,
    ceiling: Family<RolloutLabels, Gauge>,
    in_progress: Family<RolloutLabels, Gauge>,
    completed: Family<RolloutLabels, Gauge>,
    progress_percent: Family<RolloutLabels, Gauge>,
    current_batch: Family<RolloutLabels, Gauge>,
    consecutive_failures: Family<RolloutLabels, Gauge>,
    should_stop: Family<RolloutLabels, Gauge>,
}

/// A rollout gauge family with the field of [`RolloutValues`] it publishes.
type RolloutGauge<'a> = (&'a Family<RolloutLabels, Gauge>, fn(&RolloutValues) -> i64);

impl RolloutFamilies {
    fn each(&self) -> [RolloutGauge<'_>; 8] {
        [
            (&self.matched, |v| v.matched),
            (&self.ceiling, |v| v.ceiling),
            (&self.in_progress, |v| v.in_progress),
            (&self.completed, |v| v.completed),
            (&self.progress_percent, |v| v.progress_percent),
            (&self.current_batch, |v| v.current_batch),
            (&self.consecutive_failures, |v| v.consecutive_failures),
            (&self.should_stop, |v| v.should_stop),
        ]
    }
}

/// The controller's metric registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    status: Family<StatusLabels, Gauge>,
    node_status: Family<StatusLabels, Gauge>,
    target_count: Family<SkyhookLabels, Gauge>,
    drain_blocked: Family<SkyhookLabels, Gauge>,
    readiness_gate_held: Family<SkyhookLabels, Gauge>,
    readiness_gate_timed_out: Family<SkyhookLabels, Gauge>,
    topology_budget_held: Family<SkyhookLabels, Gauge>,
    pre_pull_held: Family<SkyhookLabels, Gauge>,
    pre_pull_failed: Family<SkyhookLabels, Gauge>,
    package_state: Family<PackageStateLabels, Gauge>,
    package_stage: Family<PackageStageLabels, Gauge>,
    package_restarts: Family<PackageLabels, Gauge>,
    rollout: RolloutFamilies,
    stage_durations: Family<StageDurationLabels, Histogram>,
    /// The label sets of `stage_durations`, which a Family cannot list, for [`Metrics::remove`].
    stage_duration_labels: Mutex<HashSet<StageDurationLabels>>,
    reconcile_runs: Counter,
    reconcile_failures: Family<CategoryLabels, Counter>,
    reconcile_duration: Histogram,
    api_requests: Family<ApiRequestLabels, Counter>,
    published: Mutex<HashMap<String, SkyhookSeries>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every metric registered and no series.
    pub fn new() -> Self {
        let mut metrics = Metrics {
            registry: Registry::default(),
            status: Family::default(),
            node_status: Family::default(),
            target_count: Family::default(),
            drain_blocked: Family::default(),
            readiness_gate_held: Family::default(),
            readiness_gate_timed_out: Family::default(),
            topology_budget_held: Family::default(),
            pre_pull_held: Family::default(),
            pre_pull_failed: Family::default(),
            package_state: Family::default(),
            package_stage: Family::default(),
            package_restarts: Family::default(),
            rollout: RolloutFamilies::default(),
            stage_durations: Family::new_with_constructor(stage_duration_histogram),
            stage_duration_labels: Mutex::new(HashSet::new()),
            reconcile_runs: Counter::default(),
            reconcile_failures: Family::default(),
            reconcile_duration: Histogram::new(exponential_buckets(0.005, 2.0, 12)),
            api_requests: Family::default(),
            published: Mutex::new(HashMap::new()),
        };
        // Registration order is the order of the exposition.
        metrics.register_skyhook_gauges();
        metrics.register_rollout_gauges();
        metrics.register_controller_metrics();
        metrics
    }

    /// Upstream's per-Skyhook gauges.
    fn register_skyhook_gauges(&mut self) {
        self.registry.register(
            "skyhook_status",
            "1 for the current status of the Skyhook, 0 for every other status",
            self.status.clone(),
        );
        self.registry.register(
            "skyhook_node_status_count",
            "Number of nodes of the Skyhook per node status",
            self.node_status.clone(),
        );
        self.registry.register(
            "skyhook_node_target_count",
            "Number of nodes the Skyhook targets",
            self.target_count.clone(),
        );
        self.registry.register(
            "skyhook_package_state_count",
            "Number of nodes per package state",
            self.package_state.clone(),
        );
        self.registry.register(
            "skyhook_package_stage_count",
            "Number of nodes per package stage",
            self.package_stage.clone(),
        );
        self.registry.register(
            "skyhook_package_restarts_count",
            "Restarts of the package's containers, summed over nodes",
            self.package_restarts.clone(),
        );
        self.registry.register(
            "skyhook_drain_blocked",
            "1 while a drain of the Skyhook is blocked past its timeout (condition DrainBlocked)",
            self.drain_blocked.clone(),
        );
        self.registry.register(
            "skyhook_readiness_gate_held",
            "1 while spec.readinessGates hold nodes of the Skyhook after their interrupt (condition ReadinessGateHeld)",
            self.readiness_gate_held.clone(),
        );
        self.registry.register(
            "skyhook_readiness_gate_timed_out",
            "1 while a node held by the Skyhook's readiness gates is past a gate's timeout",
            self.readiness_gate_timed_out.clone(),
        );
        self.registry.register(
            "skyhook_topology_budget_held",
            "1 while a budget's topology holds nodes of the Skyhook back (condition TopologyBudgetHeld)",
            self.topology_budget_held.clone(),
        );
        self.registry.register(
            "skyhook_pre_pull_held",
            "1 while nodes of the Skyhook wait, uncordoned, for their images to be pulled (condition PrePullHeld)",
            self.pre_pull_held.clone(),
        );
        self.registry.register(
            "skyhook_pre_pull_failed",
            "1 while an image of the Skyhook cannot be pulled on a node waiting for its cordon",
            self.pre_pull_failed.clone(),
        );
        self.registry.register(
            "skyhook_package_stage_duration_seconds",
            "Time a package's stage took on a node, from its previous transition to its completion",
            self.stage_durations.clone(),
        );
    }

    /// Upstream's per-compartment rollout gauges.
    fn register_rollout_gauges(&mut self) {
        let rollout = &self.rollout;
        let rollout_help = [
            (
                "skyhook_rollout_matched_nodes",
                "Nodes assigned to the compartment",
                &rollout.matched,
            ),
            (
                "skyhook_rollout_ceiling",
                "Most nodes of the compartment in progress at once",
                &rollout.ceiling,
            ),
            (
                "skyhook_rollout_in_progress",
                "Nodes of the compartment in progress",
                &rollout.in_progress,
            ),
            (
                "skyhook_rollout_completed",
                "Nodes of the compartment complete",
                &rollout.completed,
            ),
            (
                "skyhook_rollout_progress_percent",
                "Complete nodes of the compartment, in percent",
                &rollout.progress_percent,
            ),
            (
                "skyhook_rollout_current_batch",
                "Current batch number of the compartment (0 without batches)",
                &rollout.current_batch,
            ),
            (
                "skyhook_rollout_consecutive_failures",
                "Failed batches in a row in the compartment",
                &rollout.consecutive_failures,
            ),
            (
                "skyhook_rollout_should_stop",
                "1 when the compartment's rollout stopped after failures",
                &rollout.should_stop,
            ),
        ];
        for (name, help, family) in rollout_help {
            self.registry.register(name, help, family.clone());
        }
    }

    /// The controller's own reconcile and API request metrics.
    fn register_controller_metrics(&mut self) {
        self.registry.register(
            "skyhook_controller_reconcile_runs",
            "Reconciles started",
            self.reconcile_runs.clone(),
        );
        self.registry.register(
            "skyhook_controller_reconcile_failures",
            "Requests of reconciles to the API server that failed, by operation",
            self.reconcile_failures.clone(),
        );
        self.registry.register(
            "skyhook_controller_reconcile_duration_seconds",
            "Time spent in one reconcile",
            self.reconcile_duration.clone(),
        );
        self.registry.register(
            "skyhook_api_requests",
            "Requests the controller sent to the API server, by verb and resource",
            self.api_requests.clone(),
        );
    }

    /// Publishes `series` for `skyhook`, replacing what was published for it before.
    pub fn publish(&self, skyhook: &str, series: SkyhookSeries) {
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(previous) = published.get(skyhook) {
            self.delete_missing(previous, &series);
        }
        for (labels, value) in &series.status {
            self.status.get_or_create(labels).set(*value);
        }
        for (labels, value) in &series.node_status {
            self.node_status.get_or_create(labels).set(*value);
        }
        self.target_count
            .get_or_create(&series.target_count.0)
            .set(series.target_count.1);
        self.drain_blocked
            .get_or_create(&series.drain_blocked.0)
            .set(series.drain_blocked.1);
        for (family, (labels, value)) in [
            (&self.readiness_gate_held, &series.readiness_gate_held),
            (
                &self.readiness_gate_timed_out,
                &series.readiness_gate_timed_out,
            ),
            (&self.topology_budget_held, &series.topology_budget_held),
            (&self.pre_pull_held, &series.pre_pull_held),
            (&self.pre_pull_failed, &series.pre_pull_failed),
        ] {
            family.get_or_create(labels).set(*value);
        }
        for (labels, value) in &series.package_state {
            self.package_state.get_or_create(labels).set(*value);
        }
        for (labels, value) in &series.package_stage {
            self.package_stage.get_or_create(labels).set(*value);
        }
        for (labels, value) in &series.package_restarts {
            self.package_restarts.get_or_create(labels).set(*value);
        }
        for (labels, values) in &series.rollout {
            for (family, value) in self.rollout.each() {
                family.get_or_create(labels).set(value(values));
            }
        }
        published.insert(skyhook.to_owned(), series);
    }

    /// Deletes every series of `skyhook` (it was deleted).
    pub fn remove(&self, skyhook: &str) {
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(previous) = published.remove(skyhook) {
            self.delete_missing(&previous, &SkyhookSeries::default());
        }
        self.stage_duration_labels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|labels| {
                let keep = labels.skyhook_name != skyhook;
                if !keep {
                    self.stage_durations.remove(labels);
                }
                keep
            });
    }

    /// Removes the label sets of `previous` that `next` does not have.
    fn delete_missing(&self, previous: &SkyhookSeries, next: &SkyhookSeries) {
        fn stale<'a, L: PartialEq>(
            previous: &'a [(L, impl Sized)],
            next: &'a [(L, impl Sized)],
        ) -> impl Iterator<Item = &'a L> + 'a {
            previous
                .iter()
                .map(|(labels, _)| labels)
                .filter(move |labels| !next.iter().any(|(other, _)| other == *labels))
        }
        for labels in stale(&previous.status, &next.status) {
            self.status.remove(labels);
        }
        for labels in stale(&previous.node_status, &next.node_status) {
            self.node_status.remove(labels);
        }
        if previous.target_count.0 != next.target_count.0 {
            self.target_count.remove(&previous.target_count.0);
        }
        if previous.drain_blocked.0 != next.drain_blocked.0 {
            self.drain_blocked.remove(&previous.drain_blocked.0);
        }
        if previous.readiness_gate_held.0 != next.readiness_gate_held.0 {
            self.readiness_gate_held
                .remove(&previous.readiness_gate_held.0);
            (self.readiness_gate_timed_out).remove(&previous.readiness_gate_timed_out.0);
            (self.topology_budget_held).remove(&previous.topology_budget_held.0);
            (self.pre_pull_held).remove(&previous.pre_pull_held.0);
            (self.pre_pull_failed).remove(&previous.pre_pull_failed.0);
        }
        for labels in stale(&previous.package_state, &next.package_state) {
            self.package_state.remove(labels);
        }
        for labels in stale(&previous.package_stage, &next.package_stage) {
            self.package_stage.remove(labels);
        }
        for labels in stale(&previous.package_restarts, &next.package_restarts) {
            self.package_restarts.remove(labels);
        }
        for labels in stale(&previous.rollout, &next.rollout) {
            for (family, _) in self.rollout.each() {
                family.remove(labels);
            }
        }
    }

    /// Observes one finished stage attempt of `package` of `skyhook`.
    pub fn observe_stage_duration(&self, skyhook: &str, package: &str, stage: Stage, seconds: f64) {
        let labels = StageDurationLabels {
            skyhook_name: skyhook.to_owned(),
            package_name: package.to_owned(),
            stage: stage.as_str(),
        };
        self.stage_durations.get_or_create(&labels).observe(seconds);
        self.stage_duration_labels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(labels);
    }

    /// Counts a reconcile and measures it until the returned guard is dropped.
    pub fn reconcile_started(&self) -> ReconcileTimer<'_> {
        self.reconcile_runs.inc();
        ReconcileTimer {
            histogram: &self.reconcile_duration,
            started: Instant::now(),
        }
    }

    /// Counts `count` failed requests of reconciles under `category` (a fixed, bounded name,
    /// see [`crate::reconcile::apply::Operation::category`]).
    pub fn reconcile_failed(&self, category: &'static str, count: u64) {
        self.reconcile_failures
            .get_or_create(&CategoryLabels { category })
            .inc_by(count);
    }

    /// Counts one API request (see [`crate::api_requests`]).
    pub fn count_api_request(&self, verb: &'static str, resource: String) {
        self.api_requests
            .get_or_create(&ApiRequestLabels { verb, resource })
            .inc();
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// Buckets from one second to about four and a half hours: a stage runs a package's scripts,
/// drains or reboots a node.
fn stage_duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

/// Observes the reconcile duration when dropped.
#[derive(Debug)]
pub struct ReconcileTimer<'a> {
    histogram: &'a Histogram,
    started: Instant,
}

impl Drop for ReconcileTimer<'_> {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests;
