use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::{BatchState, CompartmentStatus, PackageStatus, SkyhookStatus};

use super::*;
use crate::pods::tests::{package, skyhook};
use skyhook_api::generation::Group;

fn entry(name: &str, version: &str, stage: Stage, state: State, restarts: i32) -> PackageStatus {
    PackageStatus {
        name: name.into(),
        version: version.into(),
        image: "img".into(),
        container_sha: String::new(),
        stage,
        state,
        restarts,
    }
}

/// A Skyhook named `name` with packages `(name, version)` and the given per-node entries and
/// node statuses.
fn observed(
    name: &str,
    packages: &[(&str, &str)],
    nodes: &[(&str, Status, Vec<PackageStatus>)],
    status: Status,
) -> Skyhook {
    let mut sky = skyhook(name, vec![]);
    for (pkg, version) in packages {
        sky.spec
            .packages
            .insert((*pkg).into(), package(pkg, version, "img"));
    }
    sky.status = Some(SkyhookStatus {
        status: Some(status),
        node_status: nodes.iter().map(|(n, s, _)| ((*n).into(), *s)).collect(),
        node_state: nodes
            .iter()
            .map(|(n, _, entries)| ((*n).into(), entries.iter().cloned().collect::<NodeState>()))
            .collect(),
        ..SkyhookStatus::default()
    });
    sky
}

/// The series of `sky`, whose status mirrors its nodes.
fn mirrored_series(
    sky: &Skyhook,
    target_nodes: usize,
    strategies: &BTreeMap<String, StrategyKind>,
) -> SkyhookSeries {
    skyhook_series(
        &keys::SKYHOOK,
        sky,
        &NodeReadings::mirrored(sky.status.as_ref()),
        target_nodes,
        strategies,
    )
}

fn value<L: PartialEq + std::fmt::Debug>(series: &[(L, i64)], labels: &L) -> i64 {
    series
        .iter()
        .find(|(l, _)| l == labels)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no series {labels:?}"))
}

fn status_labels(_skyhook: &str, status: &str) -> StatusLabels {
    StatusLabels {
        status: status.into(),
    }
}

fn state_labels(_skyhook: &str, package: &str, version: &str, state: &str) -> PackageStateLabels {
    PackageStateLabels {
        package_name: package.into(),
        package_version: version.into(),
        state: state.into(),
    }
}

fn stage_labels(_skyhook: &str, package: &str, version: &str, stage: &str) -> PackageStageLabels {
    PackageStageLabels {
        package_name: package.into(),
        package_version: version.into(),
        stage: stage.into(),
    }
}

#[test]
fn completed_simple_skyhook() {
    let mut sky = observed(
        "simple-skyhook",
        &[("dexter", "1.2.3"), ("spencer", "3.2.3")],
        &[(
            "kind-worker",
            Status::Complete,
            vec![
                entry("dexter", "1.2.3", Stage::Config, State::Complete, 0),
                entry("spencer", "3.2.3", Stage::Config, State::Complete, 0),
            ],
        )],
        Status::Complete,
    );
    sky.status.as_mut().unwrap().compartment_statuses = BTreeMap::from([(
        "__default__".into(),
        CompartmentStatus {
            matched: 1,
            ceiling: 1,
            in_progress: 0,
            completed: 1,
            progress_percent: 100,
            batch_state: Some(BatchState::initial()),
        },
    )]);
    let strategies = BTreeMap::from([("__default__".into(), StrategyKind::Fixed)]);
    let series = mirrored_series(&sky, 1, &strategies);

    assert_eq!(series.status.len(), Status::ALL.len());
    assert_eq!(
        value(&series.status, &status_labels("simple-skyhook", "complete")),
        1
    );
    assert_eq!(
        value(
            &series.status,
            &status_labels("simple-skyhook", "in_progress")
        ),
        0
    );
    assert_eq!(
        value(
            &series.node_status,
            &status_labels("simple-skyhook", "complete")
        ),
        1
    );
    assert_eq!(
        value(
            &series.node_status,
            &status_labels("simple-skyhook", "erroring")
        ),
        0
    );
    assert_eq!(series.target_count, 1);
    assert_eq!(series.package_state.len(), 2 * State::ALL.len());
    assert_eq!(series.package_stage.len(), 2 * Stage::ALL.len());
    assert_eq!(
        value(
            &series.package_state,
            &state_labels("simple-skyhook", "dexter", "1.2.3", "complete")
        ),
        1
    );
    assert_eq!(
        value(
            &series.package_stage,
            &stage_labels("simple-skyhook", "spencer", "3.2.3", "config")
        ),
        1
    );
    assert_eq!(
        series.rollout,
        vec![(
            RolloutLabels {
                policy_name: "legacy".into(),
                compartment_name: "__default__".into(),
                strategy: "fixed".into(),
            },
            RolloutValues {
                matched: 1,
                ceiling: 1,
                in_progress: 0,
                completed: 1,
                progress_percent: 100,
                current_batch: 1,
                consecutive_failures: 0,
                should_stop: 0,
            }
        )]
    );
}

#[test]
fn counts_states_and_stages_independently() {
    // Upstream overwrote a state count with the count of the last stage it iterated.
    let sky = observed(
        "failure-skyhook",
        &[("dexter", "1.2.3"), ("failure", "1.2.3")],
        &[
            (
                "n1",
                Status::Erroring,
                vec![
                    entry("dexter", "1.2.3", Stage::Config, State::Complete, 0),
                    entry("failure", "1.2.3", Stage::Apply, State::Erroring, 3),
                ],
            ),
            (
                "n2",
                Status::InProgress,
                vec![
                    entry("dexter", "1.2.3", Stage::Apply, State::Complete, 0),
                    entry("failure", "1.2.3", Stage::Apply, State::Erroring, 2),
                ],
            ),
            (
                "n3",
                Status::Waiting,
                vec![entry("failure", "1.2.2", Stage::Config, State::Complete, 9)],
            ),
        ],
        Status::Erroring,
    );
    let series = mirrored_series(&sky, 3, &BTreeMap::new());
    let name = "failure-skyhook";
    assert_eq!(
        value(
            &series.package_state,
            &state_labels(name, "dexter", "1.2.3", "complete")
        ),
        2
    );
    assert_eq!(
        value(
            &series.package_stage,
            &stage_labels(name, "dexter", "1.2.3", "config")
        ),
        1
    );
    assert_eq!(
        value(
            &series.package_stage,
            &stage_labels(name, "dexter", "1.2.3", "apply")
        ),
        1
    );
    assert_eq!(
        value(
            &series.package_state,
            &state_labels(name, "failure", "1.2.3", "erroring")
        ),
        2
    );
    assert_eq!(
        value(
            &series.package_stage,
            &stage_labels(name, "failure", "1.2.3", "apply")
        ),
        2
    );
    let failure = PackageLabels {
        package_name: "failure".into(),
        package_version: "1.2.3".into(),
    };
    assert_eq!(
        value(&series.package_restarts, &failure),
        5,
        "other versions do not count"
    );
    assert_eq!(
        value(&series.node_status, &status_labels(name, "erroring")),
        1
    );
    assert_eq!(
        value(&series.node_status, &status_labels(name, "waiting")),
        1
    );
    assert_eq!(value(&series.status, &status_labels(name, "erroring")), 1);
}

#[test]
fn policy_and_strategy_labels() {
    let mut sky = observed("rollout", &[], &[], Status::InProgress);
    sky.spec.deployment_policy = Some("tiers".into());
    sky.status.as_mut().unwrap().compartment_statuses = BTreeMap::from([
        ("critical".into(), CompartmentStatus::default()),
        ("gone".into(), CompartmentStatus::default()),
    ]);
    let strategies = BTreeMap::from([("critical".into(), StrategyKind::Exponential)]);
    let series = mirrored_series(&sky, 0, &strategies);
    let labels: Vec<_> = series
        .rollout
        .iter()
        .map(|(l, _)| {
            (
                l.policy_name.as_str(),
                l.compartment_name.as_str(),
                l.strategy.as_str(),
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            ("tiers", "critical", "exponential"),
            ("tiers", "gone", "unknown")
        ]
    );
}

#[test]
fn a_skyhook_without_status_reports_unknown() {
    let sky = skyhook("fresh", vec![]);
    let series = mirrored_series(&sky, 4, &BTreeMap::new());
    assert_eq!(value(&series.status, &status_labels("fresh", "unknown")), 1);
    assert_eq!(series.target_count, 4);
    assert!(series.rollout.is_empty());
}

fn lines_for(text: &str, skyhook: &str) -> Vec<String> {
    let needle = format!("skyhook_name=\"{skyhook}\"");
    text.lines()
        .filter(|line| line.contains(&needle))
        .map(str::to_owned)
        .collect()
}

#[test]
fn publish_replace_and_remove() {
    let metrics = Metrics::new(true);
    let mut sky = observed(
        "delete-skyhook",
        &[("a", "1.0.0"), ("b", "1.0.0")],
        &[(
            "n1",
            Status::Complete,
            vec![entry("a", "1.0.0", Stage::Config, State::Complete, 0)],
        )],
        Status::Complete,
    );
    sky.status.as_mut().unwrap().compartment_statuses =
        BTreeMap::from([("__default__".into(), CompartmentStatus::default())]);
    let other = observed("other", &[("x", "1")], &[], Status::Waiting);
    metrics.publish(
        Group::Skyhook,
        "delete-skyhook",
        mirrored_series(&sky, 1, &BTreeMap::new()),
    );
    metrics.publish(
        Group::Skyhook,
        "other",
        mirrored_series(&other, 0, &BTreeMap::new()),
    );

    let text = metrics.encode().unwrap();
    assert!(
        text.contains("skyhook_status{skyhook_name=\"delete-skyhook\",status=\"complete\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("skyhook_node_target_count{skyhook_name=\"delete-skyhook\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("skyhook_rollout_matched_nodes{skyhook_name=\"delete-skyhook\",policy_name=\"legacy\",compartment_name=\"__default__\",strategy=\"unknown\"} 0"),
        "{text}"
    );
    assert!(text.contains("package_name=\"b\""));

    // Package b leaves the spec: its series go.
    sky.spec.packages.remove("b");
    metrics.publish(
        Group::Skyhook,
        "delete-skyhook",
        mirrored_series(&sky, 1, &BTreeMap::new()),
    );
    let text = metrics.encode().unwrap();
    assert!(
        !lines_for(&text, "delete-skyhook")
            .iter()
            .any(|l| l.contains("package_name=\"b\"")),
        "{text}"
    );
    assert!(
        lines_for(&text, "delete-skyhook")
            .iter()
            .any(|l| l.contains("package_name=\"a\""))
    );

    metrics.remove(Group::Skyhook, "delete-skyhook");
    let text = metrics.encode().unwrap();
    assert_eq!(
        lines_for(&text, "delete-skyhook"),
        Vec::<String>::new(),
        "{text}"
    );
    assert!(
        !lines_for(&text, "other").is_empty(),
        "other Skyhooks keep their series"
    );
}

#[test]
fn reconcile_metrics() {
    let metrics = Metrics::new(true);
    {
        let _timer = metrics.reconcile_started();
    }
    metrics.reconcile_failed("kube-api", 1);
    let text = metrics.encode().unwrap();
    assert!(
        text.contains("skyhook_controller_reconcile_runs_total 1"),
        "{text}"
    );
    assert!(
        text.contains("skyhook_controller_reconcile_failures_total{category=\"kube-api\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("skyhook_controller_reconcile_duration_seconds_count 1"),
        "{text}"
    );
}

#[test]
fn stage_durations_are_observed_and_go_with_their_skyhook() {
    let metrics = Metrics::new(true);
    metrics.observe_stage_duration(Group::Skyhook, "gone", ("tuning", Stage::Apply), 3.0);
    metrics.observe_stage_duration(Group::Skyhook, "gone", ("tuning", Stage::Apply), 70.0);
    metrics.observe_stage_duration(Group::Skyhook, "kept", ("driver", Stage::Interrupt), 200.0);
    let text = metrics.encode().unwrap();
    let series = "skyhook_package_stage_duration_seconds";
    for line in [
        format!(
            "{series}_bucket{{le=\"4.0\",skyhook_name=\"gone\",package_name=\"tuning\",stage=\"apply\"}} 1"
        ),
        format!(
            "{series}_bucket{{le=\"128.0\",skyhook_name=\"gone\",package_name=\"tuning\",stage=\"apply\"}} 2"
        ),
        format!(
            "{series}_sum{{skyhook_name=\"gone\",package_name=\"tuning\",stage=\"apply\"}} 73.0"
        ),
        format!(
            "{series}_count{{skyhook_name=\"kept\",package_name=\"driver\",stage=\"interrupt\"}} 1"
        ),
    ] {
        assert!(text.contains(&line), "{line} not in {text}");
    }

    metrics.remove(Group::Skyhook, "gone");
    let text = metrics.encode().unwrap();
    assert_eq!(lines_for(&text, "gone"), Vec::<String>::new(), "{text}");
    assert!(!lines_for(&text, "kept").is_empty(), "{text}");
}

#[test]
fn a_blocked_drain_follows_its_condition() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    let condition = |status: &str| Condition {
        type_: skyhook_api::keys::SKYHOOK.condition_drain_blocked.into(),
        status: status.into(),
        reason: "DrainTimeout".into(),
        message: "node-1: waiting for shop/web-1".into(),
        last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
        observed_generation: None,
    };
    for (conditions, expected) in [
        (vec![], 0),
        (vec![condition("True")], 1),
        (vec![condition("False")], 0),
    ] {
        let mut sky = observed("drain", &[], &[], Status::InProgress);
        sky.status.as_mut().unwrap().conditions = conditions;
        let series = mirrored_series(&sky, 1, &BTreeMap::new());
        assert_eq!(series.drain_blocked, expected);
    }
}

#[test]
fn readiness_gate_gauges_follow_their_condition_and_reason() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    let condition = |status: &str, reason: &str| Condition {
        type_: skyhook_api::keys::SKYHOOK
            .condition_readiness_gate_held
            .into(),
        status: status.into(),
        reason: reason.into(),
        message: "node node-1 waits for GpuHealthy".into(),
        last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
        observed_generation: None,
    };
    let waiting = skyhook_api::keys::READINESS_GATE_WAITING_REASON;
    let timed_out = skyhook_api::keys::READINESS_GATE_TIMED_OUT_REASON;
    for (conditions, expected) in [
        (vec![], (0, 0)),
        (vec![condition("True", waiting)], (1, 0)),
        (vec![condition("True", timed_out)], (1, 1)),
        (vec![condition("False", timed_out)], (0, 0)),
    ] {
        let mut sky = observed("gated", &[], &[], Status::InProgress);
        sky.status.as_mut().unwrap().conditions = conditions;
        let series = mirrored_series(&sky, 1, &BTreeMap::new());
        assert_eq!(
            (series.readiness_gate_held, series.readiness_gate_timed_out),
            expected
        );
    }
}

#[test]
fn the_topology_gauge_follows_its_condition() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    for (status, expected) in [("True", 1), ("False", 0)] {
        let mut sky = observed("racked", &[], &[], Status::InProgress);
        sky.status.as_mut().unwrap().conditions = vec![Condition {
            type_: skyhook_api::keys::SKYHOOK
                .condition_topology_budget_held
                .into(),
            status: status.into(),
            reason: skyhook_api::keys::TOPOLOGY_DOMAINS_BUSY_REASON.into(),
            message: "[__default__] node-2 waits".into(),
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }];
        let series = mirrored_series(&sky, 1, &BTreeMap::new());
        assert_eq!(series.topology_budget_held, expected);
    }
}

#[test]
fn the_pre_pull_gauges_follow_their_condition_and_reason() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    let condition = |status: &str, reason: &str| Condition {
        type_: skyhook_api::keys::SKYHOOK.condition_pre_pull_held.into(),
        status: status.into(),
        reason: reason.into(),
        message: "pulling images before the cordon on 1 node: node-1".into(),
        last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
        observed_generation: None,
    };
    let pulling = skyhook_api::keys::PRE_PULL_PULLING_REASON;
    let failed = skyhook_api::keys::PRE_PULL_FAILED_REASON;
    for (conditions, expected) in [
        (vec![], (0, 0)),
        (vec![condition("True", pulling)], (1, 0)),
        (vec![condition("True", failed)], (1, 1)),
        (vec![condition("False", failed)], (0, 0)),
    ] {
        let mut sky = observed("pulled", &[], &[], Status::InProgress);
        sky.status.as_mut().unwrap().conditions = conditions;
        let series = mirrored_series(&sky, 1, &BTreeMap::new());
        assert_eq!((series.pre_pull_held, series.pre_pull_failed), expected);
    }
}

/// The exposition lines of metrics named `<prefix>_...` labelled with `<label>="<name>"`.
fn group_lines(text: &str, prefix: &str, label: &str, name: &str) -> Vec<String> {
    let needle = format!("{label}=\"{name}\"");
    text.lines()
        .filter(|line| line.starts_with(&format!("{prefix}_")) && line.contains(&needle))
        .map(str::to_owned)
        .collect()
}

#[test]
fn each_group_publishes_under_its_own_names_and_a_nodewright_has_legacy_twins() {
    let sky = observed("gpu", &[("driver", "1.0")], &[], Status::Complete);
    let cases = [
        // (legacy twins on, group, nodewright_* lines, skyhook_* lines)
        (true, Group::Skyhook, false, true),
        (true, Group::NodeWright, true, true),
        (false, Group::NodeWright, true, false),
        (false, Group::Skyhook, false, true),
    ];
    for (legacy, group, nodewright_lines, skyhook_lines) in cases {
        let case = format!("legacy {legacy}, {group:?}");
        let metrics = Metrics::new(legacy);
        metrics.publish(group, "gpu", mirrored_series(&sky, 1, &BTreeMap::new()));
        metrics.observe_stage_duration(group, "gpu", ("driver", Stage::Apply), 3.0);
        let text = metrics.encode().unwrap();
        let nodewright = group_lines(&text, "nodewright", "nodewright_name", "gpu");
        let skyhook = group_lines(&text, "skyhook", "skyhook_name", "gpu");
        assert_eq!(!nodewright.is_empty(), nodewright_lines, "{case}: {text}");
        assert_eq!(!skyhook.is_empty(), skyhook_lines, "{case}: {text}");
        assert!(
            !text.contains("nodewright_name=\"gpu\"") || !nodewright.is_empty(),
            "{case}: nodewright_name only on nodewright_* series"
        );
        if nodewright_lines {
            for line in [
                "nodewright_status{nodewright_name=\"gpu\",status=\"complete\"} 1",
                "nodewright_node_target_count{nodewright_name=\"gpu\"} 1",
                "nodewright_package_stage_duration_seconds_count{nodewright_name=\"gpu\",package_name=\"driver\",stage=\"apply\"} 1",
            ] {
                assert!(text.contains(line), "{case}: {line} not in {text}");
            }
        }
        if nodewright_lines && skyhook_lines {
            // The twins carry the same values under the other names.
            let mut renamed: Vec<String> = (nodewright.iter())
                .map(|l| l.replacen("nodewright_", "skyhook_", 2))
                .collect();
            let mut skyhook = skyhook.clone();
            renamed.sort();
            skyhook.sort();
            assert_eq!(renamed, skyhook, "{case}");
        }
        metrics.remove(group, "gpu");
        let text = metrics.encode().unwrap();
        assert!(
            !text.contains("_name=\"gpu\""),
            "{case}: all removed: {text}"
        );
    }
}

#[test]
fn the_legacy_help_names_the_replacement_only_while_twins_are_published() {
    let help = |legacy: bool| {
        let text = Metrics::new(legacy).encode().unwrap();
        (text.lines())
            .find(|l| l.starts_with("# HELP skyhook_status "))
            .unwrap()
            .to_owned()
    };
    assert!(
        help(true).contains("legacy twins of nodewright_status"),
        "{}",
        help(true)
    );
    assert!(!help(false).contains("nodewright"), "{}", help(false));
    let text = Metrics::new(true).encode().unwrap();
    assert!(
        text.contains("# HELP nodewright_status 1 for the current status of the NodeWright"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE nodewright_rollout_should_stop gauge"),
        "{text}"
    );
}
