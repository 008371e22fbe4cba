//! The controller's Prometheus endpoint (`METRICS_PORT`): scraping (plain HTTP, or HTTPS with a
//! bearer token when `METRICS_SECURE=true`), a small text-format parser,
//! and waiting for a series to reach a value or to disappear.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How often [`wait_for_metric`] scrapes: metrics change only when the controller reconciles.
const SCRAPE_INTERVAL: Duration = Duration::from_millis(250);

/// One sample of the text exposition format.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// `GET /metrics` on `127.0.0.1:<port>`, parsed.
pub async fn scrape(port: u16) -> anyhow::Result<Vec<Sample>> {
    scrape_at(std::net::SocketAddr::from((
        std::net::Ipv4Addr::LOCALHOST,
        port,
    )))
    .await
}

/// `GET /metrics` on `address` (a pod's IP and port, say), parsed.
pub async fn scrape_at(address: std::net::SocketAddr) -> anyhow::Result<Vec<Sample>> {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("connecting to the metrics port {address}"))?;
    // HTTP/1.0: the body ends at EOF, never chunked.
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .with_context(|| format!("reading /metrics from {address}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("malformed HTTP response from {address}: {response:.200}"))?;
    if !head.starts_with("HTTP/1.") || head.get(8..12) != Some(" 200") {
        bail!(
            "GET /metrics on {address} answered {}",
            head.lines().next().unwrap_or_default()
        );
    }
    Ok(parse(body))
}

/// What an HTTPS `GET /metrics` answered.
#[derive(Debug, Clone)]
pub struct HttpsAnswer {
    /// The HTTP status code.
    pub status: u16,
    /// The body.
    pub body: String,
}

/// `GET /metrics` over HTTPS on `127.0.0.1:<port>`, with `Authorization: Bearer <token>` when
/// given, without verifying the certificate (Prometheus' `insecure_skip_verify`): the controller's
/// is self-signed and made at start.
pub async fn scrape_https(port: u16, bearer_token: Option<&str>) -> anyhow::Result<HttpsAnswer> {
    let address = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("configuring the TLS client")?
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(SkipVerification(provider)))
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("connecting to the metrics port {address}"))?;
    let server_name = rustls::pki_types::ServerName::try_from("localhost")
        .context("the TLS server name 'localhost'")?;
    let mut stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(server_name, tcp)
        .await
        .with_context(|| format!("TLS handshake with the metrics port {address}"))?;
    let authorization = bearer_token
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    // HTTP/1.0: the body ends at EOF, never chunked.
    stream
        .write_all(
            format!("GET /metrics HTTP/1.0\r\nHost: localhost\r\n{authorization}\r\n").as_bytes(),
        )
        .await?;
    let mut response = Vec::new();
    if let Err(error) = stream.read_to_end(&mut response).await {
        // A server closing the TCP connection without a TLS close_notify still sent it all.
        if error.kind() != std::io::ErrorKind::UnexpectedEof || response.is_empty() {
            return Err(error).with_context(|| format!("reading /metrics from {address}"));
        }
    }
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("malformed HTTP response from {address}: {response:.200}"))?;
    let status = head
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("no status code in the response from {address}: {head:.200}"))?;
    Ok(HttpsAnswer {
        status,
        body: body.to_owned(),
    })
}

/// Accepts any server certificate; the handshake signatures are still checked.
#[derive(Debug)]
struct SkipVerification(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for SkipVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Parses the samples of a Prometheus/OpenMetrics text body (comments and malformed lines are
/// skipped).
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let (series, rest) = match line.find('{') {
        Some(open) => {
            let close = open + line[open..].rfind('}')?;
            (&line[..=close], &line[close + 1..])
        }
        None => line.split_at(line.find(' ')?),
    };
    let value = rest.split_whitespace().next()?.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, labels)) => (name, parse_labels(labels.strip_suffix('}')?)?),
        None => (series, BTreeMap::new()),
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `a="x",b="y\"z"` -> {a: x, b: y"z}.
fn parse_labels(text: &str) -> Option<BTreeMap<String, String>> {
    let mut labels = BTreeMap::new();
    let mut rest = text.trim_start_matches(',');
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        labels.insert(name.trim().to_owned(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Some(labels)
}

/// The value of the first sample named `name` whose labels include all of `labels`.
pub fn find(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|sample| {
            sample.name == name
                && labels
                    .iter()
                    .all(|(key, value)| sample.labels.get(*key).map(String::as_str) == Some(value))
        })
        .map(|sample| sample.value)
}

/// Scrapes until the series `name{labels…}` has `expected` (`None`: until no such series exists).
pub async fn wait_for_metric(
    port: u16,
    name: &str,
    labels: &[(&str, &str)],
    expected: Option<f64>,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + crate::WAIT;
    loop {
        let samples = scrape(port).await?;
        let found = find(&samples, name, labels);
        if found == expected {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "metric {name}{labels:?} is {found:?}, not {expected:?}, after {:?}",
                crate::WAIT
            );
        }
        tokio::time::sleep(SCRAPE_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_parsed() {
        let text = "# HELP skyhook_status x\n# TYPE skyhook_status gauge\n\
            skyhook_status{skyhook_name=\"a\",status=\"complete\"} 1\n\
            skyhook_status{skyhook_name=\"a\",status=\"erroring\"} 0\n\
            up 1.5\n\
            odd{v=\"q\\\"uo,te}\"} 2\n\
            # EOF\n";
        let samples = parse(text);
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            samples,
            vec![
                Sample {
                    name: "skyhook_status".into(),
                    labels: labels(&[("skyhook_name", "a"), ("status", "complete")]),
                    value: 1.0
                },
                Sample {
                    name: "skyhook_status".into(),
                    labels: labels(&[("skyhook_name", "a"), ("status", "erroring")]),
                    value: 0.0
                },
                Sample {
                    name: "up".into(),
                    labels: BTreeMap::new(),
                    value: 1.5
                },
                Sample {
                    name: "odd".into(),
                    labels: labels(&[("v", "q\"uo,te}")]),
                    value: 2.0
                },
            ]
        );
    }

    #[test]
    fn find_matches_a_subset_of_labels() {
        let samples = parse("m{a=\"1\",b=\"2\"} 3\nm{a=\"1\",b=\"9\"} 4\n");
        type Labels<'a> = &'a [(&'a str, &'a str)];
        let cases: [(Labels, Option<f64>); 4] = [
            (&[("b", "9")], Some(4.0)),
            (&[("a", "1"), ("b", "2")], Some(3.0)),
            (&[("a", "1")], Some(3.0)),
            (&[("a", "2")], None),
        ];
        for (labels, expected) in cases {
            assert_eq!(find(&samples, "m", labels), expected, "{labels:?}");
        }
        assert_eq!(find(&samples, "n", &[]), None);
    }
}
