//! How much a simulated Node object carries (pure). Real Nodes are 10-40 KB: dozens of image
//! entries, labels from node-feature-discovery and the cloud, annotations from the CNI and CSI
//! drivers, and every standard condition. A controller's memory and watch-decoding figures on
//! bare simulated Nodes flatter it, so the realistic size dresses each Node as a real GPU node.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerImage, Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// What a simulated Node carries besides what the kubelet itself sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum NodeSize {
    /// Only the kubelet's own labels, two annotations, the kubelet's four conditions, no images.
    #[default]
    Small,
    /// As a real node: 50 images, 25 labels, 10 annotations, all standard conditions.
    Realistic,
}

/// Images a realistic node has pulled.
const IMAGES: usize = 50;
/// Labels on a realistic node, the kubelet's own included.
const LABELS: usize = 25;
/// The node-feature-discovery features a realistic node has (one label each).
const FEATURES: [&str; 7] = [
    "cpu-cpuid.AESNI",
    "cpu-cpuid.AVX512F",
    "kernel-version.major",
    "network-sriov.capable",
    "pci-10de.present",
    "storage-nonrotationaldisk",
    "system-os_release.ID",
];

/// The labels a realistic node carries besides the kubelet's and the configured ones, enough to
/// reach [`LABELS`] with the kubelet's five: cloud topology and node-feature-discovery labels.
pub fn extra_labels(index: usize) -> BTreeMap<String, String> {
    let zone = format!("us-west-2{}", ['a', 'b', 'c'][index % 3]);
    let mut labels = BTreeMap::from([
        (
            "topology.kubernetes.io/region".to_owned(),
            "us-west-2".to_owned(),
        ),
        ("topology.kubernetes.io/zone".to_owned(), zone.clone()),
        (
            "failure-domain.beta.kubernetes.io/region".to_owned(),
            "us-west-2".to_owned(),
        ),
        ("failure-domain.beta.kubernetes.io/zone".to_owned(), zone),
        (
            "node.kubernetes.io/instance-type".to_owned(),
            "p4d.24xlarge".to_owned(),
        ),
        (
            "beta.kubernetes.io/instance-type".to_owned(),
            "p4d.24xlarge".to_owned(),
        ),
        ("nvidia.com/gpu.present".to_owned(), "true".to_owned()),
        (
            "nvidia.com/gpu.product".to_owned(),
            "NVIDIA-A100-SXM4-40GB".to_owned(),
        ),
        ("nvidia.com/gpu.count".to_owned(), "8".to_owned()),
        ("nvidia.com/gpu.memory".to_owned(), "40960".to_owned()),
        ("nvidia.com/cuda.driver.major".to_owned(), "550".to_owned()),
        ("nvidia.com/cuda.driver.minor".to_owned(), "90".to_owned()),
        ("nvidia.com/mig.strategy".to_owned(), "single".to_owned()),
    ]);
    for feature in FEATURES {
        labels.insert(
            format!("feature.node.kubernetes.io/{feature}"),
            "true".to_owned(),
        );
    }
    debug_assert_eq!(labels.len(), LABELS - 5);
    labels
}

/// Dresses a Node the kubelet built as a realistic one: annotations, images and the
/// NetworkUnavailable condition a CNI sets.
pub fn dress(node: &mut Node, index: usize, now: Timestamp) {
    let annotations = node.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.extend(extra_annotations(index));
    let Some(status) = node.status.as_mut() else {
        return;
    };
    status.images = Some(images());
    status.conditions.get_or_insert_with(Vec::new).insert(
        0,
        NodeCondition {
            type_: "NetworkUnavailable".to_owned(),
            status: "False".to_owned(),
            reason: Some("CalicoIsUp".to_owned()),
            message: Some("Calico is running on this node".to_owned()),
            last_heartbeat_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
        },
    );
}

/// Eight annotations of the CNI, CSI drivers and node-feature-discovery (the kubelet sets two).
fn extra_annotations(index: usize) -> BTreeMap<String, String> {
    let ip = super::object::node_ip(index);
    let tunnel = format!("192.168.{}.{}", (index >> 8) & 0xff, index & 0xff);
    let instance = format!("i-{index:017x}");
    let csi_ids = format!(r#"{{"ebs.csi.aws.com":"{instance}","efs.csi.aws.com":"{instance}"}}"#);
    let features = FEATURES.join(",");
    let containerd = "unix:///run/containerd/containerd.sock";
    [
        ("projectcalico.org/IPv4Address", format!("{ip}/20")),
        ("projectcalico.org/IPv4IPIPTunnelAddr", tunnel),
        ("csi.volume.kubernetes.io/nodeid", csi_ids),
        (
            "kubeadm.alpha.kubernetes.io/cri-socket",
            containerd.to_owned(),
        ),
        (
            "nfd.node.kubernetes.io/master.version",
            "v0.16.3".to_owned(),
        ),
        (
            "nfd.node.kubernetes.io/worker.version",
            "v0.16.3".to_owned(),
        ),
        ("nfd.node.kubernetes.io/extended-resources", String::new()),
        ("nfd.node.kubernetes.io/feature-labels", features),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect()
}

/// [`IMAGES`] pulled images, each named by digest and by tag, as the kubelet reports them.
fn images() -> Vec<ContainerImage> {
    (0..IMAGES)
        .map(|i| {
            let repository = format!("nvcr.io/nvidia/cloud-native/component-{i:02}");
            let digest = format!(
                "{:064x}",
                (i as u128 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834)
            );
            ContainerImage {
                names: Some(vec![
                    format!("{repository}@sha256:{digest}"),
                    format!("{repository}:v1.{i}.0"),
                ]),
                size_bytes: Some(50_000_000 + 1_000_000 * i as i64),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::object::{NodeFacts, build_node, node_labels};

    #[test]
    fn a_realistic_node_carries_what_a_real_one_does() {
        let facts = NodeFacts {
            kubelet_version: "v1.36.3".into(),
            kernel_version: "6.1".into(),
            os_image: "Debian".into(),
            architecture: "amd64".into(),
            cpu: "8".into(),
            memory: "16Gi".into(),
            pods: "110".into(),
            kubelet_port: 10250,
        };
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let labels = node_labels("node-7", &facts, &extra_labels(7));
        let mut node = build_node("node-7", 7, labels, &facts, "boot-1", now);
        let small = serde_json::to_vec(&node).unwrap().len();
        dress(&mut node, 7, now);
        let status = node.status.as_ref().unwrap();
        let condition_types: Vec<&str> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(
            condition_types,
            [
                "NetworkUnavailable",
                "MemoryPressure",
                "DiskPressure",
                "PIDPressure",
                "Ready"
            ]
        );
        assert_eq!(status.images.as_ref().map(Vec::len), Some(IMAGES));
        assert_eq!(
            node.metadata.labels.as_ref().map(BTreeMap::len),
            Some(LABELS)
        );
        assert_eq!(
            node.metadata.annotations.as_ref().map(BTreeMap::len),
            Some(10)
        );
        let realistic = serde_json::to_vec(&node).unwrap().len();
        assert!(
            small < 3_000 && realistic > 10_000,
            "{small} B, then {realistic} B"
        );
    }
}
