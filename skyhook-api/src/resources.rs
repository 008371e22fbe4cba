//! A pod's effective CPU and memory requests and a node's allocatable CPU and memory. The rule is
//! Kubernetes', kept in `k8s-resources` so that devcluster's kubelet applies the same one without
//! depending on skyhook-api; re-exported here beside the rollout rules that use it.

pub use k8s_resources::{CpuMemory, cpu_memory, pod_requests};
