//! `kubectl skyhook package uninstall` through the real `kubectl`, on one light node: the verb
//! refuses a missing Skyhook, a package not in the spec and a package without
//! `uninstall.enabled`, naming the fix; a dry run and a declined confirmation change nothing;
//! a confirmed request sets `packages.<p>.uninstall.apply: true` (and only that: `enabled`
//! stays), a second request and a second cancel only say so, and `--cancel` sets it back to
//! false without asking. `status <name>` shows the uninstall table while requested. Whether the
//! controller then runs the uninstall is another test's concern.

use anyhow::{Context, ensure};
use e2e::Kubectl;
use serde_json::{Value, json};

use crate::cli_support::{PACKAGE, agentless_skyhook};

const SKYHOOK: &str = "uninstall-cli";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn package_uninstall_verb_sets_and_cancels_the_request() -> anyhow::Result<()> {
    let installed = e2e::install_with(e2e::Setup::agentless(1)).await?;
    let client = installed.cluster.client()?;
    let kubectl = Kubectl::with_plugin(&installed)?;
    let manifest = agentless_skyhook(
        SKYHOOK,
        json!({e2e::TEST_NODE_LABEL: e2e::TEST_NODE_VALUE}),
        &[],
        json!({}),
    );
    e2e::apply_yaml(&client, &manifest).await?;

    refusals(&kubectl).await?;
    e2e::merge_patch_skyhook(
        &client,
        SKYHOOK,
        &json!({"spec": {"packages": {PACKAGE: {"uninstall": {"enabled": true, "apply": false}}}}}),
    )
    .await?;
    nothing_changes_without_consent(&kubectl, &client).await?;
    request_then_cancel(&kubectl, &client).await?;
    Ok(())
}

/// The package's `uninstall` block as stored.
async fn uninstall_block(client: &kube::Client) -> anyhow::Result<Value> {
    let skyhook = e2e::skyhook_api(client).get(SKYHOOK).await?;
    Ok(skyhook.data["spec"]["packages"][PACKAGE]["uninstall"].clone())
}

async fn refusals(kubectl: &Kubectl) -> anyhow::Result<()> {
    let cases = [
        (
            vec!["nope", "--skyhook", SKYHOOK],
            "package \"nope\" is not in the spec of Skyhook \"uninstall-cli\"",
        ),
        (
            vec![PACKAGE, "--skyhook", "missing"],
            "`kubectl skyhook status` lists the Skyhooks",
        ),
        (
            vec![PACKAGE, "--skyhook", SKYHOOK, "-y"],
            "set packages.agentless.uninstall.enabled: true first",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["skyhook", "package", "uninstall"];
        all.extend(args.iter().copied());
        let stderr = kubectl.refused(&all).await?;
        ensure!(stderr.contains(message), "{args:?}: {stderr}");
    }
    Ok(())
}

async fn nothing_changes_without_consent(
    kubectl: &Kubectl,
    client: &kube::Client,
) -> anyhow::Result<()> {
    let not_requested = json!({"enabled": true, "apply": false});
    let out = kubectl
        .skyhook(&[
            "package",
            "uninstall",
            PACKAGE,
            "--skyhook",
            SKYHOOK,
            "--dry-run",
        ])
        .await?;
    ensure!(
        out.contains("[dry-run] Would request the uninstall of package \"agentless\""),
        "{out}"
    );
    assert_eq!(
        uninstall_block(client).await?,
        not_requested,
        "after the dry run"
    );

    let args = [
        "skyhook",
        "package",
        "uninstall",
        PACKAGE,
        "--skyhook",
        SKYHOOK,
    ];
    let declined = kubectl.run_with_input(&args, b"n\n").await?;
    ensure!(
        !declined.status.success(),
        "answering n must abort: {}",
        String::from_utf8_lossy(&declined.stdout)
    );
    ensure!(
        String::from_utf8_lossy(&declined.stdout).contains("Continue? [y/N]"),
        "{}",
        String::from_utf8_lossy(&declined.stdout)
    );
    assert_eq!(uninstall_block(client).await?, not_requested, "after n");
    Ok(())
}

async fn request_then_cancel(kubectl: &Kubectl, client: &kube::Client) -> anyhow::Result<()> {
    let args = [
        "skyhook",
        "package",
        "uninstall",
        PACKAGE,
        "--skyhook",
        SKYHOOK,
    ];
    let accepted = kubectl.run_with_input(&args, b"y\n").await?;
    let stdout = String::from_utf8_lossy(&accepted.stdout).into_owned();
    ensure!(
        accepted.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&accepted.stderr)
    );
    ensure!(
        stdout
            .contains("Uninstall of package \"agentless\" of Skyhook \"uninstall-cli\" requested"),
        "{stdout}"
    );
    assert_eq!(
        uninstall_block(client).await?,
        json!({"enabled": true, "apply": true})
    );

    let again = kubectl
        .skyhook(&["package", "uninstall", PACKAGE, "--skyhook", SKYHOOK, "-y"])
        .await?;
    ensure!(again.contains("is already requested"), "{again}");

    let status = kubectl.skyhook(&["status", SKYHOOK]).await?;
    ensure!(status.contains("UNINSTALL PACKAGE"), "{status}");
    let json = kubectl.skyhook_json(&["status", SKYHOOK]).await?;
    let row = &json["uninstalls"][0];
    ensure!(
        row["package"] == "agentless@1.2.3" && row["requested"] == true && row["nodes"] == 1,
        "{json}"
    );

    // No stdin: cancel does not ask.
    let cancelled = kubectl
        .skyhook(&[
            "package",
            "uninstall",
            PACKAGE,
            "--skyhook",
            SKYHOOK,
            "--cancel",
        ])
        .await
        .context("--cancel must not ask")?;
    ensure!(cancelled.contains("cancelled"), "{cancelled}");
    assert_eq!(
        uninstall_block(client).await?,
        json!({"enabled": true, "apply": false})
    );
    let again = kubectl
        .skyhook(&[
            "package",
            "uninstall",
            PACKAGE,
            "--skyhook",
            SKYHOOK,
            "--cancel",
        ])
        .await?;
    ensure!(
        again.contains("is not requested; nothing to cancel"),
        "{again}"
    );
    Ok(())
}
