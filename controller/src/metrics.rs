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

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use skyhook_api::generation::Group;
use skyhook_api::keys::{self, Keys};
use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::{
    PackageStatus, Skyhook, SkyhookStatus, Stage, State, Status, StrategyKind,
};

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A label set of a workload's series: its name under its group's label (`skyhook_name`,
/// `nodewright_name`), first, then `labels`. One family type then serves both groups' metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Named<L> {
    /// [`skyhook_api::keys::Keys::metric_name_label`] of the family's group.
    pub key: &'static str,
    /// The Skyhook or NodeWright.
    pub name: String,
    /// The other labels.
    pub labels: L,
}

impl<L: EncodeLabelSet> EncodeLabelSet for Named<L> {
    fn encode(&self, mut encoder: LabelSetEncoder) -> Result<(), std::fmt::Error> {
        (self.key, self.name.as_str()).encode(encoder.encode_label())?;
        self.labels.encode(encoder)
    }
}

/// No labels but the name.
#[derive(Debug, Clone, Copy, Default, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct NameOnly;

impl EncodeLabelSet for NameOnly {
    fn encode(&self, _encoder: LabelSetEncoder) -> Result<(), std::fmt::Error> {
        Ok(())
    }
}

/// Label `status`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    /// A [`Status`] value.
    pub status: String,
}

/// Labels `package_name`, `package_version`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct PackageLabels {
    /// The package.
    pub package_name: String,
    /// The package version.
    pub package_version: String,
}

/// Labels of the package state gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PackageStateLabels {
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

/// Every series upstream publishes for one Skyhook or NodeWright, without its name, which
/// [`Metrics::publish`] adds under each family's name label.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkyhookSeries {
    /// `*_status`: 1 for the current status, 0 for every other.
    pub status: Vec<(StatusLabels, i64)>,
    /// `*_node_status_count`: nodes per status.
    pub node_status: Vec<(StatusLabels, i64)>,
    /// `*_node_target_count`.
    pub target_count: i64,
    /// `*_package_state_count`: nodes per spec package and state.
    pub package_state: Vec<(PackageStateLabels, i64)>,
    /// `*_package_stage_count`: nodes per spec package and stage.
    pub package_stage: Vec<(PackageStageLabels, i64)>,
    /// `*_package_restarts_count`: restarts summed over nodes per spec package.
    pub package_restarts: Vec<(PackageLabels, i64)>,
    /// `*_rollout_*`, one entry per compartment with a status.
    pub rollout: Vec<(RolloutLabels, RolloutValues)>,
    /// `*_drain_blocked`: 1 while a drain is blocked past its timeout (ours).
    pub drain_blocked: i64,
    /// `*_readiness_gate_held`: 1 while readiness gates hold nodes (ours).
    pub readiness_gate_held: i64,
    /// `*_readiness_gate_timed_out`: 1 while a held node is past a gate's timeout (ours).
    pub readiness_gate_timed_out: i64,
    /// `*_topology_budget_held`: 1 while a budget's topology holds nodes back (ours).
    pub topology_budget_held: i64,
    /// `*_pre_pull_held`: 1 while nodes wait, uncordoned, for their images (ours).
    pub pre_pull_held: i64,
    /// `*_pre_pull_failed`: 1 while an image cannot be pulled on a held node (ours).
    pub pre_pull_failed: i64,
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

/// Computes the series of `skyhook`, an object of the group of `keys` (its conditions carry
/// that group's prefix), whose targeted nodes read `nodes`, which targets `target_nodes` nodes
/// and whose compartments use `strategies` (compartments absent from it are labelled
/// `unknown`).
pub fn skyhook_series(
    keys: &Keys,
    skyhook: &Skyhook,
    nodes: &NodeReadings<'_>,
    target_nodes: usize,
    strategies: &BTreeMap<String, StrategyKind>,
) -> SkyhookSeries {
    let no_status = SkyhookStatus::default();
    let status = skyhook.status.as_ref().unwrap_or(&no_status);
    let holds =
        |type_: &str| (status.conditions.iter()).find(|c| c.type_ == type_ && c.status == "True");
    let gate = holds(keys.condition_readiness_gate_held);
    let pre_pull = holds(keys.condition_pre_pull_held);
    let mut series = SkyhookSeries {
        status: status_series(status.status.unwrap_or(Status::Unknown)),
        node_status: node_status_series(&nodes.statuses),
        target_count: count_i64(target_nodes),
        rollout: rollout_series(skyhook, status, strategies),
        drain_blocked: i64::from(holds(keys.condition_drain_blocked).is_some()),
        readiness_gate_held: i64::from(gate.is_some()),
        readiness_gate_timed_out: i64::from(
            gate.is_some_and(|c| c.reason == keys::READINESS_GATE_TIMED_OUT_REASON),
        ),
        topology_budget_held: i64::from(holds(keys.condition_topology_budget_held).is_some()),
        pre_pull_held: i64::from(pre_pull.is_some()),
        pre_pull_failed: i64::from(
            pre_pull.is_some_and(|c| c.reason == keys::PRE_PULL_FAILED_REASON),
        ),
        ..SkyhookSeries::default()
    };
    for package in skyhook.spec.packages.values() {
        let entries: Vec<&PackageStatus> = nodes
            .states
            .iter()
            .filter_map(|node| node.get_version(&package.name, &package.version))
            .collect();
        let labels = PackageLabels {
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

/// `*_status`: 1 for `current`, 0 for every other status.
fn status_series(current: Status) -> Vec<(StatusLabels, i64)> {
    (Status::ALL.iter())
        .map(|s| (status_labels(*s), i64::from(*s == current)))
        .collect()
}

/// `*_node_status_count`: the nodes of each status, zeros included.
fn node_status_series(statuses: &[Status]) -> Vec<(StatusLabels, i64)> {
    (Status::ALL.iter())
        .map(|s| {
            let count = statuses.iter().filter(|value| *value == s).count();
            (status_labels(*s), count_i64(count))
        })
        .collect()
}

fn status_labels(status: Status) -> StatusLabels {
    StatusLabels {
        status: status.as_str().to_owned(),
    }
}

/// `*_package_state_count` of one package: its node-state `entries` per state.
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
                    package_name: labels.package_name.clone(),
                    package_version: labels.package_version.clone(),
                    state: state.as_str().to_owned(),
                },
                count_i64(count),
            )
        })
        .collect()
}

/// `*_package_stage_count` of one package: its node-state `entries` per stage.
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
                    package_name: labels.package_name.clone(),
                    package_version: labels.package_version.clone(),
                    stage: stage.as_str().to_owned(),
                },
                count_i64(count),
            )
        })
        .collect()
}

/// `*_rollout_*`: one entry per compartment with a status.
fn rollout_series(
    skyhook: &Skyhook,
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

/// A gauge family of one group's workloads.
type WorkloadGauge<L> = Family<Named<L>, Gauge>;

/// A name-only gauge family with the field of [`SkyhookSeries`] it publishes.
type NameOnlyGauge<'a> = (&'a WorkloadGauge<NameOnly>, fn(&SkyhookSeries) -> i64);

/// A rollout gauge family with the field of [`RolloutValues`] it publishes.
type RolloutGauge<'a> = (&'a WorkloadGauge<RolloutLabels>, fn(&RolloutValues) -> i64);

/// The per-workload families of one group (`skyhook_*` with `skyhook_name`, `nodewright_*`
/// with `nodewright_name`): upstream's gauges, ours, and the stage duration histogram.
#[derive(Debug)]
struct WorkloadFamilies {
    keys: &'static Keys,
    status: WorkloadGauge<StatusLabels>,
    node_status: WorkloadGauge<StatusLabels>,
    target_count: WorkloadGauge<NameOnly>,
    package_state: WorkloadGauge<PackageStateLabels>,
    package_stage: WorkloadGauge<PackageStageLabels>,
    package_restarts: WorkloadGauge<PackageLabels>,
    drain_blocked: WorkloadGauge<NameOnly>,
    readiness_gate_held: WorkloadGauge<NameOnly>,
    readiness_gate_timed_out: WorkloadGauge<NameOnly>,
    topology_budget_held: WorkloadGauge<NameOnly>,
    pre_pull_held: WorkloadGauge<NameOnly>,
    pre_pull_failed: WorkloadGauge<NameOnly>,
    rollout: [WorkloadGauge<RolloutLabels>; 8],
    stage_durations: Family<Named<StageDurationLabels>, Histogram>,
    /// The label sets of `stage_durations`, which a Family cannot list, for removal.
    stage_duration_labels: Mutex<HashSet<Named<StageDurationLabels>>>,
}

impl WorkloadFamilies {
    fn new(keys: &'static Keys) -> Self {
        WorkloadFamilies {
            keys,
            status: Family::default(),
            node_status: Family::default(),
            target_count: Family::default(),
            package_state: Family::default(),
            package_stage: Family::default(),
            package_restarts: Family::default(),
            drain_blocked: Family::default(),
            readiness_gate_held: Family::default(),
            readiness_gate_timed_out: Family::default(),
            topology_budget_held: Family::default(),
            pre_pull_held: Family::default(),
            pre_pull_failed: Family::default(),
            rollout: Default::default(),
            stage_durations: Family::new_with_constructor(stage_duration_histogram),
            stage_duration_labels: Mutex::new(HashSet::new()),
        }
    }

    fn named<L>(&self, name: &str, labels: L) -> Named<L> {
        Named {
            key: self.keys.metric_name_label,
            name: name.to_owned(),
            labels,
        }
    }

    fn name_only(&self) -> [NameOnlyGauge<'_>; 7] {
        [
            (&self.target_count, |s| s.target_count),
            (&self.drain_blocked, |s| s.drain_blocked),
            (&self.readiness_gate_held, |s| s.readiness_gate_held),
            (&self.readiness_gate_timed_out, |s| {
                s.readiness_gate_timed_out
            }),
            (&self.topology_budget_held, |s| s.topology_budget_held),
            (&self.pre_pull_held, |s| s.pre_pull_held),
            (&self.pre_pull_failed, |s| s.pre_pull_failed),
        ]
    }

    /// The rollout families, in the order of [`RolloutValues`]'s fields.
    fn rollout(&self) -> [RolloutGauge<'_>; 8] {
        let [
            matched,
            ceiling,
            in_progress,
            completed,
            percent,
            batch,
            failures,
            stop,
        ] = &self.rollout;
        [
            (matched, |v| v.matched),
            (ceiling, |v| v.ceiling),
            (in_progress, |v| v.in_progress),
            (completed, |v| v.completed),
            (percent, |v| v.progress_percent),
            (batch, |v| v.current_batch),
            (failures, |v| v.consecutive_failures),
            (stop, |v| v.should_stop),
        ]
    }

    /// Registers every family as `<word>_<metric>`. `legacy` is the note the help of a
    /// family that also carries another group's twins ends with.
    fn register(&self, registry: &mut Registry, legacy: Option<&str>) {
        let (word, kind) = (self.keys.word, self.keys.kind);
        let note = |metric: &str| {
            legacy.map_or_else(String::new, |twin_word| {
                format!(
                    "; a NodeWright's series here are legacy twins of {twin_word}_{metric}, kept while PUBLISH_LEGACY_METRICS is true, which upstream removes in v0.21"
                )
            })
        };
        let gauges: [(&str, String, &dyn Registrable); 13] = [
            (
                "status",
                format!("1 for the current status of the {kind}, 0 for every other status"),
                &self.status,
            ),
            (
                "node_status_count",
                format!("Number of nodes of the {kind} per node status"),
                &self.node_status,
            ),
            (
                "node_target_count",
                format!("Number of nodes the {kind} targets"),
                &self.target_count,
            ),
            (
                "package_state_count",
                "Number of nodes per package state".to_owned(),
                &self.package_state,
            ),
            (
                "package_stage_count",
                "Number of nodes per package stage".to_owned(),
                &self.package_stage,
            ),
            (
                "package_restarts_count",
                "Restarts of the package's containers, summed over nodes".to_owned(),
                &self.package_restarts,
            ),
            (
                "drain_blocked",
                format!("1 while a drain of the {kind} is blocked past its timeout (condition DrainBlocked)"),
                &self.drain_blocked,
            ),
            (
                "readiness_gate_held",
                format!("1 while spec.readinessGates hold nodes of the {kind} after their interrupt (condition ReadinessGateHeld)"),
                &self.readiness_gate_held,
            ),
            (
                "readiness_gate_timed_out",
                format!("1 while a node held by the {kind}'s readiness gates is past a gate's timeout"),
                &self.readiness_gate_timed_out,
            ),
            (
                "topology_budget_held",
                format!("1 while a budget's topology holds nodes of the {kind} back (condition TopologyBudgetHeld)"),
                &self.topology_budget_held,
            ),
            (
                "pre_pull_held",
                format!("1 while nodes of the {kind} wait, uncordoned, for their images to be pulled (condition PrePullHeld)"),
                &self.pre_pull_held,
            ),
            (
                "pre_pull_failed",
                format!("1 while an image of the {kind} cannot be pulled on a node waiting for its cordon"),
                &self.pre_pull_failed,
            ),
            (
                "package_stage_duration_seconds",
                "Time a package's stage took on a node, from its previous transition to its completion".to_owned(),
                &self.stage_durations,
            ),
        ];
        for (metric, help, family) in gauges {
            family.register_into(registry, format!("{word}_{metric}"), help + &note(metric));
        }
        let rollout_help = [
            ("rollout_matched_nodes", "Nodes assigned to the compartment"),
            (
                "rollout_ceiling",
                "Most nodes of the compartment in progress at once",
            ),
            (
                "rollout_in_progress",
                "Nodes of the compartment in progress",
            ),
            ("rollout_completed", "Nodes of the compartment complete"),
            (
                "rollout_progress_percent",
                "Complete nodes of the compartment, in percent",
            ),
            (
                "rollout_current_batch",
                "Current batch number of the compartment (0 without batches)",
            ),
            (
                "rollout_consecutive_failures",
                "Failed batches in a row in the compartment",
            ),
            (
                "rollout_should_stop",
                "1 when the compartment's rollout stopped after failures",
            ),
        ];
        for ((metric, help), family) in rollout_help.into_iter().zip(&self.rollout) {
            registry.register(
                format!("{word}_{metric}"),
                format!("{help}{}", note(metric)),
                family.clone(),
            );
        }
    }

    fn publish(&self, name: &str, series: &SkyhookSeries) {
        self.set_each(&self.status, name, &series.status);
        self.set_each(&self.node_status, name, &series.node_status);
        for (family, value) in self.name_only() {
            set_gauge(family, self.named(name, NameOnly), value(series));
        }
        self.set_each(&self.package_state, name, &series.package_state);
        self.set_each(&self.package_stage, name, &series.package_stage);
        self.set_each(&self.package_restarts, name, &series.package_restarts);
        for (labels, values) in &series.rollout {
            for (family, value) in self.rollout() {
                set_gauge(family, self.named(name, labels.clone()), value(values));
            }
        }
    }

    /// Sets each of `values` in `family` under `name`.
    fn set_each<L>(&self, family: &WorkloadGauge<L>, name: &str, values: &[(L, i64)])
    where
        L: Clone,
        Named<L>: Clone + std::hash::Hash + Eq,
    {
        for (labels, value) in values {
            set_gauge(family, self.named(name, labels.clone()), *value);
        }
    }

    /// Removes from `family` the label sets of `name` in `previous` that `next` does not have
    /// (all of them without a `next`).
    fn remove_stale<L, V>(
        &self,
        family: &Family<Named<L>, V>,
        name: &str,
        previous: &[(L, impl Sized)],
        next: Option<&[(L, impl Sized)]>,
    ) where
        L: Clone + PartialEq,
        Named<L>: Clone + std::hash::Hash + Eq,
    {
        let next = next.unwrap_or_default();
        for (labels, _) in previous {
            if !next.iter().any(|(other, _)| other == labels) {
                family.remove(&self.named(name, labels.clone()));
            }
        }
    }

    /// Removes the label sets of `previous` that `next` does not have; with `next` `None`,
    /// every series of `name`, its stage durations included.
    fn delete_missing(&self, name: &str, previous: &SkyhookSeries, next: Option<&SkyhookSeries>) {
        let status = next.map(|n| &n.status[..]);
        self.remove_stale(&self.status, name, &previous.status, status);
        let node_status = next.map(|n| &n.node_status[..]);
        self.remove_stale(&self.node_status, name, &previous.node_status, node_status);
        let state = next.map(|n| &n.package_state[..]);
        self.remove_stale(&self.package_state, name, &previous.package_state, state);
        let stage = next.map(|n| &n.package_stage[..]);
        self.remove_stale(&self.package_stage, name, &previous.package_stage, stage);
        let restarts = next.map(|n| &n.package_restarts[..]);
        self.remove_stale(
            &self.package_restarts,
            name,
            &previous.package_restarts,
            restarts,
        );
        for (family, _) in self.rollout() {
            let rollout = next.map(|n| &n.rollout[..]);
            self.remove_stale(family, name, &previous.rollout, rollout);
        }
        if next.is_some() {
            return;
        }
        for (family, _) in self.name_only() {
            family.remove(&self.named(name, NameOnly));
        }
        self.stage_duration_labels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|labels| {
                let keep = labels.name != name;
                if !keep {
                    self.stage_durations.remove(labels);
                }
                keep
            });
    }

    fn observe_stage_duration(&self, name: &str, labels: StageDurationLabels, seconds: f64) {
        let labels = self.named(name, labels);
        self.stage_durations.get_or_create(&labels).observe(seconds);
        self.stage_duration_labels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(labels);
    }
}

fn set_gauge<L>(family: &WorkloadGauge<L>, labels: Named<L>, value: i64)
where
    Named<L>: Clone + std::hash::Hash + Eq,
{
    family.get_or_create(&labels).set(value);
}

/// A family [`WorkloadFamilies::register`] registers, whatever its labels and metric type.
trait Registrable {
    fn register_into(&self, registry: &mut Registry, name: String, help: String);
}

impl<L, M> Registrable for Family<L, M>
where
    Family<L, M>: prometheus_client::registry::Metric + Clone,
{
    fn register_into(&self, registry: &mut Registry, name: String, help: String) {
        registry.register(name, help, self.clone());
    }
}

/// The controller's metric registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    skyhook: WorkloadFamilies,
    nodewright: WorkloadFamilies,
    /// Whether a NodeWright's series are also published under `skyhook_*` (upstream's
    /// `PUBLISH_LEGACY_METRICS`).
    legacy_twins: bool,
    reconcile_runs: Counter,
    reconcile_failures: Family<CategoryLabels, Counter>,
    reconcile_duration: Histogram,
    api_requests: Family<ApiRequestLabels, Counter>,
    published: Mutex<HashMap<(Group, String), SkyhookSeries>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(true)
    }
}

impl Metrics {
    /// A registry with every metric registered and no series; `legacy_twins` also publishes
    /// each NodeWright's series under `skyhook_*` with `skyhook_name`, as upstream does while
    /// `PUBLISH_LEGACY_METRICS` is true.
    pub fn new(legacy_twins: bool) -> Self {
        let mut metrics = Metrics {
            registry: Registry::default(),
            skyhook: WorkloadFamilies::new(&keys::SKYHOOK),
            nodewright: WorkloadFamilies::new(&keys::NODEWRIGHT),
            legacy_twins,
            reconcile_runs: Counter::default(),
            reconcile_failures: Family::default(),
            reconcile_duration: Histogram::new(exponential_buckets(0.005, 2.0, 12)),
            api_requests: Family::default(),
            published: Mutex::new(HashMap::new()),
        };
        // Registration order is the order of the exposition.
        let legacy = legacy_twins.then_some(keys::NODEWRIGHT.word);
        metrics.skyhook.register(&mut metrics.registry, legacy);
        metrics.nodewright.register(&mut metrics.registry, None);
        metrics.register_controller_metrics();
        metrics
    }

    /// The families `group`'s objects publish into: their own group's, and for a NodeWright
    /// the legacy `skyhook_*` twins while they are on.
    fn families_of(&self, group: Group) -> impl Iterator<Item = &WorkloadFamilies> {
        let (own, twins) = match group {
            Group::Skyhook => (&self.skyhook, None),
            Group::NodeWright => (&self.nodewright, self.legacy_twins.then_some(&self.skyhook)),
        };
        std::iter::once(own).chain(twins)
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

    /// Publishes `series` for `group`'s object `name`, replacing what was published for it
    /// before.
    pub fn publish(&self, group: Group, name: &str, series: SkyhookSeries) {
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let key = (group, name.to_owned());
        for families in self.families_of(group) {
            if let Some(previous) = published.get(&key) {
                families.delete_missing(name, previous, Some(&series));
            }
            families.publish(name, &series);
        }
        published.insert(key, series);
    }

    /// Deletes every series of `group`'s object `name` (it was deleted, or turned inert).
    pub fn remove(&self, group: Group, name: &str) {
        let previous = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(group, name.to_owned()))
            .unwrap_or_default();
        for families in self.families_of(group) {
            families.delete_missing(name, &previous, None);
        }
    }

    /// Observes one finished stage attempt of `package` of `group`'s object `name`.
    pub fn observe_stage_duration(
        &self,
        group: Group,
        name: &str,
        (package, stage): (&str, Stage),
        seconds: f64,
    ) {
        for families in self.families_of(group) {
            let labels = StageDurationLabels {
                package_name: package.to_owned(),
                stage: stage.as_str(),
            };
            families.observe_stage_duration(name, labels, seconds);
        }
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
