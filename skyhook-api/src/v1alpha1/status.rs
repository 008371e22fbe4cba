//! `Skyhook.status`: a mirror of the node annotations plus rollout bookkeeping.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::lifecycle::{Status, is_zero};
use crate::node_state::NodeState;

/// Observed state of a Skyhook. The node annotations are the source of truth; this mirrors them
/// and adds counters for the printer columns, rollout state and conditions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkyhookStatus {
    /// `metadata.generation` at the last time the Skyhook became complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Per node, the progress of each package version, keyed `<package>|<version>`. Mirrors the
    /// node annotation `skyhook.nvidia.com/nodeState_<skyhook>`; empty when too large to write.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_state: BTreeMap<String, NodeState>,

    /// Per node, the status of the node for this Skyhook. Mirrors the node annotation and label
    /// `skyhook.nvidia.com/status_<skyhook>`; empty, with `nodeBootIds` and `nodePriority`, when
    /// the three are too large to write (thousands of nodes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_status: BTreeMap<String, Status>,

    /// Aggregate status over all selected nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,

    /// Current observations: `Ready` (True once complete on every selected node),
    /// `skyhook.nvidia.com/Transition`, `.../ApplyPackage`, `.../TaintNotTolerable`,
    /// `.../NodesIgnored` and `.../DeploymentPolicyNotFound`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// Per node, the last boot ID seen, used to detect reboots. Mirrors the node annotation
    /// `skyhook.nvidia.com/bootId_<skyhook>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_boot_ids: BTreeMap<String, String>,

    /// Nodes picked for the current rollout batches, with the time they were picked. Picked
    /// nodes keep their slot until they complete. Mirrors the node annotation
    /// `skyhook.nvidia.com/pickedAt_<skyhook>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_priority: BTreeMap<String, Time>,

    /// How many nodes have left `nodePriority` (completed or no longer selected): the rollout
    /// order (`SKYHOOK_NODE_ORDER`) of a picked node is this plus its rank in `nodePriority`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub node_order_offset: i32,

    /// Per package, the `configMap` keys whose values changed and still have to be configured on
    /// every node. They decide which `configInterrupts` apply.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config_updates: BTreeMap<String, Vec<String>>,

    /// Per rollout compartment (`__default__` for nodes no compartment selects), its counters and
    /// batch state.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub compartment_statuses: BTreeMap<String, CompartmentStatus>,

    /// Number of nodes in progress or erroring (printer column).
    #[serde(default)]
    pub nodes_in_progress: i32,

    /// Complete nodes out of selected nodes, as `<complete>/<total>` (printer column).
    #[serde(default = "default_complete_nodes")]
    pub complete_nodes: String,

    /// The packages of the spec as `name:version`, sorted and comma separated (printer column).
    #[serde(default)]
    pub package_list: String,
}

fn default_complete_nodes() -> String {
    "0/0".to_owned()
}

impl Default for SkyhookStatus {
    fn default() -> Self {
        SkyhookStatus {
            observed_generation: None,
            node_state: BTreeMap::new(),
            node_status: BTreeMap::new(),
            status: None,
            conditions: Vec::new(),
            node_boot_ids: BTreeMap::new(),
            node_priority: BTreeMap::new(),
            node_order_offset: 0,
            config_updates: BTreeMap::new(),
            compartment_statuses: BTreeMap::new(),
            nodes_in_progress: 0,
            complete_nodes: default_complete_nodes(),
            package_list: String::new(),
        }
    }
}

/// Rollout counters of one compartment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompartmentStatus {
    /// Number of this Skyhook's nodes assigned to the compartment.
    pub matched: i32,
    /// Most nodes the budget allows at once.
    pub ceiling: i32,
    /// Nodes in progress.
    pub in_progress: i32,
    /// Nodes complete.
    pub completed: i32,
    /// Complete nodes as a percentage of matched nodes, rounded down.
    pub progress_percent: i32,
    /// Progress of the batch strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_state: Option<BatchState>,
}

/// Where a compartment's batch strategy is. Zero and false values are omitted on the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchState {
    /// Number of the current batch, starting at 1.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub current_batch: i32,
    /// Failed batches in a row.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub consecutive_failures: i32,
    /// Nodes completed so far, over all batches.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub completed_nodes: i32,
    /// Nodes failed so far, over all batches.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_nodes: i32,
    /// The failure threshold was reached: no new batch starts until the state is reset.
    #[serde(default, skip_serializing_if = "is_false")]
    pub should_stop: bool,
    /// Size of the last evaluated batch.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_batch_size: i32,
    /// Whether the last evaluated batch failed its threshold.
    #[serde(default, skip_serializing_if = "is_false")]
    pub last_batch_failed: bool,
}

impl BatchState {
    /// The state of a compartment that has not started: batch 1, nothing counted.
    pub fn initial() -> Self {
        BatchState {
            current_batch: 1,
            ..BatchState::default()
        }
    }
}

// serde's `skip_serializing_if` hands over a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_false(value: &bool) -> bool {
    !*value
}
