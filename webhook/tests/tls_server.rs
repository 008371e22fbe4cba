//! The admission server over real TLS connections: protocol versions, answers to garbage, the
//! admin port, and certificate rotation without a failed request.
// Test helpers fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::Body;
use hyper::Request;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion, version};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;
use webhook::endpoint::Endpoint;
use webhook::lookups::ExistingObjects;
use webhook::metrics::Metrics;
use webhook::server::{
    Admin, Admission, Draining, admin_router, admission_router, close_connections_while, serve_tls,
};
use webhook::tls::{self, ReloadingCert};

struct Generated {
    cert_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
}

fn generate() -> Generated {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    Generated {
        cert_pem: generated.cert.pem(),
        key_pem: generated.signing_key.serialize_pem(),
        der: generated.cert.der().clone(),
    }
}

/// Replaces a file atomically, as the kubelet does for a mounted Secret.
fn replace(dir: &Path, name: &str, contents: &str) {
    let staging = dir.join(format!(".{name}.new"));
    std::fs::write(&staging, contents).unwrap();
    std::fs::rename(&staging, dir.join(name)).unwrap();
}

fn install(dir: &Path, cert: &Generated) {
    replace(dir, tls::CERT_FILE, &cert.cert_pem);
    replace(dir, tls::KEY_FILE, &cert.key_pem);
}

struct Server {
    addr: SocketAddr,
    certs: Arc<ReloadingCert>,
    metrics: Arc<Metrics>,
    draining: Draining,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(dir: &Path) -> Server {
        let draining = Draining::default();
        let provider = tls::provider();
        let certs = Arc::new(ReloadingCert::new(dir, Arc::clone(&provider)));
        certs.reload().unwrap();
        let metrics = Arc::new(Metrics::default());
        let router = admission_router(Admission {
            lookups: Arc::new(ExistingObjects::default()),
            metrics: Arc::clone(&metrics),
            policies: None,
            nodewright_policies: None,
        });
        let router = close_connections_while(router, draining.clone());
        let config = Arc::new(tls::server_config(Arc::clone(&certs), provider).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(serve_tls(listener, config, router, async {
            let _ = stopped.await;
        }));
        Server {
            addr,
            certs,
            metrics,
            draining,
            stop: Some(stop),
            done,
        }
    }

    async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.done.await.unwrap();
    }
}

fn client_config(
    trusted: &[&CertificateDer<'static>],
    versions: &[&'static SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in trusted {
        roots.add((*cert).clone()).unwrap();
    }
    Arc::new(
        ClientConfig::builder_with_provider(tls::provider())
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

async fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> std::io::Result<Tls> {
    connect_as(addr, config, "localhost").await
}

async fn connect_as(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    name: &str,
) -> std::io::Result<Tls> {
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(config)
        .connect(ServerName::try_from(name.to_owned()).unwrap(), tcp)
        .await
}

type Sender = hyper::client::conn::http1::SendRequest<Body>;

/// An HTTP/1.1 connection over `stream`, driven in the background until it closes.
async fn open(
    stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
) -> hyper::Result<(Sender, tokio::task::JoinHandle<hyper::Result<()>>)> {
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    Ok((sender, tokio::spawn(connection)))
}

/// An answer: its status, its `Connection` header and its body.
struct Answer {
    status: u16,
    connection: Option<String>,
    body: Vec<u8>,
}

/// One request on the open connection of `sender`.
async fn send(
    sender: &mut Sender,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> hyper::Result<Answer> {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let connection =
        (response.headers().get(hyper::header::CONNECTION)).map(|v| v.to_str().unwrap().to_owned());
    let bytes = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX)
        .await
        .unwrap();
    Ok(Answer {
        status,
        connection,
        body: bytes.to_vec(),
    })
}

/// One HTTP/1.1 request on `stream`; the status and the body.
async fn request(
    stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> hyper::Result<(u16, Vec<u8>)> {
    let (mut sender, _connection) = open(stream).await?;
    let answer = send(&mut sender, method, path, body).await?;
    Ok((answer.status, answer.body))
}

fn demo_review() -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/allow/demo-create.json"),
    )
    .unwrap()
}

#[tokio::test]
async fn tls_13_and_12_handshake_and_answer() {
    let dir = tempfile::tempdir().unwrap();
    let cert = generate();
    install(dir.path(), &cert);
    let server = Server::start(dir.path()).await;
    for (versions, expected) in [
        (&[&version::TLS13][..], rustls::ProtocolVersion::TLSv1_3),
        (&[&version::TLS12][..], rustls::ProtocolVersion::TLSv1_2),
    ] {
        let stream = connect(server.addr, client_config(&[&cert.der], versions))
            .await
            .unwrap();
        assert_eq!(stream.get_ref().1.protocol_version(), Some(expected));
        let (status, body) = request(
            stream,
            "POST",
            Endpoint::ValidateSkyhook.path(),
            demo_review(),
        )
        .await
        .unwrap();
        assert_eq!(status, 200);
        let review: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(review["response"]["allowed"], true, "{review}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn garbage_gets_http_200_and_a_denial_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cert = generate();
    install(dir.path(), &cert);
    let server = Server::start(dir.path()).await;
    let config = client_config(&[&cert.der], &[&version::TLS13]);
    let bodies: [(&str, Vec<u8>); 3] = [
        ("POST", b"\x00\xffnot json".to_vec()),
        ("POST", b"[1,2,3]".to_vec()),
        ("GET", Vec::new()),
    ];
    for endpoint in Endpoint::ALL {
        for (method, body) in &bodies {
            let stream = connect(server.addr, Arc::clone(&config)).await.unwrap();
            let (status, response) = request(stream, method, endpoint.path(), body.clone())
                .await
                .unwrap();
            assert_eq!(status, 200);
            let review: Value = serde_json::from_slice(&response).unwrap();
            assert_eq!(review["kind"], "AdmissionReview");
            assert_eq!(review["response"]["allowed"], false);
            assert!(
                !review["response"]["status"]["message"]
                    .as_str()
                    .unwrap()
                    .is_empty()
            );
        }
    }
    let oversized = vec![b' '; webhook::server::MAX_BODY_BYTES + 1];
    let stream = connect(server.addr, Arc::clone(&config)).await.unwrap();
    let (status, response) = request(stream, "POST", Endpoint::ValidateSkyhook.path(), oversized)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let review: Value = serde_json::from_slice(&response).unwrap();
    assert_eq!(review["response"]["allowed"], false);
    assert!(
        review["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("at most")
    );
    let metrics = server.metrics.encode().unwrap();
    assert!(
        metrics.contains(r#"skyhook_webhook_admissions_total{kind="Skyhook",operation="unknown",result="malformed"} 7"#),
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_half_rotated_pair_keeps_the_previous_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let first = generate();
    install(dir.path(), &first);
    let certs = ReloadingCert::new(dir.path(), tls::provider());
    assert!(certs.reload().unwrap());
    assert!(!certs.reload().unwrap(), "unchanged files are not reloaded");
    let second = generate();
    replace(dir.path(), tls::CERT_FILE, &second.cert_pem);
    let err = certs.reload().unwrap_err();
    assert!(matches!(err, tls::Error::Mismatch { .. }), "{err:?}");
    assert!(certs.has_cert());
    replace(dir.path(), tls::KEY_FILE, &second.key_pem);
    assert!(certs.reload().unwrap());
    replace(dir.path(), tls::KEY_FILE, "not a key");
    assert!(matches!(
        certs.reload().unwrap_err(),
        tls::Error::Key { .. }
    ));
}

#[tokio::test]
async fn rotation_takes_effect_on_the_next_connection_without_failed_requests() {
    let dir = tempfile::tempdir().unwrap();
    let first = generate();
    let second = generate();
    install(dir.path(), &first);
    let server = Server::start(dir.path()).await;
    let mut generations = server.certs.subscribe();
    let initial = *generations.borrow_and_update();
    tokio::spawn(Arc::clone(&server.certs).watch(Duration::from_millis(20)));

    // A client that trusts both certificates keeps calling before, during and after the
    // rotation, counting its answers.
    let both = client_config(&[&first.der, &second.der], &[&version::TLS13]);
    let running = Arc::new(AtomicBool::new(true));
    let (answered_tx, mut answered) = tokio::sync::watch::channel(0_usize);
    let caller = {
        let (running, addr) = (Arc::clone(&running), server.addr);
        tokio::spawn(async move {
            let mut failures = Vec::new();
            while running.load(Ordering::Relaxed) {
                let outcome = async {
                    let stream = connect(addr, Arc::clone(&both)).await?;
                    request(
                        stream,
                        "POST",
                        Endpoint::ValidateSkyhook.path(),
                        demo_review(),
                    )
                    .await
                    .map_err(std::io::Error::other)
                }
                .await;
                match outcome {
                    Ok((200, _)) => answered_tx.send_modify(|n| *n += 1),
                    other => failures.push(format!("{other:?}")),
                }
            }
            failures
        })
    };

    let before = *answered.wait_for(|n| *n >= 3).await.unwrap();
    install(dir.path(), &second);
    generations
        .wait_for(|generation| *generation > initial)
        .await
        .unwrap();
    let stream = connect(
        server.addr,
        client_config(&[&second.der], &[&version::TLS13]),
    )
    .await
    .expect("a client trusting only the new certificate connects after the rotation");
    let served = stream.get_ref().1.peer_certificates().unwrap()[0].clone();
    assert_eq!(served, second.der);
    answered.wait_for(|n| *n >= before + 3).await.unwrap();
    running.store(false, Ordering::Relaxed);
    let failures = caller.await.unwrap();
    assert!(failures.is_empty(), "failed requests: {failures:?}");
    server.shutdown().await;
}

/// A review on the open connection of `sender`: the status and the `Connection` header.
async fn review_on(sender: &mut Sender) -> hyper::Result<(u16, Option<String>)> {
    let answer = send(
        sender,
        "POST",
        Endpoint::ValidateSkyhook.path(),
        demo_review(),
    )
    .await?;
    Ok((answer.status, answer.connection))
}

#[tokio::test]
async fn a_draining_server_answers_and_then_closes_each_connection_itself() {
    let dir = tempfile::tempdir().unwrap();
    let cert = generate();
    install(dir.path(), &cert);
    let server = Server::start(dir.path()).await;
    let config = client_config(&[&cert.der], &[&version::TLS13]);
    let stream = connect(server.addr, Arc::clone(&config)).await.unwrap();
    let (mut sender, connection) = open(stream).await.unwrap();
    // Serving: the connection is kept alive across answers.
    for _ in 0..2 {
        assert_eq!(review_on(&mut sender).await.unwrap(), (200, None));
    }
    assert!(!connection.is_finished());

    // Draining: the request on the kept-alive connection is answered, with `Connection: close`,
    // and then the server closes that connection, so no later request can race its close.
    server.draining.start();
    assert_eq!(
        review_on(&mut sender).await.unwrap(),
        (200, Some("close".to_owned()))
    );
    tokio::time::timeout(Duration::from_secs(10), connection)
        .await
        .expect("the server closes the connection after its answer")
        .unwrap()
        .unwrap();
    assert!(sender.ready().await.is_err(), "the connection is closed");
    // New connections are still accepted and answered while draining.
    let stream = connect(server.addr, config).await.unwrap();
    let (mut sender, _connection) = open(stream).await.unwrap();
    assert_eq!(
        review_on(&mut sender).await.unwrap(),
        (200, Some("close".to_owned()))
    );
    server.shutdown().await;
}

#[tokio::test]
async fn admin_port_reports_health_readiness_and_metrics() {
    let ready = Arc::new(AtomicBool::new(false));
    let metrics = Arc::new(Metrics::default());
    let router = admin_router(Admin {
        metrics: Arc::clone(&metrics),
        ready: {
            let ready = Arc::clone(&ready);
            Arc::new(move || ready.load(Ordering::Relaxed))
        },
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let get = |path: &'static str| async move {
        let stream = TcpStream::connect(addr).await.unwrap();
        request(stream, "GET", path, Vec::new()).await.unwrap()
    };
    assert_eq!(get("/healthz").await.0, 200);
    assert_eq!(get("/readyz").await.0, 503);
    ready.store(true, Ordering::Relaxed);
    assert_eq!(get("/readyz").await.0, 200);
    metrics.observe(
        "DeploymentPolicy",
        "DELETE",
        webhook::review::Verdict::Denied,
        0.001,
    );
    let (status, body) = get("/metrics").await;
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains(
        r#"skyhook_webhook_admissions_total{kind="DeploymentPolicy",operation="DELETE",result="denied"} 1"#
    ));
}

#[tokio::test]
async fn an_issued_certificate_is_trusted_through_its_ca_for_both_service_names_and_extra_names() {
    use rustls::pki_types::pem::PemObject as _;
    let service = "skyhook-webhook.skyhook.svc";
    let fixed: jiff::Timestamp = "2026-06-01T10:30:00Z".parse().unwrap();
    let expires = webhook::issue::issue(service, &[], fixed).unwrap().expires;
    assert_eq!(expires, "2027-06-01T00:00:00Z".parse().unwrap());

    // Handshakes check validity against the real clock.
    let extra = ["127.0.0.1".to_owned(), "webhook.local".to_owned()];
    let issued = webhook::issue::issue(service, &extra, jiff::Timestamp::now()).unwrap();
    assert!(!format!("{issued:?}").contains("PRIVATE"));
    let dir = tempfile::tempdir().unwrap();
    replace(dir.path(), tls::CERT_FILE, &issued.cert);
    replace(dir.path(), tls::KEY_FILE, &issued.key);
    let server = Server::start(dir.path()).await;
    let ca = CertificateDer::from_pem_slice(issued.ca.as_bytes()).unwrap();
    let trusting_ca = client_config(&[&ca], &[&version::TLS13]);
    let names = [service.to_owned(), format!("{service}.cluster.local")];
    for name in names.iter().chain(&extra) {
        let stream = connect_as(server.addr, Arc::clone(&trusting_ca), name)
            .await
            .unwrap();
        let (status, _) = request(
            stream,
            "POST",
            Endpoint::ValidateSkyhook.path(),
            demo_review(),
        )
        .await
        .unwrap();
        assert_eq!(status, 200);
    }
    for other in ["other.skyhook.svc", "127.0.0.2"] {
        assert!(
            connect_as(server.addr, Arc::clone(&trusting_ca), other)
                .await
                .is_err(),
            "{other}"
        );
    }
    server.shutdown().await;
}
