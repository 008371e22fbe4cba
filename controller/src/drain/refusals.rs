//! Evictions a PodDisruptionBudget refused, per node: upstream v0.20 makes such a refusal a wait
//! state rather than an error. The refused pods are reported (`DrainBlocked`, reason
//! `PodDisruptionBudget`, the API server's message verbatim), and the node's evictions are
//! retried at most every [`RETRY_REFUSED_AFTER`], while other nodes keep going.
//!
//! Contract: plain data, updated by the reconcile loop from what the apply step reports and read
//! by the plan through the snapshot; no clock is read here. Like upstream's timer it lives in
//! memory only: after a restart the first eviction is simply tried again.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use skyhook_api::drain::{BlockReason, BlockedPod};

/// How long a node whose eviction a budget refused waits before its evictions are tried again
/// (upstream's 30 s).
pub const RETRY_REFUSED_AFTER: Duration = Duration::from_secs(30);

/// The outcome of one eviction request, as the apply step reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionOutcome {
    /// The node being drained.
    pub node: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// `Some(message)`: a PodDisruptionBudget refused it (429 with a `DisruptionBudget` cause),
    /// with the API server's message.
    pub refused: Option<String>,
}

/// The refusals of one node's last round of evictions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRefusals {
    /// When the round was refused.
    pub at: Timestamp,
    /// The refused pods, with the API server's message.
    pub pods: Vec<BlockedPod>,
}

/// Per node, the refusals of its last round of evictions. A node whose last round was all
/// accepted has no entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvictionRefusals {
    by_node: BTreeMap<String, NodeRefusals>,
}

impl EvictionRefusals {
    /// Records one apply step's eviction outcomes at `at`: a node with a refused eviction gets
    /// a fresh record of its refused pods, a node whose evictions were all accepted loses its
    /// record. Nodes without outcomes keep theirs.
    pub fn record(&mut self, outcomes: &[EvictionOutcome], at: Timestamp) {
        let mut rounds: BTreeMap<&str, Vec<BlockedPod>> = BTreeMap::new();
        for outcome in outcomes {
            let refused = rounds.entry(outcome.node.as_str()).or_default();
            if let Some(message) = &outcome.refused {
                refused.push(BlockedPod {
                    namespace: outcome.namespace.clone(),
                    name: outcome.name.clone(),
                    reason: BlockReason::PodDisruptionBudget,
                    detail: Some(message.clone()),
                });
            }
        }
        for (node, mut pods) in rounds {
            if pods.is_empty() {
                self.by_node.remove(node);
            } else {
                pods.sort();
                self.by_node
                    .insert(node.to_owned(), NodeRefusals { at, pods });
            }
        }
    }

    /// Keeps only the nodes `draining` says are still being drained.
    pub fn retain(&mut self, mut draining: impl FnMut(&str) -> bool) {
        self.by_node.retain(|node, _| draining(node));
    }

    /// How long `node` still waits before its evictions are tried again; `None` when it may
    /// evict now.
    pub fn wait(&self, node: &str, now: Timestamp) -> Option<Duration> {
        let record = self.by_node.get(node)?;
        let elapsed = Duration::try_from(now.duration_since(record.at)).unwrap_or(Duration::ZERO);
        RETRY_REFUSED_AFTER
            .checked_sub(elapsed)
            .filter(|left| !left.is_zero())
    }

    /// The pods of `node` whose last eviction a budget refused.
    pub fn refused(&self, node: &str) -> &[BlockedPod] {
        self.by_node.get(node).map_or(&[], |r| r.pods.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(node: &str, pod: &str, refused: Option<&str>) -> EvictionOutcome {
        EvictionOutcome {
            node: node.into(),
            namespace: "web".into(),
            name: pod.into(),
            refused: refused.map(str::to_owned),
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("a time")
    }

    #[test]
    fn a_refused_node_waits_thirty_seconds_and_others_go_on() {
        let mut refusals = EvictionRefusals::default();
        refusals.record(
            &[
                outcome(
                    "a",
                    "api-0",
                    Some("Cannot evict pod as it would violate the pod's disruption budget."),
                ),
                outcome("a", "api-1", None),
                outcome("b", "api-2", None),
            ],
            at(0),
        );
        #[rustfmt::skip]
        let cases = [
            ("a", 0, Some(30)),
            ("a", 10, Some(20)),
            ("a", 30, None),
            ("a", 45, None),
            ("b", 0, None),
            ("c", 0, None),
        ];
        for (node, second, expected) in cases {
            assert_eq!(
                refusals.wait(node, at(second)),
                expected.map(Duration::from_secs),
                "{node} at {second}s"
            );
        }
        assert_eq!(refusals.refused("a").len(), 1);
        assert_eq!(refusals.refused("a")[0].name, "api-0");
        assert!(refusals.refused("b").is_empty());
    }

    #[test]
    fn an_accepted_round_clears_the_node_and_a_finished_drain_forgets_it() {
        let mut refusals = EvictionRefusals::default();
        refusals.record(&[outcome("a", "api-0", Some("no"))], at(0));
        refusals.record(&[outcome("b", "api-9", Some("no"))], at(5));
        assert_eq!(refusals.refused("a").len(), 1, "a round elsewhere keeps it");
        refusals.record(&[outcome("a", "api-0", None)], at(31));
        assert!(refusals.refused("a").is_empty());
        assert_eq!(refusals.wait("a", at(31)), None);
        refusals.retain(|node| node != "b");
        assert!(refusals.refused("b").is_empty());
    }
}
