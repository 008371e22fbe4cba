//! Explicit uninstall (`packages.<p>.uninstall`) and the controller-wide uninstall mode.
//!
//! Terms, as upstream's newest release defines them:
//! - *requested*: `uninstall.enabled && uninstall.apply`, or the Skyhook is being deleted and
//!   `enabled` is true ([`crate::v1alpha1::Package::uninstall_requested`]);
//! - *in cycle* on a node: the entry of the spec version is at stage `uninstall` or
//!   `uninstall-interrupt`, in any state;
//! - *uninstalled* on a node: the spec version has no entry there.

use std::fmt;
use std::str::FromStr;

use crate::node_state::NodeState;
use crate::v1alpha1::{Package, PackageStatus, Stage};

/// What removing a package from the spec, or lowering its version, does. One setting for the
/// whole controller (`UNINSTALL_MODE`, `--uninstall-mode`, chart value `uninstallMode`). The
/// `uninstall` block works the same in both modes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum UninstallMode {
    /// Removing a package or downgrading its version runs the old version's `uninstall` stage
    /// (what the original Skyhook did, and what our seed documents promise).
    #[default]
    Legacy,
    /// Upstream's newest behaviour: removal and downgrade never uninstall; the old entries stay
    /// in the node state as markers until the node is reset. Only `uninstall.apply` (or
    /// deleting the Skyhook) uninstalls.
    Explicit,
}

impl UninstallMode {
    /// The value as written in the flag, the environment and the chart.
    pub const fn as_str(self) -> &'static str {
        match self {
            UninstallMode::Legacy => "legacy",
            UninstallMode::Explicit => "explicit",
        }
    }
}

impl fmt::Display for UninstallMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An uninstall mode that is neither `legacy` nor `explicit`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("uninstall mode {0:?} is not known: use `legacy` (the default) or `explicit`")]
pub struct UnknownUninstallMode(pub String);

impl FromStr for UninstallMode {
    type Err = UnknownUninstallMode;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "legacy" => Ok(UninstallMode::Legacy),
            "explicit" => Ok(UninstallMode::Explicit),
            other => Err(UnknownUninstallMode(other.to_owned())),
        }
    }
}

/// Whether `stage` belongs to the explicit uninstall cycle.
pub const fn in_cycle_stage(stage: Stage) -> bool {
    matches!(stage, Stage::Uninstall | Stage::UninstallInterrupt)
}

/// The entry of `package`'s spec version on a node when it is in its uninstall cycle.
pub fn in_cycle<'a>(state: &'a NodeState, package: &Package) -> Option<&'a PackageStatus> {
    state
        .get_version(&package.name, &package.version)
        .filter(|entry| in_cycle_stage(entry.stage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for mode in [UninstallMode::Legacy, UninstallMode::Explicit] {
            assert_eq!(mode.as_str().parse::<UninstallMode>(), Ok(mode));
        }
        assert_eq!(UninstallMode::default(), UninstallMode::Legacy);
        let error = "Explicit".parse::<UninstallMode>().unwrap_err();
        assert!(error.to_string().contains("use `legacy`"), "{error}");
    }
}
