//! The pod network of full nodes: every pod that is not `hostNetwork` gets its own network
//! namespace, with a veth pair into its node's bridge and an address from the node's `podCIDR`.
//! The bridges live in the machine's network namespace, which routes between them: a packet from
//! a pod on one node reaches a pod on another through the machine, with forwarding switched on
//! for the cluster's bridges only (`net.ipv4.conf.<bridge>.forwarding`; the machine-wide
//! `net.ipv4.ip_forward` is left alone).
//!
//! Clusters side by side on one machine share its network namespace, so each claims a cluster
//! number (by creating its control plane's link, which fails if another cluster has it) that
//! makes its addresses and link names its own. `addresses` decides addresses and names (pure);
//! `links` creates and removes them.

mod addresses;
mod links;

pub use addresses::{
    BridgePlan, ClusterNetwork, FIRST_POD_HOST, LAST_POD_HOST, MAX_CLUSTERS, MAX_NODES,
    POD_INTERFACE, PodInterface, ServiceRange,
};
pub use links::{ClaimedNetwork, NetworkError, NodeBridges, PodNamespace, remove_recorded_bridges};
