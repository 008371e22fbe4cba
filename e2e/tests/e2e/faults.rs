//! Fault injection: the interruption budget holds while the rollout is hit by the faults a real
//! fleet suffers. Six full nodes, the real agent, a package whose interrupt reboots the node
//! (through devcluster's `reboot`: NotReady, tainted by kube-controller-manager, a new boot ID)
//! and one that restarts a service after it, `interruptionBudget.count: 2`. The budget sampler
//! checks after every Node and pod event that no more than two nodes are cordoned, in progress,
//! or have an interrupt in flight (rebooting, waiting for the new boot ID, down after it), while
//!
//! - the controller is killed (SIGKILL) 20 times and more,
//! - the API server is restarted while a node reboots,
//! - etcd stalls for 20 s while a node reboots,
//! - a node does not come back from its reboot until the rest is done.
//!
//! Each ends with every node rebooted exactly once per package version (its boot IDs, as seen
//! by a watch), no node left cordoned, and the stuck node reported.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use devcluster::Component;
use devcluster::node::Heartbeat;
use e2e::budget::{BudgetSampler, CompartmentBudget, SkyhookBudget};
use e2e::{Installed, Recorder, Setup, TEST_NODE_LABEL, TEST_NODE_VALUE};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use serde_json::json;
use skyhook_devcluster::{InstallOptions, SkyhookInstall};

const NAME: &str = "faults";
const NODES: usize = 6;
const BUDGET: usize = 2;

fn node_names() -> Vec<String> {
    (1..=NODES).map(|i| format!("node-{i}")).collect()
}

/// Two shellscript packages: `kernel` reboots the node, then `daemon` (which depends on it)
/// restarts a service; both with `version`.
fn skyhook(version: &str) -> String {
    let spec = json!({
        "nodeSelectors": {"matchLabels": {TEST_NODE_LABEL: TEST_NODE_VALUE}},
        "interruptionBudget": {"count": BUDGET},
        "packages": {
            "kernel": {
                "version": version,
                "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
                "interrupt": {"type": "reboot"},
                "configMap": {"config.sh": "#!/bin/bash\necho kernel configured\n"}
            },
            "daemon": {
                "version": version,
                "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
                "dependsOn": {"kernel": version},
                "interrupt": {"type": "service", "services": ["cron"]},
                "configMap": {"config.sh": "#!/bin/bash\necho daemon configured\n"}
            }
        }
    });
    e2e::skyhook_manifest(NAME, spec, json!({}))
}

/// The controller's extra environment in every scenario.
fn controller_env(reboot_deadline: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("REBOOT_DEADLINE".to_owned(), reboot_deadline.to_owned())])
}

async fn install(reboot_deadline: &str) -> anyhow::Result<Installed> {
    e2e::install_with(Setup {
        nodes: NODES,
        node_labels: BTreeMap::from([(TEST_NODE_LABEL.to_owned(), TEST_NODE_VALUE.to_owned())]),
        controller_env: controller_env(reboot_deadline),
        // A dead node is marked unreachable within seconds, as with a short grace period in a
        // real cluster, so the scenarios see the taints a real outage brings.
        heartbeat: Heartbeat {
            lease_renew_interval: Duration::from_secs(2),
            node_monitor_grace_period: Duration::from_secs(12),
        },
        ..Setup::default()
    })
    .await
}

fn budget() -> SkyhookBudget {
    let names = node_names();
    SkyhookBudget {
        skyhook: NAME.to_owned(),
        compartments: vec![CompartmentBudget::new(
            "__default__",
            names.iter().map(String::as_str),
            BUDGET,
        )],
    }
}

/// Per node, its boot IDs in the order a Node watch saw them.
fn boot_ids(seen: &[Node]) -> BTreeMap<String, Vec<String>> {
    let mut ids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for node in seen {
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(id) = node
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .map(|info| info.boot_id.clone())
        else {
            continue;
        };
        let list = ids.entry(name).or_default();
        if list.last() != Some(&id) {
            list.push(id);
        }
    }
    ids
}

fn ready(node: &Node) -> bool {
    e2e::nodes::node_condition(node, "Ready").is_some_and(|(status, _)| status == "True")
}

/// Waits until some node of the Skyhook is rebooting (NotReady while its interrupt is in
/// flight); returns its name.
async fn a_node_rebooting(client: &kube::Client) -> anyhow::Result<String> {
    let nodes = e2e::nodes::wait_for_nodes(client, "a node to be rebooting", |nodes| {
        nodes
            .values()
            .any(|n| !ready(n) && e2e::budget::node_busy_for(n, NAME))
    })
    .await?;
    nodes
        .into_iter()
        .find(|(_, n)| !ready(n) && e2e::budget::node_busy_for(n, NAME))
        .map(|(name, _)| name)
        .context("a rebooting node")
}

/// Every node complete for the Skyhook, Ready, and uncordoned.
async fn wait_until_done(installed: &Installed) -> anyhow::Result<()> {
    let client = installed.cluster.client()?;
    installed.wait_for_status(NAME, "complete").await?;
    e2e::nodes::wait_for_nodes(&client, "every node Ready and uncordoned", |nodes| {
        nodes.len() == NODES
            && nodes
                .values()
                .all(|n| ready(n) && !e2e::nodes::is_cordoned(n))
    })
    .await?;
    Ok(())
}

/// After `versions` rollouts: every node rebooted exactly once per version, none left
/// cordoned, the budget held (and was used).
async fn check_outcome(
    boots: &Recorder<Node>,
    sampler: BudgetSampler,
    versions: usize,
) -> anyhow::Result<e2e::budget::BudgetReport> {
    let report = sampler.finish().await?;
    let ids = boot_ids(&boots.seen());
    for name in node_names() {
        let seen = ids.get(&name).map_or(0, Vec::len);
        assert_eq!(
            seen,
            versions + 1,
            "{name} must reboot exactly once per version; boot IDs seen: {:?}",
            ids.get(&name)
        );
    }
    let peak = report.peak(NAME, "__default__");
    assert!(
        (1..=BUDGET).contains(&peak),
        "peak of {peak} nodes busy at once, budget {BUDGET}"
    );
    Ok(report)
}

/// Starts recording boot IDs and the budget, then applies version `1.0.0`.
async fn start(installed: &Installed) -> anyhow::Result<(Recorder<Node>, BudgetSampler)> {
    let client = installed.cluster.client()?;
    let boots =
        Recorder::start(Api::<Node>::all(client.clone()), watcher::Config::default()).await?;
    let sampler = BudgetSampler::start(&client, vec![budget()]).await?;
    e2e::apply_yaml(&client, &skyhook("1.0.0")).await?;
    Ok((boots, sampler))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_holds_while_the_controller_is_killed_again_and_again() -> anyhow::Result<()> {
    const KILLS: usize = 20;
    let mut installed = install("30m").await?;
    let client = installed.cluster.client()?;
    let (boots, sampler) = start(&installed).await?;
    let began = Instant::now();
    let (mut kills, mut versions) = (0usize, 1usize);
    // Kill at irregular moments (1.0 to 3.4 s apart), whatever the controller is doing.
    let pauses = [1000u64, 2300, 1700, 3400, 1200, 2900, 1500, 2100];
    loop {
        let status = e2e::skyhook_api(&client).get(NAME).await?;
        if e2e::skyhook_status(&status) == Some("complete") {
            if kills >= KILLS {
                break;
            }
            versions += 1;
            e2e::apply_yaml(&client, &skyhook(&format!("1.0.{}", versions - 1))).await?;
        }
        if began.elapsed() > Duration::from_secs(900) {
            bail!(
                "after {kills} kills and 15 min the rollout of version {versions} is not complete"
            );
        }
        tokio::time::sleep(Duration::from_millis(pauses[kills % pauses.len()])).await;
        installed.controller.kill();
        kills += 1;
        installed.controller = installed
            .cluster
            .start_controller(InstallOptions {
                extra_env: controller_env("30m"),
                ..InstallOptions::default()
            })
            .await
            .with_context(|| format!("restarting the controller after kill {kills}"))?;
    }
    wait_until_done(&installed).await?;
    let report = check_outcome(&boots, sampler, versions).await?;
    eprintln!(
        "controller killed {kills} times over {versions} versions in {:?}; {} states checked, peak {}",
        began.elapsed(),
        report.events,
        report.peak(NAME, "__default__")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_holds_across_an_api_server_restart_and_an_etcd_stall() -> anyhow::Result<()> {
    let installed = install("30m").await?;
    let client = installed.cluster.client()?;
    let (boots, sampler) = start(&installed).await?;
    let rebooting = a_node_rebooting(&client).await?;
    let began = Instant::now();
    installed.cluster.restart(Component::KubeApiserver).await?;
    eprintln!(
        "API server restarted while {rebooting} rebooted, in {:?}",
        began.elapsed()
    );
    let client = installed.cluster.client()?;
    // Wait for the next reboot, so the stall hits a different moment of the rollout.
    let before: BTreeSet<String> = BTreeSet::from([rebooting.clone()]);
    let second = e2e::nodes::wait_for_nodes(&client, "another node to be rebooting", |nodes| {
        nodes.iter().any(|(name, n)| {
            !before.contains(name) && !ready(n) && e2e::budget::node_busy_for(n, NAME)
        })
    })
    .await?;
    let second: Vec<&String> = second
        .iter()
        .filter(|(name, n)| {
            !before.contains(*name) && !ready(n) && e2e::budget::node_busy_for(n, NAME)
        })
        .map(|(name, _)| name)
        .collect();
    installed
        .cluster
        .stall(Component::Etcd, Duration::from_secs(20))
        .await?;
    eprintln!("etcd stalled 20 s while {second:?} rebooted");
    wait_until_done(&installed).await?;
    let report = check_outcome(&boots, sampler, 1).await?;
    eprintln!(
        "{} states checked, {} watch errors, peak {}",
        report.events,
        report.watch_errors,
        report.peak(NAME, "__default__")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_does_not_come_back_is_reported_and_keeps_its_slot() -> anyhow::Result<()> {
    let installed = install("30s").await?;
    let client = installed.cluster.client()?;
    let (boots, sampler) = start(&installed).await?;
    let stuck = a_node_rebooting(&client).await?;
    installed.cluster.node_down(&stuck).await?;
    let others: Vec<String> = node_names().into_iter().filter(|n| *n != stuck).collect();

    // The rest of the fleet completes with the one slot left; the stuck node is reported.
    let reported = e2e::wait_for(
        &e2e::skyhook_api(&client),
        NAME,
        "the RebootNotConfirmed condition naming the stuck node",
        |skyhook| {
            skyhook.data["status"]["conditions"]
                .as_array()
                .is_some_and(|conditions| {
                    conditions.iter().any(|c| {
                        c["type"] == "skyhook.nvidia.com/RebootNotConfirmed"
                            && c["status"] == "True"
                            && c["message"].as_str().is_some_and(|m| {
                                m.contains(&format!("{stuck} (package kernel:1.0.0"))
                            })
                    })
                })
        },
    )
    .await?;
    eprintln!("reported: {}", reported.data["status"]["conditions"]);
    let nodes = e2e::nodes::wait_for_nodes(&client, "every other node complete", |nodes| {
        others.iter().all(|n| {
            nodes
                .get(n)
                .is_some_and(|node| e2e::nodes::has_status(node, NAME, "complete"))
        })
    })
    .await?;
    for name in &others {
        assert!(
            !e2e::nodes::is_cordoned(&nodes[name]),
            "{name} left cordoned"
        );
    }
    assert!(
        e2e::budget::cordoned_by(&nodes[&stuck], NAME),
        "the stuck node keeps its cordon (and its budget slot)"
    );
    let events: Api<Event> = Api::all(client.clone());
    let warnings: Vec<String> = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={stuck}")))
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RebootNotConfirmed"))
        .filter_map(|e| e.message)
        .collect();
    assert!(
        warnings
            .iter()
            .any(|m| m.contains(&stuck) && m.contains("kernel:1.0.0") && m.contains(" ago")),
        "Warning Events on {stuck}: {warnings:?}"
    );

    // Back: it finishes, and nothing is left cordoned.
    installed.cluster.node_up(&stuck).await?;
    wait_until_done(&installed).await?;
    let report = check_outcome(&boots, sampler, 1).await?;
    eprintln!(
        "{stuck} reported and completed after it came back; {} states checked, peak {}",
        report.events,
        report.peak(NAME, "__default__")
    );
    Ok(())
}
