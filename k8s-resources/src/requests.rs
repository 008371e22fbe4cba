//! A pod's effective CPU and memory requests, counted as the scheduler and the kubelet's admission
//! count them, and a node's allocatable CPU and memory in the same units.
//!
//! Rule (Kubernetes' `PodRequests`): the larger of the biggest init container and the sum of the
//! main containers, plus the pod overhead, per resource. CPU is counted in millicores and memory in
//! bytes, both rounded up as the API server rounds requests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity::{QuantityError, parse_quantity};

/// CPU and memory, as requested by a pod or offered by a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuMemory {
    /// CPU in millicores.
    pub cpu_millis: i128,
    /// Memory in bytes.
    pub memory: i128,
}

impl CpuMemory {
    /// Both resources added.
    pub fn plus(self, other: CpuMemory) -> CpuMemory {
        CpuMemory {
            cpu_millis: self.cpu_millis + other.cpu_millis,
            memory: self.memory + other.memory,
        }
    }

    /// Whether `self` fits within `capacity` in both resources.
    pub fn fits_within(self, capacity: CpuMemory) -> bool {
        self.cpu_millis <= capacity.cpu_millis && self.memory <= capacity.memory
    }

    fn max(self, other: CpuMemory) -> CpuMemory {
        CpuMemory {
            cpu_millis: self.cpu_millis.max(other.cpu_millis),
            memory: self.memory.max(other.memory),
        }
    }
}

/// Reads `cpu` and `memory` of a resource list (requests, allocatable); a missing one is zero.
pub fn cpu_memory(list: &BTreeMap<String, Quantity>) -> Result<CpuMemory, QuantityError> {
    let get = |name: &str| {
        list.get(name)
            .map(|q| parse_quantity(q.0.trim()))
            .transpose()
    };
    Ok(CpuMemory {
        cpu_millis: get("cpu")?.map_or(0, |q| q.milli_ceil()),
        memory: get("memory")?.map_or(0, |q| q.units_ceil()),
    })
}

/// The effective requests of a pod. See the module documentation for the rule.
pub fn pod_requests(spec: &PodSpec) -> Result<CpuMemory, QuantityError> {
    let of = |container: &Container| match container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
    {
        Some(requests) => cpu_memory(requests),
        None => Ok(CpuMemory::default()),
    };
    let mut total = CpuMemory::default();
    for container in &spec.containers {
        total = total.plus(of(container)?);
    }
    for container in spec.init_containers.iter().flatten() {
        total = total.max(of(container)?);
    }
    if let Some(overhead) = &spec.overhead {
        total = total.plus(cpu_memory(overhead)?);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(value: serde_json::Value) -> PodSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn effective_requests() {
        let cases = [
            ("no requests", json!({"containers": [{"name": "a"}]}), 0, 0),
            (
                "main containers add up",
                json!({"containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "20Mi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "1.5", "memory": "300Mi"}}}
                ]}),
                1600,
                320 << 20,
            ),
            (
                "the biggest init container wins per resource",
                json!({
                    "initContainers": [
                        {"name": "i1", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}},
                        {"name": "i2", "resources": {"requests": {"cpu": "2"}}}
                    ],
                    "containers": [
                        {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "20Mi"}}}
                    ]
                }),
                2000,
                256 << 20,
            ),
            (
                "overhead is added",
                json!({
                    "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}],
                    "overhead": {"cpu": "10m", "memory": "1Mi"}
                }),
                110,
                1 << 20,
            ),
        ];
        for (name, value, cpu_millis, memory) in cases {
            assert_eq!(
                pod_requests(&spec(value)).unwrap(),
                CpuMemory { cpu_millis, memory },
                "{name}"
            );
        }
    }

    #[test]
    fn an_unreadable_quantity_is_an_error() {
        let bad = spec(json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "lots"}}}
        ]}));
        assert!(pod_requests(&bad).is_err());
    }

    #[test]
    fn fitting() {
        let node = CpuMemory {
            cpu_millis: 1000,
            memory: 1 << 30,
        };
        let half = CpuMemory {
            cpu_millis: 500,
            memory: 1 << 29,
        };
        assert!(half.plus(half).fits_within(node));
        assert!(!half.plus(half).plus(half).fits_within(node));
        let memory_heavy = CpuMemory {
            cpu_millis: 1,
            memory: 2 << 30,
        };
        assert!(!memory_heavy.fits_within(node));
    }
}
