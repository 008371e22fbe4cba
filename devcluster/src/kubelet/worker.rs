//! One task per pod bound to a simulated node: admission, starting containers as the pure plan
//! says, collecting exits, reporting status, the pod's active deadline, reboots, and graceful
//! deletion.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodCondition};
use kube::api::{Api, DeleteParams, Patch, Preconditions};
use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::admission::{self, Rejection};
use super::conventions::now;
use super::launch::{self, StartFailure, StartIds};
use super::pod_state::{
    ContainerRecord, ContainerRef, PodRuntime, RestartPolicy, StartErrorKind, Terminated,
};
use super::probe::{self, Readiness, ReadinessProbe};
use super::runtime::{ExitEvent, KILL_WAIT, Running, StartFiles, Supervisor};
use super::status::{self, StatusContext};
use crate::network::{self, PodNamespace};
use crate::node::context::{Power, SimContext, SimNode, patch_params};
use crate::node::object;

/// The latest state of the pod, from the kubelet's watch.
#[derive(Debug, Clone)]
pub(crate) enum PodUpdate {
    Present(Arc<Pod>),
    /// Deleted from the API (force deletion, or our own final delete).
    Gone,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    /// Not admitted yet.
    New,
    /// Admitted: containers run.
    Active,
    /// Refused by admission: reported Failed, nothing runs.
    Rejected(Rejection),
    /// Already terminal when this kubelet first saw it: nothing runs, nothing is reported.
    Finished,
}

pub(crate) async fn run(
    ctx: Arc<SimContext>,
    node: Arc<SimNode>,
    uid: String,
    updates: watch::Receiver<PodUpdate>,
) {
    let pod = match &*updates.borrow() {
        PodUpdate::Present(pod) => pod.clone(),
        PodUpdate::Gone => return,
    };
    let mut worker = Worker::new(ctx, node, uid, updates, pod);
    worker.run().await;
    worker.cleanup();
}

struct Worker {
    ctx: Arc<SimContext>,
    node: Arc<SimNode>,
    uid: String,
    updates: watch::Receiver<PodUpdate>,
    power: watch::Receiver<Power>,
    pod: Arc<Pod>,
    gone: bool,
    mode: Mode,
    rt: PodRuntime,
    running: HashMap<ContainerRef, Running>,
    supervisor: Supervisor,
    last_sent: Option<serde_json::Value>,
    last_conditions: Vec<PodCondition>,
    retry_at: Option<Timestamp>,
    start_time: Timestamp,
    pod_ip: String,
    ip_slot: Option<u8>,
    /// The pod's network namespace, created before its first container starts.
    network: Option<PodNamespace>,
    pod_dir: PathBuf,
    /// Running main containers with a readiness probe.
    probed: HashMap<ContainerRef, Probed>,
    probe_results: mpsc::UnboundedReceiver<(ProbeTag, bool)>,
    probe_sender: mpsc::UnboundedSender<(ProbeTag, bool)>,
}

/// Which run of which container a probe result is about.
type ProbeTag = (ContainerRef, u32);

/// One container run's readiness probe: its results so far, and the task probing it (stopped
/// when the run ends). Without a probe (one that names no port of the container) it never
/// becomes ready, as the kubelet's probe errors keep it unready.
struct Probed {
    attempt: u32,
    probe: Option<ReadinessProbe>,
    readiness: Readiness,
    task: Option<tokio::task::AbortHandle>,
}

impl Drop for Probed {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl Worker {
    fn new(
        ctx: Arc<SimContext>,
        node: Arc<SimNode>,
        uid: String,
        updates: watch::Receiver<PodUpdate>,
        pod: Arc<Pod>,
    ) -> Self {
        let spec = pod.spec.clone().unwrap_or_default();
        let status = pod.status.as_ref();
        let records = |containers: &[Container], statuses: Option<&Vec<ContainerStatus>>| {
            containers
                .iter()
                .map(|c| {
                    let mut record =
                        ContainerRecord::new(&c.name, c.image.as_deref().unwrap_or(""));
                    // Another kubelet process ran this pod before: keep counting restarts.
                    if let Some(s) = statuses.into_iter().flatten().find(|s| s.name == c.name)
                        && s.state.as_ref().is_some_and(|st| st.waiting.is_none())
                    {
                        record.attempts = u32::try_from(s.restart_count).unwrap_or(0) + 1;
                    }
                    record
                })
                .collect()
        };
        let mut rt = PodRuntime::new(
            RestartPolicy::from_api(spec.restart_policy.as_deref()),
            records(
                spec.init_containers.as_deref().unwrap_or_default(),
                status.and_then(|s| s.init_container_statuses.as_ref()),
            ),
            records(
                &spec.containers,
                status.and_then(|s| s.container_statuses.as_ref()),
            ),
        );
        let (pod_ip, ip_slot) = pod_address(&ctx, &node, spec.host_network.unwrap_or(false));
        let start_time = status
            .and_then(|s| s.start_time.as_ref())
            .map_or_else(now, |t| t.0);
        rt.active_deadline = active_deadline(&spec, start_time);
        let (probe_sender, probe_results) = mpsc::unbounded_channel();
        Self {
            power: node.power.subscribe(),
            pod_dir: node.paths.pods.join(&uid),
            ctx,
            node,
            uid,
            updates,
            pod,
            gone: false,
            mode: Mode::New,
            rt,
            running: HashMap::new(),
            supervisor: Supervisor::new(),
            last_sent: None,
            last_conditions: Vec::new(),
            retry_at: None,
            start_time,
            pod_ip,
            ip_slot,
            network: None,
            probed: HashMap::new(),
            probe_results,
            probe_sender,
        }
    }

    async fn run(&mut self) {
        loop {
            self.refresh();
            if self.gone {
                self.stop_all(Duration::ZERO).await;
                return;
            }
            if !self.node.is_up() {
                if !self.ride_out_shutdown().await {
                    return;
                }
                continue;
            }
            if self.pod.metadata.deletion_timestamp.is_some() {
                self.terminate().await;
                return;
            }
            if self.mode == Mode::New {
                self.admit().await;
            }
            let mut wake = None;
            if self.mode == Mode::Active {
                let plan = self.rt.plan(now());
                if plan.stop {
                    // Past `activeDeadlineSeconds`: the kubelet kills the containers with the
                    // pod's termination grace period and reports the pod Failed once they are gone.
                    tracing::info!(pod = %self.pod_ref(), "pod passed its active deadline; stopping its containers");
                    self.stop_all(self.termination_grace(false)).await;
                    continue;
                }
                if !plan.start.is_empty() {
                    for container in plan.start {
                        self.start_container(container).await;
                    }
                    continue;
                }
                wake = plan.wake_at;
                if self.rt.terminal.is_some() {
                    self.release_admission();
                }
            }
            self.publish().await;
            let wake = match (wake, self.retry_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.wait(wake).await;
        }
    }

    /// Takes the latest pod from the watch. `activeDeadlineSeconds` may be changed on a running
    /// pod (shortened or set), so the deadline follows the spec.
    fn refresh(&mut self) {
        match &*self.updates.borrow_and_update() {
            PodUpdate::Present(pod) => self.pod = pod.clone(),
            PodUpdate::Gone => self.gone = true,
        }
        if let Some(spec) = &self.pod.spec {
            self.rt.active_deadline = active_deadline(spec, self.start_time);
        }
    }

    /// How long containers get between SIGTERM and SIGKILL: the deletion's grace period when
    /// the pod is being deleted, else `terminationGracePeriodSeconds` (default 30 s).
    fn termination_grace(&self, deleting: bool) -> Duration {
        let deletion = deleting
            .then_some(self.pod.metadata.deletion_grace_period_seconds)
            .flatten();
        let seconds = deletion
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30);
        Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
    }

    async fn wait(&mut self, wake: Option<Timestamp>) {
        let sleep = wake.map(|at| {
            let delay = at.duration_since(now()).unsigned_abs();
            // A second of slack: timestamps are whole seconds.
            Instant::now() + delay + Duration::from_millis(50)
        });
        tokio::select! {
            Some(exit) = self.supervisor.next_exit() => self.on_exit(exit),
            Some((tag, passed)) = self.probe_results.recv() => self.on_probe(tag, passed),
            changed = self.updates.changed() => {
                if changed.is_err() {
                    self.gone = true;
                }
            }
            _ = self.power.changed() => {}
            () = sleep_until(sleep) => {}
        }
    }

    async fn admit(&mut self) {
        if pod_phase_is_terminal(&self.pod) {
            self.mode = Mode::Finished;
            return;
        }
        let spec = self.pod.spec.clone().unwrap_or_default();
        let labels = self.node_labels(&spec).await;
        let Ok(mut admitted) = self.node.admitted.lock() else {
            return;
        };
        let others: Vec<_> = admitted
            .iter()
            .filter(|(uid, _)| **uid != self.uid)
            .map(|(_, r)| *r)
            .collect();
        match admission::admit(&spec, &labels, self.ctx.allocatable, &others) {
            Ok(requests) => {
                admitted.insert(self.uid.clone(), requests);
                self.mode = Mode::Active;
            }
            Err(rejection) => {
                tracing::info!(pod = %self.pod_ref(), reason = %rejection.reason, "pod rejected by admission");
                self.mode = Mode::Rejected(rejection);
            }
        }
    }

    /// The node's current labels, as a kubelet admits against them: from the shared Node watch,
    /// and read from the API server when they do not match the pod's selector, as the watch may
    /// not have seen a label the scheduler bound the pod by yet.
    async fn node_labels(
        &self,
        spec: &k8s_openapi::api::core::v1::PodSpec,
    ) -> std::collections::BTreeMap<String, String> {
        let cached = self.node.current_labels(&self.ctx);
        if admission::node_selector_matches(spec, &cached) {
            return cached;
        }
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.ctx.client.clone());
        match nodes.get(&self.node.name).await {
            Ok(node) => node.metadata.labels.unwrap_or_default(),
            Err(error) => {
                tracing::warn!(node = %self.node.name, %error, "failed to read the node's labels; admitting against the watched ones");
                cached
            }
        }
    }

    fn release_admission(&self) {
        if let Ok(mut admitted) = self.node.admitted.lock() {
            admitted.remove(&self.uid);
        }
    }

    fn container_spec(&self, container: ContainerRef) -> Option<Container> {
        let spec = self.pod.spec.as_ref()?;
        match container {
            ContainerRef::Init(i) => spec.init_containers.as_ref()?.get(i).cloned(),
            ContainerRef::Main(i) => spec.containers.get(i).cloned(),
        }
    }

    async fn start_container(&mut self, container: ContainerRef) {
        let (Some(spec), Some(record)) =
            (self.container_spec(container), self.rt.record(container))
        else {
            return;
        };
        let attempt = record.attempts;
        let key = format!("{}-{attempt}", spec.name);
        let host_ip = self.node.host_ip();
        let policy = self.ctx.opts.backoff;
        let network_namespace = match self.ensure_network().await {
            Ok(path) => path,
            Err(failure) => {
                self.rt
                    .on_start_failed(container, failure.kind, failure.message, now(), policy);
                return;
            }
        };
        let ids = StartIds {
            pod_dir: &self.pod_dir,
            container_key: &key,
            host_ip: &host_ip,
            pod_ip: &self.pod_ip,
            network_namespace: network_namespace.as_deref(),
        };
        let prepared = launch::prepare(&self.ctx, &self.node, &self.pod, &spec, ids).await;
        let started = prepared.and_then(|launch| {
            let files = StartFiles {
                spec: self.pod_dir.join("containers").join(format!("{key}.json")),
                log: self.log_path(&spec.name, attempt),
            };
            self.supervisor.start(
                &self.node,
                self.ctx.processes.as_ref(),
                launch,
                container,
                attempt,
                &files,
            )
        });
        let at = now();
        match started {
            Ok(running) => {
                let id = format!(
                    "devcluster://{}-{}-{attempt}",
                    self.uid.get(..8).unwrap_or(&self.uid),
                    spec.name
                );
                self.rt.on_started(container, &id, at, policy);
                self.running.insert(container, running);
                if let ContainerRef::Main(_) = container {
                    self.start_probe(container, attempt, &spec);
                }
                tracing::debug!(pod = %self.pod_ref(), container = %spec.name, attempt, "container started");
            }
            Err(failure) => {
                tracing::info!(pod = %self.pod_ref(), container = %spec.name, reason = ?failure.kind,
                    message = %failure.message, "container failed to start");
                self.rt
                    .on_start_failed(container, failure.kind, failure.message, at, policy);
            }
        }
    }

    /// The pod's network namespace, created on first use when the pod has one (a pod on a full
    /// node with a pod network, not `hostNetwork`); as the kubelet's pod sandbox, it outlives
    /// container restarts and goes with the pod.
    async fn ensure_network(&mut self) -> Result<Option<PathBuf>, StartFailure> {
        if let Some(namespace) = &self.network {
            return Ok(Some(namespace.path()));
        }
        let (Some(network), Some(processes), Some(slot)) =
            (self.ctx.network, &self.ctx.processes, self.ip_slot)
        else {
            return Ok(None);
        };
        let interface = network.pod_interface(self.node.index, slot);
        let namespace = PodNamespace::create(&processes.devcluster_bin, &interface)
            .await
            .map_err(|e| {
                StartFailure::new(
                    StartErrorKind::Create,
                    format!(
                        "failed to create the pod's network namespace: {}",
                        crate::isolation::error_chain(&e)
                    ),
                )
            })?;
        let path = namespace.path();
        self.network = Some(namespace);
        Ok(Some(path))
    }

    fn log_path(&self, container: &str, attempt: u32) -> PathBuf {
        let meta = &self.pod.metadata;
        let dir = format!(
            "{}_{}_{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
            self.uid
        );
        self.node
            .paths
            .logs
            .join(dir)
            .join(container)
            .join(format!("{attempt}.log"))
    }

    /// Starts probing a main container's new run when it has a readiness probe.
    fn start_probe(&mut self, container: ContainerRef, attempt: u32, spec: &Container) {
        self.probed.remove(&container);
        let probe = match probe::readiness_probe(spec) {
            Ok(None) => return,
            Ok(Some(probe)) => Some(probe),
            Err(message) => {
                tracing::warn!(pod = %self.pod_ref(), %message, "readiness probe cannot run; the container stays unready");
                None
            }
        };
        let task = probe.clone().map(|probe| {
            let results = self.probe_sender.clone();
            let pod_ip = self.pod_ip.clone();
            tokio::spawn(probe::run(probe, pod_ip, (container, attempt), results)).abort_handle()
        });
        self.probed.insert(
            container,
            Probed {
                attempt,
                probe,
                readiness: Readiness::default(),
                task,
            },
        );
    }

    fn on_probe(&mut self, (container, attempt): ProbeTag, passed: bool) {
        let pod = self.pod_ref();
        let Some(probed) = self.probed.get_mut(&container) else {
            return;
        };
        if probed.attempt != attempt {
            return;
        }
        if let Some(probe) = &probed.probe
            && probed.readiness.observe(passed, probe)
        {
            tracing::debug!(%pod, container = ?container, ready = probed.readiness.ready, "readiness changed");
        }
    }

    /// Names of the main containers their readiness probe holds back.
    fn unready_by_probe(&self) -> Vec<String> {
        self.probed
            .iter()
            .filter(|(_, probed)| !probed.readiness.ready)
            .filter_map(|(container, _)| self.rt.record(*container).map(|r| r.name.clone()))
            .collect()
    }

    fn on_exit(&mut self, exit: ExitEvent) {
        let current = self.running.get(&exit.container).map(|r| r.attempt);
        if current != Some(exit.attempt) {
            return;
        }
        self.running.remove(&exit.container);
        self.probed.remove(&exit.container);
        let Some(run) = self
            .rt
            .record(exit.container)
            .and_then(|r| r.current.clone())
        else {
            return;
        };
        let terminated = match exit.start_error {
            Some(message) => Terminated {
                exit_code: 128,
                signal: None,
                reason: "StartError".to_owned(),
                message: Some(message.trim().to_owned()),
                started_at: Some(run.started_at),
                finished_at: exit.at,
                container_id: Some(run.container_id.clone()),
            },
            None => Terminated::exited(
                exit.code,
                exit.signal,
                run.started_at,
                exit.at,
                &run.container_id,
            ),
        };
        tracing::debug!(pod = %self.pod_ref(), container = ?exit.container, code = terminated.exit_code, "container exited");
        self.rt.on_exited(exit.container, terminated);
    }

    /// Sends SIGTERM to every running container, SIGKILL after `grace`, and collects the exits.
    async fn stop_all(&mut self, grace: Duration) {
        if self.running.is_empty() {
            return;
        }
        let mut kill_at = Instant::now() + grace;
        if !grace.is_zero() {
            for running in self.running.values() {
                running.signal(Signal::SIGTERM);
            }
        }
        let mut killed = false;
        while !self.running.is_empty() {
            if !killed && Instant::now() >= kill_at {
                for running in self.running.values() {
                    running.signal(Signal::SIGKILL);
                }
                killed = true;
                kill_at = Instant::now() + KILL_WAIT;
            } else if killed && Instant::now() >= kill_at {
                tracing::warn!(pod = %self.pod_ref(), "containers did not exit after SIGKILL");
                self.running.clear();
                return;
            }
            tokio::select! {
                Some(exit) = self.supervisor.next_exit() => self.on_exit(exit),
                () = tokio::time::sleep_until(kill_at) => {}
                changed = self.updates.changed(), if !killed => {
                    // Force-deleted while terminating: kill now.
                    if changed.is_err() || matches!(*self.updates.borrow(), PodUpdate::Gone) {
                        kill_at = Instant::now();
                    }
                }
            }
        }
    }

    /// The node is down: kill everything as a shutdown does, report nothing, wait for boot.
    /// Returns false when the pod disappeared meanwhile.
    async fn ride_out_shutdown(&mut self) -> bool {
        let killed: Vec<ContainerRef> = self.rt.running().collect();
        // A dead machine gives its processes no grace.
        let grace = if *self.power.borrow() == Power::Off {
            Duration::ZERO
        } else {
            self.ctx.opts.shutdown_grace
        };
        self.stop_all(grace).await;
        // The runtime goes down with the node: after the boot these read as lost (255, Unknown).
        for container in killed {
            self.rt.on_lost(container);
        }
        self.rt.on_sandbox_lost(now());
        loop {
            if *self.power.borrow_and_update() == Power::Up {
                return true;
            }
            tokio::select! {
                changed = self.power.changed() => {
                    if changed.is_err() {
                        return false;
                    }
                }
                changed = self.updates.changed() => {
                    if changed.is_err() || matches!(*self.updates.borrow(), PodUpdate::Gone) {
                        return false;
                    }
                }
            }
        }
    }

    /// Graceful deletion, as the kubelet (1.27 and later) does it: stop the containers within the
    /// grace period, report the terminal phase (`Failed` unless every container succeeded), then
    /// remove the pod from the API. A pod never admitted ends `Failed` too (the status manager's
    /// `TerminatePod`); one already terminal keeps its status.
    async fn terminate(&mut self) {
        if self.mode == Mode::New {
            self.mode = if pod_phase_is_terminal(&self.pod) {
                Mode::Finished
            } else {
                Mode::Active
            };
        }
        self.stop_all(self.termination_grace(true)).await;
        if self.mode == Mode::Active {
            self.rt.on_terminated_by_deletion();
            self.publish().await;
        }
        let mut removed = self.remove_from_api().await;
        // The pod outlives that delete while it has finalizers (the Job controller's
        // `batch.kubernetes.io/job-tracking`, removed once it has counted the terminal phase).
        // Like the kubelet's worker for a terminated pod, this one does nothing more until the
        // API server removes it: no restart, no further writes, no second worker.
        loop {
            if self.gone {
                return;
            }
            let retry = (!removed).then(|| Instant::now() + Duration::from_secs(1));
            tokio::select! {
                changed = self.updates.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.refresh();
                }
                () = sleep_until(retry) => removed = self.remove_from_api().await,
            }
        }
    }

    /// The kubelet's final delete of a terminated pod (grace 0, for this UID only); false when it
    /// should be tried again.
    async fn remove_from_api(&self) -> bool {
        let api: Api<Pod> = Api::namespaced(
            self.ctx.client.clone(),
            self.pod.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let name = self.pod.metadata.name.clone().unwrap_or_default();
        let _permit = self.ctx.writes.acquire().await;
        match api.delete(&name, &params).await {
            Ok(_) => {
                tracing::debug!(pod = %self.pod_ref(), "pod removed after termination");
                true
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => true,
            Err(error) => {
                tracing::warn!(pod = %self.pod_ref(), %error, "failed to remove terminated pod; retrying");
                false
            }
        }
    }

    /// Patches `pods/status` when the status changed since the last patch.
    async fn publish(&mut self) {
        if self.gone {
            return;
        }
        let meta = &self.pod.metadata;
        let (name, namespace) = (
            meta.name.clone().unwrap_or_default(),
            meta.namespace.clone().unwrap_or_default(),
        );
        let mut existing = self.last_conditions.clone();
        existing.extend(
            self.pod
                .status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .cloned(),
        );
        let host_ip = self.node.host_ip();
        let unready_by_probe = self.unready_by_probe();
        let ctx = StatusContext {
            name: &name,
            namespace: &namespace,
            uid: &self.uid,
            host_ip: &host_ip,
            pod_ip: &self.pod_ip,
            start_time: self.start_time,
            existing_conditions: &existing,
            unready_by_probe: &unready_by_probe,
            now: now(),
        };
        let status = match &self.mode {
            Mode::New | Mode::Finished => return,
            Mode::Active => status::pod_status(&self.rt, &ctx),
            Mode::Rejected(r) => status::rejected_status(&r.reason, &r.message, &ctx),
        };
        let Ok(value) = serde_json::to_value(&status) else {
            return;
        };
        if self.last_sent.as_ref() == Some(&value) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &namespace);
        let patch = serde_json::json!({ "status": value });
        let result = {
            let _permit = self.ctx.writes.acquire().await;
            api.patch_status(&name, &patch_params(), &Patch::Strategic(patch))
                .await
        };
        match result {
            Ok(_) => {
                self.last_conditions = status.conditions.unwrap_or_default();
                self.last_sent = Some(value);
                self.retry_at = None;
            }
            Err(kube::Error::Api(e)) if e.code == 404 => self.retry_at = None,
            Err(error) => {
                tracing::warn!(pod = %self.pod_ref(), %error, "failed to update pod status");
                self.retry_at = now().checked_add(jiff::SignedDuration::from_secs(1)).ok();
            }
        }
    }

    fn pod_ref(&self) -> String {
        format!(
            "{}/{}",
            self.pod.metadata.namespace.as_deref().unwrap_or_default(),
            self.pod.metadata.name.as_deref().unwrap_or_default()
        )
    }

    fn cleanup(&mut self) {
        self.release_admission();
        // Before the slot is free again: its veth pair goes with the namespace.
        self.network = None;
        if let Some(slot) = self.ip_slot.take()
            && let Ok(mut used) = self.node.pod_ip_slots.lock()
        {
            used.remove(&slot);
        }
        if self.pod_dir.exists()
            && let Err(error) = std::fs::remove_dir_all(&self.pod_dir)
        {
            tracing::debug!(path = %self.pod_dir.display(), %error, "failed to remove pod directory");
        }
    }
}

/// The pod's IP and the node's address slot it holds: the node's address for `hostNetwork` pods
/// (and when every slot is taken); else an address of the node's pod range when the cluster has a
/// pod network, a loopback address of the node otherwise.
fn pod_address(ctx: &SimContext, node: &SimNode, host_network: bool) -> (String, Option<u8>) {
    if host_network {
        return (node.host_ip(), None);
    }
    let network = ctx.network.filter(|_| !node.light);
    let slots = match network {
        Some(_) => network::FIRST_POD_HOST..=network::LAST_POD_HOST,
        None => 1..=254u8,
    };
    let slot = node.pod_ip_slots.lock().ok().and_then(|mut used| {
        let free = slots.clone().find(|s| !used.contains(s))?;
        used.insert(free);
        Some(free)
    });
    match (slot, network) {
        (Some(slot), Some(network)) => (
            network.pod_address(node.index, slot).to_string(),
            Some(slot),
        ),
        (Some(slot), None) => (object::pod_ip(node.index, slot), Some(slot)),
        (None, _) => (node.host_ip(), None),
    }
}

/// Whether the API shows the pod `Succeeded` or `Failed`.
fn pod_phase_is_terminal(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| matches!(p, "Succeeded" | "Failed"))
}

/// When the pod's `activeDeadlineSeconds` runs out, counted from its start time as the
/// kubelet's active deadline handler counts it.
fn active_deadline(
    spec: &k8s_openapi::api::core::v1::PodSpec,
    start_time: Timestamp,
) -> Option<Timestamp> {
    let seconds = spec.active_deadline_seconds?;
    start_time
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .ok()
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
