//! Running one command through the chroot helper, streaming its output with timestamps and
//! `[out]`/`[err]` labels to the agent's own stdout/stderr and to the step's log files.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use jiff::Zoned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Command;

use super::chroot::{CHROOT_EXEC_ARG, ChrootSpec};
use super::fs::reap_logs;
use crate::host::{CommandSpec, HostError};
use crate::layout::LogTarget;
use crate::logs::LineStamper;
use crate::timefmt;

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> HostError {
    let path = path.to_path_buf();
    move |source| HostError::Io {
        action,
        path,
        source,
    }
}

/// `<dir>/<stem>-<UTC stamp>.log`, waiting for the next second if this second's name is taken
/// (a log is never overwritten).
async fn next_log_path(target: &LogTarget) -> PathBuf {
    loop {
        let now = jiff::Timestamp::now();
        let path = target.dir.join(format!(
            "{}-{}.log",
            target.stem,
            timefmt::log_file_stamp(now)
        ));
        if tokio::fs::symlink_metadata(&path).await.is_err() {
            return path;
        }
        let into_second = u64::try_from(now.subsec_nanosecond()).unwrap_or(0);
        tokio::time::sleep(std::time::Duration::from_nanos(
            1_000_000_000u64.saturating_sub(into_second),
        ))
        .await;
    }
}

/// Copies `source` to both sinks as stamped lines, reading at most `chunk` bytes at a time.
async fn pump(
    mut source: impl AsyncRead + Unpin,
    label: &'static str,
    mut console: impl AsyncWrite + Unpin,
    mut log: Option<tokio::fs::File>,
    chunk: usize,
) -> std::io::Result<()> {
    let mut stamper = LineStamper::new(label);
    let mut buffer = vec![0u8; chunk];
    loop {
        let read = source.read(&mut buffer).await?;
        let text = if read == 0 {
            stamper.finish()
        } else {
            stamper.push(&buffer[..read], &timefmt::local_naive(&Zoned::now()))
        };
        if !text.is_empty() {
            console.write_all(text.as_bytes()).await?;
            console.flush().await?;
            if let Some(log) = log.as_mut() {
                log.write_all(text.as_bytes()).await?;
            }
        }
        if read == 0 {
            if let Some(log) = log.as_mut() {
                log.flush().await?;
            }
            return Ok(());
        }
    }
}

/// Runs `spec` to completion and returns its exit code (`-N` when killed by signal N).
pub async fn run(spec: &CommandSpec, helper: &Path, chunk: usize) -> Result<i32, HostError> {
    let mut logs = None;
    if let Some(target) = &spec.log {
        tokio::fs::create_dir_all(&target.dir)
            .await
            .map_err(io_error("create log directory", &target.dir))?;
        let out_path = next_log_path(target).await;
        let mut err_path = out_path.clone().into_os_string();
        err_path.push(".err");
        let err_path = PathBuf::from(err_path);
        let out = tokio::fs::File::create(&out_path)
            .await
            .map_err(io_error("create log file", &out_path))?;
        let err = tokio::fs::File::create(&err_path)
            .await
            .map_err(io_error("create log file", &err_path))?;
        logs = Some((out, err));
    }
    let (mut out_log, err_log) = match logs {
        Some((out, err)) => (Some(out), Some(err)),
        None => (None, None),
    };
    let program = spec.argv.first().cloned().unwrap_or_default();
    let spawn_error = |source| HostError::Spawn {
        program: program.clone(),
        root: spec.root.clone(),
        source,
    };
    if spec.echo_command {
        let line = format!("{}\n", spec.argv.join(" "));
        let mut stdout = tokio::io::stdout();
        stdout
            .write_all(line.as_bytes())
            .await
            .map_err(spawn_error)?;
        if let Some(log) = out_log.as_mut() {
            log.write_all(line.as_bytes()).await.map_err(spawn_error)?;
        }
    }
    let description = ChrootSpec {
        root: spec.root.clone(),
        cwd: spec.cwd.clone(),
        argv: spec.argv.clone(),
        env: spec.env.clone(),
        make_executable: spec.make_executable,
    };
    let description = serde_json::to_string(&description)
        .map_err(|err| spawn_error(std::io::Error::other(err)))?;
    let mut child = Command::new(helper)
        .arg(CHROOT_EXEC_ARG)
        .arg(description)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(spawn_error(std::io::Error::other(
            "the child's output pipes were not created",
        )));
    };
    let (out, err, status) = tokio::join!(
        pump(stdout, "[out]", tokio::io::stdout(), out_log, chunk),
        pump(stderr, "[err]", tokio::io::stderr(), err_log, chunk),
        child.wait(),
    );
    out.and(err).map_err(spawn_error)?;
    let status = status.map_err(spawn_error)?;
    if let Some(target) = &spec.log {
        reap_logs(&target.dir, &target.stem).map_err(io_error("reap old logs in", &target.dir))?;
    }
    Ok(exit_code(status))
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|signal| -signal))
        .unwrap_or(-1)
}
