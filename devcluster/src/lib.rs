//! devcluster: a real Kubernetes control plane with simulated nodes.
