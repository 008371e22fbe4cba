//! Finding the control-plane binary that `scripts/setup.d/10-controlplane.sh` builds.
//!
//! The script caches the binary under a hash of the Go module's sources; computing the same hash
//! here means a stale binary (built from older sources) is never picked up by mistake.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Overrides the lookup, e.g. to try a binary built by hand.
pub const BINARY_ENV: &str = "DEVCLUSTER_CONTROLPLANE_BIN";
const BINARY_NAME: &str = "devcluster-controlplane";

/// The Go module's directory in this source tree.
pub fn go_module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("controlplane")
}

/// `$SKYHOOK_CACHE`, else `$XDG_CACHE_HOME/skyhook-rs`, else `~/.cache/skyhook-rs`, as in
/// `scripts/lib/common.sh`.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    var("SKYHOOK_CACHE").map(PathBuf::from).or_else(|| {
        var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".cache")))
            .map(|cache| cache.join("skyhook-rs"))
    })
}

#[derive(Debug, thiserror::Error)]
pub enum BinaryError {
    #[error("{BINARY_ENV} points at {path}, which is not a file: {source}")]
    EnvPathMissing {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading the control plane's Go sources in {dir}: {source}")]
    Sources {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("no cache directory: set SKYHOOK_CACHE or HOME")]
    NoCacheDir,
    #[error(
        "the control plane binary is not built ({path} is missing); run scripts/setup.sh \
         (or scripts/setup.d/10-controlplane.sh) to build it"
    )]
    NotBuilt { path: PathBuf },
}

/// The binary to run: `$DEVCLUSTER_CONTROLPLANE_BIN`, else the cached build of the current sources.
pub fn locate() -> Result<PathBuf, BinaryError> {
    if let Some(path) = std::env::var_os(BINARY_ENV).filter(|value| !value.is_empty()) {
        let path = PathBuf::from(path);
        return match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => Ok(path),
            Ok(_) => Err(BinaryError::EnvPathMissing {
                path,
                source: std::io::Error::other("not a regular file"),
            }),
            Err(source) => Err(BinaryError::EnvPathMissing { path, source }),
        };
    }
    let module = go_module_dir();
    let hash = source_hash(&module).map_err(|source| BinaryError::Sources {
        dir: module.clone(),
        source,
    })?;
    let path = cache_dir()
        .ok_or(BinaryError::NoCacheDir)?
        .join("controlplane")
        .join(hash)
        .join(BINARY_NAME);
    if path.is_file() {
        Ok(path)
    } else {
        Err(BinaryError::NotBuilt { path })
    }
}

/// The cache key of the Go sources in `dir`: SHA-256 over, for `go.mod`, `go.sum` and then every
/// `*.go` file in byte order of its name, the file name, a NUL byte and the content; the first 16
/// hex digits. Must match `scripts/setup.d/10-controlplane.sh`.
pub fn source_hash(dir: &Path) -> std::io::Result<String> {
    let mut go_files: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.ends_with(".go"))
        .collect();
    go_files.sort();
    let mut hasher = Sha256::new();
    for name in ["go.mod", "go.sum"]
        .into_iter()
        .map(String::from)
        .chain(go_files)
    {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(std::fs::read(dir.join(&name))?);
    }
    let digest = hasher.finalize();
    Ok(digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The Rust hash and the setup script's must agree, or the built binary is never found.
    #[test]
    fn hash_matches_the_setup_script() -> Result<(), Box<dyn std::error::Error>> {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/setup.d/10-controlplane.sh");
        let output = Command::new("bash")
            .arg(&script)
            .arg("--print-hash")
            .output()?;
        assert!(output.status.success(), "{output:?}");
        let from_script = String::from_utf8(output.stdout)?;
        assert_eq!(source_hash(&go_module_dir())?, from_script.trim());
        Ok(())
    }

    #[test]
    fn hash_changes_with_any_source_file() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        for (name, content) in [
            ("go.mod", "module x"),
            ("go.sum", ""),
            ("a.go", "package a"),
        ] {
            std::fs::write(dir.path().join(name), content)?;
        }
        let before = source_hash(dir.path())?;
        std::fs::write(dir.path().join("b.go"), "package a")?;
        let with_new_file = source_hash(dir.path())?;
        std::fs::write(dir.path().join("a.go"), "package b")?;
        let with_edit = source_hash(dir.path())?;
        assert_ne!(before, with_new_file);
        assert_ne!(with_new_file, with_edit);
        assert_eq!(before.len(), 16);
        Ok(())
    }
}
