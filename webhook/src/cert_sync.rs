//! Certificate self-management, the I/O half: observe the Secret, the two webhook
//! configurations and the served files, let [`cert_plan`] decide, and carry the plan out.
//! Every replica runs it. Two replicas issuing at once cannot both win: the Secret is created
//! (AlreadyExists for the loser) or replaced at the resourceVersion that was read (Conflict for
//! the loser), and the loser adopts the winner's certificate on its next pass.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;

use crate::cert_plan::{
    Action, CertPlan, Observed, StoredCert, WebhookTrust, ca_bundle, cert_plan,
};
use crate::issue::issue;
use crate::tls::{CERT_FILE, KEY_FILE, ReloadingCert};
use skyhook_api::errors::error_chain;

const EXPIRATION_ANNOTATION: &str = "skyhook.nvidia.com/expiration";
const SERVICE_ANNOTATION: &str = "skyhook.nvidia.com/service";
const EXTRA_NAMES_ANNOTATION: &str = "skyhook.nvidia.com/extra-names";
/// The longest wait between passes: configurations reset by a Helm upgrade are repaired this
/// quickly.
const MAX_WAIT: Duration = Duration::from_secs(30);
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(10);

/// Errors of one pass.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("failed to {action}")]
    Api {
        /// What was attempted, naming the object.
        action: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Issuing failed.
    #[error("failed to issue a certificate")]
    Issue(#[source] crate::issue::Error),
    /// Writing the serving files failed.
    #[error("failed to write the serving certificate into {}", dir.display())]
    Write {
        /// The serving directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Where the certificate lives and who must trust it.
#[derive(Debug, Clone)]
pub struct CertSync {
    /// Namespace of the Secret.
    pub namespace: String,
    /// Name of the Secret (upstream: `webhook-cert`).
    pub secret: String,
    /// `<svc>.<ns>.svc` of the webhook's Service.
    pub service: String,
    /// Further names the certificate is issued for.
    pub extra_names: Vec<String>,
    /// The ValidatingWebhookConfiguration to keep trusting the CA.
    pub validating: String,
    /// The MutatingWebhookConfiguration to keep trusting the CA.
    pub mutating: String,
}

impl CertSync {
    /// Runs passes forever; `ready` follows the latest plan.
    pub async fn run(self, client: Client, certs: Arc<ReloadingCert>, ready: Arc<AtomicBool>) {
        loop {
            let wait = match self.pass(&client, &certs).await {
                Ok(plan) => {
                    ready.store(plan.ready, Ordering::Release);
                    if plan.actions.is_empty() {
                        let until = plan.recheck_at.duration_since(Timestamp::now());
                        Duration::try_from(until).unwrap_or_default().min(MAX_WAIT)
                    } else {
                        // Look again at once: the actions change what the next plan sees.
                        Duration::ZERO
                    }
                }
                Err(err) => {
                    ready.store(false, Ordering::Release);
                    tracing::warn!(error = %error_chain(&err), "certificate pass failed; retrying");
                    RETRY_AFTER_ERROR
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    async fn pass(&self, client: &Client, certs: &ReloadingCert) -> Result<CertPlan, Error> {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let secret = secrets.get_opt(&self.secret).await.map_err(|source| {
            self.api_error(
                format!("read Secret {}/{}", self.namespace, self.secret),
                source,
            )
        })?;
        let mut webhooks = Vec::new();
        let mut owner = None;
        if let Some(config) = validating
            .get_opt(&self.validating)
            .await
            .map_err(|source| {
                self.api_error(
                    format!("read ValidatingWebhookConfiguration {}", self.validating),
                    source,
                )
            })?
        {
            owner = owner_reference(&config);
            webhooks.extend(config.webhooks.iter().flatten().map(|w| {
                trust(
                    &self.validating,
                    &w.name,
                    w.client_config.ca_bundle.as_ref(),
                )
            }));
        }
        if let Some(config) = mutating.get_opt(&self.mutating).await.map_err(|source| {
            self.api_error(
                format!("read MutatingWebhookConfiguration {}", self.mutating),
                source,
            )
        })? {
            owner = owner.or_else(|| owner_reference(&config));
            webhooks.extend(
                config
                    .webhooks
                    .iter()
                    .flatten()
                    .map(|w| trust(&self.mutating, &w.name, w.client_config.ca_bundle.as_ref())),
            );
        }
        let stored = secret.as_ref().map(stored_cert);
        let served = std::fs::read_to_string(certs.dir().join(CERT_FILE)).ok();
        let now = Timestamp::now();
        let plan = cert_plan(
            &Observed {
                stored: stored.as_ref(),
                webhooks: &webhooks,
                served: served.as_deref(),
                service: &self.service,
                extra_names: &self.extra_names,
                owner_exists: owner.is_some(),
            },
            now,
        );
        for action in &plan.actions {
            match action {
                Action::Issue(reason) => {
                    tracing::info!(?reason, secret = %self.secret, "issuing a new webhook certificate");
                    self.issue_into(&secrets, secret.as_ref(), owner.clone(), now)
                        .await?;
                }
                Action::Adopt => self.adopt(&secrets, owner.clone()).await?,
                Action::PatchCaBundle(untrusting) => {
                    let ca = stored
                        .as_ref()
                        .and_then(|s| s.ca.as_deref())
                        .unwrap_or_default();
                    self.patch_ca_bundles(client, untrusting, ca).await?;
                }
                Action::WriteServingFiles => {
                    if let Some(stored) = &stored {
                        self.write_serving_files(certs, stored)?;
                    }
                }
            }
        }
        Ok(plan)
    }

    async fn issue_into(
        &self,
        secrets: &Api<Secret>,
        existing: Option<&Secret>,
        owner: Option<OwnerReference>,
        now: Timestamp,
    ) -> Result<(), Error> {
        let issued = issue(&self.service, &self.extra_names, now).map_err(Error::Issue)?;
        let previous_ca = existing.map(stored_cert).and_then(|s| s.ca);
        let ca = ca_bundle(&issued.ca, previous_ca.as_deref());
        let data = BTreeMap::from([
            ("ca.crt".to_owned(), ByteString(ca.into_bytes())),
            ("tls.crt".to_owned(), ByteString(issued.cert.into_bytes())),
            ("tls.key".to_owned(), ByteString(issued.key.into_bytes())),
        ]);
        let mut annotations = BTreeMap::from([
            (EXPIRATION_ANNOTATION.to_owned(), issued.expires.to_string()),
            (SERVICE_ANNOTATION.to_owned(), self.service.clone()),
        ]);
        if !self.extra_names.is_empty() {
            annotations.insert(
                EXTRA_NAMES_ANNOTATION.to_owned(),
                self.extra_names.join(","),
            );
        }
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.secret.clone()),
                namespace: Some(self.namespace.clone()),
                annotations: Some(annotations),
                owner_references: owner.map(|owner| vec![owner]),
                // Replacing at the version read makes a concurrent issuer fail with Conflict.
                resource_version: existing.and_then(|s| s.metadata.resource_version.clone()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".to_owned()),
            data: Some(data),
            ..Secret::default()
        };
        let result = match existing {
            Some(_) => {
                secrets
                    .replace(&self.secret, &PostParams::default(), &secret)
                    .await
            }
            None => secrets.create(&PostParams::default(), &secret).await,
        };
        match result {
            Ok(_) => Ok(()),
            // Another replica issued first; the next pass adopts its certificate.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(source) => Err(self.api_error(
                format!(
                    "store the certificate in Secret {}/{}",
                    self.namespace, self.secret
                ),
                source,
            )),
        }
    }

    /// Makes `owner` the Secret's owner, so that deleting the configuration deletes it.
    async fn adopt(
        &self,
        secrets: &Api<Secret>,
        owner: Option<OwnerReference>,
    ) -> Result<(), Error> {
        let patch = json!({"metadata": {"ownerReferences": owner.into_iter().collect::<Vec<_>>()}});
        secrets
            .patch(&self.secret, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| {
                self.api_error(
                    format!(
                        "make the webhook configuration the owner of Secret {}/{}",
                        self.namespace, self.secret
                    ),
                    source,
                )
            })?;
        tracing::info!(secret = %self.secret, "the Secret is now owned by the webhook configuration");
        Ok(())
    }

    async fn patch_ca_bundles(
        &self,
        client: &Client,
        untrusting: &[WebhookTrust],
        ca: &str,
    ) -> Result<(), Error> {
        let mut by_configuration: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for webhook in untrusting {
            by_configuration
                .entry(webhook.configuration.as_str())
                .or_default()
                .push(webhook.webhook.as_str());
        }
        let ca_bundle = ByteString(ca.as_bytes().to_vec());
        for (configuration, names) in by_configuration {
            // Webhooks merge by name in a strategic merge patch, so only caBundle changes.
            let patch = json!({
                "webhooks": names.iter().map(|name| json!({
                    "name": name,
                    "clientConfig": {"caBundle": ca_bundle},
                })).collect::<Vec<_>>(),
            });
            let params = PatchParams::default();
            let result = if configuration == self.validating {
                Api::<ValidatingWebhookConfiguration>::all(client.clone())
                    .patch(configuration, &params, &Patch::Strategic(&patch))
                    .await
                    .map(drop)
            } else {
                Api::<MutatingWebhookConfiguration>::all(client.clone())
                    .patch(configuration, &params, &Patch::Strategic(&patch))
                    .await
                    .map(drop)
            };
            result.map_err(|source| {
                self.api_error(format!("patch the caBundle of {configuration}"), source)
            })?;
            tracing::info!(configuration, webhooks = ?names, "caBundle updated");
        }
        Ok(())
    }

    fn write_serving_files(&self, certs: &ReloadingCert, stored: &StoredCert) -> Result<(), Error> {
        let dir = certs.dir();
        let write = |name: &str, contents: &str| {
            let staging = dir.join(format!(".{name}.new"));
            std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(&staging, contents))
                .and_then(|()| std::fs::rename(&staging, dir.join(name)))
                .map_err(|source| Error::Write {
                    dir: dir.to_owned(),
                    source,
                })
        };
        write(KEY_FILE, stored.key.as_deref().unwrap_or_default())?;
        write(CERT_FILE, stored.cert.as_deref().unwrap_or_default())?;
        match certs.reload() {
            Ok(_) => {
                tracing::info!(dir = %dir.display(), "serving the certificate from the Secret")
            }
            Err(err) => {
                tracing::warn!(error = %error_chain(&err), "the Secret's certificate could not be loaded")
            }
        }
        Ok(())
    }

    fn api_error(&self, action: String, source: kube::Error) -> Error {
        Error::Api { action, source }
    }
}

/// An owner reference to `configuration`; `None` before the API server gave it a uid.
fn owner_reference<K>(configuration: &K) -> Option<OwnerReference>
where
    K: Resource<DynamicType = ()>,
{
    let meta = configuration.meta();
    Some(OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: meta.name.clone()?,
        uid: meta.uid.clone()?,
        ..OwnerReference::default()
    })
}

fn trust(configuration: &str, webhook: &str, ca_bundle: Option<&ByteString>) -> WebhookTrust {
    WebhookTrust {
        configuration: configuration.to_owned(),
        webhook: webhook.to_owned(),
        ca_bundle: ca_bundle
            .filter(|b| !b.0.is_empty())
            .map(|b| String::from_utf8_lossy(&b.0).into_owned()),
    }
}

/// What the plan needs from the Secret.
fn stored_cert(secret: &Secret) -> StoredCert {
    let data = secret.data.as_ref();
    let field = |key: &str| {
        data.and_then(|d| d.get(key))
            .filter(|b| !b.0.is_empty())
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
    };
    let annotations = secret.metadata.annotations.as_ref();
    let annotation = |key: &str| annotations.and_then(|a| a.get(key)).cloned();
    StoredCert {
        ca: field("ca.crt"),
        cert: field("tls.crt"),
        key: field("tls.key"),
        expires: annotation(EXPIRATION_ANNOTATION).and_then(|e| e.parse().ok()),
        service: annotation(SERVICE_ANNOTATION),
        owned: secret
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|owner| owner.kind.ends_with("WebhookConfiguration")),
        extra_names: annotation(EXTRA_NAMES_ANNOTATION)
            .map(|names| {
                names
                    .split(',')
                    .filter(|name| !name.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_secret_and_treats_empty_values_as_absent() {
        let secret = Secret {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([
                    (
                        EXPIRATION_ANNOTATION.to_owned(),
                        "2027-06-01T00:00:00Z".to_owned(),
                    ),
                    (SERVICE_ANNOTATION.to_owned(), "svc.ns.svc".to_owned()),
                    (
                        EXTRA_NAMES_ANNOTATION.to_owned(),
                        "127.0.0.1,webhook.local".to_owned(),
                    ),
                ])),
                owner_references: owner_reference(&ValidatingWebhookConfiguration {
                    metadata: ObjectMeta {
                        name: Some("skyhook-operator-validating-webhook".into()),
                        uid: Some("8f0c".into()),
                        ..ObjectMeta::default()
                    },
                    webhooks: None,
                })
                .map(|owner| vec![owner]),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([
                ("ca.crt".to_owned(), ByteString(b"CA".to_vec())),
                ("tls.crt".to_owned(), ByteString(b"CERT".to_vec())),
                ("tls.key".to_owned(), ByteString(Vec::new())),
            ])),
            ..Secret::default()
        };
        assert_eq!(
            stored_cert(&secret),
            StoredCert {
                ca: Some("CA".into()),
                cert: Some("CERT".into()),
                key: None,
                expires: Some("2027-06-01T00:00:00Z".parse().unwrap()),
                service: Some("svc.ns.svc".into()),
                extra_names: vec!["127.0.0.1".into(), "webhook.local".into()],
                owned: true,
            }
        );
        let unreadable = Secret {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([(
                    EXPIRATION_ANNOTATION.to_owned(),
                    "next year".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        };
        assert_eq!(stored_cert(&unreadable), StoredCert::default());
        assert_eq!(
            trust("c", "w", Some(&ByteString(Vec::new()))).ca_bundle,
            None
        );
        assert_eq!(
            trust("c", "w", Some(&ByteString(b"CA".to_vec()))).ca_bundle,
            Some("CA".into())
        );
    }
}
