//! Explicit uninstall (upstream §2.2–§2.6), the two uninstall modes, and deletion (§2.8): the
//! node states, pods and cordons each step leaves.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use skyhook_api::keys;
use skyhook_api::uninstall::UninstallMode;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, Package, Stage, State, Uninstall};

use super::sim::{Sim, node, package, skyhook};

fn removable(name: &str, version: &str) -> Package {
    Package {
        uninstall: Some(Uninstall {
            enabled: true,
            apply: false,
        }),
        config_map: [("setting".to_owned(), "1".to_owned())].into(),
        ..package(name, version)
    }
}

fn rebooting(package: Package) -> Package {
    Package {
        interrupt: Some(Interrupt {
            type_: InterruptType::Reboot,
            services: Vec::new(),
        }),
        ..package
    }
}

fn request_uninstall(sim: &mut Sim, name: &str, package: &str, apply: bool) {
    let skyhook = sim.skyhook_mut(name);
    let entry = skyhook.spec.packages.get_mut(package).unwrap();
    entry.uninstall = Some(Uninstall {
        enabled: true,
        apply,
    });
    skyhook.metadata.generation = skyhook.metadata.generation.map(|g| g + 1);
}

/// Steps until `done` holds, settling every pod successfully; returns every pod created.
fn run_until(sim: &mut Sim, done: impl Fn(&Sim) -> bool) -> Vec<k8s_openapi::api::core::v1::Pod> {
    let mut created = Vec::new();
    for _ in 0..60 {
        if done(sim) {
            return created;
        }
        created.extend(sim.step().created_pods());
        sim.settle(|_| false);
    }
    panic!(
        "not done after 60 steps: state {:?}, status {:?}, pods {:?}, unschedulable {}",
        sim.state("un", "node-a"),
        sim.node_status("un", "node-a"),
        sim.pods(),
        sim.node("node-a").unschedulable
    );
}

fn stages_of(pods: &[k8s_openapi::api::core::v1::Pod]) -> Vec<(String, String)> {
    pods.iter()
        .map(|pod| {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let annotation = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys::SKYHOOK.package_annotation))
                .and_then(|text| {
                    skyhook_api::pod_annotation::PodPackageAnnotation::parse(text).ok()
                })
                .unwrap();
            (annotation.stage.to_string(), name)
        })
        .collect()
}

fn installed(packages: Vec<Package>) -> Sim {
    let mut sim = Sim::new(vec![node("node-a", 0)], vec![skyhook("un", packages)]);
    // Drained: the node's workload pods were listed and there are none.
    sim.snapshot
        .workload_pods
        .insert("node-a".into(), Vec::new());
    run_until(&mut sim, |s| {
        s.node_status("un", "node-a").as_deref() == Some("complete")
    });
    sim
}

#[test]
fn an_explicit_uninstall_runs_the_full_package_then_forgets_it() {
    let mut sim = installed(vec![removable("tool", "1.0.0"), package("other", "1.0.0")]);
    request_uninstall(&mut sim, "un", "tool", true);
    let created = run_until(&mut sim, |s| {
        s.state("un", "node-a").len() == 1
            && s.node_status("un", "node-a").as_deref() == Some("complete")
    });
    let pods = stages_of(&created);
    assert_eq!(pods.len(), 1, "{pods:?}");
    assert_eq!(pods[0].0, "uninstall");
    // The uninstall pod is the package's own: its ConfigMap and its containers.
    let spec = created[0].spec.as_ref().unwrap();
    let containers: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        containers,
        ["tool-init", "tool-uninstall", "tool-uninstallcheck"]
    );
    assert!(
        spec.volumes
            .iter()
            .flatten()
            .any(|v| v.config_map.is_some() && v.name == "tool"),
        "{:?}",
        spec.volumes
    );
    assert_eq!(
        sim.state("un", "node-a"),
        [("other|1.0.0".to_owned(), Stage::Config, State::Complete)]
    );
    assert_eq!(
        sim.skyhook_status("un"),
        Some(skyhook_api::v1alpha1::Status::Complete)
    );
    // Nothing is installed again while the request stands.
    for _ in 0..5 {
        assert!(sim.step().create_pods.is_empty());
    }
}

#[test]
fn an_uninstall_with_a_reboot_cordons_drains_and_reboots_once() {
    let mut sim = installed(vec![rebooting(removable("driver", "2.0.0"))]);
    request_uninstall(&mut sim, "un", "driver", true);
    let mut cordoned_before_pod = false;
    let mut created = Vec::new();
    for _ in 0..60 {
        let planned = sim.step();
        if planned.created_pods().iter().any(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.contains("uninstall"))
        }) {
            cordoned_before_pod |= sim.node("node-a").unschedulable;
        }
        created.extend(planned.created_pods());
        sim.settle(|_| false);
        if sim.state("un", "node-a").is_empty()
            && sim.node_status("un", "node-a").as_deref() == Some("complete")
        {
            break;
        }
    }
    let pods = stages_of(&created);
    let stages: Vec<&str> = pods.iter().map(|(stage, _)| stage.as_str()).collect();
    assert_eq!(stages, ["uninstall", "uninstall-interrupt"], "{pods:?}");
    assert!(
        pods[1]
            .1
            .starts_with("un-uninstall-interrupt-reboot-node-a"),
        "{pods:?}"
    );
    assert!(
        cordoned_before_pod,
        "the node was schedulable under the uninstall"
    );
    assert!(!sim.node("node-a").unschedulable, "left cordoned");
    // The interrupt runs under its own resource ID, not the install's.
    let env = created[1]
        .spec
        .as_ref()
        .unwrap()
        .init_containers
        .as_ref()
        .unwrap()[0]
        .env
        .clone()
        .unwrap();
    let id = env
        .iter()
        .find(|e| e.name == keys::ENV_SKYHOOK_RESOURCE_ID)
        .and_then(|e| e.value.clone())
        .unwrap();
    assert!(id.contains("-uninstall_driver_2.0.0"), "{id}");
}

#[test]
fn withdrawing_the_request_mid_uninstall_reinstalls() {
    let mut sim = installed(vec![removable("tool", "1.0.0")]);
    request_uninstall(&mut sim, "un", "tool", true);
    sim.step();
    assert_eq!(
        sim.state("un", "node-a"),
        [("tool|1.0.0".to_owned(), Stage::Uninstall, State::InProgress)]
    );
    request_uninstall(&mut sim, "un", "tool", false);
    let planned = sim.step();
    assert_eq!(
        sim.state("un", "node-a")[0].1,
        Stage::Apply,
        "{:?}",
        sim.state("un", "node-a")
    );
    // The running uninstall pod no longer matches the node state.
    assert_eq!(planned.delete_pods.len(), 1, "{:?}", planned.delete_pods);
    run_until(&mut sim, |s| {
        s.state("un", "node-a") == [("tool|1.0.0".to_owned(), Stage::Config, State::Complete)]
    });
}

#[test]
fn explicit_mode_never_uninstalls_a_removed_or_downgraded_package() {
    let mut sim = installed(vec![package("kept", "2.0.0"), package("gone", "1.0.0")]);
    sim.config.uninstall_mode = UninstallMode::Explicit;
    let skyhook = sim.skyhook_mut("un");
    skyhook.spec.packages.remove("gone");
    skyhook
        .spec
        .packages
        .insert("kept".into(), package("kept", "1.0.0"));
    let created = run_until(&mut sim, |s| {
        s.node_status("un", "node-a").as_deref() == Some("complete")
            && s.state("un", "node-a").len() == 3
    });
    let stages: Vec<String> = stages_of(&created).into_iter().map(|(s, _)| s).collect();
    assert_eq!(stages, ["apply", "config"]);
    // The old entries stay as markers beside the new version.
    let keys: Vec<String> = sim.state("un", "node-a").into_iter().map(|r| r.0).collect();
    assert_eq!(keys, ["gone|1.0.0", "kept|1.0.0", "kept|2.0.0"]);
}

#[test]
fn legacy_mode_still_uninstalls_a_removed_package() {
    let mut sim = installed(vec![package("kept", "1.0.0"), package("gone", "1.0.0")]);
    sim.skyhook_mut("un").spec.packages.remove("gone");
    let created = run_until(&mut sim, |s| {
        s.node_status("un", "node-a").as_deref() == Some("complete")
            && s.state("un", "node-a").len() == 1
    });
    let stages: Vec<String> = stages_of(&created).into_iter().map(|(s, _)| s).collect();
    assert_eq!(stages, ["uninstall"]);
}

fn delete(sim: &mut Sim) {
    sim.skyhook_mut("un").metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
}

#[test]
fn deletion_uninstalls_enabled_packages_then_cleans_the_node() {
    let mut sim = installed(vec![
        rebooting(removable("driver", "2.0.0")),
        package("plain", "1.0.0"),
    ]);
    delete(&mut sim);
    let created = run_until(&mut sim, |s| {
        s.skyhook("un")
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.is_empty())
    });
    let stages: Vec<String> = stages_of(&created).into_iter().map(|(s, _)| s).collect();
    assert_eq!(stages, ["uninstall", "uninstall-interrupt"]);
    let node = sim.node("node-a");
    assert!(!node.unschedulable);
    // The never-uninstalled package's marker stays; everything else of the Skyhook is gone.
    let left: Vec<&str> = node
        .annotations
        .keys()
        .chain(node.labels.keys())
        .filter(|k| keys::SKYHOOK.is_skyhook_node_key(k, "un"))
        .collect();
    assert_eq!(
        left,
        [
            &keys::SKYHOOK.node_state_annotation("un"),
            &keys::SKYHOOK.node_version_annotation("un")
        ]
    );
    assert_eq!(
        sim.state("un", "node-a"),
        [("plain|1.0.0".to_owned(), Stage::Config, State::Complete)]
    );
    assert!(
        !node.conditions.iter().any(|c| c
            .type_
            .starts_with(&keys::SKYHOOK.node_condition_prefix("un"))),
        "{:?}",
        node.conditions
    );
}

#[test]
fn deleting_a_paused_skyhook_with_pending_uninstalls_waits_and_says_why() {
    let mut sim = installed(vec![removable("tool", "1.0.0")]);
    sim.skyhook_mut("un")
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(keys::SKYHOOK.pause_annotation.to_owned(), "true".to_owned());
    delete(&mut sim);
    let planned = sim.step();
    assert!(planned.create_pods.is_empty());
    let warning = planned
        .events
        .iter()
        .find(|e| (e.reason, e.action) == (keys::CONDITION_DELETION_BLOCKED, "BlockDelete"))
        .expect("a DeletionBlocked Event");
    assert!(warning.warning, "{warning:?}");
    let condition = sim
        .skyhook("un")
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == keys::CONDITION_DELETION_BLOCKED)
        .cloned()
        .expect("the condition");
    assert_eq!(condition.reason, keys::DELETION_BLOCKED_PAUSED_REASON);
    // Said once, not every reconcile.
    let again = sim.step();
    assert!(
        !again
            .events
            .iter()
            .any(|e| e.reason == keys::CONDITION_DELETION_BLOCKED)
    );
    assert!(
        sim.skyhook("un")
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty())
    );
    // Resuming lets the uninstall run and the deletion finish.
    sim.skyhook_mut("un")
        .metadata
        .annotations
        .get_or_insert_default()
        .remove(keys::SKYHOOK.pause_annotation);
    run_until(&mut sim, |s| {
        s.skyhook("un")
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.is_empty())
    });
    assert!(sim.state("un", "node-a").is_empty());
}

#[test]
fn a_skyhook_being_deleted_installs_nothing_new() {
    let mut sim = installed(vec![removable("tool", "1.0.0")]);
    // A package added just before the deletion, never installed.
    sim.skyhook_mut("un")
        .spec
        .packages
        .insert("late".into(), package("late", "1.0.0"));
    delete(&mut sim);
    let created = run_until(&mut sim, |s| {
        s.skyhook("un")
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.is_empty())
    });
    let stages: Vec<String> = stages_of(&created).into_iter().map(|(s, _)| s).collect();
    assert_eq!(stages, ["uninstall"]);
}

fn deletion_blocked(sim: &Sim) -> Option<(String, String)> {
    (sim.skyhook("un").status.iter())
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == keys::CONDITION_DELETION_BLOCKED)
        .map(|c| (c.reason.clone(), c.message.clone()))
}

#[test]
fn a_deletion_waiting_on_an_erroring_uninstall_says_so_once_and_goes_on_when_fixed() {
    let mut sim = installed(vec![removable("tool", "1.0.0")]);
    delete(&mut sim);
    let mut warnings = 0;
    for _ in 0..6 {
        let planned = sim.step();
        sim.settle(|pod| pod.stage == Stage::Uninstall);
        warnings += (planned.events.iter())
            .filter(|e| e.warning && e.reason == keys::CONDITION_DELETION_BLOCKED)
            .count();
    }
    let (reason, message) = deletion_blocked(&sim).expect("DeletionBlocked");
    assert_eq!(reason, keys::DELETION_BLOCKED_ERRORING_REASON);
    assert!(
        message.contains("erroring on node-a (tool, uninstall)"),
        "{message}"
    );
    assert_eq!(warnings, 1, "one Warning Event, not one per reconcile");
    // Settled: the condition keeps its time and the status is not rewritten.
    let planned = sim.step();
    assert!(
        !planned.statuses.contains_key("un"),
        "{:?}",
        planned.statuses
    );
    // The uninstall passes once fixed (the kubelet's retry of the fixed pod): the deletion ends.
    for pod in &mut sim.snapshot.pods {
        pod.outcome = crate::pod_outcome::PodOutcome::Succeeded {
            container: "tool-uninstallcheck".into(),
            restarts: 3,
        };
    }
    run_until(&mut sim, |s| {
        (s.skyhook("un").metadata.finalizers.iter().flatten()).all(|f| f != keys::SKYHOOK.finalizer)
    });
    assert!(sim.state("un", "node-a").is_empty());
}

#[test]
fn the_last_uninstall_leaves_an_empty_node_state_and_the_deletion_removes_it() {
    let mut sim = installed(vec![removable("tool", "1.0.0")]);
    request_uninstall(&mut sim, "un", "tool", true);
    let key = keys::SKYHOOK.node_state_annotation("un");
    run_until(&mut sim, |s| {
        s.state("un", "node-a").is_empty()
            && s.node_status("un", "node-a").as_deref() == Some("complete")
    });
    // As upstream leaves it: absent would mean never touched.
    assert_eq!(sim.node("node-a").annotations.get(&key), Some("{}"));
    // Settled: `{}` is not rewritten.
    let planned = sim.step();
    assert!(
        !(planned.nodes.get("node-a")).is_some_and(|p| p.annotations.contains_key(&key)),
        "{:?}",
        planned.nodes
    );
    // An empty state is no marker: the deletion cleanup removes it.
    delete(&mut sim);
    run_until(&mut sim, |s| {
        (s.skyhook("un").metadata.finalizers.iter().flatten()).all(|f| f != keys::SKYHOOK.finalizer)
    });
    assert_eq!(sim.node("node-a").annotations.get(&key), None);
}
