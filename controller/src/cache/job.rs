//! The controller's stage Jobs as the cache holds them: the metadata, what the Job rules read of
//! the spec (`suspend`, `backoffLimit`, the pod template) and of the status (the true
//! conditions with their times, the counts of active, failed and succeeded pods).
//!
//! The `last-logs` annotation (up to 16 KiB of a stuck stage's log, on every Job that sat at
//! `FailureTarget`) is not kept: the rules only ask whether it is there ([`CachedJob::last_logs`]).
//! Nor is the Job's copy of the package annotation: the template's is the one the rules read.
//!
//! The template is kept as a [`CachedPod`] without status: the planner reads a Job's run through
//! it (its node, package annotation and init containers), exactly as it reads a bare pod. The
//! template, not an attempt's pod, is what pod validation compares with the spec: admission adds
//! LimitRange defaults to attempts, never to the template the controller wrote.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Deserializer};
use skyhook_api::generation::group_of_labels;

use super::pod::CachedPod;
use super::slim::WireMeta;

/// A stage Job as the cache holds it (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CachedJob {
    /// The metadata, without `managedFields` and without the `last-logs` and package
    /// annotations.
    pub metadata: ObjectMeta,
    /// The Job carries the `last-logs` annotation.
    pub last_logs: bool,
    /// `spec.suspend`.
    pub suspend: bool,
    /// `spec.backoffLimit`.
    pub backoff_limit: Option<i32>,
    /// `spec.ttlSecondsAfterFinished`.
    pub ttl_seconds_after_finished: Option<i32>,
    /// The pod template as a pod without status, named, owned and timed as the Job: the run the
    /// planner reads in place of a bare pod.
    pub template: std::sync::Arc<CachedPod>,
    /// The conditions whose status is `True`.
    pub conditions: Vec<JobCondition>,
    /// `status.failed`: the failed attempts so far.
    pub failed: i32,
}

/// A true condition of a Job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobCondition {
    /// `Complete`, `Failed`, `FailureTarget`, `SuccessCriteriaMet`, `Suspended`.
    pub type_: String,
    /// E.g. `BackoffLimitExceeded`, `DeadlineExceeded`.
    pub reason: Option<String>,
    /// The Job controller's explanation.
    pub message: Option<String>,
    /// When it became true.
    pub since: Option<Timestamp>,
}

impl CachedJob {
    /// The true condition of type `type_`.
    pub fn condition(&self, type_: &str) -> Option<&JobCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// It completed.
    pub fn complete(&self) -> bool {
        self.condition("Complete").is_some()
    }

    /// It failed for good.
    pub fn failed_for_good(&self) -> bool {
        self.condition("Failed").is_some()
    }

    /// It completed or failed for good.
    pub fn finished(&self) -> bool {
        self.complete() || self.failed_for_good()
    }
}

resource_of!(CachedJob, Job);

impl<'de> Deserialize<'de> for CachedJob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireJob::deserialize(deserializer)?;
        Ok(wire.into_cached())
    }
}

#[derive(Deserialize)]
struct WireJob {
    #[serde(default)]
    metadata: WireMeta,
    spec: Option<WireJobSpec>,
    status: Option<WireJobStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireJobSpec {
    suspend: Option<bool>,
    backoff_limit: Option<i32>,
    ttl_seconds_after_finished: Option<i32>,
    template: Option<CachedPod>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireJobStatus {
    conditions: Option<Vec<WireJobCondition>>,
    failed: Option<i32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireJobCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: Option<String>,
    message: Option<String>,
    last_transition_time: Option<Time>,
}

impl WireJob {
    fn into_cached(self) -> CachedJob {
        let (suspend, backoff_limit, ttl_seconds_after_finished, template) = match self.spec {
            Some(spec) => (
                spec.suspend.unwrap_or(false),
                spec.backoff_limit,
                spec.ttl_seconds_after_finished,
                spec.template.unwrap_or_default(),
            ),
            None => (false, None, None, CachedPod::default()),
        };
        let status = self.status;
        let mut metadata = self.metadata.into_meta();
        let keys = group_of_labels(metadata.labels.as_ref()).keys();
        let last_logs = (metadata.annotations.as_mut())
            .is_some_and(|a| a.remove(keys.last_logs_annotation).is_some());
        // The package JSON is on the template too, where the rules read it.
        if let Some(annotations) = metadata.annotations.as_mut() {
            annotations.remove(keys.package_annotation);
        }
        let mut template = template;
        template.metadata.name.clone_from(&metadata.name);
        template.metadata.namespace.clone_from(&metadata.namespace);
        template.metadata.uid.clone_from(&metadata.uid);
        template
            .metadata
            .resource_version
            .clone_from(&metadata.resource_version);
        template
            .metadata
            .owner_references
            .clone_from(&metadata.owner_references);
        template
            .metadata
            .creation_timestamp
            .clone_from(&metadata.creation_timestamp);
        template
            .metadata
            .deletion_timestamp
            .clone_from(&metadata.deletion_timestamp);
        CachedJob {
            metadata,
            last_logs,
            suspend,
            backoff_limit,
            ttl_seconds_after_finished,
            template: std::sync::Arc::new(template),
            conditions: status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .filter(|c| c.status == "True")
                .map(|c| JobCondition {
                    type_: c.type_.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    since: c.last_transition_time.as_ref().map(|t| t.0),
                })
                .collect(),
            failed: status.as_ref().and_then(|s| s.failed).unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_job_keeps_its_template_true_conditions_and_counts() {
        let json = serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "gpu-driver-1.0.0-apply-node-1", "namespace": "skyhook",
                "managedFields": [{"manager": "kube-controller-manager"}],
                "labels": {"skyhook.nvidia.com/name": "gpu"}},
            "spec": {"suspend": true, "backoffLimit": 3, "parallelism": 1,
                "template": {"metadata": {"labels": {"skyhook.nvidia.com/name": "gpu"}},
                    "spec": {"nodeName": "node-1", "restartPolicy": "Never",
                        "initContainers": [{"name": "gpu-driver-apply", "image": "x:1"}],
                        "containers": [{"name": "done", "image": "x:1"}]}}},
            "status": {"failed": 2, "active": 1, "conditions": [
                {"type": "FailureTarget", "status": "False"},
                {"type": "Suspended", "status": "True", "reason": "JobSuspended",
                 "lastTransitionTime": "2026-11-28T10:00:00Z"}]}
        });
        let job: CachedJob = serde_json::from_value(json).unwrap();
        assert_eq!(
            job.metadata.name.as_deref(),
            Some("gpu-driver-1.0.0-apply-node-1")
        );
        assert!(job.metadata.managed_fields.is_none());
        assert!(job.suspend);
        assert_eq!(job.backoff_limit, Some(3));
        assert_eq!(job.failed, 2);
        assert_eq!(job.conditions.len(), 1);
        assert_eq!(job.conditions[0].type_, "Suspended");
        assert!(!job.finished());
        let spec = job.template.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        assert_eq!(
            spec.init_containers.as_ref().unwrap()[0].name,
            "gpu-driver-apply"
        );
    }

    #[test]
    fn the_job_controllers_uids_and_the_jobs_package_copy_are_not_kept() {
        let job_labels = serde_json::json!({
            "skyhook.nvidia.com/name": "gpu",
            "batch.kubernetes.io/controller-uid": "5e3c1d2a-0000-4000-8000-000000000001",
            "controller-uid": "5e3c1d2a-0000-4000-8000-000000000001",
            "batch.kubernetes.io/job-name": "gpu-driver-1.0.0-apply-node-1",
            "job-name": "gpu-driver-1.0.0-apply-node-1"});
        let json = serde_json::json!({
            "metadata": {"name": "gpu-driver-1.0.0-apply-node-1",
                "labels": {"skyhook.nvidia.com/name": "gpu"},
                "annotations": {"skyhook.nvidia.com/package": "{\"name\":\"driver\"}",
                    "skyhook.nvidia.com/resource-id": "gpu-uid-1_driver_1.0.0"}},
            "spec": {"template": {"metadata": {"labels": job_labels,
                "annotations": {"skyhook.nvidia.com/package": "{\"name\":\"driver\"}"}}}}
        });
        let job: CachedJob = serde_json::from_value(json).unwrap();
        let annotations = job.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            ["skyhook.nvidia.com/resource-id"]
        );
        let template = &job.template.metadata;
        assert!(
            (template.annotations.as_ref().unwrap()).contains_key("skyhook.nvidia.com/package")
        );
        assert_eq!(
            template.labels.as_ref().unwrap().keys().collect::<Vec<_>>(),
            ["batch.kubernetes.io/job-name", "skyhook.nvidia.com/name"]
        );
        // Before Kubernetes 1.27 the unprefixed name was the only one, and it is kept.
        let old: CachedPod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "attempt", "labels": {"job-name": "j", "controller-uid": "u"}}
        }))
        .unwrap();
        assert_eq!(
            old.metadata.labels.unwrap().keys().collect::<Vec<_>>(),
            ["job-name"]
        );
    }

    #[test]
    fn the_last_logs_annotation_is_kept_as_a_flag_and_failure_target_with_its_time() {
        let json = serde_json::json!({
            "metadata": {"name": "j", "annotations": {
                "skyhook.nvidia.com/last-logs": "interrupt:\nlots of log",
                "skyhook.nvidia.com/state-recorded": "false"}},
            "status": {"conditions": [{"type": "FailureTarget", "status": "True",
                "reason": "DeadlineExceeded", "lastTransitionTime": "2026-11-28T10:00:00Z"}]}
        });
        let job: CachedJob = serde_json::from_value(json).unwrap();
        assert!(job.last_logs);
        let annotations = job.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            ["skyhook.nvidia.com/state-recorded"]
        );
        let target = job.condition("FailureTarget").unwrap();
        assert_eq!(target.since, Some("2026-11-28T10:00:00Z".parse().unwrap()));
        let without: CachedJob =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "j"}})).unwrap();
        assert!(!without.last_logs);
    }

    #[test]
    fn complete_and_failed_read_from_true_conditions_only() {
        let with = |type_: &str, status: &str| -> CachedJob {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "j"},
                "status": {"conditions": [{"type": type_, "status": status}]}
            }))
            .unwrap()
        };
        assert!(with("Complete", "True").complete());
        assert!(!with("Complete", "False").complete());
        assert!(with("Failed", "True").failed_for_good());
        assert!(with("Failed", "True").finished());
        assert!(!with("FailureTarget", "True").finished());
    }
}
