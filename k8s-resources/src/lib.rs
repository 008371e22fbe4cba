//! Kubernetes' own rules about resources, which several crates must apply exactly alike: the
//! controller bounds its pods by them, the webhook validates with them and devcluster's simulated
//! kubelet admits pods with them. Pure: no I/O.

mod quantity;
mod requests;

pub use quantity::{QuantityError, QuantityValue, parse_quantity};
pub use requests::{CpuMemory, cpu_memory, pod_requests};
