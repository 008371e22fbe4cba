//! Files on a full node's host root: the tests' package scripts log there what ran, and wait
//! there for the test to let them end.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use devcluster::DevCluster;

/// The host roots of `nodes` (full nodes: a light node has none, which is an error).
pub fn roots(cluster: &DevCluster, nodes: &[&str]) -> anyhow::Result<Vec<PathBuf>> {
    (nodes.iter())
        .map(|node| {
            (cluster.node(node))
                .and_then(|handle| handle.root())
                .with_context(|| format!("{node} has no host root (not a full node?)"))
        })
        .collect()
}

/// The lines of `file` (relative to the host root `root`); none when it does not exist.
pub fn lines(root: &Path, file: &str) -> anyhow::Result<Vec<String>> {
    let path = root.join(file);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text.lines().map(str::to_owned).collect()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// Creates the empty `file` on the host root `root` (a flag a script waits for).
pub fn touch(root: &Path, file: &str) -> anyhow::Result<()> {
    let path = root.join(file);
    std::fs::write(&path, "").with_context(|| format!("writing {}", path.display()))
}

/// Waits until the lines of `file` satisfy `condition`, for up to [`crate::WAIT`]. A host file
/// has nothing to watch, so it is read every 200 ms.
pub async fn wait_for_lines(
    root: &Path,
    file: &str,
    what: &str,
    condition: impl Fn(&[String]) -> bool,
) -> anyhow::Result<Vec<String>> {
    let deadline = tokio::time::Instant::now() + crate::WAIT;
    loop {
        let lines = lines(root, file)?;
        if condition(&lines) {
            return Ok(lines);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "timed out after {:?} waiting for {what}; {file} holds {lines:?}",
                crate::WAIT
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
