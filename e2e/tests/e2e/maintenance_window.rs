//! Issue #17 item 4 on a devcluster: a DeploymentPolicy's maintenance window holds the second
//! batch until it opens. The rollout starts under an always-open window; while the first node
//! is being worked on, the policy is changed to a window that opens at the next whole minute
//! (read in Europe/Berlin). The first node finishes outside it; the second waits, and the
//! Skyhook (and `kubectl skyhook status`) says when the window opens; the second node is picked
//! only at or after that time, by the controller's own record (`status.nodePriority`).
//!
//! Issue #37 item 4: an open window's `budget` holds a policy that would take every node at once
//! to one node at a time, and the Skyhook says so while it holds nodes back.

use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{SignedDuration, Timestamp, Unit};
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::json;
use skyhook_api::keys;
use skyhook_api::v1alpha1::Skyhook;

use e2e::{Kubectl, Recorder, Setup};

use crate::skyhook_reads;

const SKYHOOK: &str = "windowed";
const POLICY: &str = "nightly";
const ZONE: &str = "Europe/Berlin";

fn policy(windows: serde_json::Value) -> String {
    e2e::policy_manifest(
        POLICY,
        json!({
            "default": {"budget": {"count": 1}, "strategy": {"fixed": {"initialBatch": 1}}},
            "maintenanceWindows": windows,
        }),
    )
}

fn skyhook() -> String {
    skyhook_sleeping(8)
}

fn skyhook_sleeping(seconds: u32) -> String {
    let spec = json!({
        "nodeSelectors": {"matchLabels": {"skyhook.nvidia.com/test-node": "skyhooke2e"}},
        "deploymentPolicy": POLICY,
        "packages": {
            "slow": {
                "version": "1.0.0",
                "image": "ghcr.io/nvidia/skyhook/agentless",
                "env": [{"name": "SLEEP_LEN", "value": seconds.to_string()}]
            }
        }
    });
    e2e::skyhook_manifest(SKYHOOK, spec, json!({}))
}

/// The whole minute nearest to 100 s from now (70 to 130 s away), and its cron schedule in
/// [`ZONE`].
fn next_opening() -> anyhow::Result<(Timestamp, String)> {
    let now = Timestamp::now().to_zoned(TimeZone::get(ZONE)?);
    let opens = (now + SignedDuration::from_secs(100)).round(Unit::Minute)?;
    let schedule = format!("{} {} * * *", opens.minute(), opens.hour());
    Ok((opens.timestamp(), schedule))
}

fn condition(skyhook: &Skyhook) -> Option<String> {
    skyhook_reads::true_condition_message(
        skyhook,
        keys::SKYHOOK.condition_outside_maintenance_window,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_opening_mid_rollout_holds_the_second_batch() -> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(2)).await?;
    let client = installed.cluster.client()?;
    let all = watcher::Config::default();
    let skyhooks = Recorder::start(Api::<Skyhook>::all(client.clone()), all).await?;
    let always = json!([{"schedule": "* * * * *", "duration": "24h"}]);
    e2e::apply_yaml(&client, &policy(always)).await?;
    e2e::apply_yaml(&client, &skyhook()).await?;

    let is = |s: &Skyhook| s.metadata.name.as_deref() == Some(SKYHOOK);
    skyhooks
        .wait_until("the first node to be in progress", |seen| {
            seen.iter()
                .any(|s| is(s) && skyhook_reads::status_of_node(s, "node-1") == Some("in_progress"))
        })
        .await?;
    let (opens_at, schedule) = next_opening()?;
    let window = json!([{"schedule": schedule, "duration": "1h", "timeZone": ZONE}]);
    e2e::apply_yaml(&client, &policy(window)).await?;

    let held = skyhooks
        .wait_until(
            "the second batch to be held with the first node complete",
            |seen| {
                seen.iter().any(|s| {
                    is(s)
                        && condition(s).is_some()
                        && skyhook_reads::status_of_node(s, "node-1") == Some("complete")
                })
            },
        )
        .await?;
    let message = held
        .iter()
        .rev()
        .find_map(|s| condition(s).filter(|_| is(s)))
        .unwrap_or_default();
    assert!(
        message.contains(&format!("opens at {opens_at}")),
        "{message}"
    );
    let kubectl = Kubectl::with_plugin(&installed)?;
    let text = kubectl.skyhook(&["status", SKYHOOK]).await?;
    assert!(
        text.contains("waiting for a maintenance window") && text.contains(&opens_at.to_string()),
        "{text}"
    );

    installed.wait_for_status(SKYHOOK, "complete").await?;
    let seen = skyhooks.seen();
    let picked_at = seen
        .iter()
        .filter(|s| is(s))
        .find_map(|s| s.status.as_ref()?.node_priority.get("node-2").cloned())
        .map(|time| time.0);
    let picked_at = picked_at.ok_or_else(|| anyhow::anyhow!("node-2 was never picked"))?;
    assert!(
        picked_at >= opens_at,
        "node-2 picked at {picked_at}, before the window opened at {opens_at}"
    );
    let held_node_2 = seen
        .iter()
        .filter(|s| is(s) && condition(s).is_some())
        .all(|s| skyhook_reads::status_of_node(s, "node-2") != Some("in_progress"));
    assert!(held_node_2, "node-2 ran while the Skyhook said it was held");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_windows_budget_holds_a_wide_policy_to_one_node_at_a_time() -> anyhow::Result<()> {
    const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
    let installed = e2e::install_with(Setup::agentless(NODES.len())).await?;
    let client = installed.cluster.client()?;
    let all = watcher::Config::default();
    let skyhooks = Recorder::start(Api::<Skyhook>::all(client.clone()), all).await?;
    // Every node at once by the policy's own budget and strategy; one by the window's.
    let wide = e2e::policy_manifest(
        POLICY,
        json!({
            "default": {"budget": {"percent": 100}, "strategy": {"fixed": {"initialBatch": 3}}},
            "maintenanceWindows": [
                {"schedule": "0 0 * * *", "duration": "24h", "budget": {"count": 1}}
            ],
        }),
    );
    e2e::apply_yaml(&client, &wide).await?;
    e2e::apply_yaml(&client, &skyhook_sleeping(4)).await?;

    let is = |s: &Skyhook| s.metadata.name.as_deref() == Some(SKYHOOK);
    let budget_held = |s: &Skyhook| {
        skyhook_reads::true_condition_message(s, keys::SKYHOOK.condition_window_budget_held)
    };
    let held = skyhooks
        .wait_until("the window budget to hold nodes back", |seen| {
            seen.iter().any(|s| is(s) && budget_held(s).is_some())
        })
        .await?;
    let message = held
        .iter()
        .rev()
        .find_map(|s| budget_held(s).filter(|_| is(s)))
        .unwrap_or_default();
    assert!(
        message.contains(&format!("DeploymentPolicy [{POLICY}]"))
            && message.contains("__default__ (1 node at once)"),
        "{message}"
    );
    let kubectl = Kubectl::with_plugin(&installed)?;
    let text = kubectl.skyhook(&["status", SKYHOOK]).await?;
    assert!(
        text.contains("held by a maintenance window's budget"),
        "{text}"
    );

    installed.wait_for_status(SKYHOOK, "complete").await?;
    let seen = skyhooks.seen();
    for skyhook in seen.iter().filter(|s| is(s)) {
        let working: Vec<&str> = (NODES.iter().copied())
            .filter(|node| skyhook_reads::status_of_node(skyhook, node) == Some("in_progress"))
            .collect();
        assert!(
            working.len() <= 1,
            "nodes {working:?} in progress at once under a window budget of one node"
        );
    }
    let last = seen.iter().rev().find(|s| is(s));
    assert_eq!(
        last.and_then(budget_held),
        None,
        "the condition stays after the rollout completed"
    );
    Ok(())
}
