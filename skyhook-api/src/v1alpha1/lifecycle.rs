//! Per-package lifecycle values (`Stage`, `State`), the node/Skyhook `Status`, and the
//! `PackageStatus` entry stored in node state.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A string did not name any value of one of the lifecycle enums.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?}: expected one of {}", expected.trim_end_matches(", "))]
pub struct ParseEnumError {
    /// Which enum was being parsed (`stage`, `state`, `status`, `interrupt type`, ...).
    pub kind: &'static str,
    /// The rejected input.
    pub value: String,
    /// The accepted spellings, each followed by `", "`.
    pub expected: &'static str,
}

/// Implements `as_str`, `Display`, `FromStr` and `ALL` for a fieldless enum from one table, so
/// the wire spelling is written exactly once and the serde renames are checked against it by tests.
macro_rules! wire_enum {
    ($ty:ident, $kind:literal, { $($variant:ident => $wire:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in schema order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The spelling used in JSON, annotations, labels and metrics.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $wire),+
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = $crate::v1alpha1::ParseEnumError;

            fn from_str(value: &str) -> Result<Self, Self::Err> {
                match value {
                    $($wire => Ok($ty::$variant),)+
                    _ => Err($crate::v1alpha1::ParseEnumError {
                        kind: $kind,
                        value: value.to_owned(),
                        expected: concat!($($wire, ", "),+),
                    }),
                }
            }
        }
    };
}
pub(crate) use wire_enum;

/// Where a package is in its lifecycle on one node.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum Stage {
    /// First installation of the package (runs `apply` then `apply-check`).
    #[serde(rename = "apply")]
    Apply,
    /// The node is being interrupted (service restart or reboot) on behalf of the package.
    #[serde(rename = "interrupt")]
    Interrupt,
    /// Checks run after the interrupt (`post-interrupt` then `post-interrupt-check`).
    #[serde(rename = "post-interrupt")]
    PostInterrupt,
    /// Configuration from the package `configMap` is applied (`config` then `config-check`).
    #[serde(rename = "config")]
    Config,
    /// The package is being removed (`uninstall` then `uninstall-check`).
    #[serde(rename = "uninstall")]
    Uninstall,
    /// A newer version replaces an installed one (`upgrade` then `upgrade-check`).
    #[serde(rename = "upgrade")]
    Upgrade,
    /// The package's own interrupt after an explicit uninstall (reboot, service restart).
    #[serde(rename = "uninstall-interrupt")]
    UninstallInterrupt,
}

wire_enum!(Stage, "stage", {
    Apply => "apply",
    Interrupt => "interrupt",
    PostInterrupt => "post-interrupt",
    Config => "config",
    Uninstall => "uninstall",
    Upgrade => "upgrade",
    UninstallInterrupt => "uninstall-interrupt",
});

impl Stage {
    /// Whether the stage interrupts the node (service restart, reboot): an install's
    /// `interrupt` or an uninstall's `uninstall-interrupt`.
    pub const fn interrupts_node(self) -> bool {
        matches!(self, Stage::Interrupt | Stage::UninstallInterrupt)
    }
}

/// The outcome of the current stage of a package on one node.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum State {
    /// The stage finished successfully.
    #[serde(rename = "complete")]
    Complete,
    /// A pod for the stage has been launched and has not finished.
    #[serde(rename = "in_progress")]
    InProgress,
    /// The stage was deferred (an interrupt shared with other packages, or an uninstall placeholder).
    #[serde(rename = "skipped")]
    Skipped,
    /// The stage failed; the pod is left in place and retried by the kubelet.
    #[serde(rename = "erroring")]
    Erroring,
    /// Nothing is known about the stage.
    #[serde(rename = "unknown")]
    Unknown,
}

wire_enum!(State, "state", {
    Complete => "complete",
    InProgress => "in_progress",
    Skipped => "skipped",
    Erroring => "erroring",
    Unknown => "unknown",
});

/// The status of a Skyhook as a whole, or of one node for one Skyhook.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum Status {
    /// Not yet evaluated, or the nodes are in a mix of states.
    #[serde(rename = "unknown")]
    Unknown,
    /// Every package is complete (on the node, or on every node).
    #[serde(rename = "complete")]
    Complete,
    /// Work cannot proceed: the node is ignored or has a taint the packages do not tolerate, or the
    /// referenced DeploymentPolicy is missing.
    #[serde(rename = "blocked")]
    Blocked,
    /// Waiting for a higher-priority Skyhook or for a slot in the rollout budget.
    #[serde(rename = "waiting")]
    Waiting,
    /// Disabled with the `skyhook.nvidia.com/disable` annotation; does not block later Skyhooks.
    #[serde(rename = "disabled")]
    Disabled,
    /// Paused with the `skyhook.nvidia.com/pause` annotation; still blocks later Skyhooks.
    #[serde(rename = "paused")]
    Paused,
    /// Packages are being applied.
    #[serde(rename = "in_progress")]
    InProgress,
    /// At least one package stage is failing.
    #[serde(rename = "erroring")]
    Erroring,
}

wire_enum!(Status, "status", {
    Unknown => "unknown",
    Complete => "complete",
    Blocked => "blocked",
    Waiting => "waiting",
    Disabled => "disabled",
    Paused => "paused",
    InProgress => "in_progress",
    Erroring => "erroring",
});

/// The recorded progress of one package version on one node: a value of the node-state
/// annotation `skyhook.nvidia.com/nodeState_<skyhook>` and of `status.nodeState`.
///
/// Field order is the wire order upstream writes; `containerSHA` is omitted when empty and
/// `restarts` when zero, as Go's `omitempty` does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PackageStatus {
    /// Name of the package.
    pub name: String,
    /// Version of the package this entry describes.
    pub version: String,
    /// Image of the package, without a tag.
    pub image: String,
    /// Digest (`sha256:...`) the package image was pulled by, when the package pins one.
    #[serde(
        rename = "containerSHA",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub container_sha: String,
    /// The lifecycle stage the package is in on this node.
    pub stage: Stage,
    /// The outcome of that stage.
    pub state: State,
    /// How many times the container of the last stage restarted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restarts: i32,
}

// serde's `skip_serializing_if` hands over a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn is_zero(value: &i32) -> bool {
    *value == 0
}
