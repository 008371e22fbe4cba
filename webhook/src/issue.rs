//! Issuing the self-managed certificates: a CA and a serving certificate signed by it, for the
//! webhook's Service. Keys are ECDSA P-256 (upstream uses RSA-4096; ring cannot generate RSA
//! keys, and P-256 is accepted by every supported API server and far cheaper to handshake).

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// How long issued certificates are valid (upstream: one year).
pub const VALIDITY: SignedDuration = SignedDuration::from_hours(365 * 24);

/// A CA and a serving certificate with its key, all PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    /// The CA certificate: the `caBundle` of the webhook configurations and `ca.crt`.
    pub ca: String,
    /// The serving certificate (`tls.crt`).
    pub cert: String,
    /// The serving key (`tls.key`).
    pub key: String,
    /// When both expire (`skyhook.nvidia.com/expiration`).
    pub expires: Timestamp,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("Issued")
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

/// Errors while issuing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Key generation or signing failed.
    #[error("failed to issue the webhook certificate for {service}")]
    Issue {
        /// The Service the certificate was for.
        service: String,
        /// Why.
        #[source]
        source: rcgen::Error,
    },
    /// `now` plus the validity is not a representable date.
    #[error("failed to compute the certificate validity from {now}")]
    Validity {
        /// The start.
        now: Timestamp,
    },
}

/// Issues a CA and a serving certificate valid for `<service>` and `<service>.cluster.local`
/// (`service` is `<svc>.<ns>.svc`) and each of `extra_names` (DNS names or IP addresses, e.g.
/// `127.0.0.1` for an API server that calls the webhook by URL), from a day before `now` (clock
/// skew) for [`VALIDITY`].
pub fn issue(service: &str, extra_names: &[String], now: Timestamp) -> Result<Issued, Error> {
    let fail = |source| Error::Issue {
        service: service.to_owned(),
        source,
    };
    let not_after = now
        .checked_add(VALIDITY)
        .map_err(|_| Error::Validity { now })?;
    let not_before = now
        .checked_sub(SignedDuration::from_hours(24))
        .map_err(|_| Error::Validity { now })?;
    let (not_before, not_after) = (day_of(not_before), day_of(not_after));
    // The certificate ends at midnight of its last day; report that, not the later instant.
    let expires = not_after
        .to_zoned(TimeZone::UTC)
        .map_err(|_| Error::Validity { now })?
        .timestamp();

    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{service} webhook CA"));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    set_validity(&mut ca_params, not_before, not_after);
    let ca_key = KeyPair::generate().map_err(fail)?;
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(fail)?;

    let names = [service.to_owned(), format!("{service}.cluster.local")]
        .into_iter()
        .chain(extra_names.iter().cloned())
        .collect::<Vec<_>>();
    // rcgen makes a name that parses as an IP address an IP SAN, which is what TLS clients
    // check an address against.
    let mut params = CertificateParams::new(names).map_err(fail)?;
    params
        .distinguished_name
        .push(DnType::CommonName, service.to_owned());
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    set_validity(&mut params, not_before, not_after);
    let key = KeyPair::generate().map_err(fail)?;
    let cert = params.signed_by(&key, &ca).map_err(fail)?;

    Ok(Issued {
        ca: ca.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
        expires,
    })
}

fn set_validity(params: &mut CertificateParams, not_before: Date, not_after: Date) {
    let ymd = |d: Date| {
        rcgen::date_time_ymd(
            i32::from(d.year()),
            d.month().unsigned_abs(),
            d.day().unsigned_abs(),
        )
    };
    params.not_before = ymd(not_before);
    params.not_after = ymd(not_after);
}

/// The UTC day `at` falls in: validity is kept to whole days so that no second time library is
/// needed to build the certificate.
fn day_of(at: Timestamp) -> Date {
    at.to_zoned(TimeZone::UTC).date()
}
