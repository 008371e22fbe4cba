//! Starting a process that holds a namespace: it prints `ready` once the namespace exists and
//! holds it until its stdin closes.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

/// A holder that reported ready.
#[derive(Debug)]
pub(crate) struct ReadyHolder {
    pub child: Child,
    /// Kept open: the holder exits when it sees EOF.
    pub stdin: ChildStdin,
    pub pid: u32,
}

/// Runs `binary args` and waits (30 s at most) for its `ready` line. `stderr` is where the
/// holder's errors go; when piped, they are part of the reason a start failed. The error is
/// the reason, for the caller to name the holder.
pub(crate) async fn spawn_holder(
    binary: &Path,
    args: &[&str],
    stderr: Stdio,
) -> Result<ReadyHolder, String> {
    let mut child = Command::new(binary)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    let read = tokio::time::timeout(
        Duration::from_secs(30),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await;
    if !matches!(read, Ok(Ok(_))) || line.trim() != "ready" {
        let mut errors = String::new();
        if let Some(mut err) = child.stderr.take() {
            let _ =
                tokio::time::timeout(Duration::from_secs(2), err.read_to_string(&mut errors)).await;
        }
        return Err(format!(
            "it did not report ready (stdout {:?}, stderr {:?})",
            line.trim(),
            errors.trim()
        ));
    }
    let pid = child.id().ok_or("it exited right after starting")?;
    Ok(ReadyHolder { child, stdin, pid })
}
