use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PodSpec, PodStatus, Toleration, Volume};
use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::ObjectMeta;

use super::*;

/// A pod in a compact notation: `namespace/name`, phase, labels, then options.
#[derive(Default, Clone, Copy)]
struct PodDef<'a> {
    name: &'a str,
    phase: &'a str,
    labels: &'a [(&'a str, &'a str)],
    owners: &'a [&'a str],
    toleration_key: Option<&'a str>,
    tolerate_everything: bool,
    mirror: bool,
    deleting: bool,
    /// The owners (by kind) that are controllers.
    controllers: &'a [&'a str],
    empty_dir: bool,
}

fn pod(def: PodDef<'_>) -> Pod {
    let (namespace, name) = def.name.split_once('/').unwrap();
    let mut tolerations = Vec::new();
    if let Some(key) = def.toleration_key {
        tolerations.push(Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Toleration::default()
        });
    }
    if def.tolerate_everything {
        tolerations.push(Toleration {
            operator: Some("Exists".into()),
            ..Toleration::default()
        });
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(
                def.labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            annotations: def
                .mirror
                .then(|| BTreeMap::from([(MIRROR_POD_ANNOTATION.into(), "x".into())])),
            owner_references: Some(
                def.owners
                    .iter()
                    .map(|kind| (kind, false))
                    .chain(def.controllers.iter().map(|kind| (kind, true)))
                    .map(|(kind, controller)| OwnerReference {
                        kind: (*kind).into(),
                        name: "owner".into(),
                        controller: controller.then_some(true),
                        ..OwnerReference::default()
                    })
                    .collect(),
            ),
            deletion_timestamp: def
                .deleting
                .then(|| Time("2026-05-01T12:00:00Z".parse().unwrap())),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            tolerations: Some(tolerations),
            volumes: def.empty_dir.then(|| {
                vec![Volume {
                    name: "scratch".into(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Volume::default()
                }]
            }),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some(def.phase.into()),
            ..PodStatus::default()
        }),
    }
}

#[test]
fn who_must_leave() {
    let cases: Vec<(&str, PodDef<'_>, bool)> = vec![
        (
            "running workload",
            PodDef {
                name: "default/web",
                phase: "Running",
                ..PodDef::default()
            },
            true,
        ),
        (
            "pending workload",
            PodDef {
                name: "default/web",
                phase: "Pending",
                ..PodDef::default()
            },
            true,
        ),
        (
            "finished job",
            PodDef {
                name: "default/job",
                phase: "Succeeded",
                ..PodDef::default()
            },
            false,
        ),
        (
            "failed pod",
            PodDef {
                name: "default/bad",
                phase: "Failed",
                ..PodDef::default()
            },
            false,
        ),
        (
            "tolerates the cordon",
            PodDef {
                name: "default/t",
                phase: "Running",
                toleration_key: Some("node.kubernetes.io/unschedulable"),
                ..PodDef::default()
            },
            false,
        ),
        (
            "tolerates something else",
            PodDef {
                name: "default/t",
                phase: "Running",
                toleration_key: Some("nvidia.com/gpu"),
                ..PodDef::default()
            },
            true,
        ),
        (
            "tolerates everything",
            PodDef {
                name: "default/t",
                phase: "Running",
                tolerate_everything: true,
                ..PodDef::default()
            },
            false,
        ),
        (
            "a DaemonSet controls it",
            PodDef {
                name: "monitoring/agent",
                phase: "Running",
                controllers: &["DaemonSet"],
                ..PodDef::default()
            },
            false,
        ),
        (
            "a DaemonSet owns it but is not its controller (upstream v0.18: the controller counts)",
            PodDef {
                name: "monitoring/agent",
                phase: "Running",
                owners: &["Node", "DaemonSet"],
                ..PodDef::default()
            },
            true,
        ),
        (
            "ReplicaSet owner",
            PodDef {
                name: "default/web",
                phase: "Running",
                owners: &["ReplicaSet"],
                ..PodDef::default()
            },
            true,
        ),
        (
            "kube-system",
            PodDef {
                name: "kube-system/dns",
                phase: "Running",
                ..PodDef::default()
            },
            false,
        ),
        (
            "mirror pod",
            PodDef {
                name: "default/static",
                phase: "Running",
                mirror: true,
                ..PodDef::default()
            },
            false,
        ),
        (
            "a Skyhook pod",
            PodDef {
                name: "skyhook/pkg",
                phase: "Running",
                labels: &[
                    ("skyhook.nvidia.com/name", "demo"),
                    ("skyhook.nvidia.com/package", "p-1"),
                ],
                ..PodDef::default()
            },
            false,
        ),
        (
            "only the name label: not a package pod (upstream v0.18)",
            PodDef {
                name: "skyhook/pkg",
                phase: "Running",
                labels: &[("skyhook.nvidia.com/name", "demo")],
                ..PodDef::default()
            },
            true,
        ),
        (
            "being deleted",
            PodDef {
                name: "default/web",
                phase: "Running",
                deleting: true,
                ..PodDef::default()
            },
            true,
        ),
    ];
    for (name, def, want) in cases {
        let rules = DrainRules::default();
        let must_leave = disposition(&pod(def), &rules) != Disposition::Stays;
        assert_eq!(must_leave, want, "{name}");
    }
}

#[test]
fn drain_splits_evictions_from_terminating_pods() {
    let pods = vec![
        pod(PodDef {
            name: "default/a",
            phase: "Running",
            ..PodDef::default()
        }),
        pod(PodDef {
            name: "default/b",
            phase: "Running",
            deleting: true,
            ..PodDef::default()
        }),
        pod(PodDef {
            name: "kube-system/c",
            phase: "Running",
            ..PodDef::default()
        }),
        pod(PodDef {
            name: "default/d",
            phase: "Succeeded",
            ..PodDef::default()
        }),
    ];
    let drain = drain(&pods, &DrainRules::default());
    let names = |pods: &[&Pod]| {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&drain.evict), ["a"]);
    assert_eq!(names(&drain.terminating), ["b"]);
    assert!(!drain.is_complete());

    let settled = vec![pods[2].clone(), pods[3].clone()];
    assert!(super::drain(&settled, &DrainRules::default()).is_complete());
}

#[test]
fn interrupt_blockers_follow_pod_non_interrupt_labels() {
    let important = pod(PodDef {
        name: "default/important-stuff",
        phase: "Running",
        labels: &[("dontmess", "withme")],
        ..PodDef::default()
    });
    let pending = pod(PodDef {
        name: "default/starting",
        phase: "Pending",
        labels: &[("dontmess", "withme")],
        ..PodDef::default()
    });
    let done = pod(PodDef {
        name: "default/done",
        phase: "Succeeded",
        labels: &[("dontmess", "withme")],
        ..PodDef::default()
    });
    let other = pod(PodDef {
        name: "default/drain-on",
        phase: "Running",
        labels: &[("app", "x")],
        ..PodDef::default()
    });
    let pods = vec![important, pending, done, other];
    let selector = |labels: &[(&str, &str)]| LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        ),
        match_expressions: None,
    };

    let names = |found: Vec<&Pod>| {
        found
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect::<Vec<_>>()
    };
    let matching = interrupt_blockers(Some(&selector(&[("dontmess", "withme")])), &pods).unwrap();
    assert_eq!(names(matching), ["important-stuff", "starting"]);
    assert!(
        interrupt_blockers(None, &pods).unwrap().is_empty(),
        "absent selector"
    );
    assert!(
        interrupt_blockers(Some(&LabelSelector::default()), &pods)
            .unwrap()
            .is_empty(),
        "empty selector matches nothing"
    );
    assert!(
        interrupt_blockers(Some(&selector(&[("Bad Key", "x")])), &pods).is_err(),
        "a broken selector is an error"
    );
}

fn budget(name: &str, selector: Option<LabelSelector>, allowed: i32) -> PodDisruptionBudget {
    let (namespace, name) = name.split_once('/').unwrap();
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector,
            ..PodDisruptionBudgetSpec::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: allowed,
            ..PodDisruptionBudgetStatus::default()
        }),
    }
}

#[test]
fn blocker_report_names_pods_and_budgets() {
    let web = |labels: &[(&str, &str)]| LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        ),
        match_expressions: None,
    };
    let pods = vec![
        pod(PodDef {
            name: "default/web-0",
            phase: "Running",
            labels: &[("app", "web")],
            ..PodDef::default()
        }),
        pod(PodDef {
            name: "default/cache",
            phase: "Running",
            labels: &[("app", "cache")],
            ..PodDef::default()
        }),
        pod(PodDef {
            name: "default/old",
            phase: "Running",
            deleting: true,
            ..PodDef::default()
        }),
    ];
    let budgets = vec![
        budget("default/web-pdb", Some(web(&[("app", "web")])), 0),
        budget("default/everything", Some(LabelSelector::default()), 0),
        budget("default/cache-pdb", Some(web(&[("app", "cache")])), 1),
        budget("other/web-pdb", Some(web(&[("app", "web")])), 0),
        budget("default/no-selector", None, 0),
    ];
    let report = blockers(&drain(&pods, &DrainRules::default()), &budgets);
    assert_eq!(
        report.pods,
        vec![
            BlockingPod {
                pod: "default/cache".into(),
                held: None,
                terminating: false,
                budgets: vec!["default/everything".into()],
            },
            BlockingPod {
                pod: "default/old".into(),
                held: None,
                terminating: true,
                budgets: vec!["default/everything".into()],
            },
            BlockingPod {
                pod: "default/web-0".into(),
                held: None,
                terminating: false,
                budgets: vec!["default/everything".into(), "default/web-pdb".into()],
            },
        ]
    );
    let message = report.message("kind-worker");
    assert!(message.starts_with("drain of node kind-worker timed out; still waiting for default/cache (PodDisruptionBudget default/everything allows no disruption)"), "{message}");
    assert!(
        message.contains(
            "default/old (terminating, PodDisruptionBudget default/everything allows no disruption)"
        ),
        "{message}"
    );
}

#[test]
fn blocker_message_is_bounded() {
    let report = DrainBlockers {
        pods: (0..25)
            .map(|i| BlockingPod {
                pod: format!("default/p{i:02}"),
                held: None,
                terminating: false,
                budgets: vec![],
            })
            .collect(),
    };
    let message = report.message("n");
    assert!(message.ends_with("default/p09, and 15 more"), "{message}");
}

/// The rules of a spec given as YAML (`drain: {...}` or `drainConfig: {...}`).
fn rules(yaml: &str) -> DrainRules {
    let spec: skyhook_api::v1alpha1::SkyhookSpec = serde_yaml::from_str(yaml).unwrap();
    let effective = skyhook_api::drain::effective_drain(&spec, std::time::Duration::from_secs(600));
    DrainRules::of(&effective, Some("skyhook")).unwrap()
}

#[test]
fn drain_options_decide_what_stays_what_is_evicted_and_what_blocks() {
    let replica = |name| PodDef {
        name,
        phase: "Running",
        controllers: &["ReplicaSet"],
        ..PodDef::default()
    };
    let daemon = PodDef {
        name: "default/agent",
        phase: "Running",
        controllers: &["DaemonSet"],
        toleration_key: Some(UNSCHEDULABLE_TAINT_KEY),
        ..PodDef::default()
    };
    // A DaemonSet pod without the cordon toleration (the DaemonSet controller adds it, so
    // only a hand-written pod lacks it): what ignoreDaemonSets decides.
    let bare_daemon = PodDef {
        toleration_key: None,
        ..daemon
    };
    let bare = PodDef {
        name: "default/bare",
        phase: "Running",
        ..PodDef::default()
    };
    let bare_owned_not_controlled = PodDef {
        name: "default/adopted",
        phase: "Running",
        owners: &["ReplicaSet"],
        ..PodDef::default()
    };
    let scratch = PodDef {
        empty_dir: true,
        ..replica("default/scratch")
    };
    let pinned = PodDef {
        labels: &[("keep", "yes")],
        ..replica("default/pinned")
    };
    let leaving_bare = PodDef {
        deleting: true,
        ..bare_owned_not_controlled
    };
    use Disposition::*;
    #[rustfmt::skip]
    let cases: Vec<(&str, &str, PodDef<'_>, Disposition)> = vec![
        ("absent spec: upstream", "{}", replica("default/web"), Evict),
        ("absent spec: DaemonSet ignored", "{}", bare_daemon, Stays),
        ("absent spec: unowned evicted", "{}", bare, Evict),
        ("absent spec: emptyDir evicted", "{}", scratch, Evict),
        ("tolerating the cordon wins over ignoreDaemonSets", "drainConfig: {ignoreDaemonSets: false}", daemon, Stays),
        ("drainConfig ignoreDaemonSets false removes it", "drainConfig: {ignoreDaemonSets: false}", bare_daemon, Evict),
        ("deprecated drain ignoreDaemonSets false holds", "drain: {ignoreDaemonSets: false}", bare_daemon, Held(super::Held::DaemonSet)),
        ("ignoreDaemonSets true", "drainConfig: {ignoreDaemonSets: true}", bare_daemon, Stays),
        ("force false holds the unowned", "drainConfig: {force: false}", bare, Held(super::Held::Unowned)),
        ("force false: an owner that is no controller", "drainConfig: {force: false}", bare_owned_not_controlled, Held(super::Held::Unowned)),
        ("force false: controlled pods go", "drainConfig: {force: false}", replica("default/web"), Evict),
        ("force false, deprecated field", "drain: {force: false}", bare, Held(super::Held::Unowned)),
        ("force true evicts", "drainConfig: {force: true}", bare, Evict),
        ("deleteEmptyDirData false holds", "drainConfig: {deleteEmptyDirData: false}", scratch, Held(super::Held::EmptyDir)),
        ("deleteEmptyDirData true", "drainConfig: {deleteEmptyDirData: true}", scratch, Evict),
        ("unmanaged is checked before emptyDir", "drainConfig: {force: false, deleteEmptyDirData: false}", PodDef { empty_dir: true, ..bare }, Held(super::Held::Unowned)),
        ("podSelector leaves the match", "drainConfig: {podSelector: {matchLabels: {keep: 'yes'}}}", pinned, Stays),
        ("podSelector, deprecated field", "drain: {podSelector: {matchLabels: {keep: 'yes'}}}", pinned, Stays),
        ("podSelector: others still go", "drainConfig: {podSelector: {matchLabels: {keep: 'yes'}}}", replica("default/web"), Evict),
        ("empty podSelector keeps nothing", "drainConfig: {podSelector: {}}", pinned, Evict),
        ("a pod being deleted is waited for, even a held one", "drainConfig: {force: false}", leaving_bare, Leaving),
        ("a package pod in another namespace is drained", "{}", PodDef { name: "default/imposter", labels: &[("skyhook.nvidia.com/name", "x"), ("skyhook.nvidia.com/package", "p-1")], ..replica("default/imposter") }, Evict),
        ("a package pod in the controller's namespace stays", "{}", PodDef { name: "skyhook/p", labels: &[("skyhook.nvidia.com/name", "x"), ("skyhook.nvidia.com/package", "p-1")], ..replica("skyhook/p") }, Stays),
    ];
    for (case, spec, def, want) in cases {
        assert_eq!(disposition(&pod(def), &rules(spec)), want, "{case}");
    }
}

#[test]
fn held_pods_block_the_drain_and_say_which_setting_frees_them() {
    let pods = vec![pod(PodDef {
        name: "default/bare",
        phase: "Running",
        ..PodDef::default()
    })];
    let pending = drain(&pods, &rules("drainConfig: {force: false}"));
    assert!(pending.evict.is_empty());
    assert!(!pending.is_complete());
    let message = blockers(&pending, &[]).message("n");
    assert!(
        message.contains("default/bare (owned by no controller; set drainConfig.force: true"),
        "{message}"
    );
}

#[test]
fn a_pod_selector_that_does_not_parse_is_an_error() {
    let spec: skyhook_api::v1alpha1::SkyhookSpec =
        serde_yaml::from_str("drainConfig: {podSelector: {matchLabels: {'Bad Key': x}}}").unwrap();
    let effective = skyhook_api::drain::effective_drain(&spec, std::time::Duration::from_secs(600));
    assert!(DrainRules::of(&effective, None).is_err());
}
