//! Running containers: processes started through the `__container` entry point, and virtual
//! programs played by the kubelet itself. Each reports its exit on the pod worker's channel.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::container_log::{self, LineSplitter, Stream};
use super::conventions::now;
use super::launch::{Launch, StartFailure, VirtualProgram};
use super::pod_state::{ContainerRef, StartErrorKind};
use crate::isolation::{
    self, ContainerSpec, NamespaceRecord, START_ERROR_EXIT, mount_namespace_id,
};
use crate::node::context::{ProcessRuntime, SimNode};

/// How a container ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExitEvent {
    pub container: ContainerRef,
    pub attempt: u32,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub at: Timestamp,
    /// Set when the process never got to exec its command.
    pub start_error: Option<String>,
}

/// A running container. Dropping it leaves the process to its wait task (which kills it when
/// the worker goes away); the live-container count of the node drops with it.
#[derive(Debug)]
pub(crate) struct Running {
    pub attempt: u32,
    control: Control,
    _live: LiveGuard,
}

#[derive(Debug)]
enum Control {
    Process(Pid),
    Virtual(watch::Sender<Option<Signal>>),
}

impl Running {
    pub fn signal(&self, signal: Signal) {
        match &self.control {
            Control::Process(pid) => {
                if let Err(error) = nix::sys::signal::kill(*pid, signal) {
                    tracing::debug!(pid = pid.as_raw(), %error, "failed to signal container");
                }
            }
            Control::Virtual(stop) => {
                stop.send_replace(Some(signal));
            }
        }
    }
}

/// Counts the node's running containers, so a shutdown can wait for all of them.
#[derive(Debug)]
struct LiveGuard(Arc<SimNode>);

impl LiveGuard {
    fn new(node: Arc<SimNode>) -> Self {
        node.live_containers.send_modify(|n| *n += 1);
        Self(node)
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0
            .live_containers
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Where a start writes its files.
#[derive(Debug, Clone)]
pub(crate) struct StartFiles {
    pub spec: PathBuf,
    pub log: PathBuf,
}

/// The containers of one pod: their wait tasks (aborted, killing the processes, when the pod
/// worker goes away) and the channel their exits arrive on.
#[derive(Debug)]
pub(crate) struct Supervisor {
    tasks: JoinSet<()>,
    exits_tx: mpsc::UnboundedSender<ExitEvent>,
    exits_rx: mpsc::UnboundedReceiver<ExitEvent>,
}

impl Supervisor {
    pub fn new() -> Self {
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        Self {
            tasks: JoinSet::new(),
            exits_tx,
            exits_rx,
        }
    }

    /// The next container exit.
    pub async fn next_exit(&mut self) -> Option<ExitEvent> {
        while self.tasks.try_join_next().is_some() {}
        self.exits_rx.recv().await
    }

    /// Starts a prepared container; its exit arrives through [`Supervisor::next_exit`].
    pub fn start(
        &mut self,
        node: &Arc<SimNode>,
        processes: Option<&ProcessRuntime>,
        launch: Launch,
        container: ContainerRef,
        attempt: u32,
        files: &StartFiles,
    ) -> Result<Running, StartFailure> {
        let log = ContainerLog::open(&files.log)?;
        let exits = self.exits_tx.clone();
        let control = match launch {
            Launch::Virtual(program) => {
                let (stop, stop_rx) = watch::channel(None);
                self.tasks
                    .spawn(play(program, log, stop_rx, container, attempt, exits));
                Control::Virtual(stop)
            }
            Launch::Process(spec) => {
                let processes = processes.ok_or_else(|| {
                    create_error("this node runs no processes (light node)".to_owned())
                })?;
                let mut child = spawn_process(processes, &spec, files)?;
                let pid = child
                    .id()
                    .and_then(|p| i32::try_from(p).ok())
                    .map(Pid::from_raw)
                    .ok_or_else(|| create_error("the container process vanished".to_owned()))?;
                let sweeper = NamespaceSweeper {
                    namespace_file: spec.namespace_file.clone(),
                    holder_pid: processes.holder_pid,
                    _keeper_pipe: child.stdin.take(),
                };
                let copier =
                    tokio::spawn(copy_output(child.stdout.take(), child.stderr.take(), log));
                let ended = ProcessEnd {
                    sweeper,
                    copier,
                    error_file: spec.error_file.clone(),
                    ended_marker: RunEndMarker::for_log(&files.log),
                };
                let exited = report_exit(child, ended, (container, attempt), exits);
                self.tasks.spawn(exited);
                Control::Process(pid)
            }
        };
        Ok(Running {
            attempt,
            control,
            _live: LiveGuard::new(node.clone()),
        })
    }
}

/// A failure to create the container (`CreateContainerError`).
fn create_error(message: String) -> StartFailure {
    StartFailure {
        kind: StartErrorKind::Create,
        message,
    }
}

/// Writes the container's spec file and runs `devcluster __container` on it, its output on pipes
/// for [`copy_output`].
fn spawn_process(
    processes: &ProcessRuntime,
    spec: &ContainerSpec,
    files: &StartFiles,
) -> Result<tokio::process::Child, StartFailure> {
    let json = serde_json::to_vec(spec).map_err(|e| create_error(e.to_string()))?;
    if let Some(parent) = files.spec.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| create_error(format!("failed to create {}: {e}", parent.display())))?;
    }
    std::fs::write(&files.spec, json)
        .map_err(|e| create_error(format!("failed to write {}: {e}", files.spec.display())))?;
    // The container's namespace keeper holds this pipe (the container gets /dev/null).
    let keeper_pipe = if spec.namespace_file.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    tokio::process::Command::new(&processes.devcluster_bin)
        .args(isolation::container_args(&files.spec))
        .stdin(keeper_pipe)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            create_error(format!(
                "failed to run {}: {e}",
                processes.devcluster_bin.display()
            ))
        })
}

/// What ends with a container process: its namespace, its log, and the files telling readers so.
struct ProcessEnd {
    sweeper: NamespaceSweeper,
    copier: tokio::task::JoinHandle<()>,
    error_file: Option<PathBuf>,
    ended_marker: RunEndMarker,
}

/// How long the log copier may take to drain the pipes after the container ended. Only a process
/// the container left behind (killed by the sweep just before) can hold them open longer.
const LOG_DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Waits for the container process, sweeps its namespace, lets its log drain and marks it
/// ended, and sends its exit (with the start error the process recorded, if it never got to
/// exec its command).
async fn report_exit(
    mut child: tokio::process::Child,
    ended: ProcessEnd,
    (container, attempt): (ContainerRef, u32),
    exits: mpsc::UnboundedSender<ExitEvent>,
) {
    let status = child.wait().await;
    let ProcessEnd {
        sweeper,
        copier,
        error_file,
        ended_marker,
    } = ended;
    drop(sweeper);
    let _still_copying = tokio::time::timeout(LOG_DRAIN_LIMIT, copier).await;
    drop(ended_marker);
    let (code, signal) = match status {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            (status.code(), status.signal())
        }
        Err(_) => (None, None),
    };
    let start_error = match (code, &error_file) {
        (Some(c), Some(path)) if c == i32::from(START_ERROR_EXIT) => {
            std::fs::read_to_string(path).ok()
        }
        _ => None,
    };
    let _ = exits.send(ExitEvent {
        container,
        attempt,
        code,
        signal,
        at: now(),
        start_error,
    });
}

/// A container run's log file, in the CRI log format (see [`super::container_log`]).
#[derive(Debug)]
struct ContainerLog {
    file: File,
    path: PathBuf,
}

impl ContainerLog {
    fn open(path: &Path) -> Result<Self, StartFailure> {
        let failure = |e: std::io::Error| StartFailure {
            kind: StartErrorKind::Create,
            message: format!("failed to open log file {}: {e}", path.display()),
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(failure)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(failure)?;
        Ok(Self {
            file,
            path: path.to_owned(),
        })
    }

    /// Appends one line with one write, so lines of stdout and stderr never interleave.
    fn append(&mut self, stream: Stream, partial: bool, text: &[u8]) {
        use std::io::Write;
        let line = container_log::encode_line(Timestamp::now(), stream, partial, text);
        if let Err(error) = self.file.write_all(&line) {
            tracing::debug!(path = %self.path.display(), %error, "failed to write a container log line");
        }
    }

    fn try_clone(&self) -> std::io::Result<Self> {
        Ok(Self {
            file: self.file.try_clone()?,
            path: self.path.clone(),
        })
    }
}

/// Copies the container's stdout and stderr into its log, line by line, until both end.
async fn copy_output(
    stdout: Option<tokio::process::ChildStdout>,
    stderr: Option<tokio::process::ChildStderr>,
    log: ContainerLog,
) {
    let second = match log.try_clone() {
        Ok(second) => second,
        Err(error) => {
            tracing::warn!(path = %log.path.display(), %error, "cannot log the container's stderr");
            return copy_stream(stdout, Stream::Stdout, log).await;
        }
    };
    tokio::join!(
        copy_stream(stdout, Stream::Stdout, log),
        copy_stream(stderr, Stream::Stderr, second)
    );
}

async fn copy_stream(
    reader: Option<impl tokio::io::AsyncRead + Unpin>,
    stream: Stream,
    mut log: ContainerLog,
) {
    use tokio::io::AsyncReadExt;
    let Some(mut reader) = reader else {
        return;
    };
    let mut splitter = LineSplitter::default();
    let mut buffer = vec![0; 8192];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                for (line, partial) in splitter.push(&buffer[..n]) {
                    log.append(stream, partial, &line);
                }
            }
        }
    }
    if let Some(last) = splitter.finish() {
        log.append(stream, false, &last);
    }
}

/// Tells log readers following a run that it is over when dropped: when the run ended, or when
/// its task was aborted with the pod's worker (so a followed log never waits for a pod that is
/// gone).
#[derive(Debug)]
struct RunEndMarker(PathBuf);

impl RunEndMarker {
    fn for_log(log: &Path) -> Self {
        Self(container_log::exited_marker(log))
    }
}

impl Drop for RunEndMarker {
    fn drop(&mut self) {
        if let Err(error) = std::fs::write(&self.0, b"") {
            tracing::debug!(path = %self.0.display(), %error, "failed to mark the container log ended");
        }
    }
}

/// Plays a virtual program until it ends or is signalled.
async fn play(
    program: VirtualProgram,
    mut log: ContainerLog,
    mut stop: watch::Receiver<Option<Signal>>,
    container: ContainerRef,
    attempt: u32,
    exits: mpsc::UnboundedSender<ExitEvent>,
) {
    let _ended = RunEndMarker::for_log(&log.path);
    let (sleep, exit_code, on_term) = match &program {
        VirtualProgram::Pause => (None, 0, Some(0)),
        VirtualProgram::Sleep => (None, 0, None),
        VirtualProgram::Played(played) => {
            log.append(Stream::Stdout, false, played.banner.as_bytes());
            (Some(played.sleep), played.exit_code, None)
        }
    };
    let finished = async {
        match sleep {
            Some(duration) => tokio::time::sleep(duration).await,
            None => std::future::pending().await,
        }
    };
    let signalled = stop.wait_for(Option::is_some);
    let (code, signal) = tokio::select! {
        () = finished => (Some(exit_code), None),
        signal = signalled => {
            let signal = signal.ok().and_then(|s| *s).unwrap_or(Signal::SIGKILL);
            match (signal, on_term) {
                (Signal::SIGTERM, Some(code)) => (Some(code), None),
                (signal, _) => (None, Some(signal as i32)),
            }
        }
    };
    let _ = exits.send(ExitEvent {
        container,
        attempt,
        code,
        signal,
        at: now(),
        start_error: None,
    });
}

/// Kills every process left in a container's mount namespace once its main process is gone
/// (or when the kubelet drops the container), as the runtime tears a container down.
#[derive(Debug)]
struct NamespaceSweeper {
    namespace_file: Option<PathBuf>,
    holder_pid: i32,
    /// Closing it (after the sweep) ends the namespace's keeper.
    _keeper_pipe: Option<tokio::process::ChildStdin>,
}

impl Drop for NamespaceSweeper {
    fn drop(&mut self) {
        let Some(path) = &self.namespace_file else {
            return;
        };
        let Some(record) = std::fs::read(path)
            .ok()
            .and_then(|json| serde_json::from_slice::<NamespaceRecord>(&json).ok())
        else {
            // The container never got as far as recording its namespace: nothing escaped it.
            return;
        };
        let protected = [
            mount_namespace_id(&self.holder_pid.to_string()).ok(),
            mount_namespace_id("self").ok(),
        ];
        let keeper_namespace = mount_namespace_id(&record.keeper_pid.to_string()).ok();
        let sweep = sweep_targets(
            &record,
            keeper_namespace.as_deref(),
            &protected.into_iter().flatten().collect::<Vec<_>>(),
            processes_with_namespaces,
        );
        match sweep {
            Sweep::Kill(targets) => {
                for pid in targets {
                    let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                }
            }
            Sweep::KeeperGone => tracing::warn!(
                namespace = %record.namespace,
                keeper = record.keeper_pid,
                "the container's namespace keeper is gone, so its namespace id may belong to \
                 another container now; leaving whatever the container left running"
            ),
            Sweep::Protected => {}
        }
        let _ = std::fs::remove_file(path);
    }
}

/// What to do about a finished container's namespace.
#[derive(Debug, PartialEq, Eq)]
enum Sweep {
    /// Kill these processes: everything in the namespace, its keeper included.
    Kill(Vec<Pid>),
    /// The keeper no longer holds the namespace, so its id may be another namespace's by now.
    KeeperGone,
    /// The holder's namespace or the simulator's own (or none): never swept.
    Protected,
}

/// The sweep of a container whose namespace is `record`: every process in it (from `processes`,
/// listed only then), but only while its keeper (`keeper_namespace` is what the keeper's pid is
/// in now) still holds it, since a dead namespace's id is handed to the next namespace created;
/// and never the holder's namespace or the simulator's own (`protected`).
fn sweep_targets<P>(
    record: &NamespaceRecord,
    keeper_namespace: Option<&str>,
    protected: &[String],
    processes: impl FnOnce() -> P,
) -> Sweep
where
    P: IntoIterator<Item = (Pid, String)>,
{
    if record.namespace.is_empty() || protected.contains(&record.namespace) {
        return Sweep::Protected;
    }
    if keeper_namespace != Some(record.namespace.as_str()) {
        return Sweep::KeeperGone;
    }
    Sweep::Kill(
        processes()
            .into_iter()
            .filter(|(_, namespace)| *namespace == record.namespace)
            .map(|(pid, _)| pid)
            .collect(),
    )
}

/// Every process on the machine with its mount namespace id (those that exit meanwhile are
/// skipped).
fn processes_with_namespaces() -> Vec<(Pid, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            Some((
                Pid::from_raw(pid),
                mount_namespace_id(&pid.to_string()).ok()?,
            ))
        })
        .collect()
}

/// How long to wait for exits after SIGKILL before giving up on a container.
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    fn record(namespace: &str) -> NamespaceRecord {
        NamespaceRecord {
            namespace: namespace.to_owned(),
            keeper_pid: 7,
        }
    }

    #[test]
    fn only_a_namespace_its_keeper_still_holds_is_swept() {
        let processes = || {
            vec![
                (Pid::from_raw(7), "mnt:[10]".to_owned()),
                (Pid::from_raw(8), "mnt:[10]".to_owned()),
                (Pid::from_raw(9), "mnt:[11]".to_owned()),
                (Pid::from_raw(1), "mnt:[1]".to_owned()),
            ]
        };
        let protected = vec!["mnt:[1]".to_owned(), "mnt:[2]".to_owned()];
        let kill = |pids: &[i32]| Sweep::Kill(pids.iter().copied().map(Pid::from_raw).collect());
        // (recorded namespace, keeper's namespace now, expected sweep)
        let cases = [
            ("mnt:[10]", Some("mnt:[10]"), kill(&[7, 8])),
            // The keeper is gone: id 10 may be another container's by now.
            ("mnt:[10]", None, Sweep::KeeperGone),
            // The keeper's pid is reused by a process elsewhere.
            ("mnt:[10]", Some("mnt:[11]"), Sweep::KeeperGone),
            // Never the holder's or the simulator's namespace.
            ("mnt:[1]", Some("mnt:[1]"), Sweep::Protected),
            ("mnt:[2]", Some("mnt:[2]"), Sweep::Protected),
            ("", Some(""), Sweep::Protected),
        ];
        for (namespace, keeper, expected) in cases {
            let sweep = sweep_targets(&record(namespace), keeper, &protected, processes);
            assert_eq!(sweep, expected, "{namespace} kept in {keeper:?}");
        }
    }
}
