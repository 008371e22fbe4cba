//! Where a command writes, and the confirmation prompt.

use std::io::{BufRead, Write};

use crate::cli::GlobalArgs;
use crate::output::{View, render};

use super::RunError;

/// Where the command writes and how.
pub struct Console<'io> {
    /// Standard output.
    pub out: &'io mut dyn Write,
    /// Standard input, for confirmations.
    pub input: &'io mut dyn BufRead,
    /// Whether to colour tables (stdout is a terminal).
    pub colour: bool,
}

impl std::fmt::Debug for Console<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("colour", &self.colour)
            .finish_non_exhaustive()
    }
}

impl Console<'_> {
    pub(super) fn print(&mut self, text: &str) -> Result<(), RunError> {
        self.out
            .write_all(text.as_bytes())
            .map_err(|source| RunError::Terminal { source })
    }

    pub(super) fn line(&mut self, line: &str) -> Result<(), RunError> {
        self.print(&format!("{line}\n"))
    }

    pub(super) fn show(&mut self, view: &impl View, global: &GlobalArgs) -> Result<(), RunError> {
        let text = render(view, global.output, self.colour)?;
        self.print(&text)
    }

    /// Asks `Continue? [y/N]:`; `y` or `yes` proceeds.
    pub(super) fn confirm(&mut self) -> Result<bool, RunError> {
        self.print("Continue? [y/N]: ")?;
        self.out
            .flush()
            .map_err(|source| RunError::Terminal { source })?;
        let mut answer = String::new();
        self.input
            .read_line(&mut answer)
            .map_err(|source| RunError::Terminal { source })?;
        Ok(matches!(
            answer.trim().to_ascii_lowercase().as_str(),
            "y" | "yes"
        ))
    }
}
