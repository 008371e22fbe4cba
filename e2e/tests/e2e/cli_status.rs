//! `kubectl skyhook plan` and `status` through the real `kubectl`, on three light nodes:
//!
//! - `plan -f examples/demo.yaml` (the seed Quick Start, before it is applied) lists exactly the
//!   nodes labelled `skyhook.nvidia.com/test-node=demo`, each with the stages its package runs,
//!   and changes nothing in the cluster.
//! - A package that fails (the agentless image with `EXIT_CODE=2`) shows in `status` as an
//!   erroring node, with the failing stage and the container's exit code, in the table and in
//!   JSON, and the overview counts it.

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use e2e::Kubectl;
use e2e::nodes::{has_status, wait_for_node};
use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Node};
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};

use crate::cli_support::{PACKAGE, VERSION, agentless_skyhook, rows_starting};

const DEMO_NODES: [&str; 2] = ["node-1", "node-2"];
const FAILING: &str = "failing";
const FAILING_NODE: &str = "node-3";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_and_status_through_kubectl() -> anyhow::Result<()> {
    let installed = e2e::install_with(e2e::Setup::agentless(3).single_attempt()).await?;
    let client = installed.cluster.client()?;
    let kubectl = Kubectl::with_plugin(&installed)?;

    plan_of_the_demo(&kubectl, &client).await?;
    status_of_an_erroring_package(&installed, &kubectl, &client).await?;
    Ok(())
}

async fn plan_of_the_demo(kubectl: &Kubectl, client: &kube::Client) -> anyhow::Result<()> {
    e2e::nodes::label_nodes(client, DEMO_NODES, &[(e2e::TEST_NODE_LABEL, "demo")]).await?;
    let demo = e2e::workspace().join("examples/demo.yaml");
    let demo = demo.to_str().context("the repository path is not UTF-8")?;

    let before = WritableClusterState::take(client).await?;
    let text = kubectl.skyhook(&["plan", "-f", demo]).await?;
    ensure!(
        text.contains("Plan for Skyhook demo (new), policy legacy: 2 matching node(s)"),
        "{text}"
    );
    for node in DEMO_NODES {
        let rows = rows_starting(&text, &[node, "__default__"]);
        ensure!(
            rows.len() == 1 && rows[0].contains("tuning@1.1.0: apply>config"),
            "{node}:\n{text}"
        );
    }
    ensure!(rows_starting(&text, &["node-3"]).is_empty(), "{text}");

    let plan = kubectl.skyhook_json(&["plan", "-f", demo]).await?;
    assert_eq!(plan["skyhookName"], "demo", "{plan}");
    assert_eq!(plan["exists"], false, "{plan}");
    let planned: Vec<(&str, &Value)> = plan["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| (n["nodeName"].as_str().unwrap_or_default(), &n["packages"]))
        .collect();
    let expected_packages =
        json!([{"name": "tuning", "version": "1.1.0", "stages": ["apply", "config"]}]);
    assert_eq!(
        planned,
        DEMO_NODES
            .iter()
            .map(|node| (*node, &expected_packages))
            .collect::<Vec<_>>(),
        "{plan}"
    );

    let after = WritableClusterState::take(client).await?;
    before.unchanged(&after)?;
    ensure!(
        e2e::skyhook_api(client).get_opt("demo").await?.is_none(),
        "plan created the Skyhook"
    );
    Ok(())
}

/// What a plan must not change: every Skyhook and DeploymentPolicy (by resourceVersion) and
/// every Node. Node heartbeats rewrite a node's status now and then, so a node whose
/// resourceVersion moved must still have the same labels, annotations and spec.
#[derive(Debug, PartialEq)]
struct WritableClusterState {
    skyhooks: BTreeMap<String, String>,
    policies: BTreeMap<String, String>,
    nodes: BTreeMap<String, (String, Value)>,
}

impl WritableClusterState {
    async fn take(client: &kube::Client) -> anyhow::Result<Self> {
        let versions = |objects: Vec<DynamicObject>| {
            objects
                .into_iter()
                .map(|o| {
                    (
                        o.metadata.name.unwrap_or_default(),
                        o.metadata.resource_version.unwrap_or_default(),
                    )
                })
                .collect()
        };
        let policies = policy_api(client).list(&ListParams::default()).await?;
        let skyhooks = e2e::skyhook_api(client)
            .list(&ListParams::default())
            .await?;
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await?;
        Ok(Self {
            skyhooks: versions(skyhooks.items),
            policies: versions(policies.items),
            nodes: nodes
                .items
                .into_iter()
                .map(|node| {
                    let writable = json!({
                        "labels": node.metadata.labels,
                        "annotations": node.metadata.annotations,
                        "spec": node.spec,
                    });
                    (
                        node.metadata.name.unwrap_or_default(),
                        (node.metadata.resource_version.unwrap_or_default(), writable),
                    )
                })
                .collect(),
        })
    }

    fn unchanged(&self, after: &Self) -> anyhow::Result<()> {
        ensure!(
            self.skyhooks == after.skyhooks,
            "Skyhooks changed: {self:?} -> {after:?}"
        );
        ensure!(
            self.policies == after.policies,
            "policies changed: {self:?} -> {after:?}"
        );
        ensure!(
            self.nodes.keys().eq(after.nodes.keys()),
            "nodes changed: {self:?} -> {after:?}"
        );
        for (name, (version, writable)) in &self.nodes {
            let (version_after, writable_after) = &after.nodes[name];
            ensure!(
                version == version_after || writable == writable_after,
                "node {name} changed: {writable} -> {writable_after}"
            );
        }
        Ok(())
    }
}

fn policy_api(client: &kube::Client) -> Api<DynamicObject> {
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("skyhook.nvidia.com", "v1alpha1", "DeploymentPolicy"),
        "deploymentpolicies",
    );
    Api::all_with(client.clone(), &resource)
}

async fn status_of_an_erroring_package(
    installed: &e2e::Installed,
    kubectl: &Kubectl,
    client: &kube::Client,
) -> anyhow::Result<()> {
    let manifest = agentless_skyhook(
        FAILING,
        json!({"kubernetes.io/hostname": FAILING_NODE}),
        &[("EXIT_CODE", "2"), ("SLEEP_LEN", "0")],
        json!({}),
    );
    // The plugin reads the exit code from the package pod, which restarts its failing
    // container; record every pod version so the exit is seen however briefly it shows.
    let pods = e2e::pods::record_pods(client, FAILING).await?;
    e2e::apply_yaml(client, &manifest).await?;
    wait_for_node(client, FAILING_NODE, "the package to be erroring", |n| {
        has_status(n, FAILING, "erroring")
    })
    .await
    .with_context(|| format!("controller log:\n{}", installed.controller_log_tail(30)))?;
    pods.wait_until("a package container that exited with 2", |seen| {
        seen.iter().any(|pod| {
            pod.status
                .as_ref()
                .and_then(|s| s.init_container_statuses.as_ref())
                .is_some_and(|statuses| statuses.iter().any(exited_with_2))
        })
    })
    .await?;

    let text = kubectl.skyhook(&["status", FAILING]).await?;
    ensure!(text.contains("Status: erroring"), "{text}");
    let package = format!("{PACKAGE}@{VERSION}");
    ensure!(
        rows_starting(
            &text,
            &[FAILING_NODE, "erroring", "__default__", &package, "apply"]
        )
        .len()
            == 1,
        "no erroring node row:\n{text}"
    );
    ensure!(
        rows_starting(&text, &[FAILING_NODE, &package, "apply", "2"]).len() == 1,
        "no ERRORING NODE row with the exit code:\n{text}"
    );

    let json = kubectl.skyhook_json(&["status", FAILING]).await?;
    let erroring = &json["erroring"][0];
    assert_eq!(erroring["node"], FAILING_NODE, "{json}");
    assert_eq!(erroring["package"], PACKAGE, "{json}");
    assert_eq!(erroring["stage"], "apply", "{json}");
    assert_eq!(erroring["exitCode"], 2, "{json}");

    package_logs(kubectl).await?;

    let overview = kubectl.skyhook(&["status"]).await?;
    ensure!(
        rows_starting(&overview, &[FAILING, "erroring"]).len() == 1,
        "{overview}"
    );
    Ok(())
}

/// `package logs` picks the failing container of the erroring package's pod. The log itself
/// comes from the node's kubelet through the API server; light devcluster nodes serve no kubelet
/// API (docs/devcluster.md), so there the plugin must fail with an error that says so (full nodes:
/// `kubelet_api`).
async fn package_logs(kubectl: &Kubectl) -> anyhow::Result<()> {
    let output = kubectl
        .run(&["skyhook", "package", "logs", PACKAGE, "--skyhook", FAILING])
        .await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let header = stdout.lines().next().unwrap_or_default();
    ensure!(
        header.starts_with("==> Pod: failing-agentless-1-2-3-apply-node-3-")
            && header.contains(", Container: agentless-apply [")
            && header.ends_with(", Node: node-3 <=="),
        "package logs header: {header:?}\nstderr:\n{stderr}"
    );
    if output.status.success() {
        ensure!(stdout.contains("exit with 2"), "{stdout}");
    } else {
        ensure!(
            stderr.contains(
                "Error: failed to read the log of skyhook/failing-agentless-1-2-3-apply-node-3-"
            ) && stderr.contains("Hint: the API server fetches logs from the node's kubelet"),
            "{stderr}"
        );
        // One error line and one hint: no log lines from the client library.
        ensure!(stderr.lines().count() == 2, "{stderr}");
    }
    let none = kubectl
        .skyhook(&[
            "package",
            "logs",
            PACKAGE,
            "--skyhook",
            FAILING,
            "--stage",
            "config",
        ])
        .await?;
    ensure!(
        none.contains("No log to show") && none.contains("has a container agentless-config"),
        "{none}"
    );
    Ok(())
}

fn exited_with_2(status: &ContainerStatus) -> bool {
    let terminated_2 = |state: Option<&ContainerState>| {
        state
            .and_then(|s| s.terminated.as_ref())
            .is_some_and(|t| t.exit_code == 2)
    };
    terminated_2(status.state.as_ref()) || terminated_2(status.last_state.as_ref())
}
