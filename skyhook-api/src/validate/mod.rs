//! Admission rules for Skyhook and DeploymentPolicy objects. Every violation is returned, each
//! naming its field and how to fix it, so one denial lists everything to correct.

mod policy;
mod skyhook;
mod topology;
mod update;
mod violation;

pub use k8s_resources::{QuantityError, QuantityValue, parse_quantity};
pub use policy::{
    PolicyReference, default_policy, policy_delete_blockers, policy_delete_message, validate_policy,
};
pub use skyhook::{
    ValidationContext, admission_warnings, group_admission_warnings, validate_skyhook,
};
pub use update::{UpdateVerdict, skyhook_update};
pub use violation::{Violation, Violations};
