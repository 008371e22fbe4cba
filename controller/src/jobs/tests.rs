use k8s_openapi::api::core::v1::Pod;
use skyhook_api::keys;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, Stage};

use super::*;
use crate::names::OwnerSkyhook;
use crate::pods::tests::{package, settings, skyhook};
use crate::pods::{PodNode, interrupt_pod, package_pod};

fn apply_pod(node: &str) -> Pod {
    let sky = skyhook("gpu", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    package_pod(
        &settings(),
        &owner,
        &package("driver", "1.0.0", "ghcr.io/x/driver"),
        &PodNode::new(node, None),
        Stage::Apply,
    )
    .unwrap()
}

fn interrupt(type_: InterruptType) -> Pod {
    let sky = skyhook("gpu", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let interrupt = Interrupt {
        type_,
        services: vec!["containerd".into()],
    };
    interrupt_pod(
        &settings(),
        &owner,
        &package("driver", "1.0.0", "ghcr.io/x/driver"),
        &interrupt,
        &PodNode::new("node-1", Some("boot-1")),
    )
}

/// What the planner passes for `pod`, as it knows it when it builds the pod.
fn inputs_for(timeout: Option<u64>, kind: JobKind) -> JobInputs {
    let sky = skyhook("gpu", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let stage = match kind {
        JobKind::PackageStage => Stage::Apply,
        JobKind::Interrupt { .. } => Stage::Interrupt,
    };
    JobInputs {
        stage,
        kind,
        resource_id: owner.stage_resource_id(stage, "driver", "1.0.0"),
        generation: 2,
        stage_timeout: timeout.map(Duration::from_secs),
        backoff_limit: 3,
    }
}

fn package_job(pod: Pod, timeout: Option<u64>) -> Job {
    let inputs = inputs_for(timeout, JobKind::PackageStage);
    job_for(pod, inputs)
}

fn interrupt_job(pod: Pod, timeout: Option<u64>, reboot: bool) -> Job {
    let inputs = inputs_for(timeout, JobKind::Interrupt { reboot });
    job_for(pod, inputs)
}

fn label<'j>(job: &'j Job, key: &str) -> Option<&'j str> {
    job.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'j>(job: &'j Job, key: &str) -> Option<&'j str> {
    job.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

#[test]
fn a_package_job_carries_upstreams_labels_annotations_and_retry_settings() {
    let pod = apply_pod("node-1");
    let pod_name = pod.metadata.name.clone();
    let job = package_job(pod, Some(90));
    assert_eq!(job.metadata.name, pod_name);
    assert_eq!(label(&job, keys::SKYHOOK.name_label), Some("gpu"));
    assert_eq!(
        label(&job, keys::SKYHOOK.package_label),
        Some("driver-1.0.0")
    );
    assert_eq!(label(&job, keys::SKYHOOK.stage_label), Some("apply"));
    assert_eq!(label(&job, keys::SKYHOOK.node_label), Some("node-1"));
    assert_eq!(label(&job, keys::SKYHOOK.generation_label), Some("2"));
    assert_eq!(label(&job, keys::SKYHOOK.interrupt_label), None);
    assert!(annotation(&job, keys::SKYHOOK.package_annotation).is_some());
    let id = annotation(&job, keys::SKYHOOK.resource_id_annotation).unwrap();
    assert!(
        id.starts_with("gpu-") && id.ends_with("_driver_1.0.0"),
        "{id}"
    );
    assert_eq!(
        annotation(&job, keys::SKYHOOK.restart_allowance_annotation),
        None
    );
    assert!(job.metadata.owner_references.is_some());

    let spec = job.spec.as_ref().unwrap();
    assert_eq!(
        (spec.parallelism, spec.completions, spec.backoff_limit),
        (Some(1), Some(1), Some(3))
    );
    assert_eq!(spec.pod_replacement_policy.as_deref(), Some("Failed"));
    assert_eq!(spec.ttl_seconds_after_finished, None);
    assert_eq!(spec.active_deadline_seconds, None);
    let rule = &spec.pod_failure_policy.as_ref().unwrap().rules[0];
    assert_eq!(rule.action, "Ignore");
    assert_eq!(
        rule.on_pod_conditions.as_ref().unwrap()[0].type_,
        "DisruptionTarget"
    );
    let template = &spec.template;
    let template_meta = template.metadata.as_ref().unwrap();
    assert_eq!(template_meta.labels, job.metadata.labels);
    assert!(
        template_meta
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(keys::SKYHOOK.package_annotation)
    );
    let pod_spec = template.spec.as_ref().unwrap();
    assert_eq!(pod_spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(pod_spec.active_deadline_seconds, Some(90));
    assert_eq!(pod_spec.node_name.as_deref(), Some("node-1"));
}

#[test]
fn an_interrupt_job_retries_without_bound_inside_one_stage_deadline() {
    let job = interrupt_job(interrupt(InterruptType::Service), Some(600), false);
    assert_eq!(label(&job, keys::SKYHOOK.interrupt_label), Some("True"));
    assert_eq!(label(&job, keys::SKYHOOK.stage_label), Some("interrupt"));
    assert_eq!(
        annotation(&job, keys::SKYHOOK.restart_allowance_annotation),
        Some("3")
    );
    let spec = job.spec.as_ref().unwrap();
    assert_eq!(spec.backoff_limit, Some(i32::MAX));
    assert!(spec.pod_failure_policy.is_none());
    assert_eq!(spec.active_deadline_seconds, Some(600));
    let pod_spec = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod_spec.restart_policy.as_deref(), Some("OnFailure"));
    assert_eq!(pod_spec.active_deadline_seconds, None);
    // The boot ID at creation stays on the template: it tells a reboot from a failure.
    let template_annotations = spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref();
    assert_eq!(
        template_annotations
            .unwrap()
            .get(keys::SKYHOOK.boot_id_annotation)
            .map(String::as_str),
        Some("boot-1")
    );
}

#[test]
fn a_reboot_is_never_given_a_restart_allowance() {
    let job = interrupt_job(interrupt(InterruptType::Reboot), None, true);
    assert_eq!(
        annotation(&job, keys::SKYHOOK.restart_allowance_annotation),
        None
    );
    assert_eq!(job.spec.as_ref().unwrap().active_deadline_seconds, None);
}

#[test]
fn a_node_name_longer_than_a_label_is_shortened_as_names_are() {
    assert_eq!(node_label_value("node-1"), "node-1");
    let long = "n".repeat(70);
    let value = node_label_value(&long);
    assert_eq!(value.len(), 63);
    assert_eq!(value, safe_name(63, &[long.as_str()]));
    let job = package_job(apply_pod(&long), None);
    assert_eq!(label(&job, keys::SKYHOOK.node_label), Some(value.as_str()));
}
