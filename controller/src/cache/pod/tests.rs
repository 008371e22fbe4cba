use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use skyhook_api::v1alpha1::{Interrupt, InterruptType, Stage};

use super::*;
use crate::names::OwnerSkyhook;
use crate::pods::tests::{package, settings, skyhook};
use crate::pods::{PodNode, interrupt_pod, is_reboot_interrupt, package_pod};

/// A package pod as the API server returns it: what the controller created, plus what
/// admission and the kubelet add, plus `status`.
fn served(mut pod: Pod, status: serde_json::Value) -> serde_json::Value {
    pod.metadata.resource_version = Some("42".into());
    pod.metadata.creation_timestamp = Some(Time("2026-11-24T10:00:00Z".parse().unwrap()));
    let mut json = serde_json::to_value(pod).unwrap();
    json["metadata"]["managedFields"] = serde_json::json!([{"manager": "kubelet",
        "operation": "Update", "subresource": "status", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:phase": {}}}}]);
    let spec = &mut json["spec"];
    spec["volumes"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
        "name": "kube-api-access-x", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}));
    for list in ["initContainers", "containers"] {
        for container in spec[list].as_array_mut().unwrap() {
            if let Some(mounts) = container["volumeMounts"].as_array_mut() {
                mounts.push(
                    serde_json::json!({"name": "kube-api-access-x", "mountPath": "/var/run"}),
                );
            }
            container["terminationMessagePath"] = "/dev/termination-log".into();
            container["imagePullPolicy"] = "Always".into();
        }
    }
    spec["tolerations"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
        "key": "node.kubernetes.io/not-ready", "operator": "Exists",
        "effect": "NoExecute", "tolerationSeconds": 300}));
    json["status"] = status;
    json
}

/// Pod statuses through a package pod's life, and an interrupt pod's.
fn statuses() -> [serde_json::Value; 5] {
    [
        serde_json::json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "driver-init", "image": "i", "imageID": "x", "ready": false,
             "restartCount": 0, "state": {"running": {"startedAt": "2026-11-24T10:00:01Z"}}}]}),
        serde_json::json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "driver-init", "image": "i", "imageID": "x", "ready": true,
             "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
            {"name": "driver-apply", "image": "i", "imageID": "x", "ready": false,
             "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff",
             "message": "back-off"}}, "lastState": {"terminated": {"exitCode": 2,
             "reason": "Error", "startedAt": "2026-11-24T10:00:02Z"}}}]}),
        serde_json::json!({"phase": "Failed", "reason": "OutOfcpu",
            "message": "Node didn't have enough resource: cpu"}),
        serde_json::json!({"phase": "Running", "initContainerStatuses": [
            {"name": "driver-init", "image": "i", "imageID": "x", "ready": true,
             "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
            {"name": "driver-apply", "image": "i", "imageID": "x", "ready": true,
             "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
            {"name": "driver-applycheck", "image": "i", "imageID": "x", "ready": true,
             "restartCount": 1, "state": {"terminated": {"exitCode": 0}}}],
            "conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.0.0.1"}),
        serde_json::json!({"phase": "Running", "initContainerStatuses": [
            {"name": "interrupt", "image": "i", "imageID": "x", "ready": false,
             "restartCount": 0, "state": {"terminated": {"exitCode": 137,
             "reason": "Error", "startedAt": "2026-11-24T10:00:03Z"}}}]}),
    ]
}

/// The pod rules read only a `CachedPod`, so a pod decoded from the API server's JSON answers
/// them as the whole pod does exactly when the two convert to the same `CachedPod`.
#[test]
fn a_cached_pod_answers_every_pod_rule_as_the_full_pod() {
    let sky = skyhook("gpu", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let mut driver = package("driver", "1.0.0", "ghcr.io/x/driver");
    driver.env = vec![EnvVar {
        name: "MODE".into(),
        value: Some("fast".into()),
        value_from: None,
    }];
    let node = PodNode::new("node-1", None);
    let apply = package_pod(&settings(), &owner, &driver, &node, Stage::Apply).unwrap();
    let reboot = Interrupt {
        type_: InterruptType::Reboot,
        services: vec![],
    };
    let interrupt = interrupt_pod(&settings(), &owner, &driver, &reboot, &node);
    for created in [&apply, &interrupt] {
        for status in statuses() {
            let json = served(created.clone(), status.clone());
            let full: Pod = serde_json::from_value(json.clone()).unwrap();
            let decoded: CachedPod = serde_json::from_value(json).unwrap();
            assert_eq!(decoded, CachedPod::from(full.clone()), "{status}");
            let spec = decoded.spec.as_ref().unwrap();
            assert_eq!(
                spec.requests,
                pod_requests(full.spec.as_ref().unwrap()).ok()
            );
            assert!(spec.requests.is_some_and(|r| r != CpuMemory::default()));
            assert!(decoded.metadata.managed_fields.is_none());
            assert_eq!(decoded.metadata.labels, full.metadata.labels);
            assert_eq!(decoded.metadata.annotations, full.metadata.annotations);
        }
    }
    let cached_interrupt = CachedPod::from(interrupt);
    assert!(is_reboot_interrupt(&cached_interrupt));
    assert!(!is_reboot_interrupt(&CachedPod::from(apply)));
}

#[test]
fn a_pod_without_spec_or_status_decodes() {
    let cached: CachedPod =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "bare"}})).unwrap();
    assert_eq!(cached.metadata.name.as_deref(), Some("bare"));
    assert!(cached.spec.is_none() && cached.status.is_none());
}

#[test]
fn a_decoded_pod_holds_no_room_for_the_kubernetes_types_it_came_from() {
    let sky = skyhook("gpu", vec![]);
    let owner = OwnerSkyhook::new(skyhook_api::generation::Group::Skyhook, &sky).unwrap();
    let driver = package("driver", "1.0.0", "ghcr.io/x/driver");
    let node = PodNode::new("node-1", None);
    let apply = package_pod(&settings(), &owner, &driver, &node, Stage::Apply).unwrap();
    for status in statuses() {
        let decoded: CachedPod = serde_json::from_value(served(apply.clone(), status)).unwrap();
        let containers = (decoded.spec.as_ref())
            .and_then(|spec| spec.init_containers.as_ref())
            .unwrap();
        assert!(!containers.is_empty());
        assert_eq!(containers.capacity(), containers.len());
        if let Some(statuses) =
            (decoded.status.as_ref()).and_then(|status| status.init_container_statuses.as_ref())
        {
            assert_eq!(statuses.capacity(), statuses.len());
        }
    }
}
