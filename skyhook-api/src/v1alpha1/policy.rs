//! The `DeploymentPolicy` custom resource: rollout compartments, budgets and batch strategies.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::skyhook::default_true;
use super::topology::TopologyBudget;

/// Rollout rules shared by the Skyhooks that reference this policy: nodes are split into
/// compartments, each with a budget (the most nodes worked on at once) and a batch strategy.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "skyhook.nvidia.com",
    version = "v1alpha1",
    kind = "DeploymentPolicy",
    plural = "deploymentpolicies",
    shortname = "dp",
    doc = "DeploymentPolicy defines how Skyhooks roll out over nodes: compartments of nodes, each with a budget and a batch strategy (fixed, linear or exponential)."
)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentPolicySpec {
    /// Budget and strategy of the nodes that no compartment selects. Required.
    pub default: PolicyDefault,

    /// Named groups of nodes with their own budget and, optionally, strategy. A node matched by
    /// several compartments goes to the safest one (fixed, then linear, then exponential; then
    /// the smaller budget; then the name). Names are unique; `__default__` is reserved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compartments: Vec<Compartment>,

    /// Start the rollout again from the first batch when a Skyhook using this policy completes
    /// or a package version changes. A Skyhook can override it in
    /// `deploymentPolicyOptions`. Default true.
    #[serde(default = "default_true")]
    pub reset_batch_state_on_completion: bool,

    /// When new batches may start. A compartment starts a new batch only while one of these
    /// windows is open; the nodes of a batch already started finish outside it. None: always.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintenance_windows: Vec<MaintenanceWindow>,

    /// Health gate between batches: a compartment starts its next batch only after the nodes
    /// the Skyhook finished have been Ready and schedulable for `settle`, and never while a
    /// node it worked on is NotReady. None: batches follow each other as upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_gate: Option<HealthGate>,
}

/// The health gate between batches of a DeploymentPolicy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthGate {
    /// How long every finished node must have been Ready and schedulable before the next
    /// batch starts: a Go duration of zero or more, e.g. `5m`. Required.
    pub settle: String,
}

/// A recurring time span in which new batches may start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// When the window opens: a cron expression of five fields (minute hour day-of-month month
    /// day-of-week), e.g. `0 2 * * 6` for Saturdays at 02:00. Required.
    pub schedule: String,
    /// How long the window stays open: a Go duration greater than zero, e.g. `4h`. Required.
    pub duration: String,
    /// The IANA time zone the schedule is read in, e.g. `Europe/Berlin`. Default `UTC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Most nodes of each compartment worked on at once while this window is open, in place of
    /// the compartment's own budget: exactly one of `percent` (of the compartment's nodes) or
    /// `count`. While several windows are open the smallest ceiling holds, a window without a
    /// budget counting as the compartment's own. Batch progress carries over from one window to
    /// the next. None: the compartment's budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<PolicyBudget>,
}

/// Budget and strategy of the nodes no compartment selects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyDefault {
    /// Most nodes worked on at once: exactly one of `percent` or `count`.
    #[serde(default)]
    #[schemars(transform = without_default)]
    pub budget: PolicyBudget,
    /// How batch sizes grow: exactly one of `fixed`, `linear` or `exponential`. Required.
    pub strategy: DeploymentStrategy,
}

/// Keeps `budget` optional in the schema without making the apiserver insert an empty object:
/// a missing budget is reported by validation, not papered over.
fn without_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

/// A named group of nodes with its own budget and strategy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Compartment {
    /// Name of the compartment, unique within the policy. `__default__` is reserved.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Nodes in this compartment. Required; no two compartments may have identical selectors.
    pub selector: LabelSelector,
    /// Most nodes of this compartment worked on at once: exactly one of `percent` or `count`.
    /// Required.
    pub budget: PolicyBudget,
    /// Batch strategy of this compartment. When omitted, every batch is the compartment's
    /// ceiling, and the compartment counts as the least safe kind when compartments overlap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<DeploymentStrategy>,
}

/// Most nodes worked on at once. Set exactly one of `percent` or `count`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyBudget {
    /// Percentage (1-100) of the matched nodes, rounded down, at least one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub percent: Option<i32>,
    /// Number of nodes (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub count: Option<i32>,
    /// Failure domains (racks, NVLink domains) disrupted at once, on top of the node count.
    /// Not on a maintenance window's budget: the compartment's own holds while it is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyBudget>,
}

/// How batch sizes evolve. Set exactly one of `fixed`, `linear` or `exponential`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStrategy {
    /// Every batch has `initialBatch` nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<FixedStrategy>,
    /// Batches grow by `delta` nodes after a success and shrink by `delta` after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear: Option<LinearStrategy>,
    /// Batches are multiplied by `growthFactor` after a success and divided by it after a
    /// failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exponential: Option<ExponentialStrategy>,
}

/// Default of `initialBatch`.
pub const DEFAULT_INITIAL_BATCH: i32 = 1;
/// Default of `batchThreshold`.
pub const DEFAULT_BATCH_THRESHOLD: i32 = 100;
/// Default of `safetyLimit`.
pub const DEFAULT_SAFETY_LIMIT: i32 = 50;
/// Default of `linear.delta`.
pub const DEFAULT_DELTA: i32 = 1;
/// Default of `exponential.growthFactor`.
pub const DEFAULT_GROWTH_FACTOR: i32 = 2;

/// Declares a strategy struct with the four fields every strategy shares plus its own, and the
/// getters that apply the defaults, so the shared fields are documented once.
macro_rules! strategy_struct {
    (
        $(#[$meta:meta])*
        $name:ident { $($(#[$fmeta:meta])* $field:ident: $getter:ident = $default:expr;)* }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// Size of the first batch. Minimum 1, default 1.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(range(min = 1))]
            pub initial_batch: Option<i32>,
            /// Percentage (1-100) of a batch's nodes that must complete for the batch to count as
            /// successful. Default 100.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(range(min = 1, max = 100))]
            pub batch_threshold: Option<i32>,
            /// Stop the rollout after this many failed batches in a row, while progress is below
            /// `safetyLimit`. Minimum 1. Unset (the default) means never stop.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(range(min = 1))]
            pub failure_threshold: Option<i32>,
            /// Progress percentage (1-100) below which failed batches shrink the next batch and
            /// count towards `failureThreshold`. Default 50.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(range(min = 1, max = 100))]
            pub safety_limit: Option<i32>,
            $($(#[$fmeta])* #[serde(default, skip_serializing_if = "Option::is_none")] pub $field: Option<i32>,)*
        }

        impl $name {
            /// `initialBatch`, or its default.
            pub fn initial_batch(&self) -> i32 {
                self.initial_batch.unwrap_or(DEFAULT_INITIAL_BATCH)
            }
            /// `batchThreshold`, or its default.
            pub fn batch_threshold(&self) -> i32 {
                self.batch_threshold.unwrap_or(DEFAULT_BATCH_THRESHOLD)
            }
            /// `failureThreshold`; `None` means the rollout never stops.
            pub fn failure_threshold(&self) -> Option<i32> {
                self.failure_threshold
            }
            /// `safetyLimit`, or its default.
            pub fn safety_limit(&self) -> i32 {
                self.safety_limit.unwrap_or(DEFAULT_SAFETY_LIMIT)
            }
            $(
                #[doc = concat!("`", stringify!($field), "`, or its default.")]
                pub fn $getter(&self) -> i32 {
                    self.$field.unwrap_or($default)
                }
            )*
        }
    };
}

strategy_struct! {
    /// Every batch has `initialBatch` nodes.
    FixedStrategy {}
}

strategy_struct! {
    /// Batches grow by `delta` after a success and shrink by `delta` after a failure.
    LinearStrategy {
        /// Nodes added to (or removed from) the batch size after each batch. Minimum 1,
        /// default 1.
        #[schemars(range(min = 1))]
        delta: delta = DEFAULT_DELTA;
    }
}

strategy_struct! {
    /// Batches are multiplied by `growthFactor` after a success and divided by it after a
    /// failure.
    ExponentialStrategy {
        /// Factor the batch size is multiplied (or divided) by after each batch. Minimum 2,
        /// default 2.
        #[schemars(range(min = 2))]
        growth_factor: growth_factor = DEFAULT_GROWTH_FACTOR;
    }
}

/// Which strategy a [`DeploymentStrategy`] selects. The order is "safer first": when a node
/// falls in several compartments, the one with the smaller kind wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StrategyKind {
    /// `fixed`.
    Fixed,
    /// `linear`.
    Linear,
    /// `exponential`.
    Exponential,
    /// No strategy set.
    Unknown,
}

impl StrategyKind {
    /// The spelling used in metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            StrategyKind::Fixed => "fixed",
            StrategyKind::Linear => "linear",
            StrategyKind::Exponential => "exponential",
            StrategyKind::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl DeploymentStrategy {
    /// The selected strategy. When (invalidly) several are set, the first of fixed, linear,
    /// exponential wins; validation rejects such a policy.
    pub fn kind(&self) -> StrategyKind {
        if self.fixed.is_some() {
            StrategyKind::Fixed
        } else if self.linear.is_some() {
            StrategyKind::Linear
        } else if self.exponential.is_some() {
            StrategyKind::Exponential
        } else {
            StrategyKind::Unknown
        }
    }

    /// How many of `fixed`, `linear`, `exponential` are set (validation requires exactly one).
    pub fn count_set(&self) -> usize {
        usize::from(self.fixed.is_some())
            + usize::from(self.linear.is_some())
            + usize::from(self.exponential.is_some())
    }

    /// `initialBatch` of the selected strategy, or its default.
    pub fn initial_batch(&self) -> i32 {
        self.common(
            FixedStrategy::initial_batch,
            LinearStrategy::initial_batch,
            ExponentialStrategy::initial_batch,
        )
        .unwrap_or(DEFAULT_INITIAL_BATCH)
    }

    /// `batchThreshold` of the selected strategy, or its default.
    pub fn batch_threshold(&self) -> i32 {
        self.common(
            FixedStrategy::batch_threshold,
            LinearStrategy::batch_threshold,
            ExponentialStrategy::batch_threshold,
        )
        .unwrap_or(DEFAULT_BATCH_THRESHOLD)
    }

    /// `failureThreshold` of the selected strategy; `None` means the rollout never stops.
    pub fn failure_threshold(&self) -> Option<i32> {
        self.common(
            FixedStrategy::failure_threshold,
            LinearStrategy::failure_threshold,
            ExponentialStrategy::failure_threshold,
        )
        .flatten()
    }

    /// `safetyLimit` of the selected strategy, or its default.
    pub fn safety_limit(&self) -> i32 {
        self.common(
            FixedStrategy::safety_limit,
            LinearStrategy::safety_limit,
            ExponentialStrategy::safety_limit,
        )
        .unwrap_or(DEFAULT_SAFETY_LIMIT)
    }

    fn common<T>(
        &self,
        fixed: impl FnOnce(&FixedStrategy) -> T,
        linear: impl FnOnce(&LinearStrategy) -> T,
        exponential: impl FnOnce(&ExponentialStrategy) -> T,
    ) -> Option<T> {
        match (&self.fixed, &self.linear, &self.exponential) {
            (Some(s), _, _) => Some(fixed(s)),
            (None, Some(s), _) => Some(linear(s)),
            (None, None, Some(s)) => Some(exponential(s)),
            (None, None, None) => None,
        }
    }
}
