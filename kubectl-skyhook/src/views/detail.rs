//! `status <name>`: one rollout at a glance. Compartments with batch, ceiling and progress;
//! nodes grouped by status with the package and stage each is in; every erroring package with
//! its exit code or reason and restarts; the progress of explicit uninstalls; blocked nodes and
//! why; what happens next.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Serialize;
use skyhook_api::budget::BlockReason;
use skyhook_api::generation::Group;
use skyhook_api::interrupt::{changed_keys, has_interrupt};
use skyhook_api::keys::{self, Keys};
use skyhook_api::node_state::NodeState;
use skyhook_api::selector::Selector;
use skyhook_api::stage::package_complete;
use skyhook_api::v1alpha1::{PackageStatus, Skyhook, State, Status};

use super::uninstall::{UninstallRow, uninstall_progress, uninstall_table};
use crate::cluster::{self, Cluster, name_of, pod_label, pod_node, reported_status};
use crate::eta::{describe, rollout_estimate};
use crate::output::{Block, Cell, Table, Tone, View};
use crate::rollout::{CompartmentView, NodeFacts, Rollout};

/// Most node names listed inline in a sentence.
const NAMES_INLINE: usize = 5;

/// `status <name>` JSON/YAML.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkyhookDetail {
    /// The API group of the object, for the text (not serialised).
    #[serde(skip)]
    pub group: Group,
    /// Skyhook name.
    pub name: String,
    /// Status as the operator last recorded it.
    pub status: String,
    /// Priority.
    pub priority: i32,
    /// DeploymentPolicy name; absent in legacy mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The pause annotation is set.
    pub paused: bool,
    /// The disable annotation is set.
    pub disabled: bool,
    /// Spec packages as `name@version`.
    pub packages: Vec<String>,
    /// Selected nodes where every package is complete.
    pub complete_nodes: usize,
    /// Selected nodes.
    pub total_nodes: usize,
    /// When the rollout should end: RFC 3339, `done`, or `unknown`.
    pub estimated_end: String,
    /// What the estimate rests on, or why it is unknown.
    pub estimate_basis: String,
    /// Compartments in policy order.
    pub compartments: Vec<CompartmentRow>,
    /// Selected nodes, grouped by status (erroring first, complete last).
    pub nodes: Vec<NodeRow>,
    /// Packages whose explicit uninstall is requested or still running somewhere (left out
    /// of JSON and YAML when there is none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uninstalls: Vec<UninstallRow>,
    /// Every erroring package on every node.
    pub erroring: Vec<ErroringPackage>,
    /// Nodes that cannot be worked on, and why.
    pub blocked: Vec<BlockedNodeRow>,
    /// What the operator does next, in words.
    pub next: Vec<String>,
    /// Things the plugin could not read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One compartment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompartmentRow {
    /// Name (`__default__` for the catch-all).
    pub name: String,
    /// `fixed`, `linear`, `exponential` or `unknown`.
    pub strategy: String,
    /// Nodes in it.
    pub nodes: usize,
    /// Most nodes worked on at once.
    pub ceiling: usize,
    /// Current batch number.
    pub batch: i32,
    /// Complete nodes.
    pub complete: usize,
    /// Nodes in progress.
    pub in_progress: usize,
    /// Erroring nodes.
    pub erroring: usize,
    /// Complete nodes × 100 / nodes, rounded down.
    pub progress_percent: usize,
    /// Failed batches in a row.
    pub consecutive_failures: i32,
    /// The failure threshold stopped the compartment.
    pub should_stop: bool,
}

/// One node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    /// Node name.
    pub name: String,
    /// Its status for this Skyhook.
    pub status: String,
    /// Its compartment.
    pub compartment: String,
    /// Whether every package is complete on it (the completion rule, whatever its status
    /// annotation says).
    pub complete: bool,
    /// The package it is working on (or waits to start), absent when complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// That package's stage, absent when it has not started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// That package's state, `pending` when it has not started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// One erroring package on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErroringPackage {
    /// Node name.
    pub node: String,
    /// Package name.
    pub package: String,
    /// Package version.
    pub version: String,
    /// The failing stage.
    pub stage: String,
    /// The failing container's exit code, when its pod still exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The failing container's termination or waiting reason, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The failing container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Restarts: the larger of the node state's count and the pod's container restarts.
    pub restarts: i32,
}

/// A node that cannot be worked on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedNodeRow {
    /// Node name.
    pub node: String,
    /// `ignored`, `taints` or `draining`.
    pub reason: String,
    /// The label, the taints, or the pods the drain waits for.
    pub detail: String,
}

impl SkyhookDetail {
    /// Whether every selected node is complete (`status <name> --watch` stops).
    pub fn complete(&self) -> bool {
        self.complete_nodes == self.total_nodes
    }
}

/// The detail of the Skyhook `name`, or `None` when there is no such Skyhook.
pub fn skyhook_detail(cluster: &Cluster, name: &str) -> Option<SkyhookDetail> {
    let skyhook = cluster.skyhook(name)?;
    let rollout = Rollout::new(skyhook, cluster);
    let compartments: Vec<CompartmentRow> =
        rollout.compartments.iter().map(compartment_row).collect();
    let mut nodes: Vec<NodeRow> = rollout
        .nodes
        .iter()
        .enumerate()
        .map(|(index, facts)| node_row(&rollout, index, facts))
        .collect();
    nodes.sort_by_key(|row| (status_rank(&row.status), row.name.clone()));
    let erroring = rollout
        .nodes
        .iter()
        .flat_map(|facts| erroring_packages(cluster.keys(), facts, name, &cluster.pods))
        .collect();
    let blocked = blocked_nodes(&rollout, &cluster.pods, &cluster.pdbs);
    let warnings = warnings(&rollout);
    let readable: Vec<&NodeState> = (rollout.nodes.iter())
        .filter(|n| n.state_error.is_none())
        .map(|n| &n.state)
        .collect();
    let uninstalls = uninstall_progress(skyhook, &readable);
    let (estimated_end, estimate_basis) = describe(
        &rollout_estimate(&rollout, cluster.read_at),
        cluster.read_at,
    );
    Some(SkyhookDetail {
        group: cluster.group,
        name: name.to_owned(),
        status: reported_status(skyhook),
        priority: skyhook.spec.priority,
        policy: skyhook.spec.policy_name().map(str::to_owned),
        paused: cluster.paused(skyhook),
        disabled: cluster.disabled(skyhook),
        packages: skyhook
            .spec
            .packages
            .iter()
            .map(|(name, p)| format!("{name}@{}", p.version))
            .collect(),
        complete_nodes: rollout.nodes.iter().filter(|n| n.complete).count(),
        total_nodes: rollout.nodes.len(),
        next: next_steps(&rollout),
        estimated_end,
        estimate_basis,
        compartments,
        nodes,
        uninstalls,
        erroring,
        blocked,
        warnings,
    })
}

fn compartment_row(c: &CompartmentView<'_>) -> CompartmentRow {
    CompartmentRow {
        name: c.spec.name.clone(),
        strategy: c.spec.strategy_kind().as_str().to_owned(),
        nodes: c.nodes.len(),
        ceiling: c.ceiling,
        batch: c.batch_state.current_batch,
        complete: c.complete,
        in_progress: c.in_progress,
        erroring: c.erroring,
        progress_percent: (c.complete * 100).checked_div(c.nodes.len()).unwrap_or(0),
        consecutive_failures: c.batch_state.consecutive_failures,
        should_stop: c.batch_state.should_stop,
    }
}

/// How `status` introduces each True Skyhook condition that needs someone's attention.
fn condition_warning(keys: &Keys, type_: &str) -> Option<&'static str> {
    let warnings = [
        (keys.condition_reboot_not_confirmed, "reboot not confirmed"),
        (
            keys.condition_fleet_budget_wait,
            "waiting for the fleet budget",
        ),
        (
            keys.condition_outside_maintenance_window,
            "waiting for a maintenance window",
        ),
        (keys.condition_health_gate_held, "held by the health gate"),
        (
            keys.condition_window_budget_held,
            "held by a maintenance window's budget",
        ),
        (
            keys.condition_readiness_gate_held,
            "nodes held by readiness gates",
        ),
        (
            keys.condition_topology_budget_held,
            "held by the budget's topology",
        ),
        (
            keys.condition_pre_pull_held,
            "nodes waiting for their images before the cordon",
        ),
        (
            keys::CONDITION_NODE_STATE_MALFORMED,
            "node state unreadable",
        ),
        (
            keys::CONDITION_UNINSTALL_IN_PROGRESS,
            "uninstall in progress",
        ),
        (keys::CONDITION_UNINSTALL_FAILED, "uninstall failing"),
        (keys::CONDITION_BLOCKED, "blocked"),
        (keys::CONDITION_DELETION_BLOCKED, "deletion blocked"),
    ];
    (warnings.into_iter())
        .find(|(warned, _)| *warned == type_)
        .map(|(_, warning)| warning)
}

/// What holds new batches back now, from the True gate conditions the operator wrote: the
/// selection `status` computes does not see the fleet budget, windows or the health gate.
fn gate_holds(keys: &Keys, skyhook: &Skyhook) -> Vec<String> {
    let gates = [
        keys.condition_fleet_budget_wait,
        keys.condition_outside_maintenance_window,
        keys.condition_health_gate_held,
    ];
    holds_of(keys, skyhook, &gates)
}

/// The `held, ...` lines of the True conditions of `gates`.
fn holds_of(keys: &Keys, skyhook: &Skyhook, gates: &[&str]) -> Vec<String> {
    skyhook
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .filter(|c| c.status == "True" && gates.contains(&c.type_.as_str()))
        .filter_map(|c| {
            condition_warning(keys, &c.type_).map(|what| format!("held, {what}: {}", c.message))
        })
        .collect()
}

/// Unreadable node state annotations, then the conditions of [`condition_warning`].
fn warnings(rollout: &Rollout<'_>) -> Vec<String> {
    let unreadable = rollout.nodes.iter().filter_map(|n| {
        n.state_error.as_ref().map(|error| {
            format!(
                "node {}: annotation {} is unreadable ({error}); the node is shown as not started",
                n.name,
                rollout.group.keys().node_state_annotation(rollout.name)
            )
        })
    });
    let conditions = rollout
        .skyhook
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .filter(|c| c.status == "True")
        .filter_map(|c| {
            condition_warning(rollout.group.keys(), &c.type_)
                .map(|what| format!("{what}: {}", c.message))
        });
    unreadable.chain(conditions).collect()
}

/// Erroring nodes first, complete nodes last.
fn status_rank(status: &str) -> u8 {
    match status {
        "erroring" => 0,
        "in_progress" => 1,
        "blocked" => 2,
        "waiting" => 3,
        "paused" | "disabled" => 4,
        "unknown" => 5,
        _ => 6,
    }
}

fn node_row(rollout: &Rollout<'_>, index: usize, facts: &NodeFacts<'_>) -> NodeRow {
    let current = current_package(rollout, facts);
    NodeRow {
        name: facts.name.to_owned(),
        status: facts.status.as_str().to_owned(),
        compartment: rollout
            .compartment_of(index)
            .map_or_else(|| "-".to_owned(), |c| c.spec.name.clone()),
        complete: facts.complete,
        package: current.as_ref().map(|c| c.0.clone()),
        stage: current.as_ref().and_then(|c| c.1.clone()),
        state: current.map(|c| c.2),
    }
}

/// The package a node is on: an erroring entry, else an in-progress one, else the first spec
/// package not yet complete (`pending`). `None` on a complete node.
fn current_package(
    rollout: &Rollout<'_>,
    facts: &NodeFacts<'_>,
) -> Option<(String, Option<String>, String)> {
    if facts.complete {
        return None;
    }
    let running = |wanted: State| {
        facts
            .state
            .iter()
            .map(|(_, entry)| entry)
            .find(|entry| entry.state == wanted)
    };
    if let Some(entry) = running(State::Erroring).or_else(|| running(State::InProgress)) {
        return Some((
            format!("{}@{}", entry.name, entry.version),
            Some(entry.stage.as_str().to_owned()),
            entry.state.as_str().to_owned(),
        ));
    }
    let skyhook = rollout.skyhook;
    let no_updates = BTreeMap::new();
    let updates = (skyhook.status.as_ref()).map_or(&no_updates, |s| &s.config_updates);
    skyhook
        .spec
        .packages
        .iter()
        .find(|(name, package)| {
            let interrupt = has_interrupt(package, changed_keys(updates, name));
            !package_complete(facts.state.get_version(name, &package.version), interrupt)
        })
        .map(|(name, package)| {
            let entry = facts.state.get_version(name, &package.version);
            (
                format!("{name}@{}", package.version),
                entry.map(|e| e.stage.as_str().to_owned()),
                entry.map_or_else(|| "pending".to_owned(), |e| e.state.as_str().to_owned()),
            )
        })
}

fn erroring_packages(
    keys: &Keys,
    facts: &NodeFacts<'_>,
    skyhook: &str,
    pods: &[Pod],
) -> Vec<ErroringPackage> {
    facts
        .state
        .iter()
        .map(|(_, entry)| entry)
        .filter(|entry| entry.state == State::Erroring)
        .map(|entry| {
            let failure = package_pods(keys, pods, skyhook, facts.name, entry)
                .flat_map(container_statuses)
                .find_map(failure_of);
            let pod_restarts = package_pods(keys, pods, skyhook, facts.name, entry)
                .flat_map(container_statuses)
                .map(|s| s.restart_count)
                .max()
                .unwrap_or(0);
            ErroringPackage {
                node: facts.name.to_owned(),
                package: entry.name.clone(),
                version: entry.version.clone(),
                stage: entry.stage.as_str().to_owned(),
                exit_code: failure.as_ref().and_then(|f| f.exit_code),
                reason: failure.as_ref().and_then(|f| f.reason.clone()),
                container: failure.map(|f| f.container),
                restarts: entry.restarts.max(pod_restarts),
            }
        })
        .collect()
}

/// The pods of one package entry on one node.
fn package_pods<'p>(
    keys: &'p Keys,
    pods: &'p [Pod],
    skyhook: &'p str,
    node: &'p str,
    entry: &'p PackageStatus,
) -> impl Iterator<Item = &'p Pod> + 'p {
    let package_label = format!("{}-{}", entry.name, entry.version);
    pods.iter().filter(move |pod| {
        pod_node(pod) == Some(node)
            && pod_label(pod, keys.name_label) == Some(skyhook)
            && pod_label(pod, keys.package_label) == Some(package_label.as_str())
    })
}

fn container_statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    let status = pod.status.as_ref();
    status
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or_default()
        .iter()
        .chain(
            status
                .and_then(|s| s.container_statuses.as_deref())
                .unwrap_or_default(),
        )
}

struct Failure {
    container: String,
    exit_code: Option<i32>,
    reason: Option<String>,
}

/// A container that failed: terminated (now or last time) with a non-zero exit code, or
/// waiting for a reason such as `CrashLoopBackOff` or `ImagePullBackOff`.
fn failure_of(status: &ContainerStatus) -> Option<Failure> {
    let terminated = status
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .filter(|t| t.exit_code != 0)
        .or_else(|| {
            status
                .last_state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .filter(|t| t.exit_code != 0)
        });
    if let Some(terminated) = terminated {
        return Some(Failure {
            container: status.name.clone(),
            exit_code: Some(terminated.exit_code),
            reason: terminated.reason.clone(),
        });
    }
    let waiting = status.state.as_ref().and_then(|s| s.waiting.as_ref())?;
    let reason = waiting.reason.clone().filter(|r| r != "PodInitializing")?;
    Some(Failure {
        container: status.name.clone(),
        exit_code: None,
        reason: Some(reason),
    })
}

fn blocked_nodes(
    rollout: &Rollout<'_>,
    pods: &[Pod],
    pdbs: &[PodDisruptionBudget],
) -> Vec<BlockedNodeRow> {
    let mut rows = Vec::new();
    for facts in &rollout.nodes {
        match rollout.block_reason(facts.name) {
            Some(BlockReason::Ignored) => rows.push(BlockedNodeRow {
                node: facts.name.to_owned(),
                reason: "ignored".into(),
                detail: format!("label {}=true", rollout.group.keys().ignore_label),
            }),
            Some(BlockReason::IntolerableTaints(taints)) => rows.push(BlockedNodeRow {
                node: facts.name.to_owned(),
                reason: "taints".into(),
                detail: format!("does not tolerate {}", taints.join(", ")),
            }),
            Some(BlockReason::NoTopologyLabel(key)) => rows.push(BlockedNodeRow {
                node: facts.name.to_owned(),
                reason: "topology".into(),
                detail: format!(
                    "no {key} label for the budget's topology (allowUnlabelled is false)"
                ),
            }),
            None => {}
        }
        let cordoned_here = cluster::annotations(facts.node)
            .get(&rollout.group.keys().cordon_annotation(rollout.name))
            .is_some_and(|v| v == "true");
        if !facts.complete && cordoned_here && cluster::unschedulable(facts.node) {
            let remaining: Vec<String> = pods
                .iter()
                .filter(|pod| pod_node(pod) == Some(facts.name))
                .filter(|pod| pod_label(pod, rollout.group.keys().name_label).is_none())
                .filter(|pod| !owned_by_daemon_set(pod))
                .filter(|pod| {
                    !matches!(
                        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                        Some("Succeeded" | "Failed")
                    )
                })
                .map(|pod| {
                    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                    let held_by = holding_budgets(pod, pdbs);
                    if held_by.is_empty() {
                        format!("{namespace}/{}", name_of(&pod.metadata))
                    } else {
                        format!(
                            "{namespace}/{} (held by PodDisruptionBudget {})",
                            name_of(&pod.metadata),
                            held_by.join(", ")
                        )
                    }
                })
                .collect();
            let detail = if remaining.is_empty() {
                format!(
                    "cordoned by this {}; no pods left to evict",
                    rollout.group.kind()
                )
            } else {
                format!("cordoned; waiting for pods to leave: {}", list(&remaining))
            };
            rows.push(BlockedNodeRow {
                node: facts.name.to_owned(),
                reason: "draining".into(),
                detail,
            });
        }
    }
    rows
}

/// The PodDisruptionBudgets of the pod's namespace that select it and allow no disruption
/// now, which is what keeps an eviction from succeeding. A budget without a selector
/// selects nothing (policy/v1).
fn holding_budgets(pod: &Pod, pdbs: &[PodDisruptionBudget]) -> Vec<String> {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    pdbs.iter()
        .filter(|pdb| pdb.metadata.namespace == pod.metadata.namespace)
        .filter(|pdb| {
            pdb.status
                .as_ref()
                .is_some_and(|s| s.disruptions_allowed <= 0)
        })
        .filter(|pdb| {
            pdb.spec
                .as_ref()
                .and_then(|spec| spec.selector.as_ref())
                .is_some_and(|selector| Selector::parse_or_nothing(selector).matches(&labels))
        })
        .map(|pdb| name_of(&pdb.metadata).to_owned())
        .collect()
}

fn owned_by_daemon_set(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.kind == "DaemonSet")
}

/// Names joined with commas, the first few only.
fn list(names: &[String]) -> String {
    if names.len() <= NAMES_INLINE {
        names.join(", ")
    } else {
        format!(
            "{} and {} more",
            names[..NAMES_INLINE].join(", "),
            names.len() - NAMES_INLINE
        )
    }
}

fn next_steps(rollout: &Rollout<'_>) -> Vec<String> {
    let name = rollout.name;
    let skyhook = rollout.skyhook;
    if rollout.policy_missing {
        return vec![format!(
            "nothing: DeploymentPolicy {:?} does not exist; create it or remove spec.deploymentPolicy",
            skyhook.spec.policy_name().unwrap_or_default()
        )];
    }
    let keys = rollout.group.keys();
    let (kind, word) = (keys.kind, keys.word);
    let halted = |key: &str| {
        (skyhook.metadata.annotations.as_ref())
            .and_then(|a| a.get(key))
            .is_some_and(|v| v == "true")
    };
    if halted(keys.disable_annotation) {
        return vec![format!(
            "nothing: the {kind} is disabled; `kubectl {word} enable {name}` lets it work again"
        )];
    }
    if halted(keys.pause_annotation) {
        return vec![format!(
            "nothing: the {kind} is paused; `kubectl {word} resume {name}` lets it work again"
        )];
    }
    if rollout.nodes.iter().all(|n| n.complete) {
        return vec!["nothing: every selected node is complete".to_owned()];
    }
    let holds = gate_holds(keys, skyhook);
    let mut steps = Vec::new();
    for compartment in &rollout.compartments {
        let label = format!("compartment {}", compartment.spec.name);
        let batch = compartment.batch_state.current_batch;
        let incomplete: Vec<&NodeFacts<'_>> = compartment
            .nodes
            .iter()
            .map(|&i| &rollout.nodes[i])
            .filter(|n| !n.complete)
            .collect();
        if incomplete.is_empty() {
            continue;
        }
        if compartment.batch_state.should_stop {
            steps.push(format!(
                "{label}: stopped after {} failed batches in a row; `kubectl skyhook deployment-policy reset {name}` starts it again",
                compartment.batch_state.consecutive_failures
            ));
            continue;
        }
        let picks: Vec<String> = compartment
            .selection
            .picks
            .iter()
            .map(|n| (*n).to_owned())
            .collect();
        if !picks.is_empty() {
            let verb = match (compartment.selection.new_batch, holds.is_empty()) {
                (true, true) => "starts",
                (true, false) => "would start, once the holds below lift,",
                (false, _) => "continues",
            };
            steps.push(format!("{label}: {verb} batch {batch} on {}", list(&picks)));
        }
        let waiting = incomplete.iter().filter(|n| !n.ready).count();
        if waiting > 0 {
            steps.push(format!(
                "{label}: {waiting} node(s) wait for higher-priority {kind}s to complete"
            ));
        }
        let blocked = compartment.selection.blocked.len();
        if picks.is_empty() && waiting == 0 && blocked > 0 {
            steps.push(format!(
                "{label}: nothing can start; {blocked} node(s) are blocked (see BLOCKED)"
            ));
        }
    }
    steps.extend(holds);
    // The selection above already uses the budget of the windows open now, so a window's budget
    // does not hold a batch back: it says why the batch is small.
    steps.extend(holds_of(
        keys,
        skyhook,
        &[keys.condition_window_budget_held],
    ));
    if rollout.nodes.iter().any(|n| n.status == Status::Erroring) {
        steps.push(format!(
            "erroring packages are retried by the operator; `kubectl skyhook package rerun <package> --skyhook {name} --node <node>` starts one over"
        ));
    }
    steps
}

impl View for SkyhookDetail {
    fn blocks(&self, wide: bool) -> Vec<Block> {
        let mut blocks = self.summary();
        push_table(&mut blocks, self.compartment_table());
        // Complete nodes need no attention: the table lists them only with -o wide, so that
        // a large rollout shows what is left.
        let listed: Vec<&NodeRow> = self.nodes.iter().filter(|n| wide || !n.complete).collect();
        let hidden = self.nodes.len() - listed.len();
        push_table(&mut blocks, node_table(&listed));
        if hidden > 0 {
            blocks.push(Block::Line(format!(
                "({hidden} complete node(s) not listed; -o wide lists them)"
            )));
        }
        push_table(&mut blocks, uninstall_table(&self.uninstalls));
        push_table(&mut blocks, self.erroring_table());
        push_table(&mut blocks, self.blocked_table());
        blocks.push(Block::Line(String::new()));
        blocks.push(Block::Heading("Next:".into()));
        blocks.extend(
            self.next
                .iter()
                .map(|step| Block::Line(format!("  - {step}"))),
        );
        blocks
    }
}

impl SkyhookDetail {
    /// The heading, packages, node count and warnings.
    fn summary(&self) -> Vec<Block> {
        let mut blocks = vec![
            Block::Heading(format!(
                "{}: {}   Status: {}   Priority: {}   Policy: {}{}{}",
                self.group.kind(),
                self.name,
                self.status,
                self.priority,
                self.policy.as_deref().unwrap_or("legacy"),
                if self.paused { "   PAUSED" } else { "" },
                if self.disabled { "   DISABLED" } else { "" },
            )),
            Block::Line(format!("Packages: {}", self.packages.join(", "))),
            Block::Line(format!(
                "Nodes: {}/{} complete",
                self.complete_nodes, self.total_nodes
            )),
            Block::Line(format!(
                "Estimated end: {} ({})",
                self.estimated_end, self.estimate_basis
            )),
        ];
        for warning in &self.warnings {
            blocks.push(Block::Line(format!("Warning: {warning}")));
        }
        blocks
    }

    fn compartment_table(&self) -> Option<Table> {
        if self.compartments.is_empty() {
            return None;
        }
        let mut table = Table::new(&[
            "COMPARTMENT",
            "STRATEGY",
            "NODES",
            "CEILING",
            "BATCH",
            "PROGRESS",
            "IN-PROGRESS",
            "ERRORING",
            "STOPPED",
        ]);
        for c in &self.compartments {
            table.push(vec![
                Cell::plain(&c.name),
                Cell::plain(&c.strategy),
                Cell::plain(c.nodes.to_string()),
                Cell::plain(c.ceiling.to_string()),
                Cell::plain(c.batch.to_string()),
                Cell::plain(format!(
                    "{}/{} ({}%)",
                    c.complete, c.nodes, c.progress_percent
                )),
                Cell::plain(c.in_progress.to_string()),
                Cell::plain(c.erroring.to_string()),
                Cell::plain(if c.should_stop { "yes" } else { "no" }),
            ]);
        }
        Some(table)
    }

    fn erroring_table(&self) -> Option<Table> {
        if self.erroring.is_empty() {
            return None;
        }
        let mut table = Table::new(&[
            "ERRORING NODE",
            "PACKAGE",
            "STAGE",
            "EXIT-CODE",
            "REASON",
            "RESTARTS",
        ]);
        for e in &self.erroring {
            table.push(vec![
                Cell::plain(&e.node),
                Cell::plain(format!("{}@{}", e.package, e.version)),
                Cell::plain(&e.stage),
                Cell::plain(
                    e.exit_code
                        .map_or_else(|| "-".to_owned(), |c| c.to_string()),
                ),
                Cell::plain(e.reason.as_deref().unwrap_or("-")),
                Cell::plain(e.restarts.to_string()),
            ]);
        }
        Some(table)
    }

    fn blocked_table(&self) -> Option<Table> {
        if self.blocked.is_empty() {
            return None;
        }
        let mut table = Table::new(&["BLOCKED NODE", "REASON", "DETAIL"]);
        for b in &self.blocked {
            table.push(vec![
                Cell::plain(&b.node),
                Cell {
                    text: b.reason.clone(),
                    tone: Tone::Warn,
                },
                Cell::plain(&b.detail),
            ]);
        }
        Some(table)
    }
}

fn node_table(listed: &[&NodeRow]) -> Option<Table> {
    if listed.is_empty() {
        return None;
    }
    let mut table = Table::new(&["NODE", "STATUS", "COMPARTMENT", "PACKAGE", "STAGE", "STATE"]);
    for n in listed {
        table.push(vec![
            Cell::plain(&n.name),
            Cell::status(&n.status),
            Cell::plain(&n.compartment),
            Cell::plain(n.package.as_deref().unwrap_or("-")),
            Cell::plain(n.stage.as_deref().unwrap_or("-")),
            Cell::status(n.state.as_deref().unwrap_or("-")),
        ]);
    }
    Some(table)
}

/// A table after a blank line, when there is one.
fn push_table(blocks: &mut Vec<Block>, table: Option<Table>) {
    if let Some(table) = table {
        blocks.push(Block::Line(String::new()));
        blocks.push(Block::Table(table));
    }
}
