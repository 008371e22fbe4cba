//! `devcluster __pod-exec NODE_DIR NAMESPACE POD CONTAINER ERROR_FILE -- COMMAND...`: the exec of
//! the kubelet API (`kubectl exec`). It enters the running container's mount and UTS namespaces
//! (through the process keeping them alive), its root and working directory, takes its
//! environment, and execs the command in place, so the command's exit status is this process's.
//! If the command cannot run, the reason goes to ERROR_FILE and the exit code is
//! [`super::spec::START_ERROR_EXIT`].

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nix::sched::CloneFlags;

use super::setup::mount_namespace_id;
use super::spec::{ContainerSpec, NamespaceRecord, RootSpec, START_ERROR_EXIT};
use crate::kubelet::log_reader::ContainerRequest;

/// Why a command could not be run in a container.
#[derive(Debug, thiserror::Error)]
enum ExecError {
    #[error(
        "usage: devcluster __pod-exec NODE_DIR NAMESPACE POD CONTAINER ERROR_FILE -- COMMAND..."
    )]
    Usage,
    #[error(transparent)]
    Lookup(#[from] crate::kubelet::container_log::LogLookupError),
    #[error("container {container:?} in pod {pod:?} is not running")]
    NotRunning { pod: String, container: String },
    #[error(
        "container {container:?} in pod {pod:?} runs no process: the simulated kubelet plays its \
         image itself, so there is nothing to exec into"
    )]
    Virtual { pod: String, container: String },
    #[error("reading {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("{action} {path}: {source}")]
    Sys {
        action: &'static str,
        path: PathBuf,
        source: nix::Error,
    },
    #[error("dropping CAP_SYS_BOOT: {0}")]
    Capabilities(caps::errors::CapsError),
    #[error("exec: {program:?}: executable file not found in $PATH")]
    NotFound { program: String },
    #[error("exec: {program:?}: {source}")]
    Exec {
        program: String,
        source: std::io::Error,
    },
}

/// Runs the entry point on its arguments (after its name). Returns only if the command did not
/// run.
pub fn run(args: &[OsString]) -> ExitCode {
    let Some((fixed, command)) = split_command(args) else {
        eprintln!("devcluster: {}", ExecError::Usage);
        return ExitCode::from(2);
    };
    let [node_dir, namespace, pod, container, error_file] = fixed else {
        eprintln!("devcluster: {}", ExecError::Usage);
        return ExitCode::from(2);
    };
    let text = |arg: &OsString| arg.to_string_lossy().into_owned();
    let request = ContainerRequest {
        node_dir: PathBuf::from(node_dir),
        namespace: text(namespace),
        pod: text(pod),
        container: text(container),
    };
    let command: Vec<String> = command.iter().map(text).collect();
    // Opened before entering the container's root, where its path does not lead; closed by the
    // exec. It tells the server that the failure was not the command's.
    let mut error_file = std::fs::OpenOptions::new().append(true).open(error_file);
    let message = exec_in_container(&request, &command).to_string();
    if let Ok(file) = error_file.as_mut() {
        let _ = file.write_all(message.as_bytes());
    }
    eprintln!("devcluster: {message}");
    ExitCode::from(START_ERROR_EXIT)
}

/// The arguments before `--` and the command after it.
fn split_command(args: &[OsString]) -> Option<(&[OsString], &[OsString])> {
    let separator = args.iter().position(|arg| arg == "--")?;
    let (fixed, rest) = args.split_at(separator);
    let command = &rest[1..];
    (!command.is_empty()).then_some((fixed, command))
}

fn exec_in_container(request: &ContainerRequest, command: &[String]) -> ExecError {
    match enter_container(request) {
        Ok(spec) => run_command(&spec, command),
        Err(error) => error,
    }
}

/// Enters the current run's namespaces and root; returns its spec (environment, directory).
fn enter_container(request: &ContainerRequest) -> Result<ContainerSpec, ExecError> {
    let run = request.run(false)?;
    let not_running = || ExecError::NotRunning {
        pod: request.pod.clone(),
        container: request.container.clone(),
    };
    if run.ended() {
        return Err(not_running());
    }
    let containers = request
        .node_dir
        .join("pods")
        .join(&run.pod_uid)
        .join("containers");
    let key = format!("{}-{}", request.container, run.attempt);
    let spec_path = containers.join(format!("{key}.json"));
    if !spec_path.exists() {
        return Err(ExecError::Virtual {
            pod: request.pod.clone(),
            container: request.container.clone(),
        });
    }
    let spec: ContainerSpec = read_json(&spec_path)?;
    let record: NamespaceRecord = read_json(&containers.join(format!("{key}.ns")))?;
    let keeper = record.keeper_pid.to_string();
    // The keeper's pid could have been reused once the container ended.
    if mount_namespace_id(&keeper).ok().as_deref() != Some(record.namespace.as_str()) {
        return Err(not_running());
    }
    // The keeper shares the container's network namespace too (the pod's, or the node's).
    for (kind, flag) in [
        ("net", CloneFlags::CLONE_NEWNET),
        ("mnt", CloneFlags::CLONE_NEWNS),
        ("uts", CloneFlags::CLONE_NEWUTS),
    ] {
        let path = PathBuf::from(format!("/proc/{keeper}/ns/{kind}"));
        let file = std::fs::File::open(&path).map_err(|e| ExecError::Read {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        nix::sched::setns(file, flag).map_err(|source| ExecError::Sys {
            action: "enter the namespace",
            path,
            source,
        })?;
    }
    let root = match &spec.root {
        RootSpec::Node { path } => path.clone(),
        RootSpec::Container { scratch, .. } => scratch.join("root"),
    };
    caps::drop(None, caps::CapSet::Bounding, caps::Capability::CAP_SYS_BOOT)
        .map_err(ExecError::Capabilities)?;
    nix::unistd::chroot(&root).map_err(|source| ExecError::Sys {
        action: "chroot into",
        path: root,
        source,
    })?;
    let cwd = spec
        .working_dir
        .as_deref()
        .filter(|d| !d.is_empty())
        .unwrap_or("/");
    nix::unistd::chdir(cwd).map_err(|source| ExecError::Sys {
        action: "change directory to",
        path: PathBuf::from(cwd),
        source,
    })?;
    Ok(spec)
}

fn run_command(spec: &ContainerSpec, command: &[String]) -> ExecError {
    let Some((program, args)) = command.split_first() else {
        return ExecError::Usage;
    };
    let source = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .exec();
    match source.kind() {
        std::io::ErrorKind::NotFound => ExecError::NotFound {
            program: program.clone(),
        },
        _ => ExecError::Exec {
            program: program.clone(),
            source,
        },
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ExecError> {
    let read = |reason: String| ExecError::Read {
        path: path.to_owned(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| read(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| read(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_follows_the_separator() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        let full = args(&["dir", "ns", "pod", "c", "err", "--", "sh", "-c", "--"]);
        let (fixed, command) = split_command(&full).unwrap();
        assert_eq!(fixed, &args(&["dir", "ns", "pod", "c", "err"])[..]);
        assert_eq!(command, &args(&["sh", "-c", "--"])[..]);
        assert_eq!(split_command(&args(&["dir", "--"])), None);
        assert_eq!(split_command(&args(&["dir", "sh"])), None);
    }
}
