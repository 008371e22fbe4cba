//! The CLI suite's node and package verbs (spec §6.4) through the real `kubectl`, on a rollout of
//! one agentless package over three light nodes: `node list`, `node status`, `node ignore` /
//! `unignore` (the label), `node reset` (the node state goes, and the operator runs the package
//! again), `package status`, and `package rerun` (the node goes back to `in_progress`, from the
//! start or from a given stage).

use anyhow::{Context, ensure};
use e2e::Kubectl;
use e2e::nodes::{has_status, node_state_key, stages, status_key, wait_for_node};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::cli_support::{PACKAGE, VERSION, agentless_skyhook, package_key, rows_starting};

const SKYHOOK: &str = "cli";
const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const IGNORE_LABEL: &str = "skyhook.nvidia.com/ignore";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_package_verbs() -> anyhow::Result<()> {
    let installed = e2e::install_with(e2e::Setup::agentless(NODES.len())).await?;
    let client = installed.cluster.client()?;
    let kubectl = Kubectl::with_plugin(&installed)?;
    // Long enough for every state change to be written before the stage ends.
    let manifest = agentless_skyhook(
        SKYHOOK,
        json!({e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}),
        &[("SLEEP_LEN", "1")],
        json!({}),
    );
    e2e::apply_yaml(&client, &manifest).await?;
    rollout_completes(&installed, &client).await?;

    node_list_and_status(&kubectl).await?;
    ignore_and_unignore(&kubectl, &client).await?;
    package_status(&kubectl).await?;
    node_reset(&installed, &kubectl, &client).await?;
    package_rerun(&installed, &kubectl, &client).await?;
    Ok(())
}

async fn rollout_completes(
    installed: &e2e::Installed,
    client: &kube::Client,
) -> anyhow::Result<()> {
    e2e::wait_for_skyhook_status(client, SKYHOOK, "complete", e2e::WAIT)
        .await
        .with_context(|| format!("controller log:\n{}", installed.controller_log_tail(40)))?;
    Ok(())
}

async fn node_list_and_status(kubectl: &Kubectl) -> anyhow::Result<()> {
    let list = kubectl
        .skyhook(&["node", "list", "--skyhook", SKYHOOK])
        .await?;
    ensure!(list.contains(&format!("Skyhook: {SKYHOOK}")), "{list}");
    ensure!(
        list.contains("Summary: 3 nodes (3 complete, 0 erroring, 0 in progress)"),
        "{list}"
    );
    for node in NODES {
        ensure!(
            rows_starting(&list, &[node, "complete", "1/1"]).len() == 1,
            "no complete row for {node}:\n{list}"
        );
    }
    let json = kubectl
        .skyhook_json(&["node", "list", "--skyhook", SKYHOOK])
        .await?;
    assert_eq!(json["skyhookName"], SKYHOOK, "{json}");
    let statuses: Vec<(&str, &str)> = json["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            (
                n["nodeName"].as_str().unwrap_or_default(),
                n["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        NODES.map(|node| (node, "complete")).to_vec(),
        "{json}"
    );

    let status = kubectl.skyhook(&["node", "status"]).await?;
    for node in NODES {
        ensure!(
            rows_starting(&status, &[node, SKYHOOK, "complete", "1/1"]).len() == 1,
            "no row for {node}:\n{status}"
        );
    }
    // A pattern picks nodes; wide lists each package with its stage and state.
    let wide = kubectl
        .skyhook(&["node", "status", "node-[12]", "-o", "wide"])
        .await?;
    for (node, listed) in [("node-1", true), ("node-2", true), ("node-3", false)] {
        let rows = rows_starting(
            &wide,
            &[node, SKYHOOK, PACKAGE, VERSION, "config", "complete"],
        );
        ensure!(rows.len() == usize::from(listed), "{node}:\n{wide}");
    }
    Ok(())
}

async fn ignore_and_unignore(kubectl: &Kubectl, client: &kube::Client) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let ignored = |node: &Node| {
        node.metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(IGNORE_LABEL))
            .map(String::as_str)
            == Some("true")
    };

    let out = kubectl.skyhook(&["node", "ignore", "node-3"]).await?;
    ensure!(out.contains("Node \"node-3\" ignored"), "{out}");
    ensure!(
        ignored(&nodes.get("node-3").await?),
        "node-3 has no ignore label"
    );
    let again = kubectl.skyhook(&["node", "ignore", "node-3"]).await?;
    ensure!(again.contains("Node \"node-3\" already ignored"), "{again}");

    let out = kubectl.skyhook(&["node", "unignore", "node-.*"]).await?;
    ensure!(out.contains("Node \"node-3\" unignored"), "{out}");
    ensure!(out.contains("Node \"node-1\" not ignored"), "{out}");
    for node in NODES {
        ensure!(!ignored(&nodes.get(node).await?), "{node} is still ignored");
    }
    Ok(())
}

async fn package_status(kubectl: &Kubectl) -> anyhow::Result<()> {
    let out = kubectl
        .skyhook(&["package", "status", PACKAGE, "--skyhook", SKYHOOK])
        .await?;
    for node in NODES {
        ensure!(
            rows_starting(&out, &[node, PACKAGE, VERSION, "config", "complete"]).len() == 1,
            "{node}:\n{out}"
        );
    }
    let json = kubectl
        .skyhook_json(&[
            "package",
            "status",
            PACKAGE,
            "--skyhook",
            SKYHOOK,
            "--node",
            "node-2",
        ])
        .await?;
    let nodes: Vec<&Value> = json["nodes"].as_array().into_iter().flatten().collect();
    ensure!(nodes.len() == 1, "{json}");
    assert_eq!(nodes[0]["nodeName"], "node-2", "{json}");
    assert_eq!(nodes[0]["state"], "complete", "{json}");
    Ok(())
}

/// Records every version of `node` from now on.
async fn record_node(client: &kube::Client, node: &str) -> anyhow::Result<e2e::Recorder<Node>> {
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    e2e::Recorder::start(Api::all(client.clone()), config).await
}

async fn node_reset(
    installed: &e2e::Installed,
    kubectl: &Kubectl,
    client: &kube::Client,
) -> anyhow::Result<()> {
    let recorder = record_node(client, "node-2").await?;
    let out = kubectl
        .skyhook(&["node", "reset", "node-2", "--skyhook", SKYHOOK, "-y"])
        .await?;
    ensure!(
        out.contains(&format!("Node \"node-2\" reset for Skyhook \"{SKYHOOK}\"")),
        "{out}"
    );
    let state_key = node_state_key(SKYHOOK);
    recorder
        .wait_until("node-2 without its node state", |seen| {
            seen.iter().any(|node| {
                !node
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(&state_key))
            })
        })
        .await?;
    // The operator starts the package over on the reset node; the others are not touched.
    wait_for_node(client, "node-2", "node-2 complete again", |node| {
        has_status(node, SKYHOOK, "complete")
            && stages(node, SKYHOOK).get(&package_key())
                == Some(&("config".to_owned(), "complete".to_owned()))
    })
    .await
    .with_context(|| format!("controller log:\n{}", installed.controller_log_tail(30)))?;
    Ok(())
}

async fn package_rerun(
    installed: &e2e::Installed,
    kubectl: &Kubectl,
    client: &kube::Client,
) -> anyhow::Result<()> {
    let status = status_key(SKYHOOK);
    let in_progress = |node: &Node| {
        node.metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(&status))
            .map(String::as_str)
            == Some("in_progress")
    };

    // From the start: the entry goes, the node is in progress again, then complete.
    let recorder = record_node(client, "node-1").await?;
    let out = rerun(kubectl, "node-1", &[]).await?;
    ensure!(out.contains("node-1"), "{out}");
    recorder
        .wait_until("node-1's status_ label back to in_progress", |seen| {
            seen.iter().any(in_progress)
        })
        .await?;
    drop(recorder);
    wait_complete(installed, client, "node-1").await?;

    // From a stage: the entry becomes (config, in_progress) and the config stage runs again.
    let recorder = record_node(client, "node-3").await?;
    let out = rerun(kubectl, "node-3", &["--stage", "config"]).await?;
    ensure!(out.contains("from stage config"), "{out}");
    let seen = recorder
        .wait_until("node-3 in progress in stage config", |seen| {
            seen.iter().any(|node| {
                in_progress(node)
                    && stages(node, SKYHOOK).get(&package_key())
                        == Some(&("config".to_owned(), "in_progress".to_owned()))
            })
        })
        .await?;
    // Only config reruns: no version of the node went back to apply.
    ensure!(
        !seen.iter().any(|node| stages(node, SKYHOOK)
            .get(&package_key())
            .map(|s| s.0.as_str())
            == Some("apply")),
        "node-3 went back to apply"
    );
    drop(recorder);
    wait_complete(installed, client, "node-3").await?;
    Ok(())
}

/// `kubectl skyhook package rerun` of [`PACKAGE`] on `node`, with `options`, confirmed.
async fn rerun(kubectl: &Kubectl, node: &str, options: &[&str]) -> anyhow::Result<String> {
    let mut args = vec![
        "package",
        "rerun",
        PACKAGE,
        "--skyhook",
        SKYHOOK,
        "--node",
        node,
    ];
    args.extend_from_slice(options);
    args.push("-y");
    kubectl.skyhook(&args).await
}

async fn wait_complete(
    installed: &e2e::Installed,
    client: &kube::Client,
    node: &str,
) -> anyhow::Result<()> {
    wait_for_node(client, node, &format!("{node} complete again"), |n| {
        has_status(n, SKYHOOK, "complete")
    })
    .await
    .with_context(|| format!("controller log:\n{}", installed.controller_log_tail(30)))?;
    Ok(())
}
