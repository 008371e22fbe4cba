//! Ordering between Skyhooks: priority, then name, gated per node (or globally with
//! `sequencing: all`).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::v1alpha1::Sequencing;

/// What the ordering rules need to know about one Skyhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkyhookProgress<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// `spec.priority`.
    pub priority: i32,
    /// Whether it is disabled (a disabled Skyhook never blocks; a paused one does).
    pub disabled: bool,
    /// `spec.sequencing`: how it gates the Skyhooks after it.
    pub sequencing: Sequencing,
    /// Every node it targets → whether it is complete on that node.
    pub nodes: BTreeMap<&'a str, bool>,
}

impl SkyhookProgress<'_> {
    /// Complete on every node it targets (trivially so with no node).
    pub fn complete_everywhere(&self) -> bool {
        self.nodes.values().all(|complete| *complete)
    }
}

/// The global order: priority ascending, then name ascending.
pub fn priority_order(a: (i32, &str), b: (i32, &str)) -> Ordering {
    a.cmp(&b)
}

/// Sorts Skyhooks into the global order.
pub fn sort_by_priority(skyhooks: &mut [SkyhookProgress<'_>]) {
    skyhooks.sort_by(|a, b| priority_order((a.priority, a.name), (b.priority, b.name)));
}

/// Whether `node` is ready for the Skyhook `target`: every non-disabled Skyhook before it in
/// the global order is done. A predecessor with `sequencing: node` (the default) must be
/// complete on this node if it targets it; one with `sequencing: all` must be complete on every
/// node it targets, whichever node asks. Paused predecessors are incomplete and so block.
/// Nodes do not wait for each other under `node` sequencing.
pub fn node_ready(all: &[SkyhookProgress<'_>], target: &SkyhookProgress<'_>, node: &str) -> bool {
    all.iter()
        .filter(|other| !other.disabled)
        .filter(|other| {
            priority_order((other.priority, other.name), (target.priority, target.name)).is_lt()
        })
        .all(|other| match other.sequencing {
            Sequencing::Node => other.nodes.get(node).is_none_or(|complete| *complete),
            Sequencing::All => other.complete_everywhere(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skyhook<'a>(name: &'a str, priority: i32, nodes: &[(&'a str, bool)]) -> SkyhookProgress<'a> {
        SkyhookProgress {
            name,
            priority,
            disabled: false,
            sequencing: Sequencing::Node,
            nodes: nodes.iter().copied().collect(),
        }
    }

    #[test]
    fn global_order_is_priority_then_name() {
        let mut list = vec![
            skyhook("c", 2, &[]),
            skyhook("zzz", 1, &[]),
            skyhook("b", 2, &[]),
            skyhook("a", 200, &[]),
            skyhook("d", 2, &[]),
        ];
        sort_by_priority(&mut list);
        let names: Vec<_> = list.iter().map(|s| s.name).collect();
        assert_eq!(names, ["zzz", "b", "c", "d", "a"]);
    }

    #[test]
    fn strict_order_scenario() {
        // strict-order e2e: zzz (1) complete on worker, blocked on worker2; b (2, paused)
        // incomplete; c (2); d (2, disabled).
        let zzz = skyhook("zzz", 1, &[("worker", true), ("worker2", false)]);
        let b = skyhook("b", 2, &[("worker", false), ("worker2", false)]);
        let c = skyhook("c", 2, &[("worker", false), ("worker2", false)]);
        let mut d = skyhook("d", 2, &[("worker", false), ("worker2", false)]);
        d.disabled = true;
        let e = skyhook("e", 3, &[("worker", false)]);
        let all = [zzz.clone(), b.clone(), c.clone(), d.clone(), e.clone()];

        assert!(node_ready(&all, &zzz, "worker2"));
        assert!(node_ready(&all, &b, "worker"), "zzz is complete on worker");
        assert!(
            !node_ready(&all, &b, "worker2"),
            "zzz is incomplete on worker2"
        );
        assert!(!node_ready(&all, &c, "worker"), "paused b still blocks c");
        assert!(
            !node_ready(&all, &e, "worker"),
            "d is disabled and never blocks, but b and c do"
        );

        // Once b and c complete on worker, e can start there; d being disabled does not block.
        let b_done = skyhook("b", 2, &[("worker", true), ("worker2", false)]);
        let c_done = skyhook("c", 2, &[("worker", true), ("worker2", false)]);
        let all = [zzz, b_done, c_done, d, e.clone()];
        assert!(node_ready(&all, &e, "worker"));
    }

    #[test]
    fn predecessors_not_targeting_the_node_do_not_block() {
        let first = skyhook("first", 1, &[("other", false)]);
        let second = skyhook("second", 2, &[("n", false)]);
        assert!(node_ready(&[first, second.clone()], &second, "n"));
    }

    #[test]
    fn same_priority_uses_name_order() {
        let a = skyhook("a", 5, &[("n", false)]);
        let b = skyhook("b", 5, &[("n", false)]);
        let all = [a.clone(), b.clone()];
        assert!(node_ready(&all, &a, "n"));
        assert!(!node_ready(&all, &b, "n"));
    }

    #[test]
    fn sequencing_all_gates_globally() {
        let mut first = skyhook("first", 1, &[("n1", true), ("n2", false)]);
        first.sequencing = Sequencing::All;
        let second = skyhook("second", 2, &[("n1", false), ("n3", false)]);
        let all = [first.clone(), second.clone()];
        assert!(
            !node_ready(&all, &second, "n1"),
            "first is not complete on n2"
        );
        assert!(
            !node_ready(&all, &second, "n3"),
            "even nodes first does not target wait"
        );
        first.nodes.insert("n2", true);
        assert!(node_ready(&[first.clone(), second.clone()], &second, "n3"));
        // A first with no nodes is complete everywhere.
        let mut empty = skyhook("empty", 1, &[]);
        empty.sequencing = Sequencing::All;
        assert!(node_ready(&[empty, second.clone()], &second, "n1"));
    }
}
