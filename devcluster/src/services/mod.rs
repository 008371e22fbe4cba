//! ClusterIP Services on the pod network: devcluster's stand-in for kube-proxy.
//!
//! The real kube-proxy programs fixed-name nftables/iptables chains in the machine's network
//! namespace, which every devcluster on this machine shares, so two clusters' proxies would
//! overwrite each other. Instead each cluster takes its ClusterIPs from a range of its own (see
//! [`crate::network::ClusterNetwork::service_range`]), every address of which is local to the
//! machine, and the supervisor listens on each ClusterIP and Service port and forwards every new
//! TCP connection to a ready endpoint, following EndpointSlices as kube-proxy does.
//!
//! `routes` decides which endpoints serve which ClusterIP and port (pure); `proxy` listens,
//! forwards and follows the API.

mod proxy;
mod routes;

pub use proxy::{Frontend, ServiceProxy};
pub use routes::{Routes, attempt_order, routes, routes_file, routes_in_effect};
