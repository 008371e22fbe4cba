//! The mutating verbs as pure patch planners: the objects and the arguments in, the merge
//! patches to send (with what each does, in words) out. Only merge patches (annotations, labels,
//! status, and `packages.<p>.uninstall.apply` in a Skyhook's spec); never a full update.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};
use skyhook_api::generation::Group;
use skyhook_api::keys::{self, Keys};
use skyhook_api::node_state::NodeState;
use skyhook_api::transition::{TransitionTimes, recorded_times, stamp_transitions};

use skyhook_api::v1alpha1::{Skyhook, Stage, State};
use skyhook_api::version::compare_precedence;

use crate::cluster::{self, Cluster, name_of};
use crate::pattern::{NodePattern, matches_any};

/// What a patch is sent to. The workload object is of the group the plugin serves
/// ([`Cluster::group`]): a Skyhook, or a NodeWright under `kubectl nodewright`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The workload object's metadata or spec.
    Skyhook(String),
    /// The workload object's status subresource.
    SkyhookStatus(String),
    /// A node's metadata.
    Node(String),
}

/// One JSON merge patch.
#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    /// Where it goes.
    pub target: Target,
    /// The merge patch body.
    pub body: Value,
    /// What it does, completing "Would …" (dry run) and "Failed to …" (errors).
    pub description: String,
}

/// A verb's plan: what to tell the user, the patches, and what to say once they are applied.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Change {
    /// Printed before confirmation (and in a dry run).
    pub summary: Vec<String>,
    /// The patches, in order.
    pub patches: Vec<Patch>,
    /// Printed after every patch succeeded.
    pub done: Vec<String>,
    /// Things that need no change (e.g. "already ignored"), printed either way.
    pub notes: Vec<String>,
    /// Whether the verb asks `Continue? [y/N]:` unless `--confirm` or `--dry-run`.
    pub confirm: bool,
}

impl Change {
    /// The dry-run lines: `[dry-run] Would <description>` per patch.
    pub fn dry_run(&self) -> Vec<String> {
        self.patches
            .iter()
            .map(|p| format!("[dry-run] Would {}", p.description))
            .collect()
    }
}

/// A planner refusing its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The package is not in the Skyhook's spec.
    #[error(
        "package {package:?} is not in the spec of {kind} {skyhook:?}; `kubectl {} package status` lists what is on the nodes", .kind.to_lowercase()
    )]
    UnknownPackage {
        /// The package asked for.
        package: String,
        /// The Skyhook.
        skyhook: String,
        /// Its kind, `Skyhook` or `NodeWright`.
        kind: &'static str,
    },
    /// The operator is too old to honour the lifecycle annotations.
    #[error(
        "cannot {verb}: operator {version} ignores the annotation; pause and disable need operator v{MIN_LIFECYCLE_OPERATOR} or later"
    )]
    OperatorTooOld {
        /// The verb refused.
        verb: &'static str,
        /// The operator version found.
        version: String,
    },
    /// `package uninstall` of a package that does not declare uninstall support.
    #[error(
        "package {package:?} of {kind} {skyhook:?} does not have uninstall.enabled: true; set packages.{package}.uninstall.enabled: true first (its uninstall steps must undo what it installed), then request the uninstall"
    )]
    UninstallNotEnabled {
        /// The package asked for.
        package: String,
        /// The Skyhook.
        skyhook: String,
        /// Its kind, `Skyhook` or `NodeWright`.
        kind: &'static str,
    },
    /// `package uninstall --cancel` while the Skyhook is being deleted.
    #[error(
        "cannot cancel the uninstall of package {package:?}: {kind} {skyhook:?} is being deleted, which uninstalls every package with uninstall.enabled: true; it cannot be cancelled"
    )]
    CancelWhileDeleting {
        /// The package asked for.
        package: String,
        /// The Skyhook.
        skyhook: String,
        /// Its kind, `Skyhook` or `NodeWright`.
        kind: &'static str,
    },
    /// A verb that edits node state needs a newer operator.
    #[error(
        "cannot {verb}: operator {version} does not read node state edited this way; it needs operator v{minimum} or later"
    )]
    OperatorTooOldFor {
        /// The verb refused.
        verb: &'static str,
        /// The operator version found.
        version: String,
        /// The oldest operator the verb works with.
        minimum: &'static str,
    },
    /// `update-state` of a version that is not the spec's.
    #[error(
        "package {package:?} of {kind} {skyhook:?} is at version {spec_version} in the spec, not {version}; update-state only records the spec's version"
    )]
    VersionNotInSpec {
        /// The package asked for.
        package: String,
        /// The version asked for.
        version: String,
        /// The version in the spec.
        spec_version: String,
        /// The object.
        skyhook: String,
        /// Its kind.
        kind: &'static str,
    },
    /// `update-state --add` without naming the nodes.
    #[error(
        "--add creates node state entries, so it needs the nodes named: pass --node or --selector"
    )]
    AddNeedsTargets,
    /// A stage that `package rerun` cannot start from.
    #[error("cannot rerun from stage {stage:?}: use apply, config, interrupt or post-interrupt")]
    UnsupportedStage {
        /// The stage asked for.
        stage: String,
    },
}

/// `pause`, `resume`, `disable`, `enable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Set `skyhook.nvidia.com/pause`.
    Pause,
    /// Remove `skyhook.nvidia.com/pause`.
    Resume,
    /// Set `skyhook.nvidia.com/disable`.
    Disable,
    /// Remove `skyhook.nvidia.com/disable`.
    Enable,
}

impl Lifecycle {
    const fn annotation(self, keys: &Keys) -> &'static str {
        match self {
            Lifecycle::Pause | Lifecycle::Resume => keys.pause_annotation,
            Lifecycle::Disable | Lifecycle::Enable => keys.disable_annotation,
        }
    }

    const fn sets(self) -> bool {
        matches!(self, Lifecycle::Pause | Lifecycle::Disable)
    }

    /// Whether the verb asks `Continue? [y/N]:` without `--confirm`: pause and disable do,
    /// resume and enable (which undo them) do not, as upstream's.
    pub const fn asks(self) -> bool {
        self.sets()
    }

    const fn verb(self) -> &'static str {
        match self {
            Lifecycle::Pause => "pause",
            Lifecycle::Resume => "resume",
            Lifecycle::Disable => "disable",
            Lifecycle::Enable => "enable",
        }
    }

    const fn past(self) -> &'static str {
        match self {
            Lifecycle::Pause => "paused",
            Lifecycle::Resume => "resumed",
            Lifecycle::Disable => "disabled",
            Lifecycle::Enable => "enabled",
        }
    }
}

/// The oldest operator that reads node state edited by `reset --package` and `update-state`
/// (upstream gates both on it).
pub const MIN_NODE_STATE_EDIT_OPERATOR: &str = "0.7.5";

/// The oldest operator that honours the pause and disable annotations.
pub const MIN_LIFECYCLE_OPERATOR: &str = "0.8.0";

/// The operator version that judges whether the lifecycle annotations work: the Skyhook's
/// `skyhook.nvidia.com/version` annotation (written by the operator), else the version of
/// the operator Deployment.
pub fn operator_version_of<'a>(
    skyhook: &'a Skyhook,
    deployment: Option<&'a str>,
) -> Option<&'a str> {
    operator_version_in(Group::Skyhook, skyhook, deployment)
}

/// [`operator_version_of`] for an object of `group` (its `<group>/version` annotation).
pub fn operator_version_in<'a>(
    group: Group,
    object: &'a Skyhook,
    deployment: Option<&'a str>,
) -> Option<&'a str> {
    annotation(object, group.keys().version_annotation).or(deployment)
}

/// An annotation of the workload object.
fn annotation<'a>(object: &'a Skyhook, key: &str) -> Option<&'a str> {
    (object.metadata.annotations.as_ref())
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Whether an operator of `version` is older than [`MIN_LIFECYCLE_OPERATOR`]. An unknown or
/// unreadable version is given the benefit of the doubt. Our own controller records the
/// upstream release it is compatible with
/// ([`skyhook_api::keys::COMPATIBLE_OPERATOR_VERSION`]), so it passes like upstream's.
fn operator_too_old(version: &str) -> bool {
    older_than(version, MIN_LIFECYCLE_OPERATOR)
}

/// Whether `version` (with or without a leading `v`) is known to be older than `minimum`.
fn older_than(version: &str, minimum: &str) -> bool {
    let bare = version.strip_prefix('v').unwrap_or(version);
    compare_precedence(bare, minimum).is_ok_and(|o| o.is_lt())
}

/// Refuses `verb` when `operator` is known to be older than [`MIN_NODE_STATE_EDIT_OPERATOR`];
/// an unknown version is given the benefit of the doubt, as for the lifecycle verbs.
pub fn require_node_state_edits(
    verb: &'static str,
    operator: Option<&str>,
) -> Result<(), PlanError> {
    match operator.filter(|v| older_than(v, MIN_NODE_STATE_EDIT_OPERATOR)) {
        Some(version) => Err(PlanError::OperatorTooOldFor {
            verb,
            version: version.to_owned(),
            minimum: MIN_NODE_STATE_EDIT_OPERATOR,
        }),
        None => Ok(()),
    }
}

/// Sets or removes the pause or disable annotation; only pause and disable ask for
/// confirmation ([`Lifecycle::asks`]). A Skyhook already in the wanted state
/// gets no patch, only a note. Refused when `operator` (see [`operator_version_of`]) is older
/// than [`MIN_LIFECYCLE_OPERATOR`], which ignores the annotations.
pub fn lifecycle(
    skyhook: &Skyhook,
    verb: Lifecycle,
    operator: Option<&str>,
) -> Result<Change, PlanError> {
    lifecycle_in(Group::Skyhook, skyhook, verb, operator)
}

/// [`lifecycle`] for an object of `group`: its group's pause and disable annotations.
pub fn lifecycle_in(
    group: Group,
    skyhook: &Skyhook,
    verb: Lifecycle,
    operator: Option<&str>,
) -> Result<Change, PlanError> {
    let keys = group.keys();
    let kind = keys.kind;
    let name = name_of(&skyhook.metadata);
    if let Some(version) = operator.filter(|v| operator_too_old(v)) {
        return Err(PlanError::OperatorTooOld {
            verb: verb.verb(),
            version: version.to_owned(),
        });
    }
    let is_set = annotation(skyhook, verb.annotation(keys)) == Some("true");
    if is_set == verb.sets() {
        let already = match verb {
            Lifecycle::Pause => "already paused",
            Lifecycle::Resume => "not paused",
            Lifecycle::Disable => "already disabled",
            Lifecycle::Enable => "not disabled",
        };
        return Ok(Change {
            notes: vec![format!("{kind} {name:?} is {already}")],
            ..Change::default()
        });
    }
    let value = if verb.sets() {
        json!("true")
    } else {
        Value::Null
    };
    Ok(Change {
        summary: vec![format!("This will {} {kind} {name:?}.", verb.verb())],
        patches: vec![Patch {
            target: Target::Skyhook(name.to_owned()),
            body: json!({"metadata": {"annotations": {verb.annotation(keys): value}}}),
            description: format!("{} {kind} {name:?}", verb.verb()),
        }],
        done: vec![format!("{kind} {name:?} {}", verb.past())],
        notes: Vec::new(),
        // Resume and enable only undo a pause or a disable and, as upstream's, do not ask:
        // scripts call them without `--confirm`.
        confirm: verb.asks(),
    })
}

/// The merge patch that resets every compartment with a batch state to `{currentBatch: 1}`
/// (the other counters removed), or `None` when no compartment has one.
fn batch_reset_patch(kind: &str, skyhook: &Skyhook) -> Option<(Patch, usize)> {
    let name = name_of(&skyhook.metadata);
    let compartments: Map<String, Value> = skyhook
        .status
        .as_ref()?
        .compartment_statuses
        .iter()
        .filter(|(_, c)| c.batch_state.is_some())
        .map(|(compartment, _)| {
            (
                compartment.clone(),
                json!({"batchState": {
                    "currentBatch": 1,
                    "consecutiveFailures": null,
                    "completedNodes": null,
                    "failedNodes": null,
                    "shouldStop": null,
                    "lastBatchSize": null,
                    "lastBatchFailed": null,
                }}),
            )
        })
        .collect();
    if compartments.is_empty() {
        return None;
    }
    let count = compartments.len();
    Some((
        Patch {
            target: Target::SkyhookStatus(name.to_owned()),
            body: json!({"status": {"compartmentStatuses": compartments}}),
            description: format!(
                "reset the batch state of {count} compartment(s) of {kind} {name:?} to currentBatch 1"
            ),
        },
        count,
    ))
}

/// The node merge patch of `reset`: removes every per-Skyhook annotation and label of
/// [`keys::Keys::per_skyhook_node_keys`] (upstream's `nodeState_`, `status_`, `cordon_`, `version_`,
/// and our `cordonedAt_`, whose stale drain start would otherwise make the next drain of the
/// node report DrainBlocked at once, `drainFail_`, the mark of a drain given up with
/// `onTimeout: fail`, and upstream's `drainStart_` and `drainBlocked_`, so that the next drain
/// starts afresh). `cordon_` stays where `keep_cordon` (a node the Skyhook still selects: its
/// re-run finds the node cordoned by it and releases the cordon when it completes, as
/// upstream's reset does since its v0.5.0 plugin). Removing `cordon_` does not uncordon, as
/// upstream's reset. `adoptedBy_` stays, as through a reboot reset: it says that a migration
/// already copied the other API group's keys of this name, and without it a migrated node's
/// kept copies would be adopted again, undoing the reset.
fn reset_node_patch(keys: &Keys, skyhook: &str, keep_cordon: bool) -> Value {
    let mut annotations = Map::new();
    let mut labels = Map::new();
    let cordon = keys.cordon_annotation(skyhook);
    let adopted = keys.adopted_by_annotation(skyhook);
    for key in keys.per_skyhook_node_keys(skyhook) {
        if (keep_cordon && key.key == cordon) || key.key == adopted {
            continue;
        }
        match key.kind {
            keys::NodeKeyKind::Annotation => {
                annotations.insert(key.key, Value::Null);
            }
            keys::NodeKeyKind::AnnotationAndLabel => {
                labels.insert(key.key.clone(), Value::Null);
                annotations.insert(key.key, Value::Null);
            }
            // Node conditions are node status, not metadata; upstream's reset leaves them and
            // the controller rewrites them on its next pass over the node.
            keys::NodeKeyKind::ConditionType => {}
        }
    }
    // Upstream's reset also removes `autoTaint_<skyhook>`, although the auto-taint marker is
    // suffixed by the taint key; kept so that reset removes exactly what upstream's does.
    annotations.insert(keys.auto_taint_annotation(skyhook), Value::Null);
    json!({"metadata": {"annotations": annotations, "labels": labels}})
}

/// `reset <skyhook>`: clears the Skyhook's keys from every node carrying its node state, then
/// (unless `skip_batch_reset`) resets the batch state of every compartment.
pub fn reset(cluster: &Cluster, skyhook: &Skyhook, skip_batch_reset: bool) -> Change {
    let name = name_of(&skyhook.metadata);
    let kind = cluster.group.kind();
    let words = ResetWords::of(cluster.group, name);
    // The nodes the Skyhook still selects keep its cordon: its re-run releases it.
    let selector = skyhook.spec.target_selector();
    let mut change = reset_nodes(cluster, name, &|node| {
        selector.matches(cluster::labels(node))
    });
    if let Some((patch, count)) = batch_reset_patch(kind, skyhook).filter(|_| !skip_batch_reset) {
        change.summary.push(format!(
            "Batch state of {count} compartment(s) goes back to batch 1."
        ));
        change.patches.push(patch);
        change.done.push(words.batch_done());
    }
    if let Some(patch) = node_order_reset_patch(kind, skyhook).filter(|_| !skip_batch_reset) {
        change.patches.push(patch);
    }
    change
}

/// `reset <name>` when the object is gone: the node keys of the name are cleared as by
/// [`reset`], `cordon_` included (no run will come to release it), and there is no batch state
/// to reset. `None` when no node has node state of the name either: that is the "not found" of
/// a mistyped name, not leftovers to clear.
pub fn reset_gone(cluster: &Cluster, name: &str) -> Option<Change> {
    let mut change = reset_nodes(cluster, name, &|_| false);
    if change.patches.is_empty() {
        return None;
    }
    change.summary.insert(
        0,
        format!(
            "{} {name:?} does not exist: only its node keys are reset.",
            cluster.group.kind()
        ),
    );
    Some(change)
}

/// `reset <name>` when reading the object failed (`reason`): the node keys of the name are
/// cleared as by [`reset`], but whether a run will come is unknown, so every `cordon_` stays,
/// with a warning, and the batch state (on the object) is not reset.
pub fn reset_unreadable(cluster: &Cluster, name: &str, reason: &str) -> Change {
    let mut change = reset_nodes(cluster, name, &|_| true);
    change.notes.insert(
        0,
        format!(
            "Warning: could not read {} {name:?} ({reason}); its cordons are kept and its batch state is not reset",
            cluster.group.kind()
        ),
    );
    change
}

/// The node part of `reset`: every node with node state (or a pick) of `name` loses the keys
/// of [`reset_node_patch`], keeping `cordon_<name>` where `keep_cordon` says a run will come.
fn reset_nodes(cluster: &Cluster, name: &str, keep_cordon: &dyn Fn(&Node) -> bool) -> Change {
    let keys = cluster.group.keys();
    let kind = keys.kind;
    let words = ResetWords::of(cluster.group, name);
    let state_key = keys.node_state_annotation(name);
    let cordon_key = keys.cordon_annotation(name);
    // A node picked before any package ran carries no node state; reset frees its pick too,
    // as upstream's clears `status.nodePriority`.
    let picked_key = keys.node_picked_annotation(name);
    let mut change = Change {
        confirm: true,
        ..Change::default()
    };
    let mut nodes: Vec<(&Node, usize)> = cluster
        .nodes
        .iter()
        .filter_map(|node| {
            let annotations = cluster::annotations(node);
            let packages = match annotations.get(&state_key) {
                Some(value) => NodeState::parse(value).map_or(0, |s| s.len()),
                None if annotations.contains_key(&picked_key) => 0,
                None => return None,
            };
            Some((node, packages))
        })
        .collect();
    nodes.sort_unstable_by_key(|(node, _)| name_of(&node.metadata));
    if nodes.is_empty() {
        change
            .notes
            .push(format!("No node has node state for {kind} {name:?}"));
        return change;
    }
    change.summary.extend(words.summary(nodes.len()));
    for (node, packages) in &nodes {
        let node_name = name_of(&node.metadata);
        change
            .summary
            .push(format!("  - {node_name} ({packages} packages)"));
        change.patches.push(Patch {
            target: Target::Node(node_name.to_owned()),
            body: reset_node_patch(keys, name, keep_cordon(node)),
            description: format!(
                "remove the node state of {kind} {name:?} from node {node_name:?}"
            ),
        });
    }
    change.done.push(words.done(nodes.len()));
    let has_cordon = |node: &Node| cluster::annotations(node).contains_key(&cordon_key);
    let kept_cordons = (nodes.iter())
        .filter(|(node, _)| keep_cordon(node) && has_cordon(node))
        .map(|(node, _)| name_of(&node.metadata));
    change.done.extend(kept_cordons.map(|node| {
        format!("Node {node:?} keeps the cordon of {kind} {name:?}: its next run releases it")
    }));
    // Removing cordon_<name> does not uncordon: say so, or the node looks forgotten.
    let still_cordoned = (nodes.iter())
        .filter(|(node, _)| cluster::annotations(node).contains_key(&state_key))
        .filter(|(node, _)| cluster::unschedulable(node) && !keep_cordon(node))
        .filter(|(node, _)| {
            cluster::annotations(node)
                .get(&cordon_key)
                .is_some_and(|v| v == "true")
        })
        .map(|(node, _)| name_of(&node.metadata));
    change.done.extend(still_cordoned.map(|node| {
        format!(
            "Node {node:?} stays cordoned: `kubectl uncordon {node}` makes it schedulable again"
        )
    }));
    change
}

/// What `reset` says, by the binary: `kubectl skyhook` keeps its own lines, `kubectl
/// nodewright` prints upstream's, which scripts written for upstream's plugin match.
struct ResetWords<'a> {
    group: Group,
    name: &'a str,
}

impl<'a> ResetWords<'a> {
    fn of(group: Group, name: &'a str) -> Self {
        ResetWords { group, name }
    }

    fn summary(&self, nodes: usize) -> Vec<String> {
        let name = self.name;
        match self.group {
            Group::Skyhook => vec![format!(
                "Skyhook {name:?}: resetting node state on {nodes} node(s):"
            )],
            Group::NodeWright => vec![
                format!("NodeWright: {name}"),
                format!("Nodes to reset ({nodes}):"),
            ],
        }
    }

    fn done(&self, nodes: usize) -> String {
        let name = self.name;
        match self.group {
            Group::Skyhook => format!("Skyhook {name:?} reset on {nodes} node(s)"),
            Group::NodeWright => {
                format!("Successfully reset {nodes} node(s) for NodeWright {name:?}")
            }
        }
    }

    fn batch_done(&self) -> String {
        let name = self.name;
        match self.group {
            Group::Skyhook => format!("Batch state of Skyhook {name:?} reset"),
            Group::NodeWright => format!("Batch state reset for NodeWright {name:?}"),
        }
    }
}

/// The status patch that starts the rollout order (`SKYHOOK_NODE_ORDER`) again from 0, as
/// upstream's `reset` does after the batch reset: no node picked, offset 0. `None` when there
/// is nothing to clear.
fn node_order_reset_patch(kind: &str, skyhook: &Skyhook) -> Option<Patch> {
    let name = name_of(&skyhook.metadata);
    let status = skyhook.status.as_ref()?;
    if status.node_priority.is_empty() && status.node_order_offset == 0 {
        return None;
    }
    Some(Patch {
        target: Target::SkyhookStatus(name.to_owned()),
        body: json!({"status": {"nodeOrderOffset": 0, "nodePriority": null}}),
        description: format!(
            "restart the rollout order of {kind} {name:?} from 0 (nodeOrderOffset, nodePriority)"
        ),
    })
}

/// `deployment-policy reset <skyhook>`: every compartment's batch state back to batch 1.
pub fn deployment_policy_reset(skyhook: &Skyhook) -> Change {
    deployment_policy_reset_in(Group::Skyhook, skyhook)
}

/// [`deployment_policy_reset`] for an object of `group`.
pub fn deployment_policy_reset_in(group: Group, skyhook: &Skyhook) -> Change {
    let kind = group.kind();
    let words = ResetWords::of(group, name_of(&skyhook.metadata));
    let name = name_of(&skyhook.metadata);
    let statuses = skyhook.status.as_ref().map(|s| &s.compartment_statuses);
    let total = statuses.map_or(0, |s| s.len());
    let mut change = Change {
        confirm: true,
        ..Change::default()
    };
    let with_state: Vec<(String, i32)> = statuses
        .into_iter()
        .flatten()
        .filter_map(|(c, status)| {
            status
                .batch_state
                .as_ref()
                .map(|b| (c.clone(), b.current_batch))
        })
        .collect();
    change.summary.push(format!(
        "Compartments: {total} total, {} with batch state",
        with_state.len()
    ));
    change.summary.extend(
        with_state
            .iter()
            .map(|(c, batch)| format!("  - {c}: current batch {batch}")),
    );
    match batch_reset_patch(kind, skyhook) {
        Some((patch, _)) => {
            change.patches.push(patch);
            change.done.push(words.batch_done());
        }
        None => change
            .notes
            .push(format!("{kind} {name:?} has no batch state to reset")),
    }
    change
}

/// `node reset <patterns> --skyhook X`: removes only `nodeState_X` from the matching nodes.
pub fn node_reset(cluster: &Cluster, skyhook: &str, patterns: &[NodePattern]) -> Change {
    let kind = cluster.group.kind();
    let state_key = cluster.group.keys().node_state_annotation(skyhook);
    let mut change = Change {
        confirm: true,
        ..Change::default()
    };
    for node in matching_nodes(cluster, patterns) {
        let node_name = name_of(&node.metadata);
        if !cluster::annotations(node).contains_key(&state_key) {
            continue;
        }
        change.summary.push(format!("  - {node_name}"));
        change.patches.push(Patch {
            target: Target::Node(node_name.to_owned()),
            body: json!({"metadata": {"annotations": {state_key.clone(): null}}}),
            description: format!(
                "remove the node state of {kind} {skyhook:?} from node {node_name:?}"
            ),
        });
        change
            .done
            .push(format!("Node {node_name:?} reset for {kind} {skyhook:?}"));
    }
    if change.patches.is_empty() {
        change.notes.push(format!(
            "No matching node has node state for {kind} {skyhook:?}"
        ));
    } else {
        change.summary.insert(
            0,
            format!(
                "Resetting the node state of {kind} {skyhook:?} on {} node(s):",
                change.patches.len()
            ),
        );
    }
    change
}

/// `reset <name> --package <p>[:<v>]`: removes only the matching entries (every version of the
/// package, or only `version`) from each node's node state of `name`, and the whole annotation
/// where nothing is left. Unlike a full reset it never touches the batch state, the cordon or
/// any other key: the operator runs the removed package again on those nodes.
pub fn reset_package(
    cluster: &Cluster,
    name: &str,
    package: &str,
    version: Option<&str>,
) -> Change {
    let keys = cluster.keys();
    let kind = keys.kind;
    let state_key = keys.node_state_annotation(name);
    let filter = match version {
        Some(version) => format!("{package}:{version}"),
        None => package.to_owned(),
    };
    let mut change = Change {
        confirm: true,
        ..Change::default()
    };
    let mut nodes: Vec<&Node> = cluster.nodes.iter().collect();
    nodes.sort_by_key(|node| name_of(&node.metadata));
    let mut targets = Vec::new();
    for node in nodes {
        let node_name = name_of(&node.metadata);
        let Some(value) = cluster::annotations(node).get(&state_key) else {
            continue;
        };
        let Ok(written) = NodeState::parse(value) else {
            change.notes.push(format!(
                "Warning: node {node_name}: annotation {state_key} is unreadable; skipped (a full `reset` clears it)"
            ));
            continue;
        };
        let matching: Vec<_> = (written.iter())
            .map(|(key, entry)| (key.clone(), entry))
            .filter(|(_, e)| e.name == package && version.is_none_or(|v| e.version == v))
            .map(|(key, _)| key)
            .collect();
        if matching.is_empty() {
            continue;
        }
        let mut state = written.clone();
        for key in &matching {
            state.remove(key);
        }
        targets.push(format!("  - {node_name} ({} packages)", matching.len()));
        change.patches.push(Patch {
            target: Target::Node(node_name.to_owned()),
            body: json!({"metadata": {"annotations": state_annotations(
                keys, node, name, &written, &state, cluster.read_at,
            )}}),
            description: format!(
                "remove package {filter} from the node state of {kind} {name:?} on node {node_name:?}"
            ),
        });
    }
    change.summary.push(format!("{kind}: {name}"));
    change.summary.push(format!("Package filter: {filter}"));
    if change.patches.is_empty() {
        change.notes.append(&mut change.summary);
        change
            .notes
            .push("no matching package on any node".to_owned());
        return change;
    }
    change.summary.push(format!(
        "Nodes with a matching package ({}):",
        change.patches.len()
    ));
    change.summary.extend(targets);
    change.done.push(format!(
        "Successfully reset {} node(s) for {kind} {name:?}",
        change.patches.len()
    ));
    change
}

/// What `update-state` records, and where.
#[derive(Debug, Clone)]
pub struct StateUpdate<'a> {
    /// The package (in the spec).
    pub package: &'a str,
    /// Its version (the spec's).
    pub version: &'a str,
    /// The stage to record.
    pub stage: Stage,
    /// The state to record.
    pub state: State,
    /// `--node`: names or anchored regexes.
    pub nodes: &'a [NodePattern],
    /// The names of the nodes `--selector` matched (the API server evaluates the selector),
    /// `None` without `--selector`.
    pub selected: Option<&'a [String]>,
    /// `--add`: create the entry where it is missing.
    pub add: bool,
}

/// `update-state <name> <pkg> <version> <stage> <state>`: rewrites the entry of the package's
/// spec version in the node state of `object` on the target nodes. Targets are the nodes named
/// by `--node` and those matched by `--selector` (either), or, with neither, every node with
/// node state of the object. Without `--add` a target needs the entry already; with `--add` a
/// target must not have it, and gets a new one. Nodes that do not qualify are warned about and
/// skipped. Neither the stage/state pair nor a resourceVersion is checked, as upstream's: the
/// whole annotation is rewritten, so the object should be paused first.
pub fn update_state(
    cluster: &Cluster,
    object: &Skyhook,
    update: &StateUpdate<'_>,
) -> Result<Change, PlanError> {
    let group = cluster.group;
    let keys = group.keys();
    let kind = keys.kind;
    let name = name_of(&object.metadata);
    let spec = spec_package(group, object, update.package)?;
    if spec.version != update.version {
        return Err(PlanError::VersionNotInSpec {
            package: update.package.to_owned(),
            version: update.version.to_owned(),
            spec_version: spec.version.clone(),
            skyhook: name.to_owned(),
            kind,
        });
    }
    let named = !update.nodes.is_empty() || update.selected.is_some();
    if update.add && !named {
        return Err(PlanError::AddNeedsTargets);
    }
    let state_key = keys.node_state_annotation(name);
    let (package, version) = (update.package, update.version);
    let mut change = Change {
        confirm: true,
        ..Change::default()
    };
    for pattern in update.nodes {
        if !cluster
            .nodes
            .iter()
            .any(|n| pattern.matches(name_of(&n.metadata)))
        {
            change
                .notes
                .push(format!("Warning: node {pattern} not found; skipped"));
        }
    }
    let mut nodes: Vec<&Node> = (cluster.nodes.iter())
        .filter(|node| {
            let node_name = name_of(&node.metadata);
            if !named {
                return cluster::annotations(node).contains_key(&state_key);
            }
            (!update.nodes.is_empty() && matches_any(update.nodes, node_name))
                || update
                    .selected
                    .is_some_and(|selected| selected.iter().any(|s| s == node_name))
        })
        .collect();
    nodes.sort_by_key(|node| name_of(&node.metadata));
    let mut targets = Vec::new();
    for node in nodes {
        let node_name = name_of(&node.metadata);
        let written = match cluster::annotations(node)
            .get(&state_key)
            .map(|v| NodeState::parse(v))
        {
            Some(Ok(state)) => state,
            Some(Err(_)) => {
                change.notes.push(format!(
                    "Warning: node {node_name}: annotation {state_key} is unreadable; skipped"
                ));
                continue;
            }
            None if update.add => NodeState::new(),
            None => {
                change.notes.push(format!(
                    "Warning: node {node_name} has no node state for {kind} {name:?}; skipped"
                ));
                continue;
            }
        };
        let existing = written.get_version(package, version).cloned();
        let entry = match (existing, update.add) {
            (Some(_), true) => {
                change.notes.push(format!(
                    "Warning: node {node_name} already has package {package} ({version}); skipped (--add only creates missing entries)"
                ));
                continue;
            }
            (None, false) => {
                change.notes.push(format!(
                    "Warning: node {node_name} has no entry for package {package} ({version}); skipped (--add creates it)"
                ));
                continue;
            }
            (Some(entry), false) => skyhook_api::v1alpha1::PackageStatus {
                stage: update.stage,
                state: update.state,
                ..entry
            },
            (None, true) => skyhook_api::v1alpha1::PackageStatus {
                name: package.to_owned(),
                version: version.to_owned(),
                image: spec.image.clone(),
                container_sha: spec.container_sha.clone().unwrap_or_default(),
                stage: update.stage,
                state: update.state,
                restarts: 0,
            },
        };
        let mut state = written.clone();
        state.upsert(entry);
        targets.push(format!("  - {node_name}"));
        change.patches.push(Patch {
            target: Target::Node(node_name.to_owned()),
            body: json!({"metadata": {"annotations": state_annotations(
                keys, node, name, &written, &state, cluster.read_at,
            )}}),
            description: format!(
                "set package {package} ({version}) of {kind} {name:?} to {}/{} on node {node_name:?}",
                update.stage, update.state
            ),
        });
        change.done.push(format!(
            "Node {node_name:?}: package {package} ({version}) set to {}/{}",
            update.stage, update.state
        ));
    }
    if change.patches.is_empty() {
        change
            .notes
            .push(format!("No node to update for {kind} {name:?}"));
        return Ok(change);
    }
    change.summary.push(format!(
        "Setting package {package} ({version}) of {kind} {name:?} to stage {} state {} on {} node(s):",
        update.stage,
        update.state,
        change.patches.len()
    ));
    change.summary.extend(targets);
    if !cluster.paused(object) {
        change.summary.push(format!(
            "{kind} {name:?} is not paused: the operator may overwrite this; `kubectl {} pause {name}` first to be sure",
            keys.word
        ));
    }
    Ok(change)
}

/// `node ignore` (`ignore = true`) or `node unignore`: sets or removes
/// `skyhook.nvidia.com/ignore=true` on the matching nodes.
pub fn node_ignore(cluster: &Cluster, patterns: &[NodePattern], ignore: bool) -> Change {
    let ignore_label = cluster.group.keys().ignore_label;
    let mut change = Change::default();
    for node in matching_nodes(cluster, patterns) {
        let node_name = name_of(&node.metadata);
        let ignored = cluster::labels(node)
            .get(ignore_label)
            .is_some_and(|v| v == "true");
        if ignored == ignore {
            change.notes.push(format!(
                "Node {node_name:?} {}",
                if ignore {
                    "already ignored"
                } else {
                    "not ignored"
                }
            ));
            continue;
        }
        let value = if ignore { json!("true") } else { Value::Null };
        change.patches.push(Patch {
            target: Target::Node(node_name.to_owned()),
            body: json!({"metadata": {"labels": {ignore_label: value}}}),
            description: format!(
                "{} node {node_name:?}",
                if ignore { "ignore" } else { "unignore" }
            ),
        });
        change.done.push(format!(
            "Node {node_name:?} {}",
            if ignore { "ignored" } else { "unignored" }
        ));
    }
    if change.patches.is_empty() && change.notes.is_empty() {
        change.notes.push("No node matches".to_owned());
    }
    change
}

/// `package` of `skyhook`'s spec, or the error naming both.
fn spec_package<'s>(
    group: Group,
    skyhook: &'s Skyhook,
    package: &str,
) -> Result<&'s skyhook_api::v1alpha1::Package, PlanError> {
    skyhook
        .spec
        .packages
        .get(package)
        .ok_or_else(|| PlanError::UnknownPackage {
            package: package.to_owned(),
            skyhook: name_of(&skyhook.metadata).to_owned(),
            kind: group.kind(),
        })
}

/// `package rerun <pkg> --skyhook X --node P... [--stage S]`: on matching nodes that have the
/// spec version's entry, deletes it (the package starts over at apply; the annotation goes
/// when it becomes empty) or, with `stage`, sets it to `(stage, in_progress)`.
pub fn package_rerun(
    cluster: &Cluster,
    skyhook: &Skyhook,
    package: &str,
    patterns: &[NodePattern],
    stage: Option<Stage>,
) -> Result<Change, PlanError> {
    let group = cluster.group;
    let kind = group.kind();
    let name = name_of(&skyhook.metadata);
    let spec = spec_package(group, skyhook, package)?;
    if let Some(stage @ (Stage::Uninstall | Stage::Upgrade)) = stage {
        return Err(PlanError::UnsupportedStage {
            stage: stage.as_str().to_owned(),
        });
    }
    let mut change = Change {
        confirm: true,
        ..Change::default()
    };
    for node in matching_nodes(cluster, patterns) {
        let node_name = name_of(&node.metadata);
        let rerun = Rerun {
            package,
            version: &spec.version,
            stage,
        };
        let Some((annotations, how)) =
            rerun_annotations(group.keys(), node, name, &rerun, cluster.read_at)
        else {
            continue;
        };
        change.summary.push(format!("  - {node_name}"));
        change.patches.push(Patch {
            target: Target::Node(node_name.to_owned()),
            body: json!({"metadata": {"annotations": annotations}}),
            description: format!(
                "rerun package {package:?} ({}) on node {node_name:?} {how}",
                spec.version
            ),
        });
        change.done.push(format!(
            "Package {package:?} will rerun on node {node_name:?} {how}"
        ));
    }
    if change.patches.is_empty() {
        change.notes.push(format!(
            "No matching node has package {package:?} version {} of {kind} {name:?}",
            spec.version
        ));
    } else {
        change.summary.insert(
            0,
            format!(
                "Rerunning package {package:?} of {kind} {name:?} on {} node(s):",
                change.patches.len()
            ),
        );
    }
    Ok(change)
}

/// `package uninstall <pkg> --skyhook X [--cancel]`: sets `packages.<pkg>.uninstall.apply` to
/// true (asking first) or, with `cancel`, to false (without asking: it only undoes a request).
/// The package must be in the spec, and a request needs `uninstall.enabled: true`; an `apply`
/// already in the wanted state gets no patch, only a note.
pub fn package_uninstall(
    skyhook: &Skyhook,
    package: &str,
    cancel: bool,
) -> Result<Change, PlanError> {
    package_uninstall_in(Group::Skyhook, skyhook, package, cancel)
}

/// [`package_uninstall`] for an object of `group`.
pub fn package_uninstall_in(
    group: Group,
    skyhook: &Skyhook,
    package: &str,
    cancel: bool,
) -> Result<Change, PlanError> {
    let kind = group.kind();
    let name = name_of(&skyhook.metadata);
    let spec = spec_package(group, skyhook, package)?;
    // A cancel needs no support: it only clears `apply`, whatever `enabled` says.
    if !cancel && !spec.uninstall_enabled() {
        return Err(PlanError::UninstallNotEnabled {
            package: package.to_owned(),
            skyhook: name.to_owned(),
            kind,
        });
    }
    if cancel && skyhook.metadata.deletion_timestamp.is_some() {
        return Err(PlanError::CancelWhileDeleting {
            package: package.to_owned(),
            skyhook: name.to_owned(),
            kind,
        });
    }
    let word = group.keys().word;
    let requested = spec.uninstall.is_some_and(|u| u.apply);
    if requested != cancel {
        let already = if cancel {
            "is not requested; nothing to cancel".to_owned()
        } else {
            format!("is already requested; `kubectl {word} status` shows its progress")
        };
        return Ok(Change {
            notes: vec![format!(
                "The uninstall of package {package:?} of {kind} {name:?} {already}"
            )],
            ..Change::default()
        });
    }
    let (summary, description, done) = uninstall_words(group, name, package, &spec.version, cancel);
    Ok(Change {
        summary: vec![summary],
        patches: vec![Patch {
            target: Target::Skyhook(name.to_owned()),
            body: json!({"spec": {"packages": {package: {"uninstall": {"apply": !cancel}}}}}),
            description,
        }],
        done: vec![done],
        notes: Vec::new(),
        // A cancel only undoes a request, as resume and enable do, and does not ask.
        confirm: !cancel,
    })
}

/// The summary, patch description and done line of `package uninstall`.
fn uninstall_words(
    group: Group,
    skyhook: &str,
    package: &str,
    version: &str,
    cancel: bool,
) -> (String, String, String) {
    let (kind, word) = (group.kind(), group.keys().word);
    if cancel {
        (
            format!(
                "This will cancel the uninstall of package {package:?} ({version}) of {kind} {skyhook:?}: nodes still uninstalling reinstall it; an uninstall already at its interrupt finishes first, then reinstalls."
            ),
            format!("cancel the uninstall of package {package:?} of {kind} {skyhook:?}"),
            format!(
                "Uninstall of package {package:?} of {kind} {skyhook:?} cancelled; nodes where it completed will reinstall it"
            ),
        )
    } else {
        (
            format!(
                "This will uninstall package {package:?} ({version}) of {kind} {skyhook:?} from every node where it is installed, running its uninstall stage and then its interrupt, if it has one."
            ),
            format!("request the uninstall of package {package:?} of {kind} {skyhook:?}"),
            format!(
                "Uninstall of package {package:?} of {kind} {skyhook:?} requested; `kubectl {word} status {skyhook}` shows its progress, `kubectl {word} package uninstall {package} --{word} {skyhook} --cancel` cancels it"
            ),
        )
    }
}

/// Which entry reruns, from which stage (`None`: from the start).
struct Rerun<'a> {
    package: &'a str,
    version: &'a str,
    stage: Option<Stage>,
}

/// The node's annotations of Skyhook `skyhook` once the package's `version` entry reruns:
/// `nodeState` (null when the state becomes empty) and the stage times (null when none is
/// left), and how it reruns; `None` when the node has no readable state or no such entry. The
/// rerun entry's transition time is `now`, by the controller's rule, so the rerun stage is timed
/// from when it was asked for.
fn rerun_annotations(
    keys: &Keys,
    node: &Node,
    skyhook: &str,
    rerun: &Rerun<'_>,
    now: Timestamp,
) -> Option<(Value, String)> {
    let state_key = keys.node_state_annotation(skyhook);
    let Some(Ok(written)) =
        (cluster::annotations(node).get(&state_key)).map(|v| NodeState::parse(v))
    else {
        return None;
    };
    let mut state = written.clone();
    let (package, version, stage) = (rerun.package, rerun.version, rerun.stage);
    let entry = state.get_version(package, version).cloned()?;
    let how = match stage {
        None => {
            state.remove(&entry.key());
            "from the start".to_owned()
        }
        Some(stage) => {
            state.upsert(skyhook_api::v1alpha1::PackageStatus {
                stage,
                state: State::InProgress,
                ..entry
            });
            format!("from stage {stage}")
        }
    };
    Some((
        state_annotations(keys, node, skyhook, &written, &state, now),
        how,
    ))
}

/// The node's annotations of `skyhook` once its node state goes from `written` to `state`: the
/// node state (null when it becomes empty) and the stage times (null when none is left; absent
/// when they do not change). An edited entry is timed from `now`, by the controller's rule, and
/// an edit is not the end of an attempt: nothing is observed.
fn state_annotations(
    keys: &Keys,
    node: &Node,
    skyhook: &str,
    written: &NodeState,
    state: &NodeState,
    now: Timestamp,
) -> Value {
    let annotations = cluster::annotations(node);
    let times = recorded_times(annotations, keys, skyhook);
    let (times, _) = stamp_transitions(written, &times, state, now);
    let state_value = if state.is_empty() {
        Value::Null
    } else {
        Value::String(state.to_annotation())
    };
    let mut patch = json!({keys.node_state_annotation(skyhook): state_value});
    let times_key = keys.stage_times_annotation(skyhook);
    let times_written = (annotations.get(&times_key)).and_then(|t| TransitionTimes::parse(t).ok());
    if times_written.as_ref() != Some(&times) && !(times.is_empty() && times_written.is_none()) {
        patch[times_key] = if times.is_empty() {
            Value::Null
        } else {
            Value::String(times.to_annotation())
        };
    }
    patch
}

fn matching_nodes<'c>(
    cluster: &'c Cluster,
    patterns: &'c [NodePattern],
) -> impl Iterator<Item = &'c Node> + 'c {
    let mut nodes: Vec<_> = cluster
        .nodes
        .iter()
        .filter(move |node| !patterns.is_empty() && matches_any(patterns, name_of(&node.metadata)))
        .collect();
    nodes.sort_by_key(|node| name_of(&node.metadata));
    nodes.into_iter()
}
