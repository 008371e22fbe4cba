//! The chroot helper: the agent re-executes itself with [`CHROOT_EXEC_ARG`] to run one command
//! inside the host root, like upstream's `chroot_exec.py`. Only this short-lived process
//! changes its root; the agent keeps its own.
//!
//! Inside the root it makes the program executable (steps only), builds the environment
//! (container env, overlaid by the output of `env` run inside the root, overlaid by the
//! step's variables) and replaces itself with the command, so the exit status the agent sees is
//! the command's own.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

/// The hidden first argument that selects the helper.
pub const CHROOT_EXEC_ARG: &str = "__chroot-exec";

/// What the helper runs; passed as JSON in its second argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChrootSpec {
    pub root: PathBuf,
    pub cwd: String,
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub make_executable: bool,
}

/// Exit codes of the helper itself, as a shell uses them.
const CANNOT_EXECUTE: u8 = 126;
const NOT_FOUND: u8 = 127;

/// Parses `env` output (`NAME=value` lines); lines without `=` are ignored.
pub fn parse_env_output(output: &[u8]) -> Vec<(OsString, OsString)> {
    output
        .split(|b| *b == b'\n')
        .filter_map(|line| {
            let split = line.iter().position(|b| *b == b'=')?;
            let (name, value) = (&line[..split], &line[split + 1..]);
            (!name.is_empty()).then(|| {
                (
                    OsString::from_vec(name.to_vec()),
                    OsString::from_vec(value.to_vec()),
                )
            })
        })
        .collect()
}

/// The step environment: the container's, overlaid by the chroot's, overlaid by the step's.
pub fn merge_env(
    container: impl IntoIterator<Item = (OsString, OsString)>,
    chroot: impl IntoIterator<Item = (OsString, OsString)>,
    step: &BTreeMap<String, String>,
) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = container.into_iter().collect();
    env.extend(chroot);
    env.extend(
        step.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env
}

/// The helper's main: returns only when the command could not be started.
pub fn exec(spec_json: &str) -> u8 {
    let spec: ChrootSpec = match serde_json::from_str(spec_json) {
        Ok(spec) => spec,
        Err(err) => {
            eprintln!(
                "skyhook-agent: the chroot helper got an unreadable command description: {err}"
            );
            return NOT_FOUND;
        }
    };
    let Some(program) = spec.argv.first() else {
        eprintln!("skyhook-agent: the chroot helper got an empty command");
        return NOT_FOUND;
    };
    if let Err(err) = std::os::unix::fs::chroot(&spec.root) {
        eprintln!(
            "skyhook-agent: failed to chroot into {}: {err} (the agent must run as root)",
            spec.root.display()
        );
        return CANNOT_EXECUTE;
    }
    if let Err(err) = std::env::set_current_dir(&spec.cwd) {
        eprintln!(
            "skyhook-agent: failed to enter {} inside the host root: {err}",
            spec.cwd
        );
        return CANNOT_EXECUTE;
    }
    if spec.make_executable {
        let made = std::fs::metadata(program).and_then(|meta| {
            let mut permissions = meta.permissions();
            permissions.set_mode(permissions.mode() | 0o111);
            std::fs::set_permissions(program, permissions)
        });
        if let Err(err) = made {
            eprintln!("skyhook-agent: failed to make {program} executable: {err}");
            return if err.kind() == std::io::ErrorKind::NotFound {
                NOT_FOUND
            } else {
                CANNOT_EXECUTE
            };
        }
    }
    // stdin and stderr are inherited: a node root may have no /dev/null to open.
    let chroot_env = match Command::new("env")
        .stdin(Stdio::inherit())
        .stderr(Stdio::inherit())
        .output()
    {
        Ok(output) if output.status.success() => parse_env_output(&output.stdout),
        _ => {
            eprintln!(
                "skyhook-agent: warning: could not run `env` inside the host root; steps get the agent's environment only"
            );
            Vec::new()
        }
    };
    let env = merge_env(std::env::vars_os(), chroot_env, &spec.env);
    let err = Command::new(OsStr::from_bytes(program.as_bytes()))
        .args(&spec.argv[1..])
        .env_clear()
        .envs(env)
        .exec();
    eprintln!("skyhook-agent: failed to execute {program} inside the host root: {err}");
    if err.kind() == std::io::ErrorKind::NotFound {
        NOT_FOUND
    } else {
        CANNOT_EXECUTE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn env_output_is_parsed_like_upstream() {
        assert_eq!(
            parse_env_output(b"PATH=/usr/bin:/bin\nHOME=/root\nVAR=a=b\nno_equals\n=x\nEMPTY=\n\n"),
            os(&[
                ("PATH", "/usr/bin:/bin"),
                ("HOME", "/root"),
                ("VAR", "a=b"),
                ("EMPTY", "")
            ])
        );
        assert!(parse_env_output(b"").is_empty());
    }

    #[test]
    fn step_env_beats_chroot_env_beats_container_env() {
        let container = os(&[
            ("PATH", "/container"),
            ("HOME", "/c"),
            ("ONLY_CONTAINER", "1"),
        ]);
        let chroot = os(&[("PATH", "/chroot"), ("HOME", "/h"), ("ONLY_CHROOT", "1")]);
        let step = BTreeMap::from([
            ("PATH".to_string(), "/step".to_string()),
            ("SKYHOOK_DIR".to_string(), "/pkg".to_string()),
        ]);
        let merged = merge_env(container, chroot, &step);
        let get = |k: &str| {
            merged
                .get(OsStr::new(k))
                .map(|v| v.to_string_lossy().into_owned())
        };
        assert_eq!(get("PATH").as_deref(), Some("/step"));
        assert_eq!(get("HOME").as_deref(), Some("/h"));
        assert_eq!(get("ONLY_CONTAINER").as_deref(), Some("1"));
        assert_eq!(get("ONLY_CHROOT").as_deref(), Some("1"));
        assert_eq!(get("SKYHOOK_DIR").as_deref(), Some("/pkg"));
        assert_eq!(merged.len(), 5);
    }

    #[test]
    fn specs_round_trip_through_json() {
        let spec = ChrootSpec {
            root: PathBuf::from("/root"),
            cwd: "/pkg".into(),
            argv: vec!["/pkg/skyhook_dir/a.sh".into(), "it's".into()],
            env: BTreeMap::from([("A".to_string(), "1".to_string())]),
            make_executable: true,
        };
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<ChrootSpec>(&json).unwrap(), spec);
    }
}
