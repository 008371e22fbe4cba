//! Upstream's core scenarios about the pods the controller owns (spec §6.1 items 9–12), on
//! light devcluster nodes with the `agentless` image as package and agent:
//!
//! - validate-packages: pods that no longer match their package (a bogus image tag, resources no
//!   node can hold, an env that hangs) are replaced once the Skyhook is corrected;
//! - cleanup-pods: a spec that fails and a node whose node state was deleted leave exactly the
//!   pods the node states call for;
//! - pod-finalizer: a hand-made pod carrying the package annotation completes a node state;
//! - delete-skyhook: deleting a completed Skyhook removes every metric series of it.

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::{Value, json};

use e2e::checks::owned_by_skyhook;
use e2e::nodes::{
    expect_stages, has_status, node_condition, stages, wait_for_node, wait_for_nodes,
};
use e2e::pods::{
    NAMESPACE, find_pod, package_and_stage, placements, record_pods, wait_for_live_pods,
};
use e2e::{Setup, WAIT};

const NODE: &str = "node-1";
const OTHER_NODE: &str = "node-2";

/// `status.status == status` and the controller has seen the current generation.
fn settled_at(skyhook: &DynamicObject, status: &str) -> bool {
    e2e::skyhook_status(skyhook) == Some(status)
        && skyhook.data["status"]["observedGeneration"].as_i64() == skyhook.metadata.generation
}

/// `status.nodeState[node]` reduced to `"<pkg>|<version>"` -> `(stage, state)`.
fn mirrored_stages(skyhook: &DynamicObject, node: &str) -> BTreeMap<String, (String, String)> {
    skyhook.data["status"]["nodeState"][node]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, entry)| {
            let field = |name: &str| entry[name].as_str().unwrap_or_default().to_owned();
            (key.clone(), (field("stage"), field("state")))
        })
        .collect()
}

/// The values of `status.nodeStatus`, sorted.
fn node_statuses(skyhook: &DynamicObject) -> Vec<String> {
    let mut statuses: Vec<String> = skyhook.data["status"]["nodeStatus"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, status)| status.as_str().map(str::to_owned))
        .collect();
    statuses.sort();
    statuses
}

/// The value of env variable `name` in the pod's first agent container (`<pkg>-<stage>`).
fn agent_env(pod: &Pod, name: &str) -> Option<String> {
    let container = e2e::pods::init_containers(pod).get(1)?;
    container
        .env
        .as_ref()?
        .iter()
        .find(|var| var.name == name)
        .and_then(|var| var.value.clone())
}

fn pod_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

const VALIDATE_BROKEN: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: validate-packages
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  interruptionBudget:
    count: 1
  packages:
    invalid-image:
      version: "3.2.3-bogus"
      image: ghcr.io/nvidia/skyhook/agentless
      env: [{name: SLEEP_LEN, value: "0"}]
      resources: {cpuLimit: 50m, cpuRequest: 50m, memoryLimit: 32Mi, memoryRequest: 32Mi}
    invalid-resources:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      env: [{name: SLEEP_LEN, value: "0"}]
      resources: {cpuRequest: 10000m, cpuLimit: 10000m, memoryRequest: 10000Mi, memoryLimit: 10000Mi}
    invalid-env:
      version: "5.4.3"
      image: ghcr.io/nvidia/skyhook/agentless
      env: [{name: SLEEP_LEN, value: "1000"}]
      resources: {cpuLimit: 50m, cpuRequest: 50m, memoryLimit: 32Mi, memoryRequest: 32Mi}
"#;

const VALIDATE_FIXED: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: validate-packages
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  interruptionBudget:
    count: 1
  packages:
    invalid-image:
      version: "3.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      env: [{name: SLEEP_LEN, value: "0"}]
    invalid-resources:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      env: [{name: SLEEP_LEN, value: "0"}]
      resources: {cpuRequest: 50m, cpuLimit: 250m, memoryRequest: 64Mi, memoryLimit: 256Mi}
    invalid-env:
      version: "5.4.3"
      image: ghcr.io/nvidia/skyhook/agentless
      env: [{name: SLEEP_LEN, value: "3"}]
"#;

/// validate-packages. Upstream expects all three packages `(apply, in_progress)` while broken;
/// we surface the unpullable image and the pod the node rejected (OutOfcpu) as `erroring`
/// (docs/compatibility.md), and the hanging one stays `in_progress`. The correction replaces
/// every stale pod and the rollout completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_packages_replaces_stale_pods() -> anyhow::Result<()> {
    const NAME: &str = "validate-packages";
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let pods = record_pods(&client, NAME).await?;
    e2e::apply_yaml(&client, VALIDATE_BROKEN).await?;

    let broken = expect_stages(&[
        ("invalid-env|5.4.3", "apply", "in_progress"),
        ("invalid-image|3.2.3-bogus", "apply", "erroring"),
        ("invalid-resources|1.2.3", "apply", "erroring"),
    ]);
    let node = wait_for_node(&client, NODE, "the broken packages' node state", |node| {
        stages(node, NAME) == broken
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    assert!(has_status(&node, NAME, "erroring"));
    assert_eq!(
        node_condition(&node, &format!("skyhook.nvidia.com/{NAME}/NotReady")),
        Some(("True", "Incomplete"))
    );
    let hanging = find_pod(&pods.seen(), "invalid-env", "apply")
        .cloned()
        .context("no apply pod for invalid-env")?;
    assert_eq!(agent_env(&hanging, "SLEEP_LEN").as_deref(), Some("1000"));

    e2e::apply_yaml(&client, VALIDATE_FIXED).await?;
    let skyhook = e2e::wait_for_skyhook(&client, NAME, "the corrected Skyhook to complete", |s| {
        settled_at(s, "complete")
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    let fixed = expect_stages(&[
        ("invalid-env|5.4.3", "config", "complete"),
        ("invalid-image|3.2.3", "config", "complete"),
        ("invalid-resources|1.2.3", "config", "complete"),
    ]);
    assert_eq!(mirrored_stages(&skyhook, NODE), fixed);
    assert_eq!(node_statuses(&skyhook), ["complete"]);
    let node = wait_for_node(&client, NODE, "the completed node state", |node| {
        stages(node, NAME) == fixed
    })
    .await?;
    e2e::checks::check_complete_node(&node, NAME)?;

    let seen = pods.seen();
    let replacement = seen.iter().find(|pod| {
        package_and_stage(pod) == Some(("invalid-env".into(), "apply".into()))
            && agent_env(pod, "SLEEP_LEN").as_deref() == Some("3")
    });
    let replacement = replacement.context("the hanging apply pod was never replaced")?;
    assert_ne!(replacement.metadata.uid, hanging.metadata.uid);
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let stale_gone = e2e::within(
        "the stale pods to be deleted",
        WAIT,
        await_condition(
            pod_api,
            hanging.metadata.name.as_deref().unwrap_or_default(),
            |pod: Option<&Pod>| pod.is_none_or(|p| p.metadata.uid != hanging.metadata.uid),
        ),
    )
    .await;
    stale_gone?;
    Ok(())
}

const CLEANUP_SETUP: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: cleanup-pods
spec:
  nodeSelectors:
    matchExpressions:
      - {key: node-role.kubernetes.io/control-plane, operator: DoesNotExist}
  packages:
    aa:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless:bogus
      env: [{name: SLEEP_LEN, value: "2"}]
    bb:
      version: "1.2"
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {aa: "1.2.3"}
      env: [{name: SLEEP_LEN, value: "2"}]
      configMap: {foo: bar}
"#;

const CLEANUP_FORCE_CONFIG: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: cleanup-pods
spec:
  nodeSelectors:
    matchExpressions:
      - {key: node-role.kubernetes.io/control-plane, operator: DoesNotExist}
  packages:
    aa:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless:bogus
      env: [{name: SLEEP_LEN, value: "3"}]
    bb:
      version: "1.2"
      gracefulShutdown: 46s
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {aa: "1.2.3"}
      env: [{name: SLEEP_LEN, value: "2"}]
      configMap: {foo: buz}
"#;

const CLEANUP_MUCK_UP: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: cleanup-pods
spec:
  nodeSelectors:
    matchExpressions:
      - {key: node-role.kubernetes.io/control-plane, operator: DoesNotExist}
  packages:
    aa:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless:bogus
      env: [{name: SLEEP_LEN, value: "3"}]
    bb:
      version: "1.2"
      gracefulShutdown: 46s
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {aa: "1.2.3"}
      env: [{name: EXIT_CODE, value: "2"}, {name: SLEEP_LEN, value: "2"}]
      configMap: {foo: bur}
"#;

/// cleanup-pods: complete on 2 nodes, force a config cycle of `bb`, then make `bb` fail and,
/// once that config cycle runs, reset node-1 by deleting its node state. node-1 re-runs from
/// `aa` apply and fails at `bb` apply; node-2 fails `bb` config; node-1's config pod from before
/// the reset is removed, and only the two failing pods are left. `observedGeneration` follows
/// only completions (spec §2.5), so the erroring state is not matched against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_pods_after_a_node_reset() -> anyhow::Result<()> {
    const NAME: &str = "cleanup-pods";
    let installed = e2e::install_with(Setup::agentless(2)).await?;
    let client = installed.cluster.client()?;
    let pods = record_pods(&client, NAME).await?;

    e2e::apply_yaml(&client, CLEANUP_SETUP).await?;
    let done = expect_stages(&[
        ("aa|1.2.3", "config", "complete"),
        ("bb|1.2", "config", "complete"),
    ]);
    let skyhook = e2e::wait_for_skyhook(&client, NAME, "the set-up to complete", |s| {
        settled_at(s, "complete")
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    for node in [NODE, OTHER_NODE] {
        assert_eq!(mirrored_stages(&skyhook, node), done, "{node}");
    }
    let first_generation = skyhook.metadata.generation;

    e2e::apply_yaml(&client, CLEANUP_FORCE_CONFIG).await?;
    let skyhook = e2e::wait_for_skyhook(&client, NAME, "the config cycle to complete", |s| {
        settled_at(s, "complete") && s.metadata.generation != first_generation
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    assert_eq!(node_statuses(&skyhook), ["complete", "complete"]);
    for node in [NODE, OTHER_NODE] {
        assert_eq!(mirrored_stages(&skyhook, node), done, "{node}");
    }
    let config_pod = pods
        .seen()
        .into_iter()
        .find(|pod| {
            package_and_stage(pod) == Some(("bb".into(), "config".into()))
                && pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
                    == Some(46)
        })
        .context("no bb config pod with the 46 s graceful shutdown")?;
    assert_eq!(
        e2e::pods::init_container_names(&config_pod),
        ["bb-init", "bb-config", "bb-configcheck"]
    );
    let before_muck_up = pods.seen().len();

    // Upstream deletes the node state right after the update and expects the update's config
    // cycle to have reached both nodes first. Waiting for both config pods to have failed once
    // makes the order deterministic, and resets node-1 under a crash-looping pod: the case where
    // a pod's failure could write its package back into the emptied state.
    e2e::apply_yaml(&client, CLEANUP_MUCK_UP).await?;
    let in_config = |node: &Node| {
        e2e::nodes::stages(node, NAME)
            .get("bb|1.2")
            .is_some_and(|(stage, state)| stage == "config" && state == "erroring")
    };
    wait_for_nodes(
        &client,
        "the muck-up's config pods to fail on both nodes",
        |nodes| {
            [NODE, OTHER_NODE]
                .iter()
                .all(|name| nodes.get(*name).is_some_and(in_config))
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    let nodes: Api<Node> = Api::all(client.clone());
    let reset = json!({"metadata": {"annotations": {
        e2e::nodes::node_state_key(NAME): null
    }}});
    nodes
        .patch(NODE, &PatchParams::default(), &Patch::Merge(&reset))
        .await
        .context("deleting node-1's node state")?;

    let reset_stages = expect_stages(&[
        ("aa|1.2.3", "config", "complete"),
        ("bb|1.2", "apply", "erroring"),
    ]);
    let failing_config = expect_stages(&[
        ("aa|1.2.3", "config", "complete"),
        ("bb|1.2", "config", "erroring"),
    ]);
    let skyhook = e2e::wait_for_skyhook(&client, NAME, "both nodes to fail at bb", |s| {
        e2e::skyhook_status(s) == Some("erroring")
            && mirrored_stages(s, NODE) == reset_stages
            && mirrored_stages(s, OTHER_NODE) == failing_config
    })
    .await
    .with_context(|| installed.controller_log_tail(60))?;
    assert_eq!(node_statuses(&skyhook), ["erroring", "erroring"]);
    wait_for_node(&client, NODE, "node-1 to fail at bb apply", |n| {
        stages(n, NAME) == reset_stages && has_status(n, NAME, "erroring")
    })
    .await?;
    wait_for_node(&client, OTHER_NODE, "node-2 to fail at bb config", |n| {
        stages(n, NAME) == failing_config && has_status(n, NAME, "erroring")
    })
    .await?;

    let after: Vec<Pod> = pods.seen().split_off(before_muck_up);
    for (package, stage) in [("aa", "apply"), ("aa", "config"), ("bb", "apply")] {
        ensure!(
            after.iter().any(|pod| pod_node(pod) == Some(NODE)
                && package_and_stage(pod) == Some((package.into(), stage.into()))),
            "no new {package} {stage} pod on {NODE} after the reset"
        );
    }

    // Stage Jobs keep their finished attempts until their TTL (succeeded ones, and the first and
    // last failed ones of a failing stage): what must be left is the two failing bb stages.
    let expected_left = owned(&[(NODE, "bb", "apply"), (OTHER_NODE, "bb", "config")]);
    wait_for_live_pods(
        &client,
        NAME,
        "only the two failing bb stages to be left",
        |live| {
            let unfinished: Vec<Pod> = live
                .iter()
                .filter(|pod| {
                    pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Succeeded")
                })
                .cloned()
                .collect();
            let mut left = placements(&unfinished);
            left.dedup();
            left == expected_left
        },
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    Ok(())
}

fn owned(rows: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    rows.iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect()
}

/// pod-finalizer: the pod handler processes any pod carrying the Skyhook label and the package
/// annotation, even one no Skyhook created and for a Skyhook that does not exist. Upstream
/// creates the pod in the test's namespace; ours watches only its own namespace
/// (docs/compatibility.md), so the pod goes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_made_package_pod_completes_its_node_state() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let agentless = |name: &str, sleep: &str| {
        json!({
            "name": name,
            "image": "ghcr.io/nvidia/skyhook/agentless:1.0.0",
            "env": [{"name": "SLEEP_LEN", "value": sleep}]
        })
    };
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "hello-world",
            "labels": {"skyhook.nvidia.com/name": "foobar"},
            "annotations": {
                "skyhook.nvidia.com/package":
                    r#"{"name":"foobar","version":"1.2.3","stage":"apply","skyhook":"foobar"}"#
            }
        },
        "spec": {
            "restartPolicy": "OnFailure",
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "initContainers": [
                agentless("foobar-init", "1"),
                agentless("foobar-apply", "5"),
                agentless("foobar-applycheck", "5")
            ],
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]
        }
    }))?;
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    pod_api.create(&PostParams::default(), &pod).await?;

    let node = wait_for_node(&client, NODE, "nodeState_foobar to be written", |node| {
        !stages(node, "foobar").is_empty()
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    let state = e2e::nodes::node_state(&node, "foobar")?;
    assert_eq!(
        Value::Object(state),
        json!({"foobar|1.2.3": {
            "name": "foobar", "version": "1.2.3", "image": "", "stage": "apply", "state": "complete"
        }}),
        "{}",
        e2e::nodes::skyhook_keys(&node)
    );
    Ok(())
}

const DELETE_SKYHOOK: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: delete-skyhook
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  interruptionBudget:
    count: 1
  additionalTolerations:
    - {key: nvidia.com/gpu, effect: NoSchedule}
  packages:
    spencer:
      version: "3.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {dexter: "1.2.3"}
      env: [{name: SLEEP_LEN, value: "1"}]
    foobar:
      version: "1.2"
      image: ghcr.io/nvidia/skyhook/agentless
      dependsOn: {dexter: "1.2.3"}
      env: [{name: SLEEP_LEN, value: "1"}]
    dexter:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless:bogus
      configMap:
        game.properties: |
          enemies=aliens
          lives=3
        ui.properties: |
          color.good=purple
          color.bad=yellow
      env: [{name: SLEEP_LEN, value: "1"}]
"#;

/// A metric series (name, labels) and the value it should have.
type ExpectedSeries<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64);

/// Every metric family that carries a `skyhook_name` label.
const SKYHOOK_METRICS: [&str; 14] = [
    "skyhook_status",
    "skyhook_node_status_count",
    "skyhook_node_target_count",
    "skyhook_package_state_count",
    "skyhook_package_stage_count",
    "skyhook_package_restarts_count",
    "skyhook_rollout_matched_nodes",
    "skyhook_rollout_ceiling",
    "skyhook_rollout_in_progress",
    "skyhook_rollout_completed",
    "skyhook_rollout_progress_percent",
    "skyhook_rollout_current_batch",
    "skyhook_rollout_consecutive_failures",
    "skyhook_rollout_should_stop",
];

/// delete-skyhook: a completed Skyhook reports its metrics (including the legacy rollout
/// gauges); once it is deleted, no series of it is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_skyhook_removes_its_metrics() -> anyhow::Result<()> {
    const NAME: &str = "delete-skyhook";
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let port = installed.metrics_port();
    e2e::apply_yaml(&client, DELETE_SKYHOOK).await?;

    let done = expect_stages(&[
        ("dexter|1.2.3", "config", "complete"),
        ("foobar|1.2", "config", "complete"),
        ("spencer|3.2.3", "config", "complete"),
    ]);
    let skyhook = e2e::wait_for_skyhook(&client, NAME, "the Skyhook to complete", |s| {
        settled_at(s, "complete")
    })
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    assert_eq!(mirrored_stages(&skyhook, NODE), done);
    let node = wait_for_node(&client, NODE, "the completed node state", |node| {
        stages(node, NAME) == done && has_status(node, NAME, "complete")
    })
    .await?;
    let state = e2e::nodes::node_state(&node, NAME)?;
    assert_eq!(
        state["dexter|1.2.3"]["image"], "ghcr.io/nvidia/skyhook/agentless",
        "the image is stored without its tag"
    );

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let package_map = config_maps.get(&format!("{NAME}-dexter-1.2.3")).await?;
    let data = package_map.data.clone().unwrap_or_default();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["game.properties", "ui.properties"]
    );
    ensure!(
        owned_by_skyhook(&package_map.metadata, NAME),
        "{package_map:?}"
    );
    let meta = config_maps
        .list(
            &ListParams::default().labels(&format!("skyhook.nvidia.com/skyhook-node-meta={NAME}")),
        )
        .await?;
    let [meta] = meta.items.as_slice() else {
        anyhow::bail!(
            "expected one node-metadata ConfigMap, found {}",
            meta.items.len()
        );
    };
    ensure!(owned_by_skyhook(&meta.metadata, NAME), "{meta:?}");
    let data = meta.data.clone().unwrap_or_default();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["annotations.json", "labels.json", "packages.json"]
    );
    assert!(data["labels.json"].contains(e2e::TEST_NODE_LABEL));
    assert!(data["annotations.json"].contains(&e2e::nodes::node_state_key(NAME)));

    let ours = [("skyhook_name", NAME)];
    let rollout = [
        ("skyhook_name", NAME),
        ("policy_name", "legacy"),
        ("compartment_name", "__default__"),
        ("strategy", "fixed"),
    ];
    let mut expected: Vec<ExpectedSeries> = vec![
        ("skyhook_node_target_count", ours.to_vec(), 1.0),
        (
            "skyhook_node_status_count",
            [ours.as_slice(), &[("status", "complete")]].concat(),
            1.0,
        ),
        (
            "skyhook_status",
            [ours.as_slice(), &[("status", "complete")]].concat(),
            1.0,
        ),
        ("skyhook_rollout_matched_nodes", rollout.to_vec(), 1.0),
        ("skyhook_rollout_ceiling", rollout.to_vec(), 1.0),
        ("skyhook_rollout_completed", rollout.to_vec(), 1.0),
        ("skyhook_rollout_in_progress", rollout.to_vec(), 0.0),
        ("skyhook_rollout_progress_percent", rollout.to_vec(), 100.0),
    ];
    for package in ["dexter", "foobar", "spencer"] {
        let labels = [ours.as_slice(), &[("package_name", package)]].concat();
        expected.push((
            "skyhook_package_state_count",
            [labels.as_slice(), &[("state", "complete")]].concat(),
            1.0,
        ));
        expected.push((
            "skyhook_package_stage_count",
            [labels.as_slice(), &[("stage", "config")]].concat(),
            1.0,
        ));
    }
    for (name, labels, value) in &expected {
        e2e::metrics::wait_for_metric(port, name, labels, Some(*value)).await?;
    }

    let api = e2e::skyhook_api(&client);
    let uid = skyhook.metadata.uid.clone().unwrap_or_default();
    api.delete(NAME, &DeleteParams::default()).await?;
    e2e::within(
        "the Skyhook to be deleted",
        WAIT,
        await_condition(api, NAME, kube::runtime::conditions::is_deleted(&uid)),
    )
    .await?;
    for name in SKYHOOK_METRICS {
        e2e::metrics::wait_for_metric(port, name, &ours, None).await?;
    }
    let left: Vec<_> = e2e::metrics::scrape(port)
        .await?
        .into_iter()
        .filter(|sample| sample.labels.get("skyhook_name").map(String::as_str) == Some(NAME))
        .collect();
    assert!(left.is_empty(), "series left after the deletion: {left:?}");
    Ok(())
}
