use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ContainerStateRunning, ContainerStateWaiting, ContainerStatus, Pod, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, Stage};

use super::*;
use crate::names::OwnerSkyhook;
use crate::pods::tests::{package, settings, skyhook};
use crate::pods::{PodNode, interrupt_pod, package_pod};

const NOW: &str = "2026-05-01T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn context(node_boot_id: Option<&str>) -> OutcomeContext<'_> {
    OutcomeContext {
        node_boot_id,
        now: now(),
        reboot_deadline: Duration::from_secs(30 * 60),
    }
}

/// [`super::outcome`] of `pod` as the cache holds it.
fn outcome(pod: &Pod, context: OutcomeContext<'_>) -> PodOutcome {
    super::outcome(&CachedPod::from(pod.clone()), context)
}

fn apply_pod(boot_id: Option<&str>) -> Pod {
    let sky = skyhook("demo", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let pkg = package("spencer", "3.2.3", "ghcr.io/nvidia/skyhook/agentless");
    package_pod(
        &settings(),
        &owner,
        &pkg,
        &PodNode::new("n", boot_id),
        Stage::Apply,
    )
    .unwrap()
}

fn interrupt(type_: InterruptType, boot_id: Option<&str>) -> Pod {
    let sky = skyhook("demo", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let pkg = package("dexter", "1.2.3", "ghcr.io/nvidia/skyhook/agentless");
    let services = if type_ == InterruptType::Service {
        vec!["cron".to_owned()]
    } else {
        vec![]
    };
    interrupt_pod(
        &settings(),
        &owner,
        &pkg,
        &Interrupt { type_, services },
        &PodNode::new("n", boot_id),
    )
}

/// A container state in a compact notation: `ok`, `run`, `run:<minutes ago>`, `wait:<Reason>`, `exit:<code>`,
/// `exit:<code>@<minutes ago>` or `crash:<last exit code>`.
fn status(name: &str, state: &str, restarts: i32) -> ContainerStatus {
    let terminated = |code: i32, minutes_ago: i64| ContainerStateTerminated {
        exit_code: code,
        reason: Some(if code == 0 { "Completed" } else { "Error" }.to_owned()),
        started_at: Some(Time(now() - SignedDuration::from_mins(minutes_ago))),
        finished_at: Some(Time(now() - SignedDuration::from_mins(minutes_ago))),
        ..ContainerStateTerminated::default()
    };
    let waiting = |reason: &str| ContainerStateWaiting {
        reason: Some(reason.to_owned()),
        message: Some(format!("{reason} message")),
    };
    let (current, last) = match state.split_once(':') {
        None if state == "ok" => (
            ContainerState {
                terminated: Some(terminated(0, 1)),
                ..ContainerState::default()
            },
            None,
        ),
        None if state == "run" => (
            ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..ContainerState::default()
            },
            None,
        ),
        Some(("run", ago)) => (
            ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time(
                        now() - SignedDuration::from_mins(ago.parse().unwrap()),
                    )),
                }),
                ..ContainerState::default()
            },
            None,
        ),
        Some(("wait", reason)) => (
            ContainerState {
                waiting: Some(waiting(reason)),
                ..ContainerState::default()
            },
            None,
        ),
        Some(("exit", rest)) => {
            let (code, ago) = rest.split_once('@').unwrap_or((rest, "1"));
            (
                ContainerState {
                    terminated: Some(terminated(code.parse().unwrap(), ago.parse().unwrap())),
                    ..ContainerState::default()
                },
                None,
            )
        }
        Some(("crash", code)) => (
            ContainerState {
                waiting: Some(waiting("CrashLoopBackOff")),
                ..ContainerState::default()
            },
            Some(ContainerState {
                terminated: Some(terminated(code.parse().unwrap(), 1)),
                ..ContainerState::default()
            }),
        ),
        _ => panic!("bad state {state}"),
    };
    ContainerStatus {
        name: name.to_owned(),
        state: Some(current),
        last_state: last,
        restart_count: restarts,
        ..ContainerStatus::default()
    }
}

fn with_statuses(mut pod: Pod, phase: &str, statuses: Vec<ContainerStatus>) -> Pod {
    pod.status = Some(PodStatus {
        phase: Some(phase.to_owned()),
        init_container_statuses: Some(statuses),
        ..PodStatus::default()
    });
    pod
}

fn failed(container: &str, exit_code: Option<i32>, reason: &str, restarts: i32) -> PodOutcome {
    PodOutcome::Failed(PodFailure {
        container: Some(container.to_owned()),
        exit_code,
        reason: reason.to_owned(),
        message: None,
        restarts,
        reboot_requested: None,
    })
}

/// Drops kubelet messages so table rows stay short.
fn without_message(outcome: PodOutcome) -> PodOutcome {
    match outcome {
        PodOutcome::Failed(failure) => PodOutcome::Failed(PodFailure {
            message: None,
            reboot_requested: None,
            ..failure
        }),
        other => other,
    }
}

#[test]
fn package_pod_outcomes() {
    let (init, run, check) = ("spencer-init", "spencer-apply", "spencer-applycheck");
    // statuses of (init, run, check) → outcome
    let cases: Vec<(&str, [&str; 3], PodOutcome)> = vec![
        ("nothing started", ["", "", ""], PodOutcome::Running),
        (
            "copying",
            ["run", "wait:PodInitializing", "wait:PodInitializing"],
            PodOutcome::Running,
        ),
        (
            "applying",
            ["ok", "run", "wait:PodInitializing"],
            PodOutcome::Running,
        ),
        ("checking", ["ok", "ok", "run"], PodOutcome::Running),
        (
            "check passed",
            ["ok", "ok", "ok"],
            PodOutcome::Succeeded {
                container: check.into(),
                restarts: 0,
            },
        ),
        (
            "apply exited 2",
            ["ok", "exit:2", "wait:PodInitializing"],
            failed(run, Some(2), "Error", 0),
        ),
        (
            "check failed",
            ["ok", "ok", "exit:1"],
            failed(check, Some(1), "Error", 0),
        ),
        (
            "crash looping",
            ["ok", "crash:2", "wait:PodInitializing"],
            failed(run, Some(2), "CrashLoopBackOff", 0),
        ),
        (
            "image pull backoff",
            ["wait:ImagePullBackOff", "", ""],
            failed(init, None, "ImagePullBackOff", 0),
        ),
        (
            "image pull error",
            ["wait:ErrImagePull", "", ""],
            failed(init, None, "ErrImagePull", 0),
        ),
        (
            "invalid image",
            ["wait:InvalidImageName", "", ""],
            failed(init, None, "InvalidImageName", 0),
        ),
        (
            "missing secret",
            ["ok", "wait:CreateContainerConfigError", ""],
            failed(run, None, "CreateContainerConfigError", 0),
        ),
        (
            "killed, no reboot",
            ["ok", "exit:137", ""],
            failed(run, Some(137), "Error", 0),
        ),
        (
            "container creating",
            ["wait:ContainerCreating", "", ""],
            PodOutcome::Running,
        ),
    ];
    for (name, states, want) in cases {
        let statuses = [init, run, check]
            .iter()
            .zip(states)
            .filter(|(_, state)| !state.is_empty())
            .map(|(container, state)| status(container, state, 0))
            .collect();
        let pod = with_statuses(apply_pod(Some("boot-1")), "Pending", statuses);
        assert_eq!(
            without_message(outcome(&pod, context(Some("boot-1")))),
            want,
            "{name}"
        );
    }
}

#[test]
fn image_pull_failure_carries_the_message() {
    let pod = with_statuses(
        apply_pod(None),
        "Pending",
        vec![status("spencer-init", "wait:ImagePullBackOff", 0)],
    );
    let PodOutcome::Failed(failure) = outcome(&pod, context(None)) else {
        panic!("an image pull failure is a failure")
    };
    assert_eq!(failure.message.as_deref(), Some("ImagePullBackOff message"));
}

#[test]
fn restarts_are_reported() {
    let pod = with_statuses(
        apply_pod(None),
        "Pending",
        vec![
            status("spencer-init", "ok", 0),
            status("spencer-apply", "crash:2", 4),
        ],
    );
    assert_eq!(
        without_message(outcome(&pod, context(None))),
        failed("spencer-apply", Some(2), "CrashLoopBackOff", 4)
    );
    let pod = with_statuses(
        apply_pod(None),
        "Pending",
        vec![
            status("spencer-init", "ok", 0),
            status("spencer-apply", "ok", 1),
            status("spencer-applycheck", "ok", 3),
        ],
    );
    assert_eq!(
        outcome(&pod, context(None)),
        PodOutcome::Succeeded {
            container: "spencer-applycheck".into(),
            restarts: 3
        }
    );
}

#[test]
fn success_needs_every_init_container() {
    // Upstream took the last *reported* status; a partial status list must not read as success.
    let pod = with_statuses(
        apply_pod(None),
        "Pending",
        vec![status("spencer-init", "ok", 0)],
    );
    assert_eq!(outcome(&pod, context(None)), PodOutcome::Running);
}

/// Name, interrupt type, boot ID at launch, node boot ID now, container state, phase, outcome.
type RebootCase<'a> = (
    &'a str,
    InterruptType,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
    &'a str,
    PodOutcome,
);

#[test]
fn interrupt_pod_and_reboots() {
    let minutes = |m: i64| now() - SignedDuration::from_mins(m) + SignedDuration::from_mins(30);
    let cases: Vec<RebootCase<'_>> = vec![
        (
            "interrupt succeeded",
            InterruptType::Reboot,
            Some("b1"),
            Some("b1"),
            "ok",
            "Pending",
            PodOutcome::Succeeded {
                container: "interrupt".into(),
                restarts: 0,
            },
        ),
        (
            "reboot in flight (SIGTERM)",
            InterruptType::Reboot,
            Some("b1"),
            Some("b1"),
            "exit:143@2",
            "Pending",
            PodOutcome::AwaitingReboot {
                deadline: minutes(2),
            },
        ),
        (
            "reboot in flight (SIGKILL)",
            InterruptType::Reboot,
            Some("b1"),
            Some("b1"),
            "exit:137@29",
            "Pending",
            PodOutcome::AwaitingReboot {
                deadline: minutes(29),
            },
        ),
        (
            "reboot never happened",
            InterruptType::Reboot,
            Some("b1"),
            Some("b1"),
            "exit:143@31",
            "Pending",
            failed("interrupt", Some(143), REBOOT_NOT_CONFIRMED, 0),
        ),
        (
            "rebooted, kubelet re-runs the pod",
            InterruptType::Reboot,
            Some("b1"),
            Some("b2"),
            "exit:143@5",
            "Pending",
            PodOutcome::Running,
        ),
        (
            "rebooted, pod terminal after node shutdown",
            InterruptType::Reboot,
            Some("b1"),
            Some("b2"),
            "exit:143@5",
            "Failed",
            PodOutcome::RecreateAfterReboot,
        ),
        (
            "rebooted and re-run succeeded",
            InterruptType::Reboot,
            Some("b1"),
            Some("b2"),
            "ok",
            "Running",
            PodOutcome::Succeeded {
                container: "interrupt".into(),
                restarts: 0,
            },
        ),
        (
            "service restart killed: a real failure",
            InterruptType::Service,
            Some("b1"),
            Some("b1"),
            "exit:143@1",
            "Pending",
            failed("interrupt", Some(143), "Error", 0),
        ),
        (
            "reboot script failed",
            InterruptType::Reboot,
            Some("b1"),
            Some("b1"),
            "exit:1",
            "Pending",
            failed("interrupt", Some(1), "Error", 0),
        ),
        (
            "reboot requested, node not down yet",
            InterruptType::Reboot,
            Some("b1"),
            Some("b1"),
            "run:3",
            "Pending",
            PodOutcome::AwaitingReboot {
                deadline: minutes(3),
            },
        ),
        (
            "node died during the reboot: its kubelet still says running",
            InterruptType::Reboot,
            Some("b1"),
            Some("b1"),
            "run:45",
            "Pending",
            failed("interrupt", None, REBOOT_NOT_CONFIRMED, 0),
        ),
        (
            "service restart running for long: not a reboot",
            InterruptType::Service,
            Some("b1"),
            Some("b1"),
            "run:45",
            "Pending",
            PodOutcome::Running,
        ),
        (
            "no boot ID recorded: wait for the deadline",
            InterruptType::Reboot,
            None,
            Some("b2"),
            "exit:143@1",
            "Pending",
            PodOutcome::AwaitingReboot {
                deadline: minutes(1),
            },
        ),
    ];
    for (name, type_, launch, current, state, phase, want) in cases {
        let pod = with_statuses(
            interrupt(type_, launch),
            phase,
            vec![status("interrupt", state, 0)],
        );
        assert_eq!(
            without_message(outcome(&pod, context(current))),
            want,
            "{name}"
        );
    }
}

#[test]
fn terminal_pod_without_container_failure() {
    let mut shutdown = interrupt(InterruptType::Reboot, Some("b1"));
    shutdown.metadata.creation_timestamp = Some(Time(now() - SignedDuration::from_mins(3)));
    shutdown.status = Some(PodStatus {
        phase: Some("Failed".into()),
        reason: Some("Terminated".into()),
        ..PodStatus::default()
    });
    assert_eq!(
        outcome(&shutdown, context(Some("b1"))),
        PodOutcome::AwaitingReboot {
            deadline: now() + SignedDuration::from_mins(27)
        }
    );
    assert_eq!(
        outcome(&shutdown, context(Some("b2"))),
        PodOutcome::RecreateAfterReboot
    );

    let mut evicted = apply_pod(Some("b1"));
    evicted.status = Some(PodStatus {
        phase: Some("Failed".into()),
        reason: Some("Evicted".into()),
        message: Some("low on memory".into()),
        ..PodStatus::default()
    });
    assert_eq!(
        outcome(&evicted, context(Some("b1"))),
        PodOutcome::Failed(PodFailure {
            container: None,
            exit_code: None,
            reason: "Evicted".into(),
            message: Some("low on memory".into()),
            restarts: 0,
            reboot_requested: None,
        })
    );
}

#[test]
fn annotation_rules() {
    let mut invalid = apply_pod(None);
    let annotations = invalid.metadata.annotations.as_mut().unwrap();
    let key = "skyhook.nvidia.com/package";
    let mut annotation = PodPackageAnnotation::parse(&annotations[key]).unwrap();
    annotation.invalid = true;
    annotations.insert(key.into(), annotation.to_annotation());
    assert_eq!(outcome(&invalid, context(None)), PodOutcome::Invalid);

    let mut bare = apply_pod(None);
    bare.metadata.annotations = Some(BTreeMap::new());
    assert!(matches!(
        outcome(&bare, context(None)),
        PodOutcome::Unrecognised { .. }
    ));

    let mut garbled = apply_pod(None);
    garbled.metadata.annotations = Some(BTreeMap::from([(key.to_owned(), "{".to_owned())]));
    assert!(matches!(
        outcome(&garbled, context(None)),
        PodOutcome::Unrecognised { .. }
    ));
}

#[test]
fn hand_made_pod_is_read_like_ours() {
    // upstream's pod-finalizer test: a pod built by hand with the label and annotation.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "hand-made",
            "labels": {"skyhook.nvidia.com/name": "foobar"},
            "annotations": {"skyhook.nvidia.com/package":
                r#"{"name":"foobar","version":"1.2.3","skyhook":"foobar","stage":"apply","image":""}"#}
        },
        "spec": {
            "initContainers": [{"name": "foobar-init"}],
            "containers": [{"name": "pause"}]
        },
        "status": {
            "phase": "Running",
            "initContainerStatuses": [{
                "name": "foobar-init", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0}}
            }]
        }
    }))
    .unwrap();
    assert_eq!(
        outcome(&pod, context(None)),
        PodOutcome::Succeeded {
            container: "foobar-init".into(),
            restarts: 0
        }
    );
}

#[test]
fn admission_rejections() {
    // pod reason, init container statuses, outcome (None: an ordinary failure)
    let message = "Pod was rejected: Node didn't have enough resource: cpu, requested: 500, used: 7800, capacity: 8000";
    let rejected = |reason: &str| {
        Some(PodOutcome::Rejected {
            reason: reason.to_owned(),
            message: Some(message.to_owned()),
        })
    };
    let cases: Vec<(&str, &str, Vec<ContainerStatus>, Option<PodOutcome>)> = vec![
        ("out of cpu", "OutOfcpu", vec![], rejected("OutOfcpu")),
        (
            "out of memory",
            "OutOfmemory",
            vec![],
            rejected("OutOfmemory"),
        ),
        (
            "out of pod slots",
            "OutOfpods",
            vec![],
            rejected("OutOfpods"),
        ),
        (
            "out of an extended resource",
            "OutOfnvidia.com/gpu",
            vec![],
            rejected("OutOfnvidia.com/gpu"),
        ),
        (
            "admission error",
            "UnexpectedAdmissionError",
            vec![],
            rejected("UnexpectedAdmissionError"),
        ),
        (
            "statuses reported but nothing started",
            "OutOfcpu",
            vec![status("spencer-init", "wait:PodInitializing", 0)],
            rejected("OutOfcpu"),
        ),
        (
            "a container ran: not an admission refusal",
            "OutOfcpu",
            vec![status("spencer-init", "run", 0)],
            None,
        ),
        (
            "a container restarted: not an admission refusal",
            "OutOfcpu",
            vec![status("spencer-init", "wait:PodInitializing", 1)],
            None,
        ),
        ("bare OutOf is no resource", "OutOf", vec![], None),
        ("evicted", "Evicted", vec![], None),
        ("node affinity", "NodeAffinity", vec![], None),
    ];
    for (name, reason, statuses, want) in cases {
        let mut pod = with_statuses(apply_pod(Some("b1")), "Failed", statuses);
        if let Some(status) = pod.status.as_mut() {
            status.reason = Some(reason.to_owned());
            status.message = Some(message.to_owned());
        }
        let got = outcome(&pod, context(Some("b1")));
        match want {
            Some(want) => assert_eq!(got, want, "{name}"),
            None => assert!(matches!(got, PodOutcome::Failed(_)), "{name}: {got:?}"),
        }
    }
}

#[test]
fn durations_read_as_written() {
    for (secs, text) in [
        (0, "0s"),
        (90, "1m30s"),
        (1800, "30m"),
        (1880, "31m20s"),
        (3600, "1h"),
        (5400, "1h30m"),
    ] {
        assert_eq!(humantime(Duration::from_secs(secs)), text);
    }
}

#[test]
fn an_unconfirmed_reboot_says_when_it_was_requested_and_how_long_ago() {
    let pod = with_statuses(
        interrupt(InterruptType::Reboot, Some("b1")),
        "Running",
        vec![status("interrupt", "run:45", 0)],
    );
    let PodOutcome::Failed(failure) = outcome(&pod, context(Some("b1"))) else {
        panic!("expected a failure");
    };
    assert_eq!(failure.reason, REBOOT_NOT_CONFIRMED);
    assert_eq!(
        failure.reboot_requested,
        Some(now() - SignedDuration::from_mins(45))
    );
    assert_eq!(
        failure.message.as_deref(),
        Some(
            "the node was asked to reboot 45m ago and its boot ID has not changed (reboot deadline 30m)"
        )
    );
}
