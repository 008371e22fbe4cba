//! Package pods per node (issue 12, item 4) on a one-node devcluster with the `agentless`
//! packages: a Skyhook of 30 independent packages never has more than `MAX_PODS_PER_NODE` of the
//! controller's pods on the node and completes with nothing erroring; a pod the simulated kubelet
//! refuses for want of CPU (reason, phase and message as a real kubelet's) is created again after
//! its backoff, with a Warning Event, instead of staying `erroring`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

use e2e::nodes;
use e2e::pods::{self, NAMESPACE};
use e2e::{Setup, skyhook_manifest};

const NODE: &str = "node-1";
const AGENTLESS: &str = "ghcr.io/nvidia/skyhook/agentless";

/// A Skyhook of `count` independent packages named `pkg-00x`…, each sleeping `sleep` seconds per
/// stage.
fn many_packages(name: &str, count: usize, sleep: &str) -> String {
    let packages: serde_json::Map<String, Value> = (0..count)
        .map(|i| {
            (
                format!("pkg-{i:03}x"),
                json!({
                    "version": "1.0.0",
                    "image": AGENTLESS,
                    "env": [{"name": "SLEEP_LEN", "value": sleep}],
                }),
            )
        })
        .collect();
    skyhook_manifest(
        name,
        json!({
            "nodeSelectors": {"matchLabels": {e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}},
            "packages": packages,
        }),
        json!({}),
    )
}

/// The most controller pods seen on each node at any moment, counted after every watch event
/// (pods being deleted included: they still hold their share of the node; finished ones not).
struct PodCounter {
    peak: Arc<Mutex<BTreeMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodCounter {
    async fn start(client: &kube::Client) -> anyhow::Result<Self> {
        let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let config = watcher::Config::default().labels("skyhook.nvidia.com/name");
        let peak = Arc::new(Mutex::new(BTreeMap::new()));
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let record = Arc::clone(&peak);
        let task = tokio::spawn(async move {
            let mut listed_tx = Some(listed_tx);
            let mut live: BTreeMap<String, String> = BTreeMap::new();
            let mut events = watcher(api, config).boxed();
            while let Some(event) = events.next().await {
                let node_of = |pod: &Pod| {
                    pod.spec
                        .as_ref()
                        .and_then(|s| s.node_name.clone())
                        .unwrap_or_default()
                };
                match event {
                    Ok(watcher::Event::Init) => live.clear(),
                    Ok(watcher::Event::InitApply(pod) | watcher::Event::Apply(pod)) => {
                        // A finished attempt a Job keeps for its logs holds nothing of the node.
                        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                        let name = pod.metadata.name.clone().unwrap_or_default();
                        if matches!(phase, Some("Succeeded" | "Failed")) {
                            live.remove(&name);
                        } else {
                            live.insert(name, node_of(&pod));
                        }
                    }
                    Ok(watcher::Event::Delete(pod)) => {
                        live.remove(pod.metadata.name.as_deref().unwrap_or_default());
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = listed_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    Err(_) => continue,
                }
                let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
                for node in live.values() {
                    *per_node.entry(node.as_str()).or_default() += 1;
                }
                let mut peak = record.lock().unwrap_or_else(PoisonError::into_inner);
                for (node, count) in per_node {
                    let seen = peak.entry(node.to_owned()).or_insert(0);
                    *seen = (*seen).max(count);
                }
            }
        });
        tokio::time::timeout(e2e::WAIT, listed)
            .await
            .context("the pod watch's initial list took too long")?
            .context("the pod watch ended before its initial list")?;
        Ok(Self { peak, task })
    }

    fn peak(&self) -> BTreeMap<String, usize> {
        self.peak
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for PodCounter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every package's `(stage, state)` on the node, asserting none is erroring.
fn assert_all_complete(node: &Node, skyhook: &str, count: usize) {
    let stages = nodes::stages(node, skyhook);
    assert_eq!(stages.len(), count, "{stages:?}");
    for (package, (stage, state)) in &stages {
        assert_eq!(
            (stage.as_str(), state.as_str()),
            ("config", "complete"),
            "{package}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_packages_never_hold_more_than_the_pod_slots() -> anyhow::Result<()> {
    const SLOTS: usize = 4;
    let mut setup = Setup::agentless(1);
    setup
        .controller_env
        .insert("MAX_PODS_PER_NODE".into(), SLOTS.to_string());
    let installed = e2e::install_with(setup).await?;
    let client = installed.cluster.client()?;
    let counter = PodCounter::start(&client).await?;
    let node_log = e2e::record_node(&client, NODE).await?;
    e2e::apply_yaml(&client, &many_packages("thirty", 30, "1")).await?;

    installed.wait_for_status("thirty", "complete").await?;
    let node = Api::<Node>::all(client.clone()).get(NODE).await?;
    assert_all_complete(&node, "thirty", 30);
    let peak = counter.peak();
    let on_node = peak.get(NODE).copied().unwrap_or(0);
    assert!(
        on_node <= SLOTS,
        "{on_node} controller pods on {NODE} at once (limit {SLOTS})"
    );
    assert!(
        on_node >= 2,
        "independent packages run side by side: peak {on_node}"
    );
    for version in node_log.seen() {
        let erroring: Vec<_> = nodes::stages(&version, "thirty")
            .into_iter()
            .filter(|(_, (_, state))| state == "erroring")
            .collect();
        assert!(erroring.is_empty(), "a package went erroring: {erroring:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_the_node_refuses_for_cpu_is_created_again() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let node = Api::<Node>::all(client.clone()).get(NODE).await?;
    let allocatable_cpu = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get("cpu"))
        .context("the node reports allocatable cpu")?;
    let capacity = skyhook_api::validate::parse_quantity(&allocatable_cpu.0)?.milli_ceil();

    // A workload the controller does not see leaves 50m: every package pod (100m) is refused.
    let hog_cpu = capacity - 50;
    let hog = format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: cpu-hog
  namespace: default
spec:
  nodeName: {NODE}
  containers:
    - name: hog
      image: registry.k8s.io/pause:3.10
      resources:
        requests: {{cpu: {hog_cpu}m}}
"#
    );
    e2e::apply_yaml(&client, &hog).await?;
    let workloads: Api<Pod> = Api::namespaced(client.clone(), "default");
    e2e::wait_for(&workloads, "cpu-hog", "the hog to be admitted", |pod| {
        pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await?;

    let pod_log = pods::record_pods(&client, "refused").await?;
    e2e::apply_yaml(&client, &many_packages("refused", 2, "0")).await?;
    let seen = pod_log
        .wait_until("a package pod refused for cpu", |pods| {
            pods.iter().any(|pod| {
                pod.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("OutOfcpu")
            })
        })
        .await?;
    let refused = seen
        .iter()
        .find(|pod| pod.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("OutOfcpu"))
        .and_then(|pod| pod.status.as_ref())
        .context("the refused pod")?;
    assert_eq!(refused.phase.as_deref(), Some("Failed"));
    let message = refused.message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("Pod was rejected: Node didn't have enough resource: cpu, requested: ")
            && message.ends_with(&format!(", used: {hog_cpu}, capacity: {capacity}")),
        "the kubelet's message: {message}"
    );

    workloads
        .delete("cpu-hog", &DeleteParams::default())
        .await?;
    installed.wait_for_status("refused", "complete").await?;
    let node = Api::<Node>::all(client.clone()).get(NODE).await?;
    assert_all_complete(&node, "refused", 2);

    let events = Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let warning = events.items.iter().find(|event| {
        event.type_.as_deref() == Some("Warning")
            && event
                .message
                .as_deref()
                .is_some_and(|m| m.contains("was rejected by node") && m.contains("OutOfcpu"))
    });
    let Some(warning) = warning else {
        bail!(
            "no Warning Event for the refused pod; events: {:?}",
            events
                .items
                .iter()
                .map(|e| (e.reason.clone(), e.message.clone()))
                .collect::<Vec<_>>()
        );
    };
    let message = warning.message.as_deref().unwrap_or_default();
    assert!(
        message.contains(&format!("node [{NODE}]")) && message.contains("stage apply"),
        "{message}"
    );
    Ok(())
}
