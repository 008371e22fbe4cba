//! Certificate self-management decisions (pure): from the stored Secret, the webhook
//! configurations and the certificate being served, decide what to do. The rules are in spec
//! §2.14:
//! - Issue a new certificate when the Secret is missing or incomplete, was issued for another
//!   Service or other extra names, has no readable expiry, or expires within [`RENEW_BEFORE`].
//! - Otherwise, patch every webhook whose `caBundle` differs from the Secret's CA, and write the
//!   Secret's pair to disk when the served files differ.
//! - The webhook is ready only when it serves the Secret's certificate and every webhook trusts
//!   the Secret's CA.
//! - Ours, not upstream's: the Secret is owned by the webhook configuration, so that deleting
//!   the configuration (`helm uninstall`) deletes the Secret with it. Nothing is issued while no
//!   configuration exists (a replica still running after `helm uninstall` would otherwise leave
//!   a new Secret behind), and a Secret without that owner (issued by upstream) is adopted.
//!
//! [`crate::cert_sync`] observes and carries the plan out.

use jiff::{SignedDuration, Timestamp};

/// Renew this long before the certificate expires.
pub const RENEW_BEFORE: SignedDuration = SignedDuration::from_hours(7 * 24);
/// Look again at least this often, even when nothing changes.
pub const RECHECK_EVERY: SignedDuration = SignedDuration::from_hours(24);
/// Look again this soon while no webhook configuration exists to own a new Secret: Helm
/// creates the configurations with the Deployment, moments apart.
pub const RECHECK_WITHOUT_OWNER: SignedDuration = SignedDuration::from_secs(2);

/// What the Secret `webhook-cert` holds. Fields are `None` when the key is absent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredCert {
    /// `ca.crt` (PEM).
    pub ca: Option<String>,
    /// `tls.crt` (PEM).
    pub cert: Option<String>,
    /// `tls.key` (PEM).
    pub key: Option<String>,
    /// The `skyhook.nvidia.com/expiration` annotation, parsed; `None` when absent or unreadable.
    pub expires: Option<Timestamp>,
    /// The `skyhook.nvidia.com/service` annotation: the Service the certificate was issued for.
    pub service: Option<String>,
    /// The `skyhook.nvidia.com/extra-names` annotation: further names the certificate was issued
    /// for (empty when absent).
    pub extra_names: Vec<String>,
    /// Whether a webhook configuration owns the Secret (an `ownerReferences` entry).
    pub owned: bool,
}

/// One webhook inside a Validating or Mutating WebhookConfiguration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookTrust {
    /// The configuration object's name.
    pub configuration: String,
    /// The webhook's name inside it.
    pub webhook: String,
    /// Its `clientConfig.caBundle`, decoded PEM; `None` when empty.
    pub ca_bundle: Option<String>,
}

/// Everything the plan depends on.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The Secret, `None` when it does not exist.
    pub stored: Option<&'a StoredCert>,
    /// Every webhook of the webhook's own configurations.
    pub webhooks: &'a [WebhookTrust],
    /// The certificate (PEM) in the serving directory, `None` when there is none.
    pub served: Option<&'a str>,
    /// The Service the certificate must be valid for (`<svc>.<ns>.svc`).
    pub service: &'a str,
    /// Further names (DNS names or IP addresses) the certificate must be valid for.
    pub extra_names: &'a [String],
    /// Whether one of the webhook's configurations exists to own the Secret.
    pub owner_exists: bool,
}

/// Why a new certificate is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueReason {
    /// No Secret, or one without `ca.crt`, `tls.crt` or `tls.key`.
    Missing,
    /// Issued for another Service.
    ServiceChanged,
    /// Issued for other extra names (`--cert-extra-name` changed).
    ExtraNamesChanged,
    /// The expiration annotation is absent or unreadable.
    UnknownExpiry,
    /// Expires within [`RENEW_BEFORE`].
    ExpiresSoon,
}

/// One step to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Generate a CA and serving certificate and store them in the Secret.
    Issue(IssueReason),
    /// Set `caBundle` of these webhooks to the Secret's CA.
    PatchCaBundle(Vec<WebhookTrust>),
    /// Write the Secret's `tls.crt` and `tls.key` into the serving directory.
    WriteServingFiles,
    /// Make the webhook configuration the owner of the Secret.
    Adopt,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertPlan {
    /// Steps, in the order to carry them out.
    pub actions: Vec<Action>,
    /// Whether the webhook can be trusted by the API server right now.
    pub ready: bool,
    /// When to plan again if nothing changes before.
    pub recheck_at: Timestamp,
}

/// Decides the certificate actions at `now`.
pub fn cert_plan(observed: &Observed<'_>, now: Timestamp) -> CertPlan {
    let mut plan = plan_for_the_secret(observed, now);
    let issuing = plan.actions.iter().any(|a| matches!(a, Action::Issue(_)));
    if !observed.owner_exists {
        if issuing {
            plan.actions.clear();
            plan.recheck_at = now.saturating_add(RECHECK_WITHOUT_OWNER).unwrap_or(now);
        }
    } else if !issuing && observed.stored.is_some_and(|s| !s.owned) {
        plan.actions.push(Action::Adopt);
    }
    plan
}

/// [`cert_plan`] as if a configuration existed to own the Secret.
fn plan_for_the_secret(observed: &Observed<'_>, now: Timestamp) -> CertPlan {
    let recheck = now.saturating_add(RECHECK_EVERY).unwrap_or(now);
    let complete = observed
        .stored
        .and_then(|s| Some((s.ca.as_deref()?, s.cert.as_deref()?, s.key.as_deref()?, s)));
    let Some((ca, cert, _key, stored)) = complete else {
        return issue(IssueReason::Missing, recheck);
    };
    if stored.service.as_deref() != Some(observed.service) {
        return issue(IssueReason::ServiceChanged, recheck);
    }
    if stored.extra_names != observed.extra_names {
        return issue(IssueReason::ExtraNamesChanged, recheck);
    }
    let Some(expires) = stored.expires else {
        return issue(IssueReason::UnknownExpiry, recheck);
    };
    let renew_at = expires.saturating_sub(RENEW_BEFORE).unwrap_or(expires);
    if now >= renew_at {
        return issue(IssueReason::ExpiresSoon, recheck);
    }

    let mut actions = Vec::new();
    let untrusting: Vec<WebhookTrust> = observed
        .webhooks
        .iter()
        .filter(|w| w.ca_bundle.as_deref() != Some(ca))
        .cloned()
        .collect();
    let trusted = untrusting.is_empty();
    if !trusted {
        actions.push(Action::PatchCaBundle(untrusting));
    }
    let serving = observed.served == Some(cert);
    if !serving {
        actions.push(Action::WriteServingFiles);
    }
    CertPlan {
        actions,
        ready: trusted && serving,
        recheck_at: recheck.min(renew_at),
    }
}

fn issue(reason: IssueReason, recheck_at: Timestamp) -> CertPlan {
    CertPlan {
        actions: vec![Action::Issue(reason)],
        ready: false,
        recheck_at,
    }
}

/// The `ca.crt` to store with a newly issued CA: the new CA, then the CA it replaces (only that
/// one, not older ones). API servers trust both while replicas still serve the previous
/// certificate, so a rotation fails no request; the older CA drops out at the next rotation.
pub fn ca_bundle(new_ca: &str, previous: Option<&str>) -> String {
    const END: &str = "-----END CERTIFICATE-----";
    let previous_ca = previous
        .and_then(|p| p.find(END).map(|at| &p[..at + END.len()]))
        .map(str::trim);
    match previous_ca {
        Some(old) if !old.is_empty() && old != new_ca.trim() => {
            format!("{}\n{old}\n", new_ca.trim_end())
        }
        _ => new_ca.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVICE: &str = "skyhook-webhook.skyhook.svc";

    fn now() -> Timestamp {
        "2026-06-01T00:00:00Z".parse().unwrap()
    }

    fn stored(expires_in_days: i64) -> StoredCert {
        StoredCert {
            ca: Some("CA".into()),
            cert: Some("CERT".into()),
            key: Some("KEY".into()),
            expires: Some(now() + SignedDuration::from_hours(24 * expires_in_days)),
            service: Some(SERVICE.into()),
            extra_names: Vec::new(),
            owned: true,
        }
    }

    fn trust(webhook: &str, ca: Option<&str>) -> WebhookTrust {
        WebhookTrust {
            configuration: "skyhook-operator-validating-webhook".into(),
            webhook: webhook.into(),
            ca_bundle: ca.map(str::to_owned),
        }
    }

    /// (case, secret, webhooks, served certificate, expected actions, ready)
    type Case<'a> = (
        &'a str,
        Option<&'a StoredCert>,
        &'a [WebhookTrust],
        Option<&'a str>,
        Vec<Action>,
        bool,
    );

    #[test]
    fn plan_table() {
        let healthy = stored(300);
        let no_key = StoredCert {
            key: None,
            ..stored(300)
        };
        let other_service = StoredCert {
            service: Some("old.skyhook.svc".into()),
            ..stored(300)
        };
        let other_names = StoredCert {
            extra_names: vec!["127.0.0.1".into()],
            ..stored(300)
        };
        let no_expiry = StoredCert {
            expires: None,
            ..stored(300)
        };
        let expiring = stored(6);
        let trusted = [
            trust("validate-skyhook.nvidia.com", Some("CA")),
            trust("validate-deploymentpolicy.nvidia.com", Some("CA")),
        ];
        let reset_by_helm = [
            trust("validate-skyhook.nvidia.com", None),
            trust("validate-deploymentpolicy.nvidia.com", Some("CA")),
        ];
        let cases: Vec<Case<'_>> = vec![
            (
                "no secret",
                None,
                &trusted,
                None,
                vec![Action::Issue(IssueReason::Missing)],
                false,
            ),
            (
                "secret without key",
                Some(&no_key),
                &trusted,
                Some("CERT"),
                vec![Action::Issue(IssueReason::Missing)],
                false,
            ),
            (
                "issued for another service",
                Some(&other_service),
                &trusted,
                Some("CERT"),
                vec![Action::Issue(IssueReason::ServiceChanged)],
                false,
            ),
            (
                "issued with other extra names",
                Some(&other_names),
                &trusted,
                Some("CERT"),
                vec![Action::Issue(IssueReason::ExtraNamesChanged)],
                false,
            ),
            (
                "unreadable expiry",
                Some(&no_expiry),
                &trusted,
                Some("CERT"),
                vec![Action::Issue(IssueReason::UnknownExpiry)],
                false,
            ),
            (
                "six days left",
                Some(&expiring),
                &trusted,
                Some("CERT"),
                vec![Action::Issue(IssueReason::ExpiresSoon)],
                false,
            ),
            (
                "all in place",
                Some(&healthy),
                &trusted,
                Some("CERT"),
                vec![],
                true,
            ),
            (
                "helm reset one caBundle",
                Some(&healthy),
                &reset_by_helm,
                Some("CERT"),
                vec![Action::PatchCaBundle(vec![trust(
                    "validate-skyhook.nvidia.com",
                    None,
                )])],
                false,
            ),
            (
                "disk still has the startup certificate",
                Some(&healthy),
                &trusted,
                Some("THROWAWAY"),
                vec![Action::WriteServingFiles],
                false,
            ),
            (
                "nothing on disk and nothing trusted",
                Some(&healthy),
                &reset_by_helm,
                None,
                vec![
                    Action::PatchCaBundle(vec![trust("validate-skyhook.nvidia.com", None)]),
                    Action::WriteServingFiles,
                ],
                false,
            ),
        ];
        for (name, secret, webhooks, served, actions, ready) in cases {
            let plan = cert_plan(
                &Observed {
                    stored: secret,
                    webhooks,
                    served,
                    service: SERVICE,
                    extra_names: &[],
                    owner_exists: true,
                },
                now(),
            );
            assert_eq!(plan.actions, actions, "{name}");
            assert_eq!(plan.ready, ready, "{name}");
        }
    }

    /// (case, secret, owner exists, expected actions, ready, recheck)
    type OwnerCase<'a> = (
        &'a str,
        Option<&'a StoredCert>,
        bool,
        Vec<Action>,
        bool,
        Timestamp,
    );

    #[test]
    fn the_secret_is_issued_only_with_an_owner_and_adopted_when_it_has_none() {
        let healthy = stored(300);
        let ownerless = StoredCert {
            owned: false,
            ..stored(300)
        };
        let trusted = [trust("validate-skyhook.nvidia.com", Some("CA"))];
        let soon = now() + RECHECK_WITHOUT_OWNER;
        let daily = now() + RECHECK_EVERY;
        let cases: [OwnerCase<'_>; 5] = [
            (
                "no secret, no configuration",
                None,
                false,
                vec![],
                false,
                soon,
            ),
            (
                "no secret, a configuration",
                None,
                true,
                vec![Action::Issue(IssueReason::Missing)],
                false,
                daily,
            ),
            (
                "owned secret, no configuration",
                Some(&healthy),
                false,
                vec![],
                true,
                daily,
            ),
            (
                "upstream's secret",
                Some(&ownerless),
                true,
                vec![Action::Adopt],
                true,
                daily,
            ),
            (
                "upstream's secret, no configuration",
                Some(&ownerless),
                false,
                vec![],
                true,
                daily,
            ),
        ];
        for (name, secret, owner_exists, actions, ready, recheck_at) in cases {
            let plan = cert_plan(
                &Observed {
                    stored: secret,
                    webhooks: if owner_exists { &trusted } else { &[] },
                    served: Some("CERT"),
                    service: SERVICE,
                    extra_names: &[],
                    owner_exists,
                },
                now(),
            );
            assert_eq!(plan.actions, actions, "{name}");
            assert_eq!(plan.ready, ready, "{name}");
            assert_eq!(plan.recheck_at, recheck_at, "{name}");
        }
    }

    #[test]
    fn a_new_ca_is_bundled_with_only_the_one_it_replaces() {
        let block =
            |n: &str| format!("-----BEGIN CERTIFICATE-----\n{n}\n-----END CERTIFICATE-----\n");
        let (a, b, c) = (block("A"), block("B"), block("C"));
        assert_eq!(ca_bundle(&a, None), a);
        assert_eq!(ca_bundle(&b, Some(&a)), format!("{b}{a}"));
        // B+A rotated to C keeps B only.
        assert_eq!(ca_bundle(&c, Some(&format!("{b}{a}"))), format!("{c}{b}"));
        assert_eq!(ca_bundle(&a, Some(&a)), a);
        assert_eq!(ca_bundle(&a, Some("garbage")), a);
    }

    #[test]
    fn rechecks_daily_or_at_the_renewal_time_whichever_is_first() {
        let webhooks = [trust("validate-skyhook.nvidia.com", Some("CA"))];
        let plan_for = |secret: &StoredCert| {
            cert_plan(
                &Observed {
                    stored: Some(secret),
                    webhooks: &webhooks,
                    served: Some("CERT"),
                    service: SERVICE,
                    extra_names: &[],
                    owner_exists: true,
                },
                now(),
            )
        };
        assert_eq!(plan_for(&stored(300)).recheck_at, now() + RECHECK_EVERY);
        // Renewal due in 7 days 12 hours minus 7 days: 12 hours from now.
        let plan = plan_for(&StoredCert {
            expires: Some(now() + SignedDuration::from_hours(7 * 24 + 12)),
            ..stored(0)
        });
        assert_eq!(plan.recheck_at, now() + SignedDuration::from_hours(12));
        assert!(plan.ready);
    }
}
