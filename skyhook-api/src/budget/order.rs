//! The rollout order of a Skyhook's nodes (`SKYHOOK_NODE_ORDER`): a number that grows across
//! batches, so a package script can tell the first node of a rollout from later ones (a canary
//! step, a leader election, a staggered start).
//!
//! A node's order is `status.nodeOrderOffset` plus its index in `status.nodePriority` sorted by
//! (pick time, name); a node not picked has order 0. When picked nodes leave `nodePriority` (they
//! completed, or left the Skyhook), the offset grows by their number, so the nodes picked later
//! continue the count: two nodes of the first batch get 0 and 1, the offset becomes 2 when they
//! complete, and the next node gets 2.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The order of every picked node: `offset` plus its index in `picked` by (pick time, name). A
/// node missing from the result is not picked and has order 0. One sort for the whole batch, so
/// a plan over thousands of picked nodes does not rank each against all the others.
pub fn node_orders(picked: &BTreeMap<String, Time>, offset: i64) -> BTreeMap<&str, i64> {
    let mut ranked: Vec<(&Time, &str)> = picked
        .iter()
        .map(|(name, at)| (at, name.as_str()))
        .collect();
    ranked.sort_unstable_by(|a, b| (&a.0.0, a.1).cmp(&(&b.0.0, b.1)));
    ranked
        .into_iter()
        .zip(0_i64..)
        .map(|((_, name), index)| (name, offset.saturating_add(index)))
        .collect()
}

/// The offset after `picked_before` became `picked_now`: one more per node that left.
pub fn next_node_order_offset(
    picked_before: &BTreeMap<String, Time>,
    picked_now: &BTreeMap<String, Time>,
    offset: i64,
) -> i64 {
    let left = picked_before
        .keys()
        .filter(|node| !picked_now.contains_key(*node))
        .count();
    offset.saturating_add(i64::try_from(left).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    /// The order of `node` as a pod's `SKYHOOK_NODE_ORDER` gets it.
    fn node_order(picked: &BTreeMap<String, Time>, offset: i64, node: &str) -> i64 {
        node_orders(picked, offset).get(node).copied().unwrap_or(0)
    }

    fn picked(nodes: &[(&str, i64)]) -> BTreeMap<String, Time> {
        nodes
            .iter()
            .map(|(name, second)| {
                let at = Timestamp::from_second(*second).unwrap();
                ((*name).to_owned(), Time(at))
            })
            .collect()
    }

    #[test]
    fn order_is_offset_plus_rank_by_pick_time_then_name() {
        let batch = picked(&[("b", 10), ("a", 10), ("c", 5)]);
        let cases = [
            ("c", 0, 0),
            ("a", 0, 1),
            ("b", 0, 2),
            ("a", 7, 8),
            ("not-picked", 7, 0),
        ];
        for (node, offset, want) in cases {
            assert_eq!(node_order(&batch, offset, node), want, "{node} +{offset}");
        }
    }

    #[test]
    fn nodes_that_leave_the_batch_move_the_offset() {
        let cases = [
            (picked(&[]), picked(&[]), 0, 0),
            (picked(&[("a", 1), ("b", 1)]), picked(&[("b", 1)]), 0, 1),
            (picked(&[("a", 1), ("b", 1)]), picked(&[]), 3, 5),
            (picked(&[("a", 1)]), picked(&[("a", 1), ("c", 2)]), 2, 2),
        ];
        for (before, now, offset, want) in cases {
            assert_eq!(next_node_order_offset(&before, &now, offset), want);
        }
    }

    #[test]
    fn the_next_batch_continues_the_count() {
        let first = picked(&[("n1", 1), ("n2", 1)]);
        assert_eq!(
            [node_order(&first, 0, "n1"), node_order(&first, 0, "n2")],
            [0, 1]
        );
        let second = picked(&[("n3", 9)]);
        let offset = next_node_order_offset(&first, &second, 0);
        assert_eq!(node_order(&second, offset, "n3"), 2);
    }
}
