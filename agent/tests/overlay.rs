//! End-to-end: the built `skyhook-agent` against a scratch node root, prepared the way
//! devcluster prepares its nodes: an overlay with the machine's `/` as the lower layer and a
//! private upper directory, mounted in a private mount namespace. `reboot`, `systemctl`,
//! `service`, `sysctl` and `update-grub` are shadowed by shims in the upper directory that
//! append to a journal file, so nothing here reboots or reconfigures the machine.
//!
//! Everything a run changes lands in the upper directory, which is what the tests inspect.
//! The tests need root (mount namespaces, overlayfs, chroot) and `unshare`; elsewhere they
//! fail, naming what is missing, rather than pass without running.

// Test helpers outside #[test] functions: a failed setup step aborts the test.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const AGENT: &str = env!("CARGO_BIN_EXE_skyhook-agent");
const SHIM_MARK: &str = "skyhook-agent-test-shim";
const JOURNAL: &str = "var/log/skyhook-test-journal";

/// Why this process cannot build overlay roots, if it cannot: what is missing and how to get it.
fn missing_requirement(uid: u32, unshare_installed: bool) -> Option<&'static str> {
    if uid != 0 {
        return Some(
            "the overlay end-to-end tests need root (mount namespace, overlayfs, chroot); run them as root, as CI does",
        );
    }
    if !unshare_installed {
        return Some(
            "the overlay end-to-end tests need `unshare` (util-linux), which is not installed; scripts/setup.sh installs it",
        );
    }
    None
}

/// Fails the test, naming what is missing, when this process cannot build overlay roots: a
/// test that passes without running proves nothing (CI runs as root).
fn require_overlay_support() {
    let uid = fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    let unshare_installed = Command::new("unshare").arg("--help").output().is_ok();
    if let Some(missing) = missing_requirement(uid, unshare_installed) {
        panic!("{missing}");
    }
}

#[test]
fn a_missing_requirement_is_named() {
    let cases = [
        (0, true, None),
        (1000, true, Some("need root")),
        (1000, false, Some("need root")),
        (0, false, Some("`unshare` (util-linux)")),
    ];
    for (uid, unshare, want) in cases {
        let got = missing_requirement(uid, unshare);
        match want {
            None => assert_eq!(got, None, "uid {uid}, unshare {unshare}"),
            Some(part) => assert!(
                got.is_some_and(|text| text.contains(part)),
                "uid {uid}, unshare {unshare}: {got:?}"
            ),
        }
    }
}

/// A scratch node: an overlay upper directory over the machine's root.
struct Node {
    _tmp: tempfile::TempDir,
    upper: PathBuf,
    work: PathBuf,
    merged: PathBuf,
    /// The node's SKYHOOK_ROOT_DIR / SKYHOOK_LOG_DIR name, unique per test.
    skyhook: String,
}

impl Node {
    fn new(skyhook: &str) -> Node {
        let tmp = tempfile::tempdir().unwrap();
        let node = Node {
            upper: tmp.path().join("upper"),
            work: tmp.path().join("work"),
            merged: tmp.path().join("merged"),
            _tmp: tmp,
            skyhook: format!("{skyhook}-{}", std::process::id()),
        };
        for dir in [&node.upper, &node.work, &node.merged] {
            fs::create_dir_all(dir).unwrap();
        }
        let shim = format!(
            "#!/bin/sh\n# {SHIM_MARK}: records the call in the node's journal instead of touching the machine.\n\
             echo \"$(basename \"$0\")${{*:+ $*}}\" >> /{JOURNAL}\n\
             if [ \"$(basename \"$0\")\" = reboot ] && [ \"${{SHIM_REBOOT_KILLED:-}}\" = 1 ]; then kill -TERM $$; fi\n"
        );
        for path in [
            "usr/sbin/reboot",
            "usr/bin/systemctl",
            "usr/sbin/service",
            "usr/sbin/sysctl",
            "usr/sbin/update-grub",
        ] {
            let target = node.upper.join(path);
            fs::create_dir_all(target.parent().unwrap()).unwrap();
            fs::write(&target, &shim).unwrap();
            fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
        }
        node
    }

    fn state_dir(&self) -> String {
        format!("/var/lib/skyhook/{}", self.skyhook)
    }

    fn copy_dir(&self, package: &str, version: &str) -> String {
        format!("{}/{package}-{version}-uid-1", self.state_dir())
    }

    /// A path in the node's root as changed by the agent (the overlay's upper directory).
    fn changed(&self, host_path: &str) -> PathBuf {
        self.upper.join(host_path.trim_start_matches('/'))
    }

    fn read(&self, host_path: &str) -> String {
        fs::read_to_string(self.changed(host_path))
            .unwrap_or_else(|err| panic!("{host_path} in the node root: {err}"))
    }

    /// The regular files under `host_dir` that the agent created or changed in the node root:
    /// those whose bytes differ from the machine's own file, or that the machine lacks.
    fn files_differing_from_machine(&self, host_dir: &str) -> Vec<String> {
        let mut differing = Vec::new();
        let mut pending = vec![self.changed(host_dir)];
        while let Some(dir) = pending.pop() {
            for entry in fs::read_dir(&dir).into_iter().flatten() {
                let entry = entry.unwrap();
                let kind = entry.file_type().unwrap();
                if kind.is_dir() {
                    pending.push(entry.path());
                    continue;
                }
                if !kind.is_file() {
                    continue; // overlay whiteouts: files the agent deleted
                }
                let host_path =
                    Path::new("/").join(entry.path().strip_prefix(&self.upper).unwrap());
                if fs::read(&host_path).ok() != Some(fs::read(entry.path()).unwrap()) {
                    differing.push(host_path.to_string_lossy().into_owned());
                }
            }
        }
        differing.sort();
        differing
    }

    /// Sets the node's boot ID, as `/proc/sys/kernel/random/boot_id` in its root shows it.
    fn set_boot_id(&self, boot_id: &str) {
        let path = self.changed("/proc/sys/kernel/random/boot_id");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, format!("{boot_id}\n")).unwrap();
    }

    fn journal(&self) -> Vec<String> {
        fs::read_to_string(self.upper.join(JOURNAL))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Puts a package into the node's copy dir with the given configMap files, as the
    /// operator's copy init container and configMap volume do.
    fn install_package(&self, source: &Path, copy_dir: &str, configmaps: &[(&str, &str)]) {
        let target = self.changed(copy_dir);
        copy_recursively(source, &target);
        let configmap_dir = target.join("configmaps");
        fs::create_dir_all(&configmap_dir).unwrap();
        for (key, value) in configmaps {
            fs::write(configmap_dir.join(key), value).unwrap();
        }
    }

    fn set_configmap(&self, copy_dir: &str, key: &str, value: Option<&str>) {
        let path = self.changed(copy_dir).join("configmaps").join(key);
        match value {
            Some(value) => fs::write(path, value).unwrap(),
            None => fs::remove_file(path).unwrap(),
        }
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let script = format!(
            "set -e\n\
             mount -t overlay overlay -o \"lowerdir=/,upperdir=$1,workdir=$2\" \"$3\"\n\
             grep -q {SHIM_MARK} \"$3/usr/sbin/reboot\"\n\
             shift 3\n\
             exec \"$@\""
        );
        let mut command = Command::new("unshare");
        command
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
                "sh",
            ])
            .arg(&self.upper)
            .arg(&self.work)
            .arg(&self.merged)
            .arg(AGENT)
            .args(args)
            .env("SKYHOOK_ROOT_DIR", self.state_dir())
            .env(
                "SKYHOOK_LOG_DIR",
                format!("/var/log/skyhook/{}", self.skyhook),
            )
            .env("COPY_RESOLV", "false")
            .env("RUST_LOG", "info");
        for (key, value) in env {
            command.env(key, value);
        }
        command
    }

    /// Runs the agent with the node's root mount, returning its output.
    fn agent(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let output = self.command(args, env).output().unwrap();
        eprintln!(
            "--- skyhook-agent {args:?} -> {:?}\n{}{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// Runs `mode` with the node's root mount and copy dir.
    fn run(&self, mode: &str, copy_dir: &str, env: &[(&str, &str)]) -> Output {
        let root = self.merged.to_string_lossy().into_owned();
        self.agent(&[mode, &root, copy_dir], env)
    }
}

fn copy_recursively(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_recursively(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn example(package: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/packages")
        .join(package)
}

fn code(output: &Output) -> Option<i32> {
    output.status.code()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn shellscript_lifecycle_changes_only_the_node_root() {
    require_overlay_support();
    let node = Node::new("shellscript");
    let copy_dir = node.copy_dir("shellscript", "1.1.1");
    let resource = [("SKYHOOK_RESOURCE_ID", "e2e-uid-1_shellscript_1.1.1")];
    node.install_package(
        &example("shellscript"),
        &copy_dir,
        &[
            ("apply.sh", "echo 'Hello, world!'\ncat \"$SKYHOOK_DIR/configmaps/extra.txt\"\necho applied > /etc/skyhook-e2e-applied\n"),
            ("apply_check.sh", "test -f /etc/skyhook-e2e-applied\n"),
            ("config.sh", "echo \"setting=1 step_root=$STEP_ROOT\" > /etc/skyhook-e2e.conf\n"),
            ("config_check.sh", "grep -q setting=1 /etc/skyhook-e2e.conf\n"),
            ("uninstall.sh", "rm -f /etc/skyhook-e2e-applied /etc/skyhook-e2e.conf\n"),
            ("uninstall_check.sh", "! test -e /etc/skyhook-e2e-applied && ! test -e /etc/skyhook-e2e.conf\n"),
            ("extra.txt", "extra configmap content\n"),
        ],
    );
    let state = node.state_dir();
    let logs = format!("/var/log/skyhook/{}/shellscript/1.1.1", node.skyhook);

    let apply = node.run("apply", &copy_dir, &resource);
    assert_eq!(code(&apply), Some(0));
    let out = stdout(&apply);
    assert!(out.contains("mode: apply"), "the banner is printed");
    assert!(
        out.lines()
            .any(|l| l.starts_with("[out]") && l.ends_with(" Hello, world!")),
        "{out}"
    );
    assert_eq!(node.read("/etc/skyhook-e2e-applied"), "applied\n");
    assert!(
        !Path::new("/etc/skyhook-e2e-applied").exists(),
        "the machine's own root is untouched"
    );
    assert!(
        !Path::new(&state).exists(),
        "the machine's own root is untouched"
    );

    // Flags, logs and history at the upstream paths.
    assert!(node.changed(&format!("{state}/flags/START")).is_file());
    let flag = node.read(&format!(
        "{state}/flags/shellscript/1.1.1/shellscript_run.sh_WydhcHBseSddX1swXQ=="
    ));
    assert!(
        flag.starts_with("last_run: ") && flag.ends_with("\nstep_always_runs: True"),
        "{flag}"
    );
    let log_names = files_in(&node.changed(&logs));
    let log = log_names
        .iter()
        .find(|n| n.ends_with(".log"))
        .expect("a step log");
    assert!(
        log.starts_with("shellscript_run.sh-")
            && log.len() == "shellscript_run.sh-2025-06-01-120000.log".len(),
        "{log}"
    );
    assert!(log_names.contains(&format!("{log}.err")));
    let log_text = node.read(&format!("{logs}/{log}"));
    assert!(
        log_text.contains("Hello, world!") && log_text.contains("extra configmap content"),
        "{log_text}"
    );

    let apply_check = node.run("apply-check", &copy_dir, &resource);
    assert_eq!(code(&apply_check), Some(0));
    assert_eq!(
        node.read(&format!("{state}/flags/check_results")),
        "shellscript_run.sh False"
    );
    assert!(
        node.changed(&format!("{state}/flags/apply-check_ALL_CHECKED"))
            .is_file()
    );
    let history = node.read(&format!("{state}/history/shellscript.json"));
    assert!(
        history.starts_with(
            r#"{"current-version": "1.1.1", "history": [{"version": "1.1.1", "time": ""#
        ),
        "{history}"
    );

    assert_eq!(code(&node.run("config", &copy_dir, &resource)), Some(0));
    assert_eq!(
        node.read("/etc/skyhook-e2e.conf"),
        format!("setting=1 step_root={copy_dir}/skyhook_dir\n")
    );
    assert_eq!(
        code(&node.run("config-check", &copy_dir, &resource)),
        Some(0)
    );

    assert_eq!(code(&node.run("uninstall", &copy_dir, &resource)), Some(0));
    assert!(!node.changed("/etc/skyhook-e2e-applied").exists());
    assert_eq!(
        node.files_differing_from_machine("/etc"),
        Vec::<String>::new(),
        "the configMap's uninstall.sh undid what apply.sh and config.sh wrote"
    );
    assert_eq!(
        code(&node.run("uninstall-check", &copy_dir, &resource)),
        Some(0)
    );
    let history = node.read(&format!("{state}/history/shellscript.json"));
    assert!(
        history.starts_with(
            r#"{"current-version": "uninstalled", "history": [{"version": "uninstalled""#
        ),
        "{history}"
    );
    let flags = files_in(&node.changed(&format!("{state}/flags/shellscript/1.1.1")));
    assert!(
        flags.is_empty(),
        "uninstall-check removes every step flag: {flags:?}"
    );
}

#[test]
fn failures_exit_1_and_malformed_arguments_exit_2() {
    require_overlay_support();
    let node = Node::new("failures");
    let copy_dir = node.copy_dir("shellscript", "1.1.1");
    node.install_package(
        &example("shellscript"),
        &copy_dir,
        &[
            ("apply.sh", "echo broken >&2\nexit 7\n"),
            ("apply_check.sh", "exit 1\n"),
        ],
    );
    let apply = node.run("apply", &copy_dir, &[]);
    assert_eq!(code(&apply), Some(1), "step failed");
    assert!(String::from_utf8_lossy(&apply.stderr).contains("[err]"));
    let check = node.run("apply-check", &copy_dir, &[]);
    assert_eq!(code(&check), Some(1), "check failed");
    assert!(String::from_utf8_lossy(&check.stderr).contains("failure=\"checks_failed\""));
    assert_eq!(
        node.read(&format!("{}/flags/check_results", node.state_dir())),
        "shellscript_run.sh True"
    );

    node.set_configmap(&copy_dir, "apply.sh", Some("exit 0\n"));
    fs::write(
        node.changed(&copy_dir).join("config.json"),
        "{\"schema_version\": \"v1\"}",
    )
    .unwrap();
    let invalid = node.run("apply", &copy_dir, &[]);
    assert_eq!(code(&invalid), Some(1), "invalid package");
    assert!(
        String::from_utf8_lossy(&invalid.stderr)
            .contains("missing required field \"package_name\"")
    );

    // A mode this agent does not know is skipped, as upstream skips a newer operator's modes.
    let unknown = node.agent(&["future-stage", "/x", "/y"], &[]);
    assert_eq!(code(&unknown), Some(0), "unsupported mode");
    assert!(
        String::from_utf8_lossy(&unknown.stderr)
            .contains("does not support the requested stage; treating it as a no-op")
    );
    for (args, message) in [
        (&["apply"][..], "expected 2, 3, or 4 arguments; received 1"),
        (
            &["apply", "relative", "/y"],
            "root mount \"relative\" is not absolute",
        ),
        (
            &["apply", "/x", "relative"],
            "copy directory \"relative\" is not absolute",
        ),
        (
            &["interrupt", "/x", "/y", ""],
            "interrupt data must not be empty",
        ),
        (
            &["apply", "/x", "/y", "eyJ9"],
            "does not accept interrupt data",
        ),
        (
            &["--version", "extra"],
            "--version does not accept additional arguments",
        ),
    ] {
        let output = node.agent(args, &[]);
        assert_eq!(code(&output), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(message),
            "{args:?}"
        );
    }
    let version = node.agent(&["--version"], &[]);
    assert_eq!(code(&version), Some(0));
    assert_eq!(stdout(&version), format!("{}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn legacy_mode_copies_the_package_and_write_logs_false_keeps_no_logs() {
    require_overlay_support();
    let node = Node::new("legacy");
    let copy_dir = node.copy_dir("shellscript", "1.1.1");
    let data_dir = example("shellscript");
    let output = node.run(
        "apply",
        &copy_dir,
        &[
            ("SKYHOOK_DATA_DIR", data_dir.to_str().unwrap()),
            ("SKYHOOK_AGENT_WRITE_LOGS", "false"),
            ("COPY_RESOLV", "true"),
        ],
    );
    assert_eq!(code(&output), Some(0));
    assert!(stdout(&output).contains("the configMap has no apply.sh; nothing to do for apply"));
    assert!(node.changed(&copy_dir).join("config.json").is_file());
    assert!(
        node.changed(&copy_dir)
            .join("skyhook_dir/shellscript_run.sh")
            .is_file()
    );
    assert!(
        !node
            .changed(&format!("/var/log/skyhook/{}", node.skyhook))
            .exists(),
        "no log directory"
    );
    assert!(
        node.changed("/etc/resolv.conf").exists()
            || fs::symlink_metadata("/etc/resolv.conf").is_err()
    );
}

#[test]
fn interrupts_run_once_per_resource_id_and_reach_the_journal() {
    require_overlay_support();
    let node = Node::new("interrupts");
    let copy_dir = node.copy_dir("tuning", "1.1.4");
    let root = node.merged.to_string_lossy().into_owned();
    let b64 = |json: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(json)
    };
    let id = [("SKYHOOK_RESOURCE_ID", "e2e-uid-1_tuning_1.1.4")];
    let flags = format!(
        "{}/interrupts/flags/e2e-uid-1_tuning_1.1.4",
        node.state_dir()
    );

    let restart = b64(r#"{"type": "service_restart", "services": ["containerd", "kubelet"]}"#);
    let output = node.agent(&["interrupt", &root, &copy_dir, &restart], &id);
    assert_eq!(code(&output), Some(0));
    assert_eq!(
        node.journal(),
        [
            "systemctl daemon-reload",
            "systemctl restart containerd",
            "systemctl restart kubelet"
        ]
    );
    assert!(
        node.changed(&copy_dir).is_dir(),
        "the copy dir is created (upstream #181)"
    );
    assert_eq!(
        files_in(&node.changed(&flags)),
        [
            "service_restart_0.complete",
            "service_restart_1.complete",
            "service_restart_2.complete"
        ]
    );
    let logs = files_in(&node.changed(&format!(
        "/var/log/skyhook/{}/tuning/1.1.4/interrupts",
        node.skyhook
    )));
    assert_eq!(
        logs.iter().filter(|n| n.ends_with(".log")).count(),
        3,
        "{logs:?}"
    );

    // The same resource id again: nothing runs.
    assert_eq!(
        code(&node.agent(&["interrupt", &root, &copy_dir, &restart], &id)),
        Some(0)
    );
    assert_eq!(node.journal().len(), 3);

    let noop = b64(r#"{"type": "no_op"}"#);
    assert_eq!(
        code(&node.agent(&["interrupt", &root, &copy_dir, &noop], &id)),
        Some(0)
    );
    assert!(node.changed(&format!("{flags}/no_op.complete")).is_file());

    // A reboot the shutdown kills with SIGTERM succeeds and leaves a pending marker holding
    // the boot ID; a run on the same boot reboots again, a run after the boot ID changed
    // confirms the reboot without rebooting.
    let reboot = b64(r#"{"type": "node_restart"}"#);
    let reboot_id = "e2e-uid-2_tuning_1.1.4";
    let next = [
        ("SKYHOOK_RESOURCE_ID", reboot_id),
        ("SHIM_REBOOT_KILLED", "1"),
    ];
    let reboot_flags = format!("{}/interrupts/flags/{reboot_id}", node.state_dir());
    let reboots = || node.journal().iter().filter(|l| *l == "reboot").count();
    node.set_boot_id("boot-a");
    let first = node.agent(&["interrupt", &root, &copy_dir, &reboot], &next);
    assert_eq!(code(&first), Some(0), "killed by the shutdown: success");
    assert_eq!(
        node.read(&format!("{reboot_flags}/node_restart_0.pending")),
        "boot-a\n"
    );
    let same_boot = node.agent(&["interrupt", &root, &copy_dir, &reboot], &next);
    assert_eq!(code(&same_boot), Some(0));
    assert_eq!(
        reboots(),
        2,
        "the boot ID did not change: the reboot runs again"
    );
    node.set_boot_id("boot-b");
    let after = node.agent(&["interrupt", &root, &copy_dir, &reboot], &next);
    assert_eq!(code(&after), Some(0));
    assert_eq!(reboots(), 2, "confirmed by the new boot ID, not repeated");
    assert_eq!(
        files_in(&node.changed(&reboot_flags)),
        ["node_restart_0.complete"]
    );

    // `reboot` returning 0 while the host stays up is a failure after 10 s.
    let stays_up = [("SKYHOOK_RESOURCE_ID", "e2e-uid-3_tuning_1.1.4")];
    let started = std::time::Instant::now();
    let output = node.agent(&["interrupt", &root, &copy_dir, &reboot], &stays_up);
    assert_eq!(code(&output), Some(1));
    assert!(started.elapsed() >= Duration::from_secs(10));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("reboot was enqueued but the host did not restart within 10s")
    );
}

#[test]
fn an_interrupt_restores_a_copy_dir_that_uninstall_removed() {
    require_overlay_support();
    let node = Node::new("uninstall-interrupt");
    let copy_dir = node.copy_dir("shellscript", "1.1.1");
    let root = node.merged.to_string_lossy().into_owned();
    let data_dir = example("shellscript");
    let env = [
        ("SKYHOOK_RESOURCE_ID", "e2e-uid-3_shellscript_1.1.1"),
        ("SKYHOOK_DATA_DIR", data_dir.to_str().unwrap()),
    ];
    node.install_package(&data_dir, &copy_dir, &[]);
    assert_eq!(code(&node.run("uninstall", &copy_dir, &env)), Some(0));
    // What an uninstall that cleans up after itself leaves: no copy dir.
    fs::remove_dir_all(node.changed(&copy_dir)).unwrap();

    use base64::Engine as _;
    let restart = base64::engine::general_purpose::STANDARD
        .encode(r#"{"type": "service_restart", "services": ["containerd"]}"#);
    let output = node.agent(&["interrupt", &root, &copy_dir, &restart], &env);
    assert_eq!(code(&output), Some(0));
    assert!(node.changed(&copy_dir).join("config.json").is_file());
    assert!(
        node.changed(&copy_dir)
            .join("skyhook_dir/shellscript_run.sh")
            .is_file()
    );
    assert_eq!(
        node.journal(),
        ["systemctl daemon-reload", "systemctl restart containerd"]
    );
}

#[test]
fn sigterm_stops_after_the_running_step() {
    require_overlay_support();
    let node = Node::new("sigterm");
    let copy_dir = node.copy_dir("acme-motd", "1.0.0");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acme-motd");
    node.install_package(&fixture, &copy_dir, &[("message", "hi\n")]);
    // The config step says it started (on stdout, which the agent streams), then waits on a
    // FIFO until the test releases it.
    fs::create_dir_all(node.changed("/run")).unwrap();
    let status = Command::new("mkfifo")
        .arg(node.changed("/run/e2e-release"))
        .status()
        .unwrap();
    assert!(status.success());
    fs::write(
        node.changed(&copy_dir).join("skyhook_dir/configure.sh"),
        "#!/bin/sh\necho step-started\nread line < /run/e2e-release\necho configured > /etc/acme-configured\n",
    )
    .unwrap();
    let mut agent = node
        .command(&["config", node.merged.to_str().unwrap(), &copy_dir], &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let agent_stdout = agent.stdout.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(agent_stdout).lines() {
            let line = line.unwrap_or_default();
            if line.starts_with("[out]") && line.ends_with(" step-started") {
                let _ = sender.send(());
            }
        }
    });
    receiver
        .recv_timeout(Duration::from_secs(120))
        .expect("the config step never started");

    let kill = Command::new("kill")
        .args(["-TERM", &agent.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    // The agent keeps waiting for the running step; release it. The FIFO is reached through
    // the agent's mount namespace, where the overlay is mounted.
    let release = format!(
        "/proc/{}/root{}/run/e2e-release",
        agent.id(),
        node.merged.display()
    );
    fs::File::options()
        .write(true)
        .open(release)
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    let output = agent.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    assert_eq!(
        output.status.code(),
        Some(1),
        "stopped by SIGTERM: a failure, as upstream"
    );
    assert!(stderr.contains("stopped by SIGTERM"), "{stderr}");
    assert_eq!(
        node.read("/etc/acme-configured"),
        "configured\n",
        "the running step finished"
    );
}

#[test]
fn tuning_writes_and_removes_its_drop_ins() {
    require_overlay_support();
    let node = Node::new("tuning");
    let copy_dir = node.copy_dir("tuning", "1.1.4");
    let id = [("SKYHOOK_RESOURCE_ID", "e2e-uid-1_tuning_1.1.4")];
    node.install_package(
        &example("tuning"),
        &copy_dir,
        &[
            (
                "sysctl.conf",
                "net.core.somaxconn = 4096\nvm.max_map_count = 262144\n",
            ),
            ("ulimit.conf", "nofile=65536\nmemlock=unlimited\n"),
            (
                "service_containerd.conf",
                "LimitNOFILE=1048576\nLimitMEMLOCK=infinity\n",
            ),
            ("grub.conf", "hugepages=16\nintel_iommu=on\n"),
        ],
    );
    assert_eq!(code(&node.run("config", &copy_dir, &id)), Some(0));
    assert_eq!(
        node.read("/etc/sysctl.d/999-tuning-tuning.conf"),
        "net.core.somaxconn = 4096\nvm.max_map_count = 262144\n"
    );
    let limits = node.read("/etc/security/limits.d/999-tuning-tuning.conf");
    assert!(
        limits.contains("* soft nofile 65536\n* hard nofile 65536\n"),
        "{limits}"
    );
    assert!(limits.contains("root hard memlock unlimited\n"), "{limits}");
    assert_eq!(
        node.read("/etc/systemd/system/containerd.service.d/999-tuning-tuning.conf"),
        "[Service]\nLimitNOFILE=1048576\nLimitMEMLOCK=infinity\n"
    );
    assert_eq!(
        node.read("/etc/default/grub.d/999-tuning-tuning.cfg"),
        "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT hugepages=16 intel_iommu=on\"\n"
    );
    assert_eq!(
        node.journal(),
        [
            "sysctl -p /etc/sysctl.d/999-tuning-tuning.conf",
            "systemctl daemon-reload",
            "update-grub"
        ]
    );
    assert!(
        !Path::new("/etc/sysctl.d/999-tuning-tuning.conf").exists(),
        "the machine is untouched"
    );
    assert_eq!(code(&node.run("config-check", &copy_dir, &id)), Some(0));

    // A key removed from the configMap: the check notices the stale drop-in, config removes it.
    node.set_configmap(&copy_dir, "service_containerd.conf", None);
    assert_eq!(code(&node.run("config-check", &copy_dir, &id)), Some(1));
    assert_eq!(code(&node.run("config", &copy_dir, &id)), Some(0));
    assert!(
        !node
            .changed("/etc/systemd/system/containerd.service.d")
            .exists()
    );
    assert_eq!(code(&node.run("config-check", &copy_dir, &id)), Some(0));

    // A bad ulimit name fails config with the reason.
    node.set_configmap(&copy_dir, "ulimit.conf", Some("files=10\n"));
    let bad = node.run("config", &copy_dir, &id);
    assert_eq!(code(&bad), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("is not <name>=<value> with a name among")
    );

    // uninstall-check fails, naming what remains, until uninstall has run.
    let early = node.run("uninstall-check", &copy_dir, &id);
    assert_eq!(code(&early), Some(1));
    let early_text = String::from_utf8_lossy(&early.stderr).into_owned();
    assert!(
        early_text.contains("/etc/security/limits.d/999-tuning-tuning.conf"),
        "{early_text}"
    );
    if machine_lacks_pam_limits() {
        assert!(
            node.read("/etc/pam.d/common-session")
                .contains("pam_limits.so # added by the skyhook tuning package"),
            "config enables pam_limits, marking the line"
        );
    }

    assert_eq!(code(&node.run("uninstall", &copy_dir, &id)), Some(0));
    for dropin in [
        "/etc/sysctl.d/999-tuning-tuning.conf",
        "/etc/security/limits.d/999-tuning-tuning.conf",
        "/etc/default/grub.d/999-tuning-tuning.cfg",
    ] {
        assert!(!node.changed(dropin).exists(), "{dropin} removed");
    }
    assert_eq!(code(&node.run("uninstall-check", &copy_dir, &id)), Some(0));
    assert_eq!(
        node.files_differing_from_machine("/etc"),
        Vec::<String>::new(),
        "uninstall leaves no file config wrote under /etc"
    );

    // A pam_limits line of tuning's that no drop-in needs any more fails the check too.
    if machine_lacks_pam_limits() {
        let session = node.changed("/etc/pam.d/common-session");
        let mut text = fs::read_to_string(&session).unwrap();
        text.push_str("session required pam_limits.so # added by the skyhook tuning package\n");
        fs::write(&session, text).unwrap();
        let leftover = node.run("uninstall-check", &copy_dir, &id);
        assert_eq!(code(&leftover), Some(1));
        assert!(
            String::from_utf8_lossy(&leftover.stderr)
                .contains("/etc/pam.d/common-session (pam_limits line)")
        );
        assert_eq!(code(&node.run("uninstall", &copy_dir, &id)), Some(0));
        assert_eq!(
            node.files_differing_from_machine("/etc"),
            Vec::<String>::new()
        );
    }
}

/// Whether this machine's Debian session stack lacks pam_limits, so tuning's config adds it.
fn machine_lacks_pam_limits() -> bool {
    fs::read_to_string("/etc/pam.d/common-session").is_ok_and(|text| {
        !text
            .lines()
            .any(|l| l.trim_start().starts_with("session") && l.contains("pam_limits.so"))
    })
}

#[test]
fn tuned_manages_profiles_through_tuned_adm() {
    require_overlay_support();
    let node = Node::new("tuned");
    // Stand-ins for the tuned daemon and its tools (this machine has no tuned), and a
    // systemctl that remembers whether tuned is running.
    let stubs: &[(&str, &str)] = &[
        ("usr/sbin/tuned", "exit 0"),
        (
            "usr/sbin/tuned-adm",
            "state=/var/lib/tuned-stub/active\n\
             case \"$1\" in\n\
             list) printf 'Available profiles:\\n- balanced  - General\\n'; for d in /etc/tuned/*/; do [ -f \"$d/tuned.conf\" ] && printf -- '- %s  - custom\\n' \"$(basename \"$d\")\"; done; true ;;\n\
             profile) shift; mkdir -p /var/lib/tuned-stub; echo \"$*\" > $state ;;\n\
             active) echo \"Current active profile: $(cat $state)\" ;;\n\
             verify) exit \"${STUB_VERIFY_RC:-0}\" ;;\n\
             esac",
        ),
        (
            "usr/bin/systemctl",
            "echo \"systemctl $*\" >> /var/log/skyhook-test-journal\n\
             case \"$1\" in\n\
             stop) mkdir -p /var/lib/tuned-stub; touch /var/lib/tuned-stub/stopped ;;\n\
             is-active) [ ! -e /var/lib/tuned-stub/stopped ] ;;\n\
             esac",
        ),
        (
            "usr/bin/apt-get",
            "echo \"apt-get $*\" >> /var/log/skyhook-test-journal\nrm -f /usr/sbin/tuned /usr/sbin/tuned-adm",
        ),
    ];
    for (path, body) in stubs {
        let target = node.changed(path);
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        fs::write(&target, format!("#!/bin/sh\n# {SHIM_MARK}\n{body}\n")).unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let copy_dir = node.copy_dir("tuned", "1.0.0");
    node.install_package(
        &example("tuned"),
        &copy_dir,
        &[
            ("tuned_profile", "balanced my-custom\n"),
            (
                "my-custom",
                "[main]\ninclude=balanced\n[sysctl]\nvm.swappiness=10\n",
            ),
            ("tweak_script", "#!/bin/sh\necho tweak\n"),
        ],
    );
    let id = ("SKYHOOK_RESOURCE_ID", "e2e-uid-1_tuned_1.0.0");

    assert_eq!(code(&node.run("apply", &copy_dir, &[id])), Some(0));
    assert!(
        node.journal()
            .contains(&"systemctl enable tuned".to_string())
    );
    assert_eq!(code(&node.run("apply-check", &copy_dir, &[id])), Some(0));

    assert_eq!(code(&node.run("config", &copy_dir, &[id])), Some(0));
    assert_eq!(
        node.read("/etc/tuned/my-custom/tuned.conf"),
        "[main]\ninclude=balanced\n[sysctl]\nvm.swappiness=10\n"
    );
    let script = node.changed("/etc/tuned/scripts/tweak_script");
    assert_eq!(
        fs::metadata(&script).unwrap().permissions().mode() & 0o777,
        0o755
    );
    assert_eq!(
        node.read("/var/lib/tuned-stub/active"),
        "balanced my-custom\n"
    );

    assert_eq!(code(&node.run("config-check", &copy_dir, &[id])), Some(0));
    let failing_verify = ("STUB_VERIFY_RC", "1");
    assert_eq!(
        code(&node.run("config-check", &copy_dir, &[id, failing_verify])),
        Some(1)
    );
    assert_eq!(
        code(&node.run(
            "config-check",
            &copy_dir,
            &[id, failing_verify, ("INTERRUPT", "true")]
        )),
        Some(0)
    );
    assert_eq!(
        code(&node.run("post-interrupt-check", &copy_dir, &[id, failing_verify])),
        Some(1)
    );
    assert_eq!(
        code(&node.run("post-interrupt-check", &copy_dir, &[id])),
        Some(0)
    );

    node.set_configmap(&copy_dir, "tuned_profile", Some("no-such-profile\n"));
    let unknown = node.run("config", &copy_dir, &[id]);
    assert_eq!(code(&unknown), Some(1));
    assert!(
        String::from_utf8_lossy(&unknown.stderr)
            .contains("profile 'no-such-profile' is not in 'tuned-adm list'")
    );

    assert_eq!(code(&node.run("uninstall", &copy_dir, &[id])), Some(0));
    assert!(
        node.journal()
            .iter()
            .any(|l| l.starts_with("apt-get") && l.ends_with("remove -y tuned"))
    );
    assert!(!node.changed("/etc/tuned/my-custom").exists());
    assert!(!node.changed("/etc/tuned/scripts/tweak_script").exists());
    assert_eq!(
        code(&node.run("uninstall-check", &copy_dir, &[id])),
        Some(0)
    );
    assert_eq!(
        node.files_differing_from_machine("/etc"),
        Vec::<String>::new(),
        "uninstall removes every profile and script config wrote"
    );
}

#[test]
fn a_third_party_upstream_format_package_validates_and_runs() {
    require_overlay_support();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acme-motd");
    let validate = Command::new(AGENT)
        .arg("validate")
        .arg(&fixture)
        .output()
        .unwrap();
    assert_eq!(
        validate.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&validate.stdout)
    );

    let node = Node::new("acme");
    let v1 = node.copy_dir("acme-motd", "1.0.0");
    node.install_package(&fixture, &v1, &[("message", "maintenance at noon\n")]);
    let env = [
        ("ACME_REGION", "eu-west"),
        ("SKYHOOK_RESOURCE_ID", "e2e-uid-1_acme-motd_1.0.0"),
    ];

    assert_eq!(
        code(&node.run("apply", &v1, &env)),
        Some(0),
        "exit 42 is an accepted return code"
    );
    assert_eq!(
        node.read("/etc/acme/install.env"),
        "region=eu-west flag=--verbose mode=install\n"
    );
    assert_eq!(
        node.read("/etc/acme/motd.d/10-acme"),
        "Welcome to an ACME node\n",
        "root_dir is overlaid"
    );
    // Auto idempotence: the step succeeded once, so it does not run again.
    assert_eq!(code(&node.run("apply", &v1, &env)), Some(0));
    assert_eq!(node.read("/etc/acme/install-count"), "run\n");
    assert_eq!(code(&node.run("apply-check", &v1, &env)), Some(0));
    assert_eq!(code(&node.run("config", &v1, &env)), Some(0));
    assert_eq!(code(&node.run("config-check", &v1, &env)), Some(0));
    assert_eq!(node.read("/etc/acme/message"), "maintenance at noon\n");

    // A missing env: argument fails the step.
    let missing = node.run("apply", &v1, &[("OVERLAY_ALWAYS_RUN_STEP", "true")]);
    assert_eq!(code(&missing), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("ACME_REGION"));

    // Upgrade to 1.1.0: the upgrade step gets [previous, current].
    let v2 = node.copy_dir("acme-motd", "1.1.0");
    node.install_package(&fixture, &v2, &[("message", "maintenance at noon\n")]);
    let config_path = node.changed(&v2).join("config.json");
    let config = fs::read_to_string(&config_path)
        .unwrap()
        .replace("\"1.0.0\"", "\"1.1.0\"");
    fs::write(&config_path, config).unwrap();
    assert_eq!(code(&node.run("upgrade", &v2, &env)), Some(0));
    assert_eq!(
        node.read("/etc/acme/upgraded"),
        "from=1.0.0 to=1.1.0 env=1.0.0->1.1.0\n"
    );
    assert_eq!(code(&node.run("upgrade-check", &v2, &env)), Some(0));
    let history = node.read(&format!("{}/history/acme-motd.json", node.state_dir()));
    assert!(
        history.contains(r#""current-version": "1.1.0""#),
        "{history}"
    );
    assert_eq!(history.matches("\"version\"").count(), 2, "{history}");

    assert_eq!(code(&node.run("uninstall", &v2, &env)), Some(0));
    assert_eq!(code(&node.run("uninstall-check", &v2, &env)), Some(0));
    assert!(!node.changed("/etc/acme").exists());
}
