//! Evaluating a finished batch, and resetting batch state.

use std::collections::BTreeMap;

use crate::v1alpha1::{
    BatchState, CompartmentStatus, DeploymentPolicyOptions, DeploymentPolicySpec,
    DeploymentStrategy,
};

use super::batch::progress;

/// What a compartment looks like now, for evaluating its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchObservation {
    /// Nodes of the compartment.
    pub total: usize,
    /// Nodes complete for the Skyhook.
    pub complete: usize,
    /// Incomplete nodes with status `erroring`.
    pub erroring: usize,
    /// Whether the current batch is still running (see
    /// [`CompartmentNodes::batch_open`](super::CompartmentNodes::batch_open)).
    pub batch_open: bool,
}

/// What evaluating a compartment's batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    /// The batch is still running.
    Open,
    /// Nothing completed or failed since the checkpoints (including a batch of only blocked
    /// nodes): nothing to evaluate, no failure counted.
    Unchanged,
    /// Fewer nodes are complete or failed than the checkpoints say (nodes moved to another
    /// compartment or were reset): the checkpoints were moved to the current counts without
    /// evaluating.
    Rebaselined,
    /// A batch was evaluated.
    Evaluated {
        /// Nodes the batch processed (newly complete + newly failed).
        size: usize,
        /// Newly complete nodes.
        succeeded: usize,
        /// Whether the batch fell below `batchThreshold`.
        failed: bool,
    },
}

/// Evaluates the batch of one compartment, returning the new state. Call only while the
/// Skyhook is not complete (completion resets or freezes the state instead).
///
/// Counts are deltas against the checkpoints `completedNodes`/`failedNodes`. With a strategy:
/// success% = succeeded × 100 / size; the batch failed when success% < `batchThreshold`,
/// which increments `consecutiveFailures` and, when `failureThreshold` is set, the progress
/// (processed × 100 / total, after the checkpoints move) is below `safetyLimit` and the
/// consecutive failures reach the threshold, sets `shouldStop`. A successful batch resets
/// `consecutiveFailures`. Without a strategy only the batch number and size are recorded.
/// `currentBatch` increments after every evaluation.
pub fn evaluate_batch(
    strategy: Option<&DeploymentStrategy>,
    state: &BatchState,
    observed: BatchObservation,
) -> (BatchState, BatchOutcome) {
    let mut next = state.clone();
    if observed.batch_open {
        return (next, BatchOutcome::Open);
    }
    if next.current_batch == 0 {
        next.current_batch = 1;
    }
    let complete = to_i32(observed.complete);
    let erroring = to_i32(observed.erroring);
    let delta_complete = complete - state.completed_nodes;
    let delta_failed = erroring - state.failed_nodes;
    if delta_complete < 0 || delta_failed < 0 {
        next.completed_nodes = complete;
        next.failed_nodes = erroring;
        return (next, BatchOutcome::Rebaselined);
    }
    if delta_complete == 0 && delta_failed == 0 {
        return (next, BatchOutcome::Unchanged);
    }
    next.completed_nodes = complete;
    next.failed_nodes = erroring;
    let size = delta_complete + delta_failed;
    next.last_batch_size = size;
    let failed = match strategy {
        Some(strategy) => {
            let success_percent = delta_complete * 100 / size;
            let failed = success_percent < strategy.batch_threshold();
            next.last_batch_failed = failed;
            if failed {
                next.consecutive_failures += 1;
                let (_, percent) = progress(&next, observed.total);
                let below_safety =
                    i64::try_from(percent).unwrap_or(i64::MAX) < i64::from(strategy.safety_limit());
                if let Some(threshold) = strategy.failure_threshold()
                    && below_safety
                    && next.consecutive_failures >= threshold
                {
                    next.should_stop = true;
                }
            } else {
                next.consecutive_failures = 0;
            }
            failed
        }
        None => false,
    };
    next.current_batch += 1;
    let outcome = BatchOutcome::Evaluated {
        size: usize::try_from(size).unwrap_or(0),
        succeeded: usize::try_from(delta_complete).unwrap_or(0),
        failed,
    };
    (next, outcome)
}

fn to_i32(value: usize) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// Whether batch state resets (to batch 1, counters zeroed) when the Skyhook completes or a
/// package version changes. Precedence: the Skyhook's
/// `deploymentPolicyOptions.resetBatchStateOnCompletion`, then the policy's
/// `resetBatchStateOnCompletion`, then false (a Skyhook without a policy or options).
pub fn reset_batch_state_enabled(
    options: Option<&DeploymentPolicyOptions>,
    policy: Option<&DeploymentPolicySpec>,
) -> bool {
    match (options, policy) {
        (Some(options), _) => options.reset_batch_state_on_completion,
        (None, Some(policy)) => policy.reset_batch_state_on_completion,
        (None, None) => false,
    }
}

/// Resets the batch state of every compartment to `{currentBatch: 1}`.
pub fn reset_batch_states(statuses: &mut BTreeMap<String, CompartmentStatus>) {
    for status in statuses.values_mut() {
        status.batch_state = Some(BatchState::initial());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1alpha1::{FixedStrategy, PolicyBudget, PolicyDefault};

    fn strategy(threshold: i32, failure: Option<i32>, safety: i32) -> DeploymentStrategy {
        DeploymentStrategy {
            fixed: Some(FixedStrategy {
                initial_batch: Some(2),
                batch_threshold: Some(threshold),
                failure_threshold: failure,
                safety_limit: Some(safety),
            }),
            ..DeploymentStrategy::default()
        }
    }

    fn observed(total: usize, complete: usize, erroring: usize) -> BatchObservation {
        BatchObservation {
            total,
            complete,
            erroring,
            batch_open: false,
        }
    }

    fn checkpoint(completed: i32, failed: i32, consecutive: i32) -> BatchState {
        BatchState {
            current_batch: 2,
            completed_nodes: completed,
            failed_nodes: failed,
            consecutive_failures: consecutive,
            ..BatchState::default()
        }
    }

    #[test]
    fn open_batches_are_not_evaluated() {
        let s = strategy(100, Some(1), 50);
        let obs = BatchObservation {
            batch_open: true,
            ..observed(10, 5, 0)
        };
        let (next, outcome) = evaluate_batch(Some(&s), &checkpoint(0, 0, 0), obs);
        assert_eq!(outcome, BatchOutcome::Open);
        assert_eq!(next, checkpoint(0, 0, 0));
    }

    #[test]
    fn success_resets_failures() {
        let s = strategy(80, Some(2), 50);
        let (next, outcome) = evaluate_batch(Some(&s), &checkpoint(4, 1, 1), observed(10, 7, 1));
        assert_eq!(
            outcome,
            BatchOutcome::Evaluated {
                size: 3,
                succeeded: 3,
                failed: false
            }
        );
        assert_eq!(next.consecutive_failures, 0);
        assert_eq!(next.current_batch, 3);
        assert_eq!((next.completed_nodes, next.failed_nodes), (7, 1));
        assert_eq!((next.last_batch_size, next.last_batch_failed), (3, false));
        assert!(!next.should_stop);
    }

    #[test]
    fn failures_below_safety_limit_stop() {
        let s = strategy(100, Some(2), 50);
        // Batch 1 of 10 nodes: 1 ok, 1 failed → 50% < 100 → failed, progress 20% < 50.
        let (next, outcome) = evaluate_batch(Some(&s), &checkpoint(0, 0, 1), observed(10, 1, 1));
        assert_eq!(
            outcome,
            BatchOutcome::Evaluated {
                size: 2,
                succeeded: 1,
                failed: true
            }
        );
        assert_eq!(next.consecutive_failures, 2);
        assert!(next.should_stop);
        assert!(next.last_batch_failed);
    }

    #[test]
    fn failures_above_safety_limit_do_not_stop() {
        let s = strategy(100, Some(1), 50);
        let (next, _) = evaluate_batch(Some(&s), &checkpoint(5, 0, 0), observed(10, 5, 1));
        assert_eq!(next.consecutive_failures, 1);
        assert!(!next.should_stop, "progress 60% is above the safety limit");
    }

    #[test]
    fn unset_failure_threshold_never_stops() {
        let s = strategy(100, None, 100);
        let mut state = checkpoint(0, 0, 0);
        for failed in 1..=5 {
            let (next, outcome) = evaluate_batch(Some(&s), &state, observed(10, 0, failed));
            assert!(matches!(
                outcome,
                BatchOutcome::Evaluated { failed: true, .. }
            ));
            assert!(!next.should_stop);
            state = next;
        }
        assert_eq!(state.consecutive_failures, 5);
        assert_eq!(state.current_batch, 7);
    }

    #[test]
    fn threshold_boundary() {
        // 9 of 10 succeed: 90% meets a threshold of 90, misses 91.
        let (_, ok) = evaluate_batch(
            Some(&strategy(90, None, 50)),
            &checkpoint(0, 0, 0),
            observed(20, 9, 1),
        );
        assert!(matches!(ok, BatchOutcome::Evaluated { failed: false, .. }));
        let (_, bad) = evaluate_batch(
            Some(&strategy(91, None, 50)),
            &checkpoint(0, 0, 0),
            observed(20, 9, 1),
        );
        assert!(matches!(bad, BatchOutcome::Evaluated { failed: true, .. }));
    }

    #[test]
    fn negative_delta_rebaselines_without_evaluating() {
        let s = strategy(100, Some(1), 50);
        let (next, outcome) = evaluate_batch(Some(&s), &checkpoint(5, 2, 0), observed(6, 3, 2));
        assert_eq!(outcome, BatchOutcome::Rebaselined);
        assert_eq!(
            (next.completed_nodes, next.failed_nodes, next.current_batch),
            (3, 2, 2)
        );
        // A failed node recovering (failed delta −1) also rebaselines.
        let (_, outcome) = evaluate_batch(Some(&s), &checkpoint(3, 2, 0), observed(6, 4, 1));
        assert_eq!(outcome, BatchOutcome::Rebaselined);
    }

    #[test]
    fn blocked_only_batches_are_not_failures() {
        let s = strategy(100, Some(1), 50);
        let (next, outcome) = evaluate_batch(Some(&s), &checkpoint(2, 0, 0), observed(5, 2, 0));
        assert_eq!(outcome, BatchOutcome::Unchanged);
        assert_eq!(next, checkpoint(2, 0, 0));
    }

    #[test]
    fn without_strategy_only_counts() {
        let (next, outcome) = evaluate_batch(None, &checkpoint(0, 0, 0), observed(10, 2, 1));
        assert_eq!(
            outcome,
            BatchOutcome::Evaluated {
                size: 3,
                succeeded: 2,
                failed: false
            }
        );
        assert_eq!(
            (
                next.current_batch,
                next.last_batch_size,
                next.consecutive_failures
            ),
            (3, 3, 0)
        );
    }

    #[test]
    fn zero_current_batch_starts_at_one() {
        let state = BatchState::default();
        let (next, outcome) = evaluate_batch(None, &state, observed(3, 0, 0));
        assert_eq!(outcome, BatchOutcome::Unchanged);
        assert_eq!(next.current_batch, 1);
    }

    #[test]
    fn reset_precedence() {
        let policy = |reset| DeploymentPolicySpec {
            default: PolicyDefault {
                budget: PolicyBudget {
                    percent: Some(100),
                    count: None,
                    topology: None,
                },
                strategy: DeploymentStrategy::default(),
            },
            compartments: vec![],
            reset_batch_state_on_completion: reset,
            maintenance_windows: vec![],
            health_gate: None,
        };
        let options = |reset| DeploymentPolicyOptions {
            reset_batch_state_on_completion: reset,
        };
        let cases = [
            (None, None, false),
            (None, Some(policy(true)), true),
            (None, Some(policy(false)), false),
            (Some(options(false)), Some(policy(true)), false),
            (Some(options(true)), Some(policy(false)), true),
            (Some(options(true)), None, true),
        ];
        for (o, p, want) in cases {
            assert_eq!(
                reset_batch_state_enabled(o.as_ref(), p.as_ref()),
                want,
                "{o:?} {p:?}"
            );
        }
    }

    #[test]
    fn reset_all_compartments() {
        let mut statuses = BTreeMap::from([
            (
                "a".to_owned(),
                CompartmentStatus {
                    batch_state: Some(checkpoint(3, 1, 1)),
                    ..Default::default()
                },
            ),
            ("b".to_owned(), CompartmentStatus::default()),
        ]);
        reset_batch_states(&mut statuses);
        for status in statuses.values() {
            assert_eq!(status.batch_state, Some(BatchState::initial()));
        }
    }
}
