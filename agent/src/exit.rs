//! The agent's exit codes. Upstream exits 1 for every failure; the operator treats any
//! non-zero code as failure, so distinct codes only add information.

/// Why the agent exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success,
    /// A step of a non-check mode, or an interrupt command, failed.
    StepFailed,
    /// The command line or an environment variable is wrong.
    Usage,
    /// A check mode ran and at least one check failed.
    CheckFailed,
    /// config.json, a step script or an expected configMap file is wrong or missing.
    InvalidPackage,
    /// SIGTERM stopped the run (or a reboot the interrupt started is underway).
    Interrupted,
    /// The host file system or process table refused something (disk full, permissions).
    HostError,
}

impl Exit {
    pub const ALL: [Exit; 7] = [
        Exit::Success,
        Exit::StepFailed,
        Exit::Usage,
        Exit::CheckFailed,
        Exit::InvalidPackage,
        Exit::Interrupted,
        Exit::HostError,
    ];

    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::StepFailed => 1,
            Exit::Usage => 2,
            Exit::CheckFailed => 3,
            Exit::InvalidPackage => 4,
            Exit::Interrupted => 5,
            Exit::HostError => 6,
        }
    }

    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Success => "success (validate: no errors)",
            Exit::StepFailed => "a step or an interrupt command failed",
            Exit::Usage => "usage error: unknown mode, wrong arguments, bad environment variable",
            Exit::CheckFailed => "a check failed (check modes)",
            Exit::InvalidPackage => {
                "invalid package: config.json, a step script or an expected configMap file"
            }
            Exit::Interrupted => {
                "stopped by SIGTERM (or the reboot the interrupt started is underway)"
            }
            Exit::HostError => "the host refused a file or process operation",
        }
    }

    /// The table printed by `--help`.
    pub fn table() -> String {
        Exit::ALL
            .iter()
            .map(|exit| format!("  {}  {}", exit.code(), exit.meaning()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct() {
        let mut codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Exit::ALL.len());
        assert!(Exit::table().contains("  3  a check failed"));
    }
}
