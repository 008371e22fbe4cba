//! Every annotation, label, finalizer, condition type and environment variable name that
//! Skyhook reads or writes. They are part of the compatibility promise with upstream: tools and
//! scripts (`kubectl get nodes -o jsonpath=...nodeState_demo`) depend on the exact spelling.

/// The API group, also the prefix of every key below.
pub const GROUP: &str = "skyhook.nvidia.com";

// ---- Skyhook annotations -------------------------------------------------------------------

/// Skyhook annotation: `"true"` pauses the Skyhook. It does no work and still blocks later
/// Skyhooks on the nodes where it is incomplete.
pub const PAUSE_ANNOTATION: &str = "skyhook.nvidia.com/pause";
/// Skyhook annotation: `"true"` disables the Skyhook. It does no work and blocks nothing.
pub const DISABLE_ANNOTATION: &str = "skyhook.nvidia.com/disable";
/// Skyhook annotation: the operator version that last migrated the Skyhook.
pub const VERSION_ANNOTATION: &str = "skyhook.nvidia.com/version";
/// The operator version we write into [`VERSION_ANNOTATION`] and `version_<skyhook>`: the
/// upstream release whose node state and behaviour we are compatible with. Upstream tools read
/// these annotations (its operator to decide on migrations, its CLI to refuse pausing operators
/// older than v0.8.0), so our own crate version, which follows a different numbering, must not
/// appear there.
pub const COMPATIBLE_OPERATOR_VERSION: &str = "v0.13.0";

/// The operator-version marker to write over `current` (the Skyhook's [`VERSION_ANNOTATION`]
/// or a node's `version_<skyhook>`): ours ([`COMPATIBLE_OPERATOR_VERSION`]) where there is
/// none, or an older one, or one that is not a version; `None` (leave it) where it is ours or
/// newer. Upstream reads the marker to decide which migrations to run when it takes the
/// cluster back, so a marker left by a newer upstream operator must never be lowered. Versions
/// are compared as semver, with or without their `v`.
pub fn operator_version_to_write(current: Option<&str>) -> Option<&'static str> {
    use std::cmp::Ordering;
    let parse = |text: &str| crate::version::Version::parse(text.strip_prefix('v').unwrap_or(text));
    let Some(current) = current.and_then(|text| parse(text).ok()) else {
        return Some(COMPATIBLE_OPERATOR_VERSION);
    };
    let ours = parse(COMPATIBLE_OPERATOR_VERSION).ok()?;
    (current.cmp_precedence(&ours) == Ordering::Less).then_some(COMPATIBLE_OPERATOR_VERSION)
}

/// Finalizer on every Skyhook, removed after cleanup (uncordon, metrics) on deletion.
pub const FINALIZER: &str = "skyhook.nvidia.com/skyhook";

// ---- Node annotations and labels (one per Skyhook) -------------------------------------------

/// Node annotation holding the node-state JSON of Skyhook `skyhook` (the source of truth).
pub fn node_state_annotation(skyhook: &str) -> String {
    format!("{GROUP}/nodeState_{skyhook}")
}

/// Node annotation **and** label holding the node's status for Skyhook `skyhook`.
pub fn node_status_key(skyhook: &str) -> String {
    format!("{GROUP}/status_{skyhook}")
}

/// Node annotation `"true"`: Skyhook `skyhook` cordoned the node and owns that cordon.
pub fn cordon_annotation(skyhook: &str) -> String {
    format!("{GROUP}/cordon_{skyhook}")
}

/// Prefix shared by every cordon-ownership annotation, to find all owners of a cordon.
pub const CORDON_ANNOTATION_PREFIX: &str = "skyhook.nvidia.com/cordon_";

/// Node annotation: the operator version that last touched the node for Skyhook `skyhook`.
pub fn node_version_annotation(skyhook: &str) -> String {
    format!("{GROUP}/version_{skyhook}")
}

/// Prefix of [`cordoned_at_annotation`], to find every Skyhook's drain start.
pub const CORDONED_AT_PREFIX: &str = "skyhook.nvidia.com/cordonedAt_";

/// Node annotation (RFC 3339): when Skyhook `skyhook` cordoned the node, so that the drain
/// timeout survives controller restarts. Ours; upstream has no such key.
pub fn cordoned_at_annotation(skyhook: &str) -> String {
    format!("{CORDONED_AT_PREFIX}{skyhook}")
}

/// Node annotation (RFC 3339): when a drain of Skyhook `skyhook` on the node timed out with
/// `spec.drain.onTimeout: fail`. The node was uncordoned and its interrupting package marked
/// `erroring` without an interrupt having run, so it holds no budget slot
/// ([`crate::budget::slot_hold`]); the next cordon of the Skyhook removes it. Ours.
pub fn drain_failed_annotation(skyhook: &str) -> String {
    format!("{GROUP}/drainFail_{skyhook}")
}

/// Node annotation (JSON, see [`crate::transition::TransitionTimes`]): when each entry of
/// Skyhook `skyhook`'s node state entered its stage and state, for stage durations, the
/// health gate and the plugin's ETA. Ours: kept beside `nodeState_<skyhook>`, which stays
/// exactly upstream's JSON.
pub fn stage_times_annotation(skyhook: &str) -> String {
    format!("{GROUP}/stageTimes_{skyhook}")
}

/// Node annotation: the boot ID Skyhook `skyhook` last saw on the node, to detect reboots
/// (spec §2.11). Ours: upstream keeps it only in `status.nodeBootIds`, which a status over
/// thousands of nodes can no longer hold ([`crate::node_mirror`]).
pub fn node_boot_id_annotation(skyhook: &str) -> String {
    format!("{GROUP}/bootId_{skyhook}")
}

/// Node annotation (RFC 3339, whole seconds): when Skyhook `skyhook` picked the node for its
/// current batch; present while the node keeps its batch slot (spec §2.4, batch stickiness).
/// Ours: upstream keeps it only in `status.nodePriority` ([`crate::node_mirror`]).
pub fn node_picked_annotation(skyhook: &str) -> String {
    format!("{GROUP}/pickedAt_{skyhook}")
}

/// Node annotation `"true"`: the operator added the taint with key `taint_key` to a new node.
/// The suffix is the taint key, not a Skyhook name.
pub fn auto_taint_annotation(taint_key: &str) -> String {
    format!("{GROUP}/autoTaint_{taint_key}")
}

/// Whether the node annotation or label `key` belongs to Skyhook `skyhook`: it starts with
/// `skyhook.nvidia.com/` and ends with `_<skyhook>`. The auto-taint annotation is never one,
/// even when the taint key happens to equal the Skyhook's name (upstream's cleanup removed it
/// then).
pub fn is_skyhook_node_key(key: &str, skyhook: &str) -> bool {
    let Some(rest) = key.strip_prefix(GROUP).and_then(|r| r.strip_prefix('/')) else {
        return false;
    };
    !rest.starts_with("autoTaint_")
        && rest
            .strip_suffix(skyhook)
            .is_some_and(|head| head.ends_with('_'))
}

/// The prefix of every node condition type of Skyhook `skyhook`: `skyhook.nvidia.com/<s>/`.
pub fn node_condition_prefix(skyhook: &str) -> String {
    format!("{GROUP}/{skyhook}/")
}

/// Whether node condition type `type_` is one some Skyhook sets (`skyhook.nvidia.com/<s>/...`):
/// the only node conditions the controller reads whole (of the kubelet's, it reads whether and
/// since when the node is Ready).
pub fn is_skyhook_node_condition(type_: &str) -> bool {
    type_
        .strip_prefix(GROUP)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(skyhook, condition)| !skyhook.is_empty() && !condition.is_empty())
}

/// Node label `"true"` set by an administrator: the node is `blocked` for every Skyhook.
pub const IGNORE_LABEL: &str = "skyhook.nvidia.com/ignore";

/// Node condition type: True (reason [`NODE_NOT_READY_REASON_INCOMPLETE`]) while Skyhook
/// `skyhook` is incomplete on the node.
pub fn node_not_ready_condition(skyhook: &str) -> String {
    format!("{GROUP}/{skyhook}/NotReady")
}

/// Node condition type: True (reason [`NODE_ERRORING_REASON`]) while a package of Skyhook
/// `skyhook` is erroring or unknown on the node.
pub fn node_erroring_condition(skyhook: &str) -> String {
    format!("{GROUP}/{skyhook}/Erroring")
}

/// Where the controller writes a per-Skyhook node key, which decides the limits it must meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKeyKind {
    /// A node annotation key: a qualified name whose name part is at most 63 characters.
    Annotation,
    /// Both a node annotation key and a node label key: a qualified name as above.
    AnnotationAndLabel,
    /// A node condition type. The API server does not validate node condition types, so they
    /// put no bound on the Skyhook name; they are listed for cleanup.
    ConditionType,
}

/// One key the controller writes on nodes for one Skyhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeKey {
    /// The full key, e.g. `skyhook.nvidia.com/nodeState_demo`.
    pub key: String,
    /// Where it is written.
    pub kind: NodeKeyKind,
}

/// Every node annotation, label and condition type the controller writes for Skyhook
/// `skyhook`: what a node reset or the deletion cleanup removes, and what bounds the length of
/// a Skyhook name ([`max_skyhook_name_len`]). A new per-Skyhook key must be added here.
pub fn per_skyhook_node_keys(skyhook: &str) -> [NodeKey; 11] {
    let key = |key: String, kind: NodeKeyKind| NodeKey { key, kind };
    [
        key(node_state_annotation(skyhook), NodeKeyKind::Annotation),
        key(node_status_key(skyhook), NodeKeyKind::AnnotationAndLabel),
        key(cordon_annotation(skyhook), NodeKeyKind::Annotation),
        key(node_version_annotation(skyhook), NodeKeyKind::Annotation),
        key(cordoned_at_annotation(skyhook), NodeKeyKind::Annotation),
        key(drain_failed_annotation(skyhook), NodeKeyKind::Annotation),
        key(node_boot_id_annotation(skyhook), NodeKeyKind::Annotation),
        key(node_picked_annotation(skyhook), NodeKeyKind::Annotation),
        key(stage_times_annotation(skyhook), NodeKeyKind::Annotation),
        key(
            node_not_ready_condition(skyhook),
            NodeKeyKind::ConditionType,
        ),
        key(node_erroring_condition(skyhook), NodeKeyKind::ConditionType),
    ]
}

/// The longest name part of a qualified annotation or label key (after `prefix/`), and the
/// longest label value.
pub const MAX_QUALIFIED_NAME_PART: usize = 63;

/// The longest Skyhook name whose every per-Skyhook annotation and label key
/// ([`per_skyhook_node_keys`]) is valid, and which fits the label values that carry the name
/// ([`NAME_LABEL`], [`NODE_META_LABEL`]). Computed from the keys themselves, so a new or longer
/// key lowers it rather than breaking every node patch of a long-named Skyhook.
pub fn max_skyhook_name_len() -> usize {
    per_skyhook_node_keys("")
        .iter()
        .filter(|k| k.kind != NodeKeyKind::ConditionType)
        .map(|k| {
            let name_part = k.key.rsplit_once('/').map_or(k.key.as_str(), |(_, n)| n);
            MAX_QUALIFIED_NAME_PART.saturating_sub(name_part.len())
        })
        .fold(MAX_QUALIFIED_NAME_PART, usize::min)
}

/// Reason of the node `NotReady` condition while True.
pub const NODE_NOT_READY_REASON_INCOMPLETE: &str = "Incomplete";
/// Reason of the node `NotReady` condition while False.
pub const NODE_NOT_READY_REASON_COMPLETE: &str = "Complete";
/// Reason of the node `Erroring` condition while True.
pub const NODE_ERRORING_REASON: &str = "Package(s) Erroring or Unknown";
/// Reason of the node `Erroring` condition while False.
pub const NODE_NOT_ERRORING_REASON: &str = "Not Erroring";

/// Message of the node `NotReady` condition of Skyhook `skyhook`: upstream's `Skyhook <name>
/// Ready` once it is complete on the node, and the counterpart `Skyhook <name> Not Ready`
/// while it is not (upstream's text for that case is not recorded; see
/// docs/compatibility.md).
pub fn node_not_ready_message(skyhook: &str, complete: bool) -> String {
    if complete {
        format!("Skyhook {skyhook} Ready")
    } else {
        format!("Skyhook {skyhook} Not Ready")
    }
}

/// Message of the node `Erroring` condition of Skyhook `skyhook`: upstream's `Package
/// Erroring or Unknown for <name>` while a package is erroring or unknown on the node, and the
/// counterpart `No Package Erroring or Unknown for <name>` otherwise (upstream's text for that
/// case is not recorded; see docs/compatibility.md).
pub fn node_erroring_message(skyhook: &str, erroring: bool) -> String {
    if erroring {
        format!("Package Erroring or Unknown for {skyhook}")
    } else {
        format!("No Package Erroring or Unknown for {skyhook}")
    }
}

// ---- Pods and ConfigMaps the operator creates ----------------------------------------------

/// Label (and annotation) on package pods, interrupt pods and package ConfigMaps: the Skyhook
/// name. Only pods with this label are watched.
pub const NAME_LABEL: &str = "skyhook.nvidia.com/name";
/// Pod label: `<package>-<version>`.
pub const PACKAGE_LABEL: &str = "skyhook.nvidia.com/package";
/// Pod annotation holding the package reference JSON
/// (see [`crate::pod_annotation::PodPackageAnnotation`]).
pub const PACKAGE_ANNOTATION: &str = "skyhook.nvidia.com/package";
/// Pod label `"True"` on interrupt pods.
pub const INTERRUPT_LABEL: &str = "skyhook.nvidia.com/interrupt";
/// Value of [`INTERRUPT_LABEL`].
pub const INTERRUPT_LABEL_VALUE: &str = "True";
/// Label on node-metadata ConfigMaps: the Skyhook name.
pub const NODE_META_LABEL: &str = "skyhook.nvidia.com/skyhook-node-meta";
/// Package ConfigMap annotation: the package name.
pub const PACKAGE_NAME_ANNOTATION: &str = "skyhook.nvidia.com/Package.Name";
/// Package ConfigMap annotation: the package version.
pub const PACKAGE_VERSION_ANNOTATION: &str = "skyhook.nvidia.com/Package.Version";
/// Node-metadata ConfigMap annotation: the node name.
pub const NODE_NAME_ANNOTATION: &str = "skyhook.nvidia.com/Node.name";

// ---- Environment of the agent containers ----------------------------------------------------

/// Agent and copy-container env: the package's copy directory on the host.
pub const ENV_SKYHOOK_DIR: &str = "SKYHOOK_DIR";
/// Agent env: `<AGENT_LOG_ROOT>/<skyhook>`.
pub const ENV_SKYHOOK_LOG_DIR: &str = "SKYHOOK_LOG_DIR";
/// Agent env: `<COPY_DIR_ROOT>/<skyhook>`.
pub const ENV_SKYHOOK_ROOT_DIR: &str = "SKYHOOK_ROOT_DIR";
/// Agent env: always `false`.
pub const ENV_COPY_RESOLV: &str = "COPY_RESOLV";
/// Agent env: `<skyhook>-<uid>-<generation>_<package>_<version>`, the key of interrupt flags.
pub const ENV_SKYHOOK_RESOURCE_ID: &str = "SKYHOOK_RESOURCE_ID";
/// Agent environment: the node's place in the Skyhook's rollout order, a decimal that only grows
/// across batches (see [`crate::budget::node_orders`]).
pub const ENV_SKYHOOK_NODE_ORDER: &str = "SKYHOOK_NODE_ORDER";
/// The environment variables the operator injects into agent containers, in the order it adds
/// them after the package's own `env`. A pod is compared with the spec without them.
pub const OPERATOR_AGENT_ENV: [&str; 5] = [
    ENV_SKYHOOK_LOG_DIR,
    ENV_SKYHOOK_ROOT_DIR,
    ENV_COPY_RESOLV,
    ENV_SKYHOOK_RESOURCE_ID,
    ENV_SKYHOOK_NODE_ORDER,
];

// ---- Skyhook condition types ---------------------------------------------------------------

/// Standard condition: True once the Skyhook is complete on every selected node, for
/// `kubectl wait --for=condition=Ready` and GitOps tools.
pub const CONDITION_READY: &str = "Ready";
/// Deprecated mirror of [`CONDITION_READY`], identical to it, kept for one release.
pub const CONDITION_READY_PREFIXED: &str = "skyhook.nvidia.com/Ready";
/// Condition always present: Ready's status, reason = the raw Skyhook status, message the
/// transition in a pass that changed the status, otherwise Ready's message.
pub const CONDITION_TRANSITION: &str = "skyhook.nvidia.com/Transition";
/// Condition naming the package and node of the last pod launch.
pub const CONDITION_APPLY_PACKAGE: &str = "skyhook.nvidia.com/ApplyPackage";
/// Condition: True while some selected node has a taint the packages do not tolerate.
pub const CONDITION_TAINT_NOT_TOLERABLE: &str = "skyhook.nvidia.com/TaintNotTolerable";
/// Condition: True while some selected node carries the ignore label.
pub const CONDITION_NODES_IGNORED: &str = "skyhook.nvidia.com/NodesIgnored";
/// The bare types written beside [`CONDITION_APPLY_PACKAGE`], [`CONDITION_TAINT_NOT_TOLERABLE`],
/// [`CONDITION_NODES_IGNORED`] and [`CONDITION_DEPLOYMENT_POLICY_NOT_FOUND`], which upstream
/// deprecated but still writes for one release. Each pair always carries the same condition.
pub const CONDITION_APPLY_PACKAGE_BARE: &str = "ApplyPackage";
/// See [`CONDITION_APPLY_PACKAGE_BARE`].
pub const CONDITION_TAINT_NOT_TOLERABLE_BARE: &str = "TaintNotTolerable";
/// See [`CONDITION_APPLY_PACKAGE_BARE`].
pub const CONDITION_NODES_IGNORED_BARE: &str = "NodesIgnored";
/// See [`CONDITION_APPLY_PACKAGE_BARE`].
pub const CONDITION_DEPLOYMENT_POLICY_NOT_FOUND_BARE: &str = "DeploymentPolicyNotFound";
/// Reason of [`CONDITION_TAINT_NOT_TOLERABLE`], True or False (upstream: the type's last
/// segment either way).
pub const TAINT_NOT_TOLERABLE_REASON: &str = "TaintNotTolerable";
/// Message of [`CONDITION_TAINT_NOT_TOLERABLE`] while False.
pub const ALL_TAINTS_TOLERABLE_MESSAGE: &str = "All nodes have tolerable taints.";
/// Reason of [`CONDITION_NODES_IGNORED`], True or False (upstream: the type's last segment
/// either way).
pub const NODES_IGNORED_REASON: &str = "NodesIgnored";
/// Message of [`CONDITION_NODES_IGNORED`] while False.
pub const NO_NODES_IGNORED_MESSAGE: &str = "No nodes have ignore label set.";
/// Reason of [`CONDITION_APPLY_PACKAGE`].
pub const APPLY_PACKAGE_REASON: &str = "ApplyPackage";

/// Message of [`CONDITION_APPLY_PACKAGE`] (upstream's, without the stage): the package and node
/// of the last pod launch.
pub fn apply_package_message(package: &str, version: &str, node: &str) -> String {
    format!("Applying package [{package}:{version}] to node [{node}]")
}

/// Condition: True while the referenced DeploymentPolicy does not exist.
pub const CONDITION_DEPLOYMENT_POLICY_NOT_FOUND: &str =
    "skyhook.nvidia.com/DeploymentPolicyNotFound";

/// Condition (ours, not upstream's): True while a node was asked to reboot by one of the
/// Skyhook's interrupts and has not come back with a new boot ID within the reboot deadline;
/// the message lists the nodes, packages and when each reboot was requested. The node keeps its
/// budget slot meanwhile.
pub const CONDITION_REBOOT_NOT_CONFIRMED: &str = "skyhook.nvidia.com/RebootNotConfirmed";

/// Condition (ours, not upstream's): True while nodes the Skyhook would cordon wait because
/// the controller's fleet budget (`FLEET_BUDGET`) is used up by nodes cordoned or interrupting
/// across all Skyhooks; the message says how many and which nodes wait. Removed once none waits.
pub const CONDITION_FLEET_BUDGET_WAIT: &str = "skyhook.nvidia.com/WaitingForFleetBudget";
/// Reason of [`CONDITION_FLEET_BUDGET_WAIT`].
pub const FLEET_BUDGET_FULL_REASON: &str = "FleetBudgetFull";

/// Condition (ours, not upstream's): True while compartments of the Skyhook hold their next
/// batch because their DeploymentPolicy's maintenance windows are closed; the message says
/// when the next window opens. Removed once no compartment is held by a window.
pub const CONDITION_OUTSIDE_MAINTENANCE_WINDOW: &str =
    "skyhook.nvidia.com/OutsideMaintenanceWindow";
/// Reason of [`CONDITION_OUTSIDE_MAINTENANCE_WINDOW`].
pub const MAINTENANCE_WINDOW_CLOSED_REASON: &str = "MaintenanceWindowClosed";

/// Condition (ours, not upstream's): True while compartments of the Skyhook hold their next
/// batch because their DeploymentPolicy's health gate is closed; the message names, per
/// compartment, the node that holds it. Removed once no compartment is held by the gate.
pub const CONDITION_HEALTH_GATE_HELD: &str = "skyhook.nvidia.com/HealthGateHeld";
/// Reason of [`CONDITION_HEALTH_GATE_HELD`].
pub const HEALTH_GATE_HELD_REASON: &str = "NodeNotSettled";

// ---- Explicit uninstall and deletion conditions (bare types only, upstream §2.9) ----------

/// Condition: True while some node has a spec package in its uninstall cycle (`uninstall` or
/// `uninstall-interrupt`); removed once none has.
pub const CONDITION_UNINSTALL_IN_PROGRESS: &str = "UninstallInProgress";
/// Reason of [`CONDITION_UNINSTALL_IN_PROGRESS`].
pub const UNINSTALL_IN_PROGRESS_REASON: &str = "UninstallInProgress";
/// Condition: True while such an uninstall entry is `erroring`.
pub const CONDITION_UNINSTALL_FAILED: &str = "UninstallFailed";
/// Reason of [`CONDITION_UNINSTALL_FAILED`].
pub const UNINSTALL_FAILED_REASON: &str = "UninstallPodFailing";
/// Condition: True while a package cannot run because a package it depends on is being, or
/// has been, uninstalled.
pub const CONDITION_BLOCKED: &str = "Blocked";
/// Reason of [`CONDITION_BLOCKED`].
pub const DEPENDENCY_UNINSTALLED_REASON: &str = "DependencyUninstalled";
/// Condition: True while some node's `nodeState_<skyhook>` annotation does not parse.
pub const CONDITION_NODE_STATE_MALFORMED: &str = "NodeStateMalformed";
/// Reason of [`CONDITION_NODE_STATE_MALFORMED`].
pub const NODE_STATE_MALFORMED_REASON: &str = "ParseError";
/// Condition: True while a deleted Skyhook waits before it can uninstall and clean its nodes;
/// also the reason of its Warning Event.
pub const CONDITION_DELETION_BLOCKED: &str = "DeletionBlocked";
/// [`CONDITION_DELETION_BLOCKED`] reason: a node's state is unreadable.
pub const DELETION_BLOCKED_MALFORMED_REASON: &str = "MalformedNodeState";
/// [`CONDITION_DELETION_BLOCKED`] reason: the Skyhook is paused with uninstalls pending.
pub const DELETION_BLOCKED_PAUSED_REASON: &str = "PausedWithPendingUninstall";
/// [`CONDITION_DELETION_BLOCKED`] reason: the Skyhook is disabled with uninstalls pending.
pub const DELETION_BLOCKED_DISABLED_REASON: &str = "DisabledWithPendingUninstall";
/// [`CONDITION_DELETION_BLOCKED`] reason: an uninstall the deletion waits for cannot run, or
/// keeps failing, because its package is `erroring` on some nodes. Ours: upstream's deletion
/// waits there without a word (a known issue it documents).
pub const DELETION_BLOCKED_ERRORING_REASON: &str = "ErroringWithPendingUninstall";

// ---- Rollout names -------------------------------------------------------------------------

/// Name of the compartment holding the nodes no compartment selects, and of the single
/// compartment of a Skyhook without a DeploymentPolicy. Reserved in policies.
pub const DEFAULT_COMPARTMENT: &str = "__default__";
/// `policy_name` metric label of a Skyhook without a DeploymentPolicy.
pub const LEGACY_POLICY_NAME: &str = "legacy";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_keys_of_a_skyhook() {
        let cases = [
            ("skyhook.nvidia.com/nodeState_gpu", true),
            ("skyhook.nvidia.com/status_gpu", true),
            ("skyhook.nvidia.com/cordonedAt_gpu", true),
            ("skyhook.nvidia.com/bootId_gpu", true),
            ("skyhook.nvidia.com/pickedAt_gpu", true),
            ("skyhook.nvidia.com/status_other-gpu", false),
            ("skyhook.nvidia.com/status_gpu2", false),
            ("skyhook.nvidia.com/autoTaint_gpu", false),
            ("example.com/status_gpu", false),
            ("skyhook.nvidia.com/gpu", false),
        ];
        for (key, expected) in cases {
            assert_eq!(is_skyhook_node_key(key, "gpu"), expected, "{key}");
        }
    }

    #[test]
    fn node_conditions_of_skyhooks() {
        let cases = [
            (node_not_ready_condition("gpu"), true),
            (node_erroring_condition("other"), true),
            ("Ready".to_owned(), false),
            ("MemoryPressure".to_owned(), false),
            ("skyhook.nvidia.com/gpu".to_owned(), false),
            ("skyhook.nvidia.com//NotReady".to_owned(), false),
            ("skyhook.nvidia.com/gpu/".to_owned(), false),
            ("skyhook.nvidia.comx/gpu/NotReady".to_owned(), false),
            ("example.com/gpu/NotReady".to_owned(), false),
        ];
        for (type_, expected) in cases {
            assert_eq!(is_skyhook_node_condition(&type_), expected, "{type_}");
        }
    }

    #[test]
    fn per_skyhook_keys_match_upstream_spelling() {
        let cases: [(String, &str); 7] = [
            (
                node_state_annotation("demo"),
                "skyhook.nvidia.com/nodeState_demo",
            ),
            (node_status_key("demo"), "skyhook.nvidia.com/status_demo"),
            (cordon_annotation("demo"), "skyhook.nvidia.com/cordon_demo"),
            (
                node_version_annotation("demo"),
                "skyhook.nvidia.com/version_demo",
            ),
            (
                auto_taint_annotation("skyhook.nvidia.com"),
                "skyhook.nvidia.com/autoTaint_skyhook.nvidia.com",
            ),
            (
                node_not_ready_condition("demo"),
                "skyhook.nvidia.com/demo/NotReady",
            ),
            (
                node_erroring_condition("demo"),
                "skyhook.nvidia.com/demo/Erroring",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
        assert!(cordon_annotation("x").starts_with(CORDON_ANNOTATION_PREFIX));
        assert_eq!(
            cordoned_at_annotation("demo"),
            "skyhook.nvidia.com/cordonedAt_demo"
        );
        assert_eq!(
            node_boot_id_annotation("demo"),
            "skyhook.nvidia.com/bootId_demo"
        );
        assert_eq!(
            node_picked_annotation("demo"),
            "skyhook.nvidia.com/pickedAt_demo"
        );
    }

    #[test]
    fn every_per_skyhook_key_is_listed_once_and_names_its_skyhook() {
        let keys = per_skyhook_node_keys("demo");
        let mut spelled: Vec<&str> = keys.iter().map(|k| k.key.as_str()).collect();
        spelled.sort_unstable();
        spelled.dedup();
        assert_eq!(spelled.len(), keys.len());
        for key in &keys {
            assert!(key.key.starts_with("skyhook.nvidia.com/"), "{key:?}");
            assert!(key.key.contains("demo"), "{key:?}");
            assert!(
                !per_skyhook_node_keys("other")
                    .iter()
                    .any(|o| o.key == key.key)
            );
        }
    }

    /// `cordonedAt_` and `stageTimes_` (11 characters) are the longest name-part prefixes
    /// today: 63 - 11 = 52.
    #[test]
    fn the_name_limit_comes_from_the_longest_key() {
        assert_eq!(max_skyhook_name_len(), 52);
    }

    #[test]
    fn the_operator_version_marker_is_never_lowered() {
        let ours = Some(COMPATIBLE_OPERATOR_VERSION);
        let cases = [
            (None, ours),
            (Some(""), ours),
            (Some("not a version"), ours),
            (Some("v0.12.3"), ours),
            (Some("0.9.0"), ours),
            (Some("v0.13.0-rc.1"), ours),
            (Some(COMPATIBLE_OPERATOR_VERSION), None),
            (Some("0.13.0"), None),
            // Written by a newer upstream operator: it decides migrations from it.
            (Some("v0.13.1"), None),
            (Some("v0.20.0"), None),
            (Some("v1.0.0"), None),
        ];
        for (current, expected) in cases {
            assert_eq!(operator_version_to_write(current), expected, "{current:?}");
        }
    }
}
