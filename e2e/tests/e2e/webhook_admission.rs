//! skyhook-webhook registered for real with a devcluster's API server (`devcluster install
//! --webhook`), driven with the real `kubectl` (upstream's helm-webhook suite, spec §6.3): every
//! invalid example in `examples/invalid/` is refused with a message naming the field, the valid
//! examples pass, a Skyhook cannot be patched to a missing policy, a policy in use cannot be
//! deleted until its Skyhook is gone, and the self-managed certificate rotates while applies keep
//! succeeding.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use devcluster::{DevCluster, DevClusterOptions};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use skyhook_devcluster::{InstallOptions, SkyhookInstall, WebhookOptions};

const SKYHOOK_DENIED: &str = "admission webhook \"validate-skyhook.nvidia.com\" denied the request";
const POLICY_DENIED: &str =
    "admission webhook \"validate-deploymentpolicy.nvidia.com\" denied the request";

/// A cluster without nodes, the controller (it removes Skyhook finalizers) and the webhook.
struct Setup {
    webhook: skyhook_devcluster::WebhookProcess,
    _controller: skyhook_devcluster::ControllerProcess,
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
    let controller = cluster
        .install(InstallOptions::default())
        .await
        .context("installing skyhook")?;
    let webhook = cluster
        .install_webhook(WebhookOptions::default())
        .await
        .context("installing the webhook")?;
    Ok(Setup {
        webhook,
        _controller: controller,
        cluster,
    })
}

impl Setup {
    fn kubectl(&self) -> e2e::Kubectl {
        e2e::Kubectl::new(self.cluster.kubeconfig_path())
    }

    fn webhook_log(&self) -> String {
        devcluster::controlplane::process::log_tail(&self.webhook.record().log, 40)
    }
}

#[tokio::test]
async fn kubectl_apply_is_refused_for_each_invalid_example_and_valid_ones_pass()
-> anyhow::Result<()> {
    let setup = setup().await?;
    let kubectl = setup.kubectl();

    // (file in examples/invalid/, webhook, field named, what the message says)
    let cases = [
        (
            "resources-three-fields.yaml",
            SKYHOOK_DENIED,
            "spec.packages.tuning.resources",
            "memoryLimit not set while other resources are",
        ),
        (
            "resources-limit-below-request.yaml",
            SKYHOOK_DENIED,
            "spec.packages.tuning.resources.cpuLimit",
            "cpuLimit is below cpuRequest",
        ),
        (
            "bad-semver.yaml",
            SKYHOOK_DENIED,
            "spec.packages.tuning.version",
            "2024/07/06",
        ),
        (
            "depends-on-missing.yaml",
            SKYHOOK_DENIED,
            "spec.packages.top.dependsOn.base",
            "which is not in the packages",
        ),
        (
            "depends-on-ambiguous.yaml",
            SKYHOOK_DENIED,
            "spec.packages.top.dependsOn.base",
            "ambiguous version match",
        ),
        (
            "dependency-cycle.yaml",
            SKYHOOK_DENIED,
            "spec.packages.aa.dependsOn",
            "dependency cycle aa -> bb -> aa",
        ),
        (
            "policy-duplicate-compartments.yaml",
            POLICY_DENIED,
            "spec.compartments[1].name",
            "compartment name \"gpu\" is already used",
        ),
        (
            "policy-budget-both-forms.yaml",
            POLICY_DENIED,
            "spec.default.budget",
            "both percent and count are set",
        ),
        (
            "skyhook-budget-both-forms.yaml",
            SKYHOOK_DENIED,
            "spec.interruptionBudget",
            "both percent and count are set",
        ),
        (
            "missing-policy.yaml",
            SKYHOOK_DENIED,
            "spec.deploymentPolicy",
            "deploymentPolicy \"does-not-exist\" not found",
        ),
        (
            "config-interrupt-missing-key.yaml",
            SKYHOOK_DENIED,
            "spec.packages.tuning.configInterrupts.sysctl.conf",
            "matches no configMap key",
        ),
        (
            "uninstall-apply-without-enabled.yaml",
            SKYHOOK_DENIED,
            "spec.packages.tuning.uninstall.apply",
            "uninstall.apply requires uninstall.enabled to be true",
        ),
        (
            "stage-timeout-negative.yaml",
            SKYHOOK_DENIED,
            "spec.packages.tuning.stageTimeout",
            "package \"tuning\": stageTimeout must be greater than or equal to 0",
        ),
        (
            "policy-window-bad-cron.yaml",
            POLICY_DENIED,
            "spec.maintenanceWindows[0].schedule",
            "is not a cron expression of five fields",
        ),
        (
            "policy-window-unknown-zone.yaml",
            POLICY_DENIED,
            "spec.maintenanceWindows[0].timeZone",
            "\"Europe/Atlantis\" is not an IANA time zone name",
        ),
        (
            "policy-health-gate-negative-settle.yaml",
            POLICY_DENIED,
            "spec.healthGate.settle",
            "\"-5m\" is negative",
        ),
        (
            "drain-negative-timeout.yaml",
            SKYHOOK_DENIED,
            "spec.drain.timeout",
            "\"-5m\" is negative",
        ),
        (
            "drain-config-negative-grace-period.yaml",
            SKYHOOK_DENIED,
            "spec.drainConfig.gracePeriod",
            "drain config: drainConfig.gracePeriod must be greater than or equal to 0",
        ),
        (
            "drain-and-drain-config.yaml",
            SKYHOOK_DENIED,
            "spec.drain",
            "spec.drain and spec.drainConfig are both set",
        ),
    ];
    let invalid_dir = e2e::workspace().join("examples/invalid");
    let mut on_disk: Vec<String> = std::fs::read_dir(&invalid_dir)?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    on_disk.sort();
    let mut covered: Vec<String> = cases.iter().map(|case| case.0.to_owned()).collect();
    covered.sort();
    ensure!(
        on_disk == covered,
        "every file in examples/invalid/ needs a case here: {on_disk:?} vs {covered:?}"
    );

    for (file, webhook, field, message) in cases {
        let path = format!("examples/invalid/{file}");
        let stderr = kubectl.refused(&["apply", "-f", &path]).await?;
        for expected in [webhook, field, message] {
            ensure!(
                stderr.contains(expected),
                "{file}: the refusal does not contain {expected:?}:\n{stderr}\nwebhook log:\n{}",
                setup.webhook_log()
            );
        }
    }

    // Every valid example is accepted (policies before the Skyhooks that name them: each file
    // lists its policy first), the rollout gates' too.
    let examples = e2e::workspace().join("examples");
    let mut valid: Vec<PathBuf> = std::fs::read_dir(&examples)?
        .chain(std::fs::read_dir(examples.join("drain"))?)
        .chain(std::fs::read_dir(examples.join("rollout-gates"))?)
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    valid.sort();
    ensure!(valid.len() >= 5, "examples: {valid:?}");
    for path in &valid {
        kubectl
            .succeed(&["apply", "-f", &path.to_string_lossy()])
            .await?;
    }

    // The mutating webhook filled in the default the example leaves out (batchThreshold) and kept
    // what it sets.
    let policy = kubectl
        .succeed(&[
            "get",
            "deploymentpolicy",
            "linear-ramp",
            "-o",
            "jsonpath={.spec.default.strategy.linear}",
        ])
        .await?;
    let strategy: serde_json::Value = serde_json::from_str(&policy)?;
    let expected = serde_json::json!({
        "initialBatch": 1, "delta": 2, "safetyLimit": 30, "batchThreshold": 100
    });
    ensure!(strategy == expected, "{strategy}");
    Ok(())
}

#[tokio::test]
async fn policies_are_checked_on_patch_and_protected_while_referenced() -> anyhow::Result<()> {
    let setup = setup().await?;
    let kubectl = setup.kubectl();
    // A policy and a Skyhook that uses it.
    kubectl
        .succeed(&["apply", "-f", "examples/policy-linear.yaml"])
        .await?;
    let skyhook = kubectl
        .succeed(&[
            "get",
            "skyhooks",
            "-o",
            "jsonpath={.items[?(@.spec.deploymentPolicy==\"linear-ramp\")].metadata.name}",
        ])
        .await?;
    let skyhook = skyhook.trim().to_owned();
    ensure!(!skyhook.is_empty(), "no Skyhook uses linear-ramp");

    // A patch to a missing policy is refused like a create.
    let stderr = kubectl
        .refused(&[
            "patch",
            "skyhook",
            &skyhook,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"deploymentPolicy":"does-not-exist"}}"#,
        ])
        .await?;
    ensure!(stderr.contains(SKYHOOK_DENIED), "{stderr}");
    ensure!(
        stderr.contains("deploymentPolicy \"does-not-exist\" not found"),
        "{stderr}"
    );

    // Deleting the policy in use is refused and names its user.
    let stderr = kubectl
        .refused(&["delete", "deploymentpolicy", "linear-ramp"])
        .await?;
    ensure!(stderr.contains(POLICY_DENIED), "{stderr}");
    ensure!(stderr.contains("still referenced by"), "{stderr}");
    ensure!(stderr.contains(&skyhook), "{stderr}");

    // Once the Skyhook is gone (the controller removes its finalizer), the delete works.
    kubectl
        .succeed(&[
            "delete",
            "skyhook",
            &skyhook,
            "--wait=true",
            "--timeout=120s",
        ])
        .await?;
    kubectl
        .succeed(&["delete", "deploymentpolicy", "linear-ramp"])
        .await?;
    Ok(())
}

const NODEWRIGHT_DENIED: &str =
    "admission webhook \"validate-nodewright.nvidia.com\" denied the request";
const NODEWRIGHT_POLICY_DENIED: &str =
    "admission webhook \"validate-deploymentpolicy.nodewright.nvidia.com\" denied the request";

/// The nodewright group's webhooks, with its CRDs installed before the webhook starts: a
/// NodeWright follows upstream v0.20's stricter rules in upstream's words (an inline tag is
/// refused where the same Skyhook of the seeds passes with a warning), may not take a name a
/// Skyhook holds, names a DeploymentPolicy of its own group, and keeps that policy from being
/// deleted.
#[tokio::test]
async fn nodewrights_are_admitted_by_their_groups_rules() -> anyhow::Result<()> {
    e2e::build_binaries()?;
    let cluster = DevCluster::start(DevClusterOptions {
        images: skyhook_devcluster::images(),
        ..DevClusterOptions::default()
    })
    .await
    .context("starting the devcluster")?;
    let client = cluster.client()?;
    e2e::apply_nodewright_crds(&client).await?;
    let _controller = cluster.install(InstallOptions::default()).await?;
    let _webhook = cluster.install_webhook(WebhookOptions::default()).await?;
    let kubectl = e2e::Kubectl::new(cluster.kubeconfig_path());
    let dir = tempfile::tempdir()?;
    let write = |file: &str, text: String| -> anyhow::Result<String> {
        let path = dir.path().join(file);
        std::fs::write(&path, text)?;
        Ok(path.display().to_string())
    };
    let workload = |group: &str, kind: &str, image: &str, policy: Option<&str>| {
        let policy = policy.map_or(String::new(), |p| format!("  deploymentPolicy: {p}\n"));
        format!(
            "apiVersion: {group}/v1alpha1\nkind: {kind}\nmetadata:\n  name: tagged\nspec:\n{policy}  packages:\n    tuning:\n      version: 1.0.0\n      image: {image}\n"
        )
    };
    let image = "ghcr.io/nvidia/skyhook-packages/shellscript";
    let tagged = format!("{image}:1.0.0");

    let file = write(
        "nw-tagged.yaml",
        workload("nodewright.nvidia.com", "NodeWright", &tagged, None),
    )?;
    let stderr = kubectl.refused(&["apply", "-f", &file]).await?;
    ensure!(
        stderr.contains(NODEWRIGHT_DENIED)
            && stderr.contains(&format!("validating NodeWright \"tagged\": 1 problem found:\n- spec.packages.tuning.image: error package tuning's image '{tagged}' contains an inline tag '1.0.0'. Do not embed a tag in the image; the package version supplies the tag")),
        "{stderr}"
    );
    // The seeds' Skyhook with a tag passes, with a warning that the tag is ignored.
    let stale_tag = format!("{image}:0.9.0");
    let file = write(
        "sky-tagged.yaml",
        workload("skyhook.nvidia.com", "Skyhook", &stale_tag, None)
            .replace("name: tagged", "name: seed"),
    )?;
    let output = kubectl.run(&["apply", "-f", &file]).await?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        output.status.success() && stderr.contains("is ignored"),
        "{stderr}"
    );
    // A NodeWright named like the Skyhook is accepted: it takes the name over (a migration).
    let twin = write(
        "nw-twin.yaml",
        workload("nodewright.nvidia.com", "NodeWright", image, None)
            .replace("name: tagged", "name: seed"),
    )?;
    kubectl.succeed(&["apply", "-f", &twin]).await?;
    kubectl
        .succeed(&["delete", "-f", &twin, "--wait=false"])
        .await?;

    // A NodeWright names a DeploymentPolicy of its own group.
    let policy = "apiVersion: nodewright.nvidia.com/v1alpha1\nkind: DeploymentPolicy\nmetadata:\n  name: ramp\nspec:\n  default:\n    budget: {count: 1}\n    strategy: {fixed: {}}\n";
    let skyhook_policy = policy.replace(
        "nodewright.nvidia.com/v1alpha1",
        "skyhook.nvidia.com/v1alpha1",
    );
    kubectl
        .succeed(&["apply", "-f", &write("sky-ramp.yaml", skyhook_policy)?])
        .await?;
    let named = write(
        "nw-named.yaml",
        workload("nodewright.nvidia.com", "NodeWright", image, Some("ramp")),
    )?;
    let stderr = kubectl.refused(&["apply", "-f", &named]).await?;
    ensure!(
        stderr.contains(NODEWRIGHT_DENIED)
            && stderr.contains("deploymentPolicy \"ramp\" not found"),
        "a skyhook-group policy does not count for a NodeWright: {stderr}"
    );
    kubectl
        .succeed(&["apply", "-f", &write("nw-ramp.yaml", policy.to_owned())?])
        .await?;
    kubectl.succeed(&["apply", "-f", &named]).await?;
    let stderr = kubectl
        .refused(&["delete", "deploymentpolicies.nodewright.nvidia.com", "ramp"])
        .await?;
    ensure!(
        stderr.contains(NODEWRIGHT_POLICY_DENIED)
            && stderr.contains("still referenced by")
            && stderr.contains("tagged"),
        "{stderr}"
    );
    // The skyhook group's policy of the same name is not held by the NodeWright.
    kubectl
        .succeed(&["delete", "deploymentpolicies.skyhook.nvidia.com", "ramp"])
        .await?;
    Ok(())
}

/// The certificate is renewed when its Secret says it expires soon (a forced rotation: the
/// expiration annotation is moved into the past). Applies keep running through the rotation and
/// none may fail; the rotation is over when the webhook serves a certificate that only the new CA
/// verifies.
#[tokio::test]
async fn the_serving_certificate_rotates_without_a_failed_request() -> anyhow::Result<()> {
    let setup = setup().await?;
    let client = setup.cluster.client()?;
    let secrets: Api<Secret> =
        Api::namespaced(client.clone(), skyhook_devcluster::install::NAMESPACE);
    let before = secrets
        .get(skyhook_devcluster::webhook::CERT_SECRET)
        .await
        .context("reading the webhook's certificate Secret")?;
    let old_cert = secret_field(&before, "tls.crt")?;

    // Applies in a loop, through both policy webhooks, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let applies = tokio::spawn(apply_loop(
        client.clone(),
        Arc::clone(&stop),
        Arc::clone(&done),
    ));
    // Let the loop get going before the rotation starts.
    wait_until(Duration::from_secs(60), "the first applies", || {
        let done = done.load(Ordering::Relaxed);
        async move { Ok(done >= 5) }
    })
    .await?;

    secrets
        .patch(
            skyhook_devcluster::webhook::CERT_SECRET,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "metadata": {"annotations": {"skyhook.nvidia.com/expiration": "2000-01-01T00:00:00Z"}}
            })),
        )
        .await
        .context("marking the certificate as expiring")?;

    // The webhook reissues within one pass (at most 30 s), then serves the new pair.
    let new_secret = wait_for_new_secret(&secrets, &old_cert).await?;
    let new_ca = secret_field(&new_secret, "ca.crt")?;
    let ca_file = tempfile::NamedTempFile::new()?;
    let first_ca = new_ca
        .split_inclusive("-----END CERTIFICATE-----")
        .next()
        .unwrap_or_default()
        .to_owned();
    std::fs::write(ca_file.path(), &first_ca)?;
    ensure!(
        new_ca.matches("BEGIN CERTIFICATE").count() == 2,
        "during a rotation ca.crt holds the new CA and the one it replaces"
    );
    let port = setup.webhook.record().port;
    wait_until(
        Duration::from_secs(60),
        "the webhook to serve the new certificate",
        || {
            let ca = ca_file.path().to_path_buf();
            async move { verifies_with(&ca, port) }
        },
    )
    .await?;
    // And the API server keeps reaching it with the new certificate.
    let after_rotation = done.load(Ordering::Relaxed);
    wait_until(
        Duration::from_secs(60),
        "applies after the rotation",
        || {
            let done = done.load(Ordering::Relaxed);
            async move { Ok(done >= after_rotation + 10) }
        },
    )
    .await?;

    stop.store(true, Ordering::Relaxed);
    let (succeeded, failures) = applies.await.context("the apply loop panicked")?;
    ensure!(
        failures.is_empty(),
        "{} of {} applies failed during the rotation, first: {:?}\nwebhook log:\n{}",
        failures.len(),
        succeeded + failures.len(),
        failures.first(),
        setup.webhook_log()
    );
    eprintln!("webhook rotation: {succeeded} applies through the webhook, none failed");
    Ok(())
}

fn secret_field(secret: &Secret, key: &str) -> anyhow::Result<String> {
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
        .with_context(|| format!("the Secret has no {key}"))
}

async fn wait_for_new_secret(secrets: &Api<Secret>, old_cert: &str) -> anyhow::Result<Secret> {
    let started = Instant::now();
    loop {
        let secret = secrets
            .get(skyhook_devcluster::webhook::CERT_SECRET)
            .await?;
        if secret_field(&secret, "tls.crt")? != old_cert {
            return Ok(secret);
        }
        if started.elapsed() > Duration::from_secs(90) {
            bail!("the webhook did not reissue its certificate within 90 s");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether a TLS handshake with the webhook verifies against `ca` alone (curl checks the chain
/// and the 127.0.0.1 address; any HTTP answer counts).
fn verifies_with(ca: &Path, port: u16) -> anyhow::Result<bool> {
    let status = std::process::Command::new("curl")
        .args([
            "--silent",
            "--output",
            "/dev/null",
            "--max-time",
            "5",
            "--cacert",
        ])
        .arg(ca)
        .arg(format!("https://127.0.0.1:{port}/healthz"))
        .status()
        .context("running curl (is it installed?)")?;
    Ok(status.success())
}

async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let started = Instant::now();
    loop {
        if check().await? {
            return Ok(());
        }
        if started.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Server-side applies of one DeploymentPolicy, alternating its budget so each is a real update
/// through the validating and mutating webhooks; returns (succeeded, failures).
async fn apply_loop(
    client: kube::Client,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
) -> (usize, Vec<String>) {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("skyhook.nvidia.com", "v1alpha1", "DeploymentPolicy"),
        "deploymentpolicies",
    );
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let mut failures = Vec::new();
    let mut succeeded = 0;
    let mut percent = 10;
    while !stop.load(Ordering::Relaxed) {
        percent = if percent == 10 { 20 } else { 10 };
        let policy = serde_json::json!({
            "apiVersion": "skyhook.nvidia.com/v1alpha1",
            "kind": "DeploymentPolicy",
            "metadata": {"name": "rotation-loop"},
            "spec": {"default": {"budget": {"percent": percent}, "strategy": {"fixed": {}}}}
        });
        let result = api
            .patch(
                "rotation-loop",
                &PatchParams::apply("e2e-rotation").force(),
                &Patch::Apply(&policy),
            )
            .await;
        match result {
            Ok(_) => succeeded += 1,
            Err(error) => failures.push(error.to_string()),
        }
        done.fetch_add(1, Ordering::Relaxed);
    }
    (succeeded, failures)
}
