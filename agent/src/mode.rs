//! The stages (upstream calls them modes) the agent can run.

use std::fmt;

/// One agent mode, spelled exactly as on the upstream command line and in `config.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    Apply,
    ApplyCheck,
    Config,
    ConfigCheck,
    Interrupt,
    PostInterrupt,
    PostInterruptCheck,
    Uninstall,
    UninstallCheck,
    Upgrade,
    UpgradeCheck,
}

impl Mode {
    /// Every mode the command line accepts, in the order the help lists them.
    pub const ALL: [Mode; 11] = [
        Mode::Apply,
        Mode::ApplyCheck,
        Mode::Config,
        Mode::ConfigCheck,
        Mode::Upgrade,
        Mode::UpgradeCheck,
        Mode::Uninstall,
        Mode::UninstallCheck,
        Mode::PostInterrupt,
        Mode::PostInterruptCheck,
        Mode::Interrupt,
    ];

    /// The modes that may hold steps in `config.json` (everything but `interrupt`).
    pub const STEP_MODES: [Mode; 10] = [
        Mode::Apply,
        Mode::ApplyCheck,
        Mode::Config,
        Mode::ConfigCheck,
        Mode::PostInterrupt,
        Mode::PostInterruptCheck,
        Mode::Uninstall,
        Mode::UninstallCheck,
        Mode::Upgrade,
        Mode::UpgradeCheck,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Apply => "apply",
            Mode::ApplyCheck => "apply-check",
            Mode::Config => "config",
            Mode::ConfigCheck => "config-check",
            Mode::Interrupt => "interrupt",
            Mode::PostInterrupt => "post-interrupt",
            Mode::PostInterruptCheck => "post-interrupt-check",
            Mode::Uninstall => "uninstall",
            Mode::UninstallCheck => "uninstall-check",
            Mode::Upgrade => "upgrade",
            Mode::UpgradeCheck => "upgrade-check",
        }
    }

    pub fn parse(text: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|mode| mode.as_str() == text)
    }

    /// The comma-separated list used in error messages.
    pub fn valid_list() -> String {
        Mode::ALL.map(Mode::as_str).join(", ")
    }

    pub fn is_check(self) -> bool {
        self.checked_mode().is_some()
    }

    /// For a check mode, the mode whose work it verifies.
    pub fn checked_mode(self) -> Option<Mode> {
        match self {
            Mode::ApplyCheck => Some(Mode::Apply),
            Mode::ConfigCheck => Some(Mode::Config),
            Mode::PostInterruptCheck => Some(Mode::PostInterrupt),
            Mode::UninstallCheck => Some(Mode::Uninstall),
            Mode::UpgradeCheck => Some(Mode::Upgrade),
            _ => None,
        }
    }

    /// For a mode that does work, the check mode that verifies it.
    pub fn check_mode(self) -> Option<Mode> {
        match self {
            Mode::Apply => Some(Mode::ApplyCheck),
            Mode::Config => Some(Mode::ConfigCheck),
            Mode::PostInterrupt => Some(Mode::PostInterruptCheck),
            Mode::Uninstall => Some(Mode::UninstallCheck),
            Mode::Upgrade => Some(Mode::UpgradeCheck),
            _ => None,
        }
    }

    /// Uninstall modes leave the host alone: no `root_dir` overlay, no configMap requirement.
    pub fn is_uninstall(self) -> bool {
        matches!(self, Mode::Uninstall | Mode::UninstallCheck)
    }

    pub fn is_upgrade(self) -> bool {
        matches!(self, Mode::Upgrade | Mode::UpgradeCheck)
    }

    /// Modes whose steps re-run even when their completion flag exists.
    pub fn always_reruns(self) -> bool {
        matches!(self, Mode::Config | Mode::Uninstall | Mode::Upgrade)
    }

    /// Check modes whose success records the package version in the history file.
    pub fn records_history(self) -> bool {
        matches!(
            self,
            Mode::ApplyCheck | Mode::UpgradeCheck | Mode::UninstallCheck
        )
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_round_trips_through_its_name() {
        for mode in Mode::ALL {
            assert_eq!(Mode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(Mode::parse("Apply"), None);
        assert_eq!(Mode::parse("apply_check"), None);
    }

    #[test]
    fn check_pairs_are_symmetric() {
        for mode in Mode::STEP_MODES {
            if let Some(check) = mode.check_mode() {
                assert_eq!(check.checked_mode(), Some(mode));
                assert!(check.is_check());
                assert!(!mode.is_check());
            }
        }
        assert_eq!(Mode::Interrupt.check_mode(), None);
        assert!(!Mode::Interrupt.is_check());
    }

    #[test]
    fn rerun_and_history_rules_match_upstream() {
        let rerun: Vec<_> = Mode::ALL
            .into_iter()
            .filter(|m| m.always_reruns())
            .collect();
        assert_eq!(rerun, [Mode::Config, Mode::Upgrade, Mode::Uninstall]);
        let history: Vec<_> = Mode::ALL
            .into_iter()
            .filter(|m| m.records_history())
            .collect();
        assert_eq!(
            history,
            [Mode::ApplyCheck, Mode::UpgradeCheck, Mode::UninstallCheck]
        );
    }
}
