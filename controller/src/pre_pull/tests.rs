use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, PodStatus,
};

use super::*;
use crate::pods::tests::{package, settings, skyhook};

fn image(reference: &str, packages: &[&str], agent: bool) -> PullImage {
    PullImage {
        reference: reference.into(),
        packages: packages.iter().map(|p| (*p).to_owned()).collect(),
        agent,
    }
}

#[test]
fn each_image_is_pulled_once_package_images_before_agent_images() {
    let mut tuned = package("tuned", "1.2.0", "ghcr.io/x/tuned");
    tuned.agent_image_override = Some("ghcr.io/x/agent:7".into());
    let cases: Vec<(&str, Vec<Package>, Vec<PullImage>)> = vec![
        (
            "one package",
            vec![package("driver", "550.1", "ghcr.io/x/driver")],
            vec![
                image("ghcr.io/x/driver:550.1", &["driver"], false),
                image("ghcr.io/nvidia/skyhook/agentless:6.2.0", &["driver"], true),
            ],
        ),
        (
            "two versions of one image, one shared agent",
            vec![
                package("a", "1.0", "ghcr.io/x/shared"),
                package("b", "2.0", "ghcr.io/x/shared"),
                package("c", "1.0", "ghcr.io/x/shared"),
            ],
            vec![
                image("ghcr.io/x/shared:1.0", &["a", "c"], false),
                image("ghcr.io/x/shared:2.0", &["b"], false),
                image(
                    "ghcr.io/nvidia/skyhook/agentless:6.2.0",
                    &["a", "b", "c"],
                    true,
                ),
            ],
        ),
        (
            "an agent override is its own image",
            vec![package("driver", "550.1", "ghcr.io/x/driver"), tuned],
            vec![
                image("ghcr.io/x/driver:550.1", &["driver"], false),
                image("ghcr.io/x/tuned:1.2.0", &["tuned"], false),
                image("ghcr.io/nvidia/skyhook/agentless:6.2.0", &["driver"], true),
                image("ghcr.io/x/agent:7", &["tuned"], true),
            ],
        ),
    ];
    for (case, packages, want) in cases {
        assert_eq!(images_to_pull(&settings(), &packages), want, "{case}");
    }
}

#[test]
fn the_pod_pulls_each_image_in_order_and_disrupts_nothing() {
    let sky = skyhook("gpu", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let images = images_to_pull(
        &settings(),
        &[package("driver", "550.1", "ghcr.io/x/driver")],
    );
    let pod = pre_pull_pod(&settings(), &owner, "node-1", &images);
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels[keys::SKYHOOK.name_label], "gpu");
    assert_eq!(labels[keys::SKYHOOK.pre_pull_label], "true");
    assert_eq!(
        pod.metadata.annotations.as_ref().unwrap()[keys::SKYHOOK.pre_pull_images_annotation],
        r#"["ghcr.io/x/driver:550.1","ghcr.io/nvidia/skyhook/agentless:6.2.0"]"#
    );
    assert_eq!(pod.metadata.owner_references.as_ref().unwrap().len(), 1);
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("node-1"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    let init = spec.init_containers.as_ref().unwrap();
    let shape: Vec<(&str, &str, Vec<&str>)> = init
        .iter()
        .chain(&spec.containers)
        .map(|c| {
            let words = c.command.iter().flatten().chain(c.args.iter().flatten());
            (
                c.name.as_str(),
                c.image.as_deref().unwrap(),
                words.map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (
                "pull-0",
                "ghcr.io/x/driver:550.1",
                vec!["/bin/sh", "-c", "true"]
            ),
            (
                "pull-1",
                "ghcr.io/nvidia/skyhook/agentless:6.2.0",
                vec!["--version"]
            ),
            (
                "done",
                "ghcr.io/x/driver:550.1",
                vec!["/bin/sh", "-c", "true"]
            ),
        ]
    );
    // Nothing privileged, no host path: pulling is all it does.
    assert!(init.iter().all(|c| c.security_context.is_none()));
    assert!(spec.volumes.is_none());
    assert!(is_pre_pull(&CachedPod::from(pod.clone())));
    assert_eq!(
        recorded_images(&CachedPod::from(pod.clone())),
        references(&images)
    );
    // Another image set, another name: the stale pod never blocks the new one.
    let other = images_to_pull(
        &settings(),
        &[package("driver", "550.2", "ghcr.io/x/driver")],
    );
    let renamed = pre_pull_pod(&settings(), &owner, "node-1", &other);
    assert_ne!(renamed.metadata.name, pod.metadata.name);
}

fn waiting(reason: &str, message: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            message: Some(message.into()),
        }),
        ..ContainerState::default()
    }
}

fn terminated(exit_code: i32) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code,
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

fn running() -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning::default()),
        ..ContainerState::default()
    }
}

fn pod_in(phase: &str, reason: Option<&str>, states: Vec<Option<ContainerState>>) -> CachedPod {
    let statuses = states
        .into_iter()
        .enumerate()
        .map(|(index, state)| ContainerStatus {
            name: format!("pull-{index}"),
            state,
            ..ContainerStatus::default()
        })
        .collect();
    CachedPod::from(Pod {
        status: Some(PodStatus {
            phase: Some(phase.into()),
            reason: reason.map(str::to_owned),
            init_container_statuses: Some(statuses),
            ..PodStatus::default()
        }),
        ..Pod::default()
    })
}

#[test]
fn only_a_pull_the_kubelet_reports_failing_is_a_failure() {
    let images = vec!["x/p:bogus".to_owned(), "x/agent:1".to_owned()];
    let failed = |image: &str, reason: &str, message: &str| {
        PullState::Failed(PullFailure {
            image: image.into(),
            reason: reason.into(),
            message: message.into(),
        })
    };
    let not_found = "manifest unknown";
    let cases = vec![
        (
            "just created",
            pod_in("Pending", None, vec![]),
            PullState::Pulling,
        ),
        (
            "pulling the first image",
            pod_in(
                "Pending",
                None,
                vec![Some(waiting("PodInitializing", "")), None],
            ),
            PullState::Pulling,
        ),
        (
            "the first tag does not exist",
            pod_in(
                "Pending",
                None,
                vec![Some(waiting("ErrImagePull", not_found)), None],
            ),
            failed("x/p:bogus", "ErrImagePull", not_found),
        ),
        (
            "the kubelet backs off",
            pod_in(
                "Pending",
                None,
                vec![Some(waiting("ImagePullBackOff", "Back-off")), None],
            ),
            failed("x/p:bogus", "ImagePullBackOff", "Back-off"),
        ),
        (
            "the agent image cannot be pulled",
            pod_in(
                "Pending",
                None,
                vec![
                    Some(terminated(0)),
                    Some(waiting("InvalidImageName", "bad")),
                ],
            ),
            failed("x/agent:1", "InvalidImageName", "bad"),
        ),
        (
            "a container that cannot be created has its image",
            pod_in(
                "Pending",
                None,
                vec![Some(waiting("CreateContainerError", "no")), None],
            ),
            PullState::Pulled,
        ),
        (
            "every image pulled, main container running",
            pod_in(
                "Running",
                None,
                vec![Some(terminated(0)), Some(terminated(0))],
            ),
            PullState::Pulled,
        ),
        (
            "done",
            pod_in(
                "Succeeded",
                None,
                vec![Some(terminated(0)), Some(terminated(0))],
            ),
            PullState::Pulled,
        ),
        (
            "an agent without --version still was pulled",
            pod_in(
                "Failed",
                None,
                vec![Some(terminated(0)), Some(terminated(2))],
            ),
            PullState::Pulled,
        ),
        (
            "a container ran before the pod failed",
            pod_in("Failed", None, vec![Some(running()), None]),
            PullState::Pulled,
        ),
        (
            "the kubelet refused the pod before any pull",
            pod_in("Failed", Some("OutOfpods"), vec![]),
            PullState::Refused("OutOfpods".into()),
        ),
    ];
    for (case, pod, want) in cases {
        assert_eq!(pull_state(&pod, &images), want, "{case}");
    }
}
