//! The `batch/v1` Job that runs one package stage or interrupt on one node (upstream v0.18's
//! execution model): the pod the controller used to create, wrapped.
//!
//! Contract: [`job_for`] is pure. From the pod [`crate::pods`] builds, and what its caller knows
//! of it ([`JobInputs`]: stage, kind, resource ID), it makes the complete Job:
//! the pod's name and owner, its labels plus `stage`, `node` and `generation` on the Job and the
//! template, the package annotation on both, `resource-id` on the Job, and the retry and deadline
//! settings of its kind:
//! * a package stage: `restartPolicy: Never`, `backoffLimit` from `JOB_BACKOFF_LIMIT`, a pod
//!   failure policy that ignores attempts ended by a disruption (`DisruptionTarget`), and the
//!   stage timeout as each attempt's `activeDeadlineSeconds`;
//! * an interrupt: `restartPolicy: OnFailure`, unbounded `backoffLimit`, the stage timeout as the
//!   whole Job's `activeDeadlineSeconds`, and for an interrupt other than a reboot the
//!   `restart-allowance` annotation (`JOB_BACKOFF_LIMIT`).
//!
//! Both: one pod at a time, a replacement only once the previous attempt has failed
//! (`podReplacementPolicy: Failed`), and no TTL at creation: the TTL is set when the Job's end is
//! recorded, so that the Job cannot vanish before the controller has read how it ended.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{
    Job, JobSpec, PodFailurePolicy, PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kube::api::ObjectMeta;
use skyhook_api::generation::group_of_labels;
use skyhook_api::stage_timeout::deadline_seconds;
use skyhook_api::v1alpha1::Stage;

use crate::names::safe_name;

/// The longest label value.
const MAX_LABEL_VALUE: usize = 63;

/// What a stage's Job needs besides its pod: what the caller knows when it builds the pod, so
/// that the Job is not read back out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInputs {
    /// The stage the Job runs (its `stage` label).
    pub stage: Stage,
    /// A package stage or an interrupt, which decides the retry and deadline settings.
    pub kind: JobKind,
    /// The run's `SKYHOOK_RESOURCE_ID` ([`OwnerSkyhook::stage_resource_id`]), for the
    /// `resource-id` annotation.
    ///
    /// [`OwnerSkyhook::stage_resource_id`]: crate::names::OwnerSkyhook::stage_resource_id
    pub resource_id: String,
    /// The Skyhook's `metadata.generation`.
    pub generation: i64,
    /// The stage timeout (`packages.*.stageTimeout`, else `JOB_STAGE_TIMEOUT`); `None` or zero:
    /// no time bound.
    pub stage_timeout: Option<Duration>,
    /// `JOB_BACKOFF_LIMIT`: failed attempts retried (package stages), restarts allowed
    /// (non-reboot interrupts).
    pub backoff_limit: i32,
}

/// What a Job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// A package stage (apply, config, upgrade, uninstall, post-interrupt and their checks).
    PackageStage,
    /// An interrupt; a reboot is never counted against a restart allowance.
    Interrupt { reboot: bool },
}

/// The value of the `node` label for `node`: the name, or when it is longer than a label may
/// be, its safe name of 63 characters.
pub fn node_label_value(node: &str) -> String {
    if node.len() <= MAX_LABEL_VALUE {
        node.to_owned()
    } else {
        safe_name(MAX_LABEL_VALUE, &[node])
    }
}

/// The Job that runs `pod` (see the module documentation).
pub fn job_for(pod: Pod, inputs: JobInputs) -> Job {
    let Pod {
        metadata: pod_metadata,
        spec,
        status: _,
    } = pod;
    let mut spec = spec.unwrap_or_default();
    let labels = pod_metadata.labels.clone().unwrap_or_default();
    let annotations = pod_metadata.annotations.clone().unwrap_or_default();
    let node = spec.node_name.clone().unwrap_or_default();
    // The Job carries its pod's group's keys, as the pod does.
    let keys = group_of_labels(Some(&labels)).keys();
    let mut job_labels = labels;
    job_labels.insert(keys.stage_label.to_owned(), inputs.stage.to_string());
    job_labels.insert(keys.node_label.to_owned(), node_label_value(&node));
    job_labels.insert(
        keys.generation_label.to_owned(),
        inputs.generation.to_string(),
    );

    let mut job_annotations: BTreeMap<String, String> = annotations
        .iter()
        .filter(|(key, _)| key.as_str() == keys.package_annotation)
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    job_annotations.insert(keys.resource_id_annotation.to_owned(), inputs.resource_id);
    if inputs.kind == (JobKind::Interrupt { reboot: false }) {
        job_annotations.insert(
            keys.restart_allowance_annotation.to_owned(),
            inputs.backoff_limit.to_string(),
        );
    }

    let deadline = deadline_seconds(inputs.stage_timeout);
    let (backoff_limit, pod_failure_policy, job_deadline) = match inputs.kind {
        JobKind::Interrupt { .. } => {
            spec.restart_policy = Some("OnFailure".to_owned());
            (i32::MAX, None, deadline)
        }
        JobKind::PackageStage => {
            spec.restart_policy = Some("Never".to_owned());
            spec.active_deadline_seconds = deadline;
            (inputs.backoff_limit, Some(ignore_disruptions()), None)
        }
    };

    Job {
        metadata: ObjectMeta {
            name: pod_metadata.name.clone(),
            namespace: pod_metadata.namespace.clone(),
            labels: Some(job_labels.clone()),
            annotations: Some(job_annotations),
            owner_references: pod_metadata.owner_references.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            parallelism: Some(1),
            completions: Some(1),
            pod_replacement_policy: Some("Failed".to_owned()),
            backoff_limit: Some(backoff_limit),
            pod_failure_policy,
            active_deadline_seconds: job_deadline,
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(job_labels),
                    annotations: Some(annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(spec),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// Attempts ended by a disruption (eviction, preemption, the taint manager) are not counted.
fn ignore_disruptions() -> PodFailurePolicy {
    PodFailurePolicy {
        rules: vec![PodFailurePolicyRule {
            action: "Ignore".to_owned(),
            on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                type_: crate::cache::pod::DISRUPTION_TARGET.to_owned(),
                status: "True".to_owned(),
            }]),
            on_exit_codes: None,
        }],
    }
}

#[cfg(test)]
mod tests;
