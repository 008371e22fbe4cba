//! Budget ceilings: the most nodes of a compartment worked on at once.

use crate::v1alpha1::{InterruptionBudget, PolicyBudget};

/// The legacy `interruptionBudget` ceiling over `nodes` selected nodes, recomputed every
/// reconcile:
/// - `count` c → `max(1, min(nodes, c))` (a count of 0 behaves like 1);
/// - `percent` p → `max(1, floor(nodes × p / 100))` (0% behaves like 1);
/// - neither → every node at once (at least 1).
///
/// Both set is rejected by validation; should it happen anyway, `count` wins, as in
/// [`policy_ceiling`].
pub fn legacy_ceiling(budget: Option<&InterruptionBudget>, nodes: usize) -> usize {
    let count = budget.and_then(|b| b.count).map(non_negative);
    let percent = budget
        .and_then(|b| b.percent)
        .map(|p| non_negative(p).min(100));
    let ceiling = match (count, percent) {
        (Some(count), _) => count.min(nodes),
        (None, Some(percent)) => nodes * percent / 100,
        (None, None) => nodes,
    };
    ceiling.max(1)
}

/// A DeploymentPolicy budget's ceiling over `matched` nodes: `count` as written, otherwise
/// `max(1, floor(matched × percent / 100))`, and 0 when nothing matched or no budget is set.
pub fn policy_ceiling(budget: &PolicyBudget, matched: usize) -> usize {
    match (budget.count, budget.percent) {
        (Some(count), _) => non_negative(count),
        (None, Some(_)) if matched == 0 => 0,
        (None, Some(percent)) => (matched * non_negative(percent).min(100) / 100).max(1),
        (None, None) => 0,
    }
}

/// The ceiling of a compartment whose own budget gives `own` over `matched` nodes, while the
/// maintenance windows with `window_budgets` are open (`None` for an open window without a
/// budget): the smallest of the open windows' ceilings, a window without a budget counting as
/// `own`; `own` when no window is open with a budget (or none is open at all).
pub fn window_ceiling(
    own: usize,
    window_budgets: &[Option<PolicyBudget>],
    matched: usize,
) -> usize {
    window_budgets
        .iter()
        .map(|budget| budget.as_ref().map_or(own, |b| policy_ceiling(b, matched)))
        .min()
        .unwrap_or(own)
}

/// Budgets and counters are `i32` on the wire; negative values (rejected by the schema) read as 0.
pub(crate) fn non_negative(value: i32) -> usize {
    usize::try_from(value).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percent(p: i32) -> InterruptionBudget {
        InterruptionBudget {
            percent: Some(p),
            count: None,
            topology: None,
        }
    }

    fn count(c: i32) -> InterruptionBudget {
        InterruptionBudget {
            percent: None,
            count: Some(c),
            topology: None,
        }
    }

    #[test]
    fn legacy_vectors_from_upstream() {
        // (percent, nodes → picked)
        for (p, nodes, want) in [(20, 2, 1), (20, 6, 1), (20, 10, 2), (20, 15, 3), (0, 15, 1)] {
            assert_eq!(
                legacy_ceiling(Some(&percent(p)), nodes),
                want,
                "{p}% of {nodes}"
            );
        }
        // (count, nodes → picked)
        for (c, nodes, want) in [(1, 2, 1), (2, 6, 2), (0, 10, 1)] {
            assert_eq!(
                legacy_ceiling(Some(&count(c)), nodes),
                want,
                "count {c} of {nodes}"
            );
        }
    }

    #[test]
    fn legacy_edges() {
        let cases = [
            (None, 15, 15),
            (Some(InterruptionBudget::default()), 7, 7),
            (None, 0, 1),
            (Some(count(3)), 6, 3),
            (Some(count(10)), 4, 4),
            (Some(count(5)), 0, 1),
            (Some(percent(100)), 9, 9),
            (Some(percent(33)), 1, 1),
            (Some(percent(50)), 0, 1),
            (Some(percent(150)), 4, 4),
            (Some(count(-2)), 4, 1),
            (
                Some(InterruptionBudget {
                    percent: Some(50),
                    count: Some(3),
                    topology: None,
                }),
                10,
                3,
            ),
        ];
        for (budget, nodes, want) in cases {
            assert_eq!(
                legacy_ceiling(budget.as_ref(), nodes),
                want,
                "{budget:?} of {nodes}"
            );
        }
    }

    #[test]
    fn policy_ceiling_table() {
        let b = |percent, count| PolicyBudget {
            percent,
            count,
            topology: None,
        };
        let cases = [
            (b(None, Some(2)), 5, 2),
            (b(None, Some(4)), 8, 4),
            (b(None, Some(3)), 0, 3),
            (b(Some(33), None), 6, 1),
            (b(Some(50), None), 4, 2),
            (b(Some(10), None), 3, 1),
            (b(Some(25), None), 0, 0),
            (b(Some(100), None), 15, 15),
            (b(None, None), 10, 0),
            (b(Some(50), Some(1)), 10, 1),
        ];
        for (budget, matched, want) in cases {
            assert_eq!(
                policy_ceiling(&budget, matched),
                want,
                "{budget:?} of {matched}"
            );
        }
    }

    #[test]
    fn an_open_windows_budget_takes_the_place_of_the_compartments() {
        let count = |c| {
            Some(PolicyBudget {
                percent: None,
                count: Some(c),
                topology: None,
            })
        };
        let percent = |p| {
            Some(PolicyBudget {
                percent: Some(p),
                count: None,
                topology: None,
            })
        };
        // (own ceiling, open windows' budgets, matched nodes) -> ceiling
        let cases = [
            (10, vec![], 10, 10),
            (10, vec![None], 10, 10),
            (10, vec![count(1)], 10, 1),
            // A window may allow more than the compartment's own budget.
            (2, vec![percent(50)], 10, 5),
            // Overlapping windows: the smallest ceiling holds, a window without a budget
            // counting as the compartment's own.
            (3, vec![count(5), None], 10, 3),
            (3, vec![count(5), count(2)], 10, 2),
            (10, vec![percent(25), count(4)], 8, 2),
        ];
        for (own, budgets, matched, want) in cases {
            assert_eq!(
                window_ceiling(own, &budgets, matched),
                want,
                "{own} with {budgets:?} over {matched}"
            );
        }
    }
}
