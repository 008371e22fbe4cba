//! A Skyhook binary running in the background against a devcluster, as `install` leaves the
//! controller and the webhook: its own process group (a terminal's Ctrl-C on `devcluster install`
//! does not reach it), working directory the state directory, output in
//! `<state>/logs/<binary>.log`, and its pid, ports and log in `<state>/<binary>.json`, where
//! `status` and `down` find it.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::error::InstallError;
use devcluster::controlplane::process::{
    SignalTarget, Stopped, is_alive_running, log_tail, read_record, signal_group, stop_child,
    stop_process, write_record,
};
use devcluster::state::StateDir;

/// How often readiness is asked while waiting.
const READY_POLL: Duration = Duration::from_millis(250);

/// What is recorded about a background process.
pub trait BackgroundRecord: serde::Serialize + serde::de::DeserializeOwned + Clone {
    /// The binary's name: the record's name, and what `status` and `down` look for in
    /// `/proc/<pid>/cmdline`.
    const BINARY: &'static str;

    fn pid(&self) -> u32;

    /// Where its output goes.
    fn log(&self) -> &Path;

    /// `<state>/<binary>.json`.
    fn path(state: &StateDir) -> PathBuf {
        state.root().join(format!("{}.json", Self::BINARY))
    }

    /// The recorded process, if it still runs.
    fn running(state: &StateDir) -> Option<Self> {
        let record: Self = read_record(&Self::path(state))?;
        is_alive_running(record.pid(), Self::BINARY).then_some(record)
    }
}

/// Stops the process recorded in `state` (if it runs) and removes the record; returns its pid.
pub fn stop_recorded<R: BackgroundRecord>(state: &StateDir, grace: Duration) -> Option<u32> {
    let stopped = read_record::<R>(&R::path(state))
        .map(|record| record.pid())
        .filter(|pid| {
            stop_process(*pid, R::BINARY, SignalTarget::Group, grace) != Stopped::NotRunning
        });
    let _removed = std::fs::remove_file(R::path(state));
    stopped
}

/// A process started by [`spawn`]. Dropping it stops the process unless
/// [`BackgroundProcess::detach`] was called.
#[derive(Debug)]
pub struct BackgroundProcess<R: BackgroundRecord> {
    child: Option<Child>,
    record: R,
}

impl<R: BackgroundRecord> BackgroundProcess<R> {
    pub fn record(&self) -> &R {
        &self.record
    }

    /// Leaves the process running after this handle (and this process) is gone.
    pub fn detach(mut self) -> R {
        self.child = None;
        self.record.clone()
    }

    /// SIGKILL at once, as a crash or an OOM kill would end it (no Lease release, no cleanup);
    /// waits for the exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal_group(child.id(), Signal::SIGKILL);
            let _reaped = child.wait();
        }
    }

    /// SIGTERM, then SIGKILL after `grace`; waits for the exit.
    pub fn stop(&mut self, grace: Duration) {
        if let Some(mut child) = self.child.take() {
            stop_child(&mut child, grace);
        }
    }

    /// Records the process in `state`, for `status` and `down`.
    pub(super) fn write_record(&self, state: &StateDir) -> Result<(), InstallError> {
        let path = R::path(state);
        write_record(&path, &self.record).map_err(|source| InstallError::Io {
            action: "writing",
            path,
            source,
        })
    }

    /// Waits until `ready` answers `Ok` (an `Err` says what is missing yet); stops the process
    /// if that takes longer than `timeout`. The errors show the end of its log.
    pub(super) async fn wait_ready<F, Answer>(
        &mut self,
        timeout: Duration,
        mut ready: F,
    ) -> Result<(), InstallError>
    where
        F: FnMut() -> Answer,
        Answer: Future<Output = Result<(), String>>,
    {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(InstallError::Exited {
                    binary: R::BINARY,
                    status,
                    tail: log_tail(self.record.log(), 30),
                    log: self.record.log().to_path_buf(),
                });
            }
            let last = match ready().await {
                Ok(()) => return Ok(()),
                Err(last) => last,
            };
            if started.elapsed() > timeout {
                self.stop(Duration::from_secs(10));
                return Err(InstallError::NotReady {
                    binary: R::BINARY,
                    pid: self.record.pid(),
                    waited: timeout,
                    last,
                    tail: log_tail(self.record.log(), 30),
                    log: self.record.log().to_path_buf(),
                });
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }
}

impl<R: BackgroundRecord> Drop for BackgroundProcess<R> {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

/// How to start a background process.
pub(super) struct Launch<'a> {
    pub binary: &'a Path,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// The log's name: `<state>/logs/<log_name>.log`.
    pub log_name: &'a str,
}

/// Starts `launch` against the cluster of `state` (see the module docs); `record` makes its
/// record from the pid and the log's path.
pub(super) fn spawn<R: BackgroundRecord>(
    state: &StateDir,
    launch: Launch<'_>,
    record: impl FnOnce(u32, PathBuf) -> R,
) -> Result<BackgroundProcess<R>, InstallError> {
    let io = |action, path: &Path, source| InstallError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(state.logs())
        .map_err(|source| io("creating", &state.logs(), source))?;
    let log = state.log_file(launch.log_name);
    let log_file = std::fs::File::create(&log).map_err(|source| io("creating", &log, source))?;
    let log_err = log_file
        .try_clone()
        .map_err(|source| io("duplicating the handle of", &log, source))?;
    let child = std::process::Command::new(launch.binary)
        .args(&launch.args)
        .envs(&launch.env)
        .current_dir(state.root())
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err)
        .process_group(0)
        .spawn()
        .map_err(|source| InstallError::Spawn {
            binary: launch.binary.to_path_buf(),
            source,
        })?;
    Ok(BackgroundProcess {
        record: record(child.id(), log),
        child: Some(child),
    })
}
