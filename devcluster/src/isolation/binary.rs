//! Where the `devcluster` binary and the host binaries of images are on the machine.

use std::path::{Path, PathBuf};

use super::error::IsolationError;
use crate::PathIoError;
use crate::images::host_binary_env_var;

/// The `devcluster` binary that provides these entry points: `DEVCLUSTER_BIN`, this executable if
/// it is `devcluster`, or `devcluster` in the cargo target directory of this (test) executable.
pub fn devcluster_binary() -> Result<PathBuf, IsolationError> {
    if let Some(path) = std::env::var_os("DEVCLUSTER_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(PathIoError::of(
        "locate the running executable",
        PathBuf::from("/proc/self/exe"),
    ))?;
    if exe.file_name().is_some_and(|n| n == "devcluster") {
        return Ok(exe);
    }
    // Tests run from target/<profile>/deps/; binaries live in target/<profile>/.
    let candidates = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("devcluster"))
        .collect::<Vec<_>>();
    match candidates.iter().find(|c| c.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(IsolationError::BinaryNotFound {
            searched: candidates,
        }),
    }
}

/// Where the host binary `name` of an image is on the machine: its environment variable
/// ([`host_binary_env_var`]), or next to the `devcluster` binary.
pub fn host_binary(devcluster: &Path, name: &str) -> PathBuf {
    match std::env::var_os(host_binary_env_var(name)) {
        Some(path) => PathBuf::from(path),
        None => devcluster.with_file_name(name),
    }
}
