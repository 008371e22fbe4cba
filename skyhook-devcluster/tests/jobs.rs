//! `batch/v1` Jobs run by the real Job, TTL-after-finished and garbage collector controllers of
//! kube-controller-manager on simulated nodes: the simulated kubelet must do for Job pods what a
//! real kubelet does (back-off limits, pod and Job deadlines, suspension, eviction under a pod
//! failure policy, in-place restarts, TTL collection, replacement only of failed pods, admission
//! refusals).
//!
//! One cluster serves every test of this file; each test uses its own namespace. Every wait is on
//! API state (watches), never a fixed sleep.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{Context, Result, bail};
use devcluster::{DevCluster, DevClusterOptions};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Namespace, Pod};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use serde_json::json;

mod common;
use common::{WAIT, phase, wait_pod};

/// The image whose containers run a shell script on the node (`/bin/sh -c ARGS`): it sleeps,
/// exits with a code and traps SIGTERM.
const SHELL: &str = "devcluster.local/shell";

struct Fixture {
    config: kube::Config,
    /// Host roots of `node-1` and `node-2`, by node name.
    roots: BTreeMap<String, PathBuf>,
    _cluster: DevCluster,
}

/// Starts the shared cluster once: the control plane and two full nodes.
fn fixture() -> Result<&'static Fixture> {
    static FIXTURE: OnceLock<Result<Fixture, String>> = OnceLock::new();
    FIXTURE
        .get_or_init(|| {
            // `start_blocking` must not run on a test's runtime thread.
            std::thread::spawn(start_fixture)
                .join()
                .unwrap_or_else(|_| Err("the fixture thread panicked".to_owned()))
        })
        .as_ref()
        .map_err(|e| anyhow::anyhow!("failed to start the test cluster: {e}"))
}

fn start_fixture() -> Result<Fixture, String> {
    // A fixed directory, cleared by the next run: the fixture is never dropped.
    let state_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("devcluster-jobs-test");
    let cluster = DevCluster::start_blocking(DevClusterOptions {
        nodes: 2,
        state_dir: Some(state_dir),
        ..DevClusterOptions::default()
    })
    .map_err(|e| format!("{e:#}"))?;
    let roots = cluster
        .nodes()
        .iter()
        .filter_map(|n| Some((n.name().to_owned(), n.root()?)))
        .collect();
    Ok(Fixture {
        config: cluster.config().clone(),
        roots,
        _cluster: cluster,
    })
}

impl Fixture {
    /// A client for the calling test's runtime.
    fn client(&self) -> Result<kube::Client> {
        Ok(kube::Client::try_from(self.config.clone())?)
    }

    fn root(&self, node: &str) -> Result<&PathBuf> {
        self.roots
            .get(node)
            .with_context(|| format!("no host root for {node}"))
    }
}

/// A fresh namespace for one test, with its `default` service account (pods need it).
async fn namespace(client: &kube::Client, name: &str) -> Result<(Api<Job>, Api<Pod>)> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), name);
    tokio::time::timeout(
        WAIT,
        await_condition(accounts, "default", conditions::is_created()),
    )
    .await
    .context("waiting for the default service account")??;
    Ok((
        Api::namespaced(client.clone(), name),
        Api::namespaced(client.clone(), name),
    ))
}

/// Creates the Job `name` with `spec`; `pod_spec` is its template's pod spec.
async fn create_job(
    jobs: &Api<Job>,
    name: &str,
    spec: serde_json::Value,
    pod_spec: serde_json::Value,
) -> Result<Job> {
    let mut spec = spec;
    spec["template"] = json!({"spec": pod_spec});
    let job: Job = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))?;
    Ok(jobs.create(&PostParams::default(), &job).await?)
}

/// A pod spec running `script` in one container `main`, pinned to `node`.
fn shell_pod(node: &str, restart_policy: &str, script: &str) -> serde_json::Value {
    json!({
        "restartPolicy": restart_policy,
        "nodeSelector": {"kubernetes.io/hostname": node},
        "containers": [{"name": "main", "image": SHELL, "args": [script]}],
    })
}

/// Waits until `check` holds for the Job; `what` says what that means, for the error.
async fn wait_job(
    jobs: &Api<Job>,
    name: &str,
    what: &str,
    check: impl Fn(&Job) -> bool,
) -> Result<Job> {
    let condition = move |job: Option<&Job>| job.is_some_and(&check);
    let job = tokio::time::timeout(WAIT, await_condition(jobs.clone(), name, condition))
        .await
        .with_context(|| format!("timed out waiting for job {name} to be {what}"))??;
    job.with_context(|| format!("job {name} vanished"))
}

/// The Job's condition `type_` when it is `True`: its reason.
fn job_condition(job: &Job, type_: &str) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| c.reason.clone().unwrap_or_default())
}

fn failed_count(job: &Job) -> i32 {
    job.status.as_ref().and_then(|s| s.failed).unwrap_or(0)
}

fn succeeded_count(job: &Job) -> i32 {
    job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0)
}

/// The Job's pods, oldest first.
async fn job_pods(pods: &Api<Pod>, job: &str) -> Result<Vec<Pod>> {
    let mut list = pods
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await?
        .items;
    list.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
    Ok(list)
}

/// Waits until the Job has a pod for which `check` holds.
async fn wait_job_pod(
    pods: &Api<Pod>,
    job: &str,
    what: &str,
    check: impl Fn(&Pod) -> bool,
) -> Result<Pod> {
    let config = watcher::Config::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    let mut matching = watcher(pods.clone(), config)
        .try_filter_map(|event| {
            let hit = match event {
                watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
                    check(&pod).then_some(pod)
                }
                _ => None,
            };
            futures::future::ready(Ok(hit))
        })
        .boxed_local();
    match tokio::time::timeout(WAIT, matching.try_next()).await {
        Ok(Ok(Some(pod))) => Ok(pod),
        Ok(Ok(None)) => bail!("the pod watch of job {job} ended before a pod was {what}"),
        Ok(Err(e)) => Err(e).with_context(|| format!("watching the pods of job {job}")),
        Err(_) => bail!("timed out waiting for a pod of job {job} to be {what}"),
    }
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

async fn wait_pod_removed(pods: &Api<Pod>, pod: &Pod) -> Result<()> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), &name, conditions::is_deleted(&uid(pod))),
    )
    .await
    .with_context(|| format!("timed out waiting for pod {name} to be removed"))??;
    Ok(())
}

fn main_status(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == "main")
}

fn terminated(pod: &Pod) -> Option<&ContainerStateTerminated> {
    main_status(pod)?.state.as_ref()?.terminated.as_ref()
}

fn container_running(pod: &Pod) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
}

fn pod_has_condition(pod: &Pod, type_: &str) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// What a watch of pods delivered, in order: `(deleted, pod)`.
type Seen = Arc<Mutex<Vec<(bool, Pod)>>>;

/// Records every version of the pods matching `labels` from now on, in the order the API server
/// delivered them, until dropped.
struct PodRecorder {
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl PodRecorder {
    /// Returns once the watch has listed the current pods, so nothing after it is missed.
    async fn start(pods: &Api<Pod>, labels: &str) -> Result<Self> {
        let seen: Seen = Arc::default();
        let (listed, listed_rx) = tokio::sync::oneshot::channel();
        let mut stream = watcher(pods.clone(), watcher::Config::default().labels(labels)).boxed();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed);
            while let Some(event) = stream.next().await {
                let Ok(mut seen) = record.lock() else {
                    return;
                };
                match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                        seen.push((false, pod));
                    }
                    Ok(watcher::Event::Delete(pod)) => seen.push((true, pod)),
                    Ok(watcher::Event::InitDone) => {
                        if let Some(listed) = listed.take() {
                            let _ = listed.send(());
                        }
                    }
                    Ok(watcher::Event::Init) | Err(_) => {}
                }
            }
        });
        tokio::time::timeout(WAIT, listed_rx)
            .await
            .context("timed out listing pods for the recorder")??;
        Ok(Self { seen, task })
    }

    /// Every version of the pod with this UID, in order, once the recorder's own watch has
    /// delivered its deletion: the pod being gone from the API server says nothing of whether
    /// this watch has caught up.
    async fn versions_until_deleted(&self, uid: &str) -> Result<Vec<(bool, Pod)>> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let versions = self.versions(uid);
            if versions.iter().any(|(deleted, _)| *deleted) {
                return Ok(versions);
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "the recorder never saw pod {uid} deleted: {} versions",
                    versions.len()
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Every version of the pod with this UID seen so far, in order.
    fn versions(&self, uid: &str) -> Vec<(bool, Pod)> {
        self.seen
            .lock()
            .map(|seen| {
                seen.iter()
                    .filter(|(_, p)| p.metadata.uid.as_deref() == Some(uid))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    fn all(&self) -> Vec<(bool, Pod)> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for PodRecorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The kubelet never reports a terminal phase while a container may still run, and once a pod
/// is terminal it stays so.
fn assert_terminal_only_when_stopped(versions: &[(bool, Pod)]) {
    let mut was_terminal = false;
    for (_, pod) in versions {
        let terminal = matches!(phase(pod), "Succeeded" | "Failed");
        assert!(
            !(terminal && container_running(pod)),
            "pod reported {} with a running container: {:?}",
            phase(pod),
            pod.status
        );
        assert!(
            terminal || !was_terminal,
            "pod left its terminal phase for {}",
            phase(pod)
        );
        was_terminal |= terminal;
    }
}

/// (a) Every failed pod counts until the back-off limit: three pods, then the Job fails.
#[tokio::test]
async fn a_job_fails_after_its_backoff_limit_of_failed_pods() -> Result<()> {
    let fx = fixture()?;
    let (jobs, pods) = namespace(&fx.client()?, "jobs-backoff").await?;
    create_job(
        &jobs,
        "fails",
        json!({"backoffLimit": 2}),
        shell_pod("node-1", "Never", "exit 1"),
    )
    .await?;
    let job = wait_job(&jobs, "fails", "Failed", |j| {
        job_condition(j, "Failed").is_some()
    })
    .await?;
    assert_eq!(
        job_condition(&job, "Failed").as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(failed_count(&job), 3);
    let all = job_pods(&pods, "fails").await?;
    assert_eq!(all.len(), 3, "one pod per attempt");
    for pod in &all {
        assert_eq!(phase(pod), "Failed");
        let term = terminated(pod).context("a terminated container")?;
        assert_eq!((term.exit_code, term.reason.as_deref()), (1, Some("Error")));
    }
    Ok(())
}

/// (b) The pod's own `activeDeadlineSeconds`: the kubelet stops the containers on its clock
/// (nothing else changes meanwhile), with their grace period, and fails the pod
/// `DeadlineExceeded` only once they have exited.
#[tokio::test]
async fn a_pod_past_its_active_deadline_is_stopped_and_fails_the_job() -> Result<()> {
    let fx = fixture()?;
    let (jobs, pods) = namespace(&fx.client()?, "jobs-pod-deadline").await?;
    let recorder = PodRecorder::start(&pods, "batch.kubernetes.io/job-name=late").await?;
    let mut pod_spec = shell_pod(
        "node-2",
        "Never",
        "trap 'sleep 1; exit 7' TERM; while true; do sleep 0.2; done",
    );
    pod_spec["activeDeadlineSeconds"] = json!(2);
    pod_spec["terminationGracePeriodSeconds"] = json!(20);
    create_job(&jobs, "late", json!({"backoffLimit": 0}), pod_spec).await?;

    let pod = wait_job_pod(&pods, "late", "Failed", |p| phase(p) == "Failed").await?;
    let status = pod.status.clone().context("status")?;
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
    let term = terminated(&pod).context("a terminated container")?;
    assert_eq!(
        term.exit_code, 7,
        "SIGTERM and its grace period, not SIGKILL"
    );
    let start = status.start_time.context("start time")?.0;
    let finished = term.finished_at.clone().context("finished at")?.0;
    let active = finished.duration_since(start).as_secs_f64();
    assert!(
        (2.0..15.0).contains(&active),
        "the container ended {active}s after the pod started, deadline 2s"
    );
    assert_terminal_only_when_stopped(&recorder.versions(&uid(&pod)));

    let job = wait_job(&jobs, "late", "Failed", |j| {
        job_condition(j, "Failed").is_some()
    })
    .await?;
    assert_eq!(
        job_condition(&job, "Failed").as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(failed_count(&job), 1);
    Ok(())
}

/// (c) Suspending a running Job: the Job controller deletes its pod (after taking its finalizer
/// off, so the pod does not count as failed); the kubelet delivers SIGTERM, honours the grace
/// period and reports the terminal phase before its final delete. Resuming runs a fresh pod.
#[tokio::test]
async fn a_suspended_job_terminates_its_pod_gracefully_and_resumes() -> Result<()> {
    let fx = fixture()?;
    let (jobs, pods) = namespace(&fx.client()?, "jobs-suspend").await?;
    let marker = format!("var/tmp/jobs-suspend-{}", std::process::id());
    let root = fx.root("node-1")?;
    let _ = std::fs::remove_file(root.join(&marker));
    // The first run waits until terminated and leaves the marker; the run after resuming finds
    // it and succeeds.
    let script = format!(
        "if [ -e /{marker} ]; then exit 0; fi; \
         trap 'echo terminated > /{marker}; sleep 1; exit 42' TERM; \
         while true; do sleep 0.2; done"
    );
    let mut pod_spec = shell_pod("node-1", "Never", &script);
    pod_spec["terminationGracePeriodSeconds"] = json!(20);
    create_job(&jobs, "pausable", json!({"backoffLimit": 0}), pod_spec).await?;
    let running = wait_job_pod(&pods, "pausable", "Running", container_running).await?;
    let recorder = PodRecorder::start(&pods, "batch.kubernetes.io/job-name=pausable").await?;

    jobs.patch(
        "pausable",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await?;
    wait_pod_removed(&pods, &running).await?;
    let versions = recorder.versions_until_deleted(&uid(&running)).await?;
    let (deleted, last) = versions.last().context("the pod's versions")?;
    assert!(deleted, "the last version is the deletion");
    assert_eq!(
        phase(last),
        "Failed",
        "terminal phase before the final delete"
    );
    assert_eq!(
        terminated(last).map(|t| t.exit_code),
        Some(42),
        "SIGTERM and its grace period, not SIGKILL"
    );
    assert_terminal_only_when_stopped(&versions);
    let terminating = versions
        .iter()
        .filter(|(_, p)| p.metadata.deletion_timestamp.is_some())
        .count();
    assert!(
        terminating <= 5,
        "{terminating} versions of the pod while it terminated: the kubelet keeps writing"
    );
    assert_eq!(std::fs::read_to_string(root.join(&marker))?, "terminated\n");

    let suspended = wait_job(&jobs, "pausable", "Suspended", |j| {
        job_condition(j, "Suspended").is_some()
            && j.status.as_ref().and_then(|s| s.active).unwrap_or(0) == 0
    })
    .await?;
    assert_eq!(
        job_condition(&suspended, "Suspended").as_deref(),
        Some("JobSuspended")
    );
    assert_eq!(failed_count(&suspended), 0, "suspension is no failure");

    jobs.patch(
        "pausable",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": false}})),
    )
    .await?;
    let done = wait_job(&jobs, "pausable", "Complete", |j| {
        job_condition(j, "Complete").is_some()
    })
    .await?;
    assert_eq!((succeeded_count(&done), failed_count(&done)), (1, 0));
    let _ = std::fs::remove_file(root.join(&marker));
    Ok(())
}

/// (d) Eviction through the Eviction API of a Job pod whose Job ignores disruptions: the API
/// server marks the pod `DisruptionTarget`, the kubelet keeps that condition when it reports the
/// pod Failed, so the attempt does not count and a new pod runs.
#[tokio::test]
async fn an_evicted_pod_ignored_by_the_pod_failure_policy_does_not_count() -> Result<()> {
    let fx = fixture()?;
    let (jobs, pods) = namespace(&fx.client()?, "jobs-evict").await?;
    let marker = format!("var/tmp/jobs-evict-{}", std::process::id());
    let root = fx.root("node-2")?;
    let _ = std::fs::remove_file(root.join(&marker));
    let script = format!(
        "if [ -e /{marker} ]; then exit 0; fi; touch /{marker}; while true; do sleep 0.2; done"
    );
    let policy = json!({"rules": [{"action": "Ignore",
                                    "onPodConditions": [{"type": "DisruptionTarget"}]}]});
    create_job(
        &jobs,
        "evictable",
        json!({"backoffLimit": 0, "podFailurePolicy": policy}),
        shell_pod("node-2", "Never", &script),
    )
    .await?;
    let running = wait_job_pod(&pods, "evictable", "Running", container_running).await?;
    let recorder = PodRecorder::start(&pods, "batch.kubernetes.io/job-name=evictable").await?;
    let name = running.metadata.name.clone().unwrap_or_default();
    pods.evict(&name, &EvictParams::default()).await?;
    wait_pod_removed(&pods, &running).await?;

    let versions = recorder.versions_until_deleted(&uid(&running)).await?;
    let (_, last) = versions.last().context("the evicted pod's versions")?;
    assert_eq!(phase(last), "Failed");
    assert!(
        pod_has_condition(last, "DisruptionTarget"),
        "the kubelet's status writes dropped DisruptionTarget: {:?}",
        last.status.as_ref().and_then(|s| s.conditions.as_ref())
    );
    assert_terminal_only_when_stopped(&versions);

    let done = wait_job(&jobs, "evictable", "Complete", |j| {
        job_condition(j, "Complete").is_some() || job_condition(j, "Failed").is_some()
    })
    .await?;
    assert_eq!(job_condition(&done, "Failed"), None, "{:?}", done.status);
    assert_eq!((succeeded_count(&done), failed_count(&done)), (1, 0));
    let _ = std::fs::remove_file(root.join(&marker));
    Ok(())
}

/// (e) `restartPolicy: OnFailure` restarts a failing container in place (restart count, crash
/// back-off) until the Job's own `activeDeadlineSeconds` fails the Job.
#[tokio::test]
async fn a_crash_looping_job_fails_at_its_active_deadline() -> Result<()> {
    let fx = fixture()?;
    let (jobs, pods) = namespace(&fx.client()?, "jobs-crashloop").await?;
    create_job(
        &jobs,
        "crashes",
        json!({"activeDeadlineSeconds": 8, "backoffLimit": 6}),
        shell_pod("node-1", "OnFailure", "exit 3"),
    )
    .await?;
    let looping = wait_job_pod(&pods, "crashes", "restarted in place", |p| {
        main_status(p).is_some_and(|c| c.restart_count > 0)
    })
    .await?;
    let last = main_status(&looping)
        .and_then(|c| c.last_state.as_ref()?.terminated.as_ref())
        .context("the last run's state")?;
    assert_eq!(last.exit_code, 3);
    wait_job_pod(&pods, "crashes", "in CrashLoopBackOff", |p| {
        main_status(p).and_then(|c| c.state.as_ref()?.waiting.as_ref()?.reason.as_deref())
            == Some("CrashLoopBackOff")
    })
    .await?;

    let job = wait_job(&jobs, "crashes", "Failed", |j| {
        job_condition(j, "Failed").is_some()
    })
    .await?;
    assert_eq!(
        job_condition(&job, "Failed").as_deref(),
        Some("DeadlineExceeded")
    );
    // The Job controller deletes the pod; the kubelet ends it and it goes.
    wait_pod_removed(&pods, &looping).await?;
    Ok(())
}

/// (f) `ttlSecondsAfterFinished`: the finished Job is deleted and its pods are collected.
#[tokio::test]
async fn a_finished_job_and_its_pods_are_collected_after_its_ttl() -> Result<()> {
    let fx = fixture()?;
    let (jobs, pods) = namespace(&fx.client()?, "jobs-ttl").await?;
    let job = create_job(
        &jobs,
        "brief",
        json!({"ttlSecondsAfterFinished": 1}),
        shell_pod("node-2", "Never", "exit 0"),
    )
    .await?;
    let pod = wait_job_pod(&pods, "brief", "Succeeded", |p| phase(p) == "Succeeded").await?;
    let job_uid = job.metadata.uid.clone().unwrap_or_default();
    tokio::time::timeout(
        WAIT,
        await_condition(jobs.clone(), "brief", conditions::is_deleted(&job_uid)),
    )
    .await
    .context("timed out waiting for the TTL controller to delete the job")??;
    wait_pod_removed(&pods, &pod).await?;
    assert!(job_pods(&pods, "brief").await?.is_empty());
    Ok(())
}

/// (g) `podReplacementPolicy: Failed`: a deleted pod is replaced only once the kubelet has
/// reported it Failed, not while it terminates.
#[tokio::test]
async fn a_replacement_pod_waits_for_the_failed_one_to_be_terminal() -> Result<()> {
    let fx = fixture()?;
    let (jobs, pods) = namespace(&fx.client()?, "jobs-replacement").await?;
    let marker = format!("var/tmp/jobs-replacement-{}", std::process::id());
    let root = fx.root("node-1")?;
    let _ = std::fs::remove_file(root.join(&marker));
    let script = format!(
        "if [ -e /{marker} ]; then exit 0; fi; touch /{marker}; \
         trap 'sleep 2; exit 5' TERM; while true; do sleep 0.2; done"
    );
    let mut pod_spec = shell_pod("node-1", "Never", &script);
    pod_spec["terminationGracePeriodSeconds"] = json!(20);
    create_job(
        &jobs,
        "replaced",
        json!({"backoffLimit": 1, "podReplacementPolicy": "Failed"}),
        pod_spec,
    )
    .await?;
    let first = wait_job_pod(&pods, "replaced", "Running", container_running).await?;
    let recorder = PodRecorder::start(&pods, "batch.kubernetes.io/job-name=replaced").await?;
    let name = first.metadata.name.clone().unwrap_or_default();
    pods.delete(&name, &DeleteParams::default()).await?;
    let terminating = wait_job(&jobs, "replaced", "counting a terminating pod", |j| {
        j.status.as_ref().and_then(|s| s.terminating) == Some(1)
    })
    .await?;
    assert_eq!(
        terminating
            .status
            .as_ref()
            .and_then(|s| s.active)
            .unwrap_or(0),
        0,
        "a replacement is already active"
    );
    let done = wait_job(&jobs, "replaced", "Complete", |j| {
        job_condition(j, "Complete").is_some() || job_condition(j, "Failed").is_some()
    })
    .await?;
    assert_eq!(job_condition(&done, "Failed"), None, "{:?}", done.status);
    assert_eq!((succeeded_count(&done), failed_count(&done)), (1, 1));

    let events = recorder.all();
    let first_uid = uid(&first);
    let failed_at = events
        .iter()
        .position(|(_, p)| p.metadata.uid.as_deref() == Some(&first_uid) && phase(p) == "Failed")
        .context("the first pod was never reported Failed")?;
    let replacement_at = events
        .iter()
        .position(|(_, p)| p.metadata.uid.as_deref() != Some(&first_uid))
        .context("no replacement pod")?;
    assert!(
        failed_at < replacement_at,
        "the replacement appeared before the first pod was Failed"
    );
    let (_, failed) = &events[failed_at];
    assert_eq!(terminated(failed).map(|t| t.exit_code), Some(5));
    let _ = std::fs::remove_file(root.join(&marker));
    Ok(())
}

/// Kubelet admission: a Job pod bound to a node whose labels its nodeSelector does not match is
/// refused (phase Failed, a reason, no container statuses) and counts as a failure.
#[tokio::test]
async fn a_pod_refused_by_kubelet_admission_fails_the_job() -> Result<()> {
    let fx = fixture()?;
    let (jobs, pods) = namespace(&fx.client()?, "jobs-admission").await?;
    create_job(
        &jobs,
        "refused",
        json!({"backoffLimit": 0}),
        json!({
            "restartPolicy": "Never",
            "nodeName": "node-1",
            "nodeSelector": {"devcluster-test/absent": "yes"},
            "containers": [{"name": "main", "image": SHELL, "args": ["exit 0"]}],
        }),
    )
    .await?;
    let pod = wait_job_pod(&pods, "refused", "Failed", |p| phase(p) == "Failed").await?;
    let status = pod.status.clone().context("status")?;
    assert_eq!(status.reason.as_deref(), Some("NodeAffinity"));
    assert!(
        status
            .message
            .is_some_and(|m| m.starts_with("Pod was rejected")),
        "the kubelet's rejection message"
    );
    assert_eq!(status.container_statuses, None);
    let name = pod.metadata.name.clone().unwrap_or_default();
    let _ = wait_pod(&pods, &name, "without its finalizer", |p| {
        p.metadata.finalizers.as_ref().is_none_or(Vec::is_empty)
    })
    .await?;
    let job = wait_job(&jobs, "refused", "Failed", |j| {
        job_condition(j, "Failed").is_some()
    })
    .await?;
    assert_eq!(failed_count(&job), 1);
    Ok(())
}
