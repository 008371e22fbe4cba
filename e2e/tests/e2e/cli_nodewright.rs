//! The plugin under its second name, `kubectl nodewright`, through the real `kubectl`: the
//! nodewright.nvidia.com CRDs applied by the test once the controller runs (so it does not watch
//! the group) and one NodeWright object. The node state is written by the test, and every verb
//! is checked on what it patches:
//! - `node list` / `node status` read only the `nodewright.nvidia.com/*` keys (with the
//!   `CORDONED` and `RUNTIME-REQUIRED-CORDON` fields), and `--skyhook` still works with
//!   upstream's deprecation note;
//! - `update-state` rewrites one entry (and `--add` creates one), `reset --package` removes one
//!   package's entries, `reset` speaks upstream's lines and keeps the cordon of a node the
//!   NodeWright still selects, `pause` writes the nodewright annotation;
//! - without `-n`, the operator is found in the `skyhook` namespace with a note on stderr;
//! - once the CRDs are gone, the preflight refuses with both group names.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use e2e::Kubectl;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions::is_deleted};
use serde_json::{Value, json};
use skyhook_api::keys::{NODEWRIGHT, SKYHOOK};
use skyhook_api::nodewright_v1alpha1::NodeWright;

use crate::cli_support::{PACKAGE, VERSION, package_key};

const NAME: &str = "nw";
const NODES: [&str; 2] = ["node-1", "node-2"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_through_kubectl_nodewright() -> anyhow::Result<()> {
    let installed = e2e::install_with(e2e::Setup::agentless(NODES.len())).await?;
    let client = installed.cluster.client()?;
    let kubectl = Kubectl::with_plugin(&installed)?;
    e2e::apply_nodewright_crds(&client).await?;
    create_nodewright(&client).await?;
    // node-1 has the package complete, is cordoned by the NodeWright and held by the
    // runtime-required cordon; node-2 has nothing yet. A Skyhook-prefixed state of the same
    // name on node-2 must be invisible to kubectl nodewright. The cordon and its annotations
    // land in one patch: the controller removes a runtime-required cordon annotation of either
    // group from a schedulable node as stale.
    Api::<Node>::all(client.clone())
        .patch(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {
                    NODEWRIGHT.node_state_annotation(NAME): state(&[entry("config", "complete")]),
                    NODEWRIGHT.cordon_annotation(NAME): "true",
                    NODEWRIGHT.runtime_required_cordon_annotation: "true",
                }},
                "spec": {"unschedulable": true},
            })),
        )
        .await
        .context("cordoning node-1")?;
    annotate(
        &client,
        "node-2",
        json!({SKYHOOK.node_state_annotation(NAME): state(&[entry("config", "complete")])}),
    )
    .await?;

    node_views(&kubectl).await?;
    update_state(&kubectl, &client).await?;
    reset_package_and_reset(&kubectl, &client).await?;
    pause_writes_the_nodewright_annotation(&kubectl, &client).await?;
    namespace_discovery(&kubectl, &client).await?;
    preflight_without_the_crds(&kubectl, &client).await?;
    Ok(())
}

fn entry(stage: &str, state: &str) -> Value {
    json!({"name": PACKAGE, "version": VERSION, "image": "ghcr.io/nvidia/skyhook/agentless",
           "stage": stage, "state": state})
}

fn state(entries: &[Value]) -> String {
    let map: serde_json::Map<String, Value> =
        entries.iter().map(|e| (package_key(), e.clone())).collect();
    Value::Object(map).to_string()
}

/// Creates the NodeWright of the test (its CRD is served: see [`e2e::apply_nodewright_crds`]).
async fn create_nodewright(client: &kube::Client) -> anyhow::Result<()> {
    let object: NodeWright = serde_json::from_value(json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": {"name": NAME},
        "spec": {
            "nodeSelectors": {"matchLabels": {e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}},
            "packages": {PACKAGE: {"version": VERSION, "image": "ghcr.io/nvidia/skyhook/agentless"}},
        },
    }))?;
    let api: Api<NodeWright> = Api::all(client.clone());
    api.create(&PostParams::default(), &object)
        .await
        .context("creating the NodeWright")?;
    Ok(())
}

async fn annotate(client: &kube::Client, node: &str, annotations: Value) -> anyhow::Result<()> {
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .with_context(|| format!("annotating {node}"))?;
    Ok(())
}

async fn annotations(
    client: &kube::Client,
    node: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let node = Api::<Node>::all(client.clone()).get(node).await?;
    Ok(node.metadata.annotations.unwrap_or_default())
}

async fn nodewright(kubectl: &Kubectl, args: &[&str]) -> anyhow::Result<String> {
    let mut all = vec!["nodewright"];
    all.extend_from_slice(args);
    kubectl.succeed(&all).await
}

async fn node_views(kubectl: &Kubectl) -> anyhow::Result<()> {
    let list = nodewright(kubectl, &["node", "list", "--nodewright", NAME]).await?;
    ensure!(list.starts_with(&format!("NodeWright: {NAME}\n")), "{list}");
    ensure!(
        list.contains("Summary: 1 nodes (1 complete, 0 erroring, 0 in progress)"),
        "node-2's skyhook-prefixed state is not the NodeWright's:\n{list}"
    );

    let old = kubectl
        .run(&["nodewright", "node", "list", "--skyhook", NAME])
        .await?;
    ensure!(old.status.success(), "{old:?}");
    let stderr = String::from_utf8_lossy(&old.stderr);
    ensure!(
        stderr.contains("Flag --skyhook has been deprecated, use --nodewright instead"),
        "{stderr}"
    );

    let status: Value =
        serde_json::from_str(&nodewright(kubectl, &["node", "status", "-o", "json"]).await?)?;
    let nodes = status["nodes"].as_array().cloned().unwrap_or_default();
    ensure!(nodes.len() == 1, "{status}");
    ensure!(nodes[0]["nodeName"] == "node-1", "{status}");
    ensure!(nodes[0]["runtimeRequiredCordon"] == true, "{status}");
    ensure!(nodes[0]["cordoned"] == true, "{status}");
    let table = nodewright(kubectl, &["node", "status"]).await?;
    let header = table.lines().next().unwrap_or_default();
    ensure!(
        header.split_whitespace().collect::<Vec<_>>()
            == [
                "NODE",
                "NODEWRIGHT",
                "STATUS",
                "PACKAGES",
                "CORDONED",
                "RUNTIME-REQUIRED-CORDON"
            ],
        "{table}"
    );

    // The skyhook binary, given --nodewright, reads the skyhook keys: node-2's.
    let skyhook = kubectl
        .skyhook(&["node", "list", "--nodewright", NAME])
        .await?;
    ensure!(
        skyhook.starts_with(&format!("Skyhook: {NAME}\n")),
        "{skyhook}"
    );
    ensure!(
        skyhook.contains("Summary: 1 nodes (1 complete"),
        "{skyhook}"
    );
    Ok(())
}

async fn update_state(kubectl: &Kubectl, client: &kube::Client) -> anyhow::Result<()> {
    let out = nodewright(
        kubectl,
        &[
            "update-state",
            NAME,
            PACKAGE,
            VERSION,
            "interrupt",
            "erroring",
            "--node",
            "node-1",
            "--node",
            "node-2",
            "-y",
        ],
    )
    .await?;
    ensure!(
        out.contains("Warning: node node-2 has no node state for NodeWright \"nw\"; skipped"),
        "{out}"
    );
    ensure!(
        out.contains("Node \"node-1\": package agentless (1.2.3) set to interrupt/erroring"),
        "{out}"
    );
    let written = entry_on(client, "node-1").await?;
    ensure!(
        written["stage"] == "interrupt" && written["state"] == "erroring",
        "{written}"
    );

    let dry = nodewright(
        kubectl,
        &[
            "update-state",
            NAME,
            PACKAGE,
            VERSION,
            "apply",
            "in_progress",
            "--node",
            "node-2",
            "--add",
            "--dry-run",
        ],
    )
    .await?;
    ensure!(
        dry.contains("[dry-run] Would set package agentless"),
        "{dry}"
    );
    ensure!(
        !annotations(client, "node-2")
            .await?
            .contains_key(&NODEWRIGHT.node_state_annotation(NAME)),
        "--dry-run wrote"
    );
    nodewright(
        kubectl,
        &[
            "update-state",
            NAME,
            PACKAGE,
            VERSION,
            "apply",
            "in_progress",
            "--node",
            "node-2",
            "--add",
            "-y",
        ],
    )
    .await?;
    ensure!(entry_on(client, "node-2").await?["state"] == "in_progress");

    let refused = kubectl
        .refused(&[
            "nodewright",
            "update-state",
            NAME,
            PACKAGE,
            "9.9.9",
            "apply",
            "complete",
            "-y",
        ])
        .await?;
    ensure!(refused.contains("not 9.9.9"), "{refused}");
    Ok(())
}

/// The NodeWright's entry of the package on `node`.
async fn entry_on(client: &kube::Client, node: &str) -> anyhow::Result<Value> {
    let annotations = annotations(client, node).await?;
    let text = annotations
        .get(&NODEWRIGHT.node_state_annotation(NAME))
        .with_context(|| format!("{node} has no NodeWright node state: {annotations:?}"))?;
    let state: Value = serde_json::from_str(text)?;
    Ok(state[package_key()].clone())
}

/// Fails naming the first of `lines` the plugin's output `out` lacks.
fn ensure_lines(out: &str, lines: &[&str]) -> anyhow::Result<()> {
    for line in lines {
        ensure!(out.contains(line), "{line:?} missing:\n{out}");
    }
    Ok(())
}

async fn reset_package_and_reset(kubectl: &Kubectl, client: &kube::Client) -> anyhow::Result<()> {
    let out = nodewright(kubectl, &["reset", NAME, "--package", PACKAGE, "-y"]).await?;
    ensure_lines(
        &out,
        &[
            "NodeWright: nw",
            "Package filter: agentless",
            "Nodes with a matching package (2):",
            "Successfully reset 2 node(s) for NodeWright \"nw\"",
        ],
    )?;
    let node_1 = annotations(client, "node-1").await?;
    ensure!(
        !node_1.contains_key(&NODEWRIGHT.node_state_annotation(NAME)),
        "{node_1:?}"
    );
    ensure!(
        node_1.contains_key(&NODEWRIGHT.cordon_annotation(NAME)),
        "reset --package touches nothing but the entries: {node_1:?}"
    );
    ensure!(
        annotations(client, "node-2")
            .await?
            .contains_key(&SKYHOOK.node_state_annotation(NAME)),
        "the skyhook-prefixed state stays"
    );

    annotate(
        client,
        "node-1",
        json!({NODEWRIGHT.node_state_annotation(NAME): state(&[entry("config", "complete")])}),
    )
    .await?;
    let out = nodewright(kubectl, &["reset", NAME, "-y"]).await?;
    ensure_lines(
        &out,
        &[
            "NodeWright: nw",
            "Nodes to reset (1):",
            "Successfully reset 1 node(s) for NodeWright \"nw\"",
        ],
    )?;
    let node_1 = annotations(client, "node-1").await?;
    ensure!(
        !node_1.contains_key(&NODEWRIGHT.node_state_annotation(NAME)),
        "{node_1:?}"
    );
    ensure!(
        node_1.contains_key(&NODEWRIGHT.cordon_annotation(NAME)),
        "node-1 is still selected: its cordon stays for the next run: {node_1:?}"
    );
    Ok(())
}

async fn pause_writes_the_nodewright_annotation(
    kubectl: &Kubectl,
    client: &kube::Client,
) -> anyhow::Result<()> {
    let out = nodewright(kubectl, &["pause", NAME, "-y"]).await?;
    ensure!(out.contains("NodeWright \"nw\" paused"), "{out}");
    let object = Api::<NodeWright>::all(client.clone()).get(NAME).await?;
    let annotations = object.metadata.annotations.unwrap_or_default();
    ensure!(
        annotations
            .get(NODEWRIGHT.pause_annotation)
            .map(String::as_str)
            == Some("true"),
        "{annotations:?}"
    );
    ensure!(
        !annotations.contains_key(SKYHOOK.pause_annotation),
        "{annotations:?}"
    );
    Ok(())
}

/// The devcluster runs the controller outside the cluster, so the test creates the Deployment
/// the plugin looks for, in the skyhook namespace.
async fn namespace_discovery(kubectl: &Kubectl, client: &kube::Client) -> anyhow::Result<()> {
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "skyhook-operator", "namespace": "skyhook",
                     "labels": {"app.kubernetes.io/name": "skyhook-operator",
                                "app.kubernetes.io/version": "v0.20.0"}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "op"}},
                 "template": {"metadata": {"labels": {"app": "op"}},
                              "spec": {"containers": [{"name": "op", "image": "example/op:v0.20.0"}]}}},
    }))?;
    Api::<Deployment>::namespaced(client.clone(), "skyhook")
        .create(&PostParams::default(), &deployment)
        .await
        .context("creating the operator Deployment")?;
    let out = kubectl.run(&["nodewright", "version"]).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "{stdout}\n{stderr}");
    ensure!(stdout.contains("NodeWright operator:\tv0.20.0"), "{stdout}");
    ensure!(
        stderr.contains("using namespace \"skyhook\""),
        "the fallback to the skyhook namespace is noted: {stderr}"
    );
    let explicit = kubectl
        .run(&["nodewright", "version", "-n", "skyhook"])
        .await?;
    ensure!(
        String::from_utf8_lossy(&explicit.stderr).is_empty(),
        "-n is used as given, without a note"
    );
    Ok(())
}

async fn preflight_without_the_crds(
    kubectl: &Kubectl,
    client: &kube::Client,
) -> anyhow::Result<()> {
    // The group leaves the API server's discovery once both CRDs are gone and the aggregator
    // dropped the APIService it registered for them: each is awaited (under load, each of the
    // API server's controllers on that path can take a while).
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in skyhook_api::crd::nodewright_crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let uid = crds.get(&name).await?.metadata.uid.unwrap_or_default();
        crds.delete(&name, &DeleteParams::default()).await?;
        e2e::within(
            &format!("the CRD {name} to be deleted"),
            e2e::WAIT,
            await_condition(crds.clone(), &name, is_deleted(&uid)),
        )
        .await?;
    }
    let services: Api<APIService> = Api::all(client.clone());
    let service = "v1alpha1.nodewright.nvidia.com";
    if let Some(registered) = services.get_opt(service).await? {
        let uid = registered.metadata.uid.unwrap_or_default();
        e2e::within(
            "the aggregator to drop the group's APIService",
            e2e::WAIT,
            await_condition(services.clone(), service, is_deleted(&uid)),
        )
        .await?;
    }
    let deadline = tokio::time::Instant::now() + e2e::WAIT;
    loop {
        let out = kubectl.run(&["nodewright", "status"]).await?;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success()
            && stderr.contains("nodewright.nvidia.com")
            && stderr.contains("skyhook.nvidia.com")
        {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "the preflight did not refuse once the CRDs and their APIService were gone: {stderr}"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // `version` skips the preflight.
    nodewright(kubectl, &["version", "--client-only"]).await?;
    Ok(())
}
