//! Defaults, getters and helpers of the v1alpha1 types (spec §6.6, "api" area).

// Test helpers outside `#[test]` functions fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::str::FromStr;

use serde_json::json;
use skyhook_api::interrupt_payload::AgentInterruptType;
use skyhook_api::keys;
use skyhook_api::v1alpha1::{
    BatchState, DeploymentPolicy, DeploymentPolicySpec, DeploymentStrategy, ExponentialStrategy,
    FixedStrategy, InterruptType, LinearStrategy, Package, PackageResources, Sequencing, Skyhook,
    SkyhookSpec, SkyhookStatus, Stage, State, Status, StrategyKind,
};

fn skyhook(value: serde_json::Value) -> Skyhook {
    serde_json::from_value(value).unwrap()
}

fn minimal() -> serde_json::Value {
    json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "Skyhook",
        "metadata": {"name": "demo"},
        "spec": {}
    })
}

#[test]
fn package_name_is_filled_from_the_key_and_kept_when_present() {
    let mut manifest = minimal();
    manifest["spec"]["packages"] = json!({
        "tuning": {"version": "1.1.0", "image": "ghcr.io/x/shellscript"},
        "same": {"name": "same", "version": "1", "image": "i"},
        "differs": {"name": "other", "version": "1", "image": "i"},
    });
    let sky = skyhook(manifest);
    let names: Vec<(&str, &str)> = sky
        .spec
        .packages
        .iter()
        .map(|(key, package)| (key.as_str(), package.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [("differs", "other"), ("same", "same"), ("tuning", "tuning")]
    );
}

#[test]
fn image_is_kept_exactly_as_written() {
    let cases = [
        "agentless:bogus",
        "localhost:5000/team/pkg:1.2.3",
        "ghcr.io/x/y@sha256:0123456789abcdef",
        "ghcr.io/nvidia/skyhook-packages/shellscript",
    ];
    for image in cases {
        let mut manifest = minimal();
        manifest["spec"]["packages"] = json!({"p1": {"version": "1.2.3", "image": image}});
        assert_eq!(skyhook(manifest).spec.packages["p1"].image, image);
    }
}

#[test]
fn spec_defaults_match_the_crd() {
    let spec = skyhook(minimal()).spec;
    assert_eq!(spec, SkyhookSpec::default());
    assert_eq!(spec.priority, 200);
    assert!(!spec.serial && !spec.pause && !spec.runtime_required && !spec.auto_taint_new_nodes);
    assert_eq!(spec.sequencing, Sequencing::Node);
    assert!(spec.packages.is_empty() && spec.interruption_budget.is_none());
    assert!(spec.deployment_policy.is_none() && spec.deployment_policy_options.is_none());

    let mut manifest = minimal();
    manifest["spec"]["deploymentPolicyOptions"] = json!({});
    manifest["spec"]["sequencing"] = json!("all");
    let spec = skyhook(manifest).spec;
    assert!(
        spec.deployment_policy_options
            .unwrap()
            .reset_batch_state_on_completion
    );
    assert_eq!(spec.sequencing, Sequencing::All);
}

#[test]
fn status_defaults_match_the_crd() {
    let status: SkyhookStatus = serde_json::from_value(json!({})).unwrap();
    assert_eq!(status, SkyhookStatus::default());
    assert_eq!(status.complete_nodes, "0/0");
    assert_eq!(status.nodes_in_progress, 0);
    assert_eq!(status.package_list, "");
    assert_eq!(BatchState::initial().current_batch, 1);
    assert_eq!(
        serde_json::to_value(BatchState::initial()).unwrap(),
        json!({"currentBatch": 1}),
        "zero counters are omitted like Go's omitempty"
    );
}

#[test]
fn pause_and_disable_come_from_annotations() {
    let cases = [
        (json!(null), false, false),
        (json!({}), false, false),
        (json!({"skyhook.nvidia.com/pause": "true"}), true, false),
        (json!({"skyhook.nvidia.com/disable": "true"}), false, true),
        (
            json!({"skyhook.nvidia.com/pause": "true", "skyhook.nvidia.com/disable": "true"}),
            true,
            true,
        ),
        (json!({"skyhook.nvidia.com/pause": "false"}), false, false),
        (json!({"skyhook.nvidia.com/pause": "yes"}), false, false),
        (json!({"skyhook.nvidia.com/paused": "true"}), false, false),
    ];
    for (annotations, paused, disabled) in cases {
        let mut manifest = minimal();
        manifest["metadata"]["annotations"] = annotations.clone();
        let sky = skyhook(manifest);
        assert_eq!(
            (sky.is_paused(), sky.is_disabled()),
            (paused, disabled),
            "{annotations}"
        );
    }
    let mut manifest = minimal();
    manifest["spec"]["pause"] = json!(true);
    assert!(
        !skyhook(manifest).is_paused(),
        "spec.pause is deprecated and ignored"
    );
    assert_eq!(keys::SKYHOOK.pause_annotation, "skyhook.nvidia.com/pause");
}

#[test]
fn strategy_getters_apply_defaults() {
    let empty_fixed = DeploymentStrategy {
        fixed: Some(FixedStrategy::default()),
        ..Default::default()
    };
    let empty_linear = DeploymentStrategy {
        linear: Some(LinearStrategy::default()),
        ..Default::default()
    };
    let empty_exponential = DeploymentStrategy {
        exponential: Some(ExponentialStrategy::default()),
        ..Default::default()
    };
    for strategy in [
        &empty_fixed,
        &empty_linear,
        &empty_exponential,
        &DeploymentStrategy::default(),
    ] {
        assert_eq!(strategy.initial_batch(), 1);
        assert_eq!(strategy.batch_threshold(), 100);
        assert_eq!(strategy.safety_limit(), 50);
        assert_eq!(strategy.failure_threshold(), None, "unset means never stop");
    }
    assert_eq!(LinearStrategy::default().delta(), 1);
    assert_eq!(ExponentialStrategy::default().growth_factor(), 2);

    let set = DeploymentStrategy {
        linear: Some(LinearStrategy {
            initial_batch: Some(3),
            batch_threshold: Some(80),
            failure_threshold: Some(2),
            safety_limit: Some(30),
            delta: Some(4),
        }),
        ..Default::default()
    };
    assert_eq!(
        (
            set.initial_batch(),
            set.batch_threshold(),
            set.failure_threshold(),
            set.safety_limit()
        ),
        (3, 80, Some(2), 30)
    );
    assert_eq!(set.linear.as_ref().unwrap().delta(), 4);
    let exponential = ExponentialStrategy {
        growth_factor: Some(5),
        ..Default::default()
    };
    assert_eq!(exponential.growth_factor(), 5);
}

#[test]
fn strategy_kind_and_its_safety_order() {
    let cases = [
        (
            DeploymentStrategy {
                fixed: Some(FixedStrategy::default()),
                ..Default::default()
            },
            StrategyKind::Fixed,
            1,
        ),
        (
            DeploymentStrategy {
                linear: Some(LinearStrategy::default()),
                ..Default::default()
            },
            StrategyKind::Linear,
            1,
        ),
        (
            DeploymentStrategy {
                exponential: Some(ExponentialStrategy::default()),
                ..Default::default()
            },
            StrategyKind::Exponential,
            1,
        ),
        (DeploymentStrategy::default(), StrategyKind::Unknown, 0),
        (
            DeploymentStrategy {
                linear: Some(LinearStrategy::default()),
                exponential: Some(ExponentialStrategy::default()),
                ..Default::default()
            },
            StrategyKind::Linear,
            2,
        ),
    ];
    for (strategy, kind, count) in cases {
        assert_eq!(
            (strategy.kind(), strategy.count_set()),
            (kind, count),
            "{strategy:?}"
        );
    }
    assert!(StrategyKind::Fixed < StrategyKind::Linear);
    assert!(StrategyKind::Linear < StrategyKind::Exponential);
    assert!(StrategyKind::Exponential < StrategyKind::Unknown);
    let labels: Vec<String> = [
        StrategyKind::Fixed,
        StrategyKind::Linear,
        StrategyKind::Exponential,
        StrategyKind::Unknown,
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(labels, ["fixed", "linear", "exponential", "unknown"]);
}

#[test]
fn policy_defaults_and_compartment_strategy_lookup() {
    let policy: DeploymentPolicy = serde_json::from_value(json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": "p"},
        "spec": {
            "default": {"budget": {"percent": 25}, "strategy": {"fixed": {}}},
            "compartments": [
                {"name": "gpu", "selector": {"matchLabels": {"gpu": "true"}}, "budget": {"count": 2},
                 "strategy": {"linear": {"delta": 2}}},
                {"name": "cpu", "selector": {"matchLabels": {"cpu": "true"}}, "budget": {"count": 1}}
            ]
        }
    }))
    .unwrap();
    let spec: &DeploymentPolicySpec = &policy.spec;
    assert!(spec.reset_batch_state_on_completion, "CRD default is true");
    assert_eq!(
        spec.compartments[0]
            .strategy
            .as_ref()
            .map(DeploymentStrategy::kind),
        Some(StrategyKind::Linear)
    );
    assert_eq!(
        spec.compartments[1].strategy, None,
        "no strategy stays absent"
    );
    assert_eq!(spec.default.strategy.kind(), StrategyKind::Fixed);
    assert_eq!(spec.default.budget.percent, Some(25));
}

#[test]
fn interrupt_types_map_to_agent_names_and_rank() {
    let cases = [
        ("reboot", InterruptType::Reboot, "node_restart", 0),
        (
            "restartAllServices",
            InterruptType::RestartAllServices,
            "restart_all_services",
            1,
        ),
        ("service", InterruptType::Service, "service_restart", 2),
        ("noop", InterruptType::Noop, "no_op", 3),
    ];
    for (wire, kind, agent, rank) in cases {
        assert_eq!(InterruptType::from_str(wire), Ok(kind));
        assert_eq!(serde_json::to_value(kind).unwrap(), json!(wire));
        assert_eq!(
            (
                kind.as_str(),
                AgentInterruptType::from(kind).as_str(),
                kind.rank()
            ),
            (wire, agent, rank)
        );
    }
    let error = InterruptType::from_str("restart_all_services")
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "unknown interrupt type \"restart_all_services\": expected one of service, reboot, noop, restartAllServices"
    );
}

/// `as_str`, `Display`, `FromStr` and serde agree on every spelling.
#[test]
fn lifecycle_enums_spell_consistently() {
    fn check<T>(all: &[T], expected: &[&str])
    where
        T: Copy + std::fmt::Debug + PartialEq + std::fmt::Display + FromStr + serde::Serialize,
        <T as FromStr>::Err: std::fmt::Debug,
    {
        let spelled: Vec<String> = all.iter().map(ToString::to_string).collect();
        assert_eq!(spelled, expected);
        for value in all {
            let text = value.to_string();
            assert_eq!(serde_json::to_value(value).unwrap(), json!(text));
            assert_eq!(text.parse::<T>().unwrap(), *value);
        }
    }
    check(
        Stage::ALL,
        &[
            "apply",
            "interrupt",
            "post-interrupt",
            "config",
            "uninstall",
            "upgrade",
            "uninstall-interrupt",
        ],
    );
    check(
        State::ALL,
        &["complete", "in_progress", "skipped", "erroring", "unknown"],
    );
    check(
        Status::ALL,
        &[
            "unknown",
            "complete",
            "blocked",
            "waiting",
            "disabled",
            "paused",
            "in_progress",
            "erroring",
        ],
    );
    assert!(
        "Complete".parse::<State>().is_err(),
        "spellings are case-sensitive"
    );
    assert!("post_interrupt".parse::<Stage>().is_err());
}

#[test]
fn optional_fields_are_omitted_when_unset() {
    let package = Package {
        name: "p".into(),
        version: "1".into(),
        image: "i".into(),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&package).unwrap(),
        json!({"name": "p", "version": "1", "image": "i"})
    );
    assert!(!PackageResources::default().any_set());
    let resources: PackageResources =
        serde_json::from_value(json!({"memoryLimit": "1Gi"})).unwrap();
    assert!(resources.any_set());
    assert_eq!(
        serde_json::to_value(&resources).unwrap(),
        json!({"memoryLimit": "1Gi"})
    );
}

#[test]
fn status_round_trips_with_node_state_and_conditions() {
    let status = json!({
        "observedGeneration": 3,
        "nodeState": {"node-1": {"tuning|1.1.0": {"name": "tuning", "version": "1.1.0", "image": "i", "stage": "config", "state": "complete"}}},
        "nodeStatus": {"node-1": "complete"},
        "status": "complete",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Complete", "message": "1/1 nodes complete", "lastTransitionTime": "2025-01-02T03:04:05Z"}],
        "nodeBootIds": {"node-1": "abc"},
        "nodePriority": {"node-1": "2025-01-02T03:04:05Z"},
        "configUpdates": {"tuning": ["apply.sh"]},
        "compartmentStatuses": {"__default__": {"matched": 1, "ceiling": 1, "inProgress": 0, "completed": 1, "progressPercent": 100, "batchState": {"currentBatch": 2, "completedNodes": 1, "lastBatchSize": 1}}},
        "nodesInProgress": 0,
        "completeNodes": "1/1",
        "packageList": "tuning:1.1.0"
    });
    let typed: SkyhookStatus = serde_json::from_value(status.clone()).unwrap();
    assert_eq!(
        typed.node_state["node-1"]
            .get_version("tuning", "1.1.0")
            .map(|s| s.stage),
        Some(Stage::Config)
    );
    assert_eq!(typed.status, Some(Status::Complete));
    assert_eq!(serde_json::to_value(&typed).unwrap(), status);
}

/// A Skyhook's target nodes: no or an empty `nodeSelectors` selects every node (upstream), a
/// selector selects its matches, and a selector that does not parse selects none.
#[test]
fn target_selector_table() {
    let gpu = BTreeMap::from([("gpu".to_owned(), "true".to_owned())]);
    let plain = BTreeMap::new();
    let cases = [
        (json!(null), true, true),
        (json!({}), true, true),
        (json!({"matchLabels": {"gpu": "true"}}), true, false),
        (json!({"matchLabels": {"bad key!": "x"}}), false, false),
    ];
    for (selector, selects_gpu, selects_plain) in cases {
        let mut manifest = minimal();
        manifest["spec"]["nodeSelectors"] = selector.clone();
        let target = skyhook(manifest).spec.target_selector();
        assert_eq!(target.matches(&gpu), selects_gpu, "{selector}");
        assert_eq!(target.matches(&plain), selects_plain, "{selector}");
    }
}

/// An absent and an empty `deploymentPolicy` both mean "no policy".
#[test]
fn policy_name_table() {
    let cases = [
        (json!(null), None),
        (json!(""), None),
        (json!("tiers"), Some("tiers")),
    ];
    for (policy, want) in cases {
        let mut manifest = minimal();
        manifest["spec"]["deploymentPolicy"] = policy.clone();
        assert_eq!(skyhook(manifest).spec.policy_name(), want, "{policy}");
    }
}
