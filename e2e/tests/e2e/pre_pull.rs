//! `spec.prePullImages` on a devcluster: two nodes, one at a time, a package that reboots, whose
//! version is a tag the registry does not have. Each node's images are pulled by a short pod
//! before its cordon; the pull fails, so the package ends `erroring` with the kubelet's error in
//! a Warning Event and the Skyhook's `PrePullHeld` condition, `kubectl skyhook status` says so,
//! and no node is ever cordoned (every version of both Nodes is recorded from the start). With
//! the version fixed the same rollout pulls, cordons, reboots and completes, and the pre-pull
//! pods are gone.

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;
use skyhook_api::keys;
use skyhook_api::v1alpha1::Skyhook;

use e2e::{Kubectl, Recorder, Setup, nodes};

use crate::skyhook_reads;

const SKYHOOK: &str = "pre-pulled";
const NODES: [&str; 2] = ["node-1", "node-2"];
/// devcluster's registry has no `*bogus*` tag of the test image (`unavailable_tags`).
const BAD_VERSION: &str = "1.0.0-bogus";

fn skyhook() -> String {
    let spec = json!({
        "nodeSelectors": {"matchLabels": {"skyhook.nvidia.com/test-node": "skyhooke2e"}},
        "interruptionBudget": {"count": 1},
        "prePullImages": true,
        "packages": {
            "driver": {
                "version": BAD_VERSION,
                "image": "ghcr.io/nvidia/skyhook/agentless",
                "interrupt": {"type": "reboot"},
                "env": [{"name": "SLEEP_LEN", "value": "1"}]
            }
        }
    });
    e2e::skyhook_manifest(SKYHOOK, spec, json!({}))
}

fn pull_failed(skyhook: &Skyhook) -> Option<String> {
    let held = skyhook
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .find(|c| {
            c.type_ == keys::SKYHOOK.condition_pre_pull_held
                && c.status == "True"
                && c.reason == keys::PRE_PULL_FAILED_REASON
        })?;
    Some(held.message.clone())
}

fn cordoned_versions(recorders: &[Recorder<Node>]) -> Vec<String> {
    (recorders.iter())
        .flat_map(Recorder::seen)
        .filter(nodes::is_cordoned)
        .map(|n| n.metadata.name.unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_whose_image_cannot_be_pulled_errors_without_its_node_ever_cordoned()
-> anyhow::Result<()> {
    let installed = e2e::install_with(Setup::agentless(NODES.len())).await?;
    let client = installed.cluster.client()?;
    let mut recorders = Vec::new();
    for node in NODES {
        recorders.push(e2e::record_node(&client, node).await?);
    }
    let skyhooks = Recorder::start(
        Api::<Skyhook>::all(client.clone()),
        watcher::Config::default(),
    )
    .await?;
    let events = Recorder::start(
        Api::<Event>::all(client.clone()),
        watcher::Config::default(),
    )
    .await?;
    e2e::apply_yaml(&client, &skyhook()).await?;

    let seen = skyhooks
        .wait_until("PrePullHeld saying an image cannot be pulled", |seen| {
            seen.iter().any(|s| pull_failed(s).is_some())
        })
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    let message = seen.iter().rev().find_map(pull_failed).unwrap_or_default();
    let image = format!("ghcr.io/nvidia/skyhook/agentless:{BAD_VERSION}");
    assert!(
        message.starts_with("an image cannot be pulled on 1 node: ")
            && (message.contains(&format!("([{image}] ErrImagePull)"))
                || message.contains(&format!("([{image}] ImagePullBackOff)"))),
        "{message}"
    );
    let warned = events
        .wait_until("a PrePullFailed Warning on a node", |seen| {
            seen.iter().any(|e| {
                e.reason.as_deref() == Some("PrePullFailed")
                    && e.action.as_deref() == Some("PullImages")
                    && e.type_.as_deref() == Some("Warning")
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Node")
            })
        })
        .await?;
    let note = (warned.iter())
        .find(|e| e.reason.as_deref() == Some("PrePullFailed"))
        .and_then(|e| e.note.clone())
        .unwrap_or_default();
    assert!(
        note.starts_with(&format!(
            "image [{image}] of package [driver:{BAD_VERSION}] cannot be pulled on node [node-"
        )) && note.contains("the node was not cordoned"),
        "{note}"
    );
    let failed_node = NODES
        .into_iter()
        .find(|n| note.contains(&format!("on node [{n}]")))
        .context("the Event names a node")?;
    let node = nodes::wait_for_node(&client, failed_node, "erroring at apply", |n| {
        nodes::has_status(n, SKYHOOK, "erroring")
            && nodes::stages(n, SKYHOOK)
                == nodes::expect_stages(&[(&format!("driver|{BAD_VERSION}"), "apply", "erroring")])
    })
    .await?;
    assert!(!nodes::is_cordoned(&node));
    let kubectl = Kubectl::with_plugin(&installed)?;
    let text = kubectl.skyhook(&["status", SKYHOOK]).await?;
    assert!(
        text.contains("nodes waiting for their images before the cordon") && text.contains(&image),
        "{text}"
    );
    assert_eq!(
        cordoned_versions(&recorders),
        Vec::<String>::new(),
        "no node is cordoned while its image cannot be pulled"
    );

    // The version fixed: the same rollout pulls, cordons, reboots and completes.
    let fix = json!({"spec": {"packages": {"driver": {"version": "1.0.0"}}}});
    Api::<Skyhook>::all(client.clone())
        .patch(SKYHOOK, &PatchParams::default(), &Patch::Merge(&fix))
        .await?;
    installed
        .wait_for_status(SKYHOOK, "complete")
        .await
        .with_context(|| installed.controller_log_tail(40))?;
    let mut cordoned = cordoned_versions(&recorders);
    cordoned.dedup();
    cordoned.sort();
    cordoned.dedup();
    assert_eq!(
        cordoned, NODES,
        "each node is cordoned for its reboot once pulled"
    );
    let pods = Api::<Pod>::namespaced(client.clone(), e2e::pods::NAMESPACE)
        .list(&ListParams::default().labels(&format!("{}=true", keys::SKYHOOK.pre_pull_label)))
        .await?;
    let left: Vec<_> = (pods.items.iter())
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert!(
        left.is_empty(),
        "pre-pull pods left after the rollout: {left:?}"
    );
    assert!(
        skyhook_reads::true_condition_message(
            &Api::<Skyhook>::all(client).get(SKYHOOK).await?,
            keys::SKYHOOK.condition_pre_pull_held
        )
        .is_none(),
        "nothing holds the Skyhook any more"
    );
    Ok(())
}
