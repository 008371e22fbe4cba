//! Rollout budgets: compartments, ceilings, batch sizes, batch evaluation and node selection.
//!
//! Every Skyhook has at least one compartment. Without a DeploymentPolicy it has the single
//! `__default__` compartment with a Fixed strategy sized by the legacy `interruptionBudget`;
//! with one, a compartment per policy compartment plus `__default__`. Each reconcile assigns
//! nodes to compartments, evaluates finished batches, and selects the nodes to work on.

mod batch;
mod ceiling;
mod compartment;
mod evaluate;
mod fleet;
mod order;
mod select;
mod slot;
mod topology;

pub use batch::next_batch_size;
pub use ceiling::{legacy_ceiling, policy_ceiling, window_ceiling};
pub use compartment::{
    CompartmentSpec, assign_nodes, legacy_compartments, policy_compartments, skyhook_compartments,
};
pub use evaluate::{
    BatchObservation, BatchOutcome, evaluate_batch, reset_batch_state_enabled, reset_batch_states,
};
pub use fleet::{
    FleetBudget, FleetBudgetError, fleet_admits, fleet_wait_message, holds_fleet_slot,
};
pub use order::{next_node_order_offset, node_orders};
pub use select::{
    BlockReason, BlockedNode, CandidateNode, CompartmentNodes, Selection, block_reason,
};
pub use slot::{NodeActivity, SlotHold, slot_hold, uncordon_on_failure};
pub use topology::{
    Domain, DomainUse, domain_of, domains_held_message, refuses_unlabelled, unlabelled_message,
};

use crate::v1alpha1::{BatchState, CompartmentStatus};

impl CompartmentNodes<'_> {
    /// What evaluating this compartment's batch needs to know.
    pub fn observation(&self) -> BatchObservation {
        BatchObservation {
            total: self.len(),
            complete: self.complete(),
            erroring: self.erroring(),
            batch_open: self.batch_open(),
        }
    }

    /// The compartment's entry of `status.compartmentStatuses`: matched nodes, ceiling, nodes in
    /// progress (status `in_progress` only), complete nodes, progress percent (rounded down)
    /// and the batch state. The batch state is always recorded, also for a compartment without
    /// a strategy, so that its checkpoints survive between reconciles.
    pub fn status(&self, ceiling: usize, batch_state: BatchState) -> CompartmentStatus {
        let matched = self.len();
        let complete = self.complete();
        let progress = (complete * 100).checked_div(matched).unwrap_or(0);
        let to_i32 = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
        CompartmentStatus {
            matched: to_i32(matched),
            ceiling: to_i32(ceiling),
            in_progress: to_i32(self.in_progress()),
            completed: to_i32(complete),
            progress_percent: to_i32(progress),
            batch_state: Some(batch_state),
        }
    }
}
