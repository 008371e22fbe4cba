//! The pods the controller creates for a Skyhook (spec §2.8) and what tests read from them.

use anyhow::Context;
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, PostParams};
use kube::runtime::conditions::is_pod_running;
use kube::runtime::wait::await_condition;
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::Recorder;

/// The namespace of package and interrupt pods.
pub const NAMESPACE: &str = skyhook_devcluster::install::NAMESPACE;

/// Records every version of every pod of `skyhook` (label `skyhook.nvidia.com/name`).
pub async fn record_pods(client: &kube::Client, skyhook: &str) -> anyhow::Result<Recorder<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = format!("skyhook.nvidia.com/name={skyhook}");
    Recorder::start(pods, watcher::Config::default().labels(&selector)).await
}

/// Waits until `condition` holds for the live pods (not being deleted) of `skyhook`; returns
/// them then. The error shows `(node, package, stage)` of the pods as they were last.
pub async fn wait_for_live_pods(
    client: &kube::Client,
    skyhook: &str,
    what: &str,
    condition: impl Fn(&[Pod]) -> bool,
) -> anyhow::Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = format!("skyhook.nvidia.com/name={skyhook}");
    let config = watcher::Config::default().labels(&selector);
    match crate::wait::wait_for_all(pods.clone(), config, what, condition).await {
        Ok(live) => Ok(live),
        Err(error) => {
            let last = pods
                .list(&kube::api::ListParams::default().labels(&selector))
                .await
                .map(|list| placements(&list.items));
            Err(error.context(format!("pods of {skyhook} last: {last:?}")))
        }
    }
}

/// `(node, package, stage)` of each pod with a package annotation, sorted.
pub fn placements(pods: &[Pod]) -> Vec<(String, String, String)> {
    let mut placed: Vec<(String, String, String)> = pods
        .iter()
        .filter_map(|pod| {
            let (package, stage) = package_and_stage(pod)?;
            let node = pod.spec.as_ref()?.node_name.clone()?;
            Some((node, package, stage))
        })
        .collect();
    placed.sort();
    placed
}

/// The decoded `skyhook.nvidia.com/package` annotation: `{name, version, skyhook, stage, image…}`.
pub fn package_annotation(pod: &Pod) -> Option<Value> {
    let text = pod
        .metadata
        .annotations
        .as_ref()?
        .get("skyhook.nvidia.com/package")?;
    serde_json::from_str(text).ok()
}

/// `(package name, stage)` from the pod's package annotation.
pub fn package_and_stage(pod: &Pod) -> Option<(String, String)> {
    let annotation = package_annotation(pod)?;
    Some((
        annotation["name"].as_str()?.to_owned(),
        annotation["stage"].as_str()?.to_owned(),
    ))
}

/// The pod's init containers.
pub fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.init_containers.as_deref())
        .unwrap_or_default()
}

/// The names of the pod's init containers, in order.
pub fn init_container_names(pod: &Pod) -> Vec<&str> {
    init_containers(pod)
        .iter()
        .map(|container| container.name.as_str())
        .collect()
}

/// The first recorded pod (any version) for `package` at `stage`.
pub fn find_pod<'a>(pods: &'a [Pod], package: &str, stage: &str) -> Option<&'a Pod> {
    pods.iter().find(|pod| {
        package_and_stage(pod).is_some_and(|(name, found)| name == package && found == stage)
    })
}

/// The distinct `(package, stage)` pairs of the recorded pods, in order of first appearance.
pub fn package_stages(pods: &[Pod]) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    for pair in pods.iter().filter_map(package_and_stage) {
        if !seen.contains(&pair) {
            seen.push(pair);
        }
    }
    seen
}

/// Starts a workload pod `pod` (label `app=guarded`) on `node` in `namespace` and a
/// PodDisruptionBudget `budget` that allows none of its evictions, so that a drain of the node
/// is refused; returns once the pod runs and the budget counts it.
pub async fn guard_with_budget(
    client: &kube::Client,
    namespace: &str,
    node: &str,
    pod: &str,
    budget: &str,
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let workload: Pod = serde_json::from_value(json!({
        "metadata": {"name": pod, "labels": {"app": "guarded"}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "work", "image": "devcluster.local/sleep"}]
        }
    }))?;
    pods.create(&PostParams::default(), &workload)
        .await
        .with_context(|| format!("creating pod {namespace}/{pod} on {node}"))?;
    crate::within(
        &format!("pod {pod} to run"),
        crate::WAIT,
        await_condition(pods, pod, is_pod_running()),
    )
    .await?;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), namespace);
    let guard: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": budget},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}
    }))?;
    budgets
        .create(&PostParams::default(), &guard)
        .await
        .with_context(|| format!("creating PodDisruptionBudget {namespace}/{budget}"))?;
    crate::wait_for(
        &budgets,
        budget,
        &format!("PodDisruptionBudget {budget} to allow no disruption"),
        |b| {
            b.status
                .as_ref()
                .is_some_and(|s| s.current_healthy == 1 && s.disruptions_allowed == 0)
        },
    )
    .await?;
    Ok(())
}
