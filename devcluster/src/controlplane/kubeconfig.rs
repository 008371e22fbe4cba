//! The admin kubeconfig: certificates embedded, so the file can be copied and used anywhere.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::pki::Pki;

/// The kubeconfig text for the cluster-admin user of a cluster served at `server`.
pub fn admin_kubeconfig(server: &str, pki: &Pki) -> String {
    let encode = |pem: &str| STANDARD.encode(pem.as_bytes());
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: devcluster
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: devcluster-admin
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: devcluster
  context:
    cluster: devcluster
    user: devcluster-admin
    namespace: default
current-context: devcluster
",
        ca = encode(&pki.ca.cert_pem),
        cert = encode(&pki.admin.cert_pem),
        key = encode(&pki.admin.key_pem),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// kube-rs must read what we write (the CLI and tests build their clients from it).
    #[test]
    fn kube_parses_the_kubeconfig() -> Result<(), Box<dyn std::error::Error>> {
        let pki = Pki::generate(Ipv4Addr::new(10, 96, 0, 1), Ipv4Addr::LOCALHOST)?;
        let text = admin_kubeconfig("https://127.0.0.1:6443", &pki);
        let parsed = kube::config::Kubeconfig::from_yaml(&text)?;
        assert_eq!(parsed.current_context.as_deref(), Some("devcluster"));
        let cluster = parsed
            .clusters
            .first()
            .and_then(|named| named.cluster.as_ref())
            .ok_or("no cluster")?;
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        let ca = STANDARD.decode(
            cluster
                .certificate_authority_data
                .as_deref()
                .ok_or("no CA")?,
        )?;
        assert_eq!(String::from_utf8(ca)?, pki.ca.cert_pem);
        Ok(())
    }
}
