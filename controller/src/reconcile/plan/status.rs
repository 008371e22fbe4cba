//! The Skyhook status subresource (spec §2.5, §2.13): node statuses and states mirrored from
//! the nodes, counters, compartments, conditions (with `Ready`) and `observedGeneration`.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use skyhook_api::budget::{reset_batch_state_enabled, reset_batch_states};
use skyhook_api::keys;
use skyhook_api::status::{SkyhookOverrides, counters, ready_condition, skyhook_status};
use skyhook_api::v1alpha1::{DeploymentPolicySpec, Skyhook, SkyhookStatus, Status};

use super::reboots::{UnconfirmedReboot, condition_message};
use super::selection::Blocking;
use super::{CONDITION_DRAIN_BLOCKED, CONDITION_SPEC_INVALID};

/// What one Skyhook's pass found, for its status.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub(super) version_changed: bool,
    pub(super) policy_missing: bool,
    pub(super) blocking: Blocking,
    /// The last package launch, for the `ApplyPackage` condition.
    pub(super) applied: Option<String>,
    /// Drains past their timeout, one message per node.
    pub(super) drain_blocked: Vec<String>,
    /// Reboots not confirmed in time, by node.
    pub(super) unconfirmed_reboots: BTreeMap<String, UnconfirmedReboot>,
    /// A package ConfigMap change waits for its nodes: the generation is not observed yet.
    pub(super) config_waiting: bool,
}

/// The status one Skyhook's pass leaves, and the transition it makes, if any.
#[derive(Debug)]
pub(super) struct NextStatus {
    pub(super) status: SkyhookStatus,
    /// `[<from>] -> [<to>]` when the Skyhook's status changes: its `State` Event says so.
    pub(super) transition: Option<String>,
}

/// Sets a condition, keeping its transition time when its status did not change.
fn set_condition(conditions: &mut Vec<Condition>, condition: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            let keep_time = existing.status == condition.status;
            let time = existing.last_transition_time.clone();
            *existing = condition;
            if keep_time {
                existing.last_transition_time = time;
            }
        }
        None => conditions.push(condition),
    }
}

/// The conditions of one Skyhook's status: its generation and this plan's time.
struct Conditions {
    generation: Option<i64>,
    now: Timestamp,
}

impl Conditions {
    fn of(skyhook: &Skyhook, now: Timestamp) -> Self {
        Conditions {
            generation: skyhook.metadata.generation,
            now,
        }
    }

    fn condition(&self, type_: &str, true_: bool, reason: &str, message: String) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: if true_ { "True" } else { "False" }.to_owned(),
            reason: reason.to_owned(),
            message,
            observed_generation: self.generation,
            last_transition_time: Time(self.now),
        }
    }
}

/// The status of a Skyhook whose spec breaks the validation rules (its nodes are left as they
/// are); `None` when it already says so.
pub(super) fn invalid_status(
    skyhook: &Skyhook,
    violations: &str,
    now: Timestamp,
) -> Option<SkyhookStatus> {
    let old = skyhook.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let conditions = Conditions::of(skyhook, now);
    set_condition(
        &mut status.conditions,
        conditions.condition(
            CONDITION_SPEC_INVALID,
            true,
            "SpecInvalid",
            format!("nothing runs until the spec is fixed: {violations}"),
        ),
    );
    (status != old).then_some(status)
}

/// The status one Skyhook's pass leaves: `status` carries the node maps as the pass left them;
/// this adds the overall status, the counts, the batch-state reset and the conditions.
pub(super) fn next_status(
    skyhook: &Skyhook,
    policy: Option<&DeploymentPolicySpec>,
    mut status: SkyhookStatus,
    outcome: Outcome,
    now: Timestamp,
) -> NextStatus {
    let previous = skyhook.status.as_ref().and_then(|s| s.status);
    let next = skyhook_status(
        status.node_status.values().copied(),
        SkyhookOverrides {
            disabled: skyhook.is_disabled(),
            paused: skyhook.is_paused(),
            policy_missing: outcome.policy_missing,
        },
    );
    let counted = counters(&status.node_status, &skyhook.spec.packages);
    status.complete_nodes = counted.complete_nodes;
    status.nodes_in_progress = counted.nodes_in_progress;
    status.package_list = counted.package_list;
    status.status = Some(next);
    let entering_complete = next == Status::Complete && previous != Some(Status::Complete);
    // A spec whose ConfigMap change still waits is not done, even if every node is complete
    // with the old configuration: tools waiting on `observedGeneration` must keep waiting.
    if next == Status::Complete && !outcome.config_waiting {
        status.observed_generation = skyhook.metadata.generation;
    }
    if (entering_complete || outcome.version_changed)
        && reset_batch_state_enabled(skyhook.spec.deployment_policy_options.as_ref(), policy)
    {
        reset_batch_states(&mut status.compartment_statuses);
    }
    let conditions = Conditions::of(skyhook, now);
    let transition = (previous != Some(next)).then(|| {
        let from = previous.map_or_else(|| "none".to_owned(), |s| s.to_string());
        format!("[{from}] -> [{next}]")
    });
    if let Some(transition) = &transition {
        set_condition(
            &mut status.conditions,
            conditions.condition(
                keys::CONDITION_TRANSITION,
                next == Status::Complete,
                next.as_str(),
                format!("Transitioned {transition}"),
            ),
        );
    }
    let previous_ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == keys::CONDITION_READY)
        .cloned();
    set_condition(
        &mut status.conditions,
        ready_condition(
            next,
            conditions.generation,
            previous_ready.as_ref(),
            Time(now),
        ),
    );
    pass_conditions(skyhook, &mut status.conditions, &conditions, &outcome);
    bound_node_state_mirror(&mut status);
    NextStatus { status, transition }
}

/// The conditions that report what the pass found: the last launch, blocked and ignored nodes,
/// a missing policy, blocked drains and unconfirmed reboots.
fn pass_conditions(
    skyhook: &Skyhook,
    list: &mut Vec<Condition>,
    conditions: &Conditions,
    outcome: &Outcome,
) {
    if let Some(applied) = &outcome.applied {
        set_condition(
            list,
            conditions.condition(
                keys::CONDITION_APPLY_PACKAGE,
                true,
                keys::APPLY_PACKAGE_REASON,
                applied.clone(),
            ),
        );
    }
    blocking_conditions(list, conditions, &outcome.blocking);
    upsert_or_remove(
        list,
        keys::CONDITION_DEPLOYMENT_POLICY_NOT_FOUND,
        outcome.policy_missing.then(|| {
            conditions.condition(
                keys::CONDITION_DEPLOYMENT_POLICY_NOT_FOUND,
                true,
                "DeploymentPolicyNotFound",
                format!(
                    "DeploymentPolicy {:?} does not exist; create it or fix spec.deploymentPolicy",
                    skyhook.spec.policy_name().unwrap_or_default()
                ),
            )
        }),
    );
    list.retain(|c| c.type_ != CONDITION_SPEC_INVALID);
    upsert_or_remove(
        list,
        CONDITION_DRAIN_BLOCKED,
        (!outcome.drain_blocked.is_empty()).then(|| {
            conditions.condition(
                CONDITION_DRAIN_BLOCKED,
                true,
                "DrainTimeout",
                outcome.drain_blocked.join("; "),
            )
        }),
    );
    let unconfirmed = &outcome.unconfirmed_reboots;
    upsert_or_remove(
        list,
        keys::CONDITION_REBOOT_NOT_CONFIRMED,
        (!unconfirmed.is_empty()).then(|| {
            conditions.condition(
                keys::CONDITION_REBOOT_NOT_CONFIRMED,
                true,
                "RebootNotConfirmed",
                condition_message(unconfirmed),
            )
        }),
    );
}

/// `TaintNotTolerable` and `NodesIgnored`, written False with upstream's messages when no node
/// is blocked.
fn blocking_conditions(list: &mut Vec<Condition>, conditions: &Conditions, blocking: &Blocking) {
    let intolerable = &blocking.intolerable;
    set_condition(
        list,
        conditions.condition(
            keys::CONDITION_TAINT_NOT_TOLERABLE,
            !intolerable.is_empty(),
            keys::TAINT_NOT_TOLERABLE_REASON,
            if intolerable.is_empty() {
                keys::ALL_TAINTS_TOLERABLE_MESSAGE.to_owned()
            } else {
                format!(
                    "nodes with taints the Skyhook does not tolerate: {}",
                    intolerable.join("; ")
                )
            },
        ),
    );
    let ignored = &blocking.ignored;
    set_condition(
        list,
        conditions.condition(
            keys::CONDITION_NODES_IGNORED,
            !ignored.is_empty(),
            keys::NODES_IGNORED_REASON,
            if ignored.is_empty() {
                keys::NO_NODES_IGNORED_MESSAGE.to_owned()
            } else {
                format!(
                    "nodes labelled {}=true: {}",
                    keys::IGNORE_LABEL,
                    ignored.join(", ")
                )
            },
        ),
    );
}

/// The largest `status.nodeState` mirror (as JSON) the status keeps. Server-side apply records
/// every map key again in `managedFields`, and etcd refuses requests over 1.5 MiB: at 5,000
/// nodes the mirror made the status unwritable ("etcdserver: request is too large"), so the
/// Skyhook never reported progress or completion. The other per-node maps (`nodeStatus`,
/// `nodeBootIds`, `nodePriority`) and their managed fields take about 170 bytes per node, so
/// 256 KiB keeps a 5,000-node status near 1 MiB.
pub const NODE_STATE_MIRROR_MAX_BYTES: usize = 256 * 1024;

/// Empties `status.nodeState` when it exceeds [`NODE_STATE_MIRROR_MAX_BYTES`]. It is only a
/// mirror: the `nodeState_<name>` node annotations stay the source of truth, and `nodeStatus`
/// and the counts still say where every node stands.
pub fn bound_node_state_mirror(status: &mut SkyhookStatus) {
    let size = serde_json::to_vec(&status.node_state).map_or(usize::MAX, |json| json.len());
    if size > NODE_STATE_MIRROR_MAX_BYTES {
        status.node_state.clear();
    }
}

fn upsert_or_remove(conditions: &mut Vec<Condition>, type_: &str, condition: Option<Condition>) {
    match condition {
        Some(condition) => set_condition(conditions, condition),
        None => conditions.retain(|c| c.type_ != type_),
    }
}

#[cfg(test)]
mod tests {
    use skyhook_api::node_state::NodeState;
    use skyhook_api::v1alpha1::SkyhookStatus;

    use super::bound_node_state_mirror;

    fn status_of(nodes: usize) -> SkyhookStatus {
        let state = NodeState::parse(
            r#"{"pkg|1.2.3":{"name":"pkg","version":"1.2.3","image":"ghcr.io/nvidia/skyhook/agentless","stage":"config","state":"complete"}}"#,
        )
        .unwrap();
        let mut status = SkyhookStatus::default();
        for index in 0..nodes {
            status
                .node_state
                .insert(format!("node-{index}"), state.clone());
        }
        status
    }

    #[test]
    fn the_node_state_mirror_is_kept_until_it_would_make_the_status_unwritable() {
        for (nodes, kept) in [(0, 0), (3, 3), (1_000, 1_000), (5_000, 0)] {
            let mut status = status_of(nodes);
            bound_node_state_mirror(&mut status);
            assert_eq!(status.node_state.len(), kept, "{nodes} nodes");
        }
    }
}
