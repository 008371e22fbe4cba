use serde_json::{Value, json};

use super::*;

const ANNOTATION: &str = r#"{"name":"driver","version":"1.0.0","skyhook":"gpu","stage":"interrupt","image":"x","containerSHA":""}"#;

fn job(conditions: Value, annotations: Value, deleting: bool) -> CachedJob {
    let mut metadata = json!({"name": "gpu-interrupt-service-node-1", "annotations": annotations});
    if deleting {
        metadata["deletionTimestamp"] = json!("2026-11-28T12:00:00Z");
    }
    serde_json::from_value(json!({
        "metadata": metadata,
        "spec": {"template": {
            "metadata": {"annotations": {"skyhook.nvidia.com/package": ANNOTATION}},
            "spec": {"nodeName": "node-1", "initContainers": [{"name": "interrupt"}]}}},
        "status": {"conditions": conditions, "active": 1}
    }))
    .unwrap()
}

fn at(type_: &str) -> Value {
    json!([{"type": type_, "status": "True", "reason": "DeadlineExceeded",
        "lastTransitionTime": "2026-11-28T12:00:00Z"}])
}

fn attempt(name: &str, created: &str, deleting: bool, status: Value) -> CachedPod {
    let mut metadata = json!({"name": name, "creationTimestamp": created});
    if deleting {
        metadata["deletionTimestamp"] = json!("2026-11-28T12:00:01Z");
    }
    serde_json::from_value(json!({
        "metadata": metadata,
        "spec": {"nodeName": "node-1", "initContainers": [{"name": "driver-init"}, {"name": "interrupt"}]},
        "status": status
    }))
    .unwrap()
}

/// An attempt whose `interrupt` container is in `state`, after `driver-init` exited 0.
fn live(state: Value) -> Value {
    json!({"phase": "Running", "initContainerStatuses": [
        {"name": "driver-init", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
        {"name": "interrupt", "restartCount": 3, "state": state}]})
}

fn running() -> Value {
    live(json!({"running": {}}))
}

fn waiting(reason: &str, message: &str) -> Value {
    live(json!({"waiting": {"reason": reason, "message": message}}))
}

fn failed() -> Value {
    json!({"phase": "Failed", "initContainerStatuses": [
        {"name": "driver-init", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
        {"name": "interrupt", "restartCount": 0,
         "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]})
}

fn tail_of(pod: &str, instead: Option<&str>) -> Option<LastLogs> {
    Some(LastLogs::Tail {
        pod: pod.into(),
        container: "interrupt".into(),
        instead: instead.map(str::to_owned),
    })
}

#[test]
fn a_job_stuck_at_failure_target_without_a_kept_failure_needs_its_last_logs() {
    let stuck = job(at("FailureTarget"), json!({}), false);
    let terminating = attempt("p2", "2026-11-28T11:05:00Z", true, running());
    let older_running = attempt("p1", "2026-11-28T11:00:00Z", true, running());
    let kept_failure = attempt("p0", "2026-11-28T10:55:00Z", false, failed());
    let pruned_failure = attempt("p0", "2026-11-28T10:55:00Z", true, failed());
    let crash_looping = attempt(
        "p2",
        "2026-11-28T11:05:00Z",
        true,
        waiting(
            "CrashLoopBackOff",
            "back-off 40s restarting failed container",
        ),
    );
    let never_started = attempt(
        "p2",
        "2026-11-28T11:05:00Z",
        true,
        waiting("ImagePullBackOff", "Back-off pulling image \"x:bogus\""),
    );
    let all_done = attempt(
        "p2",
        "2026-11-28T11:05:00Z",
        true,
        json!({"phase": "Running", "initContainerStatuses": [
            {"name": "driver-init", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
            {"name": "interrupt", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}]}),
    );
    let no_status = attempt(
        "p2",
        "2026-11-28T11:05:00Z",
        true,
        json!({"phase": "Pending"}),
    );
    let cases: [(&str, CachedJob, Vec<&CachedPod>, Option<LastLogs>); 12] = [
        (
            "the running container's log, of the newest attempt",
            stuck.clone(),
            vec![&older_running, &terminating],
            tail_of("p2", None),
        ),
        (
            "a crash-looping container ran: its log, the waiting reason if unreadable",
            stuck.clone(),
            vec![&crash_looping],
            tail_of(
                "p2",
                Some("interrupt: CrashLoopBackOff: back-off 40s restarting failed container"),
            ),
        ),
        (
            "a container that never started: its waiting reason",
            stuck.clone(),
            vec![&never_started],
            Some(LastLogs::Record(
                "interrupt: ImagePullBackOff: Back-off pulling image \"x:bogus\"".into(),
            )),
        ),
        (
            "a genuine failure kept for kubectl logs",
            stuck.clone(),
            vec![&kept_failure, &terminating],
            None,
        ),
        (
            "a genuine failure being deleted is no archive",
            stuck.clone(),
            vec![&pruned_failure, &terminating],
            tail_of("p2", None),
        ),
        (
            "the annotation already there",
            job(
                at("FailureTarget"),
                json!({"skyhook.nvidia.com/last-logs": "interrupt:\n"}),
                false,
            ),
            vec![&terminating],
            None,
        ),
        (
            "not at FailureTarget",
            job(json!([]), json!({}), false),
            vec![&terminating],
            None,
        ),
        (
            "failed for good",
            job(
                json!([{"type": "FailureTarget", "status": "True"},
                       {"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]),
                json!({}),
                false,
            ),
            vec![&terminating],
            None,
        ),
        (
            "the Job being deleted",
            job(at("FailureTarget"), json!({}), true),
            vec![&terminating],
            None,
        ),
        (
            "every init container exited 0",
            stuck.clone(),
            vec![&all_done],
            None,
        ),
        (
            "no container status yet",
            stuck.clone(),
            vec![&no_status],
            None,
        ),
        ("no attempt left", stuck.clone(), vec![], None),
    ];
    for (case, job, attempts, want) in cases {
        assert_eq!(needed(&job, &attempts), want, "{case}");
    }
}

#[test]
fn the_annotation_holds_the_log_or_why_there_is_none() {
    let tail = |instead: Option<&str>| LastLogs::Tail {
        pod: "p".into(),
        container: "interrupt".into(),
        instead: instead.map(str::to_owned),
    };
    let unreadable = || Err("the server rejected our request (502)".to_owned());
    let cases = [
        (
            LastLogs::Record("interrupt: ErrImagePull: not found".into()),
            unreadable(),
            "interrupt: ErrImagePull: not found",
        ),
        (
            tail(None),
            Ok(&b"restarting rsyslog\nstill waiting\n"[..]),
            "interrupt:\nrestarting rsyslog\nstill waiting\n",
        ),
        (tail(None), Ok(&b""[..]), "interrupt:\n"),
        (
            tail(Some("interrupt: CrashLoopBackOff: back-off 40s")),
            unreadable(),
            "interrupt: CrashLoopBackOff: back-off 40s",
        ),
        (
            tail(None),
            unreadable(),
            "interrupt: logs unavailable: the server rejected our request (502)",
        ),
    ];
    for (request, read, want) in cases {
        assert_eq!(annotation(&request, read), want, "{request:?}");
    }
}

#[test]
fn the_tail_keeps_the_last_16_kib_as_text() {
    let mut log = vec![b'a'; 10];
    log.extend(std::iter::repeat_n(b'b', MAX_BYTES));
    assert_eq!(tail(&log), "b".repeat(MAX_BYTES));
    assert_eq!(tail(b"short\n"), "short\n");
    // A two-byte character cut in half by the bound reads as U+FFFD; the text stays in bound.
    let mut split = "é".as_bytes().to_vec();
    split.extend(std::iter::repeat_n(b'c', MAX_BYTES - 1));
    let text = tail(&split);
    assert!(text.len() <= MAX_BYTES, "{}", text.len());
    assert!(text.ends_with('c'));
    // Bytes that are not UTF-8 grow into U+FFFD (3 bytes each): cut again at a character.
    let text = tail(&vec![0xff; MAX_BYTES]);
    assert!(text.len() <= MAX_BYTES, "{}", text.len());
    assert!(text.chars().all(|c| c == '\u{FFFD}'));
}
