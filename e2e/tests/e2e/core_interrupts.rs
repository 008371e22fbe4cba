//! Upstream's core suite (spec §6.1), interrupt scenarios on a one-node devcluster with the
//! `agentless` images: 5 interrupt (cordon, wait for protected pods, drain, one merged interrupt
//! per dependency wave) and 6 interrupt-grouping (service interrupts of one wave merged into a
//! single pod).

use anyhow::Context;
use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::conditions::is_pod_running;
use kube::runtime::wait::await_condition;
use serde_json::{Value, json};

use e2e::nodes::{self, expect_stages, stages};
use e2e::pods::{self, find_pod, init_container_names, init_containers};
use e2e::{Setup, checks};

const NODE: &str = "node-1";
const AGENTLESS: &str = "ghcr.io/nvidia/skyhook/agentless";

const INTERRUPT: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: interrupt
spec:
  podNonInterruptLabels:
    matchLabels:
      dontmess: withme
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  interruptionBudget:
    count: 1
  packages:
    jason:
      version: "1.3.2"
      image: ghcr.io/nvidia/skyhook/agentless
      agentImageOverride: ghcr.io/nvidia/skyhook/agentless:3.2.3
      env:
        - {name: SLEEP_LEN, value: "1"}
    dexter:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: reboot}
      env:
        - {name: SLEEP_LEN, value: "1"}
      configMap:
        game.properties: |
          enemies=aliens
          lives=3
    john:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: service, services: [rsyslog]}
      env:
        - {name: SLEEP_LEN, value: "1"}
    spencer:
      version: "3.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {dexter: "1.2.3"}
      env:
        - {name: SLEEP_LEN, value: "1"}
    baxter:
      version: "3.3"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: service, services: [rsyslog]}
      dependsOn: {spencer: "3.2.3"}
      env:
        - {name: SLEEP_LEN, value: "1"}
    foobar:
      version: "1.2"
      image: ghcr.io/nvidia/skyhook/agentless
      env: [{name: SLEEP_LEN, value: "0"}]
      dependsOn: {dexter: "1.2.3", baxter: "3.3"}
"#;

/// A workload the interrupt must wait for (it matches `podNonInterruptLabels`), one the drain
/// evicts, and a stray package pod of a package the Skyhook does not have.
const WORKLOADS: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: important-stuff
  namespace: default
  labels: {dontmess: withme}
spec:
  nodeName: node-1
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
    - {name: workload, image: devcluster.local/sleep}
---
apiVersion: v1
kind: Pod
metadata:
  name: drain-on
  namespace: default
  labels: {drain: me}
spec:
  nodeName: node-1
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
    - {name: workload, image: devcluster.local/sleep}
"#;

const INVALID_PACKAGE_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: invalid-package
  namespace: skyhook
  labels:
    skyhook.nvidia.com/name: interrupt
    skyhook.nvidia.com/package: invalid-1.2.3
  annotations:
    skyhook.nvidia.com/package: '{"name":"invalid","version":"1.2.3","stage":"apply","skyhook":"interrupt","image":"ghcr.io/nvidia/skyhook/agentless"}'
spec:
  nodeName: node-1
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  tolerations:
    - {key: node.kubernetes.io/unschedulable, operator: Exists}
  initContainers:
    - {name: workload, image: devcluster.local/sleep}
  containers:
    - {name: pause, image: registry.k8s.io/pause:3.10}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let workloads: Api<Pod> = Api::namespaced(client.clone(), "default");
    e2e::apply_yaml(&client, WORKLOADS).await?;
    for name in ["important-stuff", "drain-on"] {
        e2e::within(
            &format!("{name} to run"),
            e2e::WAIT,
            await_condition(workloads.clone(), name, is_pod_running()),
        )
        .await?;
    }
    let pod_log = pods::record_pods(&client, "interrupt").await?;
    e2e::apply_yaml(&client, INVALID_PACKAGE_POD).await?;
    e2e::apply_yaml(&client, INTERRUPT).await?;

    // The first wave (jason, dexter, john) carries dexter's reboot: the node is cordoned, jason
    // (no interrupt) completes, dexter and john wait while the protected pod runs.
    let waiting = nodes::wait_for_node(
        &client,
        NODE,
        "jason complete while dexter and john wait on the cordoned node",
        |node| {
            stages(node, "interrupt")
                == expect_stages(&[
                    ("jason|1.3.2", "config", "complete"),
                    ("dexter|1.2.3", "apply", "in_progress"),
                    ("john|1.2.3", "apply", "in_progress"),
                ])
                && nodes::has_status(node, "interrupt", "in_progress")
                && annotation(node, "skyhook.nvidia.com/cordon_interrupt") == Some("true")
                && nodes::is_cordoned(node)
                && nodes::node_condition(node, "skyhook.nvidia.com/interrupt/NotReady")
                    == Some(("True", "Incomplete"))
                && nodes::node_condition(node, "skyhook.nvidia.com/interrupt/Erroring")
                    == Some(("False", "Not Erroring"))
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    assert!(
        nodes::taints(&waiting)
            .iter()
            .any(|taint| taint == "node.kubernetes.io/unschedulable:NoSchedule"),
        "{:?}",
        nodes::taints(&waiting)
    );
    for name in ["important-stuff", "drain-on"] {
        let pod = workloads.get_opt(name).await?;
        assert!(
            pod.is_some_and(|pod| pod.metadata.deletion_timestamp.is_none()),
            "{name} is left alone while the protected pod runs"
        );
    }
    let recorded = pod_log.seen();
    let jason = find_pod(&recorded, "jason", "apply").context("no jason apply pod")?;
    let images: Vec<_> = init_containers(jason)
        .iter()
        .map(|c| (c.name.as_str(), c.image.as_deref().unwrap_or_default()))
        .collect();
    assert_eq!(
        images,
        [
            ("jason-init", "ghcr.io/nvidia/skyhook/agentless:1.3.2"),
            ("jason-apply", "ghcr.io/nvidia/skyhook/agentless:3.2.3"),
            ("jason-applycheck", "ghcr.io/nvidia/skyhook/agentless:3.2.3"),
        ],
        "agentImageOverride replaces the agent image, not the package image"
    );
    assert!(
        find_pod(&recorded, "dexter", "interrupt").is_none(),
        "no interrupt before the drain"
    );

    workloads
        .delete("important-stuff", &DeleteParams::default())
        .await?;
    e2e::within(
        "drain-on to be evicted",
        e2e::WAIT,
        await_condition(workloads.clone(), "drain-on", |pod: Option<&Pod>| {
            pod.is_none_or(|pod| pod.metadata.deletion_timestamp.is_some())
        }),
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;

    installed.wait_for_status("interrupt", "complete").await?;
    let node = nodes::wait_for_stages(
        &client,
        NODE,
        "interrupt",
        &[
            ("jason|1.3.2", "config", "complete"),
            ("dexter|1.2.3", "post-interrupt", "complete"),
            ("john|1.2.3", "post-interrupt", "complete"),
            ("spencer|3.2.3", "config", "complete"),
            ("baxter|3.3", "post-interrupt", "complete"),
            ("foobar|1.2", "config", "complete"),
        ],
    )
    .await?;
    checks::wait_for_complete_node(&client, NODE, "interrupt").await?;

    let recorded = pod_log.seen();
    let interrupt =
        find_pod(&recorded, "dexter", "interrupt").context("no dexter interrupt pod")?;
    assert_eq!(
        pods::package_annotation(interrupt),
        Some(
            json!({"name": "dexter", "version": "1.2.3", "skyhook": "interrupt",
                    "stage": "interrupt", "image": AGENTLESS})
        )
    );
    assert_eq!(
        interrupt_args(interrupt)?,
        json!({"type": "node_restart"}),
        "dexter's reboot wins over john's service restart"
    );
    assert!(
        checks::owned_by_job(&interrupt.metadata),
        "{:?}",
        interrupt.metadata.owner_references
    );
    let baxter = find_pod(&recorded, "baxter", "interrupt").context("no baxter interrupt pod")?;
    assert_eq!(
        interrupt_args(baxter)?,
        json!({"type": "service_restart", "services": ["rsyslog"]})
    );

    let skyhook = e2e::skyhook_api(&client).get("interrupt").await?;
    assert_eq!(
        skyhook.data["status"]["nodeState"][NODE],
        Value::Object(nodes::node_state(&node, "interrupt")?)
    );
    assert_eq!(
        skyhook.data["status"]["nodeStatus"],
        json!({NODE: "complete"})
    );
    assert_eq!(
        skyhook.data["status"]["observedGeneration"],
        json!(skyhook.metadata.generation)
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), pods::NAMESPACE);
    let dexter_map = configmaps.get("interrupt-dexter-1.2.3").await?;
    assert!(checks::owned_by_skyhook(&dexter_map.metadata, "interrupt"));
    let metadata = configmaps
        .list(&ListParams::default().labels("skyhook.nvidia.com/skyhook-node-meta=interrupt"))
        .await?;
    let packages_json = metadata
        .items
        .first()
        .and_then(|map| map.data.as_ref()?.get("packages.json").cloned())
        .context("no metadata ConfigMap with packages.json")?;
    assert!(
        packages_json.contains("\"agentVersion\"") && packages_json.contains("\"dexter\""),
        "{packages_json}"
    );

    // The stray pod of a package the Skyhook does not have is invalidated and deleted.
    let stray: Api<Pod> = Api::namespaced(client.clone(), pods::NAMESPACE);
    e2e::within(
        "the invalid package pod to be deleted",
        e2e::WAIT,
        await_condition(stray, "invalid-package", |pod: Option<&Pod>| {
            pod.is_none_or(|pod| pod.metadata.deletion_timestamp.is_some())
        }),
    )
    .await?;
    Ok(())
}

const INTERRUPT_GROUPING: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: interrupt-grouping
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  additionalTolerations:
    - {key: nvidia.com/gpu, operator: Exists}
  packages:
    zeb:
      version: "2.1.4"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: service, services: [cron]}
      env:
        - {name: SLEEP_LEN, value: "1"}
    dax:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: service, services: [containerd, foobar]}
      env:
        - {name: SLEEP_LEN, value: "1"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_grouping() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let pod_log = pods::record_pods(&client, "interrupt-grouping").await?;
    let node_log = e2e::record_node(&client, NODE).await?;
    e2e::apply_yaml(&client, INTERRUPT_GROUPING).await?;
    installed
        .wait_for_status("interrupt-grouping", "complete")
        .await?;
    let node = nodes::wait_for_stages(
        &client,
        NODE,
        "interrupt-grouping",
        &[
            ("dax|1.2.3", "post-interrupt", "complete"),
            ("zeb|2.1.4", "post-interrupt", "complete"),
        ],
    )
    .await?;
    checks::wait_for_complete_node(&client, NODE, "interrupt-grouping").await?;
    assert!(
        annotation(&node, "skyhook.nvidia.com/version_interrupt-grouping")
            .is_some_and(|version| version.len() >= 6),
        "{}",
        nodes::skyhook_keys(&node)
    );
    assert!(
        node_log.seen().iter().any(|version| {
            nodes::is_cordoned(version)
                && nodes::has_status(version, "interrupt-grouping", "in_progress")
        }),
        "the node was cordoned while in progress"
    );

    let recorded = pod_log.seen();
    let stages_seen = pods::package_stages(&recorded);
    for stage in ["apply", "config", "interrupt", "post-interrupt"] {
        assert!(
            stages_seen.contains(&("dax".to_owned(), stage.to_owned())),
            "no dax {stage} pod: {stages_seen:?}"
        );
    }
    let interrupts: Vec<_> = stages_seen
        .iter()
        .filter(|(_, stage)| stage == "interrupt")
        .collect();
    assert_eq!(
        interrupts,
        [&("dax".to_owned(), "interrupt".to_owned())],
        "one merged interrupt pod, owned by the first package by name"
    );
    let interrupt = find_pod(&recorded, "dax", "interrupt").context("no dax interrupt pod")?;
    assert_eq!(
        interrupt_args(interrupt)?,
        json!({"type": "service_restart", "services": ["containerd", "cron", "foobar"]})
    );
    let apply = find_pod(&recorded, "dax", "apply").context("no dax apply pod")?;
    let images: Vec<_> = init_containers(apply)
        .iter()
        .map(|c| c.image.as_deref().unwrap_or_default())
        .collect();
    assert_eq!(
        images,
        [
            "ghcr.io/nvidia/skyhook/agentless:1.2.3",
            e2e::AGENTLESS_AGENT_IMAGE,
            e2e::AGENTLESS_AGENT_IMAGE
        ]
    );
    for (stage, names) in [
        ("config", ["dax-init", "dax-config", "dax-configcheck"]),
        (
            "post-interrupt",
            ["dax-init", "dax-post-interrupt", "dax-post-interruptcheck"],
        ),
    ] {
        let pod = find_pod(&recorded, "dax", stage).context("no dax pod")?;
        assert_eq!(init_container_names(pod), names, "{stage}");
    }
    for pod in [apply, interrupt] {
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|spec| spec.tolerations.clone())
            .unwrap_or_default();
        assert!(
            tolerations
                .iter()
                .any(|t| t.key.as_deref() == Some("nvidia.com/gpu")
                    && t.operator.as_deref() == Some("Exists")),
            "additionalTolerations reach every pod: {tolerations:?}"
        );
    }

    let skyhook = e2e::skyhook_api(&client).get("interrupt-grouping").await?;
    assert!(
        skyhook
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("skyhook.nvidia.com/version"))
            .is_some_and(|version| version.len() >= 6),
        "{:?}",
        skyhook.metadata.annotations
    );
    assert_eq!(
        skyhook.data["status"]["nodeStatus"],
        json!({NODE: "complete"})
    );
    Ok(())
}

/// The decoded 4th argument of an interrupt pod's `interrupt` container, after checking the
/// container's name and first arguments.
fn interrupt_args(pod: &Pod) -> anyhow::Result<Value> {
    let containers = init_containers(pod);
    let [container] = containers else {
        anyhow::bail!("an interrupt pod has one init container: {containers:?}");
    };
    assert_eq!(container.name, "interrupt");
    let args = container.args.clone().unwrap_or_default();
    assert_eq!(args.len(), 4, "{args:?}");
    assert_eq!(args[..2], ["interrupt", "/root"]);
    let json = base64::engine::general_purpose::STANDARD
        .decode(&args[3])
        .context("the interrupt argument is not base64")?;
    serde_json::from_slice(&json).context("the interrupt argument is not JSON")
}

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}
