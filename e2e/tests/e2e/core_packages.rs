//! Upstream's core suite (spec §6.1), scenarios without interrupts, on a one-node devcluster with
//! upstream's `agentless` images as packages and agent:
//! 1 simple-skyhook, 2 simple-update-skyhook, 3 depends-on, 4 failure-skyhook.
//!
//! Intermediate states that upstream polls for (a pod at some stage, a package in progress) are
//! asserted on recorded watch histories instead, so a one-second stage cannot slip past.

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use e2e::nodes::{self, expect_stages, stages};
use e2e::pods::{self, find_pod, init_container_names, init_containers};
use e2e::{Setup, checks, metrics};

const NODE: &str = "node-1";
const AGENTLESS: &str = "ghcr.io/nvidia/skyhook/agentless";
const FOOBAR_SHA: &str = "sha256:4a1c0ef4c6f1c6a0de4ad0a39c6f20e7e26c5b8e1bd5a0e4c9b7cf9c1f2d3e4a";

const SIMPLE: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: simple-skyhook
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  interruptionBudget:
    count: 1
  additionalTolerations:
    - key: nvidia.com/gpu
      effect: NoSchedule
  packages:
    dexter:
      version: "1.2.3"
      # The tag is wrong on purpose: the version is the tag that is pulled.
      image: ghcr.io/nvidia/skyhook/agentless:bogus
      env:
        - {name: SLEEP_LEN, value: "1"}
      configMap:
        game.properties: |
          enemies=aliens
          lives=3
        ui.properties: |
          color.good=purple
          color.bad=yellow
    spencer:
      version: "3.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {dexter: "1.2.3"}
      env:
        - {name: SLEEP_LEN, value: "1"}
    foobar:
      version: "1.2"
      image: ghcr.io/nvidia/skyhook/agentless
      containerSHA: sha256:4a1c0ef4c6f1c6a0de4ad0a39c6f20e7e26c5b8e1bd5a0e4c9b7cf9c1f2d3e4a
      dependsOn: {dexter: "1.2.3"}
      env:
        - {name: SLEEP_LEN, value: "1"}
      resources:
        cpuRequest: 50m
        cpuLimit: 50m
        memoryRequest: 32Mi
        memoryLimit: 32Mi
"#;

/// Upstream's test LimitRange: package containers without resources get 500m/256Mi.
const LIMIT_RANGE: &str = r#"
apiVersion: v1
kind: LimitRange
metadata:
  name: skyhook-limit-range
  namespace: skyhook
spec:
  limits:
    - type: Container
      default: {cpu: 500m, memory: 256Mi}
      defaultRequest: {cpu: 500m, memory: 256Mi}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_skyhook() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    e2e::apply_yaml(&client, LIMIT_RANGE).await?;
    let pod_log = pods::record_pods(&client, "simple-skyhook").await?;
    let node_log = e2e::record_node(&client, NODE).await?;
    e2e::apply_yaml(&client, SIMPLE).await?;

    let skyhook = installed
        .wait_for_status("simple-skyhook", "complete")
        .await?;
    let node = Api::<Node>::all(client.clone()).get(NODE).await?;
    let state = nodes::node_state(&node, "simple-skyhook")?;
    assert_eq!(
        Value::Object(state.clone()),
        json!({
            "dexter|1.2.3": {"name": "dexter", "version": "1.2.3", "image": AGENTLESS,
                             "stage": "config", "state": "complete"},
            "spencer|3.2.3": {"name": "spencer", "version": "3.2.3", "image": AGENTLESS,
                              "stage": "config", "state": "complete"},
            "foobar|1.2": {"name": "foobar", "version": "1.2", "image": AGENTLESS,
                           "containerSHA": FOOBAR_SHA, "stage": "config", "state": "complete"},
        }),
        "final node state"
    );
    checks::wait_for_complete_node(&client, NODE, "simple-skyhook").await?;
    assert_eq!(
        skyhook.data["status"]["nodeState"][NODE],
        Value::Object(state)
    );
    assert_eq!(
        skyhook.data["status"]["nodeStatus"],
        json!({NODE: "complete"})
    );
    assert_eq!(
        skyhook.data["status"]["observedGeneration"],
        json!(skyhook.metadata.generation),
        "observedGeneration"
    );

    // dexter runs alone: nothing of spencer or foobar is recorded before dexter completed.
    for version in node_log.seen() {
        let stages = stages(&version, "simple-skyhook");
        if stages.keys().any(|key| key != "dexter|1.2.3") {
            assert_eq!(
                stages.get("dexter|1.2.3"),
                Some(&("config".to_owned(), "complete".to_owned())),
                "a dependent package started before dexter completed: {stages:?}"
            );
        }
    }

    let recorded = pod_log.seen();
    let spencer = find_pod(&recorded, "spencer", "apply").context("no spencer apply pod")?;
    assert_eq!(
        pods::package_annotation(spencer),
        Some(
            json!({"name": "spencer", "version": "3.2.3", "skyhook": "simple-skyhook",
                    "stage": "apply", "image": AGENTLESS})
        )
    );
    assert_eq!(
        init_container_names(spencer),
        ["spencer-init", "spencer-apply", "spencer-applycheck"]
    );
    assert!(
        checks::owned_by_job(&spencer.metadata),
        "{:?}",
        spencer.metadata.owner_references
    );
    let args = |pod: &Pod, index: usize| init_containers(pod)[index].args.clone();
    let spencer_apply = args(spencer, 1).unwrap_or_default();
    assert_eq!(spencer_apply.len(), 3, "{spencer_apply:?}");
    assert_eq!(spencer_apply[..2], ["apply", "/root"]);
    let spencer_check = args(spencer, 2).unwrap_or_default();
    assert_eq!(spencer_check.len(), 3, "{spencer_check:?}");
    assert_eq!(spencer_check[..2], ["apply-check", "/root"]);
    for container in init_containers(spencer) {
        assert_eq!(
            checks::resources(container),
            ("500m", "256Mi", "500m", "256Mi"),
            "{}: the LimitRange fills in a package without resources",
            container.name
        );
    }
    let foobar = find_pod(&recorded, "foobar", "apply").context("no foobar apply pod")?;
    assert_eq!(
        init_container_names(foobar),
        ["foobar-init", "foobar-apply", "foobar-applycheck"]
    );
    assert_eq!(
        init_containers(foobar)[0].image.as_deref(),
        Some(format!("{AGENTLESS}@{FOOBAR_SHA}").as_str()),
        "containerSHA pins the copy container's image"
    );
    for container in init_containers(foobar) {
        assert_eq!(
            checks::resources(container),
            ("50m", "32Mi", "50m", "32Mi"),
            "{}: the package's resources override the LimitRange",
            container.name
        );
    }
    let dexter = find_pod(&recorded, "dexter", "apply").context("no dexter apply pod")?;
    assert_eq!(
        init_containers(dexter)[0].image.as_deref(),
        Some("ghcr.io/nvidia/skyhook/agentless:1.2.3"),
        "the version replaces the image's tag"
    );

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), pods::NAMESPACE);
    let package_map = configmaps.get("simple-skyhook-dexter-1.2.3").await?;
    assert!(
        checks::owned_by_skyhook(&package_map.metadata, "simple-skyhook"),
        "{:?}",
        package_map.metadata.owner_references
    );
    assert_eq!(
        package_map
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("skyhook.nvidia.com/name"))
            .map(String::as_str),
        Some("simple-skyhook")
    );
    let data = package_map.data.unwrap_or_default();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["game.properties", "ui.properties"]
    );
    assert_eq!(data["game.properties"], "enemies=aliens\nlives=3\n");

    let metadata = configmaps
        .list(&ListParams::default().labels("skyhook.nvidia.com/skyhook-node-meta=simple-skyhook"))
        .await?;
    assert_eq!(metadata.items.len(), 1, "one metadata ConfigMap per node");
    let metadata = &metadata.items[0];
    assert!(
        checks::owned_by_skyhook(&metadata.metadata, "simple-skyhook"),
        "{:?}",
        metadata.metadata.owner_references
    );
    let data = metadata.data.clone().unwrap_or_default();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["annotations.json", "labels.json", "packages.json"]
    );
    assert!(data["labels.json"].contains("skyhook.nvidia.com/test-node"));
    assert!(data["labels.json"].contains("skyhook.nvidia.com/status_simple-skyhook"));
    assert!(data["annotations.json"].contains("skyhook.nvidia.com/status_simple-skyhook"));
    assert!(data["annotations.json"].contains("skyhook.nvidia.com/nodeState_simple-skyhook"));
    assert!(data["packages.json"].contains("agentVersion"));

    let port = installed.metrics_port();
    let name = ("skyhook_name", "simple-skyhook");
    metrics::wait_for_metric(port, "skyhook_node_target_count", &[name], Some(1.0)).await?;
    metrics::wait_for_metric(
        port,
        "skyhook_node_status_count",
        &[name, ("status", "complete")],
        Some(1.0),
    )
    .await?;
    for package in ["dexter", "spencer", "foobar"] {
        let package = ("package_name", package);
        metrics::wait_for_metric(
            port,
            "skyhook_package_state_count",
            &[name, package, ("state", "complete")],
            Some(1.0),
        )
        .await?;
        metrics::wait_for_metric(
            port,
            "skyhook_package_stage_count",
            &[name, package, ("stage", "config")],
            Some(1.0),
        )
        .await?;
    }
    let rollout = [
        name,
        ("policy_name", "legacy"),
        ("compartment_name", "__default__"),
        ("strategy", "fixed"),
    ];
    for (metric, value) in [
        ("skyhook_rollout_matched_nodes", 1.0),
        ("skyhook_rollout_ceiling", 1.0),
        ("skyhook_rollout_completed", 1.0),
        ("skyhook_rollout_in_progress", 0.0),
        ("skyhook_rollout_progress_percent", 100.0),
    ] {
        metrics::wait_for_metric(port, metric, &rollout, Some(value)).await?;
    }
    Ok(())
}

const SIMPLE_UPDATE: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: simple-update-skyhook
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  interruptionBudget:
    count: 1
  packages:
    dexter:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless:bogus
      env:
        - {name: SLEEP_LEN, value: "1"}
      configMap:
        game.properties: |
          lives=3
    spencer:
      version: "3.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {dexter: "1.2.3"}
      env:
        - {name: SLEEP_LEN, value: "1"}
    foobar:
      version: "1.2"
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {dexter: "1.2.3"}
      env:
        - {name: SLEEP_LEN, value: "1"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_update_skyhook() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    e2e::apply_yaml(&client, SIMPLE_UPDATE).await?;
    installed
        .wait_for_status("simple-update-skyhook", "complete")
        .await?;

    // A merge patch: the three packages stay, two are added.
    e2e::merge_patch_skyhook(
        &client,
        "simple-update-skyhook",
        &json!({"spec": {"packages": {
            "baxter": {
                "version": "2.3.1-test",
                "image": AGENTLESS,
                "configMap": {"game.properties": "lives=5\n", "ui.properties": "color.good=purple\n"}
            },
            "jackie-chan": {
                "version": "2024.7.7-test",
                "image": AGENTLESS,
                "env": [{"name": "SLEEP_LEN", "value": "1"}]
            }
        }}}),
    )
    .await?;
    e2e::wait_for_skyhook_status(&client, "simple-update-skyhook", "in_progress", e2e::WAIT)
        .await?;
    installed
        .wait_for_status("simple-update-skyhook", "complete")
        .await?;
    nodes::wait_for_stages(
        &client,
        NODE,
        "simple-update-skyhook",
        &[
            ("dexter|1.2.3", "config", "complete"),
            ("spencer|3.2.3", "config", "complete"),
            ("foobar|1.2", "config", "complete"),
            ("baxter|2.3.1-test", "config", "complete"),
            ("jackie-chan|2024.7.7-test", "config", "complete"),
        ],
    )
    .await?;
    checks::wait_for_complete_node(&client, NODE, "simple-update-skyhook").await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), pods::NAMESPACE);
    let baxter = configmaps
        .get("simple-update-skyhook-baxter-2.3.1-test")
        .await?;
    assert!(
        checks::owned_by_skyhook(&baxter.metadata, "simple-update-skyhook"),
        "{:?}",
        baxter.metadata.owner_references
    );
    assert_eq!(
        baxter.data.unwrap_or_default().get("game.properties"),
        Some(&"lives=5\n".to_owned())
    );
    Ok(())
}

/// bb-slow sleeps longer than aa-fast; cc-last waits for both.
const DEPENDS_ON: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: depends-on
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  packages:
    aa-fast:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      env:
        - {name: SLEEP_LEN, value: "1"}
    bb-slow:
      version: "1.2"
      image: ghcr.io/nvidia/skyhook/agentless
      env:
        - {name: SLEEP_LEN, value: "3"}
    cc-last:
      version: "5.4.3"
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {aa-fast: "1.2.3", bb-slow: "1.2"}
      env:
        - {name: SLEEP_LEN, value: "1"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depends_on() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let pod_log = pods::record_pods(&client, "depends-on").await?;
    let node_log = e2e::record_node(&client, NODE).await?;
    e2e::apply_yaml(&client, DEPENDS_ON).await?;
    let skyhook = installed.wait_for_status("depends-on", "complete").await?;

    let expected = expect_stages(&[
        ("aa-fast|1.2.3", "config", "complete"),
        ("bb-slow|1.2", "config", "complete"),
        ("cc-last|5.4.3", "config", "complete"),
    ]);
    let node = Api::<Node>::all(client.clone()).get(NODE).await?;
    assert_eq!(stages(&node, "depends-on"), expected);
    assert_eq!(
        skyhook.data["status"]["nodeStatus"],
        json!({NODE: "complete"})
    );

    let order = pods::package_stages(&pod_log.seen());
    let position = |package: &str, stage: &str| {
        order
            .iter()
            .position(|(p, s)| p == package && s == stage)
            .with_context(|| format!("no {package} {stage} pod was recorded: {order:?}"))
    };
    let cc_apply = position("cc-last", "apply")?;
    for (package, stage) in [
        ("aa-fast", "apply"),
        ("bb-slow", "apply"),
        ("aa-fast", "config"),
        ("bb-slow", "config"),
    ] {
        assert!(
            position(package, stage)? < cc_apply,
            "{package} {stage} before cc-last: {order:?}"
        );
    }
    assert!(position("cc-last", "config")? > cc_apply, "{order:?}");
    for version in node_log.seen() {
        let stages = stages(&version, "depends-on");
        if stages.contains_key("cc-last|5.4.3") {
            for parent in ["aa-fast|1.2.3", "bb-slow|1.2"] {
                assert_eq!(
                    stages.get(parent),
                    expected.get(parent),
                    "cc-last started before {parent} completed: {stages:?}"
                );
            }
        }
    }
    Ok(())
}

const FAILURE: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: failure-skyhook
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  interruptionBudget:
    percent: 20
  packages:
    dexter:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      env:
        - {name: SLEEP_LEN, value: "1"}
    failure:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {dexter: "1.2.3"}
      env:
        - {name: EXIT_CODE, value: "2"}
        - {name: SLEEP_LEN, value: "1"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_skyhook() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    e2e::apply_yaml(&client, FAILURE).await?;

    // Upstream's node assertions, awaited together: dexter done, failure erroring at apply after
    // at least one kubelet restart, and the node's status and conditions saying so.
    nodes::wait_for_node(&client, NODE, "the failure-skyhook node state", |node| {
        let state = nodes::node_state(node, "failure-skyhook").unwrap_or_default();
        let failure = state.get("failure|1.2.3").cloned().unwrap_or_default();
        let dexter = state.get("dexter|1.2.3").cloned().unwrap_or_default();
        dexter["stage"] == "config"
            && dexter["state"] == "complete"
            && failure["stage"] == "apply"
            && failure["state"] == "erroring"
            && failure["restarts"].as_u64().is_some_and(|n| n > 0)
            && nodes::has_status(node, "failure-skyhook", "erroring")
            && nodes::node_condition(node, "skyhook.nvidia.com/failure-skyhook/NotReady")
                == Some(("True", "Incomplete"))
            && nodes::node_condition(node, "skyhook.nvidia.com/failure-skyhook/Erroring")
                == Some(("True", "Package(s) Erroring or Unknown"))
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;

    let skyhook =
        e2e::wait_for_skyhook_status(&client, "failure-skyhook", "erroring", e2e::WAIT).await?;
    let status = &skyhook.data["status"];
    assert_eq!(status["completeNodes"], "0/1");
    assert_eq!(status["packageList"], "dexter:1.2.3,failure:1.2.3");
    assert_eq!(status["nodesInProgress"], 1);

    let port = installed.metrics_port();
    let name = ("skyhook_name", "failure-skyhook");
    let failure = ("package_name", "failure");
    metrics::wait_for_metric(
        port,
        "skyhook_node_status_count",
        &[name, ("status", "erroring")],
        Some(1.0),
    )
    .await?;
    metrics::wait_for_metric(
        port,
        "skyhook_package_state_count",
        &[name, failure, ("state", "erroring")],
        Some(1.0),
    )
    .await?;
    metrics::wait_for_metric(
        port,
        "skyhook_package_stage_count",
        &[name, failure, ("stage", "apply")],
        Some(1.0),
    )
    .await?;
    Ok(())
}
