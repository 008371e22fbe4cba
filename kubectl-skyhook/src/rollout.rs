//! One Skyhook's rollout as the rules in `skyhook-api` see it: which nodes it selects, each
//! node's state and status, its compartments with their ceilings and batch states, and what
//! the next selection would pick or block. Shared by `status <name>` and `plan`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};
use k8s_openapi::jiff::Timestamp;
use skyhook_api::budget::{
    BlockReason, CandidateNode, CompartmentSpec, NodeActivity, skyhook_compartments, slot_hold,
};
use skyhook_api::generation::Group;
use skyhook_api::interrupt::{changed_keys, has_interrupt};
use skyhook_api::keys::Keys;
use skyhook_api::node_mirror::NodeRecordKeys;
use skyhook_api::node_state::NodeState;
use skyhook_api::ordering::{SkyhookProgress, node_ready};
// The plugin cannot see the operator's configuration: a runtime-required Skyhook is taken to
// tolerate the default taint.
use skyhook_api::rollout::{CompartmentRollout, RolloutInput, RolloutNode, rollout};
use skyhook_api::runtime_required::parse_taint;
use skyhook_api::stage::node_complete;
use skyhook_api::toleration::node_selection_tolerations;
use skyhook_api::uninstall::{UninstallMode, UninstallRules};
use skyhook_api::v1alpha1::{DeploymentPolicySpec, Skyhook, Status};
use skyhook_api::window::windows_now;

use crate::cluster::{self, Cluster, name_of};

/// One node selected by the Skyhook.
#[derive(Debug, Clone)]
pub struct NodeFacts<'c> {
    /// The node.
    pub node: &'c Node,
    /// Its name.
    pub name: &'c str,
    /// Its `nodeState_<skyhook>` annotation, empty when absent or unreadable.
    pub state: NodeState,
    /// Why the annotation could not be read, if it could not.
    pub state_error: Option<String>,
    /// Its `status_<skyhook>` annotation (`unknown` when absent).
    pub status: Status,
    /// Whether every package is complete on it.
    pub complete: bool,
    /// Whether higher-priority Skyhooks let this one work on it.
    pub ready: bool,
    /// Whether an earlier batch picked it (`status.nodePriority`).
    pub picked: bool,
    /// Whether a package or interrupt pod of the Skyhook is on it.
    pub pod_on_node: bool,
}

/// One compartment with its nodes and the selection the rules would make now.
pub type CompartmentView<'c> = CompartmentRollout<'c>;

/// The rollout of one Skyhook.
#[derive(Debug, Clone)]
pub struct Rollout<'c> {
    /// The Skyhook.
    pub skyhook: &'c Skyhook,
    /// Its name.
    pub name: &'c str,
    /// The nodes it selects, in name order.
    pub nodes: Vec<NodeFacts<'c>>,
    /// The same nodes as the rules saw them (parallel to [`Rollout::nodes`]).
    pub selection_nodes: Vec<RolloutNode<'c>>,
    /// The tolerations its node selection uses.
    pub tolerations: Vec<Toleration>,
    /// Its compartments in policy order; empty when the policy is missing.
    pub compartments: Vec<CompartmentView<'c>>,
    /// The named DeploymentPolicy does not exist.
    pub policy_missing: bool,
    /// The API group of the object, whose keys its node state is read under.
    pub group: Group,
}

impl<'c> Rollout<'c> {
    /// Analyses `skyhook` (which need not be in `cluster`, for `plan`) against the cluster,
    /// with the rules' own [`rollout`]. The plugin cannot see maintenance windows' clock or
    /// the health gate's node history as the controller does, so its selection is the
    /// ungated one: what the controller picks once the gates are open.
    pub fn new(skyhook: &'c Skyhook, cluster: &'c Cluster) -> Self {
        let name = name_of(&skyhook.metadata);
        let nodes = node_facts(skyhook, cluster);
        let (specs, policy_missing) = compartment_specs(skyhook, cluster, nodes.len());
        let tolerations = tolerations(cluster.keys(), skyhook);
        let selection_nodes = rollout_nodes(cluster.keys(), name, &nodes);
        let no_statuses = BTreeMap::new();
        let recorded = (skyhook.status.as_ref()).map_or(&no_statuses, |s| &s.compartment_statuses);
        let now = Timestamp::now();
        // The window budget in force now, when a window is open: its clock is the plugin's.
        let window_budgets = policy_of(skyhook, cluster).map_or_else(Vec::new, |policy| {
            windows_now(&policy.maintenance_windows, now).1
        });
        let compartments = rollout(&RolloutInput {
            compartments: &specs,
            tolerations: &tolerations,
            nodes: &selection_nodes,
            recorded,
            may_start: true,
            window_budgets: &window_budgets,
            settle: None,
            now,
        });
        Rollout {
            group: cluster.group,
            skyhook,
            name,
            nodes,
            selection_nodes,
            tolerations,
            compartments,
            policy_missing,
        }
    }

    /// The compartment a node is in.
    pub fn compartment_of(&self, node_index: usize) -> Option<&CompartmentView<'c>> {
        self.compartments
            .iter()
            .find(|c| c.nodes.contains(&node_index))
    }

    /// Why a node cannot be worked on now, if it cannot: the ignore label or intolerable
    /// taints (the rules' own reasons).
    pub fn block_reason(&self, node: &str) -> Option<&BlockReason> {
        self.compartments
            .iter()
            .flat_map(|c| &c.selection.blocked)
            .find(|b| b.name == node)
            .map(|b| &b.reason)
    }
}

/// The nodes `skyhook` selects, with what the rules need to know about each, in name order.
fn node_facts<'c>(skyhook: &'c Skyhook, cluster: &'c Cluster) -> Vec<NodeFacts<'c>> {
    let name = name_of(&skyhook.metadata);
    let progress = all_progress(cluster, skyhook);
    let target = progress
        .iter()
        .find(|p| p.name == name)
        .cloned()
        .unwrap_or_else(|| progress_of(skyhook, cluster));
    let status = skyhook.status.as_ref();
    let records = NodeRecordKeys::of(cluster.keys(), name);
    let mut nodes: Vec<NodeFacts<'c>> = selected_nodes(skyhook, cluster)
        .map(|node| {
            let node_name = name_of(&node.metadata);
            let (state, state_error) = read_state(cluster.keys(), node, name);
            NodeFacts {
                node,
                name: node_name,
                complete: is_complete(skyhook, &state),
                state,
                state_error,
                status: node_status(cluster.keys(), node, name),
                ready: node_ready(&progress, &target, node_name),
                picked: records
                    .picked_at(cluster::annotations(node), status, node_name)
                    .is_some(),
                pod_on_node: cluster.pods.iter().any(|pod| {
                    cluster::pod_node(pod) == Some(node_name)
                        && cluster::pod_label(pod, cluster.keys().name_label) == Some(name)
                        && !cluster.keys().is_pre_pull_pod(pod.metadata.labels.as_ref())
                }),
            }
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(b.name));
    nodes
}

/// The compartments of the Skyhook's DeploymentPolicy, or of its legacy interruption budget
/// over `node_count` nodes; and whether the named policy is missing (then there are none).
fn compartment_specs(
    skyhook: &Skyhook,
    cluster: &Cluster,
    node_count: usize,
) -> (Vec<CompartmentSpec>, bool) {
    match skyhook_compartments(&skyhook.spec, policy_of(skyhook, cluster), node_count) {
        Some(compartments) => (compartments, false),
        None => (Vec::new(), true),
    }
}

/// The spec of the DeploymentPolicy `skyhook` names, when it names one that exists.
fn policy_of<'c>(skyhook: &Skyhook, cluster: &'c Cluster) -> Option<&'c DeploymentPolicySpec> {
    (skyhook.spec.policy_name())
        .and_then(|name| cluster.policy(name))
        .map(|policy| &policy.spec)
}

/// The nodes as the rules see them, for `skyhook`.
fn rollout_nodes<'c>(keys: &Keys, skyhook: &str, nodes: &[NodeFacts<'c>]) -> Vec<RolloutNode<'c>> {
    nodes
        .iter()
        .map(|facts| RolloutNode {
            candidate: candidate(keys, skyhook, facts),
            gate: None,
        })
        .collect()
}

/// The tolerations node selection uses for `skyhook`.
fn tolerations(keys: &Keys, skyhook: &Skyhook) -> Vec<Toleration> {
    let runtime_taint: Option<Taint> = skyhook
        .spec
        .runtime_required
        .then(|| parse_taint(keys.default_runtime_required_taint).ok())
        .flatten();
    node_selection_tolerations(&skyhook.spec.additional_tolerations, runtime_taint.as_ref())
}

/// A node as selection sees it, for `skyhook`.
fn candidate<'c>(keys: &Keys, skyhook: &str, facts: &NodeFacts<'c>) -> CandidateNode<'c> {
    let hold = slot_hold(NodeActivity {
        keys,
        skyhook,
        annotations: cluster::annotations(facts.node),
        unschedulable: cluster::unschedulable(facts.node),
        state: &facts.state,
        status: facts.status,
        pod_on_node: facts.pod_on_node,
    });
    CandidateNode {
        name: facts.name,
        created: cluster::created(facts.node),
        labels: cluster::labels(facts.node),
        taints: cluster::taints(facts.node),
        status: facts.status,
        complete: facts.complete,
        ready: facts.ready,
        picked: facts.picked,
        hold,
    }
}

/// The nodes `skyhook` targets (see [`skyhook_api::v1alpha1::SkyhookSpec::target_selector`]).
pub fn selected_nodes<'c>(
    skyhook: &Skyhook,
    cluster: &'c Cluster,
) -> impl Iterator<Item = &'c Node> + use<'c> {
    let selector = skyhook.spec.target_selector();
    cluster
        .nodes
        .iter()
        .filter(move |node| selector.matches(cluster::labels(node)))
}

/// The node's `nodeState_<skyhook>`, or an empty state and why it could not be read.
pub fn read_state(keys: &Keys, node: &Node, skyhook: &str) -> (NodeState, Option<String>) {
    match cluster::annotations(node).get(&keys.node_state_annotation(skyhook)) {
        None => (NodeState::new(), None),
        Some(value) => match NodeState::parse(value) {
            Ok(state) => (state, None),
            Err(error) => (NodeState::new(), Some(error.to_string())),
        },
    }
}

/// The node's `status_<skyhook>` annotation; `unknown` when absent or not a status.
pub fn node_status(keys: &Keys, node: &Node, skyhook: &str) -> Status {
    cluster::annotations(node)
        .get(&keys.node_status_key(skyhook))
        .and_then(|value| value.parse().ok())
        .unwrap_or(Status::Unknown)
}

/// Whether every package of `skyhook` is complete in `state` (the node completion rule, with
/// each package's effective interrupt).
pub fn is_complete(skyhook: &Skyhook, state: &NodeState) -> bool {
    let no_updates = BTreeMap::new();
    let updates = (skyhook.status.as_ref()).map_or(&no_updates, |s| &s.config_updates);
    // Only `plan` asks for the controller's mode; the completion of a node does not depend on
    // it except for legacy uninstall entries, which `legacy` counts as incomplete.
    let rules = UninstallRules {
        mode: UninstallMode::Legacy,
        deleting: skyhook.metadata.deletion_timestamp.is_some(),
    };
    node_complete(state, &skyhook.spec.packages, rules, |package| {
        skyhook
            .spec
            .packages
            .get(package)
            .is_some_and(|p| has_interrupt(p, changed_keys(updates, package)))
    })
}

fn progress_of<'c>(skyhook: &'c Skyhook, cluster: &'c Cluster) -> SkyhookProgress<'c> {
    let name = name_of(&skyhook.metadata);
    SkyhookProgress {
        name,
        priority: skyhook.spec.priority,
        disabled: cluster.disabled(skyhook),
        sequencing: skyhook.spec.sequencing,
        nodes: selected_nodes(skyhook, cluster)
            .map(|node| {
                let (state, _) = read_state(cluster.keys(), node, name);
                (name_of(&node.metadata), is_complete(skyhook, &state))
            })
            .collect(),
    }
}

/// The progress of every Skyhook in the cluster, except a cluster Skyhook of the same name as
/// `target`, which `target` replaces (so `plan` judges the planned spec).
fn all_progress<'c>(cluster: &'c Cluster, target: &'c Skyhook) -> Vec<SkyhookProgress<'c>> {
    let target_name = name_of(&target.metadata);
    cluster
        .skyhooks
        .iter()
        .filter(|s| name_of(&s.metadata) != target_name)
        .chain(std::iter::once(target))
        .map(|s| progress_of(s, cluster))
        .collect()
}
