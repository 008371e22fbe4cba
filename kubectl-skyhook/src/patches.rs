//! The mutating verbs as pure patch planners: the objects and the arguments in, the merge
//! patches to send (with what each does, in words) out. Only merge patches (annotations, labels,
//! status, and `packages.<p>.uninstall.apply` in a Skyhook's spec); never a full update.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};
use skyhook_api::keys;
use skyhook_api::node_state::NodeState;
use skyhook_api::transition::{TransitionTimes, recorded_times, stamp_transitions};
use skyhook_api::v1alpha1::{Skyhook, Stage, State};
use skyhook_api::version::compare_precedence;

use crate::cluster::{self, Cluster, name_of};
use crate::pattern::{NodePattern, matches_any};

/// What a patch is sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Skyhook's metadata or spec.
    Skyhook(String),
    /// A Skyhook's status subresource.
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
        "package {package:?} is not in the spec of Skyhook {skyhook:?}; `kubectl skyhook package status` lists what is on the nodes"
    )]
    UnknownPackage {
        /// The package asked for.
        package: String,
        /// The Skyhook.
        skyhook: String,
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
        "package {package:?} of Skyhook {skyhook:?} does not have uninstall.enabled: true; set packages.{package}.uninstall.enabled: true first (its uninstall steps must undo what it installed), then request the uninstall"
    )]
    UninstallNotEnabled {
        /// The package asked for.
        package: String,
        /// The Skyhook.
        skyhook: String,
    },
    /// `package uninstall --cancel` while the Skyhook is being deleted.
    #[error(
        "cannot cancel the uninstall of package {package:?}: Skyhook {skyhook:?} is being deleted, which uninstalls every package with uninstall.enabled: true; it cannot be cancelled"
    )]
    CancelWhileDeleting {
        /// The package asked for.
        package: String,
        /// The Skyhook.
        skyhook: String,
    },
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
    const fn annotation(self) -> &'static str {
        match self {
            Lifecycle::Pause | Lifecycle::Resume => keys::SKYHOOK.pause_annotation,
            Lifecycle::Disable | Lifecycle::Enable => keys::SKYHOOK.disable_annotation,
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

/// The oldest operator that honours the pause and disable annotations.
pub const MIN_LIFECYCLE_OPERATOR: &str = "0.8.0";

/// The operator version that judges whether the lifecycle annotations work: the Skyhook's
/// `skyhook.nvidia.com/version` annotation (written by the operator), else the version of
/// the operator Deployment.
pub fn operator_version_of<'a>(
    skyhook: &'a Skyhook,
    deployment: Option<&'a str>,
) -> Option<&'a str> {
    skyhook
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::SKYHOOK.version_annotation))
        .map(String::as_str)
        .or(deployment)
}

/// Whether an operator of `version` is older than [`MIN_LIFECYCLE_OPERATOR`]. An unknown or
/// unreadable version is given the benefit of the doubt. Our own controller records the
/// upstream release it is compatible with
/// ([`skyhook_api::keys::COMPATIBLE_OPERATOR_VERSION`]), so it passes like upstream's.
fn operator_too_old(version: &str) -> bool {
    let bare = version.strip_prefix('v').unwrap_or(version);
    compare_precedence(bare, MIN_LIFECYCLE_OPERATOR).is_ok_and(|o| o.is_lt())
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
    let name = name_of(&skyhook.metadata);
    if let Some(version) = operator.filter(|v| operator_too_old(v)) {
        return Err(PlanError::OperatorTooOld {
            verb: verb.verb(),
            version: version.to_owned(),
        });
    }
    let is_set = match verb {
        Lifecycle::Pause | Lifecycle::Resume => skyhook.is_paused(),
        Lifecycle::Disable | Lifecycle::Enable => skyhook.is_disabled(),
    };
    if is_set == verb.sets() {
        let already = match verb {
            Lifecycle::Pause => "already paused",
            Lifecycle::Resume => "not paused",
            Lifecycle::Disable => "already disabled",
            Lifecycle::Enable => "not disabled",
        };
        return Ok(Change {
            notes: vec![format!("Skyhook {name:?} is {already}")],
            ..Change::default()
        });
    }
    let value = if verb.sets() {
        json!("true")
    } else {
        Value::Null
    };
    Ok(Change {
        summary: vec![format!("This will {} Skyhook {name:?}.", verb.verb())],
        patches: vec![Patch {
            target: Target::Skyhook(name.to_owned()),
            body: json!({"metadata": {"annotations": {verb.annotation(): value}}}),
            description: format!("{} Skyhook {name:?}", verb.verb()),
        }],
        done: vec![format!("Skyhook {name:?} {}", verb.past())],
        notes: Vec::new(),
        // Resume and enable only undo a pause or a disable and, as upstream's, do not ask:
        // scripts call them without `--confirm`.
        confirm: verb.asks(),
    })
}

/// The merge patch that resets every compartment with a batch state to `{currentBatch: 1}`
/// (the other counters removed), or `None` when no compartment has one.
fn batch_reset_patch(skyhook: &Skyhook) -> Option<(Patch, usize)> {
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
                "reset the batch state of {count} compartment(s) of Skyhook {name:?} to currentBatch 1"
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
fn reset_node_patch(skyhook: &str, keep_cordon: bool) -> Value {
    let mut annotations = Map::new();
    let mut labels = Map::new();
    let cordon = keys::SKYHOOK.cordon_annotation(skyhook);
    let adopted = keys::SKYHOOK.adopted_by_annotation(skyhook);
    for key in keys::SKYHOOK.per_skyhook_node_keys(skyhook) {
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
    annotations.insert(keys::SKYHOOK.auto_taint_annotation(skyhook), Value::Null);
    json!({"metadata": {"annotations": annotations, "labels": labels}})
}

/// `reset <skyhook>`: clears the Skyhook's keys from every node carrying its node state, then
/// (unless `skip_batch_reset`) resets the batch state of every compartment.
pub fn reset(cluster: &Cluster, skyhook: &Skyhook, skip_batch_reset: bool) -> Change {
    let name = name_of(&skyhook.metadata);
    let state_key = keys::SKYHOOK.node_state_annotation(name);
    // A node picked before any package ran carries no node state; reset frees its pick too,
    // as upstream's clears `status.nodePriority`.
    let picked_key = keys::SKYHOOK.node_picked_annotation(name);
    let mut change = Change {
        confirm: true,
        ..Change::default()
    };
    let mut nodes: Vec<(&str, usize)> = cluster
        .nodes
        .iter()
        .filter_map(|node| {
            let annotations = cluster::annotations(node);
            let packages = match annotations.get(&state_key) {
                Some(value) => NodeState::parse(value).map_or(0, |s| s.len()),
                None if annotations.contains_key(&picked_key) => 0,
                None => return None,
            };
            Some((name_of(&node.metadata), packages))
        })
        .collect();
    nodes.sort_unstable();
    // The nodes the Skyhook still selects keep its cordon: its re-run releases it.
    let selector = skyhook.spec.target_selector();
    let selected = |node: &str| {
        (cluster.nodes.iter())
            .find(|n| name_of(&n.metadata) == node)
            .is_some_and(|n| selector.matches(cluster::labels(n)))
    };
    // Removing cordon_<skyhook> does not uncordon: say so, or the node looks forgotten.
    let mut still_cordoned: Vec<&str> = cluster
        .nodes
        .iter()
        .filter(|node| cluster::annotations(node).contains_key(&state_key))
        .filter(|node| cluster::unschedulable(node))
        .filter(|node| !selector.matches(cluster::labels(node)))
        .filter(|node| {
            cluster::annotations(node)
                .get(&keys::SKYHOOK.cordon_annotation(name))
                .is_some_and(|v| v == "true")
        })
        .map(|node| name_of(&node.metadata))
        .collect();
    still_cordoned.sort_unstable();
    if nodes.is_empty() {
        change
            .notes
            .push(format!("No node has node state for Skyhook {name:?}"));
    } else {
        change.summary.push(format!(
            "Skyhook {name:?}: resetting node state on {} node(s):",
            nodes.len()
        ));
    }
    for (node, packages) in &nodes {
        change
            .summary
            .push(format!("  - {node} ({packages} packages)"));
        change.patches.push(Patch {
            target: Target::Node((*node).to_owned()),
            body: reset_node_patch(name, selected(node)),
            description: format!("remove the node state of Skyhook {name:?} from node {node:?}"),
        });
    }
    if !nodes.is_empty() {
        change
            .done
            .push(format!("Skyhook {name:?} reset on {} node(s)", nodes.len()));
    }
    let cordon_key = keys::SKYHOOK.cordon_annotation(name);
    let kept_cordons = (cluster.nodes.iter())
        .filter(|node| nodes.iter().any(|(n, _)| *n == name_of(&node.metadata)))
        .filter(|node| selector.matches(cluster::labels(node)))
        .filter(|node| cluster::annotations(node).contains_key(&cordon_key))
        .map(|node| name_of(&node.metadata));
    change.done.extend(kept_cordons.map(|node| {
        format!("Node {node:?} keeps the cordon of Skyhook {name:?}: its next run releases it")
    }));
    change.done.extend(still_cordoned.iter().map(|node| {
        format!(
            "Node {node:?} stays cordoned: `kubectl uncordon {node}` makes it schedulable again"
        )
    }));
    if let Some((patch, count)) = batch_reset_patch(skyhook).filter(|_| !skip_batch_reset) {
        change.summary.push(format!(
            "Batch state of {count} compartment(s) goes back to batch 1."
        ));
        change.patches.push(patch);
        change
            .done
            .push(format!("Batch state of Skyhook {name:?} reset"));
    }
    if let Some(patch) = node_order_reset_patch(skyhook).filter(|_| !skip_batch_reset) {
        change.patches.push(patch);
    }
    change
}

/// The status patch that starts the rollout order (`SKYHOOK_NODE_ORDER`) again from 0, as
/// upstream's `reset` does after the batch reset: no node picked, offset 0. `None` when there
/// is nothing to clear.
fn node_order_reset_patch(skyhook: &Skyhook) -> Option<Patch> {
    let name = name_of(&skyhook.metadata);
    let status = skyhook.status.as_ref()?;
    if status.node_priority.is_empty() && status.node_order_offset == 0 {
        return None;
    }
    Some(Patch {
        target: Target::SkyhookStatus(name.to_owned()),
        body: json!({"status": {"nodeOrderOffset": 0, "nodePriority": null}}),
        description: format!(
            "restart the rollout order of Skyhook {name:?} from 0 (nodeOrderOffset, nodePriority)"
        ),
    })
}

/// `deployment-policy reset <skyhook>`: every compartment's batch state back to batch 1.
pub fn deployment_policy_reset(skyhook: &Skyhook) -> Change {
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
    match batch_reset_patch(skyhook) {
        Some((patch, _)) => {
            change.patches.push(patch);
            change
                .done
                .push(format!("Batch state of Skyhook {name:?} reset"));
        }
        None => change
            .notes
            .push(format!("Skyhook {name:?} has no batch state to reset")),
    }
    change
}

/// `node reset <patterns> --skyhook X`: removes only `nodeState_X` from the matching nodes.
pub fn node_reset(cluster: &Cluster, skyhook: &str, patterns: &[NodePattern]) -> Change {
    let state_key = keys::SKYHOOK.node_state_annotation(skyhook);
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
                "remove the node state of Skyhook {skyhook:?} from node {node_name:?}"
            ),
        });
        change
            .done
            .push(format!("Node {node_name:?} reset for Skyhook {skyhook:?}"));
    }
    if change.patches.is_empty() {
        change.notes.push(format!(
            "No matching node has node state for Skyhook {skyhook:?}"
        ));
    } else {
        change.summary.insert(
            0,
            format!(
                "Resetting the node state of Skyhook {skyhook:?} on {} node(s):",
                change.patches.len()
            ),
        );
    }
    change
}

/// `node ignore` (`ignore = true`) or `node unignore`: sets or removes
/// `skyhook.nvidia.com/ignore=true` on the matching nodes.
pub fn node_ignore(cluster: &Cluster, patterns: &[NodePattern], ignore: bool) -> Change {
    let mut change = Change::default();
    for node in matching_nodes(cluster, patterns) {
        let node_name = name_of(&node.metadata);
        let ignored = cluster::labels(node)
            .get(keys::SKYHOOK.ignore_label)
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
            body: json!({"metadata": {"labels": {keys::SKYHOOK.ignore_label: value}}}),
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
    let name = name_of(&skyhook.metadata);
    let spec = spec_package(skyhook, package)?;
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
        let Some((annotations, how)) = rerun_annotations(node, name, &rerun, cluster.read_at)
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
            "No matching node has package {package:?} version {} of Skyhook {name:?}",
            spec.version
        ));
    } else {
        change.summary.insert(
            0,
            format!(
                "Rerunning package {package:?} of Skyhook {name:?} on {} node(s):",
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
    let name = name_of(&skyhook.metadata);
    let spec = spec_package(skyhook, package)?;
    // A cancel needs no support: it only clears `apply`, whatever `enabled` says.
    if !cancel && !spec.uninstall_enabled() {
        return Err(PlanError::UninstallNotEnabled {
            package: package.to_owned(),
            skyhook: name.to_owned(),
        });
    }
    if cancel && skyhook.metadata.deletion_timestamp.is_some() {
        return Err(PlanError::CancelWhileDeleting {
            package: package.to_owned(),
            skyhook: name.to_owned(),
        });
    }
    let requested = spec.uninstall.is_some_and(|u| u.apply);
    if requested != cancel {
        let already = if cancel {
            "is not requested; nothing to cancel"
        } else {
            "is already requested; `kubectl skyhook status` shows its progress"
        };
        return Ok(Change {
            notes: vec![format!(
                "The uninstall of package {package:?} of Skyhook {name:?} {already}"
            )],
            ..Change::default()
        });
    }
    let (summary, description, done) = uninstall_words(name, package, &spec.version, cancel);
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
    skyhook: &str,
    package: &str,
    version: &str,
    cancel: bool,
) -> (String, String, String) {
    if cancel {
        (
            format!(
                "This will cancel the uninstall of package {package:?} ({version}) of Skyhook {skyhook:?}: nodes still uninstalling reinstall it; an uninstall already at its interrupt finishes first, then reinstalls."
            ),
            format!("cancel the uninstall of package {package:?} of Skyhook {skyhook:?}"),
            format!(
                "Uninstall of package {package:?} of Skyhook {skyhook:?} cancelled; nodes where it completed will reinstall it"
            ),
        )
    } else {
        (
            format!(
                "This will uninstall package {package:?} ({version}) of Skyhook {skyhook:?} from every node where it is installed, running its uninstall stage and then its interrupt, if it has one."
            ),
            format!("request the uninstall of package {package:?} of Skyhook {skyhook:?}"),
            format!(
                "Uninstall of package {package:?} of Skyhook {skyhook:?} requested; `kubectl skyhook status {skyhook}` shows its progress, `kubectl skyhook package uninstall {package} --skyhook {skyhook} --cancel` cancels it"
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
    node: &Node,
    skyhook: &str,
    rerun: &Rerun<'_>,
    now: Timestamp,
) -> Option<(Value, String)> {
    let annotations = cluster::annotations(node);
    let state_key = keys::SKYHOOK.node_state_annotation(skyhook);
    let Some(Ok(written)) = annotations.get(&state_key).map(|v| NodeState::parse(v)) else {
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
    // A rerun is not the end of an attempt: nothing to observe.
    let times = recorded_times(annotations, skyhook);
    let (times, _) = stamp_transitions(&written, &times, &state, now);
    let state_value = if state.is_empty() {
        Value::Null
    } else {
        Value::String(state.to_annotation())
    };
    let mut patch = json!({state_key: state_value});
    let times_key = keys::SKYHOOK.stage_times_annotation(skyhook);
    let times_written = (annotations.get(&times_key)).and_then(|t| TransitionTimes::parse(t).ok());
    if times_written.as_ref() != Some(&times) && !(times.is_empty() && times_written.is_none()) {
        patch[times_key] = if times.is_empty() {
            Value::Null
        } else {
            Value::String(times.to_annotation())
        };
    }
    Some((patch, how))
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
