//! The small interface between the agent's decisions and the machine: file changes, one
//! command runner, the clock and the SIGTERM flag. `execute::RealHost` implements it on the
//! real host; tests use an in-memory fake.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jiff::Zoned;

use crate::layout::LogTarget;

/// A change to the host file system. Paths are as the agent sees them (under the root mount).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsChange {
    /// Write a whole file, creating its parent directories.
    WriteFile { path: PathBuf, contents: Vec<u8> },
    /// Remove a file; a missing file is not an error.
    RemoveFile { path: PathBuf },
    /// Rename a file (corrupt history to `.backup`).
    Rename { from: PathBuf, to: PathBuf },
    /// Create a directory and its parents.
    CreateDir { path: PathBuf },
    /// Merge the tree at `from` into `dest` inside the host root `root`: directories are
    /// merged, files replaced, symlinks recreated. Symlinks already on the host are resolved
    /// inside `root`, never in the agent's own file system.
    CopyTree {
        from: PathBuf,
        root: PathBuf,
        dest: String,
    },
    /// Copy one file to `dest` inside the host root `root` (resolving symlinks inside `root`).
    CopyFile {
        from: PathBuf,
        root: PathBuf,
        dest: String,
    },
}

/// A command to run chrooted into the host root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// The directory to chroot into (the root mount).
    pub root: PathBuf,
    /// The working directory inside the chroot.
    pub cwd: String,
    /// The program (a path inside the chroot, or a name looked up on the host's PATH) and its
    /// arguments.
    pub argv: Vec<String>,
    /// Variables layered over the container and chroot environments (step env, `SKYHOOK_DIR`,
    /// `STEP_ROOT`, upgrade versions).
    pub env: BTreeMap<String, String>,
    /// `chmod +x` the program first (steps yes, interrupt commands no).
    pub make_executable: bool,
    /// Print the command line before its output (interrupt commands).
    pub echo_command: bool,
    /// Where to keep the output; `None` streams it only.
    pub log: Option<LogTarget>,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandOutcome {
    /// The exit code; `-N` when the command was killed by signal N (Python's convention).
    pub code: i32,
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("failed to {action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to run {program} chrooted into {root}")]
    Spawn {
        program: String,
        root: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Everything the agent does to a host goes through this trait.
pub trait Host {
    fn exists(&self, path: &std::path::Path) -> bool;
    /// The contents of a file, or `None` when it does not exist.
    fn read(&self, path: &std::path::Path) -> Result<Option<Vec<u8>>, HostError>;
    fn apply(&mut self, change: &FsChange) -> Result<(), HostError>;
    /// Runs a command to completion, streaming its output.
    fn run(&mut self, command: &CommandSpec) -> Result<CommandOutcome, HostError>;
    /// Whether SIGTERM has been received.
    fn terminate_requested(&self) -> bool;
    /// Waits up to `timeout` for SIGTERM; returns whether it arrived (at once when it already
    /// had). Used after `reboot` returned, while the host is expected to go down.
    fn wait_for_sigterm(&mut self, timeout: std::time::Duration) -> bool;
    fn now(&self) -> Zoned;
}
