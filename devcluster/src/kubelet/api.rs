//! The kubelet API of full nodes: `containerLogs` and `exec`, so `kubectl logs` and
//! `kubectl exec` work. One `kubelet-api` process of the control-plane binary serves every node,
//! each on its InternalIP and the cluster's kubelet port, with a serving certificate of the
//! cluster CA; it requires the API server's kubelet client certificate (any certificate of the
//! cluster CA). It answers each request by running a hidden entry point of the `devcluster`
//! binary (`__kubelet-logs`, `__pod-exec`), which reads the node's files and enters its pods.
//!
//! Why Go for the server: exec speaks the SPDY (and WebSocket) channel protocols of Kubernetes'
//! streaming library, which the control-plane binary already carries; a second implementation
//! of those protocols in Rust would be the larger and less faithful part of the work.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::PathIoError;
use crate::controlplane::pki::{self, PkiError};
use crate::controlplane::process::{ProcessError, Supervised, log_tail};
use crate::state::StateDir;

/// How long the server may take to listen on every node's address.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Fresh ports to try when another process took the chosen one in between.
const PORT_ATTEMPTS: usize = 3;
const PROCESS_NAME: &str = "kubelet-api";

#[derive(Debug, thiserror::Error)]
pub enum KubeletApiError {
    #[error("issuing the kubelet serving certificate of node {node}: {source}")]
    Certificate { node: String, source: PkiError },
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error("the kubelet API server did not start; the end of its log ({log}):\n{tail}")]
    NotServing { log: PathBuf, tail: String },
}

/// A node the server serves.
#[derive(Debug, Clone)]
pub struct ApiNode {
    pub name: String,
    pub address: Ipv4Addr,
    /// The node's state directory.
    pub dir: PathBuf,
}

/// The running server; dropping it kills the process.
#[derive(Debug)]
pub struct KubeletApi {
    process: Supervised,
    port: u16,
}

/// The server's configuration file, read by `devcluster/controlplane/kubelet.go`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ServerConfig<'a> {
    client_ca_file: &'a Path,
    devcluster: &'a Path,
    nodes: Vec<ServedNode<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ServedNode<'a> {
    name: &'a str,
    address: String,
    port: u16,
    cert_file: PathBuf,
    key_file: PathBuf,
    dir: &'a Path,
}

impl KubeletApi {
    /// Issues the nodes' certificates and starts the server (from the control-plane `binary`,
    /// spawned on the calling thread, which must live as long as the cluster); returns once it
    /// listens, on a port free on this machine.
    pub async fn start(
        binary: &Path,
        devcluster: &Path,
        state: &StateDir,
        nodes: &[ApiNode],
    ) -> Result<Self, KubeletApiError> {
        let dir = state.root().join(PROCESS_NAME);
        std::fs::create_dir_all(&dir).map_err(PathIoError::of("create", &dir))?;
        let ca_key_path = pki::PkiFiles::in_dir(&state.pki()).ca_key;
        let ca_key =
            std::fs::read_to_string(&ca_key_path).map_err(PathIoError::of("read", &ca_key_path))?;
        let certificates = issue_certificates(&ca_key, &dir, nodes)?;
        let log = state.log_file(PROCESS_NAME);
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port(nodes)?;
            let config = ServerConfig {
                client_ca_file: &pki::PkiFiles::in_dir(&state.pki()).ca_cert,
                devcluster,
                nodes: served_nodes(nodes, &certificates, port),
            };
            let config_path = dir.join("config.json");
            let json = serde_json::to_vec_pretty(&config).map_err(|e| PathIoError {
                action: "encode",
                path: config_path.clone(),
                source: std::io::Error::other(e),
            })?;
            std::fs::write(&config_path, json).map_err(PathIoError::of("write", &config_path))?;
            let args = vec![
                PROCESS_NAME.to_owned(),
                "--config".to_owned(),
                config_path.display().to_string(),
            ];
            let mut process = Supervised::spawn(PROCESS_NAME, binary, &args, &log)?;
            match wait_listening(&mut process, nodes, port).await {
                Ok(()) => return Ok(Self { process, port }),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or(KubeletApiError::NotServing {
            log: log.clone(),
            tail: log_tail(&log, 20),
        }))
    }

    /// The port every node's kubelet API listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    pub async fn stop(mut self) {
        self.process.stop(Duration::from_secs(5)).await;
    }
}

/// Certificate and key files of each node, in `nodes` order.
fn issue_certificates(
    ca_key: &str,
    dir: &Path,
    nodes: &[ApiNode],
) -> Result<Vec<(PathBuf, PathBuf)>, KubeletApiError> {
    nodes
        .iter()
        .map(|node| {
            let issued =
                pki::kubelet_serving_certificate(ca_key, &node.name, IpAddr::V4(node.address))
                    .map_err(|source| KubeletApiError::Certificate {
                        node: node.name.clone(),
                        source,
                    })?;
            let cert = dir.join(format!("{}.crt", node.name));
            let key = dir.join(format!("{}.key", node.name));
            pki::write_file(&cert, &issued.cert_pem, false)
                .map_err(PathIoError::of("write", &cert))?;
            pki::write_file(&key, &issued.key_pem, true).map_err(PathIoError::of("write", &key))?;
            Ok((cert, key))
        })
        .collect()
}

fn served_nodes<'a>(
    nodes: &'a [ApiNode],
    certificates: &[(PathBuf, PathBuf)],
    port: u16,
) -> Vec<ServedNode<'a>> {
    nodes
        .iter()
        .zip(certificates)
        .map(|(node, (cert, key))| ServedNode {
            name: &node.name,
            address: node.address.to_string(),
            port,
            cert_file: cert.clone(),
            key_file: key.clone(),
            dir: &node.dir,
        })
        .collect()
}

/// A port free on the first node's address. Clusters side by side give their nodes the same
/// addresses, so the port is what keeps their kubelet APIs apart.
fn free_port(nodes: &[ApiNode]) -> Result<u16, KubeletApiError> {
    let address = nodes
        .first()
        .map_or(Ipv4Addr::LOCALHOST, |node| node.address);
    let bound = TcpListener::bind((address, 0))
        .and_then(|listener| listener.local_addr())
        .map_err(PathIoError::of(
            "find a free port for the kubelet API on",
            address.to_string(),
        ))?;
    Ok(bound.port())
}

/// Waits until every node's address accepts connections, or the process exits.
async fn wait_listening(
    process: &mut Supervised,
    nodes: &[ApiNode],
    port: u16,
) -> Result<(), KubeletApiError> {
    let started = Instant::now();
    let not_serving = |process: &Supervised| KubeletApiError::NotServing {
        log: process.log().to_path_buf(),
        tail: log_tail(process.log(), 20),
    };
    let mut waiting: Vec<SocketAddr> = nodes
        .iter()
        .map(|node| SocketAddr::from((node.address, port)))
        .collect();
    while !waiting.is_empty() {
        if process.exited().is_some() || started.elapsed() > START_TIMEOUT {
            let error = not_serving(process);
            process.stop(Duration::from_secs(1)).await;
            return Err(error);
        }
        waiting.retain(|address| {
            TcpStream::connect_timeout(address, Duration::from_millis(200)).is_err()
        });
        if !waiting.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}
