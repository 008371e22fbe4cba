//! Supervised control-plane processes: one process group each, output in a log file, stopped with
//! SIGTERM and then SIGKILL.
//!
//! If the supervising process dies without cleaning up, the children must not outlive it: the
//! binary asks the kernel for SIGKILL on its parent's death when `DEVCLUSTER_PARENT_PID` is set
//! (see `controlplane/parent.go`). The parent-death signal follows the *thread* that spawned the
//! child, so spawn from a thread that lives as long as the cluster (never a blocking-pool thread).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Tells the control-plane binary which process to follow (see the module docs).
pub const PARENT_PID_ENV: &str = "DEVCLUSTER_PARENT_PID";

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("opening the log file {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("starting {name} ({binary}): {source}")]
    Spawn {
        name: String,
        binary: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug)]
pub struct Supervised {
    name: String,
    pid: u32,
    log: PathBuf,
    child: tokio::process::Child,
}

impl Supervised {
    /// Starts `binary args...` as `name`, appending its stdout and stderr to `log`.
    pub fn spawn(
        name: &str,
        binary: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<Self, ProcessError> {
        let open_log = || {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|source| ProcessError::Log {
                    path: log.to_path_buf(),
                    source,
                })
        };
        let child = tokio::process::Command::new(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(open_log()?)
            .stderr(open_log()?)
            .env(PARENT_PID_ENV, std::process::id().to_string())
            // Its own group: a terminal's Ctrl-C reaches only us, and we decide how children stop.
            .process_group(0)
            // Error paths drop processes half-started; never leave one running.
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| ProcessError::Spawn {
                name: name.to_string(),
                binary: binary.to_path_buf(),
                source,
            })?;
        let pid = child.id().unwrap_or_default();
        tracing::debug!(process = name, pid, log = %log.display(), "started");
        Ok(Self {
            name: name.to_string(),
            pid,
            log: log.to_path_buf(),
            child,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The exit status if the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM to the process group, then SIGKILL after `grace`; returns once it has exited.
    pub async fn stop(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        signal_group(self.pid, Signal::SIGTERM);
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(_) => tracing::debug!(process = %self.name, pid = self.pid, "stopped"),
            Err(_) => {
                tracing::warn!(process = %self.name, pid = self.pid, ?grace, "did not stop on SIGTERM, killing");
                signal_group(self.pid, Signal::SIGKILL);
                // The group is gone after SIGKILL; a failed wait means it was reaped already.
                let _reaped = self.child.wait().await;
            }
        }
    }
}

/// Signals the process group led by `pid`; a group that no longer exists is not an error.
pub fn signal_group(pid: u32, signal: Signal) {
    let Ok(raw) = i32::try_from(pid) else { return };
    if raw <= 1 {
        return;
    }
    if let Err(error) = killpg(Pid::from_raw(raw), signal) {
        tracing::debug!(pid, ?signal, %error, "signalling process group");
    }
}

/// Whether `pid` names a live (not zombie) process.
pub fn is_alive(pid: u32) -> bool {
    !matches!(process_state(pid), None | Some('Z' | 'X'))
}

/// Whether `pid` is frozen by SIGSTOP (see `devcluster component pause`).
pub fn is_stopped(pid: u32) -> bool {
    process_state(pid) == Some('T')
}

/// The state letter of `/proc/<pid>/stat` (R, S, T, Z, ...), `None` when there is no such process.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state letter follows the parenthesised command name, which may itself contain ") ".
    stat.rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next())
}

/// SIGTERM to the process group of `pid` (a background process started by an earlier command,
/// so not our child), then SIGKILL once `grace` has passed while it still runs `needle`.
pub fn stop_process(pid: u32, needle: &str, grace: Duration) {
    signal_group(pid, Signal::SIGTERM);
    let started = std::time::Instant::now();
    while is_alive_running(pid, needle) {
        if started.elapsed() > grace {
            signal_group(pid, Signal::SIGKILL);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A background process's record (pid, ports, log) read back from `path`; `None` when it is
/// missing or unreadable, which callers treat as "not running".
pub fn read_record<R: serde::de::DeserializeOwned>(path: &Path) -> Option<R> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes a background process's record to `path` as pretty JSON.
pub fn write_record(path: &Path, record: &impl serde::Serialize) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(record).map_err(std::io::Error::other)?;
    std::fs::write(path, text)
}

/// Whether `pid` is a live process whose command line contains `needle` (so a recycled pid is
/// never mistaken for one of ours).
pub fn is_alive_running(pid: u32, needle: &str) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    is_alive(pid) && String::from_utf8_lossy(&cmdline).contains(needle)
}

/// The last `lines` lines of a log file, for error messages.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_goes_to_the_log_and_stop_ends_the_group()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("sh.log");
        let script = "echo started; sleep 600 & wait";
        let mut process = Supervised::spawn(
            "sh",
            Path::new("/bin/sh"),
            &["-c".into(), script.into()],
            &log,
        )?;
        let pid = i32::try_from(process.pid())?;

        // Wait for the output rather than sleeping a fixed time.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while log_tail(&log, 1) != "started" {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no output in {log:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        process.stop(Duration::from_secs(30)).await;
        assert!(process.exited().is_some());
        // The background `sleep` was in the same group and got the signal too; once orphaned it
        // is reaped by init, which may take a moment.
        while killpg(Pid::from_raw(pid), None::<Signal>).is_ok() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "process group {pid} still has members"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    #[test]
    fn liveness_of_processes() {
        let me = std::process::id();
        assert!(is_alive(me));
        assert!(
            is_alive_running(me, "devcluster"),
            "test binaries are named after the crate"
        );
        assert!(!is_alive_running(me, "no-such-program-name"));
        assert!(!is_alive(u32::MAX));
        assert!(!is_stopped(me));
        assert!(!is_stopped(u32::MAX));
    }

    #[test]
    fn log_tail_keeps_the_last_lines() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("x.log");
        std::fs::write(&path, "1\n2\n3\n")?;
        let cases = [(0, ""), (2, "2\n3"), (5, "1\n2\n3")];
        for (lines, expected) in cases {
            assert_eq!(log_tail(&path, lines), expected, "{lines} lines");
        }
        assert_eq!(log_tail(&dir.path().join("missing"), 3), "");
        Ok(())
    }
}
