//! What goes wrong in the hidden entry points and in finding the binaries that provide them.

use std::path::PathBuf;

use crate::PathIoError;

/// Errors of the hidden entry points; printed to the container log or the caller's stderr.
#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    #[error("no spec file given")]
    MissingSpec,
    #[error("failed to parse spec {path}")]
    Spec {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("failed to {action} {path}")]
    Sys {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error(
        "path {path} cannot be used in overlay options (it contains ',' or ':'); use another state directory"
    )]
    OverlayPath { path: PathBuf },
    #[error("failed to drop CAP_SYS_BOOT from the bounding set")]
    Capabilities(#[source] caps::errors::CapsError),
    #[error("the container has no command (the pod and the image give none)")]
    NoCommand,
    #[error("failed to exec {program:?}")]
    Exec {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the devcluster binary was not found (looked for {searched:?}); build it with `cargo build -p devcluster` or set DEVCLUSTER_BIN"
    )]
    BinaryNotFound { searched: Vec<PathBuf> },
}

/// The error and its causes on one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
