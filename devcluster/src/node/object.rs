//! The API objects of a simulated node: the Node with its status, its Lease, and the patches that
//! keep them fresh (pure).

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use serde_json::json;

use super::heartbeat_timing::Heartbeat;

/// Namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Machine-level facts shared by every simulated node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    pub kubelet_version: String,
    pub kernel_version: String,
    pub os_image: String,
    pub architecture: String,
    pub cpu: String,
    pub memory: String,
    pub pods: String,
    /// The port of the node's kubelet API (`status.daemonEndpoints`).
    pub kubelet_port: u16,
}

/// The Kubernetes name of the machine's architecture.
pub fn kube_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// The node's InternalIP: a loopback address (the whole 127/8 reaches this machine), distinct
/// per node index.
pub fn node_ip(index: usize) -> String {
    node_address(index).to_string()
}

/// [`node_ip`] as an address.
pub fn node_address(index: usize) -> std::net::Ipv4Addr {
    let [.., high, low] = index.to_be_bytes();
    std::net::Ipv4Addr::new(127, 1, high, low)
}

/// A pod IP on the node, also loopback so pods that serve can be reached; `slot` is 1..=254.
pub fn pod_ip(node_index: usize, slot: u8) -> String {
    format!(
        "127.{}.{}.{}",
        2 + ((node_index >> 8) % 250),
        node_index & 0xff,
        slot
    )
}

/// The labels a kubelet puts on its node, then the configured ones.
pub fn node_labels(
    name: &str,
    facts: &NodeFacts,
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_owned(), name.to_owned()),
        ("kubernetes.io/os".to_owned(), "linux".to_owned()),
        ("kubernetes.io/arch".to_owned(), facts.architecture.clone()),
        ("beta.kubernetes.io/os".to_owned(), "linux".to_owned()),
        (
            "beta.kubernetes.io/arch".to_owned(),
            facts.architecture.clone(),
        ),
    ]);
    labels.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels
}

fn quantities(facts: &NodeFacts) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_owned(), Quantity(facts.cpu.clone())),
        ("memory".to_owned(), Quantity(facts.memory.clone())),
        ("pods".to_owned(), Quantity(facts.pods.clone())),
        ("ephemeral-storage".to_owned(), Quantity("100Gi".to_owned())),
    ])
}

/// The Node as the kubelet registers it, Ready, with its status (the API server keeps the
/// status of a Node on create).
pub fn build_node(
    name: &str,
    index: usize,
    labels: BTreeMap<String, String>,
    facts: &NodeFacts,
    boot_id: &str,
    now: Timestamp,
) -> Node {
    let machine_id = format!("{:032x}", fnv1a(name.as_bytes()));
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                ("node.alpha.kubernetes.io/ttl".to_owned(), "0".to_owned()),
                (
                    "volumes.kubernetes.io/controller-managed-attach-detach".to_owned(),
                    "true".to_owned(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            capacity: Some(quantities(facts)),
            allocatable: Some(quantities(facts)),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".to_owned(),
                    address: node_ip(index),
                },
                NodeAddress {
                    type_: "Hostname".to_owned(),
                    address: name.to_owned(),
                },
            ]),
            conditions: Some(conditions(true, now)),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: Some(DaemonEndpoint {
                    port: i32::from(facts.kubelet_port),
                }),
            }),
            node_info: Some(NodeSystemInfo {
                architecture: facts.architecture.clone(),
                boot_id: boot_id.to_owned(),
                container_runtime_version: format!("devcluster://{}", env!("CARGO_PKG_VERSION")),
                kernel_version: facts.kernel_version.clone(),
                kube_proxy_version: String::new(),
                kubelet_version: facts.kubelet_version.clone(),
                machine_id: machine_id.clone(),
                operating_system: "linux".to_owned(),
                os_image: facts.os_image.clone(),
                system_uuid: machine_id,
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    }
}

/// The kubelet's four pressure conditions plus Ready.
fn conditions(ready: bool, now: Timestamp) -> Vec<NodeCondition> {
    let cond = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    let (status, reason, message) = if ready {
        ("True", "KubeletReady", "kubelet is posting ready status")
    } else {
        ("False", "KubeletNotReady", "node is shutting down")
    };
    vec![
        cond(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        cond(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        cond(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        cond("Ready", status, reason, message),
    ]
}

/// A strategic-merge patch of the node status: conditions merge by type, so fields and
/// conditions not named here survive. With `transition` the Ready condition's transition time
/// moves to `now`.
pub fn status_patch(
    ready: bool,
    boot_id: &str,
    now: Timestamp,
    transition: bool,
) -> serde_json::Value {
    let mut conds = conditions(ready, now);
    for c in &mut conds {
        if !(transition && c.type_ == "Ready") {
            c.last_transition_time = None;
        }
    }
    json!({
        "status": {
            "conditions": conds,
            "nodeInfo": { "bootID": boot_id },
        }
    })
}

/// Whether a Node's Ready condition is True.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// The taints kube-controller-manager's node lifecycle controller keeps on a node while it is
/// not Ready or not reachable.
pub const LIFECYCLE_TAINTS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// Whether a Node is Ready and kube-controller-manager has taken its lifecycle taints off. A new
/// node registers with `not-ready` and keeps it for a few seconds after it turns Ready (at 1,000
/// nodes, most of them still had it when they were all Ready); until then only pods tolerating
/// it run there. Other taints (registered with the node on purpose) do not count.
pub fn is_settled(node: &Node) -> bool {
    let lifecycle_tainted = node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .is_some_and(|taints| {
            taints
                .iter()
                .any(|taint| LIFECYCLE_TAINTS.contains(&taint.key.as_str()))
        });
    is_ready(node) && !lifecycle_tainted
}

/// Whether a running kubelet posts its node's status now, as the real one decides every
/// `nodeStatusUpdateFrequency`: when the API server's copy differs from what it would post (Ready
/// not True, say after kube-controller-manager set it Unknown; another boot ID), or when its last
/// post is `report_interval` old. `current` is `None` while the Node is not known yet (the
/// registration posts its status).
pub fn status_needs_post(
    current: Option<&Node>,
    boot_id: &str,
    since_last_post: Option<std::time::Duration>,
    report_interval: std::time::Duration,
) -> bool {
    let Some(node) = current else {
        return false;
    };
    let posted_boot_id = node
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|info| info.boot_id.as_str());
    !is_ready(node)
        || posted_boot_id != Some(boot_id)
        || since_last_post.is_none_or(|since| since >= report_interval)
}

/// The node's Lease, held by the node itself.
pub fn build_lease(name: &str, now: Timestamp, heartbeat: Heartbeat) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(LEASE_NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name.to_owned()),
            lease_duration_seconds: Some(heartbeat.lease_duration_seconds()),
            renew_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
    }
}

/// A merge patch renewing a lease.
pub fn lease_renewal(now: Timestamp) -> serde_json::Value {
    json!({ "spec": { "renewTime": MicroTime(now) } })
}

/// A stable 128-bit id from a name (FNV-1a), for machine ID and system UUID.
fn fnv1a(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    bytes.iter().fold(OFFSET, |hash, b| {
        (hash ^ u128::from(*b)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> NodeFacts {
        NodeFacts {
            kubelet_version: "v1.36.3".into(),
            kernel_version: "6.1".into(),
            os_image: "Debian".into(),
            architecture: "amd64".into(),
            cpu: "8".into(),
            memory: "16Gi".into(),
            pods: "110".into(),
            kubelet_port: 10250,
        }
    }

    #[test]
    fn node_carries_the_kubelet_labels_and_status() {
        let extra = BTreeMap::from([("tier".to_owned(), "gpu".to_owned())]);
        let labels = node_labels("node-2", &facts(), &extra);
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let node = build_node("node-2", 2, labels, &facts(), "boot-1", now);
        let labels = node.metadata.labels.as_ref().unwrap();
        for (k, v) in [
            ("kubernetes.io/hostname", "node-2"),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("tier", "gpu"),
        ] {
            assert_eq!(labels.get(k).map(String::as_str), Some(v), "{k}");
        }
        let status = node.status.as_ref().unwrap();
        let ready = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "True");
        assert!(is_ready(&node));
        let info = status.node_info.as_ref().unwrap();
        assert_eq!(info.boot_id, "boot-1");
        assert_eq!(info.kubelet_version, "v1.36.3");
        assert_eq!(status.addresses.as_ref().unwrap()[0].address, "127.1.0.2");
        assert_eq!(
            status.allocatable.as_ref().unwrap().get("pods"),
            Some(&Quantity("110".into()))
        );
    }

    #[test]
    fn a_node_is_settled_when_ready_without_lifecycle_taints() {
        let node = |ready: &str, taints: &[&str]| -> Node {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "n"},
                "spec": {"taints": taints.iter()
                    .map(|key| serde_json::json!({"key": key, "effect": "NoSchedule"}))
                    .collect::<Vec<_>>()},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}
            }))
            .unwrap()
        };
        let cases = [
            ("True", vec![], true),
            ("True", vec!["node.kubernetes.io/not-ready"], false),
            ("True", vec!["node.kubernetes.io/unreachable"], false),
            ("True", vec!["example.com/maintenance=pending"], true),
            ("False", vec![], false),
            ("Unknown", vec!["node.kubernetes.io/unreachable"], false),
        ];
        for (ready, taints, settled) in cases {
            assert_eq!(
                is_settled(&node(ready, &taints)),
                settled,
                "{ready} {taints:?}"
            );
        }
    }

    #[test]
    fn addresses_are_distinct_loopback_addresses() {
        let cases = [(1, "127.1.0.1"), (256, "127.1.1.0"), (1000, "127.1.3.232")];
        for (index, ip) in cases {
            assert_eq!(node_ip(index), ip);
        }
        assert_eq!(pod_ip(1, 7), "127.2.1.7");
        assert_eq!(pod_ip(1000, 7), "127.5.232.7");
    }

    #[test]
    fn status_patch_sets_ready_and_boot_id() {
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let patch = status_patch(false, "boot-2", now, true);
        let conds = patch["status"]["conditions"].as_array().unwrap();
        let ready = conds.iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["reason"], "KubeletNotReady");
        assert_eq!(patch["status"]["nodeInfo"]["bootID"], "boot-2");
        let heartbeat = status_patch(true, "boot-2", now, false);
        assert!(
            heartbeat["status"]["conditions"][3]
                .get("lastTransitionTime")
                .is_none()
        );
    }

    #[test]
    fn status_is_posted_when_the_api_copy_differs_or_is_old() {
        use std::time::Duration;
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let node = |ready: &str, boot_id: &str| {
            let mut node = build_node("node-1", 1, BTreeMap::new(), &facts(), boot_id, now);
            for condition in node
                .status
                .as_mut()
                .unwrap()
                .conditions
                .iter_mut()
                .flatten()
            {
                if condition.type_ == "Ready" {
                    condition.status = ready.to_owned();
                }
            }
            node
        };
        let report = Duration::from_secs(300);
        let recent = Some(Duration::from_secs(10));
        let cases = [
            (
                "unchanged and recent",
                Some(node("True", "boot-1")),
                recent,
                false,
            ),
            (
                "kcm set Ready Unknown",
                Some(node("Unknown", "boot-1")),
                recent,
                true,
            ),
            (
                "NotReady from a shutdown",
                Some(node("False", "boot-1")),
                recent,
                true,
            ),
            ("stale boot ID", Some(node("True", "boot-0")), recent, true),
            (
                "report interval elapsed",
                Some(node("True", "boot-1")),
                Some(report),
                true,
            ),
            (
                "never posted by this kubelet",
                Some(node("True", "boot-1")),
                None,
                true,
            ),
            ("not in the watch yet", None, None, false),
        ];
        for (case, current, since, expected) in cases {
            assert_eq!(
                status_needs_post(current.as_ref(), "boot-1", since, report),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn maps_architectures() {
        assert_eq!(kube_arch("x86_64"), "amd64");
        assert_eq!(kube_arch("aarch64"), "arm64");
        assert_eq!(kube_arch("riscv64"), "riscv64");
    }
}
