//! Issue #17 items 1 and 2 on a devcluster: a drain that leaves the pods `spec.drain.podSelector`
//! selects and DaemonSet pods alone, and with `onTimeout: fail` gives up on a pod a
//! PodDisruptionBudget protects: the package turns `erroring` and the node is uncordoned; and a
//! node whose package fails is uncordoned with `spec.onFailure.uncordon: true`.

use anyhow::Context;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::conditions::is_pod_running;
use kube::runtime::wait::await_condition;
use serde_json::json;

use e2e::{Setup, WAIT, nodes};

const NODE: &str = "node-1";
const NAMESPACE: &str = "default";

/// A bare pod on `node` that the drain's `podSelector` keeps.
async fn start_kept_pod(client: &kube::Client, node: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "kept", "labels": {"skyhook.nvidia.com/drain": "keep"}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "work", "image": "devcluster.local/sleep"}]
        }
    }))?;
    pods.create(&PostParams::default(), &pod)
        .await
        .context("creating pod kept")?;
    e2e::within(
        "pod kept to run",
        WAIT,
        await_condition(pods, "kept", is_pod_running()),
    )
    .await?;
    Ok(())
}

/// A DaemonSet `agent`; returns once its pod runs on `node`.
async fn start_daemon_set(client: &kube::Client, node: &str) -> anyhow::Result<String> {
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let daemon_set: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "automountServiceAccountToken": false,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "work", "image": "devcluster.local/sleep"}]
                }
            }
        }
    }))?;
    daemon_sets
        .create(&PostParams::default(), &daemon_set)
        .await
        .context("creating DaemonSet agent")?;
    e2e::wait_for(
        &daemon_sets,
        "agent",
        "the DaemonSet pod to be ready",
        |ds| ds.status.as_ref().is_some_and(|s| s.number_ready == 1),
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let listed = pods
        .list(&kube::api::ListParams::default().labels("app=agent"))
        .await?;
    listed
        .items
        .iter()
        .find(|p| on_node_and_running(p, node))
        .and_then(|p| p.metadata.name.clone())
        .context("no running DaemonSet pod on the node")
}

fn on_node_and_running(pod: &Pod, node: &str) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// The `state` of a node-state entry, if there is one.
fn entry_state<'a>(
    state: &'a serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<&'a str> {
    state.get(key)?.get("state")?.as_str()
}

/// Whether `pod` is still there and not being deleted.
async fn still_there(pods: &Api<Pod>, name: &str) -> anyhow::Result<bool> {
    Ok(pods
        .get_opt(name)
        .await?
        .is_some_and(|p| p.metadata.deletion_timestamp.is_none()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_leaves_selected_and_daemon_set_pods_and_fails_into_erroring() -> anyhow::Result<()>
{
    const SKYHOOK: &str = "safe-drain";
    let installed = e2e::install(1).await?;
    let client = installed.cluster.client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    e2e::pods::guard_with_budget(&client, NAMESPACE, NODE, "protected", "guard").await?;
    start_kept_pod(&client, NODE).await?;
    let daemon_pod = start_daemon_set(&client, NODE).await?;

    let skyhook: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "Skyhook",
        "metadata": {"name": SKYHOOK},
        "spec": {
            "nodeSelectors": {"matchLabels": {"kubernetes.io/hostname": NODE}},
            "drain": {
                "timeout": "3s",
                "podSelector": {"matchLabels": {"skyhook.nvidia.com/drain": "keep"}},
                "onTimeout": "fail"
            },
            "packages": {
                "restarter": {
                    "version": "1.1.1",
                    "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
                    "interrupt": {"type": "service", "services": ["cron"]}
                }
            }
        }
    }))?;
    e2e::skyhook_api(&client)
        .patch(SKYHOOK, &PatchParams::apply("e2e"), &Patch::Apply(&skyhook))
        .await
        .context("applying the Skyhook")?;

    let failed_key = format!("skyhook.nvidia.com/drainFail_{SKYHOOK}");
    let node = nodes::wait_for_node(
        &client,
        NODE,
        "the drain to fail: package erroring, node uncordoned and marked",
        |node: &Node| {
            let state = nodes::node_state(node, SKYHOOK).unwrap_or_default();
            let erroring = entry_state(&state, "restarter|1.1.1") == Some("erroring");
            erroring
                && nodes::has_status(node, SKYHOOK, "erroring")
                && !nodes::is_cordoned(node)
                && node
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(&failed_key))
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    assert!(!nodes::is_cordoned(&node));
    assert!(
        still_there(&pods, "protected").await?,
        "the PodDisruptionBudget is honoured"
    );
    assert!(
        still_there(&pods, "kept").await?,
        "podSelector keeps its pods"
    );
    assert!(
        still_there(&pods, &daemon_pod).await?,
        "DaemonSet pods are never evicted"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erroring_node_is_uncordoned_with_on_failure_uncordon() -> anyhow::Result<()> {
    const SKYHOOK: &str = "release-on-failure";
    let installed = e2e::install_with(Setup::agentless(1).single_attempt()).await?;
    let client = installed.cluster.client()?;
    e2e::apply_yaml(
        &client,
        r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: release-on-failure
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  onFailure:
    uncordon: true
  packages:
    broken:
      version: "1.0.0"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: service, services: [cron]}
      env:
        - {name: EXIT_CODE, value: "2"}
        - {name: SLEEP_LEN, value: "1"}
"#,
    )
    .await?;
    // The package interrupts, so its apply runs on the cordoned, drained node; without
    // `onFailure.uncordon` the node would stay cordoned while the package is erroring.
    nodes::wait_for_node(
        &client,
        NODE,
        "the failed package's node to be uncordoned",
        |node: &Node| {
            let state = nodes::node_state(node, SKYHOOK).unwrap_or_default();
            entry_state(&state, "broken|1.0.0") == Some("erroring")
                && nodes::has_status(node, SKYHOOK, "erroring")
                && !nodes::is_cordoned(node)
                && !node.metadata.annotations.as_ref().is_some_and(|a| {
                    a.contains_key(&format!("skyhook.nvidia.com/cordon_{SKYHOOK}"))
                })
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    Ok(())
}
