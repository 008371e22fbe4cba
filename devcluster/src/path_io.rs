//! The I/O error on a path that the node simulator and its isolation helpers both report.

use std::path::PathBuf;

/// An operation on a file or directory failed: `failed to <action> <path>`, caused by `source`.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {path}")]
pub struct PathIoError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl PathIoError {
    /// For `map_err`: the error of `action` on `path`.
    pub(crate) fn of(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self {
            action,
            path,
            source,
        }
    }
}
