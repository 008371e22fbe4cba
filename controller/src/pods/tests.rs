//! Shapes of the pods the controller creates, checked against what upstream's e2e suite asserts
//! (spec §6.1 items 1, 5 and 6) plus the rest of spec §2.8.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::api::core::v1::{Container, EnvVar, LocalObjectReference, Pod, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;
use skyhook_api::pod_annotation::PodPackageAnnotation;
use skyhook_api::v1alpha1::{
    Interrupt, InterruptType, Package, PackageResources, Skyhook, SkyhookSpec, Stage,
};

use skyhook_api::toleration::toleration_for;

use super::*;

const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const UID: &str = "0f6c3d2a-1111-2222-3333-444455556666";

pub(crate) fn settings() -> PodSettings {
    PodSettings {
        namespace: "skyhook".into(),
        image_pull_secret: None,
        copy_dir_root: "/var/lib/skyhook".into(),
        agent_log_root: "/var/log/skyhook".into(),
        agent_image: "ghcr.io/nvidia/skyhook/agentless:6.2.0".into(),
        agent_version: "6.2.0".into(),
        pause_image: "registry.k8s.io/pause:3.10".into(),
        runtime_required_taint: skyhook_api::runtime_required::parse_taint(
            "skyhook.nvidia.com=runtime-required:NoSchedule",
        )
        .unwrap(),
        priority_class_name: None,
    }
}

pub(crate) fn skyhook(name: &str, tolerations: Vec<Toleration>) -> Skyhook {
    Skyhook {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(UID.into()),
            generation: Some(2),
            ..ObjectMeta::default()
        },
        spec: SkyhookSpec {
            additional_tolerations: tolerations,
            ..SkyhookSpec::default()
        },
        status: None,
    }
}

pub(crate) fn package(name: &str, version: &str, image: &str) -> Package {
    Package {
        name: name.into(),
        version: version.into(),
        image: image.into(),
        ..Package::default()
    }
}

fn init(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .unwrap()
        .init_containers
        .as_deref()
        .unwrap()
}

fn args(container: &Container) -> Vec<&str> {
    container
        .args
        .iter()
        .flatten()
        .map(String::as_str)
        .collect()
}

fn env_names(container: &Container) -> Vec<&str> {
    container
        .env
        .iter()
        .flatten()
        .map(|e| e.name.as_str())
        .collect()
}

fn quantities(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect(),
    )
}

#[test]
fn simple_skyhook_apply_pod() {
    let sky = skyhook("simple-skyhook", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let spencer = package("spencer", "3.2.3", "ghcr.io/nvidia/skyhook/agentless");
    let pod = package_pod(
        &settings(),
        &owner,
        &spencer,
        &PodNode::new("kind-worker", None),
        Stage::Apply,
    )
    .unwrap();
    let copy_dir = format!("/var/lib/skyhook/simple-skyhook/spencer-3.2.3-{UID}-2");

    let names: Vec<_> = init(&pod).iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["spencer-init", "spencer-apply", "spencer-applycheck"]
    );
    let [copy, run, check] = init(&pod) else {
        panic!("three init containers")
    };
    assert_eq!(
        copy.image.as_deref(),
        Some("ghcr.io/nvidia/skyhook/agentless:3.2.3")
    );
    assert_eq!(copy.command.as_deref(), Some(&["/bin/sh".to_owned()][..]));
    assert_eq!(args(copy)[0], "-c");
    assert_eq!(env_names(copy), ["SKYHOOK_DIR"]);
    assert_eq!(
        copy.env.as_ref().unwrap()[0].value.as_deref(),
        Some(copy_dir.as_str())
    );
    assert_eq!(args(run), ["apply", "/root", copy_dir.as_str()]);
    assert_eq!(args(check), ["apply-check", "/root", copy_dir.as_str()]);
    for container in [run, check] {
        assert_eq!(
            container.image.as_deref(),
            Some("ghcr.io/nvidia/skyhook/agentless:6.2.0")
        );
    }
    for container in init(&pod) {
        assert_eq!(container.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            container.security_context.as_ref().unwrap().privileged,
            Some(true)
        );
        // No resources: the namespace LimitRange fills them in.
        assert_eq!(container.resources, None, "{}", container.name);
    }

    let meta = &pod.metadata;
    assert_eq!(
        meta.name.as_deref(),
        Some(
            names::package_pod_name(
                "simple-skyhook",
                "spencer",
                "3.2.3",
                Stage::Apply,
                "kind-worker"
            )
            .as_str()
        )
    );
    assert_eq!(meta.namespace.as_deref(), Some("skyhook"));
    assert_eq!(
        meta.labels.clone().unwrap(),
        BTreeMap::from([
            (
                "skyhook.nvidia.com/name".to_owned(),
                "simple-skyhook".to_owned()
            ),
            (
                "skyhook.nvidia.com/package".to_owned(),
                "spencer-3.2.3".to_owned()
            ),
        ])
    );
    let annotation = PodPackageAnnotation::parse(
        &meta.annotations.as_ref().unwrap()["skyhook.nvidia.com/package"],
    )
    .unwrap();
    assert_eq!(annotation.stage, Stage::Apply);
    assert_eq!(annotation.skyhook, "simple-skyhook");
    assert_eq!(annotation.image, "ghcr.io/nvidia/skyhook/agentless");
    let owners = meta.owner_references.as_ref().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].uid, UID);
    assert_eq!(owners[0].controller, Some(true));

    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("kind-worker"));
    assert_eq!(spec.restart_policy.as_deref(), Some("OnFailure"));
    assert_eq!(spec.host_pid, Some(true));
    assert_eq!(spec.host_network, Some(true));
    assert_eq!(spec.affinity, None);
    assert_eq!(
        spec.image_pull_secrets, None,
        "no pull secret unless configured"
    );
    assert_eq!(spec.termination_grace_period_seconds, None);
    let [pause] = spec.containers.as_slice() else {
        panic!("one main container")
    };
    assert_eq!(pause.name, "pause");
    assert_eq!(pause.image.as_deref(), Some("registry.k8s.io/pause:3.10"));
    let pause_resources = pause.resources.as_ref().unwrap();
    assert_eq!(
        pause_resources.limits,
        quantities(&[("cpu", "100m"), ("memory", "20Mi")])
    );
    assert_eq!(pause_resources.requests, pause_resources.limits);
}

#[test]
fn image_with_a_bogus_tag_is_pulled_by_version_and_stored_without_tag() {
    let sky = skyhook("simple-skyhook", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let dexter = package("dexter", "1.2.3", "ghcr.io/nvidia/skyhook/agentless:bogus");
    let pod = package_pod(
        &settings(),
        &owner,
        &dexter,
        &PodNode::new("n", None),
        Stage::Apply,
    )
    .unwrap();
    assert_eq!(
        init(&pod)[0].image.as_deref(),
        Some("ghcr.io/nvidia/skyhook/agentless:1.2.3")
    );
    let annotation = PodPackageAnnotation::parse(
        &pod.metadata.annotations.as_ref().unwrap()["skyhook.nvidia.com/package"],
    )
    .unwrap();
    assert_eq!(annotation.image, "ghcr.io/nvidia/skyhook/agentless");
}

#[test]
fn container_sha_and_resources_override() {
    let sky = skyhook("simple-skyhook", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let foobar = Package {
        container_sha: Some(SHA.into()),
        resources: Some(PackageResources {
            cpu_request: Some(Quantity("50m".into())),
            cpu_limit: Some(Quantity("50m".into())),
            memory_request: Some(Quantity("32Mi".into())),
            memory_limit: Some(Quantity("32Mi".into())),
        }),
        ..package("foobar", "1.2", "ghcr.io/nvidia/skyhook/agentless")
    };
    let pod = package_pod(
        &settings(),
        &owner,
        &foobar,
        &PodNode::new("n", None),
        Stage::Apply,
    )
    .unwrap();
    assert_eq!(
        init(&pod)[0].image.as_deref(),
        Some(format!("ghcr.io/nvidia/skyhook/agentless@{SHA}").as_str())
    );
    for container in init(&pod) {
        let resources = container.resources.as_ref().unwrap();
        assert_eq!(
            resources.limits,
            quantities(&[("cpu", "50m"), ("memory", "32Mi")])
        );
        assert_eq!(
            resources.requests,
            quantities(&[("cpu", "50m"), ("memory", "32Mi")])
        );
    }
    let annotation = PodPackageAnnotation::parse(
        &pod.metadata.annotations.as_ref().unwrap()["skyhook.nvidia.com/package"],
    )
    .unwrap();
    assert_eq!(annotation.container_sha, SHA);
}

#[test]
fn registry_port_survives() {
    let sky = skyhook("s", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let pkg = package("local", "1.0.0", "registry.local:5000/pkgs/local");
    let pod = package_pod(
        &settings(),
        &owner,
        &pkg,
        &PodNode::new("n", None),
        Stage::Apply,
    )
    .unwrap();
    assert_eq!(
        init(&pod)[0].image.as_deref(),
        Some("registry.local:5000/pkgs/local:1.0.0")
    );
}

#[test]
fn agent_override_applies_to_agent_containers_only() {
    let sky = skyhook("interrupt", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let jason = Package {
        agent_image_override: Some("ghcr.io/nvidia/skyhook/agentless:6.1.0".into()),
        ..package("jason", "1.3.2", "ghcr.io/nvidia/skyhook/agentless")
    };
    let pod = package_pod(
        &settings(),
        &owner,
        &jason,
        &PodNode::new("n", None),
        Stage::Config,
    )
    .unwrap();
    let images: Vec<_> = init(&pod)
        .iter()
        .map(|c| c.image.as_deref().unwrap())
        .collect();
    assert_eq!(
        images,
        [
            "ghcr.io/nvidia/skyhook/agentless:1.3.2",
            "ghcr.io/nvidia/skyhook/agentless:6.1.0",
            "ghcr.io/nvidia/skyhook/agentless:6.1.0",
        ]
    );
    let interrupt = Interrupt {
        type_: InterruptType::Noop,
        services: vec![],
    };
    let pod = interrupt_pod(
        &settings(),
        &owner,
        &jason,
        &interrupt,
        &PodNode::new("n", None),
    );
    assert_eq!(
        init(&pod)[0].image.as_deref(),
        Some("ghcr.io/nvidia/skyhook/agentless:6.1.0")
    );
}

#[test]
fn stage_container_names_and_args() {
    let sky = skyhook("interrupt-grouping", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let dax = package("dax", "1.2.3", "ghcr.io/nvidia/skyhook/agentless");
    let cases = [
        (
            Stage::Apply,
            ["dax-init", "dax-apply", "dax-applycheck"],
            ["apply", "apply-check"],
        ),
        (
            Stage::Config,
            ["dax-init", "dax-config", "dax-configcheck"],
            ["config", "config-check"],
        ),
        (
            Stage::PostInterrupt,
            ["dax-init", "dax-post-interrupt", "dax-post-interruptcheck"],
            ["post-interrupt", "post-interrupt-check"],
        ),
        (
            Stage::Upgrade,
            ["dax-init", "dax-upgrade", "dax-upgradecheck"],
            ["upgrade", "upgrade-check"],
        ),
        (
            Stage::Uninstall,
            ["dax-init", "dax-uninstall", "dax-uninstallcheck"],
            ["uninstall", "uninstall-check"],
        ),
    ];
    for (stage, names, modes) in cases {
        let pod = package_pod(
            &settings(),
            &owner,
            &dax,
            &PodNode::new("kind-worker", Some("boot-1")),
            stage,
        )
        .unwrap();
        let got: Vec<_> = init(&pod).iter().map(|c| c.name.as_str()).collect();
        assert_eq!(got, names, "{stage}");
        assert_eq!(args(&init(&pod)[1])[0], modes[0]);
        assert_eq!(args(&init(&pod)[2])[0], modes[1]);
        let annotations = pod.metadata.annotations.as_ref().unwrap();
        let annotation =
            PodPackageAnnotation::parse(&annotations["skyhook.nvidia.com/package"]).unwrap();
        assert_eq!(annotation.stage, stage);
        assert_eq!(
            annotations[skyhook_api::keys::SKYHOOK.boot_id_annotation],
            "boot-1"
        );
    }
}

#[test]
fn env_is_package_env_then_operator_env() {
    let sky = skyhook("demo", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let pkg = Package {
        env: vec![
            EnvVar {
                name: "SLEEP_LEN".into(),
                value: Some("5".into()),
                value_from: None,
            },
            EnvVar {
                name: "EXIT_CODE".into(),
                value: Some("0".into()),
                value_from: None,
            },
        ],
        ..package("tuning", "1.1.4", "ghcr.io/nvidia/skyhook-packages/tuning")
    };
    let pod = package_pod(
        &settings(),
        &owner,
        &pkg,
        &PodNode::new("n", None).at_order(7),
        Stage::Config,
    )
    .unwrap();
    for container in &init(&pod)[1..] {
        assert_eq!(
            env_names(container),
            [
                "SLEEP_LEN",
                "EXIT_CODE",
                "SKYHOOK_LOG_DIR",
                "SKYHOOK_ROOT_DIR",
                "COPY_RESOLV",
                "SKYHOOK_RESOURCE_ID",
                "SKYHOOK_NODE_ORDER"
            ]
        );
        let values: Vec<_> = container
            .env
            .iter()
            .flatten()
            .skip(2)
            .map(|e| e.value.as_deref().unwrap())
            .collect();
        assert_eq!(
            values,
            [
                "/var/log/skyhook/demo",
                "/var/lib/skyhook/demo",
                "false",
                format!("demo-{UID}-2_tuning_1.1.4").as_str(),
                "7",
            ]
        );
    }
}

#[test]
fn volumes_and_mounts() {
    let sky = skyhook("demo", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let plain = package("plain", "1.0.0", "busybox");
    let with_config = Package {
        config_map: BTreeMap::from([
            ("z.conf".into(), "x=1".into()),
            ("a.sh".into(), "echo".into()),
        ]),
        ..package("conf", "1.0.0", "busybox")
    };

    let pod = package_pod(
        &settings(),
        &owner,
        &plain,
        &PodNode::new("node.example.com", None),
        Stage::Apply,
    )
    .unwrap();
    let volumes = pod.spec.as_ref().unwrap().volumes.as_ref().unwrap();
    assert_eq!(volumes.len(), 2);
    assert_eq!(volumes[0].name, "root-mount");
    assert_eq!(volumes[0].host_path.as_ref().unwrap().path, "/");
    assert_eq!(
        volumes[1].name,
        names::node_metadata_volume_name("node.example.com")
    );
    assert_eq!(
        volumes[1].config_map.as_ref().unwrap().name,
        names::node_metadata_configmap_name("demo", "node.example.com")
    );
    for container in init(&pod) {
        let mounts = container.volume_mounts.as_ref().unwrap();
        let paths: Vec<_> = mounts.iter().map(|m| m.mount_path.as_str()).collect();
        assert_eq!(paths, ["/root", "/skyhook-package/node-metadata"]);
        assert_eq!(
            mounts[0].mount_propagation.as_deref(),
            Some("HostToContainer")
        );
    }

    let pod = package_pod(
        &settings(),
        &owner,
        &with_config,
        &PodNode::new("n", None),
        Stage::Apply,
    )
    .unwrap();
    let volumes = pod.spec.as_ref().unwrap().volumes.as_ref().unwrap();
    assert_eq!(volumes.len(), 3);
    assert_eq!(volumes[2].name, "conf");
    assert_eq!(
        volumes[2].config_map.as_ref().unwrap().name,
        "demo-conf-1.0.0"
    );
    for container in init(&pod) {
        let paths: Vec<_> = container
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.mount_path.as_str())
            .collect();
        // One read-only subPath mount per key, in key order, so files the image ships under
        // configmaps/ stay visible.
        assert_eq!(
            paths,
            [
                "/root",
                "/skyhook-package/node-metadata",
                "/skyhook-package/configmaps/a.sh",
                "/skyhook-package/configmaps/z.conf",
            ]
        );
        for (mount, key) in container
            .volume_mounts
            .iter()
            .flatten()
            .skip(2)
            .zip(["a.sh", "z.conf"])
        {
            assert_eq!(mount.name, "conf");
            assert_eq!(mount.sub_path.as_deref(), Some(key));
            assert_eq!(mount.read_only, Some(true));
        }
    }
}

#[test]
fn job_pods_exit_at_once_and_survive_a_not_ready_node() {
    let extra = Toleration {
        key: Some("gpu".into()),
        operator: Some("Exists".into()),
        ..Toleration::default()
    };
    let sky = skyhook("demo", vec![extra.clone()]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let pinned = Package {
        container_sha: Some(format!("sha256:{}", "a".repeat(64))),
        ..package("pinned", "2.0.0", "localhost:5000/pkgs/pinned")
    };
    let node = PodNode::new("n", Some("boot-1"));
    let interrupt = Interrupt {
        type_: InterruptType::Reboot,
        services: vec![],
    };
    let package_pod = package_pod(&settings(), &owner, &pinned, &node, Stage::Apply).unwrap();
    let interrupt_pod = interrupt_pod(&settings(), &owner, &pinned, &interrupt, &node);
    for raw in [package_pod, interrupt_pod] {
        let job = job_pod(raw.clone(), &pinned);
        let spec = job.spec.as_ref().unwrap();
        let raw_spec = raw.spec.as_ref().unwrap();
        let [done] = spec.containers.as_slice() else {
            panic!("one main container")
        };
        assert_eq!(done.name, "done");
        assert_eq!(
            done.image.as_deref(),
            Some(format!("localhost:5000/pkgs/pinned@sha256:{}", "a".repeat(64)).as_str())
        );
        assert_eq!(
            done.command.as_deref(),
            Some(["/bin/sh".to_owned(), "-c".to_owned(), "exit 0".to_owned()].as_slice())
        );
        assert_eq!(done.resources, raw_spec.containers[0].resources);
        // The init containers, the rest of the pod and the metadata are untouched.
        assert_eq!(spec.init_containers, raw_spec.init_containers);
        assert_eq!(spec.volumes, raw_spec.volumes);
        assert_eq!(job.metadata, raw.metadata);
        let tolerations = spec.tolerations.as_ref().unwrap();
        let raw_tolerations = raw_spec.tolerations.as_ref().unwrap();
        assert_eq!(tolerations[..raw_tolerations.len()], raw_tolerations[..]);
        assert!(raw_tolerations.contains(&extra));
        let added: Vec<_> = tolerations[raw_tolerations.len()..]
            .iter()
            .map(|t| {
                (
                    t.key.as_deref().unwrap(),
                    t.operator.as_deref().unwrap(),
                    t.effect.as_deref().unwrap(),
                    t.toleration_seconds,
                )
            })
            .collect();
        assert_eq!(
            added,
            [
                ("node.kubernetes.io/not-ready", "Exists", "NoExecute", None),
                (
                    "node.kubernetes.io/unreachable",
                    "Exists",
                    "NoExecute",
                    None
                ),
            ]
        );
    }
}

#[test]
fn tolerations_and_pull_secret() {
    let extra = Toleration {
        key: Some("nvidia.com/gpu".into()),
        operator: Some("Exists".into()),
        effect: Some("NoSchedule".into()),
        ..Toleration::default()
    };
    let sky = skyhook("demo", vec![extra.clone()]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let mut settings = settings();
    settings.image_pull_secret = Some("node-init-secret".into());
    let pkg = package("p", "1.0.0", "busybox");
    let interrupt = Interrupt {
        type_: InterruptType::Reboot,
        services: vec![],
    };
    let pods = [
        package_pod(
            &settings,
            &owner,
            &pkg,
            &PodNode::new("n", None),
            Stage::Apply,
        )
        .unwrap(),
        interrupt_pod(
            &settings,
            &owner,
            &pkg,
            &interrupt,
            &PodNode::new("n", None),
        ),
    ];
    for pod in pods {
        let spec = pod.spec.unwrap();
        let tolerations = spec.tolerations.unwrap();
        assert_eq!(tolerations.len(), 3);
        assert_eq!(
            tolerations[0].key.as_deref(),
            Some("node.kubernetes.io/unschedulable")
        );
        assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"));
        assert_eq!(
            tolerations[1],
            toleration_for(&settings.runtime_required_taint)
        );
        assert_eq!(tolerations[1].operator.as_deref(), Some("Equal"));
        assert_eq!(tolerations[2], extra);
        assert_eq!(spec.image_pull_secrets.unwrap()[0].name, "node-init-secret");
    }
}

/// Case, global secret, the Skyhook's, expected.
type PullSecretCase<'a> = (
    &'a str,
    Option<&'a str>,
    &'a [&'a str],
    Option<&'a [&'a str]>,
);

#[test]
fn pull_secrets_join_the_global_one_and_the_skyhooks() {
    let refs = |names: &[&str]| -> Vec<LocalObjectReference> {
        names
            .iter()
            .map(|name| LocalObjectReference {
                name: (*name).into(),
            })
            .collect()
    };
    #[rustfmt::skip]
    let cases: [PullSecretCase<'_>; 6] = [
        ("none at all, as upstream", None, &[], None),
        ("global only, as upstream", Some("g"), &[], Some(&["g"])),
        ("skyhook only", None, &["a", "b"], Some(&["a", "b"])),
        ("global first", Some("g"), &["a"], Some(&["g", "a"])),
        ("each name once", Some("a"), &["a", "b", "b"], Some(&["a", "b"])),
        ("empty names dropped", Some(""), &[""], None),
    ];
    for (case, global, per_skyhook, expected) in cases {
        assert_eq!(
            pull_secrets(global, &refs(per_skyhook)),
            expected.map(refs),
            "{case}"
        );
    }
}

#[test]
fn skyhook_pull_secrets_reach_package_and_interrupt_pods() {
    let mut sky = skyhook("demo", vec![]);
    sky.spec.image_pull_secrets = vec![LocalObjectReference {
        name: "regcred".into(),
    }];
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let mut settings = settings();
    settings.image_pull_secret = Some("node-init-secret".into());
    let pkg = package("p", "1.0.0", "busybox");
    let interrupt = Interrupt {
        type_: InterruptType::Reboot,
        services: vec![],
    };
    let node = PodNode::new("n", None);
    let pods = [
        package_pod(&settings, &owner, &pkg, &node, Stage::Apply).unwrap(),
        interrupt_pod(&settings, &owner, &pkg, &interrupt, &node),
    ];
    for pod in pods {
        let names: Vec<String> = pod
            .spec
            .unwrap()
            .image_pull_secrets
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["node-init-secret", "regcred"]);
    }
}

#[test]
fn graceful_shutdown() {
    let sky = skyhook("demo", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let cases = [
        ("30s", Some(30)),
        ("2m", Some(120)),
        ("1.9s", Some(1)),
        ("0", Some(0)),
    ];
    for (text, want) in cases {
        let pkg = Package {
            graceful_shutdown: Some(text.into()),
            ..package("p", "1.0.0", "busybox")
        };
        let pod = package_pod(
            &settings(),
            &owner,
            &pkg,
            &PodNode::new("n", None),
            Stage::Apply,
        )
        .unwrap();
        assert_eq!(
            pod.spec.unwrap().termination_grace_period_seconds,
            want,
            "{text}"
        );
    }
    let bad = Package {
        graceful_shutdown: Some("soon".into()),
        ..package("p", "1.0.0", "busybox")
    };
    let error = package_pod(
        &settings(),
        &owner,
        &bad,
        &PodNode::new("n", None),
        Stage::Apply,
    )
    .unwrap_err();
    assert!(matches!(error, PodError::GracefulShutdown { ref package, .. } if package == "p"));
}

#[test]
fn reboot_interrupt_pod() {
    let sky = skyhook("interrupt", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let dexter = package("dexter", "1.2.3", "ghcr.io/nvidia/skyhook/agentless");
    let interrupt = Interrupt {
        type_: InterruptType::Reboot,
        services: vec![],
    };
    let pod = interrupt_pod(
        &settings(),
        &owner,
        &dexter,
        &interrupt,
        &PodNode::new("kind-worker", Some("boot-1")),
    );
    let copy_dir = format!("/var/lib/skyhook/interrupt/dexter-1.2.3-{UID}-2");

    assert_eq!(
        pod.metadata.name.as_deref(),
        Some(names::interrupt_pod_name("interrupt", "reboot", "kind-worker").as_str())
    );
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["skyhook.nvidia.com/interrupt"], "True");
    assert_eq!(labels["skyhook.nvidia.com/package"], "dexter-1.2.3");
    let annotations = pod.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations[skyhook_api::keys::SKYHOOK.boot_id_annotation],
        "boot-1"
    );
    let annotation =
        PodPackageAnnotation::parse(&annotations["skyhook.nvidia.com/package"]).unwrap();
    assert_eq!(annotation.stage, Stage::Interrupt);

    let [container] = init(&pod) else {
        panic!("one init container")
    };
    assert_eq!(container.name, "interrupt");
    let arguments = args(container);
    assert_eq!(arguments.len(), 4);
    assert_eq!(arguments[..3], ["interrupt", "/root", copy_dir.as_str()]);
    assert_eq!(
        BASE64.decode(arguments[3]).unwrap(),
        br#"{"type":"node_restart"}"#
    );
    let resources = container.resources.as_ref().unwrap();
    assert_eq!(
        resources.limits,
        quantities(&[("cpu", "500m"), ("memory", "256Mi")])
    );
    assert_eq!(resources.requests, resources.limits);
    assert_eq!(
        env_names(container),
        [
            "SKYHOOK_LOG_DIR",
            "SKYHOOK_ROOT_DIR",
            "COPY_RESOLV",
            "SKYHOOK_RESOURCE_ID",
            "SKYHOOK_NODE_ORDER"
        ]
    );
    let spec = pod.spec.as_ref().unwrap();
    let volumes: Vec<_> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, ["root-mount"]);
    assert_eq!(spec.containers[0].name, "pause");
    assert!(is_reboot_interrupt(&CachedPod::from(pod.clone())));
}

#[test]
fn merged_service_interrupt_argument() {
    let sky = skyhook("interrupt-grouping", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let dax = package("dax", "1.2.3", "ghcr.io/nvidia/skyhook/agentless");
    let interrupt = Interrupt {
        type_: InterruptType::Service,
        services: vec!["containerd".into(), "cron".into(), "foobar".into()],
    };
    let pod = interrupt_pod(
        &settings(),
        &owner,
        &dax,
        &interrupt,
        &PodNode::new("kind-worker", None),
    );
    let arguments = args(&init(&pod)[0]);
    assert_eq!(
        BASE64.decode(arguments[3]).unwrap(),
        br#"{"type":"service_restart","services":["containerd","cron","foobar"]}"#
    );
    assert_eq!(
        init(&pod)[0].image.as_deref(),
        Some("ghcr.io/nvidia/skyhook/agentless:6.2.0")
    );
    assert!(!is_reboot_interrupt(&CachedPod::from(pod.clone())));
    assert!(
        !pod.metadata
            .annotations
            .unwrap()
            .contains_key(skyhook_api::keys::SKYHOOK.boot_id_annotation)
    );
}

#[test]
fn package_pods_are_not_reboot_interrupts() {
    let sky = skyhook("demo", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let pod = package_pod(
        &settings(),
        &owner,
        &package("p", "1", "busybox"),
        &PodNode::new("n", None),
        Stage::Apply,
    )
    .unwrap();
    assert!(!is_reboot_interrupt(&CachedPod::from(pod.clone())));
}

#[test]
fn priority_class_reaches_package_and_interrupt_pods_when_set() {
    let sky = skyhook("demo", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let dexter = package("dexter", "1.2.3", "busybox");
    let node = PodNode::new("n", None);
    let interrupt = Interrupt {
        type_: InterruptType::Service,
        services: vec!["cron".into()],
    };
    for (class, want) in [
        (None, None),
        (
            Some("system-cluster-critical".to_owned()),
            Some("system-cluster-critical"),
        ),
    ] {
        let settings = PodSettings {
            priority_class_name: class,
            ..settings()
        };
        let pods = [
            package_pod(&settings, &owner, &dexter, &node, Stage::Apply).unwrap(),
            interrupt_pod(&settings, &owner, &dexter, &interrupt, &node),
        ];
        for pod in pods {
            let spec = pod.spec.unwrap();
            assert_eq!(spec.priority_class_name.as_deref(), want);
        }
    }
}
