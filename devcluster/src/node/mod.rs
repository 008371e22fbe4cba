//! Simulated nodes: Node objects kept fresh (status, leases, boot ID), a host root per node (an
//! overlay of the machine's `/` in a private mount namespace), reboots, the service journal, and
//! the simulated kubelet that runs the pods bound to them (`crate::kubelet`).
//!
//! Layout under `state_dir` (`<cluster state>/nodes`):
//!
//! ```text
//! holder.pid                       the process holding the mount namespace of node roots
//! <node>/node.json                 name, index, light
//! <node>/boot_id                   the current boot ID (also /proc/sys/kernel/random/boot_id inside)
//! <node>/upper, work, root         the root overlay (root is mounted only in the namespace)
//! <node>/control/requests, journal the FIFO the command shims write to, and the service journal
//! <node>/logs/<ns>_<pod>_<uid>/<container>/<restart>.log
//! <node>/pods/<uid>/               volumes and container specs of a pod
//! ```

mod boot;
pub mod command_shims;
pub(crate) mod context;
mod error;
mod handle;
mod heartbeat;
mod heartbeat_timing;
mod holder;
pub mod object;
mod options;
mod power;
mod sim;
pub mod size;

pub use error::NodeError;
pub use handle::NodeHandle;
pub use heartbeat_timing::Heartbeat;
pub use options::{DEFAULT_KUBELET_PORT, DEFAULT_KUBELET_VERSION, NodeSimOptions};
pub use sim::{NodeSim, start_nodes};
pub use size::NodeSize;
