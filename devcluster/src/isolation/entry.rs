//! Dispatch of the hidden entry points, and how their failures are reported.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::args::{
    CONTAINER, DETACHED, HOLD_NETNS, HOLD_NS, KEEP_NS, KUBELET_LOGS, NODE_ROOT, POD_EXEC,
};
use super::error::{IsolationError, error_chain};
use super::spec::{ContainerSpec, START_ERROR_EXIT};
use super::{pod_exec, setup};
use crate::PathIoError;

/// Runs a hidden entry point if `std::env::args` asks for one; `main` returns its exit code.
pub fn run_if_requested() -> Option<ExitCode> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let command = args.get(1)?.to_str()?;
    match command {
        POD_EXEC => return Some(pod_exec::run(&args[2..])),
        KUBELET_LOGS => return Some(crate::kubelet::log_reader::run(&args[2..])),
        _ => {}
    }
    let spec_path = args
        .get(2)
        .map(PathBuf::from)
        .ok_or(IsolationError::MissingSpec);
    let result = match command {
        HOLD_NS => setup::hold_namespace(),
        HOLD_NETNS => setup::hold_network_namespace(),
        KEEP_NS if args.get(3).is_some_and(|a| a == DETACHED) => {
            setup::wait_for_stdin_eof();
            Ok(())
        }
        KEEP_NS => spec_path.and_then(|path| setup::start_detached_keeper(&path)),
        NODE_ROOT => spec_path
            .and_then(|path| read_spec(&path))
            .and_then(|s| setup::mount_node_root(&s)),
        CONTAINER => {
            let read = spec_path
                .and_then(|path| read_spec::<ContainerSpec>(&path).map(|spec| (path, spec)));
            let (spec_path, spec) = match read {
                Ok(read) => read,
                Err(e) => return Some(fail(&e, None)),
            };
            // Only returns on failure: success replaces this process.
            let error = setup::run_container(&spec, &spec_path);
            return Some(fail(&error, spec.error_file.as_deref()));
        }
        _ => return None,
    };
    Some(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e, None),
    })
}

fn read_spec<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, IsolationError> {
    let text = std::fs::read(path).map_err(PathIoError::of("read spec", path.to_owned()))?;
    serde_json::from_slice(&text).map_err(|source| IsolationError::Spec {
        path: path.to_owned(),
        source,
    })
}

fn fail(error: &IsolationError, error_file: Option<&Path>) -> ExitCode {
    let message = error_chain(error);
    let mut stderr = std::io::stderr();
    // The container's stderr is its log file; nothing else can report the failure.
    let _ = writeln!(stderr, "devcluster: {message}");
    if let Some(path) = error_file {
        let _ = std::fs::write(path, &message);
    }
    ExitCode::from(START_ERROR_EXIT)
}
