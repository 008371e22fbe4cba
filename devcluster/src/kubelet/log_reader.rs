//! `devcluster __kubelet-logs NODE_DIR NAMESPACE POD CONTAINER QUERY`: one `containerLogs`
//! request of the kubelet API (served by the control-plane binary's `kubelet-api`, which runs
//! this). It prints a status line, `ok` or `error <HTTP status> <message>`, then the log; with
//! `follow`, it keeps printing what the container writes until that run of the container ends.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use jiff::Timestamp;

use super::container_log::{
    LogLookupError, LogOptions, LogRenderer, attempt_of_log_file, choose_attempt, exited_marker,
    pod_log_dir,
};

/// How often a followed log is checked for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// Runs the entry point on its arguments (after the entry point's name).
pub fn run(args: &[OsString]) -> ExitCode {
    let [node_dir, namespace, pod, container, query] = args else {
        eprintln!("usage: devcluster __kubelet-logs NODE_DIR NAMESPACE POD CONTAINER QUERY");
        return ExitCode::from(2);
    };
    let text = |arg: &OsString| arg.to_string_lossy().into_owned();
    let request = ContainerRequest {
        node_dir: PathBuf::from(node_dir),
        namespace: text(namespace),
        pod: text(pod),
        container: text(container),
    };
    let mut stdout = std::io::stdout().lock();
    let outcome = LogOptions::from_query(&text(query))
        .map_err(LogLookupError::from)
        .and_then(|options| request.run(options.previous).map(|run| (run.log, options)));
    let (file, options) = match outcome {
        Ok(found) => found,
        Err(error) => {
            let _ = writeln!(stdout, "error {} {error}", error.http_status());
            return ExitCode::SUCCESS;
        }
    };
    if writeln!(stdout, "ok").is_err() {
        return ExitCode::FAILURE;
    }
    match stream_log(&file, &options, &mut stdout) {
        Ok(()) => ExitCode::SUCCESS,
        // The client went away (a broken pipe) or the file vanished with its pod.
        Err(error) => {
            eprintln!("devcluster: reading {}: {error}", file.display());
            ExitCode::FAILURE
        }
    }
}

/// A container of a pod on a node, as the kubelet API names it.
#[derive(Debug, Clone)]
pub struct ContainerRequest {
    /// The node's state directory (`<cluster state>/nodes/<node>`).
    pub node_dir: PathBuf,
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

/// One run of a container, found through its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRun {
    pub pod_uid: String,
    pub attempt: u32,
    pub log: PathBuf,
}

impl ContainerRun {
    /// Whether this run has ended.
    pub fn ended(&self) -> bool {
        exited_marker(&self.log).exists()
    }
}

impl ContainerRequest {
    /// The run the request asks for: the current one, or with `previous` the one before.
    pub fn run(&self, previous: bool) -> Result<ContainerRun, LogLookupError> {
        let logs = self.node_dir.join("logs");
        let entries = modified_entries(&logs);
        let pod_dir = pod_log_dir(&entries, &self.namespace, &self.pod).ok_or_else(|| {
            LogLookupError::NoPod {
                pod: self.pod.clone(),
            }
        })?;
        let container_dir = logs.join(pod_dir).join(&self.container);
        let attempts: Vec<u32> = modified_entries(&container_dir)
            .iter()
            .filter_map(|(name, _)| attempt_of_log_file(name))
            .collect();
        let attempt = choose_attempt(&attempts, previous, &self.pod, &self.container)?;
        let prefix = format!("{}_{}_", self.namespace, self.pod);
        Ok(ContainerRun {
            pod_uid: pod_dir.strip_prefix(&prefix).unwrap_or(pod_dir).to_owned(),
            attempt,
            log: container_dir.join(format!("{attempt}.log")),
        })
    }
}

/// The names in `dir` with their modification times; an unreadable directory has none.
fn modified_entries(dir: &Path) -> Vec<(String, std::time::SystemTime)> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    read.filter_map(Result::ok)
        .filter_map(|entry| {
            let modified = entry.metadata().and_then(|m| m.modified()).ok()?;
            Some((entry.file_name().into_string().ok()?, modified))
        })
        .collect()
}

/// Writes the log as the options ask; with `follow`, until the run has ended and its last lines
/// are out.
fn stream_log(file: &Path, options: &LogOptions, out: &mut impl Write) -> std::io::Result<()> {
    let mut renderer = LogRenderer::new(options, Timestamp::now());
    let mut log = std::fs::File::open(file)?;
    let marker = exited_marker(file);
    let mut unread = Vec::new();
    loop {
        // Checked before reading, so the lines written before the end are read after it.
        let ended = !options.follow || marker.exists();
        log.read_to_end(&mut unread)?;
        let rendered = renderer.render(&unread);
        out.write_all(&rendered.output)?;
        out.flush()?;
        unread.drain(..rendered.consumed);
        if ended || rendered.exhausted {
            return Ok(());
        }
        std::thread::sleep(FOLLOW_POLL);
    }
}
