//! Supervised control-plane processes: one process group each, output in a log file, stopped with
//! SIGTERM and then SIGKILL. Also the one way to stop a process started by an earlier command and
//! found through its record ([`stop_process`], which never signals a recycled pid) or one of our
//! own children ([`stop_child`]); the daemon, `down` and the extensions' installers use them.
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

/// Whom a signal for `pid` reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalTarget {
    /// The process group `pid` leads (a process started in a group of its own), so its children
    /// get the signal too.
    Group,
    /// `pid` alone: it stops its own children (the devcluster daemon), or it leads no group.
    Process,
}

/// Signals `pid` or its group; a process or group that no longer exists is not an error, and pids
/// that are not above 1 (which `kill` reads as "every process" or "my group") are ignored.
pub fn signal(pid: u32, target: SignalTarget, signal: Signal) {
    let Ok(raw) = i32::try_from(pid) else { return };
    if raw <= 1 {
        return;
    }
    let sent = match target {
        SignalTarget::Group => killpg(Pid::from_raw(raw), signal),
        SignalTarget::Process => nix::sys::signal::kill(Pid::from_raw(raw), signal),
    };
    if let Err(error) = sent {
        tracing::debug!(pid, ?target, ?signal, %error, "signalling");
    }
}

/// Signals the process group led by `pid`; a group that no longer exists is not an error.
pub fn signal_group(pid: u32, signal: Signal) {
    self::signal(pid, SignalTarget::Group, signal);
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
/// `/proc/<id>` also answers for the id of a thread, which a recorded pid may have become: that is
/// no process of ours either.
fn process_state(pid: u32) -> Option<char> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let leader = status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|tgid| tgid.trim().parse::<u32>().ok());
    if leader != Some(pid) {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state letter follows the parenthesised command name, which may itself contain ") ".
    stat.rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next())
}

/// How a stop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// There was nothing to stop (no such process, or its pid now belongs to another program).
    NotRunning,
    /// It exited within the grace period after SIGTERM.
    Terminated,
    /// It still ran when the grace period was over and got SIGKILL.
    Killed,
}

/// Stops `pid`, a background process started by an earlier command (so not our child): SIGTERM
/// to it or its group (`target`), then SIGKILL once `grace` has passed while it still runs.
/// "It" is a live process whose command line contains `needle`: a recorded pid may have been
/// recycled by another program, which is never signalled. Returns once it has exited.
pub fn stop_process(pid: u32, needle: &str, target: SignalTarget, grace: Duration) -> Stopped {
    if !is_alive_running(pid, needle) {
        return Stopped::NotRunning;
    }
    terminate_then_kill(pid, target, grace, || is_alive_running(pid, needle))
}

/// Stops our own child `child`, started in a process group of its own, as [`stop_process`] stops
/// a recorded one, and reaps it. (Until reaped, its pid cannot be recycled.)
pub fn stop_child(child: &mut std::process::Child, grace: Duration) -> Stopped {
    let running = |child: &mut std::process::Child| matches!(child.try_wait(), Ok(None));
    if !running(child) {
        return Stopped::NotRunning;
    }
    let stopped = terminate_then_kill(child.id(), SignalTarget::Group, grace, || running(child));
    // Gone after SIGKILL or already reaped by `try_wait`; a failed wait has nothing left to reap.
    let _reaped = child.wait();
    stopped
}

/// SIGTERM, then SIGKILL once `grace` has passed while `still_running` says so; returns once
/// `still_running` says it is gone.
fn terminate_then_kill(
    pid: u32,
    target: SignalTarget,
    grace: Duration,
    mut still_running: impl FnMut() -> bool,
) -> Stopped {
    signal(pid, target, Signal::SIGTERM);
    let started = std::time::Instant::now();
    let mut stopped = Stopped::Terminated;
    while still_running() {
        if stopped == Stopped::Terminated && started.elapsed() > grace {
            signal(pid, target, Signal::SIGKILL);
            stopped = Stopped::Killed;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    stopped
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

/// The last `lines` lines of a log file, for error messages. A Rust program that exits with an
/// error under `RUST_BACKTRACE` ends its output with a stack backtrace, dozens of frames that
/// would push the error itself out of the tail: the lines before the last backtrace are kept.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    let end = all
        .iter()
        .rposition(|line| line.trim() == "Stack backtrace:")
        .unwrap_or(all.len());
    let before = all[..end]
        .iter()
        .rposition(|line| !line.trim().is_empty())
        .map_or(0, |last| last + 1);
    let shown = if end == all.len() { all.len() } else { before };
    all[shown.saturating_sub(lines)..shown].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded pid recycled as the id of some process's thread is not a live process.
    #[test]
    fn a_thread_id_is_not_a_live_process() {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let _ = tid_tx.send(nix::unistd::gettid().as_raw());
            let _ = done_rx.recv();
        });
        let tid = tid_rx.recv().map(|tid| tid as u32).unwrap_or_default();
        assert!(tid > 0 && tid != std::process::id());
        assert!(std::path::Path::new(&format!("/proc/{tid}/stat")).exists());
        assert!(!is_alive(tid), "thread {tid} taken for a process");
        assert!(is_alive(std::process::id()));
        let _ = done_tx.send(());
        let _ = thread.join();
    }

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

    /// A shell waiting for `sleep 600`, in a process group of its own; with `ignore_term`, both
    /// ignore SIGTERM. Returns once both run. (No `exec sleep`: while a process execs, its
    /// command line can read empty.)
    fn sleeper(ignore_term: bool) -> std::io::Result<std::process::Child> {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let trap = if ignore_term { "trap '' TERM; " } else { "" };
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", &format!("{trap}sleep 600 & echo ready; wait")])
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            std::io::BufReader::new(stdout).read_line(&mut line)?;
        }
        assert_eq!(line, "ready\n");
        Ok(child)
    }

    #[test]
    fn stop_process_terminates_kills_and_spares_recycled_pids() -> std::io::Result<()> {
        // (ignores SIGTERM, needle, grace, expected, still running afterwards)
        let cases = [
            (
                false,
                "sleep",
                Duration::from_secs(60),
                Stopped::Terminated,
                false,
            ),
            (
                true,
                "sleep",
                Duration::from_millis(300),
                Stopped::Killed,
                false,
            ),
            // The pid runs another program than the record says: a recycled pid.
            (
                false,
                "another-program",
                Duration::from_secs(60),
                Stopped::NotRunning,
                true,
            ),
        ];
        for (ignore_term, needle, grace, expected, still_running) in cases {
            let mut child = sleeper(ignore_term)?;
            let pid = child.id();
            let stopped = stop_process(pid, needle, SignalTarget::Group, grace);
            // Reaped here, so an exited child is gone rather than a zombie.
            let alive = child.try_wait()?.is_none();
            if alive {
                signal_group(pid, Signal::SIGKILL);
                child.wait()?;
            }
            assert_eq!(
                stopped, expected,
                "{needle}, ignores SIGTERM: {ignore_term}"
            );
            assert_eq!(
                alive, still_running,
                "{needle}, ignores SIGTERM: {ignore_term}"
            );
        }
        Ok(())
    }

    #[test]
    fn stop_child_terminates_kills_and_reaps() -> std::io::Result<()> {
        let cases = [
            (false, Duration::from_secs(60), Stopped::Terminated),
            (true, Duration::from_millis(300), Stopped::Killed),
        ];
        for (ignore_term, grace, expected) in cases {
            let mut child = sleeper(ignore_term)?;
            assert_eq!(stop_child(&mut child, grace), expected, "{ignore_term}");
            assert!(child.try_wait()?.is_some(), "reaped");
            assert_eq!(stop_child(&mut child, grace), Stopped::NotRunning);
        }
        Ok(())
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
        let failed = "starting\nError: binding 0.0.0.0:8080\n\nCaused by:\n    in use\n\n\
                      Stack backtrace:\n   0: main\n             at src/main.rs:1\n";
        std::fs::write(&path, failed)?;
        let cases = [
            (2, "Caused by:\n    in use"),
            (
                9,
                "starting\nError: binding 0.0.0.0:8080\n\nCaused by:\n    in use",
            ),
        ];
        for (lines, expected) in cases {
            assert_eq!(
                log_tail(&path, lines),
                expected,
                "{lines} lines before a backtrace"
            );
        }
        assert_eq!(log_tail(&dir.path().join("missing"), 3), "");
        Ok(())
    }
}
