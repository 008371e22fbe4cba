//! An in-memory [`Host`] for tests: a file map, scripted command outcomes and a SIGTERM switch.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use jiff::Zoned;
use jiff::tz::TimeZone;

use crate::host::{CommandOutcome, CommandSpec, FsChange, Host, HostError};
use crate::layout::under_root;

#[derive(Debug)]
pub struct FakeHost {
    pub files: BTreeMap<PathBuf, Vec<u8>>,
    pub dirs: BTreeSet<PathBuf>,
    /// Every command run, in order.
    pub commands: Vec<CommandSpec>,
    /// Every change applied, in order.
    pub changes: Vec<FsChange>,
    /// Outcomes handed to the next commands; exit code 0 once empty.
    pub outcomes: VecDeque<CommandOutcome>,
    /// SIGTERM arrives while the command with this index (0-based) runs.
    pub sigterm_during_command: Option<usize>,
    pub terminated: bool,
    /// SIGTERM arrives while the agent waits for the host to restart after `reboot`.
    pub sigterm_while_waiting: bool,
    /// Every wait for SIGTERM, in order.
    pub waits: Vec<std::time::Duration>,
    pub now: Zoned,
}

impl Default for FakeHost {
    fn default() -> Self {
        FakeHost {
            files: BTreeMap::new(),
            dirs: BTreeSet::new(),
            commands: Vec::new(),
            changes: Vec::new(),
            outcomes: VecDeque::new(),
            sigterm_during_command: None,
            terminated: false,
            sigterm_while_waiting: false,
            waits: Vec::new(),
            now: "2025-06-01T12:00:00.25Z"
                .parse::<jiff::Timestamp>()
                .map(|t| t.to_zoned(TimeZone::UTC))
                .unwrap_or_default(),
        }
    }
}

impl FakeHost {
    pub fn add_file(&mut self, path: impl Into<PathBuf>, contents: impl AsRef<[u8]>) {
        self.files.insert(path.into(), contents.as_ref().to_vec());
    }

    pub fn text(&self, path: impl AsRef<Path>) -> Option<String> {
        self.files
            .get(path.as_ref())
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
    }

    pub fn exit_with(&mut self, codes: &[i32]) {
        self.outcomes
            .extend(codes.iter().map(|code| CommandOutcome { code: *code }));
    }

    /// The first argument of each command run (the script or program).
    pub fn programs(&self) -> Vec<String> {
        self.commands
            .iter()
            .map(|c| c.argv.first().cloned().unwrap_or_default())
            .collect()
    }

    fn copy_prefix(&mut self, from: &Path, to: &Path) {
        let copies: Vec<(PathBuf, Vec<u8>)> = self
            .files
            .iter()
            .filter_map(|(path, contents)| {
                let relative = path.strip_prefix(from).ok()?;
                let target = if relative.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(relative)
                };
                Some((target, contents.clone()))
            })
            .collect();
        self.files.extend(copies);
    }
}

impl Host for FakeHost {
    fn exists(&self, path: &Path) -> bool {
        self.files.contains_key(path)
            || self.dirs.contains(path)
            || self.files.keys().any(|file| file.starts_with(path))
    }

    fn read(&self, path: &Path) -> Result<Option<Vec<u8>>, HostError> {
        Ok(self.files.get(path).cloned())
    }

    fn apply(&mut self, change: &FsChange) -> Result<(), HostError> {
        self.changes.push(change.clone());
        match change {
            FsChange::WriteFile { path, contents } => {
                self.files.insert(path.clone(), contents.clone());
            }
            FsChange::RemoveFile { path } => {
                self.files.remove(path);
            }
            FsChange::Rename { from, to } => {
                if let Some(contents) = self.files.remove(from) {
                    self.files.insert(to.clone(), contents);
                }
            }
            FsChange::CreateDir { path } => {
                self.dirs.insert(path.clone());
            }
            FsChange::CopyTree { from, root, dest } | FsChange::CopyFile { from, root, dest } => {
                let to = under_root(root, dest);
                self.copy_prefix(from, &to);
            }
        }
        Ok(())
    }

    fn run(&mut self, command: &CommandSpec) -> Result<CommandOutcome, HostError> {
        let index = self.commands.len();
        self.commands.push(command.clone());
        let outcome = self
            .outcomes
            .pop_front()
            .unwrap_or(CommandOutcome { code: 0 });
        if self.sigterm_during_command == Some(index) {
            self.terminated = true;
        }
        Ok(outcome)
    }

    fn terminate_requested(&self) -> bool {
        self.terminated
    }

    fn wait_for_sigterm(&mut self, timeout: std::time::Duration) -> bool {
        self.waits.push(timeout);
        if self.sigterm_while_waiting {
            self.terminated = true;
        }
        self.terminated
    }

    fn now(&self) -> Zoned {
        self.now.clone()
    }
}
