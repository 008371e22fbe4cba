//! Where the agent keeps its state on the host: the same paths and names as upstream, so a node
//! moved from the upstream agent keeps its flags, history and logs.
//!
//! Every path here is as the agent sees it (the host root is mounted at `root_mount`).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::config::Step;
use crate::mode::Mode;
use crate::pyrepr;

/// The host directories the agent writes to, resolved under the root mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root_mount: PathBuf,
    /// `SKYHOOK_ROOT_DIR` as a path on the host, for example `/etc/skyhook`.
    state_root: String,
    /// `SKYHOOK_LOG_DIR` as a path on the host, for example `/var/log/skyhook`.
    log_root: String,
}

/// Joins a host path (absolute or not) under the root mount. `Path::join` would replace the
/// root when given an absolute path, which is never what we want here.
pub fn under_root(root_mount: &Path, host_path: &str) -> PathBuf {
    root_mount.join(host_path.trim_start_matches('/'))
}

impl Layout {
    pub fn new(root_mount: impl Into<PathBuf>, state_root: &str, log_root: &str) -> Self {
        Layout {
            root_mount: root_mount.into(),
            state_root: state_root.to_string(),
            log_root: log_root.to_string(),
        }
    }

    pub fn root_mount(&self) -> &Path {
        &self.root_mount
    }

    pub fn state_dir(&self) -> PathBuf {
        under_root(&self.root_mount, &self.state_root)
    }

    pub fn flag_dir(&self) -> PathBuf {
        self.state_dir().join("flags")
    }

    pub fn start_flag(&self) -> PathBuf {
        self.flag_dir().join("START")
    }

    pub fn check_results(&self) -> PathBuf {
        self.flag_dir().join("check_results")
    }

    pub fn all_checked_flag(&self, mode: Mode) -> PathBuf {
        self.flag_dir().join(format!("{mode}_ALL_CHECKED"))
    }

    /// The directory holding one package version's step flags.
    pub fn package_flag_dir(&self, package: &str, version: &str) -> PathBuf {
        self.flag_dir().join(package).join(version)
    }

    /// `<flags>/<package>/<version>/<step.path>_<marker>`. The marker is standard base64 (with
    /// `+`, `/` and padding, exactly as upstream's `base64.b64encode`), so a marker containing
    /// `/` names a file in a subdirectory; upstream creates those directories too.
    pub fn step_flag(&self, package: &str, version: &str, step: &Step) -> PathBuf {
        self.package_flag_dir(package, version)
            .join(format!("{}_{}", step.path, flag_marker(step)))
    }

    pub fn history_file(&self, package: &str) -> PathBuf {
        self.state_dir()
            .join("history")
            .join(format!("{package}.json"))
    }

    pub fn interrupt_flag_dir(&self, resource_id: &str) -> PathBuf {
        self.state_dir()
            .join("interrupts")
            .join("flags")
            .join(resource_id)
    }

    /// The host's boot ID, which changes with every boot.
    pub fn boot_id_file(&self) -> PathBuf {
        self.root_mount.join("proc/sys/kernel/random/boot_id")
    }

    /// The directory of one package version's logs.
    pub fn package_log_dir(&self, package: &str, version: &str) -> PathBuf {
        under_root(&self.root_mount, &self.log_root)
            .join(package)
            .join(version)
    }

    /// Where the logs of a step (or an interrupt command) go: the directory and the file-name
    /// stem that the executor extends with `-<UTC YYYY-MM-DD-HHMMSS>.log`.
    pub fn log_target(&self, package: &str, version: &str, step_path: &str) -> LogTarget {
        let full = self.package_log_dir(package, version).join(step_path);
        let stem = full
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = full.parent().map(Path::to_path_buf).unwrap_or(full.clone());
        LogTarget { dir, stem }
    }
}

/// A step's log location: files are `<dir>/<stem>-<timestamp>.log` and `<...>.log.err`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTarget {
    pub dir: PathBuf,
    pub stem: String,
}

/// The flag-name marker: `base64(repr(arguments) + "_" + repr(returncodes))`.
pub fn flag_marker(step: &Step) -> String {
    let text = format!(
        "{}_{}",
        pyrepr::str_list(&step.arguments),
        pyrepr::int_list(&step.returncodes)
    );
    STANDARD.encode(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(path: &str, arguments: &[&str], returncodes: &[i64]) -> Step {
        Step {
            name: "s".into(),
            path: path.into(),
            arguments: arguments.iter().map(|a| a.to_string()).collect(),
            returncodes: returncodes.to_vec(),
            on_host: true,
            idempotence: false,
            upgrade_step: false,
            env: Default::default(),
        }
    }

    /// Markers derived by hand from Python's repr rules (e.g. `[]_[0]` -> `W11fWzBd`).
    #[test]
    fn flag_markers_match_upstream_bytes() {
        let cases: &[(&[&str], &[i64], &str)] = &[
            (&[], &[0], "W11fWzBd"),
            (&["apply"], &[0], "WydhcHBseSddX1swXQ=="),
            (&["a", "b"], &[0, 1, 2], "WydhJywgJ2InXV9bMCwgMSwgMl0="),
            (&["it's"], &[0], "WyJpdCdzIl1fWzBd"),
            (&["café"], &[0], "WydjYWbDqSddX1swXQ=="),
            (&["env:FOO"], &[0, 1], "WydlbnY6Rk9PJ11fWzAsIDFd"),
            // A '?' at an offset of 2 mod 3 encodes to '/': upstream's flag then lives in a
            // subdirectory, and so does ours.
            (&["?"], &[0], "Wyc/J11fWzBd"),
        ];
        for (arguments, returncodes, expected) in cases {
            assert_eq!(
                flag_marker(&step("x.sh", arguments, returncodes)),
                *expected,
                "marker for {arguments:?} {returncodes:?}"
            );
        }
    }

    #[test]
    fn paths_follow_the_upstream_layout() {
        let layout = Layout::new("/root", "/var/lib/skyhook/demo", "/var/log/skyhook/demo");
        let s = step("shellscript_run.sh", &["apply"], &[0]);
        assert_eq!(
            layout.step_flag("shellscript", "1.1.1", &s),
            PathBuf::from(
                "/root/var/lib/skyhook/demo/flags/shellscript/1.1.1/shellscript_run.sh_WydhcHBseSddX1swXQ=="
            )
        );
        assert_eq!(
            layout.start_flag(),
            PathBuf::from("/root/var/lib/skyhook/demo/flags/START")
        );
        assert_eq!(
            layout.check_results(),
            PathBuf::from("/root/var/lib/skyhook/demo/flags/check_results")
        );
        assert_eq!(
            layout.all_checked_flag(Mode::ApplyCheck),
            PathBuf::from("/root/var/lib/skyhook/demo/flags/apply-check_ALL_CHECKED")
        );
        assert_eq!(
            layout.history_file("shellscript"),
            PathBuf::from("/root/var/lib/skyhook/demo/history/shellscript.json")
        );
        assert_eq!(
            layout.interrupt_flag_dir("demo-uid-1_tuning_1.0.0"),
            PathBuf::from("/root/var/lib/skyhook/demo/interrupts/flags/demo-uid-1_tuning_1.0.0")
        );
        assert_eq!(
            layout.boot_id_file(),
            PathBuf::from("/root/proc/sys/kernel/random/boot_id")
        );
        assert_eq!(
            layout.log_target("shellscript", "1.1.1", "shellscript_run.sh"),
            LogTarget {
                dir: PathBuf::from("/root/var/log/skyhook/demo/shellscript/1.1.1"),
                stem: "shellscript_run.sh".into()
            }
        );
        assert_eq!(
            layout.log_target("tuning", "1.0.0", "interrupts/service_restart_0"),
            LogTarget {
                dir: PathBuf::from("/root/var/log/skyhook/demo/tuning/1.0.0/interrupts"),
                stem: "service_restart_0".into()
            }
        );
    }

    #[test]
    fn slash_in_marker_nests_the_flag() {
        let layout = Layout::new("/", "/etc/skyhook", "/var/log/skyhook");
        let flag = layout.step_flag("p", "1.0.0", &step("x.sh", &["?"], &[0]));
        assert_eq!(
            flag,
            PathBuf::from("/etc/skyhook/flags/p/1.0.0/x.sh_Wyc/J11fWzBd")
        );
        assert_eq!(
            flag.parent(),
            Some(Path::new("/etc/skyhook/flags/p/1.0.0/x.sh_Wyc"))
        );
    }

    #[test]
    fn under_root_never_replaces_the_root() {
        assert_eq!(
            under_root(Path::new("/root"), "/etc/skyhook"),
            PathBuf::from("/root/etc/skyhook")
        );
        assert_eq!(
            under_root(Path::new("/root"), "etc"),
            PathBuf::from("/root/etc")
        );
        assert_eq!(under_root(Path::new("/"), "/etc"), PathBuf::from("/etc"));
    }
}
