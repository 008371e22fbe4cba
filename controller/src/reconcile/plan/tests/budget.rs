//! The budget invariant: never more nodes of a compartment in progress than its ceiling, over
//! random rollouts. A node whose package failed is `erroring`, not in progress: its batch is
//! over (and counted as failed), its pod stays for the kubelet's retries, and the next batch
//! may start, as upstream's batch evaluation has it; stopping on failures is the policy's
//! `failureThreshold`.

use proptest::prelude::*;
use skyhook_api::v1alpha1::InterruptionBudget;

use super::sim::{Sim, node, package, skyhook};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn never_more_nodes_in_progress_than_the_ceiling(
        nodes in 1usize..7,
        count in 1i32..4,
        packages in 1usize..3,
        failures in proptest::collection::vec(any::<bool>(), 40),
    ) {
        let mut s = skyhook("budget", (0..packages).map(|i| package(&format!("p{i}"), "1.0.0")).collect());
        s.spec.interruption_budget = Some(InterruptionBudget { count: Some(count), percent: None });
        let mut sim = Sim::new((0..nodes).map(|i| node(&format!("n{i}"), i64::try_from(i).unwrap_or(0))).collect(), vec![s]);
        let ceiling = usize::try_from(count).unwrap_or(1).min(nodes);
        for fail in failures {
            sim.step();
            let busy: std::collections::BTreeSet<&str> = sim
                .snapshot
                .pods
                .iter()
                .filter(|p| p.outcome == crate::pod_outcome::PodOutcome::Running)
                .map(|p| p.node.as_str())
                .collect();
            prop_assert!(busy.len() <= ceiling, "{} nodes busy, ceiling {}", busy.len(), ceiling);
            let in_progress = sim.snapshot.nodes.iter().filter(|n| sim.node_status("budget", &n.name).as_deref() == Some("in_progress")).count();
            prop_assert!(in_progress <= ceiling, "{} nodes in progress, ceiling {}", in_progress, ceiling);
            sim.settle(|_| fail);
        }
    }
}
