//! What a package or interrupt pod's status means for the node state (spec §2.9, with our fixes).
//!
//! Contract: [`outcome`] is pure. It reads the pod's `skyhook.nvidia.com/package` annotation, its
//! init containers in spec order with their statuses, its phase, and the node's boot ID, and says
//! what happened. The caller turns that into node-state updates, pod deletions and requeues.
//!
//! Rules:
//! * Annotation `invalid: true` → [`PodOutcome::Invalid`] (delete the pod). A missing or unreadable
//!   annotation → [`PodOutcome::Unrecognised`]: the pod is not one the controller can account for.
//! * Init containers are read in spec order. A container that terminated non-zero, waits in
//!   `CrashLoopBackOff`, or cannot start because its image cannot be pulled (`ImagePullBackOff`,
//!   `ErrImagePull`, `InvalidImageName`, `ErrImageNeverPull`) or its container cannot be created
//!   (`CreateContainerConfigError`, `CreateContainerError`) makes the pod [`PodOutcome::Failed`]
//!   with that container, its exit code and the reason. Upstream left image pull failures
//!   `in_progress` forever (#306); reporting them is the fix. The kubelet keeps retrying, so a
//!   fixed image or Secret still lets the pod succeed later.
//! * The pod succeeds when *every* init container of its spec terminated with exit code 0 (not
//!   merely the last one reported); the reported container is the last one.
//! * Reboots. A container killed by a signal (exit code 137 or 143) is not a failure when the
//!   node's boot ID differs from the one recorded on the pod at creation
//!   ([`skyhook_api::keys::Keys::boot_id_annotation`]): the node rebooted under it and the kubelet runs it
//!   again (the agent's flags make the re-run a no-op), so the pod is [`PodOutcome::Running`]; a
//!   pod the kubelet will not restart (phase `Failed`, as after a graceful node shutdown) is
//!   [`PodOutcome::RecreateAfterReboot`]. A *reboot* interrupt pod whose node still has the boot
//!   ID it was created on is [`PodOutcome::AwaitingReboot`] until `reboot_deadline` after the
//!   reboot was requested (its interrupt container started, or the pod was created if it never
//!   started), then failed with reason [`REBOOT_NOT_CONFIRMED`]: whether its container was
//!   killed by the shutdown it asked for, or still reads as running because the node died and
//!   its kubelet reports nothing any more. Upstream marked the node `erroring` when the
//!   shutdown killed the container and kept it cordoned (#633), and waited forever on a node
//!   that never came back.
//! * Admission. A pod the kubelet refused before any of its containers ran (phase `Failed` with
//!   reason `OutOf<resource>`, as `OutOfcpu`, `OutOfmemory` or `OutOfpods`, or
//!   `UnexpectedAdmissionError`) is [`PodOutcome::Rejected`]: the kubelet never retries such a
//!   pod. The plan, which knows the node's allocatable, tells a full node (retried after a backoff)
//!   from a pod the node can never hold (a failure).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated};
use skyhook_api::generation::group_of_labels;
use skyhook_api::pod_annotation::PodPackageAnnotation;

use crate::cache::CachedPod;
use crate::cache::pod::{CachedContainer, CachedContainerStatus, CachedPodStatus};
use crate::pods::is_reboot_interrupt;

/// Reason of a failure where a reboot interrupt's container was stopped but the node did not come
/// back with a new boot ID within the reboot deadline.
pub const REBOOT_NOT_CONFIRMED: &str = "RebootNotConfirmed";

/// The kubelet's waiting reason for a container held between failed runs by its restart backoff.
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";

/// The kubelet's waiting reasons for a container whose image it cannot pull.
pub const IMAGE_PULL_FAILURES: [&str; 4] = [
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "ErrImageNeverPull",
];

/// Waiting reasons besides [`IMAGE_PULL_FAILURES`] that mean the container cannot start until
/// someone fixes the package, its image or its references.
const START_FAILURES: [&str; 3] = [
    CRASH_LOOP_BACK_OFF,
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// Pod phases after which the kubelet never restarts the pod's containers.
const TERMINAL_FAILED_PHASE: &str = "Failed";

/// What [`outcome`] needs besides the pod.
#[derive(Debug, Clone, Copy)]
pub struct OutcomeContext<'a> {
    /// The node's current `status.nodeInfo.bootID`.
    pub node_boot_id: Option<&'a str>,
    /// The current time.
    pub now: Timestamp,
    /// How long a reboot may take (`REBOOT_DEADLINE`).
    pub reboot_deadline: Duration,
}

/// What a pod's status means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodOutcome {
    /// The pod was invalidated: delete it.
    Invalid,
    /// The pod has no readable `skyhook.nvidia.com/package` annotation.
    Unrecognised {
        /// Why the annotation could not be used.
        reason: String,
    },
    /// Still working, waiting to start, or being re-run after a reboot.
    Running,
    /// A reboot interrupt stopped its own container; the node has not come back with a new boot
    /// ID yet. Look again by `deadline`.
    AwaitingReboot {
        /// When the reboot counts as failed.
        deadline: Timestamp,
    },
    /// The node rebooted under the pod and the kubelet will not restart it: delete it so that it
    /// is created again. Not a failure.
    RecreateAfterReboot,
    /// Every init container exited 0.
    Succeeded {
        /// The last init container (the check, or `interrupt`).
        container: String,
        /// Its restart count.
        restarts: i32,
    },
    /// The pod failed; it is left for the kubelet to retry. For a stage Job: the Job failed for
    /// good (its retries are spent, its deadline passed).
    Failed(PodFailure),
    /// A stage Job's attempt failed and the Job controller runs another: the package reads
    /// `erroring`, the node stays `in_progress` until the Job ends.
    Retrying(PodFailure),
    /// A stage Job failed for good without a genuine failure of its own (only attempts its node
    /// refused): it is deleted and the stage runs again.
    FailedWithoutCause,
    /// The kubelet refused the pod at admission, before any container ran; it never retries it.
    Rejected {
        /// `OutOfcpu`, `OutOfmemory`, `OutOfpods`, another `OutOf<resource>`, or
        /// `UnexpectedAdmissionError`.
        reason: String,
        /// The kubelet's message, e.g. `Pod was rejected: Node didn't have enough resource: cpu,
        /// requested: 500, used: 7800, capacity: 8000`.
        message: Option<String>,
    },
}

/// Why a pod failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFailure {
    /// The failing init container, when one is to blame.
    pub container: Option<String>,
    /// Its last exit code, when it ran.
    pub exit_code: Option<i32>,
    /// A short machine-readable reason (`Error`, `CrashLoopBackOff`, `ImagePullBackOff`…).
    pub reason: String,
    /// The kubelet's message, when it gave one.
    pub message: Option<String>,
    /// Restart count of the failing container.
    pub restarts: i32,
    /// For [`REBOOT_NOT_CONFIRMED`]: when the reboot was requested.
    pub reboot_requested: Option<Timestamp>,
}

/// Reads a pod's status. See the module documentation for the rules.
pub fn outcome(pod: &CachedPod, context: OutcomeContext<'_>) -> PodOutcome {
    let annotation = match package_annotation(pod) {
        Ok(annotation) => annotation,
        Err(reason) => return PodOutcome::Unrecognised { reason },
    };
    if annotation.invalid {
        return PodOutcome::Invalid;
    }
    let view = PodView::new(pod, context);
    match init_progress(&view, context) {
        InitProgress::Decided(outcome) => outcome,
        InitProgress::AllSucceeded => view.succeeded(),
        InitProgress::Unfinished if view.terminal => terminal_outcome(&view, context),
        InitProgress::Unfinished if view.reboot_interrupt && !view.rebooted => {
            reboot_in_progress(&view, context)
        }
        InitProgress::Unfinished => PodOutcome::Running,
    }
}

/// The pod's `<group>/package` annotation, or why it cannot be used.
fn package_annotation(pod: &CachedPod) -> Result<PodPackageAnnotation, String> {
    let key = group_of_labels(pod.metadata.labels.as_ref())
        .keys()
        .package_annotation;
    let text = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .ok_or_else(|| format!("no {key} annotation"))?;
    PodPackageAnnotation::parse(text)
        .map_err(|error| format!("unreadable {key} annotation: {error}"))
}

/// The parts of a pod and its node that decide its outcome.
struct PodView<'a> {
    pod: &'a CachedPod,
    status: Option<&'a CachedPodStatus>,
    /// The init containers, in spec order.
    containers: &'a [CachedContainer],
    statuses: &'a [CachedContainerStatus],
    /// The node's boot ID changed since the pod was created.
    rebooted: bool,
    /// The pod is an interrupt pod that reboots the node.
    reboot_interrupt: bool,
    /// The kubelet will not restart the pod's containers.
    terminal: bool,
}

impl<'a> PodView<'a> {
    fn new(pod: &'a CachedPod, context: OutcomeContext<'_>) -> Self {
        let launch_boot_id = pod.metadata.annotations.as_ref().and_then(|a| {
            a.get(
                group_of_labels(pod.metadata.labels.as_ref())
                    .keys()
                    .boot_id_annotation,
            )
        });
        let status = pod.status.as_ref();
        PodView {
            pod,
            status,
            containers: pod
                .spec
                .as_ref()
                .and_then(|spec| spec.init_containers.as_deref())
                .unwrap_or_default(),
            statuses: status
                .and_then(|s| s.init_container_statuses.as_deref())
                .unwrap_or_default(),
            rebooted: matches!(
                (launch_boot_id, context.node_boot_id),
                (Some(launch), Some(current)) if launch != current
            ),
            reboot_interrupt: is_reboot_interrupt(pod),
            terminal: status.and_then(|s| s.phase.as_deref()) == Some(TERMINAL_FAILED_PHASE),
        }
    }

    fn status_of(&self, container: &CachedContainer) -> Option<&'a CachedContainerStatus> {
        self.statuses.iter().find(|s| s.name == container.name)
    }

    /// Every init container exited 0: the last one is reported.
    fn succeeded(&self) -> PodOutcome {
        let last = self
            .containers
            .last()
            .and_then(|container| self.status_of(container));
        PodOutcome::Succeeded {
            container: last.map(|s| s.name.clone()).unwrap_or_default(),
            restarts: last.map_or(0, |s| s.restart_count),
        }
    }
}

/// How far the init containers got.
enum InitProgress {
    /// Every one exited 0.
    AllSucceeded,
    /// One has not finished (or not started) and none failed before it.
    Unfinished,
    /// A container's end decides the outcome.
    Decided(PodOutcome),
}

/// Reads the init containers in spec order up to the first that has not succeeded.
fn init_progress(view: &PodView<'_>, context: OutcomeContext<'_>) -> InitProgress {
    if view.containers.is_empty() {
        return InitProgress::Unfinished;
    }
    for container in view.containers {
        let Some(container_status) = view.status_of(container) else {
            return InitProgress::Unfinished;
        };
        match classify(container_status) {
            ContainerProgress::Succeeded => continue,
            ContainerProgress::Working => return InitProgress::Unfinished,
            ContainerProgress::Killed(terminated) => {
                return InitProgress::Decided(killed_outcome(
                    view,
                    context,
                    container_status,
                    terminated,
                ));
            }
            ContainerProgress::Failed(failure) => {
                return InitProgress::Decided(PodOutcome::Failed(failure));
            }
        }
    }
    InitProgress::AllSucceeded
}

/// A container killed by a signal: the reboot under it, the reboot it asked for, or a failure.
fn killed_outcome(
    view: &PodView<'_>,
    context: OutcomeContext<'_>,
    container_status: &CachedContainerStatus,
    terminated: &ContainerStateTerminated,
) -> PodOutcome {
    if view.rebooted {
        return if view.terminal {
            PodOutcome::RecreateAfterReboot
        } else {
            PodOutcome::Running
        };
    }
    if view.reboot_interrupt {
        return reboot_wait_or_fail(
            reboot_requested(view.pod, container_status).unwrap_or(context.now),
            context,
            Some(container_status),
            Some(terminated.exit_code),
        );
    }
    PodOutcome::Failed(terminated_failure(container_status, terminated))
}

/// A pod the kubelet will not restart, whose init containers did not all succeed.
fn terminal_outcome(view: &PodView<'_>, context: OutcomeContext<'_>) -> PodOutcome {
    if view.rebooted {
        return PodOutcome::RecreateAfterReboot;
    }
    let reason = view.status.and_then(|s| s.reason.clone());
    let message = view.status.and_then(|s| s.message.clone());
    if let Some(reason) = reason.as_deref().filter(|r| is_admission_rejection(r))
        && !view.statuses.iter().any(container_ran)
    {
        return PodOutcome::Rejected {
            reason: reason.to_owned(),
            message,
        };
    }
    if view.reboot_interrupt && reason.as_deref().is_some_and(is_shutdown_reason) {
        let since = pod_created(view.pod).unwrap_or(context.now);
        return reboot_wait_or_fail(since, context, None, None);
    }
    PodOutcome::Failed(PodFailure {
        container: None,
        exit_code: None,
        reason: reason.unwrap_or_else(|| TERMINAL_FAILED_PHASE.to_owned()),
        message,
        restarts: 0,
        reboot_requested: None,
    })
}

/// A reboot interrupt pod still starting or running on the boot it was created on: on a dead
/// node this is what the last report of its kubelet says, for ever.
fn reboot_in_progress(view: &PodView<'_>, context: OutcomeContext<'_>) -> PodOutcome {
    let container_status = view
        .containers
        .first()
        .and_then(|container| view.status_of(container));
    let since = container_status
        .map_or_else(
            || pod_created(view.pod),
            |status| reboot_requested(view.pod, status),
        )
        .unwrap_or(context.now);
    reboot_wait_or_fail(since, context, container_status, None)
}

/// Where one init container is.
enum ContainerProgress<'a> {
    Succeeded,
    Working,
    /// Terminated by SIGKILL or SIGTERM (or restarting after that).
    Killed(&'a ContainerStateTerminated),
    Failed(PodFailure),
}

fn classify(status: &CachedContainerStatus) -> ContainerProgress<'_> {
    let Some(state) = status.state.as_ref() else {
        return ContainerProgress::Working;
    };
    if let Some(terminated) = &state.terminated {
        if terminated.exit_code == 0 {
            return ContainerProgress::Succeeded;
        }
        if is_killed(terminated) {
            return ContainerProgress::Killed(terminated);
        }
        return ContainerProgress::Failed(terminated_failure(status, terminated));
    }
    if let Some(waiting) = &state.waiting {
        let reason = waiting.reason.as_deref().unwrap_or_default();
        if START_FAILURES.contains(&reason) || IMAGE_PULL_FAILURES.contains(&reason) {
            let last = last_termination(status);
            if reason == CRASH_LOOP_BACK_OFF
                && let Some(last) = last
                && is_killed(last)
            {
                return ContainerProgress::Killed(last);
            }
            return ContainerProgress::Failed(PodFailure {
                container: Some(status.name.clone()),
                exit_code: last.map(|t| t.exit_code),
                reason: reason.to_owned(),
                message: waiting.message.clone(),
                restarts: status.restart_count,
                reboot_requested: None,
            });
        }
    }
    ContainerProgress::Working
}

fn last_termination(status: &CachedContainerStatus) -> Option<&ContainerStateTerminated> {
    status
        .last_state
        .as_ref()
        .and_then(|state: &ContainerState| state.terminated.as_ref())
}

fn is_killed(terminated: &ContainerStateTerminated) -> bool {
    matches!(terminated.exit_code, 137 | 143) || matches!(terminated.signal, Some(9 | 15))
}

/// Pod reasons the kubelet gives pods it refused at admission for want of resources
/// (`OutOf` + the resource name, as its `InsufficientResourceError`) or for an admission error.
fn is_admission_rejection(reason: &str) -> bool {
    reason == "UnexpectedAdmissionError"
        || reason
            .strip_prefix("OutOf")
            .is_some_and(|resource| !resource.is_empty())
}

/// Whether the container ever started: it runs, it terminated, or it did before a restart.
fn container_ran(status: &CachedContainerStatus) -> bool {
    let ran = |state: Option<&ContainerState>| {
        state.is_some_and(|s| s.running.is_some() || s.terminated.is_some())
    };
    status.restart_count > 0 || ran(status.state.as_ref()) || ran(status.last_state.as_ref())
}

/// Pod reasons the kubelet gives pods it stopped for a node shutdown.
fn is_shutdown_reason(reason: &str) -> bool {
    matches!(reason, "Terminated" | "Shutdown" | "NodeShutdown")
}

fn terminated_failure(
    status: &CachedContainerStatus,
    terminated: &ContainerStateTerminated,
) -> PodFailure {
    PodFailure {
        container: Some(status.name.clone()),
        exit_code: Some(terminated.exit_code),
        reason: terminated
            .reason
            .clone()
            .unwrap_or_else(|| "Error".to_owned()),
        message: terminated.message.clone(),
        restarts: status.restart_count,
        reboot_requested: None,
    }
}

/// When the reboot was requested: the interrupt container's (first) start, or the pod's
/// creation when it never started.
fn reboot_requested(pod: &CachedPod, status: &CachedContainerStatus) -> Option<Timestamp> {
    let started = |state: Option<&ContainerState>| {
        state.and_then(|state| {
            state
                .running
                .as_ref()
                .and_then(|running| running.started_at.as_ref())
                .or_else(|| {
                    state
                        .terminated
                        .as_ref()
                        .and_then(|terminated| terminated.started_at.as_ref())
                })
                .map(|time| time.0)
        })
    };
    started(status.last_state.as_ref())
        .or_else(|| started(status.state.as_ref()))
        .or_else(|| pod_created(pod))
}

fn reboot_wait_or_fail(
    since: Timestamp,
    context: OutcomeContext<'_>,
    status: Option<&CachedContainerStatus>,
    exit_code: Option<i32>,
) -> PodOutcome {
    let deadline = deadline_after(since, context.reboot_deadline);
    if context.now < deadline {
        return PodOutcome::AwaitingReboot { deadline };
    }
    let elapsed = Duration::try_from(context.now.duration_since(since)).unwrap_or_default();
    PodOutcome::Failed(PodFailure {
        container: status.map(|s| s.name.clone()),
        exit_code,
        reason: REBOOT_NOT_CONFIRMED.to_owned(),
        message: Some(format!(
            "the node was asked to reboot {} ago and its boot ID has not changed (reboot deadline {})",
            humantime(Duration::from_secs(elapsed.as_secs())),
            humantime(context.reboot_deadline)
        )),
        restarts: status.map_or(0, |s| s.restart_count),
        reboot_requested: Some(since),
    })
}

/// `since` plus `limit`, or the end of time when that does not fit a timestamp.
pub(crate) fn deadline_after(since: Timestamp, limit: Duration) -> Timestamp {
    SignedDuration::try_from(limit)
        .ok()
        .and_then(|limit| since.checked_add(limit).ok())
        .unwrap_or(Timestamp::MAX)
}

fn pod_created(pod: &CachedPod) -> Option<Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|time| time.0)
}

/// `30m`, `1h`, `1h30m`, `31m20s`: a duration the way `REBOOT_DEADLINE` is written.
pub(crate) fn humantime(value: Duration) -> String {
    let secs = value.as_secs();
    let (hours, minutes, seconds) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut text = String::new();
    for (amount, unit) in [(hours, "h"), (minutes, "m"), (seconds, "s")] {
        if amount > 0 {
            text.push_str(&format!("{amount}{unit}"));
        }
    }
    if text.is_empty() {
        text.push_str("0s");
    }
    text
}

#[cfg(test)]
mod tests;
