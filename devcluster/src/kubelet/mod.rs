//! The simulated kubelet: one watch of the pods bound to any simulated node, and one worker task
//! per pod that runs its containers and reports its status as the kubelet does.
//!
//! Not simulated: liveness, startup, exec and gRPC probes ([`probe`] runs readiness probes over
//! HTTP and TCP), lifecycle hooks, sidecar (restartable)
//! init containers, ephemeral containers, resource limits, and of the kubelet's HTTP server all but
//! container logs and exec on full nodes ([`api`]).

pub mod admission;
pub mod api;
pub mod backoff;
pub mod container_log;
pub mod conventions;
pub mod env;
mod launch;
pub mod log_reader;
pub mod pod_state;
mod pod_watch;
pub mod probe;
pub mod quantity;
mod runtime;
pub mod status;
pub mod volumes;
mod worker;

pub use conventions::DEFAULT_PATH;
pub(crate) use pod_watch::Kubelet;
