//! A stage run the plan creates: the pod the builders make, wrapped in its stage Job
//! ([`crate::jobs::job_for`]), held as the Job's JSON as it is sent.
//!
//! A plan that starts every node of a rollout holds one pod per node until the apply has sent
//! them all. As a k8s-openapi `Pod` a package pod is about 11 KB of small allocations (three
//! containers with their environment, mounts and resources); as JSON it is about 3.4 KB in one.
//! The pod is serialized once, where it would have been when sent, so this costs no CPU; the
//! apply reads only its name, node and mounted ConfigMaps besides the body.

use std::fmt;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use crate::jobs::{JobInputs, job_for};

/// A stage Job to create (see the module documentation).
#[derive(Clone, PartialEq, Eq)]
pub struct PlannedPod {
    name: String,
    node: String,
    /// The ConfigMaps its volumes mount.
    configmaps: Vec<String>,
    json: Box<[u8]>,
}

impl PlannedPod {
    /// The Job running `pod`, serialized.
    pub fn new(pod: &Pod, inputs: JobInputs) -> Result<Self, serde_json::Error> {
        let spec = pod.spec.as_ref();
        let configmaps = spec
            .and_then(|spec| spec.volumes.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|volume| volume.config_map.as_ref())
            .map(|source| source.name.clone())
            .collect();
        Ok(PlannedPod {
            name: pod.metadata.name.clone().unwrap_or_default(),
            node: spec
                .and_then(|spec| spec.node_name.clone())
                .unwrap_or_default(),
            configmaps,
            json: serde_json::to_vec(&job_for(pod.clone(), inputs))?.into_boxed_slice(),
        })
    }

    /// The Job's name (the pod's, as earlier releases named their bare pods).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node it runs on.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The ConfigMaps its volumes mount.
    pub fn configmaps(&self) -> &[String] {
        &self.configmaps
    }

    /// The JSON to send.
    pub fn into_json(self) -> Vec<u8> {
        self.json.into_vec()
    }

    /// The Job, decoded again.
    pub fn job(&self) -> Result<Job, serde_json::Error> {
        serde_json::from_slice(&self.json)
    }

    /// The pod the Job runs, decoded again, named and owned as the Job: for tests and logs,
    /// which read its fields.
    pub fn pod(&self) -> Result<Pod, serde_json::Error> {
        let job = self.job()?;
        let template = job.spec.map(|spec| spec.template).unwrap_or_default();
        let mut metadata = template.metadata.unwrap_or_default();
        metadata.name = job.metadata.name;
        metadata.namespace = job.metadata.namespace;
        metadata.owner_references = job.metadata.owner_references;
        Ok(Pod {
            metadata,
            spec: template.spec,
            status: None,
        })
    }
}

impl fmt::Debug for PlannedPod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlannedPod")
            .field("name", &self.name)
            .field("node", &self.node)
            .field("json", &String::from_utf8_lossy(&self.json))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, PodSpec, Volume};
    use kube::api::ObjectMeta;

    use super::*;

    fn inputs() -> JobInputs {
        JobInputs {
            stage: skyhook_api::v1alpha1::Stage::Apply,
            kind: crate::jobs::JobKind::PackageStage,
            resource_id: "s-uid-1_p_1.0.0".to_owned(),
            generation: 1,
            stage_timeout: None,
            backoff_limit: 3,
        }
    }

    #[test]
    fn a_planned_pod_reads_back_as_the_pod_with_its_node_and_mounts() {
        let configmap_volume = |volume: &str, configmap: &str| Volume {
            name: volume.into(),
            config_map: Some(ConfigMapVolumeSource {
                name: configmap.into(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        };
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("gpu-driver-apply-node-1".into()),
                namespace: Some("skyhook".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-1".into()),
                volumes: Some(vec![
                    Volume {
                        name: "root-mount".into(),
                        ..Volume::default()
                    },
                    configmap_volume("metadata", "gpu-node-1-metadata"),
                    configmap_volume("configmap", "gpu-driver-1.0.0"),
                ]),
                ..PodSpec::default()
            }),
            status: None,
        };
        let planned = PlannedPod::new(&pod, inputs()).unwrap();
        assert_eq!(planned.name(), "gpu-driver-apply-node-1");
        assert_eq!(planned.node(), "node-1");
        assert_eq!(
            planned.configmaps(),
            ["gpu-node-1-metadata", "gpu-driver-1.0.0"]
        );
        let decoded = planned.pod().unwrap();
        assert_eq!(decoded.metadata.name, pod.metadata.name);
        assert_eq!(decoded.metadata.namespace, pod.metadata.namespace);
        assert_eq!(decoded.spec.unwrap().volumes, pod.spec.unwrap().volumes);
        let sent: Job = serde_json::from_slice(&planned.clone().into_json()).unwrap();
        assert_eq!(sent, planned.job().unwrap());
        assert_eq!(
            sent.metadata.name.as_deref(),
            Some("gpu-driver-apply-node-1")
        );
    }

    #[test]
    fn a_pod_without_spec_has_no_node_and_no_mounts() {
        let planned = PlannedPod::new(&Pod::default(), inputs()).unwrap();
        assert_eq!((planned.name(), planned.node()), ("", ""));
        assert!(planned.configmaps().is_empty());
    }
}
