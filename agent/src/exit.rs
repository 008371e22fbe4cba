//! The agent's exit codes: upstream's three. The richer reason of a failure is in the error
//! message and the `failure` field of the last log line, not in the code, because the operator
//! (ours and upstream's) reads only zero against non-zero.

/// How the agent exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The stage or interrupt succeeded; an unsupported mode was skipped; `validate` found no
    /// errors.
    Success,
    /// A step, a check or an interrupt command failed, the package is invalid, the host refused
    /// something, or SIGTERM stopped the run; `validate` found errors.
    Failure,
    /// Malformed arguments: their number, a relative root mount or copy dir, empty interrupt
    /// data, interrupt data given to another mode.
    Usage,
}

impl Exit {
    pub const ALL: [Exit; 3] = [Exit::Success, Exit::Failure, Exit::Usage];

    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
        }
    }

    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Success => {
                "success; an unsupported mode is skipped with a warning (validate: no errors)"
            }
            Exit::Failure => {
                "failure or runtime error: a step, check or interrupt command failed, invalid package, host error, stopped by SIGTERM (validate: errors found); the log says which"
            }
            Exit::Usage => {
                "malformed arguments: wrong number, relative ROOT_MOUNT or COPY_DIR, empty or misplaced INTERRUPT_DATA"
            }
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
    fn codes_are_upstreams_three() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [0, 1, 2]);
        assert!(Exit::table().contains("  2  malformed arguments"));
    }
}
