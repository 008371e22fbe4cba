//! The real [`Host`]: the file system through `std::fs`, commands through the chroot helper on
//! a small tokio runtime, and SIGTERM recorded instead of killing the agent.

pub mod chroot;
mod fs;
mod process;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jiff::Zoned;

use crate::host::{CommandOutcome, CommandSpec, FsChange, Host, HostError};

#[derive(Debug)]
pub struct RealHost {
    runtime: tokio::runtime::Runtime,
    terminated: Arc<AtomicBool>,
    /// This executable, re-run as the chroot helper.
    helper: PathBuf,
}

/// How much command output is read at a time; output is streamed line by line whatever the
/// size (`SKYHOOK_AGENT_BUFFER_LIMIT` is ignored, as upstream's Go agent ignores it).
const READ_CHUNK: usize = 8192;

/// How often [`RealHost::wait_for_sigterm`] looks at the SIGTERM flag.
const SIGTERM_POLL: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("failed to start the agent's runtime")]
    Runtime(#[source] std::io::Error),
    #[error("failed to install the SIGTERM handler")]
    Signal(#[source] std::io::Error),
    #[error("failed to find the agent's own executable (needed to run steps chrooted)")]
    Executable(#[source] std::io::Error),
}

impl RealHost {
    /// Starts the runtime and takes over SIGTERM: from now on it only sets a flag, so the agent
    /// stops after the current step instead of dying in the middle of it. The flag is set in
    /// the signal handler itself, so a SIGTERM sent before a command exits (the shutdown that
    /// a `reboot` starts) is visible by the time the agent sees that exit.
    pub fn new() -> Result<Self, StartError> {
        let terminated = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&terminated))
            .map_err(StartError::Signal)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StartError::Runtime)?;
        let helper = std::env::current_exe().map_err(StartError::Executable)?;
        Ok(RealHost {
            runtime,
            terminated,
            helper,
        })
    }
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> HostError {
    HostError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

impl Host for RealHost {
    fn exists(&self, path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }

    fn read(&self, path: &Path) -> Result<Option<Vec<u8>>, HostError> {
        match std::fs::read(path) {
            Ok(contents) => Ok(Some(contents)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(io("read", path, err)),
        }
    }

    fn apply(&mut self, change: &FsChange) -> Result<(), HostError> {
        match change {
            FsChange::WriteFile { path, contents } => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|err| io("create directory", parent, err))?;
                }
                std::fs::write(path, contents).map_err(|err| io("write", path, err))
            }
            FsChange::RemoveFile { path } => {
                fs::remove_if_present(path).map_err(|err| io("remove", path, err))
            }
            FsChange::Rename { from, to } => {
                std::fs::rename(from, to).map_err(|err| io("rename", from, err))
            }
            FsChange::CreateDir { path } => {
                std::fs::create_dir_all(path).map_err(|err| io("create directory", path, err))
            }
            FsChange::CopyTree { from, root, dest } => fs::copy_tree(from, root, Path::new(dest))
                .map_err(|err| io("copy the tree", from, err)),
            FsChange::CopyFile { from, root, dest } => {
                fs::copy_file(from, root, Path::new(dest)).map_err(|err| io("copy", from, err))
            }
        }
    }

    fn run(&mut self, command: &CommandSpec) -> Result<CommandOutcome, HostError> {
        let code = self
            .runtime
            .block_on(process::run(command, &self.helper, READ_CHUNK))?;
        Ok(CommandOutcome { code })
    }

    fn terminate_requested(&self) -> bool {
        self.terminated.load(Ordering::SeqCst)
    }

    fn wait_for_sigterm(&mut self, timeout: Duration) -> bool {
        // The flag is set by the signal handler; a short poll keeps this free of another
        // signal-handling path.
        let deadline = Instant::now() + timeout;
        while !self.terminate_requested() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            std::thread::sleep(left.min(SIGTERM_POLL));
        }
        true
    }

    fn now(&self) -> Zoned {
        Zoned::now()
    }
}
