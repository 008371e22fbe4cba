//! DeploymentPolicy rollouts (spec §6.2): compartments, overlap resolution, batch state.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use skyhook_api::generation::Group;
use skyhook_api::v1alpha1::{
    Compartment, DeploymentPolicySpec, DeploymentStrategy, ExponentialStrategy, FixedStrategy,
    PolicyBudget, PolicyDefault, Status,
};

use super::sim::{Sim, node, package, skyhook};

fn selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        match_expressions: None,
    }
}

fn compartment(
    name: &str,
    labels: &[(&str, &str)],
    count: i32,
    strategy: DeploymentStrategy,
) -> Compartment {
    Compartment {
        name: name.into(),
        selector: selector(labels),
        budget: PolicyBudget {
            percent: None,
            count: Some(count),
            topology: None,
        },
        strategy: Some(strategy),
    }
}

fn exponential() -> DeploymentStrategy {
    DeploymentStrategy {
        exponential: Some(ExponentialStrategy::default()),
        ..DeploymentStrategy::default()
    }
}

fn fixed() -> DeploymentStrategy {
    DeploymentStrategy {
        fixed: Some(FixedStrategy::default()),
        ..DeploymentStrategy::default()
    }
}

fn policy(reset: bool) -> DeploymentPolicySpec {
    DeploymentPolicySpec {
        default: PolicyDefault {
            budget: PolicyBudget {
                percent: Some(100),
                count: None,
                topology: None,
            },
            strategy: fixed(),
        },
        compartments: vec![
            compartment("us-west", &[("region", "us-west")], 2, exponential()),
            compartment("production", &[("env", "production")], 2, exponential()),
            compartment(
                "prod-us-west",
                &[("region", "us-west"), ("env", "production")],
                1,
                fixed(),
            ),
        ],
        reset_batch_state_on_completion: reset,
        maintenance_windows: vec![],
        health_gate: None,
    }
}

fn sim(reset: bool) -> Sim {
    let labels: [&[(&str, &str)]; 3] = [
        &[("region", "us-west")],
        &[("env", "production")],
        &[("region", "us-west"), ("env", "production")],
    ];
    let nodes = (0..6)
        .map(|i| {
            let mut n = node(&format!("n{i}"), i);
            for (k, v) in labels[usize::try_from(i).unwrap_or(0) % 3] {
                n.labels.insert(k, v);
            }
            n
        })
        .collect();
    let mut s = skyhook("policy", vec![package("one", "1.0.0")]);
    s.spec.deployment_policy = Some("tiers".into());
    let mut sim = Sim::new(nodes, vec![s]);
    sim.snapshot.policies = BTreeMap::from([((Group::Skyhook, "tiers".to_owned()), policy(reset))]);
    sim
}

#[test]
fn overlapping_selectors_pick_the_safest_compartment_and_start_one_node_each() {
    let mut sim = sim(true);
    sim.step();
    let in_progress: Vec<String> = sim
        .snapshot
        .nodes
        .iter()
        .filter(|n| sim.node_status("policy", &n.name).as_deref() == Some("in_progress"))
        .map(|n| n.name.clone())
        .collect();
    assert_eq!(
        in_progress,
        vec!["n0", "n1", "n2"],
        "one node per compartment"
    );
    let statuses = sim
        .skyhook("policy")
        .status
        .clone()
        .unwrap_or_default()
        .compartment_statuses;
    let shape: Vec<(String, i32, i32)> = statuses
        .iter()
        .map(|(name, s)| (name.clone(), s.matched, s.ceiling))
        .collect();
    assert_eq!(
        shape,
        vec![
            ("__default__".to_owned(), 0, 0),
            ("prod-us-west".to_owned(), 2, 1),
            ("production".to_owned(), 2, 2),
            ("us-west".to_owned(), 2, 2),
        ]
    );
    sim.settle(|_| false);
    sim.run(30);
    assert_eq!(sim.skyhook_status("policy"), Some(Status::Complete));
}

#[test]
fn batch_state_resets_on_completion_only_when_enabled() {
    for (reset, expect_first_batch) in [(true, true), (false, false)] {
        let mut sim = sim(reset);
        sim.run(40);
        assert_eq!(sim.skyhook_status("policy"), Some(Status::Complete));
        let statuses = sim
            .skyhook("policy")
            .status
            .clone()
            .unwrap_or_default()
            .compartment_statuses;
        let batch = statuses
            .get("us-west")
            .and_then(|s| s.batch_state.clone())
            .unwrap_or_default()
            .current_batch;
        assert_eq!(
            batch == 1,
            expect_first_batch,
            "reset {reset}: current batch {batch}"
        );
    }
}

/// `(status, reason)` of `demo`'s condition `type_`.
fn condition_types(sim: &Sim, type_: &str) -> Option<(String, String)> {
    sim.skyhook("demo")
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// A missing policy sets `DeploymentPolicyNotFound` under both types; both go when it returns.
#[test]
fn both_policy_condition_types_come_and_go_with_the_policy() {
    let mut demo = skyhook("demo", vec![package("one", "1.0.0")]);
    demo.spec.deployment_policy = Some("later".into());
    let mut sim = Sim::new(vec![node("a", 0)], vec![demo]);
    sim.step();
    for type_ in [
        "DeploymentPolicyNotFound",
        "skyhook.nvidia.com/DeploymentPolicyNotFound",
    ] {
        let found = condition_types(&sim, type_);
        assert_eq!(
            found,
            Some(("True".to_owned(), "DeploymentPolicyNotFound".to_owned())),
            "{type_}"
        );
    }
    sim.snapshot
        .policies
        .insert((Group::Skyhook, "later".into()), policy(false));
    sim.step();
    for type_ in [
        "DeploymentPolicyNotFound",
        "skyhook.nvidia.com/DeploymentPolicyNotFound",
    ] {
        assert_eq!(condition_types(&sim, type_), None, "{type_}");
    }
}
