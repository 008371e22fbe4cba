//! The pod status the kubelet reports, computed from its view of the containers (pure).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::pod_state::{ContainerRecord, PodRuntime, StartErrorKind, Terminated, format_backoff};

/// Facts about the pod the status needs besides the container records.
#[derive(Debug, Clone, Copy)]
pub struct StatusContext<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
    pub host_ip: &'a str,
    pub pod_ip: &'a str,
    pub start_time: Timestamp,
    /// The conditions currently on the pod, to keep transition times of unchanged conditions.
    pub existing_conditions: &'a [PodCondition],
    /// Running main containers whose readiness probe has not passed (by name): not ready.
    pub unready_by_probe: &'a [String],
    pub now: Timestamp,
}

/// The kubelet's `PodStatus` for this pod.
pub fn pod_status(rt: &PodRuntime, ctx: &StatusContext<'_>) -> PodStatus {
    let initialized = rt.initialized();
    let init_statuses: Vec<ContainerStatus> = rt
        .init
        .iter()
        .map(|r| container_status(r, true, initialized, ctx))
        .collect();
    let main_statuses: Vec<ContainerStatus> = rt
        .main
        .iter()
        .map(|r| container_status(r, false, initialized, ctx))
        .collect();
    let phase = match &rt.terminal {
        Some(terminal) => terminal.phase,
        None => phase(rt, &main_statuses),
    };
    let conditions = conditions(rt, ctx, phase);

    PodStatus {
        phase: Some(phase.to_owned()),
        conditions: Some(conditions),
        host_ip: Some(ctx.host_ip.to_owned()),
        host_ips: Some(vec![HostIP {
            ip: ctx.host_ip.to_owned(),
        }]),
        pod_ip: Some(ctx.pod_ip.to_owned()),
        pod_ips: Some(vec![PodIP {
            ip: ctx.pod_ip.to_owned(),
        }]),
        start_time: Some(Time(ctx.start_time)),
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        container_statuses: Some(main_statuses),
        reason: rt.terminal.as_ref().and_then(|t| t.reason.clone()),
        message: rt.terminal.as_ref().and_then(|t| t.message.clone()),
        ..PodStatus::default()
    }
}

/// A condition's status, reason and message.
type Verdict = (bool, Option<String>, Option<String>);

/// The pod's conditions in `phase`. Only the kubelet's own: the status patch merges conditions
/// by type, so those others own (`DisruptionTarget` from the API server's eviction, a
/// controller's readiness gates) stay as they are, as the kubelet's `mergePodStatus` keeps them.
fn conditions(rt: &PodRuntime, ctx: &StatusContext<'_>, phase: &str) -> Vec<PodCondition> {
    let terminal = matches!(phase, "Succeeded" | "Failed");
    let (initialized, init_r, init_m) = initialized(rt, phase);
    let (ready, ready_r, ready_m) = containers_ready(rt, ctx, phase);
    let mut conditions = vec![
        condition(ctx, "PodReadyToStartContainers", !terminal, None, None),
        condition(ctx, "Initialized", initialized, init_r, init_m),
        condition(ctx, "Ready", ready, ready_r.clone(), ready_m.clone()),
        condition(ctx, "ContainersReady", ready, ready_r, ready_m),
    ];
    if !ctx
        .existing_conditions
        .iter()
        .any(|c| c.type_ == "PodScheduled")
    {
        conditions.push(condition(ctx, "PodScheduled", true, None, None));
    }
    conditions
}

/// `Initialized` as the kubelet's `GeneratePodInitializedCondition` words it: true with
/// `PodCompleted` for a succeeded pod, true once every init container succeeded or a main
/// container has run, false with the incomplete init containers otherwise (also in a pod that
/// failed during its initialisation).
fn initialized(rt: &PodRuntime, phase: &str) -> Verdict {
    if phase == "Succeeded" {
        return (true, Some("PodCompleted".to_owned()), None);
    }
    let not_initialized: Vec<&str> = rt
        .init
        .iter()
        .filter(|r| !r.succeeded())
        .map(|r| r.name.as_str())
        .collect();
    let main_started = rt.main.iter().any(|r| r.current.is_some());
    if not_initialized.is_empty() || main_started {
        (true, None, None)
    } else {
        (
            false,
            Some("ContainersNotInitialized".to_owned()),
            Some(format!(
                "containers with incomplete status: [{}]",
                not_initialized.join(" ")
            )),
        )
    }
}

/// `Ready` and `ContainersReady`: every main container runs and passes its readiness probe, in a
/// pod that has not ended; false with `PodCompleted` or `PodFailed` once it has (the kubelet's
/// `generatePodReadyConditionForTerminalPhase`).
fn containers_ready(rt: &PodRuntime, ctx: &StatusContext<'_>, phase: &str) -> Verdict {
    match phase {
        "Succeeded" => return (false, Some("PodCompleted".to_owned()), None),
        "Failed" => return (false, Some("PodFailed".to_owned()), None),
        _ => {}
    }
    let unready: Vec<&str> = rt
        .main
        .iter()
        .filter(|r| !container_ready(r, ctx))
        .map(|r| r.name.as_str())
        .collect();
    if unready.is_empty() {
        (true, None, None)
    } else {
        (
            false,
            Some("ContainersNotReady".to_owned()),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    }
}

/// The status of a pod the kubelet refused to run (admission failure), as the kubelet's
/// `rejectPod` sets it: phase `Failed`, the reason and message, and the start time its status
/// manager fills in. No host IP: nothing ran, and the kubelet reports none for such a pod.
pub fn rejected_status(reason: &str, message: &str, ctx: &StatusContext<'_>) -> PodStatus {
    PodStatus {
        phase: Some("Failed".to_owned()),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        start_time: Some(Time(ctx.start_time)),
        ..PodStatus::default()
    }
}

/// The kubelet's `getPhase` for a pod that has not reached a terminal phase: pending while
/// initialising or while a main container waits without having run; running otherwise (a
/// container that exited and will restart counts as running).
fn phase(rt: &PodRuntime, main: &[ContainerStatus]) -> &'static str {
    let waiting_to_start = main.iter().any(|status| {
        status.state.as_ref().is_some_and(|s| s.waiting.is_some())
            && status
                .last_state
                .as_ref()
                .is_none_or(|s| s.terminated.is_none())
    });
    if !rt.initialized() || waiting_to_start {
        "Pending"
    } else {
        "Running"
    }
}

/// A main container is ready while it runs and no readiness probe holds it back.
fn container_ready(record: &ContainerRecord, ctx: &StatusContext<'_>) -> bool {
    record.is_running() && !ctx.unready_by_probe.contains(&record.name)
}

fn condition(
    ctx: &StatusContext<'_>,
    type_: &str,
    status: bool,
    reason: Option<String>,
    message: Option<String>,
) -> PodCondition {
    let status = if status { "True" } else { "False" };
    let since = ctx
        .existing_conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(Time(ctx.now));
    PodCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason,
        message,
        last_transition_time: Some(since),
        last_probe_time: None,
        observed_generation: None,
    }
}

fn container_status(
    record: &ContainerRecord,
    init: bool,
    initialized: bool,
    ctx: &StatusContext<'_>,
) -> ContainerStatus {
    let (state, last) = container_state(record, init, initialized, ctx);
    let running = record.is_running();
    let ever_started = record.attempts > 0;
    ContainerStatus {
        name: record.name.clone(),
        image: record.image.clone(),
        image_id: if ever_started {
            format!("devcluster://{}", record.image)
        } else {
            String::new()
        },
        container_id: record.current.as_ref().map(|r| r.container_id.clone()),
        ready: if init {
            record.succeeded()
        } else {
            container_ready(record, ctx)
        },
        started: Some(running),
        restart_count: record.restart_count(),
        state: Some(state),
        last_state: Some(last.map(terminated_state).unwrap_or_default()),
        ..ContainerStatus::default()
    }
}

/// The container's state, and the run its last state shows.
fn container_state<'r>(
    record: &'r ContainerRecord,
    init: bool,
    initialized: bool,
    ctx: &StatusContext<'_>,
) -> (ContainerState, Option<&'r Terminated>) {
    let finished = record.current.as_ref().and_then(|r| r.finished.as_ref());
    if let Some(error) = &record.start_error {
        let (reason, message) = match error.kind {
            StartErrorKind::ImagePull if error.backing_off => (
                "ImagePullBackOff",
                format!(
                    "Back-off pulling image {:?}: {}",
                    record.image, error.message
                ),
            ),
            StartErrorKind::ImagePull => ("ErrImagePull", error.message.clone()),
            StartErrorKind::CreateConfig => ("CreateContainerConfigError", error.message.clone()),
            StartErrorKind::Create => ("CreateContainerError", error.message.clone()),
            StartErrorKind::VolumeSetup => ("ContainerCreating", error.message.clone()),
        };
        let last = finished.or(record.previous.as_ref());
        (waiting(reason, Some(message)), last)
    } else if let Some(run) = &record.current {
        match &run.finished {
            None => (
                ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time(run.started_at)),
                    }),
                    ..ContainerState::default()
                },
                record.previous.as_ref(),
            ),
            Some(term) if record.crash_looping => {
                let period = record.crash_backoff.current().map(format_backoff);
                let message = format!(
                    "back-off {} restarting failed container={} pod={}_{}({})",
                    period.unwrap_or_default(),
                    record.name,
                    ctx.name,
                    ctx.namespace,
                    ctx.uid
                );
                (waiting("CrashLoopBackOff", Some(message)), Some(term))
            }
            Some(term) => (terminated_state(term), record.previous.as_ref()),
        }
    } else {
        let reason = if init || !initialized {
            "PodInitializing"
        } else {
            "ContainerCreating"
        };
        (waiting(reason, None), record.previous.as_ref())
    }
}

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_owned()),
            message,
        }),
        ..ContainerState::default()
    }
}

fn terminated_state(term: &Terminated) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: term.exit_code,
            signal: term.signal,
            reason: Some(term.reason.clone()),
            message: term.message.clone(),
            started_at: term.started_at.map(Time),
            finished_at: Some(Time(term.finished_at)),
            container_id: term.container_id.clone(),
        }),
        ..ContainerState::default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::kubelet::backoff::BackoffPolicy;
    use crate::kubelet::pod_state::{ContainerRecord, ContainerRef, RestartPolicy};

    const POLICY: BackoffPolicy = BackoffPolicy {
        initial: Duration::from_secs(10),
        max: Duration::from_secs(300),
    };

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn ctx(now: i64) -> StatusContext<'static> {
        StatusContext {
            name: "p",
            namespace: "ns",
            uid: "u",
            host_ip: "127.1.0.1",
            pod_ip: "127.2.0.1",
            start_time: t(0),
            existing_conditions: &[],
            unready_by_probe: &[],
            now: t(now),
        }
    }

    fn pod(policy: RestartPolicy, init: &[&str], main: &[&str]) -> PodRuntime {
        let records = |names: &[&str]| {
            names
                .iter()
                .map(|n| ContainerRecord::new(n, "img"))
                .collect()
        };
        PodRuntime::new(policy, records(init), records(main))
    }

    fn start(rt: &mut PodRuntime, c: ContainerRef, at: i64) {
        rt.on_started(c, "cid", t(at), POLICY);
    }

    fn exit(rt: &mut PodRuntime, c: ContainerRef, code: i32, at: i64) {
        let started = rt.record(c).unwrap().current.as_ref().unwrap().started_at;
        rt.on_exited(
            c,
            Terminated::exited(Some(code), None, started, t(at), "cid"),
        );
    }

    fn cond<'a>(status: &'a PodStatus, type_: &str) -> (&'a str, Option<&'a str>) {
        let c = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .unwrap();
        (c.status.as_str(), c.reason.as_deref())
    }

    fn waiting_reason(s: &ContainerStatus) -> Option<&str> {
        s.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
    }

    #[test]
    fn phases_and_conditions_follow_the_pod_lifecycle() {
        let mut rt = pod(RestartPolicy::OnFailure, &["copy"], &["pause"]);
        rt.plan(t(0));
        let s = pod_status(&rt, &ctx(0));
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        assert_eq!(
            cond(&s, "Initialized"),
            ("False", Some("ContainersNotInitialized"))
        );
        assert_eq!(cond(&s, "PodScheduled"), ("True", None));
        let main = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(waiting_reason(main), Some("PodInitializing"));

        start(&mut rt, ContainerRef::Init(0), 0);
        exit(&mut rt, ContainerRef::Init(0), 0, 1);
        rt.plan(t(1));
        start(&mut rt, ContainerRef::Main(0), 1);
        let s = pod_status(&rt, &ctx(1));
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(cond(&s, "Initialized"), ("True", None));
        assert_eq!(cond(&s, "Ready"), ("True", None));
        assert_eq!(cond(&s, "ContainersReady"), ("True", None));
        let init = &s.init_container_statuses.as_ref().unwrap()[0];
        let term = init.state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(
            (term.exit_code, term.reason.as_deref()),
            (0, Some("Completed"))
        );
        assert!(init.ready);

        exit(&mut rt, ContainerRef::Main(0), 0, 2);
        rt.plan(t(2));
        let s = pod_status(&rt, &ctx(2));
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
        assert_eq!(cond(&s, "Ready"), ("False", Some("PodCompleted")));
        assert_eq!(cond(&s, "ContainersReady"), ("False", Some("PodCompleted")));
        assert_eq!(cond(&s, "Initialized"), ("True", Some("PodCompleted")));
        assert_eq!(cond(&s, "PodReadyToStartContainers"), ("False", None));
    }

    #[test]
    fn reports_crash_loops_with_last_state_and_restart_count() {
        let mut rt = pod(RestartPolicy::Always, &[], &["app"]);
        rt.plan(t(0));
        start(&mut rt, ContainerRef::Main(0), 0);
        exit(&mut rt, ContainerRef::Main(0), 3, 1);
        let s = pod_status(&rt, &ctx(1));
        let c = &s.container_statuses.as_ref().unwrap()[0];
        let term = c.state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!((term.exit_code, term.reason.as_deref()), (3, Some("Error")));
        rt.plan(t(1));
        start(&mut rt, ContainerRef::Main(0), 1);
        exit(&mut rt, ContainerRef::Main(0), 3, 2);
        rt.plan(t(2));
        let s = pod_status(&rt, &ctx(2));
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(cond(&s, "Ready"), ("False", Some("ContainersNotReady")));
        let c = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(waiting_reason(c), Some("CrashLoopBackOff"));
        let message = c
            .state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .message
            .as_deref();
        assert_eq!(
            message,
            Some("back-off 10s restarting failed container=app pod=p_ns(u)")
        );
        assert_eq!(c.restart_count, 1);
        let last = c.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(last.exit_code, 3);
    }

    #[test]
    fn reports_start_errors_as_waiting_reasons() {
        let cases = [
            (StartErrorKind::ImagePull, false, "ErrImagePull"),
            (StartErrorKind::ImagePull, true, "ImagePullBackOff"),
            (
                StartErrorKind::CreateConfig,
                false,
                "CreateContainerConfigError",
            ),
            (StartErrorKind::Create, false, "CreateContainerError"),
            (StartErrorKind::VolumeSetup, false, "ContainerCreating"),
        ];
        for (kind, plan_again, reason) in cases {
            let mut rt = pod(RestartPolicy::Always, &[], &["app"]);
            rt.plan(t(0));
            rt.on_start_failed(ContainerRef::Main(0), kind, "why".into(), t(0), POLICY);
            if plan_again {
                rt.plan(t(1));
            }
            let s = pod_status(&rt, &ctx(1));
            let c = &s.container_statuses.as_ref().unwrap()[0];
            assert_eq!(waiting_reason(c), Some(reason), "{kind:?}");
            assert_eq!(s.phase.as_deref(), Some("Pending"));
        }
    }

    #[test]
    fn a_running_container_held_back_by_its_readiness_probe_is_not_ready() {
        let mut rt = pod(RestartPolicy::Always, &[], &["app", "side"]);
        rt.plan(t(0));
        start(&mut rt, ContainerRef::Main(0), 0);
        start(&mut rt, ContainerRef::Main(1), 0);
        let unready = ["app".to_owned()];
        let s = pod_status(
            &rt,
            &StatusContext {
                unready_by_probe: &unready,
                ..ctx(1)
            },
        );
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(cond(&s, "Ready"), ("False", Some("ContainersNotReady")));
        assert_eq!(
            cond(&s, "ContainersReady"),
            ("False", Some("ContainersNotReady"))
        );
        let ready: Vec<(String, bool, Option<bool>)> = s
            .container_statuses
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.ready, c.started))
            .collect();
        assert_eq!(
            ready,
            [
                ("app".to_owned(), false, Some(true)),
                ("side".to_owned(), true, Some(true))
            ]
        );
        let s = pod_status(&rt, &ctx(2));
        assert_eq!(cond(&s, "Ready"), ("True", None));
    }

    #[test]
    fn keeps_transition_times_of_unchanged_conditions() {
        let mut rt = pod(RestartPolicy::Always, &[], &["app"]);
        rt.plan(t(0));
        start(&mut rt, ContainerRef::Main(0), 0);
        let first = pod_status(&rt, &ctx(0));
        let existing = first.conditions.clone().unwrap();
        let later = StatusContext {
            existing_conditions: &existing,
            ..ctx(50)
        };
        let second = pod_status(&rt, &later);
        // PodScheduled is the scheduler's once it exists; the kubelet's own conditions keep
        // their transition times.
        let mut expected = existing.clone();
        expected.retain(|c| c.type_ != "PodScheduled");
        assert_eq!(second.conditions, Some(expected));
        exit(&mut rt, ContainerRef::Main(0), 1, 60);
        let third = pod_status(
            &rt,
            &StatusContext {
                now: t(60),
                ..later
            },
        );
        let ready = third
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.last_transition_time, Some(Time(t(60))));
    }

    #[test]
    fn failed_never_pods_are_failed() {
        let mut rt = pod(RestartPolicy::Never, &["init"], &["app"]);
        rt.plan(t(0));
        start(&mut rt, ContainerRef::Init(0), 0);
        exit(&mut rt, ContainerRef::Init(0), 1, 1);
        rt.plan(t(1));
        let s = pod_status(&rt, &ctx(1));
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert_eq!((s.reason.as_deref(), s.message.as_deref()), (None, None));
        assert_eq!(
            cond(&s, "Initialized"),
            ("False", Some("ContainersNotInitialized"))
        );
        assert_eq!(cond(&s, "Ready"), ("False", Some("PodFailed")));
        assert_eq!(cond(&s, "ContainersReady"), ("False", Some("PodFailed")));
        let main = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(waiting_reason(main), Some("PodInitializing"));
    }

    #[test]
    fn a_pod_past_its_deadline_reports_deadline_exceeded_once_its_containers_stopped() {
        let mut rt = pod(RestartPolicy::OnFailure, &[], &["app"]);
        rt.active_deadline = Some(t(5));
        rt.plan(t(0));
        start(&mut rt, ContainerRef::Main(0), 0);
        assert!(rt.plan(t(5)).stop);
        // Still stopping: the phase is held as it was.
        let s = pod_status(&rt, &ctx(5));
        assert_eq!(
            (s.phase.as_deref(), s.reason.as_deref()),
            (Some("Running"), None)
        );
        exit(&mut rt, ContainerRef::Main(0), 143, 6);
        rt.plan(t(6));
        let s = pod_status(&rt, &ctx(6));
        assert_eq!(
            (
                s.phase.as_deref(),
                s.reason.as_deref(),
                s.message.as_deref()
            ),
            (
                Some("Failed"),
                Some("DeadlineExceeded"),
                Some("Pod was active on the node longer than the specified deadline")
            )
        );
        assert_eq!(cond(&s, "Ready"), ("False", Some("PodFailed")));
        assert_eq!(cond(&s, "Initialized"), ("True", None));
        let c = &s.container_statuses.as_ref().unwrap()[0];
        let term = c.state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(
            (term.exit_code, term.reason.as_deref()),
            (143, Some("Error"))
        );
    }

    #[test]
    fn a_rejected_pod_reports_what_the_kubelets_reject_pod_sets() {
        let message = "Pod was rejected: Node didn't have enough resource: cpu, requested: 500, used: 7800, capacity: 8000";
        assert_eq!(
            rejected_status("OutOfcpu", message, &ctx(5)),
            PodStatus {
                phase: Some("Failed".into()),
                reason: Some("OutOfcpu".into()),
                message: Some(message.into()),
                start_time: Some(Time(t(0))),
                ..PodStatus::default()
            }
        );
    }
}
