//! Upstream's core suite (spec §6.1), spec changes on a one-node devcluster with the `agentless`
//! images: 7 config-skyhook (ConfigMap changes with and without config interrupts, while
//! running and after completion, and a glob) and 8 uninstall-upgrade-skyhook (a downgrade, an
//! upgrade and a removal in one edit, then removing every package).

use std::collections::BTreeSet;

use anyhow::Context;
use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

use e2e::nodes::{self, expect_stages, stages};
use e2e::pods::{self, find_pod, init_container_names, init_containers};
use e2e::{Installed, Setup, checks};

const NODE: &str = "node-1";

const CONFIG: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: config-skyhook
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  interruptionBudget:
    count: 1
  packages:
    spencer:
      version: "3.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: service, services: [cron]}
      env:
        - {name: SLEEP_LEN, value: "2"}
    dexter:
      version: "1.2.3"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: reboot}
      configInterrupts:
        game.properties: {type: service, services: [rsyslog]}
      env:
        - {name: SLEEP_LEN, value: "2"}
      configMap:
        game.properties: |
          lives=3
        ui.properties: |
          color.good=purple
    baxter:
      version: "3.2.1"
      image: ghcr.io/nvidia/skyhook/agentless
      configInterrupts:
        game.properties: {type: service, services: [rsyslog, cron]}
      env:
        - {name: SLEEP_LEN, value: "2"}
      configMap:
        game.properties: |
          lives=3
        ui.properties: |
          color.good=purple
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_skyhook() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let pod_log = pods::record_pods(&client, "config-skyhook").await?;
    let node_log = e2e::record_node(&client, NODE).await?;
    e2e::apply_yaml(&client, CONFIG).await?;

    // Phase 1: one wave of three roots, the node cordoned for spencer's and dexter's interrupts.
    node_log
        .wait_until("all three packages applying on the cordoned node", |seen| {
            seen.iter().any(|node| {
                stages(node, "config-skyhook")
                    == expect_stages(&[
                        ("spencer|3.2.3", "apply", "in_progress"),
                        ("dexter|1.2.3", "apply", "in_progress"),
                        ("baxter|3.2.1", "apply", "in_progress"),
                    ])
                    && nodes::is_cordoned(node)
            })
        })
        .await
        .with_context(|| installed.controller_log_tail(40))?;

    // Phase 2: baxter's game.properties changes while the packages run. baxter has no package
    // interrupt, but the change's config interrupt gives it one.
    patch_config(&client, &[("baxter", "game.properties", "changed\n")]).await?;
    let all_post_interrupt = [
        ("spencer|3.2.3", "post-interrupt", "complete"),
        ("dexter|1.2.3", "post-interrupt", "complete"),
        ("baxter|3.2.1", "post-interrupt", "complete"),
    ];
    wait_for_complete_generation(
        &installed,
        "config-skyhook",
        generation_of(&client, "config-skyhook").await?,
        &all_post_interrupt,
    )
    .await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), pods::NAMESPACE);
    let baxter_map = configmaps.get("config-skyhook-baxter-3.2.1").await?;
    assert_eq!(
        baxter_map.data.unwrap_or_default().get("game.properties"),
        Some(&"changed\n".to_owned())
    );
    assert!(checks::owned_by_skyhook(
        &baxter_map.metadata,
        "config-skyhook"
    ));

    // Phase 3: game.properties (which has config interrupts) changes on dexter and baxter: both
    // run config again and one merged service restart, not dexter's reboot.
    let before = pod_log.seen().len();
    patch_config(
        &client,
        &[
            ("dexter", "game.properties", "lives=4\n"),
            ("baxter", "game.properties", "changed again\n"),
        ],
    )
    .await?;
    wait_for_complete_generation(
        &installed,
        "config-skyhook",
        generation_of(&client, "config-skyhook").await?,
        &all_post_interrupt,
    )
    .await?;
    let phase3 = &created_since(&pod_log.seen(), before);
    assert_eq!(
        stages_run(phase3),
        BTreeSet::from([
            pair("baxter", "config"),
            pair("dexter", "config"),
            pair("baxter", "interrupt"),
            pair("baxter", "post-interrupt"),
            pair("dexter", "post-interrupt"),
        ]),
        "phase 3 pods"
    );
    let interrupt = find_pod(phase3, "baxter", "interrupt").context("no interrupt pod")?;
    assert_eq!(
        interrupt_json(interrupt)?,
        json!({"type": "service_restart", "services": ["cron", "rsyslog"]})
    );

    // Phase 4: only ui.properties (no config interrupt) changes: dexter and baxter end at config
    // even though dexter has a package interrupt; spencer stays at post-interrupt.
    let before = pod_log.seen().len();
    patch_config(
        &client,
        &[
            ("dexter", "ui.properties", "color.good=green\n"),
            ("baxter", "ui.properties", "color.good=green\n"),
        ],
    )
    .await?;
    wait_for_complete_generation(
        &installed,
        "config-skyhook",
        generation_of(&client, "config-skyhook").await?,
        &[
            ("spencer|3.2.3", "post-interrupt", "complete"),
            ("dexter|1.2.3", "config", "complete"),
            ("baxter|3.2.1", "config", "complete"),
        ],
    )
    .await?;
    assert_eq!(
        stages_run(&created_since(&pod_log.seen(), before)),
        BTreeSet::from([pair("baxter", "config"), pair("dexter", "config")]),
        "phase 4 pods"
    );

    // Phase 5: a glob config interrupt matches the changed key.
    let before = pod_log.seen().len();
    e2e::merge_patch_skyhook(
        &client,
        "config-skyhook",
        &json!({"spec": {"packages": {"dexter": {
            "configInterrupts": {
                "game.properties": null,
                "*.properties": {"type": "service", "services": ["rsyslog"]}
            },
            "configMap": {"ui.properties": "color.good=blue\n"}
        }}}}),
    )
    .await?;
    wait_for_complete_generation(
        &installed,
        "config-skyhook",
        generation_of(&client, "config-skyhook").await?,
        &[
            ("spencer|3.2.3", "post-interrupt", "complete"),
            ("dexter|1.2.3", "post-interrupt", "complete"),
            ("baxter|3.2.1", "config", "complete"),
        ],
    )
    .await?;
    let phase5 = &created_since(&pod_log.seen(), before);
    let interrupt = find_pod(phase5, "dexter", "interrupt").context("no glob interrupt pod")?;
    assert_eq!(
        interrupt_json(interrupt)?,
        json!({"type": "service_restart", "services": ["rsyslog"]})
    );
    checks::wait_for_complete_node(&client, NODE, "config-skyhook").await?;
    Ok(())
}

const UNINSTALL_UPGRADE: &str = r#"
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: uninstall-upgrade-skyhook
spec:
  nodeSelectors:
    matchLabels:
      skyhook.nvidia.com/test-node: skyhooke2e
  interruptionBudget:
    count: 1
  packages:
    dogs:
      version: "1.2.6"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: reboot}
      env:
        - {name: SLEEP_LEN, value: "1"}
      configMap:
        game.properties: |
          lives=3
    nullptr:
      version: "2.0.0"
      image: ghcr.io/nvidia/skyhook/agentless
      interrupt: {type: service, services: [cron, containerd]}
      env:
        - {name: SLEEP_LEN, value: "1"}
      configMap:
        game.properties: |
          lives=3
    cats:
      version: "6.2.0"
      image: ghcr.io/nvidia/skyhook/agentless
      env:
        - {name: SLEEP_LEN, value: "1"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_upgrade_skyhook() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let pod_log = pods::record_pods(&client, "uninstall-upgrade-skyhook").await?;
    let node_log = e2e::record_node(&client, NODE).await?;
    e2e::apply_yaml(&client, UNINSTALL_UPGRADE).await?;
    installed
        .wait_for_status("uninstall-upgrade-skyhook", "complete")
        .await?;
    nodes::wait_for_stages(
        &client,
        NODE,
        "uninstall-upgrade-skyhook",
        &[
            ("dogs|1.2.6", "post-interrupt", "complete"),
            ("nullptr|2.0.0", "post-interrupt", "complete"),
            ("cats|6.2.0", "config", "complete"),
        ],
    )
    .await?;

    // One edit: dogs down to 1.2.5, nullptr up to 2.0.1, cats removed.
    let generation = generation_of(&client, "uninstall-upgrade-skyhook").await?;
    let changed = json!({"game.properties": "changed\n", "ui.properties": "changed\n"});
    e2e::merge_patch_skyhook(
        &client,
        "uninstall-upgrade-skyhook",
        &json!({"spec": {"packages": {
            "dogs": {"version": "1.2.5", "configMap": changed},
            "nullptr": {"version": "2.0.1", "configMap": changed},
            "cats": null
        }}}),
    )
    .await?;
    // dogs and nullptr have interrupts and cats left the spec: their uninstall and upgrade
    // pods wait for the cordon and drain, so the entries are seen on a cordoned node.
    node_log
        .wait_until(
            "the uninstall and upgrade entries on the cordoned node",
            |seen| {
                seen.iter().any(|node| {
                    stages(node, "uninstall-upgrade-skyhook")
                        == expect_stages(&[
                            ("dogs|1.2.5", "uninstall", "skipped"),
                            ("dogs|1.2.6", "uninstall", "in_progress"),
                            ("nullptr|2.0.0", "post-interrupt", "complete"),
                            ("nullptr|2.0.1", "upgrade", "in_progress"),
                            ("cats|6.2.0", "uninstall", "in_progress"),
                        ])
                        && nodes::is_cordoned(node)
                })
            },
        )
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    wait_for_complete_generation(
        &installed,
        "uninstall-upgrade-skyhook",
        generation + 1,
        &[
            ("dogs|1.2.5", "post-interrupt", "complete"),
            ("nullptr|2.0.1", "post-interrupt", "complete"),
        ],
    )
    .await?;
    checks::wait_for_complete_node(&client, NODE, "uninstall-upgrade-skyhook").await?;
    let recorded = pod_log.seen();
    for (package, stage, names) in [
        (
            "cats",
            "uninstall",
            ["cats-init", "cats-uninstall", "cats-uninstallcheck"],
        ),
        (
            "dogs",
            "uninstall",
            ["dogs-init", "dogs-uninstall", "dogs-uninstallcheck"],
        ),
        (
            "nullptr",
            "upgrade",
            ["nullptr-init", "nullptr-upgrade", "nullptr-upgradecheck"],
        ),
    ] {
        let pod = find_pod(&recorded, package, stage)
            .with_context(|| format!("no {package} {stage} pod"))?;
        assert_eq!(init_container_names(pod), names);
        let args = init_containers(pod)[1].args.clone().unwrap_or_default();
        assert_eq!(args.len(), 3, "{args:?}");
        assert_eq!(args[..2], [stage, "/root"]);
    }
    let dogs_uninstall = find_pod(&recorded, "dogs", "uninstall").context("dogs uninstall")?;
    assert_eq!(
        pods::package_annotation(dogs_uninstall).map(|a| a["version"].clone()),
        Some(json!("1.2.6")),
        "the uninstall runs the installed version"
    );
    let cats = find_pod(&recorded, "cats", "uninstall").context("cats uninstall")?;
    for container in &init_containers(cats)[1..] {
        assert_eq!(
            checks::resources(container),
            ("500m", "512Mi", "250m", "256Mi"),
            "{}: an uninstall pod gets the namespace LimitRange defaults",
            container.name
        );
    }
    let skyhook = e2e::skyhook_api(&client)
        .get("uninstall-upgrade-skyhook")
        .await?;
    let status = &skyhook.data["status"];
    assert_eq!(status["completeNodes"], "1/1");
    assert_eq!(status["packageList"], "dogs:1.2.5,nullptr:2.0.1");
    assert_eq!(status["nodesInProgress"], 0);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), pods::NAMESPACE);
    for name in [
        "uninstall-upgrade-skyhook-dogs-1.2.5",
        "uninstall-upgrade-skyhook-nullptr-2.0.1",
    ] {
        let map = configmaps.get(name).await?;
        assert_eq!(
            serde_json::to_value(map.data.clone().unwrap_or_default())?,
            changed,
            "{name}"
        );
        assert!(checks::owned_by_skyhook(
            &map.metadata,
            "uninstall-upgrade-skyhook"
        ));
    }
    for gone in [
        "uninstall-upgrade-skyhook-dogs-1.2.6",
        "uninstall-upgrade-skyhook-nullptr-2.0.0",
    ] {
        assert!(
            configmaps.get_opt(gone).await?.is_none(),
            "{gone}: ConfigMaps of versions no longer in the spec are deleted"
        );
    }

    // Every package removed: both entries are uninstalled, then the node state is empty.
    let before = pod_log.seen().len();
    e2e::merge_patch_skyhook(
        &client,
        "uninstall-upgrade-skyhook",
        &json!({"spec": {"packages": {"dogs": null, "nullptr": null}}}),
    )
    .await?;
    node_log
        .wait_until("both entries uninstalling on the cordoned node", |seen| {
            seen.iter().any(|node| {
                stages(node, "uninstall-upgrade-skyhook")
                    == expect_stages(&[
                        ("dogs|1.2.5", "uninstall", "in_progress"),
                        ("nullptr|2.0.1", "uninstall", "in_progress"),
                    ])
                    && nodes::is_cordoned(node)
            })
        })
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    let node =
        wait_for_complete_generation(&installed, "uninstall-upgrade-skyhook", generation + 2, &[])
            .await?;
    assert_eq!(
        nodes::node_state(&node, "uninstall-upgrade-skyhook")?,
        serde_json::Map::new()
    );
    checks::wait_for_complete_node(&client, NODE, "uninstall-upgrade-skyhook").await?;
    assert_eq!(
        stages_run(&created_since(&pod_log.seen(), before)),
        BTreeSet::from([pair("dogs", "uninstall"), pair("nullptr", "uninstall")])
    );
    let skyhook = e2e::skyhook_api(&client)
        .get("uninstall-upgrade-skyhook")
        .await?;
    assert_eq!(skyhook.data["status"]["packageList"], "");
    assert_eq!(skyhook.data["status"]["completeNodes"], "1/1");
    Ok(())
}

/// Merge-patches `configMap.<key> = value` of each `(package, key, value)` of config-skyhook.
async fn patch_config(client: &kube::Client, changes: &[(&str, &str, &str)]) -> anyhow::Result<()> {
    let mut packages = serde_json::Map::new();
    for (package, key, value) in changes {
        packages.insert((*package).to_owned(), json!({"configMap": {(*key): value}}));
    }
    e2e::merge_patch_skyhook(
        client,
        "config-skyhook",
        &json!({"spec": {"packages": packages}}),
    )
    .await
}

/// Waits until the Skyhook is `complete` with `observedGeneration == generation` (so the edit
/// that made that generation has been rolled out) and the node's stages equal `expected`.
async fn wait_for_complete_generation(
    installed: &Installed,
    skyhook: &str,
    generation: i64,
    expected: &[(&str, &str, &str)],
) -> anyhow::Result<Node> {
    let client = installed.cluster.client()?;
    installed
        .wait_for_skyhook(
            skyhook,
            &format!("{skyhook} complete at generation {generation}"),
            |object: &DynamicObject| {
                e2e::skyhook_status(object) == Some("complete")
                    && object.metadata.generation == Some(generation)
                    && object.data["status"]["observedGeneration"] == json!(generation)
            },
        )
        .await?;
    nodes::wait_for_stages(&client, NODE, skyhook, expected)
        .await
        .with_context(|| installed.controller_log_tail(40))
}

async fn generation_of(client: &kube::Client, skyhook: &str) -> anyhow::Result<i64> {
    e2e::skyhook_api(client)
        .get(skyhook)
        .await?
        .metadata
        .generation
        .context("a Skyhook without metadata.generation")
}

/// The recorded versions of pods first seen at or after index `before` (versions of older pods,
/// such as their deletion, are left out).
fn created_since(seen: &[Pod], before: usize) -> Vec<Pod> {
    let older: BTreeSet<&str> = seen[..before]
        .iter()
        .filter_map(|pod| pod.metadata.uid.as_deref())
        .collect();
    seen[before..]
        .iter()
        .filter(|pod| {
            pod.metadata
                .uid
                .as_deref()
                .is_some_and(|uid| !older.contains(uid))
        })
        .cloned()
        .collect()
}

/// The `(package, stage)` pairs of the recorded pods.
fn stages_run(pods: &[Pod]) -> BTreeSet<(String, String)> {
    pods.iter().filter_map(pods::package_and_stage).collect()
}

fn pair(package: &str, stage: &str) -> (String, String) {
    (package.to_owned(), stage.to_owned())
}

/// The decoded interrupt JSON (4th argument) of an interrupt pod.
fn interrupt_json(pod: &Pod) -> anyhow::Result<Value> {
    let args = init_containers(pod)
        .first()
        .and_then(|container| container.args.clone())
        .unwrap_or_default();
    let encoded = args
        .get(3)
        .context("an interrupt pod without 4 arguments")?;
    let json = base64::engine::general_purpose::STANDARD.decode(encoded)?;
    Ok(serde_json::from_slice(&json)?)
}
