//! The pod network's addresses and link names, per cluster number and node index (pure).

use std::net::Ipv4Addr;

/// How many clusters can have a pod network at once: cluster `n` owns `100.(64+n).0.0/16`, inside
/// the shared address space `100.64.0.0/10`, which no machine here routes to.
pub const MAX_CLUSTERS: u8 = 64;
/// Nodes are numbered from 1; node `i` owns `100.(64+n).i.0/24`.
pub const MAX_NODES: usize = 254;
/// The bridge takes `.1` of a node's range; pods take the rest.
pub const FIRST_POD_HOST: u8 = 2;
pub const LAST_POD_HOST: u8 = 254;
const NODE_PREFIX_LEN: u8 = 24;
const CLUSTER_PREFIX_LEN: u8 = 16;
/// The third octet of a cluster's Service range: nodes are numbered up to 254.
const SERVICE_THIRD_OCTET: u8 = 255;

/// The addresses and link names of one cluster's pod network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterNetwork {
    number: u8,
}

impl ClusterNetwork {
    /// Cluster `number` (below [`MAX_CLUSTERS`]).
    pub fn new(number: u8) -> Option<Self> {
        (number < MAX_CLUSTERS).then_some(Self { number })
    }

    pub fn number(self) -> u8 {
        self.number
    }

    fn second_octet(self) -> u8 {
        64 + self.number
    }

    /// Every pod address of the cluster (kube-controller-manager's `--cluster-cidr`).
    pub fn cluster_cidr(self) -> String {
        format!("100.{}.0.0/{CLUSTER_PREFIX_LEN}", self.second_octet())
    }

    /// Whether this cluster can give node `node_index` a pod range.
    pub fn has_node(node_index: usize) -> bool {
        (1..=MAX_NODES).contains(&node_index)
    }

    /// The node's `spec.podCIDR`.
    pub fn pod_cidr(self, node_index: usize) -> String {
        let gateway = self.gateway(node_index);
        let [a, b, c, _] = gateway.octets();
        format!("{a}.{b}.{c}.0/{NODE_PREFIX_LEN}")
    }

    /// Where the API server serves, on the control plane's link ("node 0"): reachable from
    /// every pod through its default route, and from the machine.
    pub fn apiserver_address(self) -> Ipv4Addr {
        self.gateway(0)
    }

    /// The cluster's Service ClusterIPs: `100.(64+n).255.0/24`, beyond every node's range, so
    /// that clusters side by side never hand out the same ClusterIP and pods reach them through
    /// their default route (see `crate::services`).
    pub fn service_range(self) -> ServiceRange {
        ServiceRange {
            network: Ipv4Addr::new(100, self.second_octet(), SERVICE_THIRD_OCTET, 0),
            prefix_len: NODE_PREFIX_LEN,
        }
    }

    /// The node bridge's address: the default route of its pods.
    pub fn gateway(self, node_index: usize) -> Ipv4Addr {
        self.address(node_index, 1)
    }

    /// The address of the pod in `slot` ([`FIRST_POD_HOST`]..=[`LAST_POD_HOST`]).
    pub fn pod_address(self, node_index: usize, slot: u8) -> Ipv4Addr {
        self.address(node_index, slot)
    }

    fn address(self, node_index: usize, host: u8) -> Ipv4Addr {
        let third = u8::try_from(node_index).unwrap_or(u8::MAX);
        Ipv4Addr::new(100, self.second_octet(), third, host)
    }

    /// The node's bridge: short enough for a link name (15 bytes), unique per cluster and node.
    pub fn bridge(self, node_index: usize) -> String {
        format!("dcp{}n{node_index}", self.number)
    }

    /// The machine's end of the veth pair of the pod in `slot`.
    pub fn veth(self, node_index: usize, slot: u8) -> String {
        format!("dcp{}n{node_index}s{slot}", self.number)
    }

    /// The pod's interface, inside its namespace, and how it is addressed.
    pub fn pod_interface(self, node_index: usize, slot: u8) -> PodInterface {
        PodInterface {
            bridge: self.bridge(node_index),
            host_veth: self.veth(node_index, slot),
            address: self.pod_address(node_index, slot),
            prefix_len: NODE_PREFIX_LEN,
            gateway: self.gateway(node_index),
        }
    }

    /// The bridge of node `node_index`, addressed as the gateway of its pods.
    pub fn node_bridge(self, node_index: usize) -> BridgePlan {
        BridgePlan {
            name: self.bridge(node_index),
            gateway: self.gateway(node_index),
            prefix_len: NODE_PREFIX_LEN,
        }
    }
}

/// Where kube-apiserver takes Services' ClusterIPs from (`--service-cluster-ip-range`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceRange {
    network: Ipv4Addr,
    prefix_len: u8,
}

impl ServiceRange {
    /// Clusters without a pod network: nothing routes their ClusterIPs, so they all share one
    /// range.
    pub const WITHOUT_POD_NETWORK: ServiceRange = ServiceRange {
        network: Ipv4Addr::new(10, 96, 0, 0),
        prefix_len: 16,
    };

    pub fn cidr(self) -> String {
        format!("{}/{}", self.network, self.prefix_len)
    }

    /// The `kubernetes` Service's ClusterIP: the first address of the range.
    pub fn kubernetes_service_ip(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + 1)
    }

    pub fn contains(self, address: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - u32::from(self.prefix_len));
        u32::from(address) & mask == u32::from(self.network)
    }
}

/// One node's bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgePlan {
    pub name: String,
    pub gateway: Ipv4Addr,
    pub prefix_len: u8,
}

/// One pod's link to its node's bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInterface {
    pub bridge: String,
    pub host_veth: String,
    pub address: Ipv4Addr,
    pub prefix_len: u8,
    pub gateway: Ipv4Addr,
}

/// The interface of a pod inside its namespace.
pub const POD_INTERFACE: &str = "eth0";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_and_nodes_get_disjoint_ranges_and_names() {
        struct Case {
            cluster: u8,
            node: usize,
            cluster_cidr: &'static str,
            pod_cidr: &'static str,
            gateway: &'static str,
            bridge: &'static str,
        }
        let cases = [
            Case {
                cluster: 0,
                node: 1,
                cluster_cidr: "100.64.0.0/16",
                pod_cidr: "100.64.1.0/24",
                gateway: "100.64.1.1",
                bridge: "dcp0n1",
            },
            Case {
                cluster: 63,
                node: 254,
                cluster_cidr: "100.127.0.0/16",
                pod_cidr: "100.127.254.0/24",
                gateway: "100.127.254.1",
                bridge: "dcp63n254",
            },
        ];
        for case in cases {
            let network = ClusterNetwork::new(case.cluster).expect("a valid cluster number");
            assert_eq!(network.cluster_cidr(), case.cluster_cidr);
            assert_eq!(network.pod_cidr(case.node), case.pod_cidr);
            assert_eq!(network.gateway(case.node).to_string(), case.gateway);
            assert_eq!(network.bridge(case.node), case.bridge);
        }
    }

    #[test]
    fn a_pod_interface_is_in_its_node_range_and_names_fit_the_kernel_limit() {
        let network = ClusterNetwork::new(63).expect("a valid cluster number");
        let pod = network.pod_interface(254, LAST_POD_HOST);
        assert_eq!(pod.address.to_string(), "100.127.254.254");
        assert_eq!(pod.gateway.to_string(), "100.127.254.1");
        assert_eq!(pod.bridge, "dcp63n254");
        assert_eq!(pod.host_veth, "dcp63n254s254");
        // IFNAMSIZ is 16 bytes with the terminating zero.
        assert!(pod.host_veth.len() <= 15);
    }

    #[test]
    fn each_cluster_has_its_own_service_range_apart_from_its_nodes() {
        let cases = [
            (0, "100.64.255.0/24", "100.64.255.1"),
            (63, "100.127.255.0/24", "100.127.255.1"),
        ];
        for (number, cidr, kubernetes) in cases {
            let network = ClusterNetwork::new(number).expect("a valid cluster number");
            let range = network.service_range();
            assert_eq!(range.cidr(), cidr);
            assert_eq!(range.kubernetes_service_ip().to_string(), kubernetes);
            assert!(range.contains(range.kubernetes_service_ip()));
            assert!(!range.contains(network.gateway(MAX_NODES)));
            assert!(!range.contains(network.apiserver_address()));
        }
        let shared = ServiceRange::WITHOUT_POD_NETWORK;
        assert_eq!(shared.cidr(), "10.96.0.0/16");
        assert_eq!(shared.kubernetes_service_ip().to_string(), "10.96.0.1");
        assert!(shared.contains(std::net::Ipv4Addr::new(10, 96, 255, 254)));
        assert!(!shared.contains(std::net::Ipv4Addr::new(10, 97, 0, 1)));
    }

    #[test]
    fn numbers_and_nodes_out_of_range_are_refused() {
        assert_eq!(ClusterNetwork::new(MAX_CLUSTERS), None);
        assert!(!ClusterNetwork::has_node(0));
        assert!(ClusterNetwork::has_node(1));
        assert!(ClusterNetwork::has_node(MAX_NODES));
        assert!(!ClusterNetwork::has_node(MAX_NODES + 1));
    }
}
