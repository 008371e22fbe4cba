//! Picking the nodes a compartment works on.
//!
//! A compartment's *current batch* is every incomplete node that holds a budget slot (see
//! [`super::slot`]) and has not failed, plus every eligible, incomplete node that is either
//! `in_progress` or was already picked (it is in `status.nodePriority`) and has not failed
//! (`erroring`). Picked nodes are sticky: they stay in the batch until they complete and are
//! always served before new nodes, including while another node of the compartment is in
//! progress (upstream starved them: nodewright #587). A picked node that became ineligible
//! (ignored or carrying a taint it does not tolerate) while holding no slot is skipped and
//! reported blocked instead of holding the batch (nodewright #586); one that holds a slot (a
//! rebooting node tainted `not-ready`) keeps it and its status. A new batch starts only when
//! the current one is empty. Never more nodes hold a slot than the ceiling allows: a node
//! that would take a new slot is picked only while one is free.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::jiff::Timestamp;

use crate::string_map::StringMap;
use crate::toleration::intolerable_taints;
use crate::v1alpha1::{BatchState, DeploymentStrategy, Status, TopologyBudget};

use super::batch::next_batch_size;
use super::slot::SlotHold;
use super::topology::{DomainUse, refuses_unlabelled};

/// One node of a compartment, as the selection sees it.
#[derive(Debug, Clone, Copy)]
pub struct CandidateNode<'a> {
    /// Node name.
    pub name: &'a str,
    /// `metadata.creationTimestamp`; older nodes go first.
    pub created: Option<Timestamp>,
    /// Node labels (for the ignore label).
    pub labels: &'a dyn StringMap,
    /// Node taints.
    pub taints: &'a [Taint],
    /// The node's current status for this Skyhook.
    pub status: Status,
    /// Whether every package of the Skyhook is complete on the node.
    pub complete: bool,
    /// Whether the node is ready for this Skyhook by priority order (see
    /// [`crate::ordering`]). A node that is not ready is never picked, but a node already in
    /// the batch keeps its slot while it waits.
    pub ready: bool,
    /// Whether the node is in `status.nodePriority` (picked by an earlier batch).
    pub picked: bool,
    /// Why the node holds a budget slot whatever its eligibility (see
    /// [`super::slot::slot_hold`]).
    pub hold: Option<SlotHold>,
}

/// Why a node cannot be worked on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockReason {
    /// The node carries `skyhook.nvidia.com/ignore=true`.
    Ignored,
    /// The node has taints the Skyhook does not tolerate, written as `kubectl taint` does
    /// (`key=value:Effect` or `key:Effect`), sorted.
    IntolerableTaints(Vec<String>),
    /// The node lacks the label of its budget's `topology` (named here), which does not
    /// `allowUnlabelled`.
    NoTopologyLabel(String),
}

/// A node to mark `blocked`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedNode<'a> {
    /// Node name.
    pub name: &'a str,
    /// Why.
    pub reason: BlockReason,
}

/// The result of selecting nodes in one compartment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection<'a> {
    /// Nodes to work on now, in processing order: the current batch, or a new batch.
    pub picks: Vec<&'a str>,
    /// The picks not yet in `status.nodePriority`: record them with the current time.
    pub newly_picked: Vec<&'a str>,
    /// Incomplete nodes that are ready but ineligible: set their status to `blocked`.
    pub blocked: Vec<BlockedNode<'a>>,
    /// Whether `picks` is a new batch (rather than the continuation of the current one).
    pub new_batch: bool,
    /// A new batch was due and had nodes to take, but the compartment may not start one now
    /// (a closed maintenance window, a health gate): nothing was picked.
    pub held: bool,
    /// Nodes that would have taken a free slot but for their budget's `topology` (their domain
    /// is full, or too many domains are disrupted), in selection order.
    pub topology_waiting: Vec<&'a str>,
    /// With a `topology`, the disrupted domains and their node counts once the picks start.
    pub domains: BTreeMap<&'a str, usize>,
}

/// Whether a node is ignored or intolerable, given the toleration set of the Skyhook (see
/// [`crate::toleration::node_selection_tolerations`]).
pub fn block_reason(
    labels: &dyn StringMap,
    taints: &[Taint],
    tolerations: &[Toleration],
) -> Option<BlockReason> {
    if crate::node_keys::ignored(labels) {
        return Some(BlockReason::Ignored);
    }
    let mut intolerable: Vec<String> = intolerable_taints(tolerations, taints)
        .into_iter()
        .map(|t| match t.value.as_deref().filter(|v| !v.is_empty()) {
            Some(value) => format!("{}={value}:{}", t.key, t.effect),
            None => format!("{}:{}", t.key, t.effect),
        })
        .collect();
    if intolerable.is_empty() {
        None
    } else {
        intolerable.sort();
        Some(BlockReason::IntolerableTaints(intolerable))
    }
}

/// The nodes of one compartment, classified once so that selection and batch evaluation agree
/// on what the current batch is.
#[derive(Debug, Clone)]
pub struct CompartmentNodes<'a> {
    /// Nodes ordered by creation time, then name.
    nodes: Vec<CandidateNode<'a>>,
    /// Parallel to `nodes`: why each is ineligible, if it is.
    blocked: Vec<Option<BlockReason>>,
    /// Parallel to `nodes`: whether each holds a budget slot.
    holds: Vec<bool>,
    /// The compartment budget's failure domains, when it has them.
    topology: Option<TopologyBudget>,
}

/// Whether an incomplete node holds a budget slot: by what it does on the node
/// ([`super::slot`]), or, while eligible, by being in progress (it is being worked on even
/// between two pods).
fn holds_slot(node: &CandidateNode<'_>, blocked: Option<&BlockReason>) -> bool {
    !node.complete
        && (node.hold.is_some() || (blocked.is_none() && node.status == Status::InProgress))
}

/// New batches take nodes in this status order, then by creation time.
fn pick_rank(status: Status) -> Option<u8> {
    match status {
        Status::Waiting => Some(0),
        Status::Unknown => Some(1),
        Status::Blocked => Some(2),
        Status::Erroring => Some(3),
        _ => None,
    }
}

/// One node with its classification.
#[derive(Debug, Clone, Copy)]
struct Classified<'n, 'a> {
    node: &'n CandidateNode<'a>,
    eligible: bool,
    holds: bool,
}

impl<'a> CompartmentNodes<'a> {
    /// Classifies `nodes` with the Skyhook's toleration set.
    pub fn new(mut nodes: Vec<CandidateNode<'a>>, tolerations: &[Toleration]) -> Self {
        nodes.sort_by(|a, b| (a.created, a.name).cmp(&(b.created, b.name)));
        let blocked: Vec<Option<BlockReason>> = nodes
            .iter()
            .map(|n| block_reason(n.labels, n.taints, tolerations))
            .collect();
        let holds = nodes
            .iter()
            .zip(&blocked)
            .map(|(n, reason)| holds_slot(n, reason.as_ref()))
            .collect();
        CompartmentNodes {
            nodes,
            blocked,
            holds,
            topology: None,
        }
    }

    /// The same nodes under a budget with `topology`: a node without its label that is not
    /// allowed becomes ineligible ([`BlockReason::NoTopologyLabel`]), and selection keeps to
    /// the domain limits ([`super::topology`]).
    pub fn with_topology(mut self, topology: Option<&TopologyBudget>) -> Self {
        let Some(topology) = topology else {
            return self;
        };
        for (node, reason) in self.nodes.iter().zip(self.blocked.iter_mut()) {
            if reason.is_none() && refuses_unlabelled(node.labels, topology) {
                *reason = Some(BlockReason::NoTopologyLabel(topology.key.clone()));
            }
        }
        for ((node, reason), holds) in self.nodes.iter().zip(&self.blocked).zip(&mut self.holds) {
            *holds = holds_slot(node, reason.as_ref());
        }
        self.topology = Some(topology.clone());
        self
    }

    fn classified(&self) -> impl Iterator<Item = Classified<'_, 'a>> {
        self.nodes
            .iter()
            .zip(&self.blocked)
            .zip(&self.holds)
            .map(|((node, reason), holds)| Classified {
                node,
                eligible: reason.is_none(),
                holds: *holds,
            })
    }

    /// Number of nodes holding a budget slot (see [`super::slot`]).
    pub fn holding(&self) -> usize {
        self.holds.iter().filter(|h| **h).count()
    }

    /// The current batch: incomplete nodes that have not failed and either hold a budget slot
    /// or are eligible and in progress or picked. Slot holders first, then in progress, then
    /// by pick-rank and creation time.
    fn current_batch(&self) -> Vec<Classified<'_, 'a>> {
        let mut batch: Vec<Classified<'_, 'a>> = self
            .classified()
            .filter(|c| !c.node.complete && c.node.status != Status::Erroring)
            .filter(|c| {
                c.holds || (c.eligible && (c.node.status == Status::InProgress || c.node.picked))
            })
            .collect();
        batch.sort_by_key(|c| {
            (
                !c.holds,
                c.node.status != Status::InProgress,
                pick_rank(c.node.status),
            )
        });
        batch
    }

    /// Whether the current batch still has work: a batch is finished (and can be evaluated)
    /// only when none of its nodes is in progress or still waiting for its next package.
    pub fn batch_open(&self) -> bool {
        !self.current_batch().is_empty()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the compartment has no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Number of complete nodes.
    pub fn complete(&self) -> usize {
        self.nodes.iter().filter(|n| n.complete).count()
    }

    /// Number of incomplete nodes with status `erroring`.
    pub fn erroring(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| !n.complete && n.status == Status::Erroring)
            .count()
    }

    /// Number of nodes with status `in_progress`.
    pub fn in_progress(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.status == Status::InProgress)
            .count()
    }

    /// Selects the nodes to work on now.
    ///
    /// - `shouldStop` set → nothing is picked, not even the current batch.
    /// - A current batch exists → it continues: its slot holders (at most `ceiling` of them),
    ///   then its other nodes while a slot is free; nodes not ready by priority keep their
    ///   place without being picked, and ineligible slot holders are not advanced.
    /// - Otherwise a new batch of [`next_batch_size`] nodes (already capped by the ceiling) is
    ///   filled from ready, eligible, incomplete nodes in status order waiting, unknown,
    ///   blocked, erroring, then creation time, while a slot is free: nodes that still hold
    ///   one (a failed node left cordoned) leave fewer for the new batch.
    ///
    /// Ready, incomplete, ineligible nodes that hold no slot are reported in `blocked`.
    pub fn select(
        &self,
        strategy: Option<&DeploymentStrategy>,
        state: &BatchState,
        ceiling: usize,
    ) -> Selection<'a> {
        self.select_gated(strategy, state, ceiling, true)
    }

    /// [`CompartmentNodes::select`], where a new batch starts only when `may_start`: the
    /// current batch always continues (its nodes finish), but a compartment whose gate is
    /// closed picks nothing new and reports the batch it held back in [`Selection::held`].
    pub fn select_gated(
        &self,
        strategy: Option<&DeploymentStrategy>,
        state: &BatchState,
        ceiling: usize,
        may_start: bool,
    ) -> Selection<'a> {
        let blocked = self
            .classified()
            .zip(&self.blocked)
            .filter(|(c, _)| c.node.ready && !c.node.complete && !c.holds)
            .filter_map(|(c, reason)| {
                reason.clone().map(|reason| BlockedNode {
                    name: c.node.name,
                    reason,
                })
            })
            .collect();
        let mut selection = Selection {
            blocked,
            ..Selection::default()
        };
        if state.should_stop {
            return selection;
        }
        // Slots not held by any node: each node that starts holding one takes one, if its
        // failure domain has room.
        let mut free = ceiling.saturating_sub(self.holding());
        let mut domains = self.topology.as_ref().map(|topology| {
            let holders = self.classified().filter(|c| c.holds).map(|c| c.node.labels);
            DomainUse::new(topology, holders)
        });
        let mut topology_waiting = Vec::new();
        let mut take_slot = |c: &Classified<'_, 'a>| {
            if c.holds {
                return true;
            }
            if free == 0 {
                return false;
            }
            if let Some(domains) = domains.as_mut()
                && !domains.admit(c.node.labels)
            {
                topology_waiting.push(c.node.name);
                return false;
            }
            free -= 1;
            true
        };
        let current = self.current_batch();
        let chosen: Vec<&CandidateNode<'a>> = if current.is_empty() {
            selection.new_batch = true;
            let size = next_batch_size(strategy, state, self.len(), ceiling);
            let mut candidates: Vec<(u8, Classified<'_, 'a>)> = self
                .classified()
                .filter(|c| c.eligible && !c.node.complete && c.node.ready)
                .filter_map(|c| pick_rank(c.node.status).map(|rank| (rank, c)))
                .collect();
            // Stable: equal ranks keep creation order.
            candidates.sort_by_key(|(rank, _)| *rank);
            candidates
                .into_iter()
                .map(|(_, c)| c)
                .filter(|c| take_slot(c))
                .take(size)
                .map(|c| c.node)
                .collect()
        } else {
            // Slot holders come first; when the ceiling shrank under them, only `ceiling` of
            // them advance.
            let mut holders = 0usize;
            current
                .into_iter()
                .filter(|c| {
                    if c.holds {
                        holders += 1;
                        holders <= ceiling
                    } else {
                        take_slot(c)
                    }
                })
                .filter(|c| c.eligible && c.node.ready)
                .map(|c| c.node)
                .collect()
        };
        if selection.new_batch && !may_start {
            selection.new_batch = false;
            selection.held = !chosen.is_empty();
            return selection;
        }
        selection.topology_waiting = topology_waiting;
        selection.domains = domains.map(|d| d.busy().clone()).unwrap_or_default();
        selection.picks = chosen.iter().map(|n| n.name).collect();
        selection.newly_picked = chosen
            .iter()
            .filter(|n| !n.picked)
            .map(|n| n.name)
            .collect();
        selection
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::keys::{NODEWRIGHT, SKYHOOK};
    use crate::test_support::fixed;
    use crate::toleration::node_selection_tolerations;

    struct Node {
        name: &'static str,
        status: Status,
        complete: bool,
        picked: bool,
        ready: bool,
        labels: BTreeMap<String, String>,
        taints: Vec<Taint>,
        hold: Option<SlotHold>,
    }

    fn node(name: &'static str, status: Status) -> Node {
        Node {
            name,
            status,
            complete: status == Status::Complete,
            picked: false,
            ready: true,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            hold: None,
        }
    }

    impl Node {
        fn picked(mut self) -> Self {
            self.picked = true;
            self
        }
        fn not_ready(mut self) -> Self {
            self.ready = false;
            self
        }
        fn ignored(mut self) -> Self {
            self.labels
                .insert(SKYHOOK.ignore_label.into(), "true".into());
            self
        }
        fn holding(mut self, hold: SlotHold) -> Self {
            self.hold = Some(hold);
            self
        }
        fn in_rack(mut self, rack: &str) -> Self {
            self.labels.insert("rack".into(), rack.into());
            self
        }
        fn tainted(mut self, key: &str) -> Self {
            self.taints.push(Taint {
                key: key.into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            });
            self
        }
    }

    /// Nodes are created one second apart in the order given.
    fn compartment(nodes: &[Node]) -> CompartmentNodes<'_> {
        let candidates = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| CandidateNode {
                name: n.name,
                created: Timestamp::from_second(1_700_000_000 + i64::try_from(i).unwrap()).ok(),
                labels: &n.labels,
                taints: &n.taints,
                status: n.status,
                complete: n.complete,
                ready: n.ready,
                picked: n.picked,
                hold: n.hold,
            })
            .collect();
        CompartmentNodes::new(candidates, &node_selection_tolerations(&[], None))
    }

    fn select<'a>(c: &CompartmentNodes<'a>, initial: i32, ceiling: usize) -> Selection<'a> {
        c.select(Some(&fixed(initial)), &BatchState::initial(), ceiling)
    }

    use Status::*;

    #[test]
    fn new_batch_order_waiting_unknown_blocked_erroring_then_age() {
        let nodes = [
            node("e1", Erroring),
            node("b1", Blocked),
            node("u1", Unknown),
            node("w1", Waiting),
            node("u2", Unknown),
            node("w2", Waiting),
            node("c1", Complete),
        ];
        let c = compartment(&nodes);
        let s = select(&c, 10, 10);
        assert!(s.new_batch);
        assert_eq!(s.picks, ["w1", "w2", "u1", "u2", "b1", "e1"]);
        assert_eq!(s.newly_picked, s.picks);
        assert_eq!(select(&c, 3, 10).picks, ["w1", "w2", "u1"]);
    }

    /// Case, nodes, may start, expected picks, expected held.
    type GateCase<'a> = (&'a str, &'a [Node], bool, &'a [&'a str], bool);

    #[test]
    fn a_closed_gate_holds_a_new_batch_but_lets_the_current_one_finish() {
        let fresh = [node("a", Waiting), node("b", Waiting)];
        let continuing = [node("a", InProgress).picked(), node("b", Waiting)];
        let picked_not_started = [node("a", Waiting).picked(), node("b", Waiting)];
        let done = [node("a", Complete), node("b", Complete)];
        #[rustfmt::skip]
        let cases: [GateCase<'_>; 6] = [
            ("open gate, new batch", &fresh, true, &["a"], false),
            ("closed gate, new batch held", &fresh, false, &[], true),
            ("closed gate, node in flight finishes", &continuing, false, &["a"], false),
            ("closed gate, picked node of the batch goes on", &picked_not_started, false, &["a"], false),
            ("closed gate, nothing left to start", &done, false, &[], false),
            ("open gate, nothing left to start", &done, true, &[], false),
        ];
        for (case, nodes, may_start, picks, held) in cases {
            let c = compartment(nodes);
            let s = c.select_gated(Some(&fixed(1)), &BatchState::initial(), 1, may_start);
            assert_eq!((s.picks.as_slice(), s.held), (picks, held), "{case}");
            if !may_start {
                assert!(!s.new_batch && s.newly_picked.is_empty(), "{case}");
            }
        }
    }

    #[test]
    fn batch_is_capped_by_the_ceiling() {
        let nodes: Vec<Node> = ["a", "b", "c", "d", "e"]
            .into_iter()
            .map(|n| node(n, Waiting))
            .collect();
        let c = compartment(&nodes);
        assert_eq!(select(&c, 5, 2).picks, ["a", "b"]);
        assert!(select(&c, 5, 0).picks.is_empty());
    }

    #[test]
    fn current_batch_continues_before_new_nodes() {
        let nodes = [
            node("a", InProgress).picked(),
            node("b", Waiting),
            node("c", Waiting),
        ];
        let c = compartment(&nodes);
        let s = select(&c, 2, 2);
        assert!(!s.new_batch);
        assert_eq!(s.picks, ["a"]);
        assert!(s.newly_picked.is_empty());
        assert!(c.batch_open());
    }

    #[test]
    fn sticky_nodes_are_not_starved_by_in_progress_ones() {
        // nodewright #587: b was picked with a, finished a package and waits for the next one
        // while a is still in progress. b must be served in the same pass.
        let nodes = [
            node("a", InProgress).picked(),
            node("b", Waiting).picked(),
            node("c", Waiting),
        ];
        let c = compartment(&nodes);
        assert_eq!(select(&c, 2, 2).picks, ["a", "b"]);
        // Sticky nodes alone keep the batch open: no new node is started.
        let nodes = [
            node("a", Complete),
            node("b", Waiting).picked(),
            node("c", Waiting),
        ];
        let c = compartment(&nodes);
        let s = select(&c, 2, 2);
        assert_eq!((s.picks, s.new_batch), (vec!["b"], false));
    }

    #[test]
    fn ineligible_sticky_nodes_are_skipped_and_blocked() {
        // nodewright #586.
        let nodes = [
            node("a", Waiting).picked().tainted("nvidia.com/gpu"),
            node("b", Waiting),
            node("c", Waiting),
        ];
        let c = compartment(&nodes);
        let s = select(&c, 1, 1);
        assert_eq!(s.picks, ["b"]);
        assert_eq!(
            s.blocked,
            [BlockedNode {
                name: "a",
                reason: BlockReason::IntolerableTaints(vec!["nvidia.com/gpu:NoSchedule".into()])
            }]
        );
    }

    #[test]
    fn ignored_and_intolerable_nodes_are_never_picked() {
        let nodes = [
            node("ignored", Waiting).ignored(),
            node("tainted", Unknown).tainted("dedicated"),
            node("cordoned", Waiting).tainted("node.kubernetes.io/unschedulable"),
            node("done", Complete).ignored(),
        ];
        let c = compartment(&nodes);
        let s = select(&c, 10, 10);
        assert_eq!(s.picks, ["cordoned"]);
        let blocked: Vec<_> = s.blocked.iter().map(|b| (b.name, &b.reason)).collect();
        assert_eq!(blocked.len(), 2);
        assert_eq!(blocked[0], ("ignored", &BlockReason::Ignored));
        assert_eq!(blocked[1].0, "tainted");
    }

    #[test]
    fn erroring_picked_nodes_do_not_hold_the_batch() {
        let nodes = [
            node("a", Erroring).picked(),
            node("b", Waiting),
            node("c", Waiting),
        ];
        let c = compartment(&nodes);
        assert!(!c.batch_open());
        let s = select(&c, 2, 2);
        assert!(s.new_batch);
        assert_eq!(s.picks, ["b", "c"]);
        // With room left, an erroring node is retried last.
        assert_eq!(select(&c, 3, 3).picks, ["b", "c", "a"]);
        assert_eq!(select(&c, 3, 3).newly_picked, ["b", "c"]);
    }

    #[test]
    fn should_stop_picks_nothing() {
        let nodes = [node("a", InProgress).picked(), node("b", Waiting)];
        let c = compartment(&nodes);
        let state = BatchState {
            should_stop: true,
            ..BatchState::initial()
        };
        let s = c.select(Some(&fixed(1)), &state, 5);
        assert!(s.picks.is_empty());
    }

    #[test]
    fn nodes_not_ready_by_priority_hold_their_slot_but_are_not_picked() {
        let nodes = [node("a", Waiting).picked().not_ready(), node("b", Waiting)];
        let c = compartment(&nodes);
        let s = select(&c, 1, 1);
        assert!(s.picks.is_empty() && !s.new_batch && c.batch_open());
        let nodes = [node("a", Waiting).not_ready(), node("b", Waiting)];
        let c = compartment(&nodes);
        assert_eq!(select(&c, 1, 1).picks, ["b"]);
    }

    #[test]
    fn in_progress_beyond_the_ceiling_is_trimmed() {
        // The ceiling shrank (nodes left the compartment): only `ceiling` nodes advance.
        let nodes = [
            node("a", InProgress).picked(),
            node("b", InProgress).picked(),
            node("c", Waiting).picked(),
        ];
        let c = compartment(&nodes);
        assert_eq!(select(&c, 3, 2).picks, ["a", "b"]);
        assert_eq!(select(&c, 3, 1).picks, ["a"]);
    }

    #[test]
    fn rebooting_nodes_keep_their_slots() {
        // Budget 2: a and b were cordoned and are rebooting, so kube-controller-manager tainted
        // them not-ready. No other node may start until they are back.
        let nodes = [
            node("a", InProgress)
                .picked()
                .holding(SlotHold::Cordoned)
                .tainted("node.kubernetes.io/not-ready"),
            node("b", InProgress)
                .picked()
                .holding(SlotHold::Interrupting)
                .tainted("node.kubernetes.io/unreachable"),
            node("c", Waiting),
            node("d", Waiting),
        ];
        let c = compartment(&nodes);
        let s = select(&c, 2, 2);
        assert!(s.picks.is_empty(), "{s:?}");
        assert!(!s.new_batch && c.batch_open());
        assert!(
            s.blocked.is_empty(),
            "slot holders are not reported blocked"
        );
        assert_eq!(c.holding(), 2);
    }

    #[test]
    fn a_failed_node_left_cordoned_keeps_its_slot() {
        let nodes = [
            node("a", Erroring).picked().holding(SlotHold::Cordoned),
            node("b", Waiting),
            node("c", Waiting),
        ];
        let c = compartment(&nodes);
        assert!(
            !c.batch_open(),
            "a failed node does not keep the batch open"
        );
        // The next batch gets what the failed node leaves of the ceiling; retrying the failed
        // node itself takes no new slot.
        assert_eq!(select(&c, 2, 2).picks, ["b", "a"]);
        assert_eq!(select(&c, 1, 1).picks, ["a"]);
        assert_eq!(select(&c, 3, 3).picks, ["b", "c", "a"]);
    }

    #[test]
    fn picked_nodes_wait_for_a_free_slot() {
        // The batch of two was picked; a is cordoned and one slot is held by a failed node of
        // an earlier batch, so b waits for a.
        let nodes = [
            node("old", Erroring).holding(SlotHold::Cordoned),
            node("a", InProgress).picked().holding(SlotHold::Cordoned),
            node("b", Waiting).picked(),
        ];
        let c = compartment(&nodes);
        assert_eq!(select(&c, 2, 2).picks, ["a"]);
        assert_eq!(select(&c, 2, 3).picks, ["a", "b"]);
    }

    #[test]
    fn block_reasons_name_the_taints() {
        let taints = [
            Taint {
                key: "dedicated".into(),
                value: Some("gpu".into()),
                effect: "NoExecute".into(),
                time_added: None,
            },
            Taint {
                key: "b".into(),
                effect: "PreferNoSchedule".into(),
                ..Taint::default()
            },
        ];
        let tolerations = node_selection_tolerations(&[], None);
        assert_eq!(
            block_reason(&BTreeMap::new(), &taints, &tolerations),
            Some(BlockReason::IntolerableTaints(vec![
                "b:PreferNoSchedule".into(),
                "dedicated=gpu:NoExecute".into()
            ]))
        );
        let ignored = BTreeMap::from([(SKYHOOK.ignore_label.to_owned(), "true".to_owned())]);
        assert_eq!(
            block_reason(&ignored, &taints, &tolerations),
            Some(BlockReason::Ignored)
        );
        let not_ignored = BTreeMap::from([(SKYHOOK.ignore_label.to_owned(), "false".to_owned())]);
        assert_eq!(block_reason(&not_ignored, &[], &tolerations), None);
        let ignored_by_nodewright =
            BTreeMap::from([(NODEWRIGHT.ignore_label.to_owned(), "true".to_owned())]);
        assert_eq!(
            block_reason(&ignored_by_nodewright, &[], &tolerations),
            Some(BlockReason::Ignored),
            "the label is the admin's, whichever plugin set it"
        );
    }

    #[test]
    fn counters() {
        let nodes = [
            node("a", InProgress),
            node("b", Erroring),
            node("c", Complete),
            node("d", Waiting),
        ];
        let c = compartment(&nodes);
        assert_eq!(
            (c.len(), c.in_progress(), c.erroring(), c.complete()),
            (4, 1, 1, 1)
        );
        assert!(!c.is_empty());
    }

    fn racks(max_domains: Option<i32>, max_per_domain: Option<i32>) -> TopologyBudget {
        TopologyBudget {
            key: "rack".into(),
            max_domains,
            max_per_domain,
            allow_unlabelled: false,
        }
    }

    #[test]
    fn a_topology_fills_free_slots_only_within_its_domain_limits() {
        let nodes = [
            node("a0", Status::Waiting).in_rack("a"),
            node("b0", Status::Waiting).in_rack("b"),
            node("a1", Status::Waiting).in_rack("a"),
            node("b1", Status::Waiting).in_rack("b"),
        ];
        // (topology, picks, waiting for their domain)
        let cases: [(TopologyBudget, &[&str], &[&str]); 3] = [
            (racks(Some(1), None), &["a0", "a1"], &["b0", "b1"]),
            (racks(None, Some(1)), &["a0", "b0"], &["a1", "b1"]),
            (racks(Some(2), Some(1)), &["a0", "b0"], &["a1", "b1"]),
        ];
        for (topology, picks, waiting) in cases {
            let c = compartment(&nodes).with_topology(Some(&topology));
            let s = c.select(Some(&fixed(4)), &BatchState::initial(), 4);
            assert_eq!(s.picks, picks, "{topology:?}");
            assert_eq!(s.topology_waiting, waiting, "{topology:?}");
        }
        // Without a topology all four start.
        let s = compartment(&nodes).select(Some(&fixed(4)), &BatchState::initial(), 4);
        assert_eq!(s.picks.len(), 4);
        assert!(s.topology_waiting.is_empty() && s.domains.is_empty());
    }

    #[test]
    fn a_node_holding_a_slot_keeps_its_domain_busy() {
        let nodes = [
            node("a0", Status::Waiting).in_rack("a"),
            node("b0", Status::Erroring)
                .in_rack("b")
                .holding(SlotHold::Cordoned),
            node("b1", Status::Waiting).in_rack("b"),
        ];
        let topology = racks(Some(1), None);
        let c = compartment(&nodes).with_topology(Some(&topology));
        let s = c.select(Some(&fixed(3)), &BatchState::initial(), 3);
        // The failed node of rack b, still cordoned, keeps rack b the only domain (and is
        // tried again with the new batch, as without a topology).
        assert_eq!(s.picks, ["b1", "b0"]);
        assert_eq!(s.topology_waiting, ["a0"]);
        assert_eq!(s.domains, BTreeMap::from([("b", 2)]));
    }

    #[test]
    fn nodes_without_the_label_are_blocked_unless_allowed() {
        let nodes = [
            node("a0", Status::Waiting).in_rack("a"),
            node("x", Status::Waiting),
        ];
        let strict = racks(Some(1), None);
        let s = compartment(&nodes).with_topology(Some(&strict)).select(
            Some(&fixed(2)),
            &BatchState::initial(),
            2,
        );
        assert_eq!(s.picks, ["a0"]);
        assert_eq!(
            s.blocked,
            [BlockedNode {
                name: "x",
                reason: BlockReason::NoTopologyLabel("rack".into()),
            }]
        );
        let lenient = TopologyBudget {
            allow_unlabelled: true,
            ..strict
        };
        let s = compartment(&nodes).with_topology(Some(&lenient)).select(
            Some(&fixed(2)),
            &BatchState::initial(),
            2,
        );
        assert_eq!(s.picks, ["a0", "x"]);
        assert!(s.blocked.is_empty());
    }
}
