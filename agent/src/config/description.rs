//! The typed package description a `config.json` is read into: its modes and their steps. A
//! leaf below the loading passes, so the semantic rules can read the description that loading
//! builds.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::mode::Mode;
use crate::problem::Location;

/// A package's `config.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageConfig {
    pub package_name: String,
    pub package_version: String,
    pub expected_config_files: Vec<String>,
    /// Every mode key present in the file, including ones with an empty step list.
    pub modes: BTreeMap<Mode, Vec<Step>>,
}

/// One step of a mode.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Step {
    pub name: String,
    pub path: String,
    pub arguments: Vec<String>,
    pub returncodes: Vec<i64>,
    /// Ignored: every step runs chrooted on the host (as upstream).
    pub on_host: bool,
    /// `true`: the script manages its own idempotence and runs every time.
    pub idempotence: bool,
    pub upgrade_step: bool,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl PackageConfig {
    pub fn steps(&self, mode: Mode) -> &[Step] {
        self.modes.get(&mode).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every step of every mode, with its mode and index.
    pub fn all_steps(&self) -> impl Iterator<Item = (Mode, usize, &Step)> {
        self.modes
            .iter()
            .flat_map(|(mode, steps)| steps.iter().enumerate().map(|(i, s)| (*mode, i, s)))
    }
}

impl Step {
    pub fn location(&self, mode: Mode, index: usize, field: Option<&str>) -> Location {
        Location::Step {
            mode,
            index,
            name: Some(self.name.clone()),
            field: field.map(str::to_string),
        }
    }
}
