//! TLS for the admission port: rustls with TLS 1.2 and 1.3 only, and a certificate resolver that
//! serves whatever `tls.crt`/`tls.key` currently hold. The files are re-read when they change, so
//! a rotated Secret takes effect on the next handshake without a restart.
//!
//! TLS 1.1 and older cannot be negotiated: rustls implements no protocol below 1.2, and the
//! configuration names exactly 1.2 and 1.3.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, version};
use skyhook_api::errors::error_chain;
use tokio::sync::watch;

/// File name of the serving certificate chain (PEM), as in a `kubernetes.io/tls` Secret.
pub const CERT_FILE: &str = "tls.crt";
/// File name of the serving private key (PEM).
pub const KEY_FILE: &str = "tls.key";

/// Errors while loading the serving certificate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("failed to read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate file holds no usable PEM certificate.
    #[error("failed to parse a PEM certificate from {}; it must hold the serving certificate first, then its chain", path.display())]
    Certificate {
        /// The file.
        path: PathBuf,
        /// Why, when the parser said.
        #[source]
        source: Option<rustls::pki_types::pem::Error>,
    },
    /// The key file holds no usable PEM private key.
    #[error("failed to parse a PEM private key (PKCS#8, PKCS#1 or SEC1) from {}", path.display())]
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The key is unsupported or does not belong to the certificate (for example, one file
    /// was replaced and the other not yet).
    #[error("failed to pair the key in {} with the certificate in {}", key.display(), cert.display())]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// The TLS configuration was rejected.
    #[error("failed to build the TLS configuration")]
    Config(#[source] rustls::Error),
}

/// The crypto provider used everywhere in this binary.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The files last loaded and the key built from them.
#[derive(Debug)]
struct Loaded {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    key: Arc<CertifiedKey>,
}

/// Serves the certificate currently in a directory, reloading it when the files change.
#[derive(Debug)]
pub struct ReloadingCert {
    dir: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Option<Loaded>>,
    generation: watch::Sender<u64>,
}

impl ReloadingCert {
    /// A resolver for `dir`/`tls.crt` and `dir`/`tls.key`, holding nothing until the first
    /// successful [`reload`](Self::reload).
    pub fn new(dir: impl Into<PathBuf>, provider: Arc<CryptoProvider>) -> Self {
        ReloadingCert {
            dir: dir.into(),
            provider,
            current: RwLock::new(None),
            generation: watch::Sender::new(0),
        }
    }

    /// The directory watched.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether a certificate is being served.
    pub fn has_cert(&self) -> bool {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Counts the certificates installed so far; changes on every successful rotation.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Reads the files and installs them if they differ from the ones served. Returns whether
    /// a new certificate was installed. On error the previous certificate stays in service.
    pub fn reload(&self) -> Result<bool, Error> {
        let cert_path = self.dir.join(CERT_FILE);
        let key_path = self.dir.join(KEY_FILE);
        let cert_pem = read(&cert_path)?;
        let key_pem = read(&key_path)?;
        let unchanged = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|l| l.cert_pem == cert_pem && l.key_pem == key_pem);
        if unchanged {
            return Ok(false);
        }
        let key = Arc::new(self.certified_key(&cert_path, &cert_pem, &key_path, &key_pem)?);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Some(Loaded {
            cert_pem,
            key_pem,
            key,
        });
        self.generation.send_modify(|g| *g += 1);
        Ok(true)
    }

    fn certified_key(
        &self,
        cert_path: &Path,
        cert_pem: &[u8],
        key_path: &Path,
        key_pem: &[u8],
    ) -> Result<CertifiedKey, Error> {
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| Error::Certificate {
                path: cert_path.to_owned(),
                source: Some(source),
            })?;
        if chain.is_empty() {
            return Err(Error::Certificate {
                path: cert_path.to_owned(),
                source: None,
            });
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| Error::Key {
            path: key_path.to_owned(),
            source,
        })?;
        let certified = CertifiedKey::from_der(chain, key, &self.provider).map_err(|source| {
            Error::Mismatch {
                cert: cert_path.to_owned(),
                key: key_path.to_owned(),
                source,
            }
        })?;
        // `from_der` lets an unverifiable pairing through; a half-rotated pair must not be.
        certified.keys_match().map_err(|source| Error::Mismatch {
            cert: cert_path.to_owned(),
            key: key_path.to_owned(),
            source,
        })?;
        Ok(certified)
    }

    /// Re-reads the files every `interval`, forever. Failures are logged and retried; the
    /// previous certificate stays in service meanwhile.
    pub async fn watch(self: Arc<Self>, interval: Duration) {
        // The caller has just loaded the files; the first check is one interval away.
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_error: Option<String> = None;
        loop {
            ticks.tick().await;
            match self.reload() {
                Ok(true) => {
                    last_error = None;
                    tracing::info!(dir = %self.dir.display(), "serving certificate loaded");
                }
                Ok(false) => last_error = None,
                Err(err) => {
                    let rendered = error_chain(&err);
                    // Log a persisting problem once, not on every tick.
                    if last_error.as_deref() != Some(rendered.as_str()) {
                        tracing::warn!(error = %rendered, serving = self.has_cert(), "serving certificate not (re)loaded; keeping the previous one");
                        last_error = Some(rendered);
                    }
                }
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|l| Arc::clone(&l.key))
    }
}

/// The server configuration: TLS 1.3 and 1.2 only, HTTP/1.1, certificates from `resolver`.
pub fn server_config(
    resolver: Arc<ReloadingCert>,
    provider: Arc<CryptoProvider>,
) -> Result<ServerConfig, Error> {
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&version::TLS13, &version::TLS12])
        .map_err(Error::Config)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
