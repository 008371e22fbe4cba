//! Rollout compartments of one Skyhook and the assignment of its nodes to them.

use std::collections::BTreeMap;

use crate::keys::DEFAULT_COMPARTMENT;
use crate::selector::Selector;
use crate::string_map::StringMap;
use crate::v1alpha1::{
    DeploymentPolicySpec, DeploymentStrategy, FixedStrategy, InterruptionBudget, PolicyBudget,
    SkyhookSpec, StrategyKind,
};

use super::ceiling::{legacy_ceiling, policy_ceiling};

/// One compartment: which nodes (by selector), how many at once (budget) and how batches grow
/// (strategy).
#[derive(Debug, Clone, PartialEq)]
pub struct CompartmentSpec {
    /// Compartment name; [`DEFAULT_COMPARTMENT`] for the catch-all one.
    pub name: String,
    /// The nodes it selects; `None` for the default compartment, which takes every node no
    /// other compartment selects.
    pub selector: Option<Selector>,
    /// Its budget.
    pub budget: PolicyBudget,
    /// Its batch strategy. A policy compartment without one uses its ceiling as the batch size
    /// and counts as the least safe kind when compartments overlap, as upstream does.
    pub strategy: Option<DeploymentStrategy>,
}

impl CompartmentSpec {
    /// The strategy kind, [`StrategyKind::Unknown`] without a strategy.
    pub fn strategy_kind(&self) -> StrategyKind {
        self.strategy
            .as_ref()
            .map_or(StrategyKind::Unknown, DeploymentStrategy::kind)
    }

    /// The ceiling over `matched` nodes.
    pub fn ceiling(&self, matched: usize) -> usize {
        policy_ceiling(&self.budget, matched)
    }

    /// Whether this is the catch-all compartment.
    pub fn is_default(&self) -> bool {
        self.selector.is_none()
    }
}

/// The compartments a Skyhook with spec `spec` rolls out by over `nodes` selected nodes: its
/// DeploymentPolicy's ([`policy_compartments`]) when it names one, else the legacy budget's
/// ([`legacy_compartments`]). `None` when it names a policy and `policy`, the one found by that
/// name, is `None`: nothing rolls out until the policy exists.
pub fn skyhook_compartments(
    spec: &SkyhookSpec,
    policy: Option<&DeploymentPolicySpec>,
    nodes: usize,
) -> Option<Vec<CompartmentSpec>> {
    match (spec.policy_name(), policy) {
        (None, _) => Some(legacy_compartments(
            spec.interruption_budget.as_ref(),
            nodes,
        )),
        (Some(_), Some(policy)) => Some(policy_compartments(policy)),
        (Some(_), None) => None,
    }
}

/// The single `__default__` compartment of a Skyhook without a DeploymentPolicy: a Fixed
/// strategy whose batch is the legacy ceiling over the `nodes` selected nodes.
pub fn legacy_compartments(
    budget: Option<&InterruptionBudget>,
    nodes: usize,
) -> Vec<CompartmentSpec> {
    let ceiling = i32::try_from(legacy_ceiling(budget, nodes)).unwrap_or(i32::MAX);
    vec![CompartmentSpec {
        name: DEFAULT_COMPARTMENT.to_owned(),
        selector: None,
        budget: PolicyBudget {
            percent: None,
            count: Some(ceiling),
            topology: budget.and_then(|b| b.topology.clone()),
        },
        strategy: Some(DeploymentStrategy {
            fixed: Some(FixedStrategy {
                initial_batch: Some(ceiling),
                ..FixedStrategy::default()
            }),
            ..DeploymentStrategy::default()
        }),
    }]
}

/// The compartments of a DeploymentPolicy in policy order, then `__default__` built from
/// `spec.default`. A selector that does not parse (which validation rejects) selects nothing.
pub fn policy_compartments(policy: &DeploymentPolicySpec) -> Vec<CompartmentSpec> {
    policy
        .compartments
        .iter()
        .map(|compartment| CompartmentSpec {
            name: compartment.name.clone(),
            selector: Some(Selector::parse_or_nothing(&compartment.selector)),
            budget: compartment.budget.clone(),
            strategy: compartment.strategy.clone(),
        })
        .chain(std::iter::once(CompartmentSpec {
            name: DEFAULT_COMPARTMENT.to_owned(),
            selector: None,
            budget: policy.default.budget.clone(),
            strategy: Some(policy.default.strategy.clone()),
        }))
        .collect()
}

/// Assigns every node to one compartment, from the nodes' current labels (recomputed on every
/// reconcile). A node no compartment selects goes to `__default__`. A node several select goes
/// to the safest: the smaller [`StrategyKind`] (fixed < linear < exponential < none), then the
/// smaller capacity (the ceiling over all of this Skyhook's nodes the selector matches, at least
/// one), then the smaller name.
///
/// `nodes` are `(name, labels)` of every node the Skyhook selects. Returns node → compartment.
pub fn assign_nodes<'n, 'c>(
    compartments: &'c [CompartmentSpec],
    nodes: &[(&'n str, &dyn StringMap)],
) -> BTreeMap<&'n str, &'c str> {
    let capacity: Vec<usize> = compartments
        .iter()
        .map(|compartment| match &compartment.selector {
            Some(selector) => {
                let matching = nodes
                    .iter()
                    .filter(|(_, labels)| selector.matches(labels))
                    .count();
                compartment.ceiling(matching.max(1))
            }
            None => 0,
        })
        .collect();
    nodes
        .iter()
        .map(|(node, labels)| {
            let chosen = compartments
                .iter()
                .zip(&capacity)
                .filter(|(c, _)| c.selector.as_ref().is_some_and(|s| s.matches(labels)))
                .min_by(|(a, cap_a), (b, cap_b)| {
                    (a.strategy_kind(), cap_a, &a.name).cmp(&(b.strategy_kind(), cap_b, &b.name))
                })
                .map_or(DEFAULT_COMPARTMENT, |(c, _)| c.name.as_str());
            (*node, chosen)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use super::*;
    use crate::test_support::labels;
    use crate::v1alpha1::{Compartment, ExponentialStrategy, LinearStrategy, PolicyDefault};

    fn strategy(kind: StrategyKind) -> Option<DeploymentStrategy> {
        let mut s = DeploymentStrategy::default();
        match kind {
            StrategyKind::Fixed => s.fixed = Some(FixedStrategy::default()),
            StrategyKind::Linear => s.linear = Some(LinearStrategy::default()),
            StrategyKind::Exponential => s.exponential = Some(ExponentialStrategy::default()),
            StrategyKind::Unknown => return None,
        }
        Some(s)
    }

    fn compartment(
        name: &str,
        selector: &[(&str, &str)],
        budget: PolicyBudget,
        kind: StrategyKind,
    ) -> Compartment {
        Compartment {
            name: name.into(),
            selector: LabelSelector {
                match_labels: Some(labels(selector)),
                match_expressions: None,
            },
            budget,
            strategy: strategy(kind),
        }
    }

    fn count(c: i32) -> PolicyBudget {
        PolicyBudget {
            percent: None,
            count: Some(c),
            topology: None,
        }
    }

    fn percent(p: i32) -> PolicyBudget {
        PolicyBudget {
            percent: Some(p),
            count: None,
            topology: None,
        }
    }

    fn policy(compartments: Vec<Compartment>) -> DeploymentPolicySpec {
        DeploymentPolicySpec {
            default: PolicyDefault {
                budget: percent(100),
                strategy: strategy(StrategyKind::Fixed).unwrap(),
            },
            compartments,
            reset_batch_state_on_completion: true,
            maintenance_windows: vec![],
            health_gate: None,
        }
    }

    fn assign(
        policy: &DeploymentPolicySpec,
        nodes: &[(&str, BTreeMap<String, String>)],
    ) -> Vec<String> {
        let compartments = policy_compartments(policy);
        let refs: Vec<(&str, &dyn StringMap)> = nodes
            .iter()
            .map(|(n, l)| (*n, l as &dyn StringMap))
            .collect();
        let assignment = assign_nodes(&compartments, &refs);
        nodes
            .iter()
            .map(|(n, _)| assignment[n].to_owned())
            .collect()
    }

    #[test]
    fn legacy_compartment_is_fixed_with_the_ceiling() {
        let budget = InterruptionBudget {
            percent: None,
            count: Some(3),
            topology: None,
        };
        let compartments = legacy_compartments(Some(&budget), 6);
        assert_eq!(compartments.len(), 1);
        let default = &compartments[0];
        assert_eq!(default.name, "__default__");
        assert!(default.is_default());
        assert_eq!(default.strategy_kind(), StrategyKind::Fixed);
        assert_eq!(default.ceiling(6), 3);
        assert_eq!(default.strategy.as_ref().unwrap().initial_batch(), 3);
        let all = legacy_compartments(None, 15);
        assert_eq!(all[0].ceiling(15), 15);
    }

    #[test]
    fn policy_compartments_end_with_default() {
        let p = policy(vec![compartment(
            "a",
            &[("x", "1")],
            count(1),
            StrategyKind::Linear,
        )]);
        let names: Vec<_> = policy_compartments(&p)
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["a", "__default__"]);
    }

    #[test]
    fn unmatched_nodes_go_to_default() {
        let p = policy(vec![compartment(
            "gpu",
            &[("gpu", "true")],
            count(1),
            StrategyKind::Fixed,
        )]);
        let nodes = [("n1", labels(&[("gpu", "true")])), ("n2", labels(&[]))];
        assert_eq!(assign(&p, &nodes), ["gpu", "__default__"]);
    }

    #[test]
    fn overlap_prefers_the_safer_strategy() {
        // The overlapping-selectors e2e: both-label nodes go to the fixed compartment.
        let p = policy(vec![
            compartment(
                "us-west",
                &[("region", "us-west")],
                count(2),
                StrategyKind::Exponential,
            ),
            compartment(
                "production",
                &[("env", "production")],
                count(2),
                StrategyKind::Exponential,
            ),
            compartment(
                "prod-us-west",
                &[("region", "us-west"), ("env", "production")],
                count(1),
                StrategyKind::Fixed,
            ),
        ]);
        let nodes = [
            ("w1", labels(&[("region", "us-west")])),
            ("w2", labels(&[("region", "us-west")])),
            ("p1", labels(&[("env", "production")])),
            ("p2", labels(&[("env", "production")])),
            (
                "b1",
                labels(&[("region", "us-west"), ("env", "production")]),
            ),
            (
                "b2",
                labels(&[("region", "us-west"), ("env", "production")]),
            ),
        ];
        assert_eq!(
            assign(&p, &nodes),
            [
                "us-west",
                "us-west",
                "production",
                "production",
                "prod-us-west",
                "prod-us-west"
            ]
        );
        for (a, b) in [
            (StrategyKind::Fixed, StrategyKind::Linear),
            (StrategyKind::Linear, StrategyKind::Exponential),
            (StrategyKind::Exponential, StrategyKind::Unknown),
        ] {
            let p = policy(vec![
                compartment("zz-safer", &[("a", "1")], count(5), a),
                compartment("aa-riskier", &[("b", "1")], count(1), b),
            ]);
            let nodes = [("n", labels(&[("a", "1"), ("b", "1")]))];
            assert_eq!(assign(&p, &nodes), ["zz-safer"], "{a} vs {b}");
        }
    }

    #[test]
    fn overlap_then_smaller_capacity_then_name() {
        // Same strategy: count 1 beats count 3.
        let p = policy(vec![
            compartment("a", &[("a", "1")], count(3), StrategyKind::Linear),
            compartment("b", &[("b", "1")], count(1), StrategyKind::Linear),
        ]);
        let nodes = [("n", labels(&[("a", "1"), ("b", "1")]))];
        assert_eq!(assign(&p, &nodes), ["b"]);

        // Percent capacity is over every node the selector matches: 50% of 4 = 2 vs 50% of 1 = 1.
        let p = policy(vec![
            compartment("wide", &[("a", "1")], percent(50), StrategyKind::Fixed),
            compartment("narrow", &[("b", "1")], percent(50), StrategyKind::Fixed),
        ]);
        let nodes = [
            ("n", labels(&[("a", "1"), ("b", "1")])),
            ("x", labels(&[("a", "1")])),
            ("y", labels(&[("a", "1")])),
            ("z", labels(&[("a", "1")])),
        ];
        assert_eq!(assign(&p, &nodes), ["narrow", "wide", "wide", "wide"]);

        // Percent vs count with equal capacity: name decides.
        let p = policy(vec![
            compartment("beta", &[("a", "1")], percent(50), StrategyKind::Fixed),
            compartment("alpha", &[("b", "1")], count(1), StrategyKind::Fixed),
        ]);
        let nodes = [
            ("n", labels(&[("a", "1"), ("b", "1")])),
            ("m", labels(&[("a", "1")])),
        ];
        assert_eq!(assign(&p, &nodes), ["alpha", "beta"]);
    }

    #[test]
    fn assignment_follows_current_labels() {
        let p = policy(vec![compartment(
            "gpu",
            &[("gpu", "true")],
            count(1),
            StrategyKind::Fixed,
        )]);
        assert_eq!(assign(&p, &[("n", labels(&[("gpu", "true")]))]), ["gpu"]);
        assert_eq!(
            assign(&p, &[("n", labels(&[("gpu", "false")]))]),
            ["__default__"]
        );
    }
}
