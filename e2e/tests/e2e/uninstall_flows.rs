//! Explicit uninstall (#14, upstream delta §2) end to end, the way a user drives it: setting
//! `packages.<p>.uninstall.apply`, cancelling it, fixing a failing uninstall, deleting the
//! Skyhook, and lowering a version, in each `UNINSTALL_MODE`.
//!
//! - With the real agent on two full nodes (shellscript packages whose scripts write marker
//!   files under `/etc`): an uninstall without an interrupt (requested with `kubectl skyhook
//!   package uninstall`), one with a reboot (cordon, the `uninstall-interrupt` pod, a new boot
//!   ID, uncordon), a cancel during `uninstall-interrupt` (the cycle finishes first), and
//!   deletion, which uninstalls and leaves the nodes clean.
//! - With agentless packages on a light node: a cancel during `uninstall`, a failing uninstall
//!   fixed by an env edit, a package without `uninstall` left alone, deletion blocked while
//!   paused and while disabled, and downgrades in legacy and in explicit mode.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::runtime::wait::await_condition;
use kube::runtime::watcher;
use serde_json::{Value, json};

use e2e::nodes::{is_cordoned, stages, wait_for_node};
use e2e::pods::{find_pod, package_and_stage, package_annotation, record_pods};
use e2e::{Installed, Recorder, Setup, TEST_NODE_LABEL, TEST_NODE_VALUE};

const NODE: &str = "node-1";

/// The node's `(stage, state)` of `key` (`<pkg>|<version>`) for `skyhook`; `None`: absent.
fn entry(node: &Node, skyhook: &str, key: &str) -> Option<(String, String)> {
    stages(node, skyhook).remove(key)
}

fn entry_is(node: &Node, skyhook: &str, key: &str, stage: &str, state: &str) -> bool {
    entry(node, skyhook, key) == Some((stage.to_owned(), state.to_owned()))
}

fn is_complete(node: &Node, skyhook: &str, key: &str) -> bool {
    entry(node, skyhook, key).is_some_and(|(_, state)| state == "complete")
}

/// Merge-patches `packages.<package>` of `skyhook` with `fields`.
async fn patch_package(
    client: &kube::Client,
    skyhook: &str,
    package: &str,
    fields: Value,
) -> anyhow::Result<()> {
    let patch = json!({"spec": {"packages": {package: fields}}});
    e2e::merge_patch_skyhook(client, skyhook, &patch).await
}

fn uninstall(enabled: bool, apply: bool) -> Value {
    json!({"enabled": enabled, "apply": apply})
}

/// Deletes the Skyhook and waits until it is gone (its finalizer released).
async fn delete_and_wait_gone(installed: &Installed, skyhook: &str) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    e2e::skyhook_api(&client)
        .delete(skyhook, &DeleteParams::default())
        .await?;
    wait_gone(installed, skyhook).await
}

/// Waits until the Skyhook, already deleted, is gone (its finalizer released).
async fn wait_gone(installed: &Installed, skyhook: &str) -> anyhow::Result<()> {
    let api = e2e::skyhook_api(&installed.cluster.client()?);
    e2e::within(
        &format!("Skyhook {skyhook} to be gone"),
        e2e::WAIT,
        await_condition(api, skyhook, |o: Option<&DynamicObject>| o.is_none()),
    )
    .await
    .with_context(|| installed.controller_log_tail(40))?;
    Ok(())
}

/// The pods in `pods` for `package` at `stage` and `version`, one per uid.
fn pods_of<'a>(pods: &'a [Pod], package: &str, stage: &str, version: &str) -> Vec<&'a Pod> {
    let mut by_uid: BTreeMap<String, &Pod> = BTreeMap::new();
    for pod in pods {
        let matches = package_and_stage(pod)
            .is_some_and(|(name, found)| name == package && found == stage)
            && package_annotation(pod).is_some_and(|a| a["version"] == version);
        if matches {
            by_uid.insert(pod.metadata.uid.clone().unwrap_or_default(), pod);
        }
    }
    by_uid.into_values().collect()
}

/// The uids of the pods `recorder` has seen so far.
fn uids(recorder: &Recorder<Pod>) -> Vec<Option<String>> {
    recorder
        .seen()
        .iter()
        .map(|pod| pod.metadata.uid.clone())
        .collect()
}

/// The pod versions `recorder` has seen, but of none of the pods `earlier` (completed pods
/// of an earlier step may still be listed when a recorder starts).
fn seen_since(recorder: &Recorder<Pod>, earlier: &[Option<String>]) -> Vec<Pod> {
    recorder
        .seen()
        .into_iter()
        .filter(|pod| !earlier.contains(&pod.metadata.uid))
        .collect()
}

/// Where `package`@`version` at `stage` first appears in `pods`.
fn first_seen(pods: &[Pod], package: &str, stage: &str, version: &str) -> Option<usize> {
    pods.iter().position(|pod| {
        package_and_stage(pod).is_some_and(|(name, found)| name == package && found == stage)
            && package_annotation(pod).is_some_and(|a| a["version"] == version)
    })
}

/// The successive distinct values of `key`'s entry over the recorded node versions.
fn history(seen: &[Node], skyhook: &str, key: &str) -> Vec<Option<(String, String)>> {
    let mut steps: Vec<Option<(String, String)>> = Vec::new();
    for node in seen {
        let now = entry(node, skyhook, key);
        if steps.last() != Some(&now) {
            steps.push(now);
        }
    }
    steps
}

fn stage_of(step: &Option<(String, String)>) -> Option<&str> {
    step.as_ref().map(|(stage, _)| stage.as_str())
}

// --- The real agent on full nodes --------------------------------------------------------------

const REAL: &str = "uninstall-real";
const FULL_NODES: [&str; 2] = ["node-1", "node-2"];
/// Where the packages' scripts write their marker files, relative to the host root.
const MARKS: &str = "etc/skyhook-e2e-uninstall";

/// A shellscript package whose `apply.sh` writes `/<MARKS>/<file>` and whose uninstall removes
/// it (and checks that it is gone).
fn marking_package(file: &str) -> Value {
    json!({
        "version": "1.1.1",
        "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
        "configMap": {
            "apply.sh": format!("#!/bin/bash\nmkdir -p /{MARKS}\necho installed > /{MARKS}/{file}\n"),
            "uninstall.sh": format!("#!/bin/bash\nrm -f /{MARKS}/{file}\n"),
            "uninstall_check.sh": format!("#!/bin/bash\n! test -e /{MARKS}/{file}\n"),
        }
    })
}

/// `files` (uninstall enabled), `kernel` (uninstall enabled, reboot interrupt) and `plain`
/// (no uninstall); both nodes may be interrupted at once.
fn real_skyhook() -> String {
    let mut files = marking_package("files");
    files["uninstall"] = uninstall(true, false);
    let mut kernel = marking_package("kernel");
    kernel["uninstall"] = uninstall(true, false);
    kernel["interrupt"] = json!({"type": "reboot"});
    let spec = json!({
        "nodeSelectors": {"matchLabels": {TEST_NODE_LABEL: TEST_NODE_VALUE}},
        "interruptionBudget": {"count": FULL_NODES.len()},
        "packages": {"files": files, "kernel": kernel, "plain": marking_package("plain")},
    });
    e2e::skyhook_manifest(REAL, spec, json!({}))
}

/// The host roots of the full nodes.
fn node_roots(installed: &Installed) -> anyhow::Result<Vec<PathBuf>> {
    FULL_NODES
        .iter()
        .map(|name| {
            installed
                .cluster
                .node(name)
                .and_then(|node| node.root())
                .with_context(|| format!("{name} has no host root (not a full node?)"))
        })
        .collect()
}

/// Asserts that exactly the marker files `expected` exist on every node root.
fn assert_marks(roots: &[PathBuf], expected: &[&str], why: &str) {
    for root in roots {
        let found: Vec<&str> = ["files", "kernel", "plain"]
            .into_iter()
            .filter(|file| root.join(MARKS).join(file).exists())
            .collect();
        assert_eq!(
            found,
            expected,
            "{why}: marker files under {}",
            root.display()
        );
    }
}

fn boot_id(node: &Node) -> Option<String> {
    let info = node.status.as_ref()?.node_info.as_ref()?;
    Some(info.boot_id.clone())
}

/// Waits until `condition` holds for every full node at once; returns them then.
async fn wait_for_full_nodes(
    client: &kube::Client,
    what: &str,
    condition: impl Fn(&str, &Node) -> bool,
) -> anyhow::Result<BTreeMap<String, Node>> {
    e2e::nodes::wait_for_nodes(client, what, |nodes| {
        FULL_NODES
            .iter()
            .all(|name| nodes.get(*name).is_some_and(|node| condition(name, node)))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_uninstall_with_the_real_agent_leaves_the_nodes_clean() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup {
        nodes: FULL_NODES.len(),
        node_labels: BTreeMap::from([(TEST_NODE_LABEL.to_owned(), TEST_NODE_VALUE.to_owned())]),
        ..Setup::default()
    })
    .await?;
    let client = installed.cluster.client()?;
    let roots = node_roots(&installed)?;
    e2e::apply_yaml(&client, &real_skyhook()).await?;
    installed.wait_settled(REAL).await?;
    assert_marks(&roots, &["files", "kernel", "plain"], "installed");

    uninstall_without_interrupt(&installed, &roots).await?;
    uninstall_with_reboot(&installed, &roots).await?;
    cancel_during_uninstall_interrupt(&installed, &roots).await?;
    deletion_uninstalls_and_cleans_the_nodes(&installed, &roots).await?;
    Ok(())
}

/// Workflow 1, requested with `kubectl skyhook package uninstall`: `files` leaves every node
/// state and its file every root; nothing else moves.
async fn uninstall_without_interrupt(
    installed: &Installed,
    roots: &[PathBuf],
) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    let pods = record_pods(&client, REAL).await?;
    let kubectl = e2e::Kubectl::with_plugin(installed)?;
    kubectl
        .skyhook(&["package", "uninstall", "files", "--skyhook", REAL, "-y"])
        .await?;
    let nodes = wait_for_full_nodes(&client, "files|1.1.1 to leave every node state", |_, n| {
        entry(n, REAL, "files|1.1.1").is_none()
    })
    .await?;
    installed.wait_settled(REAL).await?;
    assert_marks(roots, &["kernel", "plain"], "files' uninstall ran");
    for node in nodes.values() {
        let left = stages(node, REAL);
        assert!(is_complete(node, REAL, "kernel|1.1.1"), "{left:?}");
        assert!(is_complete(node, REAL, "plain|1.1.1"), "{left:?}");
        assert!(!is_cordoned(node), "no interrupt, no cordon");
    }
    let seen = pods.seen();
    assert_eq!(
        pods_of(&seen, "files", "uninstall", "1.1.1").len(),
        FULL_NODES.len(),
        "one uninstall pod per node"
    );
    Ok(())
}

/// Workflow 2: each node is cordoned before its uninstall pod, runs an `uninstall-interrupt`
/// reboot pod, comes back with a new boot ID and is uncordoned; the entry is gone.
async fn uninstall_with_reboot(installed: &Installed, roots: &[PathBuf]) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    let nodes: Api<Node> = Api::all(client.clone());
    let mut booted = BTreeMap::new();
    for name in FULL_NODES {
        booted.insert(
            name,
            boot_id(&nodes.get(name).await?).context("no boot ID")?,
        );
    }
    let pods = record_pods(&client, REAL).await?;
    let earlier = uids(&pods);
    patch_package(
        &client,
        REAL,
        "kernel",
        json!({"uninstall": uninstall(true, true)}),
    )
    .await?;
    let mut checked = Vec::new();
    while checked.len() < FULL_NODES.len() {
        let seen = pods
            .wait_until("an uninstall pod of kernel on another node", |seen| {
                pods_of(seen, "kernel", "uninstall", "1.1.1")
                    .iter()
                    .any(|pod| !checked.contains(&pod_node(pod)))
            })
            .await?;
        for pod in pods_of(&seen, "kernel", "uninstall", "1.1.1") {
            let name = pod_node(pod);
            if checked.contains(&name) {
                continue;
            }
            // The cordon comes before the pod and stays until the reboot is done, so the
            // node is cordoned when its pod shows up.
            let node = nodes.get(&name).await?;
            assert!(
                is_cordoned(&node),
                "{name} schedulable under its uninstall pod"
            );
            checked.push(name);
        }
    }

    let done = wait_for_full_nodes(
        &client,
        "kernel uninstalled, every node rebooted and uncordoned",
        |name, n| {
            entry(n, REAL, "kernel|1.1.1").is_none()
                && !is_cordoned(n)
                && boot_id(n).is_some_and(|id| Some(&id) != booted.get(name))
        },
    )
    .await?;
    installed.wait_settled(REAL).await?;
    for node in done.values() {
        assert!(is_complete(node, REAL, "plain|1.1.1"));
    }
    let interrupt_pods: Vec<Pod> = seen_since(&pods, &earlier)
        .into_iter()
        .filter(|pod| {
            let labels = pod.metadata.labels.as_ref();
            labels.and_then(|l| l.get("skyhook.nvidia.com/interrupt")) == Some(&"True".to_owned())
        })
        .collect();
    for pod in &interrupt_pods {
        assert_eq!(
            package_and_stage(pod),
            Some(("kernel".to_owned(), "uninstall-interrupt".to_owned())),
            "{:?}",
            pod.metadata.name
        );
    }
    let mut interrupts: Vec<String> = interrupt_pods
        .iter()
        .filter_map(|pod| pod.metadata.name.clone())
        .collect();
    interrupts.sort();
    interrupts.dedup();
    // `safe_name` adds a hash to the name.
    let matched = FULL_NODES.iter().all(|node| {
        let prefix = format!("{REAL}-uninstall-interrupt-reboot-{node}");
        interrupts.iter().filter(|n| n.starts_with(&prefix)).count() == 1
    });
    assert!(
        matched && interrupts.len() == FULL_NODES.len(),
        "one uninstall interrupt pod per node: {interrupts:?}"
    );
    assert_marks(roots, &["plain"], "kernel's uninstall ran");
    Ok(())
}

fn pod_node(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.clone())
        .unwrap_or_default()
}

/// Workflow 4 (and the cancel of uninstalled packages): cancelling both requests reinstalls
/// them from apply; a new request for `kernel`, cancelled while a node is in
/// `uninstall-interrupt`, finishes that node's cycle (the reboot) before the package installs
/// there again.
async fn cancel_during_uninstall_interrupt(
    installed: &Installed,
    roots: &[PathBuf],
) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    let cancel = json!({"spec": {"packages": {
        "files": {"uninstall": uninstall(true, false)},
        "kernel": {"uninstall": uninstall(true, false)},
    }}});
    e2e::merge_patch_skyhook(&client, REAL, &cancel).await?;
    wait_for_full_nodes(&client, "files and kernel installed again", |_, n| {
        is_complete(n, REAL, "files|1.1.1") && is_complete(n, REAL, "kernel|1.1.1")
    })
    .await?;
    installed.wait_settled(REAL).await?;
    assert_marks(roots, &["files", "kernel", "plain"], "reinstalled");

    let recorded =
        Recorder::start(Api::<Node>::all(client.clone()), watcher::Config::default()).await?;
    let in_interrupt =
        |n: &Node| entry(n, REAL, "kernel|1.1.1").is_some_and(|(s, _)| s == "uninstall-interrupt");
    patch_package(
        &client,
        REAL,
        "kernel",
        json!({"uninstall": uninstall(true, true)}),
    )
    .await?;
    e2e::nodes::wait_for_nodes(&client, "a node in kernel's uninstall-interrupt", |nodes| {
        nodes.values().any(in_interrupt)
    })
    .await?;
    patch_package(
        &client,
        REAL,
        "kernel",
        json!({"uninstall": uninstall(true, false)}),
    )
    .await?;
    wait_for_full_nodes(&client, "kernel installed again", |_, n| {
        is_complete(n, REAL, "kernel|1.1.1") && !is_cordoned(n)
    })
    .await?;
    installed.wait_settled(REAL).await?;
    let interrupted = assert_cycle_finished_before_reinstall(&recorded.seen(), in_interrupt)?;
    ensure!(interrupted > 0, "no node was seen in uninstall-interrupt");
    assert_marks(
        roots,
        &["files", "kernel", "plain"],
        "reinstalled after the cycle",
    );
    Ok(())
}

/// Per node seen in `uninstall-interrupt`: the node rebooted (for the uninstall interrupt)
/// between that and kernel's next `apply`. (The entry's deletion and the reinstall's
/// `(in_progress, apply)` may land in one node write, so its absence is not always
/// observable.) Returns how many nodes were seen in `uninstall-interrupt`.
fn assert_cycle_finished_before_reinstall(
    seen: &[Node],
    in_interrupt: impl Fn(&Node) -> bool,
) -> anyhow::Result<usize> {
    let mut interrupted = 0;
    for name in FULL_NODES {
        let versions: Vec<&Node> = seen
            .iter()
            .filter(|n| n.metadata.name.as_deref() == Some(name))
            .collect();
        let Some(cycle) = versions.iter().position(|n| in_interrupt(n)) else {
            continue;
        };
        interrupted += 1;
        let stage_at = |n: &Node| entry(n, REAL, "kernel|1.1.1").map(|(stage, _)| stage);
        let reapplied = versions[cycle..]
            .iter()
            .find(|n| stage_at(n).as_deref() == Some("apply"))
            .with_context(|| format!("{name}: never reinstalled from apply"))?;
        let owned: Vec<Node> = versions.iter().map(|n| (*n).clone()).collect();
        assert_ne!(
            boot_id(versions[cycle]),
            boot_id(reapplied),
            "{name} reinstalled before the uninstall interrupt rebooted it: {:?}",
            history(&owned, REAL, "kernel|1.1.1")
        );
    }
    Ok(interrupted)
}

/// Workflow 7: deleting the Skyhook uninstalls `files` and `kernel`, then strips every node of
/// everything of the Skyhook but `plain`'s marker.
async fn deletion_uninstalls_and_cleans_the_nodes(
    installed: &Installed,
    roots: &[PathBuf],
) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    delete_and_wait_gone(installed, REAL).await?;
    let suffix = format!("_{REAL}");
    let prefix = format!("skyhook.nvidia.com/{REAL}/");
    for name in FULL_NODES {
        let node: Node = Api::all(client.clone()).get(name).await?;
        let mut left: Vec<&String> = node
            .metadata
            .annotations
            .iter()
            .flatten()
            .chain(node.metadata.labels.iter().flatten())
            .map(|(key, _)| key)
            .filter(|key| key.starts_with("skyhook.nvidia.com/") && key.ends_with(&suffix))
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                &format!("skyhook.nvidia.com/nodeState_{REAL}"),
                &format!("skyhook.nvidia.com/version_{REAL}")
            ],
            "{name}: {}",
            e2e::nodes::skyhook_keys(&node)
        );
        let markers: Vec<String> = stages(&node, REAL).into_keys().collect();
        assert_eq!(markers, ["plain|1.1.1"], "{name}");
        let conditions: Vec<&str> = node
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .map(|c| c.type_.as_str())
            .filter(|t| t.starts_with(&prefix))
            .collect();
        assert!(
            conditions.is_empty(),
            "{name}: conditions left: {conditions:?}"
        );
        assert!(!is_cordoned(&node), "{name} left cordoned");
    }
    assert_marks(roots, &["plain"], "deletion ran the uninstalls");
    Ok(())
}

// --- Agentless packages on a light node ---------------------------------------------------------

const FLOWS: &str = "uninstall-flows";
const DOWNGRADE: &str = "uninstall-downgrade";

/// An agentless package at `version` with `env` and an optional `uninstall` block.
fn agentless(version: &str, env: &[(&str, &str)], uninstall: Option<Value>) -> Value {
    let mut package = json!({
        "version": version,
        "image": "ghcr.io/nvidia/skyhook/agentless",
        "env": env_list(env),
    });
    if let Some(block) = uninstall {
        package["uninstall"] = block;
    }
    package
}

fn env_list(env: &[(&str, &str)]) -> Value {
    env.iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect()
}

fn light_skyhook(name: &str, packages: Value) -> String {
    let spec = json!({
        "nodeSelectors": {"matchLabels": {TEST_NODE_LABEL: TEST_NODE_VALUE}},
        "packages": packages,
    });
    e2e::skyhook_manifest(name, spec, json!({}))
}

/// The value of env variable `name` in the pod's agent container (`<pkg>-<stage>`).
fn agent_env(pod: &Pod, name: &str) -> Option<String> {
    let container = e2e::pods::init_containers(pod).get(1)?;
    let var = container
        .env
        .as_ref()?
        .iter()
        .find(|var| var.name == name)?;
    var.value.clone()
}

const SLOW: &str = "slow|1.2.3";
const KEEP: &str = "keep|1.2.3";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_uninstall_cancel_failure_deletion_and_legacy_downgrades() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let packages = json!({
        "slow": agentless("1.2.3", &[("SLEEP_LEN", "0")], Some(uninstall(true, false))),
        "keep": agentless("1.2.3", &[("SLEEP_LEN", "0")], None),
    });
    e2e::apply_yaml(&client, &light_skyhook(FLOWS, packages)).await?;
    installed.wait_settled(FLOWS).await?;
    let pods = record_pods(&client, FLOWS).await?;

    cancel_during_uninstall(&installed).await?;
    failing_uninstall_fixed_by_an_env_edit(&installed, &pods).await?;
    // Workflow 6: `keep`, without `uninstall`, was never touched.
    let node: Node = Api::all(client.clone()).get(NODE).await?;
    assert!(entry(&node, FLOWS, SLOW).is_none());
    assert_eq!(
        entry(&node, FLOWS, KEEP),
        Some(("config".to_owned(), "complete".to_owned()))
    );
    assert!(
        pods_of(&pods.seen(), "keep", "uninstall", "1.2.3").is_empty(),
        "keep was uninstalled"
    );
    deletion_blocked_while_paused_then_disabled(&installed).await?;
    downgrades_in_legacy_mode(&installed).await?;
    Ok(())
}

/// Workflow 3: a cancel while the uninstall pod runs puts the entry back to `apply` (it never
/// leaves the node state) and the package installs again.
async fn cancel_during_uninstall(installed: &Installed) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    let recorded = e2e::record_node(&client, NODE).await?;
    let slow_uninstall = json!({
        "env": env_list(&[("SLEEP_LEN", "600")]),
        "uninstall": uninstall(true, true),
    });
    patch_package(&client, FLOWS, "slow", slow_uninstall).await?;
    e2e::pods::wait_for_live_pods(&client, FLOWS, "slow's uninstall pod", |live| {
        find_pod(live, "slow", "uninstall").is_some()
    })
    .await?;
    let cancel = json!({
        "env": env_list(&[("SLEEP_LEN", "0")]),
        "uninstall": uninstall(true, false),
    });
    patch_package(&client, FLOWS, "slow", cancel).await?;
    wait_for_node(&client, NODE, "slow installed again", |n| {
        entry_is(n, FLOWS, SLOW, "config", "complete")
    })
    .await?;
    installed.wait_settled(FLOWS).await?;
    let steps = history(&recorded.seen(), FLOWS, SLOW);
    let uninstalling = steps
        .iter()
        .position(|s| stage_of(s) == Some("uninstall"))
        .context("never in uninstall")?;
    assert!(
        steps.iter().all(Option::is_some),
        "the entry never leaves: {steps:?}"
    );
    assert!(
        steps[uninstalling..]
            .iter()
            .any(|s| stage_of(s) == Some("apply")),
        "reinstalled from apply: {steps:?}"
    );
    e2e::pods::wait_for_live_pods(&client, FLOWS, "no uninstall pod left", |live| {
        find_pod(live, "slow", "uninstall").is_none()
    })
    .await?;
    Ok(())
}

/// Workflow 5: an uninstall pod that fails leaves the entry erroring at `uninstall`; an env edit
/// replaces the pod and the uninstall completes.
async fn failing_uninstall_fixed_by_an_env_edit(
    installed: &Installed,
    pods: &Recorder<Pod>,
) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    let failing = json!({
        "env": env_list(&[("SLEEP_LEN", "0"), ("EXIT_CODE", "1")]),
        "uninstall": uninstall(true, true),
    });
    patch_package(&client, FLOWS, "slow", failing).await?;
    wait_for_node(&client, NODE, "slow erroring at uninstall", |n| {
        entry_is(n, FLOWS, SLOW, "uninstall", "erroring")
    })
    .await?;
    let fixed = json!({"env": env_list(&[("SLEEP_LEN", "0"), ("EXIT_CODE", "0")])});
    patch_package(&client, FLOWS, "slow", fixed).await?;
    wait_for_node(&client, NODE, "slow uninstalled", |n| {
        entry(n, FLOWS, SLOW).is_none()
    })
    .await?;
    installed.wait_settled(FLOWS).await?;
    let seen = pods.seen();
    let exit_codes: Vec<Option<String>> = pods_of(&seen, "slow", "uninstall", "1.2.3")
        .into_iter()
        .map(|pod| agent_env(pod, "EXIT_CODE"))
        .collect();
    assert!(
        exit_codes.contains(&Some("1".to_owned())) && exit_codes.contains(&Some("0".to_owned())),
        "the failing uninstall pod was replaced by one with the new env: {exit_codes:?}"
    );
    Ok(())
}

/// The Skyhook's `DeletionBlocked` condition reason, if any.
fn deletion_blocked(skyhook: &DynamicObject) -> Option<&str> {
    let conditions = skyhook.data["status"]["conditions"].as_array()?;
    let condition = conditions
        .iter()
        .find(|c| c["type"] == "DeletionBlocked" && c["status"] == "True")?;
    condition["reason"].as_str()
}

/// Workflow 8: a deletion with `slow` installed waits while paused, then while disabled, then
/// while its uninstall fails, saying why each time, and completes once the uninstall is fixed
/// (the deleting Skyhook's spec stays editable, as upstream's `uninstall-finalizer-fix` has it).
async fn deletion_blocked_while_paused_then_disabled(installed: &Installed) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    patch_package(
        &client,
        FLOWS,
        "slow",
        json!({"uninstall": uninstall(true, false)}),
    )
    .await?;
    wait_for_node(&client, NODE, "slow installed again", |n| {
        is_complete(n, FLOWS, SLOW)
    })
    .await?;
    installed.wait_settled(FLOWS).await?;
    // Installed as it is, its uninstall will fail.
    let failing = json!({"env": env_list(&[("SLEEP_LEN", "0"), ("EXIT_CODE", "1")])});
    patch_package(&client, FLOWS, "slow", failing).await?;
    installed.wait_settled(FLOWS).await?;

    let events_config = watcher::Config::default().fields(&format!("involvedObject.name={FLOWS}"));
    let events = Recorder::start(Api::<Event>::all(client.clone()), events_config).await?;
    let annotate = |pause: Value, disable: Value| {
        json!({"metadata": {"annotations": {
            "skyhook.nvidia.com/pause": pause,
            "skyhook.nvidia.com/disable": disable,
        }}})
    };
    e2e::merge_patch_skyhook(&client, FLOWS, &annotate(json!("true"), Value::Null)).await?;
    e2e::skyhook_api(&client)
        .delete(FLOWS, &DeleteParams::default())
        .await?;
    for (reason, word) in [
        ("PausedWithPendingUninstall", "paused"),
        ("DisabledWithPendingUninstall", "disabled"),
        ("ErroringWithPendingUninstall", "erroring"),
    ] {
        match word {
            "disabled" => {
                let disabled = annotate(Value::Null, json!("true"));
                e2e::merge_patch_skyhook(&client, FLOWS, &disabled).await?;
            }
            "erroring" => {
                let enabled = annotate(Value::Null, Value::Null);
                e2e::merge_patch_skyhook(&client, FLOWS, &enabled).await?;
            }
            _ => {}
        }
        installed
            .wait_for_skyhook(FLOWS, &format!("DeletionBlocked/{reason}"), |s| {
                deletion_blocked(s) == Some(reason)
            })
            .await?;
        events
            .wait_until(
                &format!("a DeletionBlocked Warning saying {word}"),
                |seen| {
                    seen.iter().any(|e| {
                        e.reason.as_deref() == Some("DeletionBlocked")
                            && e.type_.as_deref() == Some("Warning")
                            && e.message.as_deref().is_some_and(|m| m.contains(word))
                    })
                },
            )
            .await?;
        if word != "erroring" {
            let node: Node = Api::all(client.clone()).get(NODE).await?;
            assert!(
                is_complete(&node, FLOWS, SLOW),
                "nothing runs while blocked"
            );
        }
    }
    let fixed = json!({"env": env_list(&[("SLEEP_LEN", "0"), ("EXIT_CODE", "0")])});
    patch_package(&client, FLOWS, "slow", fixed).await?;
    wait_gone(installed, FLOWS).await?;
    let node: Node = Api::all(client.clone()).get(NODE).await?;
    let left: Vec<String> = stages(&node, FLOWS).into_keys().collect();
    assert_eq!(left, [KEEP], "slow uninstalled, keep's marker stays");
    Ok(())
}

/// Workflows 9 and 10 (legacy mode): `tool`, uninstalled first, installs at the lower version;
/// `old`, without `uninstall`, is uninstalled at the old version, then installed at the new one.
async fn downgrades_in_legacy_mode(installed: &Installed) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    let env = [("SLEEP_LEN", "0")];
    let packages = json!({
        "tool": agentless("2.0.0", &env, Some(uninstall(true, false))),
        "old": agentless("2.0.0", &env, Some(uninstall(false, false))),
    });
    e2e::apply_yaml(&client, &light_skyhook(DOWNGRADE, packages)).await?;
    installed.wait_settled(DOWNGRADE).await?;
    patch_package(
        &client,
        DOWNGRADE,
        "tool",
        json!({"uninstall": uninstall(true, true)}),
    )
    .await?;
    wait_for_node(&client, NODE, "tool uninstalled", |n| {
        entry(n, DOWNGRADE, "tool|2.0.0").is_none()
    })
    .await?;
    installed.wait_settled(DOWNGRADE).await?;

    let pods = record_pods(&client, DOWNGRADE).await?;
    let earlier = uids(&pods);
    let lower = json!({"spec": {"packages": {
        "tool": {"version": "1.0.0", "uninstall": uninstall(true, false)},
        "old": {"version": "1.0.0"},
    }}});
    e2e::merge_patch_skyhook(&client, DOWNGRADE, &lower).await?;
    let node = wait_for_node(&client, NODE, "both packages at 1.0.0", |n| {
        is_complete(n, DOWNGRADE, "tool|1.0.0") && is_complete(n, DOWNGRADE, "old|1.0.0")
    })
    .await?;
    installed.wait_settled(DOWNGRADE).await?;
    let keys: Vec<String> = stages(&node, DOWNGRADE).into_keys().collect();
    assert_eq!(
        keys,
        ["old|1.0.0", "tool|1.0.0"],
        "legacy leaves no old entry"
    );
    let seen = seen_since(&pods, &earlier);
    let uninstalled = first_seen(&seen, "old", "uninstall", "2.0.0");
    let applied = first_seen(&seen, "old", "apply", "1.0.0");
    assert!(
        matches!((uninstalled, applied), (Some(u), Some(a)) if u < a),
        "old 2.0.0 uninstalled before 1.0.0 applied: {:?}",
        e2e::pods::package_stages(&seen)
    );
    assert!(
        pods_of(&seen, "tool", "uninstall", "2.0.0").is_empty(),
        "tool was already uninstalled"
    );
    Ok(())
}

/// Workflow 10 (explicit mode): a downgrade runs no uninstall; the old entry stays as a marker
/// beside the new version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_mode_downgrade_keeps_the_old_entry_as_a_marker() -> anyhow::Result<()> {
    const NAME: &str = "uninstall-explicit";
    let installed = e2e::install_with(Setup {
        controller_env: BTreeMap::from([("UNINSTALL_MODE".to_owned(), "explicit".to_owned())]),
        ..Setup::agentless(1)
    })
    .await?;
    let client = installed.cluster.client()?;
    let packages = json!({
        "old": agentless("2.0.0", &[("SLEEP_LEN", "0")], Some(uninstall(false, false))),
    });
    e2e::apply_yaml(&client, &light_skyhook(NAME, packages)).await?;
    installed.wait_settled(NAME).await?;
    let pods = record_pods(&client, NAME).await?;
    patch_package(&client, NAME, "old", json!({"version": "1.0.0"})).await?;
    let node = wait_for_node(&client, NODE, "old at 1.0.0", |n| {
        is_complete(n, NAME, "old|1.0.0")
    })
    .await?;
    installed.wait_settled(NAME).await?;
    ensure!(
        is_complete(&node, NAME, "old|2.0.0"),
        "the old entry stays as it was: {:?}",
        stages(&node, NAME)
    );
    let seen = pods.seen();
    assert!(
        pods_of(&seen, "old", "uninstall", "2.0.0").is_empty(),
        "no uninstall pod: {:?}",
        e2e::pods::package_stages(&seen)
    );
    assert!(first_seen(&seen, "old", "apply", "1.0.0").is_some());
    Ok(())
}
