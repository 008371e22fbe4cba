//! devcluster: a real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler built from upstream sources) with simulated nodes, for tests, the demo and
//! benchmarks.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use devcluster::{DevCluster, DevClusterOptions};
//! let cluster = DevCluster::start(DevClusterOptions { nodes: 3, ..Default::default() }).await?;
//! let client = cluster.client()?;
//! # Ok(()) }
//! ```

pub mod cli;
mod cluster;
pub mod controlplane;
pub mod images;
pub mod isolation;
pub mod kubelet;
mod leftovers;
pub mod network;
pub mod node;
mod path_io;
pub mod services;
pub mod state;

pub use cluster::{DevCluster, DevClusterError, DevClusterOptions, Progress};
pub use controlplane::flags::Component;
pub use path_io::PathIoError;
