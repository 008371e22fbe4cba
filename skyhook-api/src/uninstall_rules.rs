//! What the stage rules need to know about uninstalling, below both the stage machine and the
//! explicit uninstall requests: the controller-wide uninstall mode, whether the Skyhook is being
//! deleted, and which stages make up an uninstall cycle.

use std::fmt;
use std::str::FromStr;

use crate::v1alpha1::Stage;

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

/// What the stage rules need to know besides the packages: the controller's mode and whether
/// the Skyhook is being deleted (which requests the uninstall of every `enabled` package).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UninstallRules {
    pub mode: UninstallMode,
    pub deleting: bool,
}

/// Whether `stage` belongs to the explicit uninstall cycle.
pub const fn in_cycle_stage(stage: Stage) -> bool {
    matches!(stage, Stage::Uninstall | Stage::UninstallInterrupt)
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
