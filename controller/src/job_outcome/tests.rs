use jiff::Timestamp;
use serde_json::{Value, json};

use super::*;

const ANNOTATION: &str = r#"{"name":"driver","version":"1.0.0","skyhook":"gpu","stage":"apply","image":"x","containerSHA":""}"#;

fn context() -> OutcomeContext<'static> {
    OutcomeContext {
        node_boot_id: Some("boot-1"),
        now: "2026-11-28T12:00:00Z".parse::<Timestamp>().unwrap(),
        reboot_deadline: std::time::Duration::from_secs(600),
    }
}

fn job(status: Value, suspend: bool, annotations: Value) -> CachedJob {
    serde_json::from_value(json!({
        "metadata": {"name": "gpu-driver-apply-node-1", "annotations": annotations},
        "spec": {"suspend": suspend, "backoffLimit": 3, "template": {
            "metadata": {"annotations": {"skyhook.nvidia.com/package": ANNOTATION}},
            "spec": {"nodeName": "node-1", "initContainers": [
                {"name": "driver-init"}, {"name": "driver-apply"}, {"name": "driver-applycheck"}]}}},
        "status": status
    }))
    .unwrap()
}

fn attempt(name: &str, created: &str, status: Value) -> CachedPod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "creationTimestamp": created,
            "annotations": {"skyhook.nvidia.com/package": ANNOTATION}},
        "spec": {"nodeName": "node-1", "initContainers": [
            {"name": "driver-init"}, {"name": "driver-apply"}, {"name": "driver-applycheck"}]},
        "status": status
    }))
    .unwrap()
}

fn exited(code: i32) -> Value {
    json!({"phase": "Failed", "initContainerStatuses": [
        {"name": "driver-init", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
        {"name": "driver-apply", "restartCount": 0,
         "state": {"terminated": {"exitCode": code, "reason": "Error"}}}]})
}

fn refused() -> Value {
    json!({"phase": "Failed", "reason": "OutOfcpu", "message": "Pod was rejected"})
}

fn running() -> Value {
    json!({"phase": "Pending", "initContainerStatuses": [
        {"name": "driver-init", "restartCount": 0, "state": {"running": {}}}]})
}

fn condition(type_: &str, reason: &str) -> Value {
    json!({"conditions": [{"type": type_, "status": "True", "reason": reason}], "failed": 2})
}

#[test]
fn a_complete_job_succeeded_with_its_failed_attempts_as_restarts() {
    let job = job(
        condition("Complete", "CompletionsReached"),
        false,
        json!({}),
    );
    assert_eq!(
        outcome(&job, &[], context()),
        PodOutcome::Succeeded {
            container: "driver-applycheck".into(),
            restarts: 2
        }
    );
}

#[test]
fn a_failed_job_is_a_failure_only_when_an_attempt_failed_genuinely() {
    let failed = job(
        condition("Failed", BACKOFF_LIMIT_EXCEEDED),
        false,
        json!({}),
    );
    let genuine = attempt("a", "2026-11-28T11:00:00Z", exited(3));
    let rejected = attempt("b", "2026-11-28T11:01:00Z", refused());
    match outcome(&failed, &[&genuine, &rejected], context()) {
        PodOutcome::Failed(failure) => {
            assert_eq!(failure.container.as_deref(), Some("driver-apply"));
            assert_eq!(failure.exit_code, Some(3));
            assert_eq!(failure.restarts, 2);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        outcome(&failed, &[&rejected], context()),
        PodOutcome::FailedWithoutCause
    );
    assert_eq!(
        outcome(&failed, &[], context()),
        PodOutcome::FailedWithoutCause
    );
}

#[test]
fn a_job_past_its_deadline_or_its_restart_allowance_failed_genuinely() {
    let deadline = job(condition("Failed", DEADLINE_EXCEEDED), false, json!({}));
    match outcome(&deadline, &[], context()) {
        PodOutcome::Failed(failure) => assert_eq!(failure.reason, DEADLINE_EXCEEDED),
        other => panic!("{other:?}"),
    }
    let spent = job(
        condition("Failed", BACKOFF_LIMIT_EXCEEDED),
        false,
        json!({"skyhook.nvidia.com/restart-limit-exceeded": "3"}),
    );
    assert!(matches!(
        outcome(&spent, &[], context()),
        PodOutcome::Failed(_)
    ));
}

#[test]
fn an_unfinished_job_reads_its_newest_attempt() {
    let active = job(json!({"active": 1, "failed": 1}), false, json!({}));
    let first = attempt("a", "2026-11-28T11:00:00Z", exited(1));
    let second = attempt("b", "2026-11-28T11:05:00Z", running());
    assert_eq!(
        outcome(&active, &[&first, &second], context()),
        PodOutcome::Running
    );
    // The newest attempt failed and the Job controller has not yet made the next one.
    match outcome(
        &active,
        &[&second, &attempt("c", "2026-11-28T11:09:00Z", exited(2))],
        context(),
    ) {
        PodOutcome::Retrying(failure) => {
            assert_eq!(failure.exit_code, Some(2));
            assert_eq!(failure.restarts, 1);
        }
        other => panic!("{other:?}"),
    }
    let refused_attempt = attempt("d", "2026-11-28T11:10:00Z", refused());
    assert!(matches!(
        outcome(&active, &[&refused_attempt], context()),
        PodOutcome::Rejected { .. }
    ));
    assert_eq!(outcome(&active, &[], context()), PodOutcome::Running);
    let suspended = job(json!({"failed": 1}), true, json!({}));
    assert_eq!(
        outcome(&suspended, &[&first], context()),
        PodOutcome::Running
    );
}

#[test]
fn genuine_failures_exclude_disruptions_admission_refusals_and_unknown_statuses() {
    let status = |value: Value| -> CachedPodStatus {
        attempt("x", "2026-11-28T11:00:00Z", value).status.unwrap()
    };
    let cases = [
        (exited(1), true),
        (exited(0), false),
        (refused(), false),
        (running(), false),
        (
            json!({"phase": "Failed", "reason": "DeadlineExceeded"}),
            true,
        ),
        (
            json!({"phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True"}],
                "initContainerStatuses": [{"name": "driver-init", "restartCount": 0,
                    "state": {"terminated": {"exitCode": 137}}}]}),
            false,
        ),
        (
            json!({"phase": "Failed", "initContainerStatuses": [{"name": "driver-init",
                "restartCount": 0, "state": {"terminated": {"exitCode": 137,
                "reason": "ContainerStatusUnknown"}}}]}),
            false,
        ),
        (
            json!({"phase": "Failed", "initContainerStatuses": [{"name": "driver-init",
                "restartCount": 0, "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}),
            true,
        ),
        (
            json!({"phase": "Running", "initContainerStatuses": [{"name": "interrupt",
                "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
            true,
        ),
    ];
    for (value, want) in cases {
        assert_eq!(
            failed_genuinely(Some(&status(value.clone()))),
            want,
            "{value}"
        );
    }
    assert!(!failed_genuinely(None));
}

#[test]
fn only_the_first_and_newest_genuine_failures_are_kept() {
    let pods = [
        attempt("d", "2026-11-28T11:03:00Z", exited(1)),
        attempt("a", "2026-11-28T11:00:00Z", exited(1)),
        attempt("c", "2026-11-28T11:02:00Z", exited(1)),
        attempt("r", "2026-11-28T11:02:30Z", refused()),
        attempt("b", "2026-11-28T11:01:00Z", exited(1)),
    ];
    let refs: Vec<&CachedPod> = pods.iter().collect();
    let pruned: Vec<&str> = attempts_to_prune(&refs)
        .iter()
        .filter_map(|pod| pod.metadata.name.as_deref())
        .collect();
    assert_eq!(pruned, ["b", "c"]);
    assert!(attempts_to_prune(&refs[..2]).is_empty());
}

#[test]
fn failure_target_is_stale_strictly_after_five_minutes() {
    let since = "2026-11-28T11:55:00Z".parse::<Timestamp>().unwrap();
    let at = |offset: &str| -> Timestamp {
        since
            .checked_add(offset.parse::<jiff::SignedDuration>().unwrap())
            .unwrap()
    };
    // (now, stale, time left before it is)
    let cases = [
        ("0s", false, Some(301)),
        ("4m59s", false, Some(2)),
        ("5m", false, Some(1)),
        ("5m1s", true, Some(0)),
        ("2h", true, Some(0)),
        // A clock behind the condition's time: it has waited nothing yet.
        ("-1m", false, Some(301)),
    ];
    for (offset, stale, left) in cases {
        let now = at(offset);
        assert_eq!(failure_target_stale(Some(since), now), stale, "{offset}");
        assert_eq!(
            failure_target_remaining(Some(since), now).map(|d| d.as_secs()),
            left,
            "{offset}"
        );
    }
    assert!(!failure_target_stale(None, at("1h")));
    assert_eq!(failure_target_remaining(None, at("1h")), None);
}

#[test]
fn a_job_at_failure_target_for_more_than_five_minutes_has_failed() {
    let stuck = |since: &str| {
        job(
            json!({"active": 1, "failed": 0, "conditions": [{"type": "FailureTarget",
                "status": "True", "reason": "DeadlineExceeded",
                "message": "Job was active longer than specified deadline",
                "lastTransitionTime": since}]}),
            false,
            json!({}),
        )
    };
    // The pod the Job controller deleted never terminates: its node is unreachable.
    let terminating: CachedPod = serde_json::from_value(json!({
        "metadata": {"name": "p", "creationTimestamp": "2026-11-28T11:00:00Z",
            "deletionTimestamp": "2026-11-28T11:54:00Z",
            "annotations": {"skyhook.nvidia.com/package": ANNOTATION}},
        "spec": {"nodeName": "node-1"},
        "status": {"phase": "Running", "initContainerStatuses": [
            {"name": "driver-init", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
            {"name": "driver-apply", "restartCount": 2, "state": {"running": {}}}]}
    }))
    .unwrap();
    // context() is at 12:00:00.
    let cases = [
        ("2026-11-28T11:55:01Z", None),
        ("2026-11-28T11:54:59Z", Some(2)),
    ];
    for (since, restarts) in cases {
        let got = outcome(&stuck(since), &[&terminating], context());
        match restarts {
            None => assert_eq!(got, PodOutcome::Running, "{since}"),
            Some(restarts) => assert_eq!(
                got,
                PodOutcome::Failed(PodFailure {
                    container: Some("driver-apply".into()),
                    exit_code: None,
                    reason: DEADLINE_EXCEEDED.into(),
                    message: Some("Job was active longer than specified deadline".into()),
                    restarts,
                    reboot_requested: None,
                }),
                "{since}"
            ),
        }
    }
    // Failed, once it comes, is read as ever.
    let failed = job(condition("Failed", DEADLINE_EXCEEDED), false, json!({}));
    assert!(matches!(
        outcome(&failed, &[], context()),
        PodOutcome::Failed(_)
    ));
}
