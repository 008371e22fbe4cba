//! The `devcluster` command's general verbs: `up` starts a daemon (`devcluster serve`) that owns
//! the cluster, and the other commands find it through the state directory. A project adds its
//! own verbs, images and installed processes through a [`CliExtension`] and calls [`main`] from
//! its `devcluster` binary.

use std::io::{BufRead, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use nix::sys::signal::Signal;

use crate::controlplane::flags::Component;
use crate::controlplane::process::{self, SignalTarget, Stopped, is_alive, is_alive_running};
use crate::controlplane::{Timeouts, binary};
use crate::images::{ImageExtensions, ImageMap};
use crate::node::{Heartbeat, NodeHandle, NodeSize};
use crate::state::{ClusterRecord, StateDir, default_state_dir};
use crate::{DevCluster, DevClusterError, DevClusterOptions, leftovers};

const CONTROLPLANE_BINARY: &str = "devcluster-controlplane";

/// What a project adds to the `devcluster` command: verbs, the images its nodes run, and the
/// processes it runs against the cluster (which `status` shows and `down` stops).
pub trait CliExtension {
    /// Adds the project's subcommands to the general ones (clap's
    /// `Subcommand::augment_subcommands`).
    fn augment_subcommands(&self, command: clap::Command) -> clap::Command;

    /// Whether `name` is one of the project's subcommands.
    fn has_subcommand(&self, name: &str) -> bool;

    /// Runs the project's subcommand of `matches` (the whole command line's).
    fn run(&self, matches: &clap::ArgMatches, state: &StateDir) -> anyhow::Result<ExitCode>;

    /// The image-map entries and played programs the cluster's nodes get.
    fn images(&self) -> ImageExtensions;

    /// Stops what the project runs against the cluster, before `down` stops the cluster;
    /// whether it stopped something.
    fn stop(&self, state: &StateDir) -> bool;

    /// `status` lines on what the project runs against the cluster.
    fn status_lines(&self, state: &StateDir) -> Vec<String>;
}

/// The general verbs alone.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoExtension;

impl CliExtension for NoExtension {
    fn augment_subcommands(&self, command: clap::Command) -> clap::Command {
        command
    }

    fn has_subcommand(&self, _name: &str) -> bool {
        false
    }

    fn run(&self, _matches: &clap::ArgMatches, _state: &StateDir) -> anyhow::Result<ExitCode> {
        bail!("no such subcommand")
    }

    fn images(&self) -> ImageExtensions {
        ImageExtensions::default()
    }

    fn stop(&self, _state: &StateDir) -> bool {
        false
    }

    fn status_lines(&self, _state: &StateDir) -> Vec<String> {
        Vec::new()
    }
}
/// What the daemon's command line contains (`devcluster serve ...`).
const DAEMON_NEEDLE: &str = "devcluster";
/// How often `up` and `down` look at the daemon while waiting for it.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

#[derive(Debug, Parser)]
#[command(
    name = "devcluster",
    version,
    about = "A local Kubernetes cluster: real control plane, simulated nodes"
)]
pub struct Cli {
    /// The cluster's state directory [default: .devcluster/ at the repository root]
    #[arg(long, global = true, env = "DEVCLUSTER_STATE_DIR")]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a cluster in the background; returns when the API and every node are ready and
    /// prints the kubeconfig path.
    Up {
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Give up (and stop the daemon) after this many seconds.
        #[arg(long, default_value_t = 900)]
        timeout: u64,
    },
    /// Stop the cluster: every process, every mount (also after a crashed daemon).
    Down,
    /// Show what runs (exit status 1 if the cluster is not running).
    Status,
    /// Print the kubeconfig path.
    Kubeconfig,
    /// Run a command in a node's root (`devcluster exec node-1 -- cat /etc/os-release`); exits
    /// with the command's status.
    Exec {
        /// The node, e.g. node-1.
        node: String,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Restart one control-plane component (etcd, apiserver, controller-manager, scheduler) on
    /// the same ports, certificates and data; returns once it is ready again.
    Restart {
        /// etcd, apiserver, controller-manager or scheduler.
        component: Component,
    },
    /// Stop, start, pause (SIGSTOP) or resume one control-plane component, or stall it for a
    /// while (`devcluster component stall etcd --seconds 20`).
    Component {
        #[command(subcommand)]
        action: ComponentCommand,
    },
    /// Take a simulated node down as a dead machine, or boot it again.
    Node {
        #[command(subcommand)]
        action: NodeCommand,
    },
    /// Run the cluster in the foreground (what `up` starts in the background).
    #[command(hide = true)]
    Serve {
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

#[derive(Debug, Subcommand)]
enum ComponentCommand {
    /// Stop it (SIGTERM, SIGKILL after 15 s) and leave it stopped.
    Stop { component: Component },
    /// Start it again as it ran before; returns once it is ready.
    Start { component: Component },
    /// Freeze it (SIGSTOP): it holds its sockets but answers nothing.
    Pause { component: Component },
    /// Thaw it (SIGCONT).
    Resume { component: Component },
    /// Freeze it for `--seconds`, then thaw it.
    Stall {
        component: Component,
        #[arg(long, default_value_t = 20)]
        seconds: u64,
    },
}

#[derive(Debug, Subcommand)]
enum NodeCommand {
    /// The machine dies: its kubelet stops renewing the Lease and posting status, its pods'
    /// processes are killed, nothing is reported; kube-controller-manager marks it unreachable
    /// after its grace period. A reboot in flight does not bring it back.
    Down { node: String },
    /// The machine boots: new boot ID, status posted at once, its pods re-run.
    Up { node: String },
}

/// One request to the daemon over its control socket: a line such as `restart etcd` or
/// `node-down node-1`, answered by `ok` or `error: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DaemonRequest {
    Restart(Component),
    Stop(Component),
    Start(Component),
    Pause(Component),
    Resume(Component),
    NodeDown(String),
    NodeUp(String),
}

impl DaemonRequest {
    fn line(&self) -> String {
        match self {
            Self::Restart(c) => format!("restart {}", c.short_name()),
            Self::Stop(c) => format!("stop {}", c.short_name()),
            Self::Start(c) => format!("start {}", c.short_name()),
            Self::Pause(c) => format!("pause {}", c.short_name()),
            Self::Resume(c) => format!("resume {}", c.short_name()),
            Self::NodeDown(node) => format!("node-down {node}"),
            Self::NodeUp(node) => format!("node-up {node}"),
        }
    }

    fn parse(line: &str) -> Result<Self, String> {
        let (verb, target) = line
            .trim()
            .split_once(' ')
            .ok_or_else(|| format!("malformed request {line:?}: want `<verb> <target>`"))?;
        let component = || target.parse::<Component>();
        Ok(match verb {
            "restart" => Self::Restart(component()?),
            "stop" => Self::Stop(component()?),
            "start" => Self::Start(component()?),
            "pause" => Self::Pause(component()?),
            "resume" => Self::Resume(component()?),
            "node-down" => Self::NodeDown(target.to_owned()),
            "node-up" => Self::NodeUp(target.to_owned()),
            other => return Err(format!("unknown request {other:?} in {line:?}")),
        })
    }

    async fn apply(&self, cluster: &DevCluster) -> Result<(), DevClusterError> {
        match self {
            Self::Restart(c) => cluster.restart(*c).await,
            Self::Stop(c) => cluster.stop_component(*c).await,
            Self::Start(c) => cluster.start_component(*c).await,
            Self::Pause(c) => cluster.pause(*c).await,
            Self::Resume(c) => cluster.resume(*c).await,
            Self::NodeDown(node) => cluster.node_down(node).await,
            Self::NodeUp(node) => cluster.node_up(node).await,
        }
    }
}

#[derive(Debug, clap::Args)]
struct ClusterArgs {
    /// Number of simulated nodes (node-1 ... node-N).
    #[arg(long, default_value_t = 0)]
    nodes: usize,
    /// Nodes without overlay mounts (no root needed; for thousands of nodes).
    #[arg(long)]
    light: bool,
    /// Nodes renew their leases every 60 s instead of 10 s and count as unreachable after 300 s
    /// instead of 50 s: a sixth of the heartbeat writes, for thousands of nodes on one machine.
    #[arg(long)]
    relaxed_heartbeats: bool,
    /// How much each Node carries: `small` (the kubelet's own labels, no images) or `realistic`
    /// (50 images, 25 labels, 10 annotations, every standard condition, as a real node).
    #[arg(long, value_enum, default_value_t = NodeSize::Small)]
    node_size: NodeSize,
    /// An image map (the format of devcluster/images.yaml) whose entries are tried before the
    /// built-in ones: how the nodes run images the built-in map does not know.
    #[arg(long, value_name = "FILE")]
    image_map: Option<PathBuf>,
    /// Each pod of a full node that is not hostNetwork gets its own network namespace, bridged
    /// per node, with an address from the node's podCIDR (see docs/devcluster.md).
    #[arg(long)]
    pod_network: bool,
}

impl ClusterArgs {
    fn to_args(&self) -> Vec<String> {
        let mut args = vec![format!("--nodes={}", self.nodes)];
        if self.light {
            args.push("--light".to_string());
        }
        if self.relaxed_heartbeats {
            args.push("--relaxed-heartbeats".to_string());
        }
        if self.node_size != NodeSize::Small {
            args.push("--node-size=realistic".to_string());
        }
        if let Some(file) = &self.image_map {
            args.push(format!("--image-map={}", file.display()));
        }
        if self.pod_network {
            args.push("--pod-network".to_string());
        }
        args
    }

    /// The arguments with the image map made absolute (the daemon does not share the caller's
    /// working directory) and checked, so a bad map is reported by `up` rather than in the
    /// daemon's log.
    fn checked(mut self, images: &ImageExtensions) -> anyhow::Result<Self> {
        if let Some(file) = &self.image_map {
            let absolute = std::path::absolute(file)
                .with_context(|| format!("resolving the image map path {}", file.display()))?;
            ImageMap::load(Path::new("."), Some(&absolute), images)
                .with_context(|| format!("checking the image map {}", absolute.display()))?;
            self.image_map = Some(absolute);
        }
        Ok(self)
    }
}

/// The `devcluster` command with `extension`'s verbs; `main` of a `devcluster` binary, after
/// [`crate::isolation::run_if_requested`].
pub fn main(extension: &dyn CliExtension) -> ExitCode {
    let matches = extension.augment_subcommands(Cli::command()).get_matches();
    match run(&matches, extension) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("devcluster: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(matches: &clap::ArgMatches, extension: &dyn CliExtension) -> anyhow::Result<ExitCode> {
    if matches
        .subcommand_name()
        .is_some_and(|name| extension.has_subcommand(name))
    {
        let given = matches.get_one::<PathBuf>("state_dir").cloned();
        return extension.run(matches, &resolve_state_dir(given)?);
    }
    let cli = match Cli::from_arg_matches(matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let state = resolve_state_dir(cli.state_dir)?;
    match cli.command {
        Command::Up { cluster, timeout } => up(
            &state,
            &cluster.checked(&extension.images())?,
            Duration::from_secs(timeout),
        ),
        Command::Down => down(&state, extension),
        Command::Status => status(&state, extension),
        Command::Kubeconfig => kubeconfig(&state),
        Command::Exec { node, command } => exec(&state, &node, &command),
        Command::Restart { component } => ask_daemon(&state, &DaemonRequest::Restart(component)),
        Command::Component { action } => match action {
            ComponentCommand::Stop { component } => {
                ask_daemon(&state, &DaemonRequest::Stop(component))
            }
            ComponentCommand::Start { component } => {
                ask_daemon(&state, &DaemonRequest::Start(component))
            }
            ComponentCommand::Pause { component } => {
                ask_daemon(&state, &DaemonRequest::Pause(component))
            }
            ComponentCommand::Resume { component } => {
                ask_daemon(&state, &DaemonRequest::Resume(component))
            }
            ComponentCommand::Stall { component, seconds } => {
                ask_daemon(&state, &DaemonRequest::Pause(component))?;
                // The stall is the fault itself.
                std::thread::sleep(Duration::from_secs(seconds));
                ask_daemon(&state, &DaemonRequest::Resume(component))
            }
        },
        Command::Node { action } => match action {
            NodeCommand::Down { node } => ask_daemon(&state, &DaemonRequest::NodeDown(node)),
            NodeCommand::Up { node } => ask_daemon(&state, &DaemonRequest::NodeUp(node)),
        },
        Command::Serve { cluster } => serve(&state, &cluster, extension.images()),
    }
}

fn resolve_state_dir(given: Option<PathBuf>) -> anyhow::Result<StateDir> {
    let dir = match given {
        Some(dir) => dir,
        None => {
            let cwd = std::env::current_dir().context("reading the current directory")?;
            default_state_dir(&cwd).with_context(|| {
                format!(
                    "{} is not inside a repository (no .git or workspace Cargo.toml above it); \
                     pass --state-dir",
                    cwd.display()
                )
            })?
        }
    };
    // Absolute, so the daemon and the kubeconfig path do not depend on a working directory.
    let dir = if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir()
            .context("reading the current directory")?
            .join(dir)
    };
    Ok(StateDir::new(dir))
}

pub fn stdout_line(line: &str) -> anyhow::Result<()> {
    writeln!(std::io::stdout().lock(), "{line}").context("writing to stdout")
}

/// The running cluster's record, if its owner is alive.
pub fn running_record(state: &StateDir) -> anyhow::Result<Option<ClusterRecord>> {
    let path = state.cluster_info();
    let record =
        ClusterRecord::read(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(record.filter(|record| is_alive(record.owner_pid)))
}

fn daemon_pid(state: &StateDir) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(state.daemon_pid_file())
        .ok()?
        .trim()
        .parse()
        .ok()?;
    is_alive_running(pid, DAEMON_NEEDLE).then_some(pid)
}

fn up(state: &StateDir, cluster: &ClusterArgs, timeout: Duration) -> anyhow::Result<ExitCode> {
    if let Some(pid) = daemon_pid(state) {
        bail!(
            "a cluster is already running in {} (daemon pid {pid}); `devcluster down` stops it",
            state.root().display()
        );
    }
    if let Some(record) = running_record(state)? {
        bail!(
            "a cluster is already running in {} (owned by process {}); stop that process first",
            state.root().display(),
            record.owner_pid
        );
    }
    binary::locate()?;
    if cluster.nodes > 0 && !cluster.light && !nix::unistd::Uid::effective().is_root() {
        bail!("nodes with overlay roots need root; run as root or pass --light");
    }
    std::fs::create_dir_all(state.logs())
        .with_context(|| format!("creating {}", state.logs().display()))?;
    std::fs::write(state.progress_file(), "")
        .with_context(|| format!("clearing {}", state.progress_file().display()))?;
    let daemon_log_path = state.log_file("devcluster");
    let daemon_log = std::fs::File::create(&daemon_log_path)
        .with_context(|| format!("creating {}", daemon_log_path.display()))?;
    let exe = std::env::current_exe().context("finding the devcluster executable")?;
    let mut daemon = std::process::Command::new(&exe)
        .arg("serve")
        .arg("--state-dir")
        .arg(state.root())
        .args(cluster.to_args())
        .stdin(Stdio::null())
        .stdout(
            daemon_log
                .try_clone()
                .context("duplicating the log handle")?,
        )
        .stderr(daemon_log)
        .spawn()
        .with_context(|| format!("starting {} serve", exe.display()))?;
    eprintln!(
        "devcluster: starting in {} (daemon pid {}, log {})",
        state.root().display(),
        daemon.id(),
        daemon_log_path.display()
    );

    let started = Instant::now();
    let mut progress = ProgressTail::new(state.progress_file());
    loop {
        progress.relay();
        if let Some(record) = ClusterRecord::read(&state.cluster_info()).ok().flatten()
            && record.owner_pid == daemon.id()
        {
            progress.relay();
            eprintln!("devcluster: up in {:.1} s", started.elapsed().as_secs_f64());
            stdout_line(&state.kubeconfig().display().to_string())?;
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(status) = daemon.try_wait().context("checking the daemon")? {
            progress.relay();
            bail!(
                "the daemon exited ({status}) before the cluster was ready; last lines of {}:\n{}",
                daemon_log_path.display(),
                process::log_tail(&daemon_log_path, 30)
            );
        }
        if started.elapsed() > timeout {
            process::signal_group(daemon.id(), Signal::SIGTERM);
            bail!(
                "the cluster was not ready after {timeout:?}; stopping it (logs in {})",
                state.logs().display()
            );
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Prints lines appended to the daemon's progress file since the last call.
struct ProgressTail {
    path: PathBuf,
    offset: u64,
}

impl ProgressTail {
    fn new(path: PathBuf) -> Self {
        Self { path, offset: 0 }
    }

    fn relay(&mut self) {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return;
        };
        if file.seek(std::io::SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut reader = std::io::BufReader::new(file);
        let mut line = String::new();
        // Only whole lines: a line still being written is read on the next call.
        while reader.read_line(&mut line).is_ok_and(|read| read > 0) && line.ends_with('\n') {
            self.offset += line.len() as u64;
            eprintln!("devcluster: {}", line.trim_end());
            line.clear();
        }
    }
}

fn serve(
    state: &StateDir,
    cluster: &ClusterArgs,
    images: ImageExtensions,
) -> anyhow::Result<ExitCode> {
    // A session of its own: closing the terminal that ran `up` must not stop the cluster.
    if let Err(error) = nix::unistd::setsid() {
        tracing::debug!(%error, "setsid (already a session leader?)");
    }
    init_tracing();
    std::fs::write(state.daemon_pid_file(), format!("{}\n", std::process::id()))
        .with_context(|| format!("writing {}", state.daemon_pid_file().display()))?;
    let progress_path = state.progress_file();
    let progress = move |line: &str| {
        tracing::info!("{line}");
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&progress_path)
            .and_then(|mut file| writeln!(file, "{line}"));
        if let Err(error) = appended {
            tracing::warn!(path = %progress_path.display(), %error, "writing progress");
        }
    };
    let options = DevClusterOptions {
        nodes: cluster.nodes,
        light: cluster.light,
        heartbeat: if cluster.relaxed_heartbeats {
            Heartbeat::RELAXED
        } else {
            Heartbeat::KUBELET
        },
        state_dir: Some(state.root().to_path_buf()),
        timeouts: Timeouts::default(),
        progress: Some(std::sync::Arc::new(progress.clone())),
        image_map: cluster.image_map.clone(),
        images,
        node_size: cluster.node_size,
        pod_network: cluster.pod_network,
        ..DevClusterOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a tokio runtime")?;
    let outcome = runtime.block_on(async {
        let cluster = match DevCluster::start(options).await {
            Ok(cluster) => cluster,
            Err(error) => {
                progress(&format!("failed: {error}"));
                return Err(anyhow::Error::new(error));
            }
        };
        let socket = state.control_socket();
        let _stale = std::fs::remove_file(&socket);
        let listener = tokio::net::UnixListener::bind(&socket)
            .with_context(|| format!("binding the control socket {}", socket.display()))?;
        let signal = tokio::select! {
            signal = wait_for_stop_signal() => signal?,
            () = serve_control_socket(&listener, &cluster) => "the control socket closed",
        };
        let _removed = std::fs::remove_file(&socket);
        tracing::info!(signal, "stopping the cluster");
        Ok(cluster)
    });
    let result = outcome.map(|cluster| {
        cluster.stop();
        ExitCode::SUCCESS
    });
    let _removed = std::fs::remove_file(state.daemon_pid_file());
    result
}

/// Answers requests of other `devcluster` commands, one connection at a time (faults are
/// injected one after the other).
async fn serve_control_socket(listener: &tokio::net::UnixListener, cluster: &DevCluster) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "accepting on the control socket");
                continue;
            }
        };
        let (reader, mut writer) = stream.into_split();
        let mut line = String::new();
        if let Err(error) = tokio::io::BufReader::new(reader).read_line(&mut line).await {
            tracing::warn!(%error, "reading a control request");
            continue;
        }
        let answer = match DaemonRequest::parse(&line) {
            Ok(request) => {
                tracing::info!(request = %request.line(), "control request");
                match request.apply(cluster).await {
                    Ok(()) => "ok\n".to_owned(),
                    Err(error) => format!("error: {}\n", crate::isolation::error_chain(&error)),
                }
            }
            Err(message) => format!("error: {message}\n"),
        };
        if let Err(error) = writer.write_all(answer.as_bytes()).await {
            tracing::warn!(%error, "answering a control request");
        }
    }
}

/// Sends `request` to the daemon of the cluster in `state` and waits for its answer.
fn ask_daemon(state: &StateDir, request: &DaemonRequest) -> anyhow::Result<ExitCode> {
    use std::io::Read;
    if daemon_pid(state).is_none() {
        bail!(
            "no cluster started by `devcluster up` runs in {}; start one first",
            state.root().display()
        );
    }
    let socket = state.control_socket();
    let mut stream = std::os::unix::net::UnixStream::connect(&socket)
        .with_context(|| format!("connecting to the daemon at {}", socket.display()))?;
    writeln!(stream, "{}", request.line())
        .with_context(|| format!("sending {:?} to the daemon", request.line()))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .with_context(|| format!("reading the daemon's answer to {:?}", request.line()))?;
    match answer.trim().strip_prefix("error: ") {
        None if answer.trim() == "ok" => {
            eprintln!("devcluster: {}: done", request.line());
            Ok(ExitCode::SUCCESS)
        }
        None => bail!(
            "the daemon gave no answer to {:?} (it stopped?); see {}",
            request.line(),
            state.log_file("devcluster").display()
        ),
        Some(message) => bail!("{}: {message}", request.line()),
    }
}

async fn wait_for_stop_signal() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    let mut hangup = signal(SignalKind::hangup()).context("installing a SIGHUP handler")?;
    Ok(tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
        _ = hangup.recv() => "SIGHUP",
    })
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DEVCLUSTER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _already_set = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn down(state: &StateDir, extension: &dyn CliExtension) -> anyhow::Result<ExitCode> {
    let mut stopped_something = extension.stop(state);
    if let Some(pid) = daemon_pid(state) {
        eprintln!("devcluster: stopping the daemon (pid {pid})");
        stopped_something = true;
        // The daemon alone: it stops its nodes' processes (in its session) in order.
        stop_recorded_process(
            pid,
            DAEMON_NEEDLE,
            SignalTarget::Process,
            Duration::from_secs(120),
        );
    }
    // Whatever a crashed daemon left: control-plane processes, pods, mounts, records.
    let record = ClusterRecord::read(&state.cluster_info()).ok().flatten();
    for (component, pid) in record.iter().flat_map(|record| record.components.iter()) {
        if is_alive_running(*pid, CONTROLPLANE_BINARY) {
            eprintln!("devcluster: stopping leftover {component} (pid {pid})");
            stopped_something = true;
            stop_recorded_process(
                *pid,
                CONTROLPLANE_BINARY,
                SignalTarget::Group,
                Duration::from_secs(30),
            );
        }
    }
    if state.root().exists() {
        for pid in leftovers::processes_under(state.root()) {
            eprintln!(
                "devcluster: killing leftover process {pid} running inside the state directory"
            );
            stopped_something = true;
            process::signal(pid, SignalTarget::Process, Signal::SIGKILL);
        }
        let unmounted = leftovers::unmount_all_under(state.root()).with_context(|| {
            format!(
                "unmounting what is mounted under {}",
                state.root().display()
            )
        })?;
        for mount in &unmounted {
            eprintln!("devcluster: unmounted {}", mount.display());
        }
        stopped_something |= !unmounted.is_empty();
        let mut bridges = crate::network::remove_recorded_bridges(&state.nodes());
        bridges.extend(crate::network::remove_recorded_bridges(state.root()));
        for bridge in &bridges {
            eprintln!("devcluster: removed leftover pod network bridge {bridge}");
        }
        stopped_something |= !bridges.is_empty();
    }
    for file in [state.cluster_info(), state.daemon_pid_file()] {
        match std::fs::remove_file(&file) {
            Ok(()) => {
                if !stopped_something {
                    eprintln!("devcluster: removed the stale {}", file.display());
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(error).with_context(|| format!("removing {}", file.display()));
            }
        }
    }
    let message = if stopped_something {
        "stopped"
    } else {
        "nothing was running"
    };
    eprintln!("devcluster: {message} ({})", state.root().display());
    Ok(ExitCode::SUCCESS)
}

/// [`process::stop_process`], saying so when SIGTERM was not enough.
fn stop_recorded_process(pid: u32, needle: &str, target: SignalTarget, grace: Duration) {
    if process::stop_process(pid, needle, target, grace) == Stopped::Killed {
        eprintln!("devcluster: process {pid} ignored SIGTERM for {grace:?}; killed it");
    }
}

fn status(state: &StateDir, extension: &dyn CliExtension) -> anyhow::Result<ExitCode> {
    let Some(record) = running_record(state)? else {
        let stale = state.cluster_info().exists();
        let hint = if stale {
            "; its owner died: `devcluster down` cleans up what it left"
        } else {
            ""
        };
        eprintln!("devcluster: not running ({}){hint}", state.root().display());
        return Ok(ExitCode::FAILURE);
    };
    let mut healthy = true;
    let mut out = vec![
        format!("state dir:  {}", state.root().display()),
        format!("kubeconfig: {}", record.kubeconfig.display()),
        format!("server:     {}", record.server),
        format!("owner pid:  {}", record.owner_pid),
        "components:".to_string(),
    ];
    healthy &= push_component_lines(&record, &mut out);
    out.extend(extension.status_lines(state));
    match node_summary(&record.kubeconfig) {
        Ok(lines) => out.extend(lines),
        Err(error) => {
            healthy = false;
            out.push(format!("nodes: cannot list them: {error:#}"));
        }
    }
    for line in out {
        stdout_line(&line)?;
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One line per control-plane component; whether every one runs.
fn push_component_lines(record: &ClusterRecord, out: &mut Vec<String>) -> bool {
    let port_of = |name: &str| match name {
        "etcd" => record.ports.etcd_client,
        "kube-apiserver" => record.ports.apiserver,
        "kube-controller-manager" => record.ports.controller_manager,
        "kube-scheduler" => record.ports.scheduler,
        _ => 0,
    };
    let mut healthy = true;
    for (component, pid) in &record.components {
        let alive = is_alive_running(*pid, CONTROLPLANE_BINARY);
        let paused = alive && process::is_stopped(*pid);
        healthy &= alive && !paused;
        let state = match (alive, paused) {
            (true, false) => "running",
            (true, true) => "PAUSED (`devcluster component resume` thaws it)",
            (false, _) => "NOT RUNNING",
        };
        out.push(format!(
            "  {component:<24} pid {pid:<8} port {:<6} {state}",
            port_of(component)
        ));
    }
    healthy
}

fn node_summary(kubeconfig: &Path) -> anyhow::Result<Vec<String>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a tokio runtime")?;
    runtime.block_on(async {
        let client = client_for(kubeconfig).await?;
        let nodes: Api<Node> = Api::all(client);
        let list =
            tokio::time::timeout(Duration::from_secs(20), nodes.list(&ListParams::default()))
                .await
                .context("the API server did not answer within 20 s")??;
        let mut lines = vec![format!("nodes: {}", list.items.len())];
        for node in &list.items {
            let ready = node
                .status
                .as_ref()
                .and_then(|status| status.conditions.as_ref())
                .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
                .map_or("Unknown", |condition| {
                    if condition.status == "True" {
                        "Ready"
                    } else {
                        "NotReady"
                    }
                });
            lines.push(format!(
                "  {:<24} {ready}",
                node.metadata.name.as_deref().unwrap_or("?")
            ));
        }
        Ok(lines)
    })
}

/// A client for the cluster of `kubeconfig`.
pub async fn client_for(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let text = std::fs::read_to_string(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let parsed = kube::config::Kubeconfig::from_yaml(&text)?;
    let config =
        kube::Config::from_custom_kubeconfig(parsed, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

fn exec(state: &StateDir, node: &str, command: &[String]) -> anyhow::Result<ExitCode> {
    if running_record(state)?.is_none() {
        bail!(
            "no cluster is running in {}; start one with `devcluster up`",
            state.root().display()
        );
    }
    let handle = NodeHandle::open(&state.nodes(), node)?;
    let argv: Vec<&str> = command.iter().map(String::as_str).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a tokio runtime")?;
    let output = runtime
        .block_on(handle.exec(&argv))
        .with_context(|| format!("running {command:?} in {node}"))?;
    std::io::stdout()
        .lock()
        .write_all(&output.stdout)
        .context("writing to stdout")?;
    std::io::stderr()
        .lock()
        .write_all(&output.stderr)
        .context("writing to stderr")?;
    // A command killed by a signal reports 128 + the signal number, as shells do.
    let code = output
        .status
        .code()
        .or_else(|| {
            std::os::unix::process::ExitStatusExt::signal(&output.status).map(|signal| 128 + signal)
        })
        .unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

fn kubeconfig(state: &StateDir) -> anyhow::Result<ExitCode> {
    let path = state.kubeconfig();
    if !path.is_file() {
        bail!(
            "no cluster in {} ({} is missing); start one with `devcluster up`",
            state.root().display(),
            path.display()
        );
    }
    stdout_line(&path.display().to_string())?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_gets_the_cluster_arguments_back() {
        let cases = [
            (
                ClusterArgs {
                    nodes: 0,
                    light: false,
                    relaxed_heartbeats: false,
                    node_size: NodeSize::Small,
                    image_map: None,
                    pod_network: false,
                },
                vec!["--nodes=0"],
            ),
            (
                ClusterArgs {
                    nodes: 3,
                    light: true,
                    relaxed_heartbeats: false,
                    node_size: NodeSize::Small,
                    image_map: None,
                    pod_network: false,
                },
                vec!["--nodes=3", "--light"],
            ),
            (
                ClusterArgs {
                    nodes: 5000,
                    light: true,
                    relaxed_heartbeats: true,
                    node_size: NodeSize::Realistic,
                    image_map: None,
                    pod_network: false,
                },
                vec![
                    "--nodes=5000",
                    "--light",
                    "--relaxed-heartbeats",
                    "--node-size=realistic",
                ],
            ),
            (
                ClusterArgs {
                    nodes: 1,
                    light: false,
                    relaxed_heartbeats: false,
                    node_size: NodeSize::Small,
                    image_map: Some(PathBuf::from("/maps/images.yaml")),
                    pod_network: true,
                },
                vec![
                    "--nodes=1",
                    "--image-map=/maps/images.yaml",
                    "--pod-network",
                ],
            ),
        ];
        for (args, expected) in cases {
            let rendered = args.to_args();
            assert_eq!(rendered, expected);
            let mut argv = vec!["devcluster".to_string(), "serve".to_string()];
            argv.extend(rendered);
            let parsed = Cli::try_parse_from(argv).map(|cli| cli.command);
            assert!(
                matches!(parsed, Ok(Command::Serve { cluster }) if cluster.nodes == args.nodes && cluster.light == args.light && cluster.relaxed_heartbeats == args.relaxed_heartbeats && cluster.node_size == args.node_size && cluster.image_map == args.image_map),
                "{args:?}"
            );
        }
    }

    /// `up --image-map FILE` (documented in devcluster/images.yaml) hands the daemon an absolute
    /// path, and refuses a map that does not load before starting anything.
    #[test]
    fn up_checks_the_image_map_and_passes_it_on_absolute() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let good = dir.path().join("good.yaml");
        std::fs::write(
            &good,
            "images:\n  - name: example.com/app\n    runtime: sleep\n",
        )?;
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "images:\n  - name: x\n    runtime: teleport\n")?;
        let up = |map: &Path| {
            let argv = ["devcluster", "up", "--nodes=1", "--image-map"];
            Cli::try_parse_from(
                argv.iter()
                    .copied()
                    .chain([map.to_str().unwrap_or_default()]),
            )
        };
        let Command::Up { cluster, .. } = up(&good)?.command else {
            anyhow::bail!("`up` parsed as another command");
        };
        let checked = cluster.checked(&ImageExtensions::default())?;
        assert_eq!(checked.image_map.as_deref(), Some(good.as_path()));
        let Command::Up { cluster, .. } = up(&bad)?.command else {
            anyhow::bail!("`up` parsed as another command");
        };
        let error = format!(
            "{:#}",
            cluster
                .checked(&ImageExtensions::default())
                .err()
                .context("a bad map passed")?
        );
        assert!(error.contains("bad.yaml"), "{error}");
        let Command::Up { cluster, .. } = up(Path::new("relative/map.yaml"))?.command else {
            anyhow::bail!("`up` parsed as another command");
        };
        let error = format!(
            "{:#}",
            cluster
                .checked(&ImageExtensions::default())
                .err()
                .context("a missing map passed")?
        );
        assert!(error.contains("relative/map.yaml"), "{error}");
        Ok(())
    }

    #[test]
    fn daemon_requests_round_trip_through_their_line() {
        let requests = [
            DaemonRequest::Restart(Component::Etcd),
            DaemonRequest::Stop(Component::KubeApiserver),
            DaemonRequest::Start(Component::KubeApiserver),
            DaemonRequest::Pause(Component::KubeControllerManager),
            DaemonRequest::Resume(Component::KubeScheduler),
            DaemonRequest::NodeDown("node-1".to_owned()),
            DaemonRequest::NodeUp("light-12".to_owned()),
        ];
        for request in requests {
            assert_eq!(DaemonRequest::parse(&request.line()), Ok(request.clone()));
        }
        assert_eq!(
            DaemonRequest::parse("restart kube-apiserver\n"),
            Ok(DaemonRequest::Restart(Component::KubeApiserver))
        );
        for bad in [
            "",
            "restart",
            "restart etcd2",
            "reboot node-1",
            "pause node-1",
        ] {
            assert!(DaemonRequest::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn fault_commands_parse() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["devcluster"];
            argv.extend(args);
            Cli::try_parse_from(argv).map(|cli| cli.command)
        };
        assert!(matches!(
            parse(&["restart", "apiserver"]),
            Ok(Command::Restart {
                component: Component::KubeApiserver
            })
        ));
        assert!(matches!(
            parse(&["component", "stall", "etcd", "--seconds", "3"]),
            Ok(Command::Component {
                action: ComponentCommand::Stall {
                    component: Component::Etcd,
                    seconds: 3
                }
            })
        ));
        assert!(matches!(
            parse(&["node", "down", "node-2"]),
            Ok(Command::Node { action: NodeCommand::Down { node } }) if node == "node-2"
        ));
        assert!(parse(&["restart", "kubelet"]).is_err());
    }

    #[test]
    fn progress_tail_relays_whole_lines_once() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("progress.log");
        std::fs::write(&path, "one\ntw")?;
        let mut tail = ProgressTail::new(path.clone());
        tail.relay();
        assert_eq!(tail.offset, 4, "only the complete line is consumed");
        std::fs::write(&path, "one\ntwo\n")?;
        tail.relay();
        assert_eq!(tail.offset, 8);
        Ok(())
    }
}
