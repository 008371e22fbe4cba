//! `helm upgrade` from the chart of the release before the nodewright group (no NodeWright
//! CRDs; taken from the repository's history) to this one, in the middle of a rollout, with
//! the same binaries (they drive the nodewright group only where its CRDs are served):
//! - a Skyhook's package is mid-apply on both nodes when the release is upgraded (its script
//!   waits for a host file);
//! - the upgrade installs the nodewright CRDs, kept on uninstall (`helm.sh/resource-policy:
//!   keep`), and the restarted controller continues the rollout: every stage runs once on each
//!   node (its script logs each run on the host, and each stage has one Job across the
//!   upgrade) and the Skyhook completes;
//! - a NodeWright can then be created, and completes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, ensure};
use devcluster::{DevCluster, DevClusterOptions};
use e2e::helm;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::runtime::watcher;
use serde_json::json;
use skyhook_api::keys::SKYHOOK;
use skyhook_api::nodewright_v1alpha1::NodeWright;

/// The last commit whose chart served only `skyhook.nvidia.com` (the parent of the one that
/// added the nodewright CRD templates).
const CHART_BEFORE_NODEWRIGHT: &str = "ec62b3f";
const RELEASE: &str = "skyhook-operator";
const NAMESPACE: &str = "skyhook";
const NAME: &str = "upgrade";
const NODES: [&str; 2] = ["node-1", "node-2"];
/// Every stage the package's script runs appends `<stage>` here, on the node's host.
const RUNS: &str = "var/lib/upgrade-runs";
/// The apply waits for this host file, so that it is in flight across the upgrade.
const GO: &str = "etc/upgrade-go";
/// The values both releases run with: one controller, no webhook (neither is what this shows).
const VALUES: [&str; 6] = [
    "--set",
    "controllerManager.replicas=1",
    "--set",
    "controllerManager.podDisruptionBudget.minAvailable=null",
    "--set",
    "webhook.enable=false",
];

fn spec() -> serde_json::Value {
    json!({
        "nodeSelectors": {"matchLabels": {e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}},
        "packages": {"slow": {
            "version": "1.1.1",
            "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
            "configMap": {
                "apply.sh": format!("echo apply >> /{RUNS}\nwhile [ ! -e /{GO} ]; do sleep 1; done"),
                "config.sh": format!("echo config >> /{RUNS}"),
            },
        }},
    })
}

/// The chart at [`CHART_BEFORE_NODEWRIGHT`], extracted under `dir`.
fn chart_before_nodewright(dir: &std::path::Path) -> anyhow::Result<PathBuf> {
    let archive = dir.join("chart.tar");
    let output = Command::new("git")
        .arg("-C")
        .arg(e2e::workspace())
        .args(["archive", "--format=tar", "--output"])
        .arg(&archive)
        .args([CHART_BEFORE_NODEWRIGHT, "chart"])
        .output()
        .context("running git archive")?;
    ensure!(
        output.status.success(),
        "git archive {CHART_BEFORE_NODEWRIGHT} chart failed (this test needs the repository's \
         history: run it in a clone, not an export): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(dir)
        .output()
        .context("running tar")?;
    ensure!(
        output.status.success(),
        "extracting the old chart: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(dir.join("chart"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_upgrade_from_the_chart_before_nodewright_keeps_the_rollout() -> anyhow::Result<()> {
    e2e::build_binaries()?;
    let old = tempfile::tempdir()?;
    let old_chart = chart_before_nodewright(old.path())?;
    ensure!(
        !old_chart.join("templates/nodewright-crds.yaml").exists(),
        "the chart at {CHART_BEFORE_NODEWRIGHT} already has the nodewright CRDs"
    );
    let cluster = DevCluster::start(DevClusterOptions {
        images: skyhook_devcluster::images(),
        nodes: NODES.len(),
        pod_network: true,
        node_labels: BTreeMap::from([(
            e2e::TEST_NODE_LABEL.to_owned(),
            e2e::TEST_NODE_VALUE.to_owned(),
        )]),
        ..DevClusterOptions::default()
    })
    .await
    .context("starting the devcluster")?;
    let kubeconfig = cluster.kubeconfig_path();
    let client = cluster.client()?;
    let roots = e2e::host::roots(&cluster, &NODES)?;
    let release = |verb: &str, chart: &str, extra: &[&str]| -> anyhow::Result<String> {
        let mut args = vec![verb, RELEASE, chart, "--namespace", NAMESPACE];
        args.extend(extra);
        args.extend(VALUES);
        args.extend(["--wait", "--timeout", "300s"]);
        helm::run_on(&kubeconfig, &args)
    };
    release(
        "install",
        &old_chart.to_string_lossy(),
        &["--create-namespace"],
    )?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    ensure!(
        crds.get_opt("nodewrights.nodewright.nvidia.com")
            .await?
            .is_none(),
        "the old chart installed no NodeWright CRD"
    );

    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let job_versions = e2e::Recorder::start(
        jobs,
        watcher::Config::default().labels(&format!("{}={NAME}", SKYHOOK.name_label)),
    )
    .await?;
    e2e::apply_yaml(&client, &e2e::skyhook_manifest(NAME, spec(), json!({}))).await?;
    for root in &roots {
        e2e::host::wait_for_lines(root, RUNS, "the apply to start on every node", |runs| {
            runs == ["apply"]
        })
        .await?;
    }

    release("upgrade", &helm::chart_dir().to_string_lossy(), &[])?;
    let crd = crds
        .get("nodewrights.nodewright.nvidia.com")
        .await
        .context("the upgrade installs the NodeWright CRD")?;
    let policy = (crd.metadata.annotations.as_ref())
        .and_then(|annotations| annotations.get("helm.sh/resource-policy"))
        .cloned();
    ensure!(
        policy.as_deref() == Some("keep"),
        "the NodeWright CRD is kept on uninstall: {policy:?}"
    );
    for root in &roots {
        e2e::host::touch(root, GO)?;
    }
    e2e::wait_for_skyhook_status(&client, NAME, "complete", e2e::WAIT).await?;

    let ran = (roots.iter())
        .map(|root| e2e::host::lines(root, RUNS))
        .collect::<anyhow::Result<Vec<_>>>()?;
    ensure!(
        ran.iter().all(|runs| runs == &["apply", "config"]),
        "each stage ran once on each node: {ran:?}"
    );
    let mut stages: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for job in job_versions.seen() {
        let label = |key: &str| {
            (job.metadata.labels.as_ref())
                .and_then(|labels| labels.get(key))
                .cloned()
                .unwrap_or_default()
        };
        stages
            .entry((label(SKYHOOK.node_label), label(SKYHOOK.stage_label)))
            .or_default()
            .insert(job.metadata.uid.clone().unwrap_or_default());
    }
    let expected: BTreeSet<(String, String)> = NODES
        .iter()
        .flat_map(|node| ["apply", "config"].map(|stage| (node.to_string(), stage.to_owned())))
        .collect();
    ensure!(
        stages.keys().cloned().collect::<BTreeSet<_>>() == expected
            && stages.values().all(|uids| uids.len() == 1),
        "one Job per node and stage across the upgrade: {stages:?}"
    );

    // The upgraded release drives NodeWrights.
    let nodewright = json!({
        "apiVersion": "nodewright.nvidia.com/v1alpha1",
        "kind": "NodeWright",
        "metadata": {"name": "after-upgrade"},
        "spec": {
            "nodeSelectors": {"matchLabels": {e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}},
            "packages": {"hello": {
                "version": "1.1.1",
                "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
            }},
        },
    });
    e2e::apply_yaml(&client, &nodewright.to_string()).await?;
    let nodewrights: Api<NodeWright> = Api::all(client.clone());
    e2e::wait_for_nodewright_status(&nodewrights, "after-upgrade", "complete").await?;
    Ok(())
}
