//! Every kind of Event the controller emits: its reason, its action and whether it is a
//! Warning, in one table. Events go out through `events.k8s.io/v1`, where upstream gives each
//! a reason *and* an action; where upstream has the Event, the kind is upstream's pair and type
//! exactly (tools and tests filter on them), and where the Event is ours (a feature upstream
//! lacks) it keeps our reason with an action saying what the controller did. A leaf: steps name
//! a kind from here and [`Workset::emit`](super::workset::Workset::emit) fills the Event.

/// The reason, action and type of one kind of Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventKind {
    /// The reason (`Apply`, `State`, ...).
    pub reason: &'static str,
    /// The action (`ApplyPackage`, `MarkComplete`, ...).
    pub action: &'static str,
    /// `Warning` rather than `Normal`.
    pub warning: bool,
}

const fn normal(reason: &'static str, action: &'static str) -> EventKind {
    EventKind {
        reason,
        action,
        warning: false,
    }
}

const fn warning(reason: &'static str, action: &'static str) -> EventKind {
    EventKind {
        reason,
        action,
        warning: true,
    }
}

// Upstream's Events (reason, action, type as upstream sends them).

/// A package stage starts on a node: on the Node and the Skyhook.
pub const APPLY_PACKAGE: EventKind = normal("Apply", "ApplyPackage");
/// A bare package pod's (the release before Jobs) stage complete, recorded in the node state; a
/// Job's is [`JOB_COMPLETE`].
pub const UPDATE_NODE_STATE: EventKind = normal("Apply", "UpdateNodeState");
/// A package pod's failure recorded in the node state (upstream's pod watch, as a Warning
/// here: an erroring package needs someone's attention).
pub const PACKAGE_ERRORING: EventKind = warning("Apply", "UpdateNodeState");
/// A node completed every package of a Skyhook: `Skyhook [<name>] complete.`
pub const MARK_COMPLETE: EventKind = normal("State", "MarkComplete");
/// The Skyhook's status changed: `Skyhook transitioned [<a>] -> [<b>]`.
pub const TRANSITION: EventKind = normal("State", "Transition");
/// A stage's Job completed and its stage is recorded complete (on the Node):
/// `Package [<p>:<v>] state complete on [skyhook:<name>]`.
pub const JOB_COMPLETE: EventKind = normal("State", "JobComplete");
/// A stage's Job failed for good (on the Node; upstream sends it as Normal):
/// `Package [<p>:<v>] stage <s> failed on [skyhook:<name>]: <reason>`.
pub const JOB_FAILED: EventKind = normal("State", "JobFailed");
/// An interrupt starts on a node (on the Skyhook).
pub const INTERRUPT_NODE: EventKind = normal("Interrupt", "InterruptNode");
/// A non-reboot interrupt used up its restart budget (on the Node and the Skyhook).
pub const RESTART_LIMIT_EXCEEDED: EventKind = warning("Interrupt", "RestartLimitExceeded");
/// Pods are evicted (or deleted) to drain a node.
pub const DRAIN_NODE: EventKind = normal("Drain", "DrainNode");
/// `drainConfig.timeout` elapsed: the node is erroring and stays cordoned.
pub const DRAIN_TIMEOUT: EventKind = warning("Drain", "DrainTimeout");
/// Pods matching `podNonInterruptLabels` hold a drain: on the Skyhook on the transition into
/// blocked, and on each Node newly held, naming the package and the pods. Upstream's action
/// for it, and its reason on the Node, are not recorded; the Node's is the Skyhook's.
pub const NON_INTERRUPT_PODS_RUNNING: EventKind = warning("Drain", "NonInterruptPodsRunning");
/// A reboot reset a node's state for a Skyhook (`REAPPLY_ON_REBOOT`): on the Node and the
/// Skyhook.
pub const REBOOT_RESET: EventKind = normal("Reboot", "ResetNodeState");
/// A deletion cannot proceed (`DeletionBlocked` condition).
pub const DELETION_BLOCKED: EventKind = warning("DeletionBlocked", "BlockDelete");
/// Tainting a node with the runtime-required taint failed (on the Node). Upstream's action is
/// not recorded; this names what the controller did.
pub const AUTO_TAINT: EventKind = warning("AutoTaint", "TaintNode");

// Ours: features upstream does not have, or failures upstream does not report.

/// A package's pod could not be built or serialized (on the Skyhook).
pub const POD_NOT_BUILT: EventKind = warning("Apply", "BuildPod");
/// A node refused a package pod; it is created again after a backoff (on the Node).
pub const POD_REJECTED: EventKind = warning("Apply", "RetryPod");
/// An interrupt pod is gone while its node is NotReady (on the Node).
pub const INTERRUPT_LOST: EventKind = warning("Interrupt", "UpdateNodeState");
/// `podNonInterruptLabels` or `spec.drain.podSelector` does not parse (on the Skyhook).
pub const INTERRUPT_SELECTOR_INVALID: EventKind = warning("Interrupt", "ValidateSelector");
/// A drain past `spec.drain.timeoutSeconds` is still waiting on pods (on the Node).
pub const DRAIN_BLOCKED: EventKind = warning("DrainBlocked", "WaitForDrain");
/// A drain given up with `spec.drain.onTimeout: fail`: the node is released (on the Node).
pub const DRAIN_FAILED: EventKind = warning("DrainFailed", "ReleaseNode");
/// A reboot not back with a new boot ID within the reboot deadline (on the Node).
pub const REBOOT_NOT_CONFIRMED: EventKind = warning("RebootNotConfirmed", "WaitForReboot");
/// A `nodeState_<skyhook>` annotation does not parse; the Skyhook skips the node (on the Node).
/// Upstream's condition for the same defect is named `NodeStateMalformed` too.
pub const NODE_STATE_MALFORMED: EventKind = warning("NodeStateMalformed", "SkipNode");
/// The package dependencies or the Skyhook's owner reference are invalid (on the Skyhook).
pub const INVALID: EventKind = warning("Invalid", "ValidateSpec");
/// The spec fails validation (on the Skyhook).
pub const SPEC_INVALID: EventKind = warning("SpecInvalid", "ValidateSpec");

/// An open maintenance window's budget starts holding a Skyhook's compartments to fewer nodes
/// than their own budgets (once, when its `WindowBudgetHeld` condition turns True): on the
/// Skyhook. Ours.
pub const WINDOW_BUDGET_HELD: EventKind = normal("WindowBudgetHeld", "HoldBatch");

/// A budget's `topology` starts holding a Skyhook's nodes back (once, when its
/// `TopologyBudgetHeld` condition turns True): on the Skyhook. Ours.
pub const TOPOLOGY_BUDGET_HELD: EventKind = normal("TopologyBudgetHeld", "HoldNodes");

/// A node's readiness gate is past its timeout: the node is `erroring` and stays cordoned
/// (once per wait, on the Node). Ours.
pub const READINESS_GATE_TIMED_OUT: EventKind = warning("ReadinessGateTimedOut", "HoldNode");

/// A node held by readiness gates met them all and completes (on the Node). Ours.
pub const READINESS_GATE_MET: EventKind = normal("ReadinessGateMet", "ReleaseNode");

/// A node's images are pulled before its cordon (`spec.prePullImages`; on the Node). Ours.
pub const PRE_PULL: EventKind = normal("PrePull", "PullImages");

/// An image cannot be pulled on a node before its cordon: its packages are erroring and the
/// node is not cordoned (on the Node and the Skyhook). Ours.
pub const PRE_PULL_FAILED: EventKind = warning("PrePullFailed", "PullImages");

/// A workload took over its twin's node state (ours: upstream's mirror sends no Event): on
/// the object that adopted it, once per takeover.
pub const ADOPTED: EventKind = normal("Adopted", "AdoptNodes");

/// Every kind, for the table test.
#[cfg(test)]
pub const ALL: &[EventKind] = &[
    ADOPTED,
    APPLY_PACKAGE,
    UPDATE_NODE_STATE,
    PACKAGE_ERRORING,
    MARK_COMPLETE,
    TRANSITION,
    JOB_COMPLETE,
    JOB_FAILED,
    INTERRUPT_NODE,
    RESTART_LIMIT_EXCEEDED,
    DRAIN_NODE,
    DRAIN_TIMEOUT,
    NON_INTERRUPT_PODS_RUNNING,
    REBOOT_RESET,
    DELETION_BLOCKED,
    AUTO_TAINT,
    POD_NOT_BUILT,
    POD_REJECTED,
    INTERRUPT_LOST,
    INTERRUPT_SELECTOR_INVALID,
    DRAIN_BLOCKED,
    DRAIN_FAILED,
    REBOOT_NOT_CONFIRMED,
    NODE_STATE_MALFORMED,
    INVALID,
    SPEC_INVALID,
    WINDOW_BUDGET_HELD,
    READINESS_GATE_TIMED_OUT,
    READINESS_GATE_MET,
    TOPOLOGY_BUDGET_HELD,
    PRE_PULL,
    PRE_PULL_FAILED,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// events.k8s.io/v1 requires an action of at most 128 characters and a reason of at
    /// most 128, both in UpperCamelCase like upstream's; no two kinds share (reason, action,
    /// type), so a filter on the pair finds exactly one kind.
    #[test]
    fn kinds_are_valid_and_distinct() {
        let camel = |s: &str| {
            !s.is_empty()
                && s.len() <= 128
                && s.starts_with(|c: char| c.is_ascii_uppercase())
                && s.chars().all(|c| c.is_ascii_alphanumeric())
        };
        for kind in ALL {
            assert!(camel(kind.reason) && camel(kind.action), "{kind:?}");
        }
        let distinct: std::collections::HashSet<_> = ALL.iter().collect();
        assert_eq!(distinct.len(), ALL.len());
    }

    /// Upstream's pairs and types, as its code sends them (upstream-delta-v0.20 §2.11).
    #[test]
    fn upstream_pairs() {
        let cases: [(EventKind, &str, &str, bool); 14] = [
            (APPLY_PACKAGE, "Apply", "ApplyPackage", false),
            (UPDATE_NODE_STATE, "Apply", "UpdateNodeState", false),
            (MARK_COMPLETE, "State", "MarkComplete", false),
            (TRANSITION, "State", "Transition", false),
            (JOB_COMPLETE, "State", "JobComplete", false),
            (JOB_FAILED, "State", "JobFailed", false),
            (INTERRUPT_NODE, "Interrupt", "InterruptNode", false),
            (
                RESTART_LIMIT_EXCEEDED,
                "Interrupt",
                "RestartLimitExceeded",
                true,
            ),
            (DRAIN_NODE, "Drain", "DrainNode", false),
            (DRAIN_TIMEOUT, "Drain", "DrainTimeout", true),
            (REBOOT_RESET, "Reboot", "ResetNodeState", false),
            (DELETION_BLOCKED, "DeletionBlocked", "BlockDelete", true),
            (AUTO_TAINT, "AutoTaint", "TaintNode", true),
            (
                NON_INTERRUPT_PODS_RUNNING,
                "Drain",
                "NonInterruptPodsRunning",
                true,
            ),
        ];
        for (kind, reason, action, warning) in cases {
            assert_eq!(
                (kind.reason, kind.action, kind.warning),
                (reason, action, warning)
            );
        }
    }
}
