//! The fleet budget: the most nodes that all Skyhooks together may have cordoned or
//! interrupting at once (the controller's `FLEET_BUDGET`, issue #17 item 5).
//!
//! **Invariant.** The nodes that hold a fleet slot never outnumber the fleet ceiling, except
//! when the ceiling shrank (a smaller setting, or nodes removed from the cluster) under nodes
//! already holding one. A node holds a fleet slot while any Skyhook holds a budget slot on it
//! by its cordon or by an unconfirmed interrupt ([`super::slot::SlotHold::Cordoned`] and
//! [`super::slot::SlotHold::Interrupting`]): the rule is read from the node's annotations
//! alone, so it holds across controller restarts and counts nodes of every Skyhook, not only
//! the one planning. A node that only runs a package that does not interrupt holds none.
//!
//! A Skyhook takes a fleet slot at the moment it cordons a node; every interrupt comes after
//! that cordon. So [`fleet_admits`] is asked once, before a cordon of a node that holds no
//! fleet slot yet; a node already cordoned or interrupting (by this Skyhook or another) costs
//! nothing more, and several Skyhooks sharing one node's cordon share its slot.

use std::fmt;
use std::str::FromStr;

use crate::generation::Owners;
use crate::keys;
use crate::node_keys::any_live_cordon;
use crate::node_state::NodeState;
use crate::string_map::StringMap;
use crate::v1alpha1::Status;

use super::slot::{NodeActivity, SlotHold, slot_hold};

/// The fleet budget: a number of nodes, or a percent of every node of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetBudget {
    /// At most this many nodes (at least 1).
    Count(usize),
    /// At most this percent (1 to 100) of all nodes, rounded down, and at least 1 node.
    Percent(usize),
}

/// Why a fleet budget setting does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetBudgetError {
    /// Neither a whole number nor a percent.
    #[error("{0:?} is neither a node count nor a percent; write e.g. 3 or 25%")]
    Malformed(String),
    /// A count of 0 would stop every interrupting rollout.
    #[error("{0:?} allows no node at all; give at least 1 (leave it empty for no fleet budget)")]
    Zero(String),
    /// A percent outside 1..=100.
    #[error("{0:?} is not a percent from 1% to 100%")]
    PercentOutOfRange(String),
}

impl FromStr for FleetBudget {
    type Err = FleetBudgetError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let text = raw.trim();
        let malformed = || FleetBudgetError::Malformed(raw.to_owned());
        if let Some(percent) = text.strip_suffix('%') {
            let percent: usize = percent.trim().parse().map_err(|_| malformed())?;
            if !(1..=100).contains(&percent) {
                return Err(FleetBudgetError::PercentOutOfRange(raw.to_owned()));
            }
            return Ok(FleetBudget::Percent(percent));
        }
        match text.parse::<usize>().map_err(|_| malformed())? {
            0 => Err(FleetBudgetError::Zero(raw.to_owned())),
            count => Ok(FleetBudget::Count(count)),
        }
    }
}

impl fmt::Display for FleetBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FleetBudget::Count(count) => write!(f, "{count}"),
            FleetBudget::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

impl FleetBudget {
    /// The most nodes that may hold a fleet slot among `cluster_nodes` nodes: a count as
    /// written, a percent rounded down and at least 1.
    pub fn ceiling(self, cluster_nodes: usize) -> usize {
        match self {
            FleetBudget::Count(count) => count,
            FleetBudget::Percent(percent) => (cluster_nodes * percent / 100).max(1),
        }
    }
}

/// Whether a node holds a fleet slot: some workload of either group cordoned it (a live
/// `cordon_<name>` on an unschedulable node, see [`crate::node_keys::any_live_cordon`]), or an
/// interrupt of some Skyhook is requested there and not confirmed. `states` are the node states
/// of every Skyhook that has one on the node.
pub fn holds_fleet_slot<'a>(
    annotations: &dyn StringMap,
    owners: &Owners,
    unschedulable: bool,
    states: impl IntoIterator<Item = (&'a str, &'a NodeState)>,
) -> bool {
    let cordoned = unschedulable && any_live_cordon(annotations, owners);
    cordoned
        || states.into_iter().any(|(skyhook, state)| {
            let activity = NodeActivity {
                keys: &keys::SKYHOOK,
                skyhook,
                annotations,
                unschedulable: false,
                state,
                status: Status::Unknown,
                pod_on_node: false,
            };
            slot_hold(activity) == Some(SlotHold::Interrupting)
        })
}

/// Whether a Skyhook may cordon a node now: the node already holds a fleet slot, or fewer than
/// `ceiling` nodes hold one (`held`).
pub fn fleet_admits(ceiling: usize, held: usize, node_holds: bool) -> bool {
    node_holds || held < ceiling
}

/// The message of a Skyhook's condition while nodes it would cordon wait for the fleet budget.
pub fn fleet_wait_message(
    budget: FleetBudget,
    ceiling: usize,
    held: usize,
    waiting: &[String],
) -> String {
    const SHOWN: usize = 10;
    let mut nodes = waiting
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if waiting.len() > SHOWN {
        nodes.push_str(&format!(" and {} more", waiting.len() - SHOWN));
    }
    format!(
        "{held} of {ceiling} nodes allowed by the fleet budget (FLEET_BUDGET={budget}) are cordoned or interrupting across all Skyhooks; waiting to cordon: {nodes}"
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::v1alpha1::{PackageStatus, Stage, State};

    #[test]
    fn parses_counts_and_percents_and_names_what_is_wrong() {
        use FleetBudget::*;
        #[rustfmt::skip]
        let cases: [(&str, Result<FleetBudget, &str>); 10] = [
            ("1", Ok(Count(1))),
            (" 12 ", Ok(Count(12))),
            ("25%", Ok(Percent(25))),
            ("100%", Ok(Percent(100))),
            ("0", Err("allows no node")),
            ("0%", Err("from 1% to 100%")),
            ("101%", Err("from 1% to 100%")),
            ("-1", Err("neither a node count nor a percent")),
            ("two", Err("neither a node count nor a percent")),
            ("%", Err("neither a node count nor a percent")),
        ];
        for (raw, want) in cases {
            match (raw.parse::<FleetBudget>(), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{raw:?}"),
                (Err(error), Err(fragment)) => {
                    assert!(error.to_string().contains(fragment), "{raw:?}: {error}")
                }
                (got, want) => panic!("{raw:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn ceilings_round_percents_down_but_allow_one_node() {
        use FleetBudget::*;
        for (budget, nodes, want) in [
            (Count(1), 10, 1),
            (Count(5), 2, 5),
            (Percent(50), 4, 2),
            (Percent(50), 5, 2),
            (Percent(10), 5, 1),
            (Percent(100), 3, 3),
            (Percent(25), 0, 1),
        ] {
            assert_eq!(budget.ceiling(nodes), want, "{budget} of {nodes}");
        }
    }

    fn state(stage: Stage, state: State) -> NodeState {
        let mut node_state = NodeState::new();
        node_state.upsert(PackageStatus {
            name: "pkg".into(),
            version: "1.0.0".into(),
            image: "img".into(),
            stage,
            state,
            container_sha: String::new(),
            restarts: 0,
        });
        node_state
    }

    /// Case, annotations, unschedulable, node states by Skyhook, expected.
    type Case<'a> = (
        &'a str,
        &'a BTreeMap<String, String>,
        bool,
        Vec<(&'a str, &'a NodeState)>,
        bool,
    );

    #[test]
    fn any_skyhooks_cordon_or_unconfirmed_interrupt_holds_a_fleet_slot() {
        let cordon_a = BTreeMap::from([(keys::SKYHOOK.cordon_annotation("a"), "true".to_owned())]);
        let cordoned_at_only =
            BTreeMap::from([(keys::SKYHOOK.cordoned_at_annotation("a"), "t".to_owned())]);
        let drain_failed_b =
            BTreeMap::from([(keys::SKYHOOK.drain_failed_annotation("b"), "t".to_owned())]);
        let none = BTreeMap::new();
        let rebooting = state(Stage::Interrupt, State::InProgress);
        let unconfirmed = state(Stage::Interrupt, State::Erroring);
        let applying = state(Stage::Apply, State::InProgress);
        let rebooted = state(Stage::Interrupt, State::Complete);
        #[rustfmt::skip]
        let cases: [Case<'_>; 9] = [
            ("cordoned by a skyhook", &cordon_a, true, vec![], true),
            ("cordon annotation left on a schedulable node", &cordon_a, false, vec![], false),
            ("an administrator's cordon", &none, true, vec![], false),
            ("cordonedAt without a cordon", &cordoned_at_only, true, vec![], false),
            ("another skyhook rebooting it", &none, false, vec![("a", &applying), ("b", &rebooting)], true),
            ("reboot not confirmed", &none, false, vec![("b", &unconfirmed)], true),
            ("drain failed before the interrupt", &drain_failed_b, false, vec![("b", &unconfirmed)], false),
            ("a package that does not interrupt", &none, false, vec![("a", &applying)], false),
            ("reboot confirmed", &none, false, vec![("a", &rebooted)], false),
        ];
        for (case, annotations, unschedulable, states, want) in cases {
            assert_eq!(
                holds_fleet_slot(annotations, &Owners::default(), unschedulable, states),
                want,
                "{case}"
            );
        }
    }

    #[test]
    fn a_cordon_of_either_group_holds_a_fleet_slot_and_a_shadow_does_not() {
        use crate::generation::Candidate;
        let none = BTreeMap::new();
        let candidate = Some(Candidate {
            status: None,
            annotations: &none,
            busy: false,
        });
        // `a` is live as a NodeWright: its skyhook-group cordon is a migration's shadow.
        let owners = Owners::new([("a", candidate, candidate)]);
        let nodewright = BTreeMap::from([(keys::NODEWRIGHT.cordon_annotation("a"), "true".into())]);
        let shadow = BTreeMap::from([(keys::SKYHOOK.cordon_annotation("a"), "true".to_owned())]);
        assert!(holds_fleet_slot(&nodewright, &owners, true, []));
        assert!(!holds_fleet_slot(&shadow, &owners, true, []));
        assert!(
            holds_fleet_slot(&shadow, &Owners::default(), true, []),
            "the skyhook group's cordon of a Skyhook holds it"
        );
    }

    #[test]
    fn admits_a_node_already_holding_or_while_a_slot_is_free() {
        #[rustfmt::skip]
        let cases = [
            ("free slot", 2, 1, false, true),
            ("full", 1, 1, false, false),
            ("shrunk under holders", 1, 3, false, false),
            ("node already holds: shared cordon", 1, 1, true, true),
        ];
        for (case, ceiling, held, node_holds, want) in cases {
            assert_eq!(fleet_admits(ceiling, held, node_holds), want, "{case}");
        }
    }

    #[test]
    fn wait_message_names_the_setting_and_bounds_the_node_list() {
        let few = ["n1".to_owned(), "n2".to_owned()];
        let message = fleet_wait_message(FleetBudget::Count(1), 1, 1, &few);
        assert_eq!(
            message,
            "1 of 1 nodes allowed by the fleet budget (FLEET_BUDGET=1) are cordoned or interrupting across all Skyhooks; waiting to cordon: n1, n2"
        );
        let many: Vec<String> = (0..12).map(|i| format!("n{i}")).collect();
        let message = fleet_wait_message(FleetBudget::Percent(10), 3, 3, &many);
        assert!(message.ends_with("n9 and 2 more"), "{message}");
        assert!(message.contains("FLEET_BUDGET=10%"), "{message}");
    }
}
