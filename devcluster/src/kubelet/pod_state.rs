//! What the simulated kubelet knows about one pod's containers, and what it decides to do next.
//!
//! Pure: the pod worker feeds events in (`on_started`, `on_exited`, `on_start_failed`,
//! `on_sandbox_lost`, `on_terminated_by_deletion`) and asks `plan` which containers to start,
//! whether to stop them all (the pod passed its `activeDeadlineSeconds`) and when to look again.

use std::time::Duration;

use jiff::Timestamp;

use super::backoff::{Backoff, BackoffPolicy};

/// The pod's `restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    /// The API value (absent means `Always`); unknown values are treated as `Always`, which the
    /// API server does not admit anyway.
    pub fn from_api(value: Option<&str>) -> Self {
        match value {
            Some("OnFailure") => Self::OnFailure,
            Some("Never") => Self::Never,
            _ => Self::Always,
        }
    }

    fn restarts(self, exit_code: i32) -> bool {
        match self {
            Self::Always => true,
            Self::OnFailure => exit_code != 0,
            Self::Never => false,
        }
    }
}

/// Init or main container, by position in the pod spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ContainerRef {
    Init(usize),
    Main(usize),
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminated {
    pub exit_code: i32,
    pub signal: Option<i32>,
    /// `Completed`, `Error`, `StartError`, `Unknown`.
    pub reason: String,
    pub message: Option<String>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Timestamp,
    pub container_id: Option<String>,
}

impl Terminated {
    /// An exit as the container runtime reports it: 0 is `Completed`, anything else `Error`;
    /// death by a signal is reported as 128 + signal.
    pub fn exited(
        code: Option<i32>,
        signal: Option<i32>,
        started_at: Timestamp,
        finished_at: Timestamp,
        container_id: &str,
    ) -> Self {
        let exit_code = match (code, signal) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => 255,
        };
        Self {
            exit_code,
            signal,
            reason: if exit_code == 0 { "Completed" } else { "Error" }.to_owned(),
            message: None,
            started_at: Some(started_at),
            finished_at,
            container_id: Some(container_id.to_owned()),
        }
    }
}

/// One start of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub container_id: String,
    pub started_at: Timestamp,
    pub finished: Option<Terminated>,
}

/// Why a container could not be started; each maps to a waiting reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartErrorKind {
    /// `ErrImagePull`, then `ImagePullBackOff` while waiting.
    ImagePull,
    /// `CreateContainerConfigError` (missing ConfigMap or Secret key in env).
    CreateConfig,
    /// `CreateContainerError` (e.g. an image that needs a full node on a light one).
    Create,
    /// `ContainerCreating` with a mount failure message.
    VolumeSetup,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError {
    pub kind: StartErrorKind,
    pub message: String,
    pub at: Timestamp,
    /// Set once the kubelet is waiting out the back-off (switches `ErrImagePull` to
    /// `ImagePullBackOff`).
    pub backing_off: bool,
}

/// Everything known about one container of the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRecord {
    pub name: String,
    pub image: String,
    /// Runs started so far, across sandboxes; the restart count is this minus one.
    pub attempts: u32,
    /// The latest run in the current sandbox.
    pub current: Option<Run>,
    /// How the run before `current` ended (the API's `lastState`).
    pub previous: Option<Terminated>,
    pub start_error: Option<StartError>,
    /// Waiting out a crash back-off (the API's `CrashLoopBackOff`).
    pub crash_looping: bool,
    pub crash_backoff: Backoff,
    pub start_backoff: Backoff,
}

impl ContainerRecord {
    pub fn new(name: &str, image: &str) -> Self {
        Self {
            name: name.to_owned(),
            image: image.to_owned(),
            attempts: 0,
            current: None,
            previous: None,
            start_error: None,
            crash_looping: false,
            crash_backoff: Backoff::default(),
            start_backoff: Backoff::default(),
        }
    }

    pub fn restart_count(&self) -> i32 {
        i32::try_from(self.attempts.saturating_sub(1)).unwrap_or(i32::MAX)
    }

    pub fn is_running(&self) -> bool {
        self.current.as_ref().is_some_and(|r| r.finished.is_none())
    }

    /// Finished in the current sandbox, with this exit code.
    pub fn exit_code(&self) -> Option<i32> {
        self.current
            .as_ref()
            .and_then(|r| r.finished.as_ref())
            .map(|t| t.exit_code)
    }

    pub fn succeeded(&self) -> bool {
        self.exit_code() == Some(0)
    }
}

/// The pod reached a phase it never leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminal {
    /// `Succeeded` or `Failed`.
    pub phase: &'static str,
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// The pod status reason of a pod that ran past its `spec.activeDeadlineSeconds` (the kubelet's
/// active deadline handler, `pkg/kubelet/active_deadline.go`).
pub const DEADLINE_EXCEEDED_REASON: &str = "DeadlineExceeded";
/// Its message, as the kubelet words it.
pub const DEADLINE_EXCEEDED_MESSAGE: &str =
    "Pod was active on the node longer than the specified deadline";

impl Terminal {
    fn failed() -> Self {
        Self {
            phase: "Failed",
            reason: None,
            message: None,
        }
    }

    /// How the kubelet ends a pod past its active deadline: `Failed`, `DeadlineExceeded`.
    pub fn deadline_exceeded() -> Self {
        Self {
            phase: "Failed",
            reason: Some(DEADLINE_EXCEEDED_REASON.to_owned()),
            message: Some(DEADLINE_EXCEEDED_MESSAGE.to_owned()),
        }
    }
}

/// The kubelet's view of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRuntime {
    pub restart_policy: RestartPolicy,
    pub init: Vec<ContainerRecord>,
    pub main: Vec<ContainerRecord>,
    pub terminal: Option<Terminal>,
    /// When the pod has been active for its `spec.activeDeadlineSeconds`: its start time plus
    /// the deadline. From then on it ends `Failed` with `DeadlineExceeded`.
    pub active_deadline: Option<Timestamp>,
    /// The pod is ending (past its deadline): nothing starts any more, and once its running
    /// containers have stopped this becomes `terminal`. The kubelet reports the terminal phase
    /// only when no container can still be running (`mergePodStatus` in its status manager).
    pub ending: Option<Terminal>,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub start: Vec<ContainerRef>,
    /// Stop every running container, with the pod's termination grace period: the pod is
    /// ending (see [`PodRuntime::ending`]). Plan again once they have exited.
    pub stop: bool,
    /// Look again at this time (a back-off ends, the active deadline passes).
    pub wake_at: Option<Timestamp>,
}

impl PodRuntime {
    pub fn new(
        restart_policy: RestartPolicy,
        init: Vec<ContainerRecord>,
        main: Vec<ContainerRecord>,
    ) -> Self {
        Self {
            restart_policy,
            init,
            main,
            terminal: None,
            active_deadline: None,
            ending: None,
        }
    }

    pub fn record(&self, container: ContainerRef) -> Option<&ContainerRecord> {
        match container {
            ContainerRef::Init(i) => self.init.get(i),
            ContainerRef::Main(i) => self.main.get(i),
        }
    }

    fn record_mut(&mut self, container: ContainerRef) -> Option<&mut ContainerRecord> {
        match container {
            ContainerRef::Init(i) => self.init.get_mut(i),
            ContainerRef::Main(i) => self.main.get_mut(i),
        }
    }

    /// All init containers completed successfully in the current sandbox.
    pub fn initialized(&self) -> bool {
        self.init.iter().all(ContainerRecord::succeeded)
    }

    pub fn running(&self) -> impl Iterator<Item = ContainerRef> + '_ {
        let init = self.init.iter().enumerate();
        let init = init
            .filter(|(_, r)| r.is_running())
            .map(|(i, _)| ContainerRef::Init(i));
        let main = self.main.iter().enumerate();
        let main = main
            .filter(|(_, r)| r.is_running())
            .map(|(i, _)| ContainerRef::Main(i));
        init.chain(main)
    }

    pub fn on_started(
        &mut self,
        container: ContainerRef,
        container_id: &str,
        now: Timestamp,
        policy: BackoffPolicy,
    ) {
        let Some(record) = self.record_mut(container) else {
            return;
        };
        if let Some(finished) = record.current.take().and_then(|run| run.finished) {
            record
                .crash_backoff
                .record_attempt(finished.finished_at, policy);
            record.previous = Some(finished);
        }
        record.attempts += 1;
        record.current = Some(Run {
            container_id: container_id.to_owned(),
            started_at: now,
            finished: None,
        });
        record.start_error = None;
        record.crash_looping = false;
        record.start_backoff = Backoff::default();
    }

    pub fn on_exited(&mut self, container: ContainerRef, terminated: Terminated) {
        if let Some(run) = self.record_mut(container).and_then(|r| r.current.as_mut()) {
            run.finished = Some(terminated);
        }
    }

    pub fn on_start_failed(
        &mut self,
        container: ContainerRef,
        kind: StartErrorKind,
        message: String,
        now: Timestamp,
        policy: BackoffPolicy,
    ) {
        if let Some(record) = self.record_mut(container) {
            record.start_backoff.record_attempt(now, policy);
            record.crash_looping = false;
            record.start_error = Some(StartError {
                kind,
                message,
                at: now,
                backing_off: false,
            });
        }
    }

    /// The container's end was not observed by the runtime (it died with the node): it is
    /// reported as lost when the sandbox is.
    pub fn on_lost(&mut self, container: ContainerRef) {
        if let Some(run) = self.record_mut(container).and_then(|r| r.current.as_mut()) {
            run.finished = None;
        }
    }

    /// The node went down (or the kubelet lost its containers): every container is gone. A
    /// container that was running ends as the runtime reports a lost one (`Unknown`, 255). Under
    /// `Never` a pod that had started containers fails; otherwise everything runs again, init
    /// containers first, as after a sandbox change.
    pub fn on_sandbox_lost(&mut self, now: Timestamp) {
        if self.terminal.is_some() {
            return;
        }
        let mut had_containers = false;
        for record in self.init.iter_mut().chain(self.main.iter_mut()) {
            let Some(mut run) = record.current.take() else {
                continue;
            };
            had_containers = true;
            let ended = run.finished.take().unwrap_or_else(|| Terminated {
                exit_code: 255,
                signal: None,
                reason: "Unknown".to_owned(),
                message: Some("the node was restarted".to_owned()),
                started_at: Some(run.started_at),
                finished_at: now,
                container_id: Some(run.container_id.clone()),
            });
            record.crash_looping = false;
            if self.restart_policy == RestartPolicy::Never {
                run.finished = Some(ended);
                record.current = Some(run);
            } else {
                record.previous = Some(ended);
            }
        }
        if had_containers && self.restart_policy == RestartPolicy::Never {
            self.terminal = Some(Terminal::failed());
        }
    }

    /// After a deletion stopped every container: the pod ends `Succeeded` if every main
    /// container exited 0, `Failed` otherwise (the kubelet's `getPhase` for a terminal pod, whose
    /// containers are not restarted whatever the restart policy). A pod that was ending keeps
    /// the reason it was ending for.
    pub fn on_terminated_by_deletion(&mut self) {
        if self.terminal.is_some() {
            return;
        }
        let all_succeeded = self.initialized() && self.main.iter().all(ContainerRecord::succeeded);
        let terminal = match self.ending.take() {
            Some(ending) => ending,
            None if all_succeeded => Terminal {
                phase: "Succeeded",
                reason: None,
                message: None,
            },
            None => Terminal::failed(),
        };
        self.finish(terminal);
    }

    /// The pod is terminal: a container waiting out a crash back-off will not restart, so it
    /// shows how its last run ended (the kubelet reports no `CrashLoopBackOff` for a container
    /// it will not restart).
    fn finish(&mut self, terminal: Terminal) {
        for record in self.init.iter_mut().chain(self.main.iter_mut()) {
            record.crash_looping = false;
        }
        self.terminal = Some(terminal);
    }

    /// Decides which containers to start now, whether to stop them all, and when to look again.
    pub fn plan(&mut self, now: Timestamp) -> Plan {
        let mut plan = Plan::default();
        if self.terminal.is_some() {
            return plan;
        }
        // The kubelet's active deadline handler: measured from the pod's start time, checked on
        // every sync (at least once a second), whatever the containers are doing.
        if self.ending.is_none() && self.active_deadline.is_some_and(|deadline| now >= deadline) {
            self.ending = Some(Terminal::deadline_exceeded());
        }
        if let Some(ending) = &self.ending {
            if self.running().next().is_some() {
                plan.stop = true;
            } else {
                let ending = ending.clone();
                self.ending = None;
                self.finish(ending);
            }
            return plan;
        }
        if let Some(deadline) = self.active_deadline {
            plan.wake_at = Some(deadline);
        }
        let policy = self.restart_policy;
        for (i, record) in self.init.iter_mut().enumerate() {
            match record.current.as_ref().map(|r| r.finished.as_ref()) {
                Some(None) => return plan,
                Some(Some(t)) if t.exit_code == 0 => continue,
                Some(Some(t)) => {
                    if policy == RestartPolicy::Never {
                        self.terminal = Some(Terminal::failed());
                        return plan;
                    }
                    let failed_at = t.finished_at;
                    decide_restart(record, failed_at, now, ContainerRef::Init(i), &mut plan);
                    return plan;
                }
                None => {
                    decide_start(record, now, ContainerRef::Init(i), &mut plan);
                    return plan;
                }
            }
        }
        let mut settled = 0;
        let mut all_succeeded = true;
        for (i, record) in self.main.iter_mut().enumerate() {
            match record.current.as_ref().map(|r| r.finished.as_ref()) {
                Some(None) => all_succeeded = false,
                Some(Some(t)) if policy.restarts(t.exit_code) => {
                    all_succeeded = false;
                    let failed_at = t.finished_at;
                    decide_restart(record, failed_at, now, ContainerRef::Main(i), &mut plan);
                }
                Some(Some(t)) => {
                    settled += 1;
                    all_succeeded &= t.exit_code == 0;
                }
                None => {
                    all_succeeded = false;
                    decide_start(record, now, ContainerRef::Main(i), &mut plan);
                }
            }
        }
        if settled == self.main.len() {
            self.terminal = Some(Terminal {
                phase: if all_succeeded { "Succeeded" } else { "Failed" },
                reason: None,
                message: None,
            });
            // Nothing is left to time: no deadline applies to a finished pod.
            plan.wake_at = None;
        }
        plan
    }
}

fn decide_start(
    record: &mut ContainerRecord,
    now: Timestamp,
    container: ContainerRef,
    plan: &mut Plan,
) {
    if let Some(error) = record.start_error.as_mut()
        && let Some(until) = record.start_backoff.wait_until(error.at, now)
    {
        error.backing_off = true;
        plan.wake_at = earliest(plan.wake_at, until);
        return;
    }
    plan.start.push(container);
}

fn decide_restart(
    record: &mut ContainerRecord,
    failed_at: Timestamp,
    now: Timestamp,
    container: ContainerRef,
    plan: &mut Plan,
) {
    if record.start_error.is_some() {
        // The restart itself failed to start: retry on the start back-off.
        decide_start(record, now, container, plan);
        return;
    }
    match record.crash_backoff.wait_until(failed_at, now) {
        Some(until) => {
            record.crash_looping = true;
            plan.wake_at = earliest(plan.wake_at, until);
        }
        None => plan.start.push(container),
    }
}

fn earliest(current: Option<Timestamp>, candidate: Timestamp) -> Option<Timestamp> {
    Some(current.map_or(candidate, |c| c.min(candidate)))
}

/// The back-off period to show in a `CrashLoopBackOff` message, e.g. `20s` or `5m0s`.
pub fn format_backoff(period: Duration) -> String {
    let secs = period.as_secs();
    match (secs / 60, secs % 60) {
        (0, s) => format!("{s}s"),
        (m, s) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pod(policy: RestartPolicy, init: usize, main: usize) -> PodRuntime {
        let records = |prefix: &str, n: usize| {
            (0..n)
                .map(|i| ContainerRecord::new(&format!("{prefix}{i}"), "img"))
                .collect()
        };
        PodRuntime::new(policy, records("init", init), records("main", main))
    }

    fn exit(rt: &mut PodRuntime, c: ContainerRef, code: i32, at: i64) {
        let started = rt.record(c).unwrap().current.as_ref().unwrap().started_at;
        rt.on_exited(
            c,
            Terminated::exited(Some(code), None, started, t(at), "id"),
        );
    }

    const POLICY: BackoffPolicy = BackoffPolicy {
        initial: Duration::from_secs(10),
        max: Duration::from_secs(300),
    };

    #[test]
    fn runs_init_containers_in_order_then_all_main_containers() {
        let mut rt = pod(RestartPolicy::OnFailure, 2, 2);
        assert_eq!(rt.plan(t(0)).start, vec![ContainerRef::Init(0)]);
        rt.on_started(ContainerRef::Init(0), "a", t(0), POLICY);
        assert_eq!(rt.plan(t(0)).start, vec![]);
        exit(&mut rt, ContainerRef::Init(0), 0, 1);
        assert_eq!(rt.plan(t(1)).start, vec![ContainerRef::Init(1)]);
        rt.on_started(ContainerRef::Init(1), "b", t(1), POLICY);
        exit(&mut rt, ContainerRef::Init(1), 0, 2);
        assert!(rt.initialized());
        assert_eq!(
            rt.plan(t(2)).start,
            vec![ContainerRef::Main(0), ContainerRef::Main(1)]
        );
    }

    #[test]
    fn restart_policies_decide_what_happens_after_an_exit() {
        // (policy, exit code, restarted?, terminal phase)
        let cases = [
            (RestartPolicy::Always, 0, true, None),
            (RestartPolicy::Always, 1, true, None),
            (RestartPolicy::OnFailure, 0, false, Some("Succeeded")),
            (RestartPolicy::OnFailure, 3, true, None),
            (RestartPolicy::Never, 0, false, Some("Succeeded")),
            (RestartPolicy::Never, 3, false, Some("Failed")),
        ];
        for (policy, code, restarted, phase) in cases {
            let mut rt = pod(policy, 0, 1);
            rt.plan(t(0));
            rt.on_started(ContainerRef::Main(0), "a", t(0), POLICY);
            exit(&mut rt, ContainerRef::Main(0), code, 1);
            let plan = rt.plan(t(1));
            assert_eq!(
                plan.start == vec![ContainerRef::Main(0)],
                restarted,
                "{policy:?} {code}"
            );
            assert_eq!(
                rt.terminal.as_ref().map(|x| x.phase),
                phase,
                "{policy:?} {code}"
            );
        }
    }

    #[test]
    fn failing_init_container_crash_loops_or_fails_the_pod() {
        let mut rt = pod(RestartPolicy::Never, 1, 1);
        rt.plan(t(0));
        rt.on_started(ContainerRef::Init(0), "a", t(0), POLICY);
        exit(&mut rt, ContainerRef::Init(0), 2, 1);
        assert_eq!(rt.plan(t(1)).start, vec![]);
        assert_eq!(rt.terminal.as_ref().map(|x| x.phase), Some("Failed"));

        let mut rt = pod(RestartPolicy::OnFailure, 1, 1);
        rt.plan(t(0));
        rt.on_started(ContainerRef::Init(0), "a", t(0), POLICY);
        exit(&mut rt, ContainerRef::Init(0), 2, 1);
        // First restart at once.
        assert_eq!(rt.plan(t(1)).start, vec![ContainerRef::Init(0)]);
        rt.on_started(ContainerRef::Init(0), "b", t(1), POLICY);
        exit(&mut rt, ContainerRef::Init(0), 2, 2);
        // Second: back-off of 10 s.
        let plan = rt.plan(t(2));
        assert_eq!(plan.start, vec![]);
        assert_eq!(plan.wake_at, Some(t(12)));
        assert!(rt.init[0].crash_looping);
        assert_eq!(rt.init[0].restart_count(), 1);
        assert_eq!(rt.plan(t(12)).start, vec![ContainerRef::Init(0)]);
        rt.on_started(ContainerRef::Init(0), "c", t(12), POLICY);
        assert!(!rt.init[0].crash_looping);
        assert_eq!(rt.init[0].restart_count(), 2);
        assert_eq!(rt.init[0].previous.as_ref().map(|p| p.exit_code), Some(2));
        exit(&mut rt, ContainerRef::Init(0), 2, 13);
        // Third: 20 s.
        assert_eq!(rt.plan(t(13)).wake_at, Some(t(33)));
    }

    #[test]
    fn start_errors_back_off() {
        let mut rt = pod(RestartPolicy::Always, 0, 1);
        assert_eq!(rt.plan(t(0)).start, vec![ContainerRef::Main(0)]);
        rt.on_start_failed(
            ContainerRef::Main(0),
            StartErrorKind::ImagePull,
            "nope".into(),
            t(0),
            POLICY,
        );
        let plan = rt.plan(t(0));
        assert_eq!(plan.start, vec![]);
        assert_eq!(plan.wake_at, Some(t(10)));
        assert!(rt.main[0].start_error.as_ref().unwrap().backing_off);
        assert_eq!(rt.plan(t(10)).start, vec![ContainerRef::Main(0)]);
        rt.on_start_failed(
            ContainerRef::Main(0),
            StartErrorKind::ImagePull,
            "nope".into(),
            t(10),
            POLICY,
        );
        assert_eq!(rt.plan(t(10)).wake_at, Some(t(30)));
        rt.on_started(ContainerRef::Main(0), "a", t(30), POLICY);
        assert_eq!(rt.main[0].start_error, None);
        assert_eq!(rt.main[0].restart_count(), 0);
    }

    #[test]
    fn a_lost_sandbox_reruns_everything_or_fails_never_pods() {
        let mut rt = pod(RestartPolicy::OnFailure, 1, 1);
        rt.plan(t(0));
        rt.on_started(ContainerRef::Init(0), "a", t(0), POLICY);
        exit(&mut rt, ContainerRef::Init(0), 0, 1);
        rt.plan(t(1));
        rt.on_started(ContainerRef::Main(0), "b", t(1), POLICY);
        rt.on_sandbox_lost(t(5));
        assert!(!rt.initialized());
        assert_eq!(rt.main[0].previous.as_ref().map(|p| p.exit_code), Some(255));
        assert_eq!(
            rt.main[0].previous.as_ref().map(|p| p.reason.as_str()),
            Some("Unknown")
        );
        assert_eq!(rt.init[0].previous.as_ref().map(|p| p.exit_code), Some(0));
        assert_eq!(rt.plan(t(6)).start, vec![ContainerRef::Init(0)]);
        rt.on_started(ContainerRef::Init(0), "c", t(6), POLICY);
        assert_eq!(rt.init[0].restart_count(), 1);

        // A container killed by the shutdown itself also reads as lost.
        let mut rt = pod(RestartPolicy::Always, 0, 1);
        rt.plan(t(0));
        rt.on_started(ContainerRef::Main(0), "a", t(0), POLICY);
        exit(&mut rt, ContainerRef::Main(0), 143, 4);
        rt.on_lost(ContainerRef::Main(0));
        rt.on_sandbox_lost(t(5));
        assert_eq!(rt.main[0].previous.as_ref().map(|p| p.exit_code), Some(255));

        let mut rt = pod(RestartPolicy::Never, 0, 1);
        rt.plan(t(0));
        rt.on_started(ContainerRef::Main(0), "a", t(0), POLICY);
        rt.on_sandbox_lost(t(5));
        assert_eq!(rt.terminal.as_ref().map(|x| x.phase), Some("Failed"));
        assert_eq!(rt.main[0].exit_code(), Some(255));
    }

    #[test]
    fn deletion_ends_the_pod_by_exit_codes() {
        for (code, phase) in [(0, "Succeeded"), (143, "Failed")] {
            let mut rt = pod(RestartPolicy::Always, 0, 1);
            rt.plan(t(0));
            rt.on_started(ContainerRef::Main(0), "a", t(0), POLICY);
            exit(&mut rt, ContainerRef::Main(0), code, 1);
            rt.on_terminated_by_deletion();
            assert_eq!(rt.terminal.as_ref().map(|x| x.phase), Some(phase));
        }
    }

    #[test]
    fn deletion_of_a_crash_looping_pod_shows_the_last_exit_not_the_back_off() {
        let mut rt = pod(RestartPolicy::OnFailure, 0, 1);
        rt.plan(t(0));
        rt.on_started(ContainerRef::Main(0), "a", t(0), POLICY);
        exit(&mut rt, ContainerRef::Main(0), 1, 1);
        rt.plan(t(1));
        rt.on_started(ContainerRef::Main(0), "b", t(1), POLICY);
        exit(&mut rt, ContainerRef::Main(0), 1, 2);
        rt.plan(t(2));
        assert!(rt.main[0].crash_looping);
        rt.on_terminated_by_deletion();
        assert!(!rt.main[0].crash_looping);
        assert_eq!(rt.terminal.as_ref().map(|x| x.phase), Some("Failed"));
    }

    /// `activeDeadlineSeconds`: past the deadline nothing starts, every running container is
    /// stopped, and only once they have all exited does the pod end Failed/DeadlineExceeded.
    #[test]
    fn the_active_deadline_stops_the_pod_and_fails_it_once_its_containers_exited() {
        // (init containers, main containers, running at the deadline)
        let cases = [
            (0, 1, vec![ContainerRef::Main(0)]),
            (1, 1, vec![ContainerRef::Init(0)]),
            (0, 2, vec![ContainerRef::Main(0), ContainerRef::Main(1)]),
        ];
        for (init, main, running) in cases {
            let mut rt = pod(RestartPolicy::OnFailure, init, main);
            rt.active_deadline = Some(t(10));
            let plan = rt.plan(t(0));
            assert_eq!(plan.start, running, "{init} {main}");
            assert_eq!(plan.wake_at, Some(t(10)), "wakes at the deadline");
            for c in &running {
                rt.on_started(*c, "a", t(0), POLICY);
            }
            let before = rt.plan(t(9));
            assert!(!before.stop && before.start.is_empty());
            assert_eq!(before.wake_at, Some(t(10)));

            let at_deadline = rt.plan(t(10));
            assert!(at_deadline.stop, "{init} {main}");
            assert!(at_deadline.start.is_empty());
            assert_eq!(
                rt.terminal, None,
                "terminal only once the containers stopped"
            );
            for (i, c) in running.iter().enumerate() {
                assert!(rt.plan(t(11)).stop);
                exit(&mut rt, *c, 143, 11 + i64::try_from(i).unwrap());
            }
            let after = rt.plan(t(13));
            assert_eq!(after, Plan::default());
            let terminal = rt.terminal.clone().unwrap();
            assert_eq!(
                (
                    terminal.phase,
                    terminal.reason.as_deref(),
                    terminal.message.as_deref()
                ),
                (
                    "Failed",
                    Some(DEADLINE_EXCEEDED_REASON),
                    Some(DEADLINE_EXCEEDED_MESSAGE)
                )
            );
            // Nothing restarts a pod past its deadline, whatever the restart policy.
            assert_eq!(rt.plan(t(100)), Plan::default());
        }
    }

    #[test]
    fn the_active_deadline_ends_a_crash_looping_pod_at_once() {
        let mut rt = pod(RestartPolicy::OnFailure, 0, 1);
        rt.active_deadline = Some(t(30));
        rt.plan(t(0));
        rt.on_started(ContainerRef::Main(0), "a", t(0), POLICY);
        exit(&mut rt, ContainerRef::Main(0), 1, 1);
        rt.plan(t(1));
        rt.on_started(ContainerRef::Main(0), "b", t(1), POLICY);
        exit(&mut rt, ContainerRef::Main(0), 1, 2);
        // Back-off until 12, the deadline earlier still wins when it is nearer.
        assert_eq!(rt.plan(t(2)).wake_at, Some(t(12)));
        rt.active_deadline = Some(t(5));
        assert_eq!(rt.plan(t(2)).wake_at, Some(t(5)));
        let plan = rt.plan(t(5));
        assert!(!plan.stop, "nothing runs, so nothing to stop");
        assert_eq!(
            rt.terminal.as_ref().and_then(|x| x.reason.as_deref()),
            Some(DEADLINE_EXCEEDED_REASON)
        );
        assert!(!rt.main[0].crash_looping);
        assert_eq!(rt.main[0].restart_count(), 1);
    }

    #[test]
    fn a_deletion_while_ending_keeps_the_deadline_reason() {
        let mut rt = pod(RestartPolicy::Never, 0, 1);
        rt.active_deadline = Some(t(1));
        rt.plan(t(0));
        rt.on_started(ContainerRef::Main(0), "a", t(0), POLICY);
        assert!(rt.plan(t(1)).stop);
        exit(&mut rt, ContainerRef::Main(0), 0, 2);
        rt.on_terminated_by_deletion();
        assert_eq!(rt.terminal, Some(Terminal::deadline_exceeded()));
    }

    #[test]
    fn a_pod_finished_before_its_deadline_stays_as_it_ended() {
        let mut rt = pod(RestartPolicy::Never, 0, 1);
        rt.active_deadline = Some(t(10));
        rt.plan(t(0));
        rt.on_started(ContainerRef::Main(0), "a", t(0), POLICY);
        exit(&mut rt, ContainerRef::Main(0), 0, 2);
        assert_eq!(rt.plan(t(2)).wake_at, None);
        rt.plan(t(20));
        assert_eq!(rt.terminal.as_ref().map(|x| x.phase), Some("Succeeded"));
        assert_eq!(rt.terminal.as_ref().and_then(|x| x.reason.clone()), None);
    }

    #[test]
    fn exit_statuses_map_to_codes_and_reasons() {
        let cases = [
            (Some(0), None, 0, "Completed"),
            (Some(2), None, 2, "Error"),
            (None, Some(15), 143, "Error"),
            (None, Some(9), 137, "Error"),
            (None, None, 255, "Error"),
        ];
        for (code, signal, expected, reason) in cases {
            let term = Terminated::exited(code, signal, t(0), t(1), "x");
            assert_eq!((term.exit_code, term.reason.as_str()), (expected, reason));
        }
    }

    #[test]
    fn formats_backoff_like_go_durations() {
        assert_eq!(format_backoff(Duration::from_secs(10)), "10s");
        assert_eq!(format_backoff(Duration::from_secs(300)), "5m0s");
        assert_eq!(format_backoff(Duration::from_secs(160)), "2m40s");
    }
}
