//! `helm install` of the chart into a devcluster, with the controller running *inside* the cluster
//! as the chart's pod (devcluster maps the chart's images to the built binaries): it runs with the
//! chart's ServiceAccount, least-privilege RBAC, environment and projected token, takes the Lease,
//! and rolls the Quick Start out; `helm uninstall` then runs the real pre-delete cleanup job.
//!
//! What a devcluster cannot do is left out, deliberately (docs/chart.md): the webhook (Services
//! cannot reach loopback pod IPs) and a second controller replica (pods share the machine's
//! network, so two cannot bind the same ports).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, ensure};
use devcluster::{DevCluster, DevClusterOptions};
use e2e::helm;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

fn helm_with(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let kubeconfig = kubeconfig.to_string_lossy();
    let mut all = args.to_vec();
    all.extend(["--kubeconfig", kubeconfig.as_ref()]);
    let output = helm::run(&all)?;
    ensure!(
        output.status.success(),
        "helm {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[tokio::test]
async fn the_chart_runs_the_controller_in_cluster_and_cleans_up_on_uninstall() -> anyhow::Result<()>
{
    e2e::build_binaries()?;
    let cluster = DevCluster::start(DevClusterOptions {
        nodes: 2,
        node_labels: BTreeMap::from([(
            "skyhook.nvidia.com/test-node".to_owned(),
            "demo".to_owned(),
        )]),
        ..DevClusterOptions::default()
    })
    .await
    .context("starting the devcluster")?;
    let kubeconfig = cluster.kubeconfig_path();
    let client = cluster.client()?;
    let chart = helm::chart_dir();

    helm_with(
        &kubeconfig,
        &[
            "install",
            "skyhook-operator",
            &chart.to_string_lossy(),
            "--namespace",
            "skyhook",
            "--create-namespace",
            "--set",
            "webhook.enable=false",
            "--set",
            "controllerManager.replicas=1",
            "--set",
            "controllerManager.podDisruptionBudget.minAvailable=null",
            "--set",
            "controllerManager.manager.env.logEncoder=console",
            // Pods share the machine's network: ports no other test binds.
            "--set",
            "controllerManager.manager.env.metricsPort=:18080",
            "--set",
            "controllerManager.manager.env.probePort=:18081",
            "--wait",
            "--timeout",
            "180s",
        ],
    )?;

    // The chart's Deployment is available and its pod, not a local process, holds the Lease.
    let deployment = Api::<Deployment>::namespaced(client.clone(), "skyhook")
        .get("skyhook-operator-controller-manager")
        .await?;
    let available = deployment
        .status
        .as_ref()
        .and_then(|status| status.available_replicas)
        .unwrap_or_default();
    ensure!(available == 1, "available replicas: {available}");
    let pods = Api::<Pod>::namespaced(client.clone(), "skyhook")
        .list(&ListParams::default().labels("app.kubernetes.io/component=controller"))
        .await?;
    let pod = pods
        .items
        .first()
        .and_then(|pod| pod.metadata.name.clone())
        .context("no controller pod")?;

    e2e::apply_manifest(&client, &e2e::workspace().join("examples/demo.yaml")).await?;
    e2e::wait_for_skyhook_status(&client, "demo", "complete", Duration::from_secs(240)).await?;

    let lease = Api::<Lease>::namespaced(client.clone(), "skyhook")
        .get("3c22c1ae.nvidia.com")
        .await?;
    let holder = lease
        .spec
        .and_then(|spec| spec.holder_identity)
        .unwrap_or_default();
    ensure!(
        holder.starts_with(&format!("{pod}_")),
        "the Lease is held by {holder:?}, not the chart's pod {pod}"
    );

    // The Skyhook carries the controller's finalizer: uninstall's cleanup job deletes it and waits,
    // so this completes only if the job (kubectl in the cluster) and the controller both work.
    helm_with(
        &kubeconfig,
        &[
            "uninstall",
            "skyhook-operator",
            "--namespace",
            "skyhook",
            "--wait",
            "--timeout",
            "180s",
        ],
    )?;
    let left = e2e::skyhook_api(&client)
        .list(&ListParams::default())
        .await?
        .items
        .len();
    ensure!(left == 0, "{left} Skyhooks survived the pre-delete cleanup");
    Ok(())
}
