//! The cluster's certificates and keys: a cluster CA, the API server's serving certificate, client
//! certificates, a front-proxy CA for the aggregation layer, and the service-account signing key.
//!
//! Keys are ECDSA P-256 (rcgen's default), which every component accepts, service-account token
//! signing included (ES256). Each cluster gets fresh keys, so clusters never trust each other.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// The common name of the cluster CA, which signs every certificate but the front proxy's.
const CLUSTER_CA_NAME: &str = "devcluster-ca";

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating the {what} certificate: {source}")]
    Generate {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// PEM-encoded certificate and private key.
#[derive(Debug, Clone)]
pub struct CertAndKey {
    pub cert_pem: String,
    pub key_pem: String,
}

/// Everything generated for one cluster, in memory (see [`Pki::write`] for the files).
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca: CertAndKey,
    pub apiserver: CertAndKey,
    pub admin: CertAndKey,
    pub apiserver_kubelet_client: CertAndKey,
    pub front_proxy_ca: CertAndKey,
    pub front_proxy_client: CertAndKey,
    pub service_account_key_pem: String,
    pub service_account_public_pem: String,
}

/// Paths of the files [`Pki::write`] creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkiFiles {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub apiserver_cert: PathBuf,
    pub apiserver_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub kubelet_client_cert: PathBuf,
    pub kubelet_client_key: PathBuf,
    pub front_proxy_ca_cert: PathBuf,
    pub front_proxy_client_cert: PathBuf,
    pub front_proxy_client_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_public: PathBuf,
}

impl PkiFiles {
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            ca_cert: dir.join("ca.crt"),
            ca_key: dir.join("ca.key"),
            apiserver_cert: dir.join("apiserver.crt"),
            apiserver_key: dir.join("apiserver.key"),
            admin_cert: dir.join("admin.crt"),
            admin_key: dir.join("admin.key"),
            kubelet_client_cert: dir.join("apiserver-kubelet-client.crt"),
            kubelet_client_key: dir.join("apiserver-kubelet-client.key"),
            front_proxy_ca_cert: dir.join("front-proxy-ca.crt"),
            front_proxy_client_cert: dir.join("front-proxy-client.crt"),
            front_proxy_client_key: dir.join("front-proxy-client.key"),
            service_account_key: dir.join("sa.key"),
            service_account_public: dir.join("sa.pub"),
        }
    }
}

/// The DNS names and addresses clients may use to reach the API server.
pub fn apiserver_sans(service_ip: Ipv4Addr, address: Ipv4Addr) -> Vec<SanType> {
    let mut sans: Vec<SanType> = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    .into_iter()
    .filter_map(|name| name.try_into().ok().map(SanType::DnsName))
    .collect();
    sans.push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    sans.push(SanType::IpAddress(IpAddr::V4(service_ip)));
    if address != Ipv4Addr::LOCALHOST {
        sans.push(SanType::IpAddress(IpAddr::V4(address)));
    }
    sans
}

impl Pki {
    /// `address`: where the API server serves (besides `127.0.0.1`, always named).
    pub fn generate(service_ip: Ipv4Addr, address: Ipv4Addr) -> Result<Self, PkiError> {
        let (ca, ca_issuer) = certificate_authority(CLUSTER_CA_NAME)?;
        let (front_proxy_ca, front_proxy_issuer) =
            certificate_authority("devcluster-front-proxy-ca")?;

        let apiserver = leaf(
            "apiserver",
            "kube-apiserver",
            None,
            apiserver_sans(service_ip, address),
            ExtendedKeyUsagePurpose::ServerAuth,
            &ca_issuer,
        )?;
        let admin = client(
            "admin",
            "devcluster-admin",
            Some("system:masters"),
            &ca_issuer,
        )?;
        let apiserver_kubelet_client = client(
            "apiserver kubelet client",
            "kube-apiserver-kubelet-client",
            Some("system:masters"),
            &ca_issuer,
        )?;
        let front_proxy_client = client(
            "front-proxy client",
            "front-proxy-client",
            None,
            &front_proxy_issuer,
        )?;

        let service_account = KeyPair::generate().map_err(|source| PkiError::Generate {
            what: "service-account",
            source,
        })?;
        Ok(Self {
            ca,
            apiserver,
            admin,
            apiserver_kubelet_client,
            front_proxy_ca,
            front_proxy_client,
            service_account_key_pem: service_account.serialize_pem(),
            service_account_public_pem: service_account.public_key_pem(),
        })
    }

    /// Writes every certificate and key into `dir` (created if missing); keys are readable by
    /// the owner only.
    pub fn write(&self, dir: &Path) -> Result<PkiFiles, PkiError> {
        let files = PkiFiles::in_dir(dir);
        std::fs::create_dir_all(dir).map_err(|source| PkiError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let entries: [(&PathBuf, &str, bool); 13] = [
            (&files.ca_cert, &self.ca.cert_pem, false),
            (&files.ca_key, &self.ca.key_pem, true),
            (&files.apiserver_cert, &self.apiserver.cert_pem, false),
            (&files.apiserver_key, &self.apiserver.key_pem, true),
            (&files.admin_cert, &self.admin.cert_pem, false),
            (&files.admin_key, &self.admin.key_pem, true),
            (
                &files.kubelet_client_cert,
                &self.apiserver_kubelet_client.cert_pem,
                false,
            ),
            (
                &files.kubelet_client_key,
                &self.apiserver_kubelet_client.key_pem,
                true,
            ),
            (
                &files.front_proxy_ca_cert,
                &self.front_proxy_ca.cert_pem,
                false,
            ),
            (
                &files.front_proxy_client_cert,
                &self.front_proxy_client.cert_pem,
                false,
            ),
            (
                &files.front_proxy_client_key,
                &self.front_proxy_client.key_pem,
                true,
            ),
            (
                &files.service_account_key,
                &self.service_account_key_pem,
                true,
            ),
            (
                &files.service_account_public,
                &self.service_account_public_pem,
                false,
            ),
        ];
        for (path, content, secret) in entries {
            write_file(path, content, secret).map_err(|source| PkiError::Write {
                path: path.clone(),
                source,
            })?;
        }
        Ok(files)
    }
}

pub(crate) fn write_file(path: &Path, content: &str, secret: bool) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mode = if secret { 0o600 } else { 0o644 };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    file.write_all(content.as_bytes())
}

fn certificate_authority(
    name: &'static str,
) -> Result<(CertAndKey, Issuer<'static, KeyPair>), PkiError> {
    let generate = |source| PkiError::Generate { what: name, source };
    let key = KeyPair::generate().map_err(generate)?;
    let params = ca_params(name);
    let cert = params.self_signed(&key).map_err(generate)?;
    let pair = CertAndKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    };
    Ok((pair, Issuer::new(params, key)))
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// The serving certificate of a node's kubelet API, signed by the cluster CA (whose key is
/// `ca_key_pem`), for the node's name and address: the API server verifies it
/// (`--kubelet-certificate-authority`) as it would a real kubelet's.
pub fn kubelet_serving_certificate(
    ca_key_pem: &str,
    node: &str,
    address: IpAddr,
) -> Result<CertAndKey, PkiError> {
    let what = "kubelet serving";
    let ca_key =
        KeyPair::from_pem(ca_key_pem).map_err(|source| PkiError::Generate { what, source })?;
    let issuer = Issuer::new(ca_params(CLUSTER_CA_NAME), ca_key);
    let mut sans = vec![SanType::IpAddress(address)];
    sans.extend(node.try_into().ok().map(SanType::DnsName));
    leaf(
        what,
        &format!("system:node:{node}"),
        Some("system:nodes"),
        sans,
        ExtendedKeyUsagePurpose::ServerAuth,
        &issuer,
    )
}

fn client(
    what: &'static str,
    common_name: &str,
    organization: Option<&str>,
    issuer: &Issuer<'_, KeyPair>,
) -> Result<CertAndKey, PkiError> {
    leaf(
        what,
        common_name,
        organization,
        Vec::new(),
        ExtendedKeyUsagePurpose::ClientAuth,
        issuer,
    )
}

fn leaf(
    what: &'static str,
    common_name: &str,
    organization: Option<&str>,
    sans: Vec<SanType>,
    usage: ExtendedKeyUsagePurpose,
    issuer: &Issuer<'_, KeyPair>,
) -> Result<CertAndKey, PkiError> {
    let generate = |source| PkiError::Generate { what, source };
    let key = KeyPair::generate().map_err(generate)?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    if let Some(organization) = organization {
        params
            .distinguished_name
            .push(DnType::OrganizationName, organization);
    }
    params.subject_alt_names = sans;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, issuer).map_err(generate)?;
    Ok(CertAndKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apiserver_certificate_names_every_address_clients_use() {
        let names: Vec<String> =
            apiserver_sans(Ipv4Addr::new(10, 96, 0, 1), Ipv4Addr::new(100, 64, 0, 1))
                .iter()
                .filter_map(|san| match san {
                    SanType::DnsName(name) => Some(name.as_str().to_string()),
                    SanType::IpAddress(ip) => Some(ip.to_string()),
                    _ => None,
                })
                .collect();
        let expected = [
            "localhost",
            "kubernetes",
            "kubernetes.default.svc",
            "127.0.0.1",
            "10.96.0.1",
            "100.64.0.1",
        ];
        for name in expected {
            assert!(
                names.iter().any(|san| san == name),
                "{name} missing from {names:?}"
            );
        }
    }

    #[test]
    fn written_keys_are_private_and_certificates_are_pem() -> Result<(), Box<dyn std::error::Error>>
    {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir()?;
        let files =
            Pki::generate(Ipv4Addr::new(10, 96, 0, 1), Ipv4Addr::LOCALHOST)?.write(dir.path())?;
        let cases = [
            (&files.ca_cert, "-----BEGIN CERTIFICATE-----", 0o644),
            (&files.apiserver_key, "-----BEGIN PRIVATE KEY-----", 0o600),
            (&files.admin_cert, "-----BEGIN CERTIFICATE-----", 0o644),
            (
                &files.service_account_key,
                "-----BEGIN PRIVATE KEY-----",
                0o600,
            ),
            (
                &files.service_account_public,
                "-----BEGIN PUBLIC KEY-----",
                0o644,
            ),
        ];
        for (path, header, mode) in cases {
            let text = std::fs::read_to_string(path)?;
            assert!(
                text.starts_with(header),
                "{path:?} starts with {:?}",
                &text[..30.min(text.len())]
            );
            let actual = std::fs::metadata(path)?.permissions().mode() & 0o777;
            assert_eq!(actual, mode, "{path:?}");
        }
        Ok(())
    }
}
