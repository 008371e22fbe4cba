use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use skyhook_api::v1alpha1::{PackageResources, PackageStatus, Skyhook, State};

use super::*;
use crate::cache::CachedPod;
use crate::pods::tests::{package, settings, skyhook};

/// [`super::validate_pod`] with nothing built yet, as the first pod of a plan sees it.
fn validate_pod(
    settings: &PodSettings,
    owner: &OwnerSkyhook<'_>,
    packages: &BTreeMap<String, Package>,
    node_state: &NodeState,
    pod: &Pod,
) -> Verdict {
    super::validate_pod(
        settings,
        owner,
        packages,
        node_state,
        &CachedPod::from(pod.clone()),
        &mut ExpectedContainers::default(),
    )
}

fn owner(skyhook: &Skyhook) -> OwnerSkyhook<'_> {
    OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, skyhook).unwrap()
}

fn state(entries: &[(&str, &str, Stage)]) -> NodeState {
    entries
        .iter()
        .map(|(name, version, stage)| PackageStatus {
            name: (*name).into(),
            version: (*version).into(),
            image: "img".into(),
            container_sha: String::new(),
            stage: *stage,
            state: State::InProgress,
            restarts: 0,
        })
        .collect()
}

fn resources(cpu: &str, memory: &str) -> PackageResources {
    PackageResources {
        cpu_request: Some(Quantity(cpu.into())),
        cpu_limit: Some(Quantity(cpu.into())),
        memory_request: Some(Quantity(memory.into())),
        memory_limit: Some(Quantity(memory.into())),
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

fn spec(packages: Vec<Package>) -> BTreeMap<String, Package> {
    packages.into_iter().map(|p| (p.name.clone(), p)).collect()
}

fn pod_for(skyhook: &Skyhook, package: &Package, stage: Stage) -> Pod {
    package_pod(
        &settings(),
        &owner(skyhook),
        package,
        &PodNode::new("node-1", Some("b")),
        stage,
    )
    .unwrap()
}

#[test]
fn spec_changes() {
    let sky = skyhook("demo", vec![]);
    let base = Package {
        env: vec![env("SLEEP_LEN", "1")],
        ..package("dexter", "1.2.3", "ghcr.io/nvidia/skyhook/agentless")
    };
    let running = pod_for(&sky, &base, Stage::Apply);
    let node_state = state(&[("dexter", "1.2.3", Stage::Apply)]);

    // description, spec package now → verdict
    let cases: Vec<(&str, Package, Verdict)> = vec![
        ("unchanged", base.clone(), Verdict::Keep),
        (
            "new version",
            Package {
                version: "1.2.4".into(),
                ..base.clone()
            },
            Verdict::Invalidate(InvalidReason::NoMatchingPackage),
        ),
        (
            "new image",
            Package {
                image: "ghcr.io/nvidia/skyhook/other".into(),
                ..base.clone()
            },
            Verdict::Invalidate(InvalidReason::NoMatchingPackage),
        ),
        (
            "pinned digest",
            Package {
                container_sha: Some(format!("sha256:{}", "a".repeat(64))),
                ..base.clone()
            },
            Verdict::Invalidate(InvalidReason::NoMatchingPackage),
        ),
        (
            "env changed",
            Package {
                env: vec![env("SLEEP_LEN", "1000")],
                ..base.clone()
            },
            Verdict::Invalidate(InvalidReason::NoMatchingPackage),
        ),
        (
            "agent override",
            Package {
                agent_image_override: Some("ghcr.io/nvidia/skyhook/agent:6.4.1".into()),
                ..base.clone()
            },
            Verdict::Invalidate(InvalidReason::NoMatchingPackage),
        ),
        (
            "resources added",
            Package {
                resources: Some(resources("10", "10Gi")),
                ..base.clone()
            },
            Verdict::Invalidate(InvalidReason::NoMatchingPackage),
        ),
        (
            "interrupt added (does not change the pod)",
            Package {
                interrupt: Some(Interrupt {
                    type_: InterruptType::Reboot,
                    services: vec![],
                }),
                ..base.clone()
            },
            Verdict::Keep,
        ),
    ];
    for (name, now, want) in cases {
        let verdict = validate_pod(
            &settings(),
            &owner(&sky),
            &spec(vec![now]),
            &node_state,
            &running,
        );
        assert_eq!(verdict, want, "{name}");
    }
}

#[test]
fn a_new_generation_alone_keeps_running_pods() {
    let old = skyhook("demo", vec![]);
    let pkg = package("dexter", "1.2.3", "busybox");
    let running = pod_for(&old, &pkg, Stage::Config);
    let mut new = old.clone();
    new.metadata.generation = Some(7);
    let verdict = validate_pod(
        &settings(),
        &owner(&new),
        &spec(vec![pkg]),
        &state(&[("dexter", "1.2.3", Stage::Config)]),
        &running,
    );
    assert_eq!(verdict, Verdict::Keep);
}

#[test]
fn resource_rules() {
    let sky = skyhook("demo", vec![]);
    let with = Package {
        resources: Some(resources("50m", "32Mi")),
        ..package("foobar", "1.2", "busybox")
    };
    let without = package("foobar", "1.2", "busybox");
    let node_state = state(&[("foobar", "1.2", Stage::Apply)]);
    let limit_range = ResourceRequirements {
        limits: Some(BTreeMap::from([("cpu".into(), Quantity("500m".into()))])),
        requests: Some(BTreeMap::from([("cpu".into(), Quantity("500m".into()))])),
        ..ResourceRequirements::default()
    };
    let filled_by_limit_range = |mut pod: Pod, annotate: bool| {
        for container in pod.spec.as_mut().unwrap().init_containers.as_mut().unwrap() {
            container.resources = Some(limit_range.clone());
        }
        if annotate {
            pod.metadata.annotations.as_mut().unwrap().insert(
                LIMIT_RANGER_ANNOTATION.into(),
                "LimitRanger plugin set: cpu request for init container".into(),
            );
        }
        pod
    };
    // description, pod, spec package now → verdict
    let cases = vec![
        (
            "same resources",
            pod_for(&sky, &with, Stage::Apply),
            with.clone(),
            Verdict::Keep,
        ),
        (
            "same resources written another way",
            pod_for(&sky, &with, Stage::Apply),
            Package {
                resources: Some(resources("0.05", "33554432")),
                ..with.clone()
            },
            Verdict::Keep,
        ),
        (
            "resources changed",
            pod_for(&sky, &with, Stage::Apply),
            Package {
                resources: Some(resources("10", "10Gi")),
                ..with.clone()
            },
            Verdict::Invalidate(InvalidReason::NoMatchingPackage),
        ),
        (
            "resources removed",
            pod_for(&sky, &with, Stage::Apply),
            without.clone(),
            Verdict::Invalidate(InvalidReason::NoMatchingPackage),
        ),
        (
            "none and none",
            pod_for(&sky, &without, Stage::Apply),
            without.clone(),
            Verdict::Keep,
        ),
        (
            "LimitRange defaults are not a difference",
            filled_by_limit_range(pod_for(&sky, &without, Stage::Apply), true),
            without.clone(),
            Verdict::Keep,
        ),
        (
            "resources without the LimitRanger mark",
            filled_by_limit_range(pod_for(&sky, &without, Stage::Apply), false),
            without.clone(),
            Verdict::Invalidate(InvalidReason::NoMatchingPackage),
        ),
    ];
    for (name, pod, now, want) in cases {
        let verdict = validate_pod(
            &settings(),
            &owner(&sky),
            &spec(vec![now]),
            &node_state,
            &pod,
        );
        assert_eq!(verdict, want, "{name}");
    }
}

#[test]
fn node_state_agreement() {
    let sky = skyhook("demo", vec![]);
    let pkg = package("aa", "1.0.0", "busybox");
    let running = pod_for(&sky, &pkg, Stage::Config);
    let cases = vec![
        (
            "at the same stage",
            state(&[("aa", "1.0.0", Stage::Config)]),
            Verdict::Keep,
        ),
        (
            "node reset",
            NodeState::new(),
            Verdict::Invalidate(InvalidReason::NotInNodeState),
        ),
        (
            "other version only",
            state(&[("aa", "0.9.0", Stage::Config)]),
            Verdict::Invalidate(InvalidReason::NotInNodeState),
        ),
        (
            "moved on",
            state(&[("aa", "1.0.0", Stage::PostInterrupt)]),
            Verdict::Invalidate(InvalidReason::StageMismatch {
                pod: Stage::Config,
                node_state: Stage::PostInterrupt,
            }),
        ),
    ];
    for (name, node_state, want) in cases {
        let verdict = validate_pod(
            &settings(),
            &owner(&sky),
            &spec(vec![pkg.clone()]),
            &node_state,
            &running,
        );
        assert_eq!(verdict, want, "{name}");
    }
}

#[test]
fn uninstall_pods_are_exempt_from_the_spec() {
    let sky = skyhook("demo", vec![]);
    let removed = package("cats", "6.2.0", "busybox");
    let running = pod_for(&sky, &removed, Stage::Uninstall);
    let verdict = validate_pod(
        &settings(),
        &owner(&sky),
        &BTreeMap::new(),
        &state(&[("cats", "6.2.0", Stage::Uninstall)]),
        &running,
    );
    assert_eq!(verdict, Verdict::Keep);
    let verdict = validate_pod(
        &settings(),
        &owner(&sky),
        &BTreeMap::new(),
        &NodeState::new(),
        &running,
    );
    assert_eq!(verdict, Verdict::Invalidate(InvalidReason::NotInNodeState));
}

#[test]
fn a_stage_running_with_another_operator_agent_is_kept() {
    let sky = skyhook("demo", vec![]);
    let base = package("dexter", "1.2.3", "busybox");
    let node_state = state(&[("dexter", "1.2.3", Stage::Apply)]);
    let upstream = PodSettings {
        agent_image: "ghcr.io/nvidia/nodewright/agent:v7.0.0".into(),
        ..settings()
    };
    let running = package_pod(
        &upstream,
        &owner(&sky),
        &base,
        &PodNode::new("node-1", None),
        Stage::Apply,
    )
    .unwrap();
    let packages = spec(vec![base.clone()]);
    assert_eq!(
        validate_pod(&settings(), &owner(&sky), &packages, &node_state, &running),
        Verdict::Keep,
        "AGENT_IMAGE is the operator's: moving it replaces no running stage"
    );
    let pinned = Package {
        agent_image_override: Some("ghcr.io/nvidia/skyhook/agent:6.4.1".into()),
        ..base
    };
    assert_eq!(
        validate_pod(
            &settings(),
            &owner(&sky),
            &spec(vec![pinned]),
            &node_state,
            &running
        ),
        Verdict::Invalidate(InvalidReason::NoMatchingPackage),
        "an agent the spec pins is the spec's"
    );
}

#[test]
fn interrupt_pods() {
    let sky = skyhook("demo", vec![]);
    let dexter = Package {
        interrupt: Some(Interrupt {
            type_: InterruptType::Reboot,
            services: vec![],
        }),
        env: vec![env("A", "1")],
        ..package("dexter", "1.2.3", "busybox")
    };
    let reboot = Interrupt {
        type_: InterruptType::Reboot,
        services: vec![],
    };
    let running = interrupt_pod(
        &settings(),
        &owner(&sky),
        &dexter,
        &reboot,
        &PodNode::new("node-1", Some("b")),
    );
    let node_state = state(&[("dexter", "1.2.3", Stage::Interrupt)]);
    let keep = validate_pod(
        &settings(),
        &owner(&sky),
        &spec(vec![dexter.clone()]),
        &node_state,
        &running,
    );
    assert_eq!(
        keep,
        Verdict::Keep,
        "package env does not reach the interrupt container"
    );
    let overridden = Package {
        agent_image_override: Some("ghcr.io/nvidia/skyhook/agent:6.4.1".into()),
        ..dexter.clone()
    };
    let verdict = validate_pod(
        &settings(),
        &owner(&sky),
        &spec(vec![overridden]),
        &node_state,
        &running,
    );
    assert_eq!(
        verdict,
        Verdict::Invalidate(InvalidReason::NoMatchingPackage)
    );
}

#[test]
fn api_defaulting_is_not_a_difference() {
    let sky = skyhook("demo", vec![]);
    let from_field = EnvVar {
        name: "NODE".into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: "spec.nodeName".into(),
            }),
            ..EnvVarSource::default()
        }),
    };
    let pkg = Package {
        env: vec![env("EMPTY", ""), from_field],
        ..package("p", "1.0.0", "busybox")
    };
    let mut running = pod_for(&sky, &pkg, Stage::Apply);
    for container in running
        .spec
        .as_mut()
        .unwrap()
        .init_containers
        .as_mut()
        .unwrap()
    {
        for var in container.env.iter_mut().flatten() {
            if var.name == "EMPTY" {
                var.value = None;
            }
            if let Some(field) = var.value_from.as_mut().and_then(|s| s.field_ref.as_mut()) {
                field.api_version = Some("v1".into());
            }
        }
    }
    let verdict = validate_pod(
        &settings(),
        &owner(&sky),
        &spec(vec![pkg]),
        &state(&[("p", "1.0.0", Stage::Apply)]),
        &running,
    );
    assert_eq!(verdict, Verdict::Keep);
}

#[test]
fn annotation_problems() {
    let sky = skyhook("demo", vec![]);
    let pkg = package("p", "1.0.0", "busybox");
    let node_state = state(&[("p", "1.0.0", Stage::Apply)]);
    let mut marked = pod_for(&sky, &pkg, Stage::Apply);
    let annotations = marked.metadata.annotations.as_mut().unwrap();
    let mut annotation =
        PodPackageAnnotation::parse(&annotations[keys::SKYHOOK.package_annotation]).unwrap();
    annotation.invalid = true;
    annotations.insert(
        keys::SKYHOOK.package_annotation.into(),
        annotation.to_annotation(),
    );
    let verdict = validate_pod(
        &settings(),
        &owner(&sky),
        &spec(vec![pkg.clone()]),
        &node_state,
        &marked,
    );
    assert_eq!(verdict, Verdict::Invalidate(InvalidReason::AlreadyMarked));

    let mut bare = pod_for(&sky, &pkg, Stage::Apply);
    bare.metadata.annotations = None;
    let verdict = validate_pod(
        &settings(),
        &owner(&sky),
        &spec(vec![pkg]),
        &node_state,
        &bare,
    );
    assert_eq!(verdict, Verdict::Invalidate(InvalidReason::Unreadable));
}

/// Pull secrets only matter when an image is pulled; the images a running pod uses did not
/// change, so adding or removing one restarts nothing.
#[test]
fn image_pull_secrets_are_not_compared() {
    let old = skyhook("demo", vec![]);
    let pkg = package("dexter", "1.2.3", "busybox");
    let running = pod_for(&old, &pkg, Stage::Apply);
    let mut new = old.clone();
    new.spec.image_pull_secrets = vec![k8s_openapi::api::core::v1::LocalObjectReference {
        name: "regcred".into(),
    }];
    let verdict = validate_pod(
        &settings(),
        &owner(&new),
        &spec(vec![pkg]),
        &state(&[("dexter", "1.2.3", Stage::Apply)]),
        &running,
    );
    assert_eq!(verdict, Verdict::Keep);
}
