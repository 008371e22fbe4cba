//! The example packages: each validates, and the package scripts whose behaviour the overlay
//! tests cannot reach (process limits, package-manager failures) are run directly with stub
//! commands on PATH. Nothing here writes outside temporary directories.

// Test helpers outside #[test] functions: a failed setup step aborts the test.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const AGENT: &str = env!("CARGO_BIN_EXE_skyhook-agent");

fn package(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/packages")
        .join(name)
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn every_example_package_validates() {
    for name in ["shellscript", "tuning", "tuned"] {
        let output = Command::new(AGENT)
            .arg("validate")
            .arg(package(name))
            .output()
            .unwrap();
        let report = text(&output);
        assert_eq!(output.status.code(), Some(0), "{name}:\n{report}");
        assert!(report.contains(": valid ("), "{name}:\n{report}");
        assert!(!report.contains("error:"), "{name}:\n{report}");
    }
}

#[test]
fn validate_rejects_a_broken_package_with_fixes() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join("skyhook_dir")).unwrap();
    fs::write(
        tmp.path().join("config.json"),
        r#"{"schema_version": "v1", "package_name": "x", "package_version": "1.0",
            "expected_config_files": [], "modes": {"apply": []}}"#,
    )
    .unwrap();
    let output = Command::new(AGENT)
        .arg("validate")
        .arg(tmp.path())
        .output()
        .unwrap();
    let report = text(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.contains("error: config.json package_version"),
        "{report}"
    );
    assert!(report.contains("fix: use MAJOR.MINOR.PATCH"), "{report}");
}

#[test]
fn help_documents_modes_environment_and_exit_codes() {
    let output = Command::new(AGENT).arg("--help").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let help = text(&output);
    for fragment in [
        "MODES: apply, apply-check",
        "SKYHOOK_RESOURCE_ID",
        "OVERLAY_ALWAYS_RUN_STEP (default false)",
        "EXIT CODES:",
        "  1  failure or runtime error",
        "  2  malformed arguments",
        "validate exits 0 without errors, 1 with errors, 2 on malformed arguments",
    ] {
        assert!(help.contains(fragment), "{fragment:?} missing:\n{help}");
    }
    let version = Command::new(AGENT).arg("--version").output().unwrap();
    assert_eq!(version.status.code(), Some(0));
    // The version alone, as upstream's `agent --version` prints it.
    assert_eq!(text(&version), format!("{}\n", env!("CARGO_PKG_VERSION")));
}

/// A scratch environment for one package script: SKYHOOK_DIR with a configMap and a directory
/// of stub commands placed first on PATH.
struct ScriptEnv {
    tmp: tempfile::TempDir,
}

impl ScriptEnv {
    fn new() -> Self {
        let env = ScriptEnv {
            tmp: tempfile::tempdir().unwrap(),
        };
        fs::create_dir_all(env.configmaps()).unwrap();
        fs::create_dir_all(env.stubs()).unwrap();
        env
    }

    fn configmaps(&self) -> PathBuf {
        self.tmp.path().join("pkg/configmaps")
    }

    fn stubs(&self) -> PathBuf {
        self.tmp.path().join("bin")
    }

    fn configmap(&self, key: &str, value: &str) {
        fs::write(self.configmaps().join(key), value).unwrap();
    }

    fn stub(&self, name: &str, body: &str) {
        let path = self.stubs().join(name);
        fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Makes only these host commands (plus the stubs) visible on PATH.
    fn only_host_commands(&self, names: &[&str]) -> String {
        let dir = self.tmp.path().join("host-bin");
        fs::create_dir_all(&dir).unwrap();
        for name in names {
            let found = Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
                .unwrap();
            let target = String::from_utf8_lossy(&found.stdout).trim().to_string();
            assert!(!target.is_empty(), "{name} is not installed");
            let _ = std::os::unix::fs::symlink(target, dir.join(name));
        }
        format!("{}:{}", self.stubs().display(), dir.display())
    }

    /// Runs a package script with bash (`prelude` first, e.g. ulimit settings).
    fn run(
        &self,
        script: &Path,
        prelude: &str,
        path: Option<String>,
        env: &[(&str, &str)],
    ) -> Output {
        let path = path.unwrap_or_else(|| {
            format!(
                "{}:{}",
                self.stubs().display(),
                std::env::var("PATH").unwrap_or_default()
            )
        });
        let mut command = Command::new("/bin/bash");
        command
            .args(["-c", &format!("{prelude}\nexec /bin/bash \"$0\"")])
            .arg(script)
            .env("PATH", path)
            .env("SKYHOOK_DIR", self.tmp.path().join("pkg"))
            .env("SKYHOOK_RESOURCE_ID", "demo-uid-1_pkg_1.0.0");
        for (key, value) in env {
            command.env(key, value);
        }
        let output = command.output().unwrap();
        eprintln!(
            "--- {} -> {:?}\n{}",
            script.display(),
            output.status.code(),
            text(&output)
        );
        output
    }
}

#[test]
fn tuning_post_check_compares_limits_in_effect() {
    let post_check = package("tuning").join("skyhook_dir/update_settings_post_check.sh");
    let env = ScriptEnv::new();
    // The "service" is the script's own process (the prelude execs it, keeping its PID and the
    // limits set before).
    env.stub(
        "systemctl",
        r#"if [ "$1 $2 $3 $4" = "show -p MainPID --value" ]; then echo "$FAKE_MAIN_PID"; else exit 0; fi"#,
    );
    let limits = "ulimit -n 4096; ulimit -s 8192; export FAKE_MAIN_PID=${FAKE_MAIN_PID:-$$}";
    let cases: &[(&str, Option<&str>, i32, &str)] = &[
        (
            "LimitNOFILE=4096\nLimitSTACK=8M\n",
            None,
            0,
            "LimitSTACK=8M is in effect",
        ),
        (
            "[Service]\nLimitNOFILE=4096:4096\n",
            None,
            0,
            "LimitNOFILE=4096:4096 is in effect",
        ),
        (
            "LimitNOFILE=8192\n",
            None,
            1,
            "LimitNOFILE=8192 is not in effect (soft 4096, hard 4096)",
        ),
        (
            "LimitNOFILE=4096\n",
            Some("0"),
            1,
            "containerd is not running",
        ),
    ];
    for (dropin, main_pid, expected_code, expected_text) in cases {
        env.configmap("service_containerd.conf", dropin);
        let extra: Vec<(&str, &str)> = main_pid.iter().map(|pid| ("FAKE_MAIN_PID", *pid)).collect();
        let output = env.run(&post_check, limits, None, &extra);
        assert_eq!(output.status.code(), Some(*expected_code), "{dropin:?}");
        assert!(
            text(&output).contains(expected_text),
            "{dropin:?}: {}",
            text(&output)
        );
    }
    // Without a containerd or crio drop-in there is nothing to check.
    fs::remove_file(env.configmaps().join("service_containerd.conf")).unwrap();
    env.configmap("service_kubelet.conf", "LimitNOFILE=1\n");
    assert_eq!(env.run(&post_check, "", None, &[]).status.code(), Some(0));
}

const SCRIPT_TOOLS: &[&str] = &[
    "cut", "tr", "sed", "grep", "timeout", "sleep", "basename", "dirname", "cat",
];

#[test]
fn tuned_install_fails_fast_when_the_package_manager_hangs() {
    let install = package("tuned").join("skyhook_dir/install_tuned.sh");
    let env = ScriptEnv::new();
    // An apt-get that never finishes (an unreachable mirror, a held lock).
    env.stub("apt-get", "exec sleep 600");
    let path = env.only_host_commands(SCRIPT_TOOLS);
    let output = env.run(&install, "", Some(path), &[("TUNED_INSTALL_TIMEOUT", "1")]);
    assert_eq!(output.status.code(), Some(1));
    let report = text(&output);
    assert!(
        report.contains("did not finish within 1s (TUNED_INSTALL_TIMEOUT)"),
        "{report}"
    );
    assert!(
        report.contains("apt-get could not install tuned (exit 124)"),
        "{report}"
    );
}

#[test]
fn tuned_install_explains_a_host_without_a_package_manager() {
    let install = package("tuned").join("skyhook_dir/install_tuned.sh");
    let env = ScriptEnv::new();
    let path = env.only_host_commands(SCRIPT_TOOLS);
    let output = env.run(&install, "", Some(path), &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output).contains("this host has none of apt-get, dnf or yum"),
        "{}",
        text(&output)
    );
}

#[test]
fn tuned_install_reports_a_failing_package_manager() {
    let install = package("tuned").join("skyhook_dir/install_tuned.sh");
    let env = ScriptEnv::new();
    env.stub(
        "dnf",
        "echo 'Error: Failed to download metadata for repo' >&2; exit 1",
    );
    let path = env.only_host_commands(SCRIPT_TOOLS);
    let output = env.run(&install, "", Some(path), &[]);
    assert_eq!(output.status.code(), Some(1));
    let report = text(&output);
    assert!(
        report.contains("dnf could not install tuned (exit 1)"),
        "{report}"
    );
    assert!(report.contains("Failed to download metadata"), "{report}");
}

#[test]
fn tuned_install_skips_the_package_manager_when_tuned_is_present() {
    let install = package("tuned").join("skyhook_dir/install_tuned.sh");
    let env = ScriptEnv::new();
    let calls = env.tmp.path().join("calls");
    env.stub("tuned", "exit 0");
    env.stub("tuned-adm", "exit 0");
    env.stub("apt-get", "echo apt-get must not run >&2; exit 1");
    env.stub(
        "systemctl",
        &format!("echo \"systemctl $*\" >> {}", calls.display()),
    );
    let output = env.run(&install, "", None, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains("already installed"));
    assert_eq!(
        fs::read_to_string(calls).unwrap(),
        "systemctl enable tuned\nsystemctl start tuned\n"
    );
}
