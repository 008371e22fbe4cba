//! Batch sizes: how many nodes the next batch of a compartment takes.

use crate::v1alpha1::{BatchState, DeploymentStrategy};

use super::ceiling::non_negative;

/// Progress of a compartment from its checkpoints: `(processed, progress percent)`, where
/// processed = completed + failed nodes.
pub(crate) fn progress(state: &BatchState, total: usize) -> (usize, usize) {
    let processed = non_negative(state.completed_nodes) + non_negative(state.failed_nodes);
    let percent = processed
        .saturating_mul(100)
        .checked_div(total)
        .unwrap_or(0);
    (processed, percent)
}

/// The size of the next batch of a compartment of `total` nodes.
///
/// By strategy (p = processed × 100 / total, processed = completed + failed checkpoints):
/// - none (a policy compartment without a strategy): the ceiling;
/// - fixed: `initialBatch`;
/// - linear: `initialBatch` first; then, after a failed batch while p < `safetyLimit`,
///   `max(1, last − delta)`, otherwise `last + delta`;
/// - exponential: `initialBatch` first; then, after a failed batch while p < `safetyLimit`,
///   `max(1, last / growthFactor)`, otherwise `last × growthFactor` capped at `total`.
///
/// The result is clamped to `1..=remaining` (remaining = total − processed; at least 1 so that
/// nodes counted as failed can be retried) **and then capped by `ceiling`**. Upstream let a
/// strategy exceed the budget ceiling (the ceiling only served overlap resolution and status);
/// we treat the budget as a hard limit on every batch. A compartment with no nodes, or a
/// ceiling of 0, gets 0.
pub fn next_batch_size(
    strategy: Option<&DeploymentStrategy>,
    state: &BatchState,
    total: usize,
    ceiling: usize,
) -> usize {
    if total == 0 {
        return 0;
    }
    let (processed, percent) = progress(state, total);
    let last = non_negative(state.last_batch_size);
    let slow_down = state.last_batch_failed && percent < non_negative(strategy_safety(strategy));
    let size = match strategy {
        None => ceiling,
        Some(s) => {
            let initial = non_negative(s.initial_batch());
            if let Some(fixed) = &s.fixed {
                non_negative(fixed.initial_batch())
            } else if let Some(linear) = &s.linear {
                let delta = non_negative(linear.delta());
                match (last, slow_down) {
                    (0, _) => initial,
                    (last, true) => last.saturating_sub(delta).max(1),
                    (last, false) => last.saturating_add(delta),
                }
            } else if let Some(exponential) = &s.exponential {
                let factor = non_negative(exponential.growth_factor()).max(1);
                match (last, slow_down) {
                    (0, _) => initial,
                    (last, true) => (last / factor).max(1).min(total),
                    (last, false) => last.saturating_mul(factor).min(total),
                }
            } else {
                initial
            }
        }
    };
    let remaining = total.saturating_sub(processed);
    size.min(remaining).max(1).min(ceiling)
}

fn strategy_safety(strategy: Option<&DeploymentStrategy>) -> i32 {
    strategy.map_or(0, DeploymentStrategy::safety_limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixed;
    use crate::v1alpha1::{ExponentialStrategy, LinearStrategy};

    fn linear(initial: i32, delta: i32, safety: i32) -> DeploymentStrategy {
        DeploymentStrategy {
            linear: Some(LinearStrategy {
                initial_batch: Some(initial),
                delta: Some(delta),
                safety_limit: Some(safety),
                ..LinearStrategy::default()
            }),
            ..DeploymentStrategy::default()
        }
    }

    fn exponential(initial: i32, factor: i32, safety: i32) -> DeploymentStrategy {
        DeploymentStrategy {
            exponential: Some(ExponentialStrategy {
                initial_batch: Some(initial),
                growth_factor: Some(factor),
                safety_limit: Some(safety),
                ..ExponentialStrategy::default()
            }),
            ..DeploymentStrategy::default()
        }
    }

    fn state(completed: i32, failed: i32, last: i32, last_failed: bool) -> BatchState {
        BatchState {
            current_batch: 1,
            completed_nodes: completed,
            failed_nodes: failed,
            last_batch_size: last,
            last_batch_failed: last_failed,
            ..BatchState::default()
        }
    }

    #[test]
    fn table() {
        let big = usize::MAX;
        // (strategy, state, total, ceiling, want, why)
        type Case = (
            Option<DeploymentStrategy>,
            BatchState,
            usize,
            usize,
            usize,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            (
                Some(fixed(3)),
                state(0, 0, 0, false),
                10,
                big,
                3,
                "fixed first batch",
            ),
            (
                Some(fixed(3)),
                state(6, 0, 3, false),
                10,
                big,
                3,
                "fixed stays",
            ),
            (
                Some(fixed(3)),
                state(9, 0, 3, false),
                10,
                big,
                1,
                "fixed clamped to remaining",
            ),
            (
                Some(fixed(3)),
                state(10, 0, 3, false),
                10,
                big,
                1,
                "at least one when all processed",
            ),
            (
                Some(fixed(5)),
                state(0, 0, 0, false),
                10,
                2,
                2,
                "capped by the ceiling",
            ),
            (
                Some(linear(1, 1, 50)),
                state(0, 0, 0, false),
                8,
                4,
                1,
                "linear first",
            ),
            (
                Some(linear(1, 1, 50)),
                state(1, 0, 1, false),
                8,
                4,
                2,
                "linear grows",
            ),
            (
                Some(linear(1, 1, 50)),
                state(3, 0, 2, false),
                8,
                4,
                3,
                "linear grows again",
            ),
            (
                Some(linear(1, 1, 50)),
                state(6, 0, 3, false),
                8,
                4,
                2,
                "linear clamped to remaining",
            ),
            (
                Some(linear(2, 2, 50)),
                state(4, 0, 4, false),
                20,
                5,
                5,
                "linear capped by ceiling",
            ),
            (
                Some(linear(1, 2, 50)),
                state(1, 2, 4, true),
                10,
                big,
                2,
                "linear shrinks below safety",
            ),
            (
                Some(linear(1, 5, 50)),
                state(1, 2, 4, true),
                10,
                big,
                1,
                "linear shrinks to at least 1",
            ),
            (
                Some(linear(1, 2, 50)),
                state(4, 2, 4, true),
                10,
                big,
                4,
                "linear grows above safety (clamped)",
            ),
            (
                Some(exponential(1, 2, 50)),
                state(0, 0, 0, false),
                16,
                big,
                1,
                "exponential first",
            ),
            (
                Some(exponential(1, 2, 50)),
                state(1, 0, 1, false),
                16,
                big,
                2,
                "exponential doubles",
            ),
            (
                Some(exponential(1, 2, 50)),
                state(3, 0, 2, false),
                16,
                big,
                4,
                "exponential doubles again",
            ),
            (
                Some(exponential(1, 4, 50)),
                state(5, 0, 4, false),
                16,
                big,
                11,
                "capped at remaining",
            ),
            (
                Some(exponential(1, 2, 50)),
                state(3, 0, 2, false),
                16,
                3,
                3,
                "exponential capped by ceiling",
            ),
            (
                Some(exponential(1, 2, 60)),
                state(1, 3, 4, true),
                10,
                big,
                2,
                "exponential halves below safety",
            ),
            (
                Some(exponential(1, 3, 60)),
                state(1, 1, 2, true),
                10,
                big,
                1,
                "exponential divides to at least 1",
            ),
            (
                Some(exponential(1, 2, 30)),
                state(2, 2, 4, true),
                10,
                big,
                6,
                "grows above safety (clamped)",
            ),
            (
                Some(exponential(2, 2, 50)),
                state(0, 0, 0, false),
                4,
                2,
                2,
                "test compartment batch 1",
            ),
            (
                None,
                state(0, 0, 0, false),
                6,
                2,
                2,
                "no strategy uses the ceiling",
            ),
            (
                None,
                state(5, 0, 2, false),
                6,
                2,
                1,
                "no strategy clamped to remaining",
            ),
            (Some(fixed(3)), state(0, 0, 0, false), 0, big, 0, "no nodes"),
            (
                Some(fixed(3)),
                state(0, 0, 0, false),
                5,
                0,
                0,
                "zero ceiling",
            ),
            (
                Some(DeploymentStrategy::default()),
                state(0, 0, 0, false),
                5,
                big,
                1,
                "empty strategy",
            ),
        ];
        for (strategy, state, total, ceiling, want, why) in cases {
            assert_eq!(
                next_batch_size(strategy.as_ref(), &state, total, ceiling),
                want,
                "{why}"
            );
        }
    }

    #[test]
    fn defaults_apply() {
        let s = DeploymentStrategy {
            linear: Some(LinearStrategy::default()),
            ..DeploymentStrategy::default()
        };
        assert_eq!(next_batch_size(Some(&s), &state(0, 0, 0, false), 10, 10), 1);
        assert_eq!(next_batch_size(Some(&s), &state(1, 0, 1, false), 10, 10), 2);
        let s = DeploymentStrategy {
            exponential: Some(ExponentialStrategy::default()),
            ..DeploymentStrategy::default()
        };
        assert_eq!(next_batch_size(Some(&s), &state(3, 0, 2, false), 10, 10), 4);
    }
}
