//! `devcluster install --webhook`: `skyhook-webhook` as a background process, registered with the
//! API server through upstream's two webhook configurations.
//!
//! devcluster pods have loopback IPs, which Endpoints refuse, so a Service cannot reach a webhook
//! pod; the configurations therefore call the process by `clientConfig.url`
//! (`https://127.0.0.1:<port>/<path>`). The webhook manages its certificate itself
//! (`--manage-certs`, the chart's default): it issues it into the Secret `webhook-cert` with
//! `127.0.0.1` as an extra name and patches `caBundle` into both configurations, exactly as in a
//! real cluster. Install waits until the API server itself gets an answer through the webhook (a
//! server-side dry-run), so the first `kubectl apply` after it cannot race the CA.
//!
//! [`webhook_configurations`] and [`webhook_args`] are plain data; the rest talks to the API server
//! and runs the process. The pid, ports and log are recorded in `<state>/skyhook-webhook.json` for
//! `status` and `down`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams,
    PostParams,
};

use crate::background::{BackgroundProcess, BackgroundRecord, Launch, spawn, stop_recorded};
use crate::error::InstallError;
use crate::install::{NAMESPACE, free_port, lost_port_race, readyz, start_with_fresh_ports};
use devcluster::state::StateDir;

/// The webhook's binary name (also what `status` and `down` look for in `/proc/<pid>/cmdline`).
pub const WEBHOOK_BINARY: &str = "skyhook-webhook";
/// Upstream's ValidatingWebhookConfiguration name (the webhook's default).
pub const VALIDATING_CONFIGURATION: &str = "skyhook-operator-validating-webhook";
/// Upstream's MutatingWebhookConfiguration name (the webhook's default).
pub const MUTATING_CONFIGURATION: &str = "skyhook-operator-mutating-webhook";
/// The Secret the webhook keeps its certificate in (upstream's name).
pub const CERT_SECRET: &str = "webhook-cert";
/// The Service name the certificate is issued for; no such Service exists on a devcluster, the
/// API server calls the webhook by URL.
const SERVICE: &str = "skyhook-webhook";
/// The address the API server calls, and the certificate's extra name.
const LOOPBACK: &str = "127.0.0.1";
const FIELD_MANAGER: &str = "devcluster-install";

/// How to run the webhook.
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// The binary; `None`: `SKYHOOK_WEBHOOK_BIN`, else `skyhook-webhook` next to the devcluster
    /// binary.
    pub binary: Option<PathBuf>,
    /// How long the webhook may take until the API server gets answers through it.
    pub ready_timeout: Duration,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        Self {
            binary: None,
            ready_timeout: Duration::from_secs(120),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error(
        "the skyhook-webhook binary was not found at {0}; build it with `cargo build -p webhook` \
         (same CARGO_TARGET_DIR as devcluster) or set SKYHOOK_WEBHOOK_BIN"
    )]
    Missing(PathBuf),
    #[error(transparent)]
    Install(#[from] crate::error::InstallError),
    #[error("{action}: {source}")]
    Api { action: String, source: kube::Error },
}

/// Where a running webhook is: what `status` shows and `down` stops.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WebhookRecord {
    pub pid: u32,
    /// HTTPS admission port on 127.0.0.1.
    pub port: u16,
    /// Plain-HTTP /healthz, /readyz and /metrics port.
    pub admin_port: u16,
    pub log: PathBuf,
}

impl BackgroundRecord for WebhookRecord {
    const BINARY: &'static str = WEBHOOK_BINARY;

    fn pid(&self) -> u32 {
        self.pid
    }

    fn log(&self) -> &Path {
        &self.log
    }
}

/// A `skyhook-webhook` process started by [`start_webhook`]. Dropping it stops the webhook unless
/// [`BackgroundProcess::detach`] was called.
pub type WebhookProcess = BackgroundProcess<WebhookRecord>;

/// `SKYHOOK_WEBHOOK_BIN`, else `skyhook-webhook` next to the devcluster binary.
pub fn webhook_binary() -> Result<PathBuf, WebhookError> {
    match std::env::var_os("SKYHOOK_WEBHOOK_BIN") {
        Some(path) => Ok(PathBuf::from(path)),
        None => Ok(devcluster::isolation::devcluster_binary()
            .map_err(crate::error::InstallError::from)?
            .with_file_name(WEBHOOK_BINARY)),
    }
}

/// The webhook's command line on a devcluster.
pub fn webhook_args(cert_dir: &Path, port: u16, admin_port: u16) -> Vec<String> {
    vec![
        "--manage-certs".to_string(),
        format!("--namespace={NAMESPACE}"),
        format!("--service={SERVICE}"),
        format!("--cert-secret={CERT_SECRET}"),
        format!("--cert-extra-name={LOOPBACK}"),
        format!("--cert-dir={}", cert_dir.display()),
        format!("--port={port}"),
        format!("--admin-port={admin_port}"),
        format!("--validating-webhook-configuration={VALIDATING_CONFIGURATION}"),
        format!("--mutating-webhook-configuration={MUTATING_CONFIGURATION}"),
    ]
}

/// Upstream's two configurations, with the webhooks of both API groups (spec §2.14, upstream
/// v0.18: names, paths, operations, failurePolicy Fail,
/// sideEffects None, 10 s), calling `https://127.0.0.1:<port>`; `caBundle` is left to the webhook.
pub fn webhook_configurations(
    port: u16,
) -> (ValidatingWebhookConfiguration, MutatingWebhookConfiguration) {
    let client = |path: &str| WebhookClientConfig {
        url: Some(format!("https://{LOOPBACK}:{port}{path}")),
        ..WebhookClientConfig::default()
    };
    let rules = |group: &str, resource: &str, operations: &[&str]| {
        Some(vec![RuleWithOperations {
            api_groups: Some(vec![group.to_string()]),
            api_versions: Some(vec!["v1alpha1".to_string()]),
            operations: Some(operations.iter().map(|op| (*op).to_string()).collect()),
            resources: Some(vec![resource.to_string()]),
            scope: Some("Cluster".to_string()),
        }])
    };
    // ValidatingWebhook and MutatingWebhook have these fields in common, but no common type.
    macro_rules! webhook {
        ($kind:ident, $name:expr, $path:expr, $resource:expr, $operations:expr) => {
            $kind {
                name: $name.to_string(),
                admission_review_versions: vec!["v1".to_string()],
                client_config: client($path),
                failure_policy: Some("Fail".to_string()),
                side_effects: "None".to_string(),
                timeout_seconds: Some(10),
                rules: {
                    let (group, resource): (&str, &str) = $resource;
                    rules(group, resource, $operations)
                },
                ..$kind::default()
            }
        };
    }
    let validating = |name: &str, path: &str, resource: (&str, &str), operations: &[&str]| {
        webhook!(ValidatingWebhook, name, path, resource, operations)
    };
    let mutating = |name: &str, path: &str, resource: (&str, &str)| {
        webhook!(MutatingWebhook, name, path, resource, &["CREATE", "UPDATE"])
    };
    let (skyhook, nodewright) = ("skyhook.nvidia.com", "nodewright.nvidia.com");
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    };
    (
        ValidatingWebhookConfiguration {
            metadata: meta(VALIDATING_CONFIGURATION),
            webhooks: Some(vec![
                validating(
                    "validate-skyhook.nvidia.com",
                    "/validate-skyhook-nvidia-com-v1alpha1-skyhook",
                    (skyhook, "skyhooks"),
                    &["CREATE", "UPDATE"],
                ),
                validating(
                    "validate-deploymentpolicy.nvidia.com",
                    "/validate-skyhook-nvidia-com-v1alpha1-deploymentpolicy",
                    (skyhook, "deploymentpolicies"),
                    &["CREATE", "UPDATE", "DELETE"],
                ),
                validating(
                    "validate-nodewright.nvidia.com",
                    "/validate-nodewright-nvidia-com-v1alpha1-nodewright",
                    (nodewright, "nodewrights"),
                    &["CREATE", "UPDATE"],
                ),
                validating(
                    "validate-deploymentpolicy.nodewright.nvidia.com",
                    "/validate-nodewright-nvidia-com-v1alpha1-deploymentpolicy",
                    (nodewright, "deploymentpolicies"),
                    &["CREATE", "UPDATE", "DELETE"],
                ),
            ]),
        },
        MutatingWebhookConfiguration {
            metadata: meta(MUTATING_CONFIGURATION),
            webhooks: Some(vec![
                mutating(
                    "mutate-skyhook.nvidia.com",
                    "/mutate-skyhook-nvidia-com-v1alpha1-skyhook",
                    (skyhook, "skyhooks"),
                ),
                mutating(
                    "mutate-deploymentpolicy.nvidia.com",
                    "/mutate-skyhook-nvidia-com-v1alpha1-deploymentpolicy",
                    (skyhook, "deploymentpolicies"),
                ),
                mutating(
                    "mutate-nodewright.nvidia.com",
                    "/mutate-nodewright-nvidia-com-v1alpha1-nodewright",
                    (nodewright, "nodewrights"),
                ),
                mutating(
                    "mutate-deploymentpolicy.nodewright.nvidia.com",
                    "/mutate-nodewright-nvidia-com-v1alpha1-deploymentpolicy",
                    (nodewright, "deploymentpolicies"),
                ),
            ]),
        },
    )
}

/// Applies both configurations (server-side; `caBundle` is not ours, so the webhook's patch of it
/// survives a second install).
pub async fn register(client: &kube::Client, port: u16) -> Result<(), WebhookError> {
    let (validating, mutating) = webhook_configurations(port);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let api_error = |what: &str| {
        let action = format!("applying {what}");
        move |source| WebhookError::Api { action, source }
    };
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch(
            VALIDATING_CONFIGURATION,
            &params,
            &Patch::Apply(&validating),
        )
        .await
        .map_err(api_error(VALIDATING_CONFIGURATION))?;
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(MUTATING_CONFIGURATION, &params, &Patch::Apply(&mutating))
        .await
        .map_err(api_error(MUTATING_CONFIGURATION))?;
    Ok(())
}

/// Deletes both configurations (absent ones are fine), so a cluster without a running webhook
/// does not refuse every Skyhook write.
pub async fn unregister(client: &kube::Client) -> Result<(), WebhookError> {
    delete_if_present::<ValidatingWebhookConfiguration>(client, VALIDATING_CONFIGURATION).await?;
    delete_if_present::<MutatingWebhookConfiguration>(client, MUTATING_CONFIGURATION).await
}

/// Deletes the cluster-scoped `K` named `name`; one that is not there is fine.
async fn delete_if_present<K>(client: &kube::Client, name: &str) -> Result<(), WebhookError>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    match Api::<K>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(WebhookError::Api {
            action: format!("deleting {name}"),
            source,
        }),
    }
}

/// Stops the webhook recorded in `state` (if it runs) and removes the record; returns its pid.
pub fn stop_recorded_webhook(state: &StateDir, grace: Duration) -> Option<u32> {
    stop_recorded::<WebhookRecord>(state, grace)
}

/// Registers the configurations, starts the webhook against the cluster of `state` (its own
/// process group, output in `<state>/logs/skyhook-webhook.log`) and waits until the API server
/// gets an answer through it. Needs the CRDs and the `skyhook` namespace (install's first steps).
pub async fn start_webhook(
    client: &kube::Client,
    state: &StateDir,
    options: &WebhookOptions,
) -> Result<WebhookProcess, WebhookError> {
    let binary = match &options.binary {
        Some(binary) => binary.clone(),
        None => webhook_binary()?,
    };
    if !binary.is_file() {
        return Err(WebhookError::Missing(binary));
    }
    let lost_race =
        |error: &WebhookError| matches!(error, WebhookError::Install(e) if lost_port_race(e));
    start_with_fresh_ports(WEBHOOK_BINARY, lost_race, || {
        start_webhook_on_free_ports(client, state, options, &binary)
    })
    .await
}

async fn start_webhook_on_free_ports(
    client: &kube::Client,
    state: &StateDir,
    options: &WebhookOptions,
    binary: &Path,
) -> Result<WebhookProcess, WebhookError> {
    let port = free_port("webhook")?;
    let admin_port = free_port("webhook admin")?;
    register(client, port).await?;

    let cert_dir = state.root().join("webhook-certs");
    std::fs::create_dir_all(&cert_dir).map_err(|source| InstallError::Io {
        action: "creating",
        path: cert_dir.clone(),
        source,
    })?;
    let env = BTreeMap::from([
        (
            "KUBECONFIG".to_string(),
            state.kubeconfig().display().to_string(),
        ),
        (
            "RUST_LOG".to_string(),
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info,kube=warn".to_string()),
        ),
    ]);
    let launch = Launch {
        binary,
        args: webhook_args(&cert_dir, port, admin_port),
        env,
        log_name: WEBHOOK_BINARY,
    };
    let mut process = spawn(state, launch, |pid, log| WebhookRecord {
        pid,
        port,
        admin_port,
        log,
    })?;
    process.write_record(state)?;

    let ready = || async {
        if readyz(admin_port).await {
            probe_through_api_server(client).await
        } else {
            Err("/readyz is not 200 yet".to_string())
        }
    };
    process.wait_ready(options.ready_timeout, ready).await?;
    Ok(process)
}

/// A server-side dry-run create of a valid DeploymentPolicy: it passes through both policy
/// webhooks, so it succeeds only once the API server trusts the webhook's CA and reaches it.
async fn probe_through_api_server(client: &kube::Client) -> Result<(), String> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("skyhook.nvidia.com", "v1alpha1", "DeploymentPolicy"),
        "deploymentpolicies",
    );
    let probe: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": "devcluster-webhook-probe"},
        "spec": {"default": {"budget": {"percent": 100}, "strategy": {"fixed": {}}}}
    }))
    .map_err(|error| error.to_string())?;
    let params = PostParams {
        dry_run: true,
        field_manager: Some(FIELD_MANAGER.to_string()),
    };
    Api::<DynamicObject>::all_with(client.clone(), &resource)
        .create(&params, &probe)
        .await
        .map(|_| ())
        .map_err(|error| format!("a dry-run through the webhook failed: {error}"))
}

/// Everything `install --webhook` adds after the CRDs and namespace: configurations and the
/// webhook, ready.
pub async fn install_webhook(
    client: &kube::Client,
    state: &StateDir,
    options: &WebhookOptions,
) -> Result<WebhookProcess, WebhookError> {
    stop_recorded_webhook(state, Duration::from_secs(30));
    start_webhook(client, state, options).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_follow_upstream_and_call_the_loopback_port() {
        let (validating, mutating) = webhook_configurations(9443);
        assert_eq!(
            validating.metadata.name.as_deref(),
            Some(VALIDATING_CONFIGURATION)
        );
        assert_eq!(
            mutating.metadata.name.as_deref(),
            Some(MUTATING_CONFIGURATION)
        );
        // (webhook, url, operations)
        let expected_validating = [
            (
                "validate-skyhook.nvidia.com",
                "https://127.0.0.1:9443/validate-skyhook-nvidia-com-v1alpha1-skyhook",
                vec!["CREATE", "UPDATE"],
            ),
            (
                "validate-deploymentpolicy.nvidia.com",
                "https://127.0.0.1:9443/validate-skyhook-nvidia-com-v1alpha1-deploymentpolicy",
                vec!["CREATE", "UPDATE", "DELETE"],
            ),
            (
                "validate-nodewright.nvidia.com",
                "https://127.0.0.1:9443/validate-nodewright-nvidia-com-v1alpha1-nodewright",
                vec!["CREATE", "UPDATE"],
            ),
            (
                "validate-deploymentpolicy.nodewright.nvidia.com",
                "https://127.0.0.1:9443/validate-nodewright-nvidia-com-v1alpha1-deploymentpolicy",
                vec!["CREATE", "UPDATE", "DELETE"],
            ),
        ];
        let webhooks = validating.webhooks.unwrap_or_default();
        assert_eq!(webhooks.len(), expected_validating.len());
        for (webhook, (name, url, operations)) in webhooks.iter().zip(expected_validating) {
            assert_eq!(webhook.name, name);
            assert_eq!(webhook.client_config.url.as_deref(), Some(url));
            assert_eq!(webhook.client_config.ca_bundle, None, "{name}");
            assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"), "{name}");
            assert_eq!(webhook.side_effects, "None", "{name}");
            assert_eq!(webhook.timeout_seconds, Some(10), "{name}");
            let rule_operations = webhook
                .rules
                .iter()
                .flatten()
                .flat_map(|rule| rule.operations.iter().flatten())
                .map(String::as_str)
                .collect::<Vec<_>>();
            assert_eq!(rule_operations, operations, "{name}");
        }
        let names = mutating
            .webhooks
            .unwrap_or_default()
            .into_iter()
            .map(|webhook| (webhook.name, webhook.client_config.url.unwrap_or_default()))
            .collect::<Vec<_>>();
        assert_eq!(
            names,
            [
                (
                    "mutate-skyhook.nvidia.com".to_string(),
                    "https://127.0.0.1:9443/mutate-skyhook-nvidia-com-v1alpha1-skyhook".to_string()
                ),
                (
                    "mutate-deploymentpolicy.nvidia.com".to_string(),
                    "https://127.0.0.1:9443/mutate-skyhook-nvidia-com-v1alpha1-deploymentpolicy"
                        .to_string()
                ),
                (
                    "mutate-nodewright.nvidia.com".to_string(),
                    "https://127.0.0.1:9443/mutate-nodewright-nvidia-com-v1alpha1-nodewright"
                        .to_string()
                ),
                (
                    "mutate-deploymentpolicy.nodewright.nvidia.com".to_string(),
                    "https://127.0.0.1:9443/mutate-nodewright-nvidia-com-v1alpha1-deploymentpolicy"
                        .to_string()
                ),
            ]
        );
    }

    #[test]
    fn args_manage_the_certificate_for_the_loopback_address() {
        let args = webhook_args(Path::new("/state/webhook-certs"), 1001, 1002);
        for expected in [
            "--manage-certs",
            "--namespace=skyhook",
            "--cert-extra-name=127.0.0.1",
            "--cert-dir=/state/webhook-certs",
            "--port=1001",
            "--admin-port=1002",
            "--validating-webhook-configuration=skyhook-operator-validating-webhook",
            "--mutating-webhook-configuration=skyhook-operator-mutating-webhook",
        ] {
            assert!(
                args.iter().any(|arg| arg == expected),
                "{expected} in {args:?}"
            );
        }
    }
}
