//! The control plane: etcd, kube-apiserver, kube-controller-manager and kube-scheduler as child
//! processes of one multi-call binary, with fresh certificates and free loopback ports.
//!
//! For fault injection a component can be stopped, started again (same flags, ports,
//! certificates and data), restarted, or frozen with SIGSTOP; one that exits by itself is started
//! again with a back-off, as the kubelet restarts a crashed static pod.

pub mod binary;
pub mod flags;
pub mod kubeconfig;
pub mod pki;
pub mod ports;
pub mod process;
pub mod readiness;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::state::StateDir;
use flags::{Component, Layout};
use pki::{Pki, PkiFiles};
use ports::Ports;
use process::Supervised;

/// How often readiness is polled while a component starts.
const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Each single readiness probe gives up after this long, so a hung connection cannot stall the wait.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Starting over with new ports when one was taken between picking and binding it.
const PORT_ATTEMPTS: usize = 3;
/// A component that ignores SIGTERM this long is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// Deadlines are generous: a loaded two-core machine can take minutes for a first API server start.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub etcd: Duration,
    pub apiserver: Duration,
    pub controllers: Duration,
    /// From starting the node simulation until every node is Ready.
    pub nodes: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            etcd: Duration::from_secs(120),
            apiserver: Duration::from_secs(300),
            controllers: Duration::from_secs(300),
            nodes: Duration::from_secs(600),
        }
    }
}

/// How to run the control plane.
#[derive(Debug, Clone, Copy)]
pub struct ControlPlaneSettings {
    pub timeouts: Timeouts,
    /// kube-controller-manager's `--node-monitor-grace-period` (see [`crate::node::Heartbeat`]).
    pub node_monitor_grace_period: Duration,
    /// Where kube-apiserver serves and what it advertises: `127.0.0.1`, or with a pod network
    /// an address of the machine that pods reach too.
    pub apiserver_address: std::net::Ipv4Addr,
    /// kube-apiserver's and kube-controller-manager's `--service-cluster-ip-range`.
    pub service_range: crate::network::ServiceRange,
}

#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error(transparent)]
    Binary(#[from] binary::BinaryError),
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    #[error(transparent)]
    Process(#[from] process::ProcessError),
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("finding free loopback ports: {0}")]
    Ports(std::io::Error),
    #[error("loading the kubeconfig {path}: {message}")]
    Kubeconfig { path: PathBuf, message: String },
    #[error(
        "{component} could not bind its port ({ports:?}), taken by another process {attempts} times in a row; see {log}"
    )]
    PortInUse {
        component: &'static str,
        ports: Ports,
        attempts: usize,
        log: PathBuf,
    },
    #[error("{component} exited ({status}) while starting; last lines of {log}:\n{tail}")]
    Exited {
        component: &'static str,
        status: std::process::ExitStatus,
        log: PathBuf,
        tail: String,
    },
    #[error("{component} is already running (pid {pid}); stop or restart it instead")]
    AlreadyRunning { component: &'static str, pid: u32 },
    #[error("{component} is not running; start it first")]
    NotRunning { component: &'static str },
    #[error("{component} (pid {pid}) was sent SIGSTOP but is still not stopped after {waited:?}")]
    NotFrozen {
        component: &'static str,
        pid: u32,
        waited: Duration,
    },
    #[error("{what} not ready after {waited:?} (last check: {last}); logs are in {logs}")]
    NotReady {
        what: &'static str,
        waited: Duration,
        last: String,
        logs: PathBuf,
    },
}

/// A running control plane. Dropping it kills the processes (SIGKILL); [`ControlPlane::stop`]
/// stops them gracefully.
#[derive(Debug)]
pub struct ControlPlane {
    processes: Vec<(Component, Supervised)>,
    ports: Ports,
    server: String,
    config: kube::Config,
    /// What a component is started with, kept to start it again on the same ports, certificates
    /// and data.
    binary: PathBuf,
    state: StateDir,
    layout: Layout,
    timeouts: Timeouts,
    crashes: std::collections::BTreeMap<Component, CrashRecord>,
}

/// How a component has been exiting by itself, for its restart back-off.
#[derive(Debug, Clone, Copy)]
struct CrashRecord {
    started: Instant,
    /// Crashes in a row (reset by a run of [`CRASH_RESET_AFTER`]).
    crashes: u32,
    noticed_exit: Option<Instant>,
}

/// A component that ran this long before exiting starts its back-off afresh.
const CRASH_RESET_AFTER: Duration = Duration::from_secs(600);

/// How long a component that exited by itself waits before it is started again, given how many
/// times in a row it crashed before: at once the first time, then 10 s doubling to 5 minutes, as
/// the kubelet backs off a crashing container.
pub fn crash_restart_delay(previous_crashes: u32) -> Duration {
    match previous_crashes {
        0 => Duration::ZERO,
        n => Duration::from_secs(10)
            .saturating_mul(2u32.saturating_pow(n - 1))
            .min(Duration::from_secs(300)),
    }
}

/// What every start attempt shares; only the ports change from one attempt to the next.
struct LaunchInputs<'a> {
    binary: &'a Path,
    state: &'a StateDir,
    pki: &'a Pki,
    pki_files: &'a PkiFiles,
    settings: ControlPlaneSettings,
    progress: &'a (dyn Fn(&str) + Send + Sync),
}

impl ControlPlane {
    /// Starts every component in `state` and returns once the API server is ready and the
    /// namespace controllers have run. `progress` receives one human-readable line per milestone.
    ///
    /// Must be called on a thread that outlives the cluster (see [`process`]).
    pub async fn start(
        binary: &Path,
        state: &StateDir,
        settings: ControlPlaneSettings,
        progress: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Self, ControlPlaneError> {
        for dir in [state.logs(), state.components(), state.etcd_data()] {
            std::fs::create_dir_all(&dir).map_err(|source| ControlPlaneError::Io {
                action: "creating",
                path: dir.clone(),
                source,
            })?;
        }
        // Each log starts empty for a new cluster; retries below append to it.
        for component in Component::ALL {
            let log = state.log_file(component.name());
            std::fs::write(&log, "").map_err(|source| ControlPlaneError::Io {
                action: "truncating",
                path: log.clone(),
                source,
            })?;
        }
        let pki = Pki::generate(
            settings.service_range.kubernetes_service_ip(),
            settings.apiserver_address,
        )?;
        let pki_files = pki.write(&state.pki())?;

        let inputs = LaunchInputs {
            binary,
            state,
            pki: &pki,
            pki_files: &pki_files,
            settings,
            progress,
        };
        let mut attempt = 1;
        loop {
            let ports = Ports::pick().map_err(ControlPlaneError::Ports)?;
            match Self::launch(&inputs, ports).await {
                Err(ControlPlaneError::PortInUse { component, .. }) if attempt < PORT_ATTEMPTS => {
                    tracing::warn!(
                        component,
                        attempt,
                        "a port was taken before the component bound it; retrying with new ports"
                    );
                    progress(&format!(
                        "{component}: port taken by another process, retrying with new ports"
                    ));
                    // The failed attempt's etcd may have initialised a member with the old URLs.
                    reset_dir(&state.etcd_data())?;
                    attempt += 1;
                }
                Err(ControlPlaneError::PortInUse { component, log, .. }) => {
                    return Err(ControlPlaneError::PortInUse {
                        component,
                        ports,
                        attempts: attempt,
                        log,
                    });
                }
                other => return other,
            }
        }
    }

    /// One start attempt on `ports`: every component, each once the one before it is ready.
    async fn launch(inputs: &LaunchInputs<'_>, ports: Ports) -> Result<Self, ControlPlaneError> {
        let (binary, state, progress) = (inputs.binary, inputs.state, inputs.progress);
        let timeouts = inputs.settings.timeouts;
        let (mut plane, client) = Self::connect(inputs, ports).await?;
        let layout = plane.layout.clone();
        let started = Instant::now();

        progress(&format!("starting etcd on 127.0.0.1:{}", ports.etcd_client));
        plane.spawn(binary, state, &layout, Component::Etcd)?;
        plane
            .wait_for(None, "etcd", timeouts.etcd, state, || {
                readiness::etcd_healthy(ports.etcd_client)
            })
            .await?;
        progress(&format!(
            "etcd ready ({:.1} s)",
            started.elapsed().as_secs_f64()
        ));

        progress(&format!("starting kube-apiserver on {}", plane.server));
        plane.spawn(binary, state, &layout, Component::KubeApiserver)?;
        plane
            .wait_for(None, "kube-apiserver", timeouts.apiserver, state, || {
                readiness::apiserver_ready(&client)
            })
            .await?;
        progress(&format!(
            "kube-apiserver ready ({:.1} s)",
            started.elapsed().as_secs_f64()
        ));

        progress("starting kube-controller-manager and kube-scheduler");
        plane.spawn(binary, state, &layout, Component::KubeControllerManager)?;
        plane.spawn(binary, state, &layout, Component::KubeScheduler)?;
        plane
            .wait_for(
                None,
                "the namespace controllers",
                timeouts.controllers,
                state,
                || readiness::namespace_machinery_ready(&client),
            )
            .await?;
        progress(&format!(
            "control plane ready ({:.1} s)",
            started.elapsed().as_secs_f64()
        ));
        Ok(plane)
    }

    /// Writes the admin kubeconfig for `ports` and builds a client from it, with no component
    /// running yet.
    async fn connect(
        inputs: &LaunchInputs<'_>,
        ports: Ports,
    ) -> Result<(Self, kube::Client), ControlPlaneError> {
        let state = inputs.state;
        let server = format!(
            "https://{}:{}",
            inputs.settings.apiserver_address, ports.apiserver
        );
        let kubeconfig_path = state.kubeconfig();
        let kubeconfig_text = kubeconfig::admin_kubeconfig(&server, inputs.pki);
        std::fs::write(&kubeconfig_path, &kubeconfig_text).map_err(|source| {
            ControlPlaneError::Io {
                action: "writing",
                path: kubeconfig_path.clone(),
                source,
            }
        })?;
        let layout = Layout {
            ports,
            pki: inputs.pki_files.clone(),
            kubeconfig: kubeconfig_path.clone(),
            etcd_data: state.etcd_data(),
            components_dir: state.components(),
            node_monitor_grace_period: inputs.settings.node_monitor_grace_period,
            apiserver_address: inputs.settings.apiserver_address,
            service_range: inputs.settings.service_range,
        };
        let config = client_config(&kubeconfig_text, &kubeconfig_path).await?;
        let client = kube::Client::try_from(config.clone()).map_err(|error| {
            ControlPlaneError::Kubeconfig {
                path: kubeconfig_path.clone(),
                message: error.to_string(),
            }
        })?;
        let plane = Self {
            processes: Vec::new(),
            ports,
            server,
            config,
            binary: inputs.binary.to_path_buf(),
            state: state.clone(),
            layout,
            timeouts: inputs.settings.timeouts,
            crashes: std::collections::BTreeMap::new(),
        };
        Ok((plane, client))
    }

    fn spawn(
        &mut self,
        binary: &Path,
        state: &StateDir,
        layout: &Layout,
        component: Component,
    ) -> Result<(), ControlPlaneError> {
        let mut args = vec![component.name().to_string()];
        args.extend(flags::args(component, layout));
        let process = Supervised::spawn(
            component.name(),
            binary,
            &args,
            &state.log_file(component.name()),
        )?;
        self.processes.push((component, process));
        let record = self.crashes.entry(component).or_insert(CrashRecord {
            started: Instant::now(),
            crashes: 0,
            noticed_exit: None,
        });
        record.started = Instant::now();
        record.noticed_exit = None;
        Ok(())
    }

    /// Polls `check` until it passes, failing early when `watched` (or, with `None`, any started
    /// component) exits.
    async fn wait_for<F, Fut>(
        &mut self,
        watched: Option<Component>,
        what: &'static str,
        timeout: Duration,
        state: &StateDir,
        mut check: F,
    ) -> Result<(), ControlPlaneError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let started = Instant::now();
        loop {
            self.ensure_running(watched)?;
            let last = match tokio::time::timeout(PROBE_TIMEOUT, check()).await {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(message)) => message,
                Err(_) => format!("no answer within {PROBE_TIMEOUT:?}"),
            };
            if started.elapsed() >= timeout {
                return Err(ControlPlaneError::NotReady {
                    what,
                    waited: started.elapsed(),
                    last,
                    logs: state.logs(),
                });
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// An error for the first process that has exited, telling a port clash apart.
    fn ensure_running(&mut self, watched: Option<Component>) -> Result<(), ControlPlaneError> {
        for (component, process) in &mut self.processes {
            if watched.is_some_and(|watched| watched != *component) {
                continue;
            }
            if let Some(status) = process.exited() {
                let tail = process::log_tail(process.log(), 20);
                let log = process.log().to_path_buf();
                if tail.contains("address already in use") {
                    return Err(ControlPlaneError::PortInUse {
                        component: component.name(),
                        ports: self.ports,
                        attempts: 1,
                        log,
                    });
                }
                return Err(ControlPlaneError::Exited {
                    component: component.name(),
                    status,
                    log,
                    tail,
                });
            }
        }
        Ok(())
    }

    /// Stops `component` (SIGTERM, SIGKILL after a grace period) and reaps it; the others keep
    /// running. A component that is not running (or exited by itself) is only reaped.
    pub async fn stop_component(&mut self, component: Component) {
        while let Some(index) = self
            .processes
            .iter()
            .position(|(running, _)| *running == component)
        {
            let (_, mut process) = self.processes.remove(index);
            // A paused process cannot act on SIGTERM.
            process::signal_group(process.pid(), nix::sys::signal::Signal::SIGCONT);
            process.stop(STOP_GRACE).await;
            tracing::info!(component = component.name(), pid = process.pid(), "stopped");
        }
    }

    /// Starts `component` again with the flags, ports, certificates and data it had, and returns
    /// once it is ready: etcd healthy and the API server ready on it again; the API server ready;
    /// kube-controller-manager or kube-scheduler answering `/healthz`.
    ///
    /// Call it on the thread that started the control plane (see [`process`]).
    pub async fn start_component(&mut self, component: Component) -> Result<(), ControlPlaneError> {
        if let Ok(pid) = self.running_pid(component) {
            return Err(ControlPlaneError::AlreadyRunning {
                component: component.name(),
                pid,
            });
        }
        // An exited process left in the list is reaped and replaced.
        self.stop_component(component).await;
        let (binary, state, layout) =
            (self.binary.clone(), self.state.clone(), self.layout.clone());
        self.spawn(&binary, &state, &layout, component)?;
        let client = kube::Client::try_from(self.config.clone()).map_err(|error| {
            ControlPlaneError::Kubeconfig {
                path: state.kubeconfig(),
                message: error.to_string(),
            }
        })?;
        let timeouts = self.timeouts;
        let etcd_port = self.ports.etcd_client;
        let watched = Some(component);
        match component {
            Component::Etcd | Component::KubeApiserver => {
                if component == Component::Etcd {
                    self.wait_for(watched, "etcd", timeouts.etcd, &state, || {
                        readiness::etcd_healthy(etcd_port)
                    })
                    .await?;
                }
                // After etcd, a running kube-apiserver must answer again as well.
                if component == Component::KubeApiserver
                    || self.is_running(Component::KubeApiserver)
                {
                    self.wait_for(
                        watched,
                        "kube-apiserver",
                        timeouts.apiserver,
                        &state,
                        || readiness::apiserver_ready(&client),
                    )
                    .await?;
                }
            }
            Component::KubeControllerManager | Component::KubeScheduler => {
                let health = self.health_client(component)?;
                self.wait_for(
                    watched,
                    component.name(),
                    timeouts.controllers,
                    &state,
                    || readiness::healthz(&health),
                )
                .await?;
            }
        }
        tracing::info!(component = component.name(), "started again");
        Ok(())
    }

    /// [`ControlPlane::stop_component`] then [`ControlPlane::start_component`].
    pub async fn restart_component(
        &mut self,
        component: Component,
    ) -> Result<(), ControlPlaneError> {
        self.stop_component(component).await;
        self.start_component(component).await
    }

    /// Freezes `component` (SIGSTOP to its process group): it holds its connections and ports
    /// but answers nothing, as a stalled disk or a hung process does. [`ControlPlane::resume`]
    /// thaws it.
    /// Returns once the process is stopped: the kernel stops it asynchronously, and a caller
    /// that pauses a component acts on a frozen one.
    pub fn pause(&mut self, component: Component) -> Result<(), ControlPlaneError> {
        const WAIT: Duration = Duration::from_secs(5);
        let pid = self.running_pid(component)?;
        process::signal_group(pid, nix::sys::signal::Signal::SIGSTOP);
        let sent = Instant::now();
        while !process::is_stopped(pid) {
            if sent.elapsed() > WAIT {
                return Err(ControlPlaneError::NotFrozen {
                    component: component.name(),
                    pid,
                    waited: WAIT,
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        tracing::info!(component = component.name(), pid, "paused");
        Ok(())
    }

    /// Thaws a component frozen by [`ControlPlane::pause`] (SIGCONT).
    pub fn resume(&mut self, component: Component) -> Result<(), ControlPlaneError> {
        let pid = self.running_pid(component)?;
        process::signal_group(pid, nix::sys::signal::Signal::SIGCONT);
        tracing::info!(component = component.name(), pid, "resumed");
        Ok(())
    }

    /// Starts again the components that exited by themselves, as the kubelet restarts a crashed
    /// static pod: the first restart at once, later ones after a back-off
    /// ([`crash_restart_delay`]). kube-controller-manager, for one, exits when the API server
    /// vanishes while it starts its controllers. Returns the components started; call it
    /// periodically, on the thread that started the control plane.
    pub fn restart_crashed(&mut self) -> Vec<Component> {
        let now = Instant::now();
        let mut due = Vec::new();
        for (component, process) in &mut self.processes {
            let Some(status) = process.exited() else {
                continue;
            };
            let record = self.crashes.entry(*component).or_insert(CrashRecord {
                started: now,
                crashes: 0,
                noticed_exit: None,
            });
            let noticed = match record.noticed_exit {
                Some(noticed) => noticed,
                None => {
                    if now.duration_since(record.started) >= CRASH_RESET_AFTER {
                        record.crashes = 0;
                    }
                    let delay = crash_restart_delay(record.crashes);
                    tracing::warn!(component = component.name(), %status, ?delay,
                        log = %process.log().display(),
                        "exited by itself; starting it again as the kubelet would");
                    record.noticed_exit = Some(now);
                    now
                }
            };
            if now >= noticed + crash_restart_delay(record.crashes) {
                due.push(*component);
            }
        }
        let (binary, state, layout) =
            (self.binary.clone(), self.state.clone(), self.layout.clone());
        due.retain(|component| {
            self.processes.retain(|(running, _)| running != component);
            let crashes = self.crashes.get(component).map_or(0, |r| r.crashes);
            match self.spawn(&binary, &state, &layout, *component) {
                Ok(()) => {
                    if let Some(record) = self.crashes.get_mut(component) {
                        record.crashes = crashes + 1;
                    }
                    true
                }
                Err(error) => {
                    tracing::error!(component = component.name(), %error, "starting a crashed component again");
                    false
                }
            }
        });
        due
    }

    fn running_pid(&mut self, component: Component) -> Result<u32, ControlPlaneError> {
        self.processes
            .iter_mut()
            .find(|(running, _)| *running == component)
            .and_then(|(_, process)| process.exited().is_none().then(|| process.pid()))
            .ok_or(ControlPlaneError::NotRunning {
                component: component.name(),
            })
    }

    fn is_running(&mut self, component: Component) -> bool {
        self.running_pid(component).is_ok()
    }

    /// A client for the `/healthz` of kube-controller-manager or kube-scheduler, whose serving
    /// certificates are self-signed (in their `--cert-dir`).
    fn health_client(&self, component: Component) -> Result<kube::Client, ControlPlaneError> {
        let mut config = self.config.clone();
        let url = format!("https://127.0.0.1:{}", component.port(&self.ports));
        config.cluster_url =
            url.parse().map_err(
                |error: http::uri::InvalidUri| ControlPlaneError::Kubeconfig {
                    path: self.state.kubeconfig(),
                    message: format!("{url}: {error}"),
                },
            )?;
        config.accept_invalid_certs = true;
        config.root_cert = None;
        kube::Client::try_from(config).map_err(|error| ControlPlaneError::Kubeconfig {
            path: self.state.kubeconfig(),
            message: error.to_string(),
        })
    }

    /// The API server's URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// Client configuration for the cluster-admin user.
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// Component names and process ids, in start order.
    pub fn pids(&self) -> Vec<(Component, u32)> {
        self.processes
            .iter()
            .map(|(component, process)| (*component, process.pid()))
            .collect()
    }

    /// The first component that has exited since start, if any (a crashed control plane).
    pub fn exited_component(&mut self) -> Option<(Component, std::process::ExitStatus)> {
        self.processes
            .iter_mut()
            .find_map(|(component, process)| process.exited().map(|status| (*component, status)))
    }

    /// Stops the API clients first (controllers, scheduler), then the API server, then etcd,
    /// so nothing logs errors about a store that vanished under it.
    pub async fn stop(mut self) {
        let mut etcd = Vec::new();
        let mut others = Vec::new();
        for (component, process) in self.processes.drain(..) {
            match component {
                Component::Etcd => etcd.push(process),
                _ => others.push(process),
            }
        }
        futures::future::join_all(others.iter_mut().map(|process| process.stop(STOP_GRACE))).await;
        futures::future::join_all(etcd.iter_mut().map(|process| process.stop(STOP_GRACE))).await;
    }
}

async fn client_config(
    kubeconfig_text: &str,
    path: &Path,
) -> Result<kube::Config, ControlPlaneError> {
    let error = |message: String| ControlPlaneError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let parsed =
        kube::config::Kubeconfig::from_yaml(kubeconfig_text).map_err(|e| error(e.to_string()))?;
    kube::Config::from_custom_kubeconfig(parsed, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| error(e.to_string()))
}

fn reset_dir(dir: &Path) -> Result<(), ControlPlaneError> {
    let io = |action, source| ControlPlaneError::Io {
        action,
        path: dir.to_path_buf(),
        source,
    };
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(source) if source.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(io("removing", source)),
    }
    std::fs::create_dir_all(dir).map_err(|source| io("creating", source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crashing_component_backs_off_as_a_crashing_container() {
        let cases = [
            (0, 0),
            (1, 10),
            (2, 20),
            (3, 40),
            (5, 160),
            (6, 300),
            (40, 300),
        ];
        for (crashes, seconds) in cases {
            assert_eq!(
                crash_restart_delay(crashes),
                Duration::from_secs(seconds),
                "{crashes} crashes"
            );
        }
    }
}
