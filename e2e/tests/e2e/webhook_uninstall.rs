//! The explicit uninstall admission rules (#14, upstream delta §2.7) through a real API server
//! and `kubectl apply`: `apply` needs `enabled`; a package with `enabled` may neither leave the
//! spec nor be downgraded while a node still holds it; cancelling a requested uninstall warns.
//!
//! The rules read the stored object's `status.nodeState`, which the test writes itself through
//! the status subresource. The controller is stopped once it has installed the CRDs, so nothing
//! rewrites that status between a patch and the apply that depends on it.

use std::time::Duration;

use anyhow::{Context, ensure};
use devcluster::{DevCluster, DevClusterOptions};
use skyhook_devcluster::{InstallOptions, SkyhookInstall, WebhookOptions};

const SKYHOOK_DENIED: &str = "admission webhook \"validate-skyhook.nvidia.com\" denied the request";
const NAME: &str = "uninstall-rules";

/// A cluster with the CRDs and the webhook, and no controller running.
struct Setup {
    _webhook: skyhook_devcluster::WebhookProcess,
    cluster: DevCluster,
}

async fn setup() -> anyhow::Result<Setup> {
    e2e::build_binaries()?;
    let cluster = DevCluster::start(DevClusterOptions {
        images: skyhook_devcluster::images(),
        ..DevClusterOptions::default()
    })
    .await
    .context("starting the devcluster")?;
    let mut controller = cluster
        .install(InstallOptions::default())
        .await
        .context("installing skyhook")?;
    controller.stop(Duration::from_secs(10));
    let webhook = cluster
        .install_webhook(WebhookOptions::default())
        .await
        .context("installing the webhook")?;
    Ok(Setup {
        _webhook: webhook,
        cluster,
    })
}

/// The Skyhook under test with the package `tuning` at `version`, its `uninstall` block, and
/// the package `keep` (so that removing `tuning` leaves a valid spec).
fn manifest(version: &str, enabled: bool, apply: bool) -> String {
    format!(
        r#"apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata:
  name: {NAME}
spec:
  nodeSelectors:
    matchLabels:
      e2e.skyhook.nvidia.com/uninstall-rules: no-such-node
  packages:
    keep:
      version: 1.0.0
      image: ghcr.io/nvidia/skyhook-packages/shellscript
    tuning:
      version: {version}
      image: ghcr.io/nvidia/skyhook-packages/shellscript
      uninstall:
        enabled: {enabled}
        apply: {apply}
"#
    )
}

/// [`manifest`] without the package `tuning`.
fn manifest_without_tuning() -> String {
    let full = manifest("2.0.0", true, false);
    let cut = full.find("    tuning:").unwrap_or(full.len());
    full[..cut].to_owned()
}

/// The outcome of `kubectl apply -f -` with `yaml`.
struct Applied {
    success: bool,
    stderr: String,
}

async fn apply(kubectl: &e2e::Kubectl, yaml: &str) -> anyhow::Result<Applied> {
    let output = kubectl
        .run_with_input(&["apply", "-f", "-"], yaml.as_bytes())
        .await?;
    Ok(Applied {
        success: output.status.success(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// Applies `yaml`, which must be refused by the Skyhook webhook with every one of `expected`.
async fn refused(
    kubectl: &e2e::Kubectl,
    what: &str,
    yaml: &str,
    expected: &[&str],
) -> anyhow::Result<()> {
    let applied = apply(kubectl, yaml).await?;
    ensure!(
        !applied.success,
        "{what}: kubectl apply was accepted:\n{yaml}"
    );
    for fragment in [SKYHOOK_DENIED].iter().chain(expected) {
        ensure!(
            applied.stderr.contains(fragment),
            "{what}: the refusal does not contain {fragment:?}:\n{}",
            applied.stderr
        );
    }
    Ok(())
}

/// Applies `yaml`, which must be accepted; kubectl's stderr (where it prints warnings).
async fn accepted(kubectl: &e2e::Kubectl, what: &str, yaml: &str) -> anyhow::Result<String> {
    let applied = apply(kubectl, yaml).await?;
    ensure!(
        applied.success,
        "{what}: kubectl apply was refused:\n{}",
        applied.stderr
    );
    Ok(applied.stderr)
}

/// Writes the Skyhook's `status.nodeState` for node `node-a` (a JSON merge patch: `null`
/// removes an entry).
async fn patch_node_state(
    kubectl: &e2e::Kubectl,
    entries: serde_json::Value,
) -> anyhow::Result<()> {
    let patch = serde_json::json!({"status": {"nodeState": {"node-a": entries}}});
    kubectl
        .succeed(&[
            "patch",
            "skyhook",
            NAME,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch.to_string(),
        ])
        .await?;
    Ok(())
}

fn tuning_entry(version: &str) -> serde_json::Value {
    serde_json::json!({
        "name": "tuning",
        "version": version,
        "image": "ghcr.io/nvidia/skyhook-packages/shellscript",
        "stage": "apply",
        "state": "complete",
    })
}

#[tokio::test]
async fn uninstall_rules_guard_removal_and_downgrade_and_warn_on_cancel() -> anyhow::Result<()> {
    let setup = setup().await?;
    let kubectl = e2e::Kubectl::new(setup.cluster.kubeconfig_path());

    refused(
        &kubectl,
        "apply without enabled",
        &manifest("2.0.0", false, true),
        &[
            "spec.packages.tuning.uninstall.apply",
            "package \"tuning\": uninstall.apply requires uninstall.enabled to be true",
        ],
    )
    .await?;

    accepted(&kubectl, "create", &manifest("2.0.0", true, false)).await?;
    patch_node_state(
        &kubectl,
        serde_json::json!({"tuning|2.0.0": tuning_entry("2.0.0")}),
    )
    .await?;

    refused(
        &kubectl,
        "removal while node-a holds tuning|2.0.0",
        &manifest_without_tuning(),
        &["package \"tuning\" has uninstall.enabled=true; set uninstall.apply=true and wait for completion before removing from spec"],
    )
    .await?;
    refused(
        &kubectl,
        "downgrade without apply",
        &manifest("1.0.0", true, false),
        &["package \"tuning\": downgrade not allowed — set uninstall.apply=true first, wait for uninstall to complete, then change version"],
    )
    .await?;

    accepted(
        &kubectl,
        "requesting the uninstall",
        &manifest("2.0.0", true, true),
    )
    .await?;
    refused(
        &kubectl,
        "downgrade while node-a still holds tuning|2.0.0",
        &manifest("1.0.0", true, true),
        &["package \"tuning\": downgrade not allowed — uninstall has not yet completed on all nodes. Wait for the uninstall to finish, then change version"],
    )
    .await?;

    let stderr = accepted(
        &kubectl,
        "cancelling the uninstall",
        &manifest("2.0.0", true, false),
    )
    .await?;
    let warning = "Warning: spec.packages.tuning.uninstall.apply: package \"tuning\": uninstall cancelled — nodes where uninstall completed will need to re-install";
    ensure!(
        stderr.contains(warning),
        "no cancel warning in kubectl's output:\n{stderr}"
    );

    // Once no node holds the old version, the downgrade and then the removal go through.
    accepted(
        &kubectl,
        "requesting the uninstall again",
        &manifest("2.0.0", true, true),
    )
    .await?;
    patch_node_state(&kubectl, serde_json::json!({"tuning|2.0.0": null})).await?;
    accepted(
        &kubectl,
        "downgrade once uninstalled",
        &manifest("1.0.0", true, true),
    )
    .await?;
    accepted(
        &kubectl,
        "removal once uninstalled",
        &manifest_without_tuning(),
    )
    .await?;
    let stored = kubectl
        .succeed(&[
            "get",
            "skyhook",
            NAME,
            "-o",
            "jsonpath={.spec.packages.tuning}",
        ])
        .await?;
    ensure!(
        stored.trim().is_empty(),
        "tuning is still in the spec: {stored}"
    );
    Ok(())
}
