//! Kubelet admission: a pod bound to the node is rejected when its `nodeSelector` does not match
//! the node or the node lacks the CPU, memory or pod slots it requests (pure).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;

/// What the node can give to pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocatable {
    pub cpu_millis: i128,
    pub memory: i128,
    pub pods: i128,
}

/// A pod's effective requests, counted by Kubernetes' rule (the one the scheduler applies too).
pub use k8s_resources::CpuMemory as Requests;

/// Why the pod is rejected: `reason` becomes `status.reason`, `message` `status.message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

/// Whether the node's `labels` carry every label of the pod's `nodeSelector`.
pub fn node_selector_matches(spec: &PodSpec, labels: &BTreeMap<String, String>) -> bool {
    spec.node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
}

/// Admits `spec` on a node with `labels` and `allocatable`, given what already-admitted pods use.
pub fn admit(
    spec: &PodSpec,
    labels: &BTreeMap<String, String>,
    allocatable: Allocatable,
    admitted: &[Requests],
) -> Result<Requests, Rejection> {
    if !node_selector_matches(spec, labels) {
        return Err(Rejection {
            reason: "NodeAffinity".to_owned(),
            message: "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector".to_owned(),
        });
    }
    let wanted = k8s_resources::pod_requests(spec).map_err(|e| Rejection {
        reason: "UnexpectedAdmissionError".to_owned(),
        message: format!("Pod was rejected: {e}"),
    })?;
    let used_pods = i128::try_from(admitted.len()).unwrap_or(i128::MAX);
    let used = admitted
        .iter()
        .fold(Requests::default(), |acc, r| Requests {
            cpu_millis: acc.cpu_millis + r.cpu_millis,
            memory: acc.memory + r.memory,
        });
    let checks = [
        ("pods", 1, used_pods, allocatable.pods),
        (
            "cpu",
            wanted.cpu_millis,
            used.cpu_millis,
            allocatable.cpu_millis,
        ),
        ("memory", wanted.memory, used.memory, allocatable.memory),
    ];
    for (resource, requested, used, capacity) in checks {
        if requested > 0 && requested + used > capacity {
            return Err(Rejection {
                reason: format!("OutOf{resource}"),
                message: format!(
                    "Pod was rejected: Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
                ),
            });
        }
    }
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(value: serde_json::Value) -> PodSpec {
        serde_json::from_value(value).unwrap()
    }

    const NODE: Allocatable = Allocatable {
        cpu_millis: 8000,
        memory: 16 << 30,
        pods: 3,
    };

    #[test]
    fn admits_or_rejects() {
        let labels: BTreeMap<String, String> = [("zone".to_owned(), "a".to_owned())].into();
        let small = Requests {
            cpu_millis: 100,
            memory: 1 << 20,
        };
        let cases = [
            (json!({"containers": [{"name": "a"}]}), vec![], None),
            (
                json!({"containers": [{"name": "a"}], "nodeSelector": {"zone": "a"}}),
                vec![],
                None,
            ),
            (
                json!({"containers": [{"name": "a"}], "nodeSelector": {"zone": "b"}}),
                vec![],
                Some("NodeAffinity"),
            ),
            (
                json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "10", "memory": "10Gi"}}}]}),
                vec![],
                Some("OutOfcpu"),
            ),
            (
                json!({"containers": [{"name": "a", "resources": {"requests": {"memory": "17Gi"}}}]}),
                vec![],
                Some("OutOfmemory"),
            ),
            (
                json!({"containers": [{"name": "a"}]}),
                vec![small; 3],
                Some("OutOfpods"),
            ),
            (
                json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "7950m"}}}]}),
                vec![small],
                Some("OutOfcpu"),
            ),
        ];
        for (s, admitted, expected) in cases {
            let result = admit(&spec(s.clone()), &labels, NODE, &admitted);
            assert_eq!(
                result.err().map(|r| r.reason),
                expected.map(str::to_owned),
                "{s}"
            );
        }
    }

    #[test]
    fn rejection_messages_match_the_kubelet() {
        // The kubelet's reason is "OutOf" + the resource, its message "Pod was rejected: " + the
        // scheduler's InsufficientResourceError; the first missing resource in the order pods,
        // cpu, memory is reported, "used" counting the pods already admitted.
        let used = Requests {
            cpu_millis: 7800,
            memory: 1 << 30,
        };
        let cases = [
            (
                json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}}]}),
                vec![used],
                "OutOfcpu",
                "Pod was rejected: Node didn't have enough resource: cpu, requested: 500, used: 7800, capacity: 8000",
            ),
            (
                json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "10"}}}]}),
                vec![],
                "OutOfcpu",
                "Pod was rejected: Node didn't have enough resource: cpu, requested: 10000, used: 0, capacity: 8000",
            ),
            (
                json!({"containers": [{"name": "a", "resources": {"requests": {"memory": "16Gi"}}}]}),
                vec![used],
                "OutOfmemory",
                "Pod was rejected: Node didn't have enough resource: memory, requested: 17179869184, used: 1073741824, capacity: 17179869184",
            ),
            (
                json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "10"}}}]}),
                vec![used; 3],
                "OutOfpods",
                "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3",
            ),
        ];
        for (s, admitted, reason, message) in cases {
            let r = admit(&spec(s), &BTreeMap::new(), NODE, &admitted).unwrap_err();
            assert_eq!((r.reason.as_str(), r.message.as_str()), (reason, message));
        }
    }
}
