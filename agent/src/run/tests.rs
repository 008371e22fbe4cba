use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use super::*;
use crate::fake::FakeHost;
use crate::host::CommandOutcome;

const ROOT: &str = "/root";
const COPY_DIR: &str = "/var/lib/skyhook/demo/pkg-1.0.0-uid-1";
const HOST_COPY: &str = "/root/var/lib/skyhook/demo/pkg-1.0.0-uid-1";
const FLAGS: &str = "/root/var/lib/skyhook/demo/flags";

fn step(name: &str, path: &str, arguments: &[&str]) -> serde_json::Value {
    json!({
        "name": name, "path": path, "arguments": arguments, "returncodes": [0],
        "on_host": true, "idempotence": false, "upgrade_step": false
    })
}

fn config_json() -> serde_json::Value {
    json!({
        "schema_version": "v1", "package_name": "pkg", "package_version": "1.0.0",
        "expected_config_files": [],
        "modes": {
            "apply": [step("one", "one.sh", &[]), step("two", "two.sh", &["env:NODE_NAME"])],
            "apply-check": [step("one_check", "one_check.sh", &[]), step("two_check", "two_check.sh", &[])],
            "config": [step("cfg", "one.sh", &["config"])],
            "config-check": [step("cfg_check", "one_check.sh", &["config"])],
            "uninstall": [step("rm", "one.sh", &["rm"])],
            "uninstall-check": [step("rm_check", "one_check.sh", &["rm"])],
            "upgrade": [{
                "name": "up", "path": "up.sh", "arguments": [], "returncodes": [0],
                "on_host": true, "idempotence": false, "upgrade_step": true
            }],
            "upgrade-check": [step("up_check", "up_check.sh", &[])]
        }
    })
}

fn settings(vars: &[(&str, &str)]) -> Settings {
    let mut all: BTreeMap<String, String> = [
        ("SKYHOOK_RESOURCE_ID", "demo-uid-1_pkg_1.0.0"),
        ("SKYHOOK_ROOT_DIR", "/var/lib/skyhook/demo"),
        ("SKYHOOK_LOG_DIR", "/var/log/skyhook/demo"),
        ("SKYHOOK_DATA_DIR", "/skyhook-package"),
        ("COPY_RESOLV", "false"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    all.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Settings::from_vars(&all).0
}

fn agent_env() -> BTreeMap<String, String> {
    BTreeMap::from([("NODE_NAME".to_string(), "node-1".to_string())])
}

/// A host with the package already copied to the copy dir (operator mode).
fn host_with_package(config: &serde_json::Value) -> FakeHost {
    let mut host = FakeHost::default();
    add_package(&mut host, HOST_COPY, config);
    host
}

fn add_package(host: &mut FakeHost, dir: &str, config: &serde_json::Value) {
    host.add_file(format!("{dir}/config.json"), config.to_string());
    for script in [
        "one.sh",
        "two.sh",
        "one_check.sh",
        "two_check.sh",
        "up.sh",
        "up_check.sh",
    ] {
        host.add_file(format!("{dir}/skyhook_dir/{script}"), "#!/bin/sh\n");
    }
}

fn request(mode: Mode) -> Request {
    Request {
        mode,
        root_mount: PathBuf::from(ROOT),
        copy_dir: COPY_DIR.into(),
        interrupt_data: None,
    }
}

fn run_mode(host: &mut FakeHost, mode: Mode, settings: &Settings) -> Result<(), RunError> {
    run(host, settings, &agent_env(), &request(mode))
}

fn flag_files(host: &FakeHost) -> Vec<String> {
    host.files
        .keys()
        .filter(|p| p.starts_with(format!("{FLAGS}/pkg")))
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn apply_runs_steps_in_order_and_flags_them() {
    let mut host = host_with_package(&config_json());
    run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap();
    assert_eq!(
        host.programs(),
        [
            format!("{COPY_DIR}/skyhook_dir/one.sh"),
            format!("{COPY_DIR}/skyhook_dir/two.sh")
        ]
    );
    assert_eq!(host.commands[1].argv[1], "node-1");
    assert_eq!(host.text(format!("{FLAGS}/START")), Some(String::new()));
    let flags = flag_files(&host);
    assert_eq!(flags.len(), 2);
    assert_eq!(
        host.text(&flags[0]),
        Some("last_run: 2025-06-01T12:00:00.250000\nstep_always_runs: False".into())
    );

    // A second apply finds the flags and runs nothing.
    host.commands.clear();
    run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap();
    assert!(host.commands.is_empty());

    // OVERLAY_ALWAYS_RUN_STEP ignores them.
    run_mode(
        &mut host,
        Mode::Apply,
        &settings(&[("OVERLAY_ALWAYS_RUN_STEP", "true")]),
    )
    .unwrap();
    assert_eq!(host.commands.len(), 2);
}

#[test]
fn a_failing_step_stops_later_steps_and_leaves_no_flag() {
    let mut host = host_with_package(&config_json());
    host.exit_with(&[3]);
    let err = run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap_err();
    assert_eq!(err.kind(), "step_failed");
    assert!(
        err.to_string()
            .contains("exit code 3 is not one of its returncodes [0]"),
        "{err}"
    );
    assert_eq!(host.commands.len(), 1);
    assert!(flag_files(&host).is_empty());
}

#[test]
fn accepted_returncodes_count_as_success() {
    let mut config = config_json();
    config["modes"]["apply"][0]["returncodes"] = json!([0, 3]);
    let mut host = host_with_package(&config);
    host.exit_with(&[3]);
    run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap();
    assert_eq!(host.commands.len(), 2);
}

#[test]
fn checks_run_every_step_and_record_results() {
    let mut host = host_with_package(&config_json());
    host.exit_with(&[1, 0]);
    let err = run_mode(&mut host, Mode::ApplyCheck, &settings(&[])).unwrap_err();
    assert_eq!(err.kind(), "checks_failed");
    assert_eq!(host.commands.len(), 2);
    assert_eq!(
        host.text(format!("{FLAGS}/check_results")),
        Some("one_check.sh True\ntwo_check.sh False".into())
    );
    assert!(!host.exists(Path::new(&format!("{FLAGS}/apply-check_ALL_CHECKED"))));
    assert!(!host.exists(Path::new("/root/var/lib/skyhook/demo/history/pkg.json")));

    run_mode(&mut host, Mode::ApplyCheck, &settings(&[])).unwrap();
    assert!(host.exists(Path::new(&format!("{FLAGS}/apply-check_ALL_CHECKED"))));
    assert_eq!(
        host.text("/root/var/lib/skyhook/demo/history/pkg.json"),
        Some(r#"{"current-version": "1.0.0", "history": [{"version": "1.0.0", "time": "2025-06-01T12:00:00.250000+00:00"}]}"#.into())
    );
}

#[test]
fn uninstall_check_records_uninstalled_and_clears_flags() {
    let mut host = host_with_package(&config_json());
    run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap();
    run_mode(&mut host, Mode::Config, &settings(&[])).unwrap();
    assert_eq!(flag_files(&host).len(), 3);
    run_mode(&mut host, Mode::UninstallCheck, &settings(&[])).unwrap();
    assert!(flag_files(&host).is_empty());
    assert!(
        host.text("/root/var/lib/skyhook/demo/history/pkg.json")
            .unwrap()
            .starts_with(r#"{"current-version": "uninstalled""#)
    );
}

#[test]
fn a_corrupt_history_is_backed_up() {
    let mut host = host_with_package(&config_json());
    host.add_file("/root/var/lib/skyhook/demo/history/pkg.json", "{oops");
    run_mode(&mut host, Mode::ApplyCheck, &settings(&[])).unwrap();
    assert_eq!(
        host.text("/root/var/lib/skyhook/demo/history/pkg.json.backup"),
        Some("{oops".into())
    );
    assert!(
        host.text("/root/var/lib/skyhook/demo/history/pkg.json")
            .unwrap()
            .starts_with(r#"{"current-version": "1.0.0""#)
    );
}

#[test]
fn upgrade_passes_previous_and_current_versions() {
    let mut host = host_with_package(&config_json());
    host.add_file(
        "/root/var/lib/skyhook/demo/history/pkg.json",
        r#"{"current-version": "0.9.0", "history": []}"#,
    );
    run_mode(&mut host, Mode::Upgrade, &settings(&[])).unwrap();
    let command = &host.commands[0];
    assert_eq!(command.argv[1..], ["0.9.0", "1.0.0"]);
    assert_eq!(command.env["PREVIOUS_VERSION"], "0.9.0");
    assert_eq!(command.env["CURRENT_VERSION"], "1.0.0");
    run_mode(&mut host, Mode::UpgradeCheck, &settings(&[])).unwrap();
    assert!(
        host.text("/root/var/lib/skyhook/demo/history/pkg.json")
            .unwrap()
            .contains(r#""current-version": "1.0.0""#)
    );
}

#[test]
fn legacy_mode_copies_the_package_when_the_copy_dir_is_missing() {
    let mut host = FakeHost::default();
    add_package(&mut host, "/skyhook-package", &config_json());
    host.add_file("/etc/nvidia-bootstrap/node-files/node.txt", "n");
    run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap();
    assert!(host.exists(Path::new(&format!("{HOST_COPY}/config.json"))));
    assert_eq!(host.text(format!("{HOST_COPY}/node.txt")), Some("n".into()));
    assert_eq!(host.commands.len(), 2);
}

#[test]
fn root_dir_is_copied_onto_the_host_except_for_uninstall() {
    let mut host = host_with_package(&config_json());
    host.add_file(format!("{HOST_COPY}/root_dir/etc/demo.conf"), "x=1");
    run_mode(&mut host, Mode::Uninstall, &settings(&[])).unwrap();
    assert!(!host.exists(Path::new("/root/etc/demo.conf")));
    run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap();
    assert_eq!(host.text("/root/etc/demo.conf"), Some("x=1".into()));
}

#[test]
fn expected_config_files_must_exist_except_for_uninstall() {
    let mut config = config_json();
    config["expected_config_files"] = json!(["settings.conf"]);
    let mut host = host_with_package(&config);
    let err = run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap_err();
    assert_eq!(err.kind(), "invalid_package");
    assert!(
        err.to_string()
            .contains("expected config file settings.conf not found"),
        "{err}"
    );
    assert!(host.commands.is_empty());
    run_mode(&mut host, Mode::Uninstall, &settings(&[])).unwrap();
    host.add_file(format!("{HOST_COPY}/configmaps/settings.conf"), "");
    run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap();
}

#[test]
fn an_invalid_config_is_reported_before_anything_runs() {
    let mut config = config_json();
    config["modes"]["apply"][0]["returncodes"] = json!([]);
    let mut host = host_with_package(&config);
    let err = run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap_err();
    assert_eq!(err.kind(), "invalid_package");
    assert!(
        err.to_string()
            .contains("modes.apply[0] (step \"one\") field returncodes"),
        "{err}"
    );
    assert!(!host.exists(Path::new(&format!("{FLAGS}/START"))));

    let mut host = host_with_package(&config_json());
    host.files
        .remove(Path::new(&format!("{HOST_COPY}/skyhook_dir/two.sh")));
    let err = run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap_err();
    assert!(
        err.to_string()
            .contains("script skyhook_dir/two.sh does not exist"),
        "{err}"
    );
}

#[test]
fn a_missing_env_argument_fails_before_running() {
    let mut host = host_with_package(&config_json());
    let err = run(
        &mut host,
        &settings(&[]),
        &BTreeMap::new(),
        &request(Mode::Apply),
    )
    .unwrap_err();
    assert_eq!(err.kind(), "step_failed");
    assert!(err.to_string().contains("NODE_NAME"), "{err}");
    assert_eq!(host.commands.len(), 1, "only the first step ran");
}

#[test]
fn sigterm_stops_after_the_current_step() {
    let mut host = host_with_package(&config_json());
    host.sigterm_during_command = Some(0);
    let err = run_mode(&mut host, Mode::Apply, &settings(&[])).unwrap_err();
    assert_eq!(err.kind(), "terminated");
    assert_eq!(host.commands.len(), 1);
    // The step that was running finished and keeps its flag.
    assert_eq!(flag_files(&host).len(), 1);

    let mut host = host_with_package(&config_json());
    host.sigterm_during_command = Some(1);
    let err = run_mode(&mut host, Mode::ApplyCheck, &settings(&[])).unwrap_err();
    assert_eq!(err.kind(), "terminated");
    assert!(!host.exists(Path::new("/root/var/lib/skyhook/demo/history/pkg.json")));
}

#[test]
fn write_logs_false_keeps_no_log_target() {
    let mut host = host_with_package(&config_json());
    run_mode(
        &mut host,
        Mode::Config,
        &settings(&[("SKYHOOK_AGENT_WRITE_LOGS", "false")]),
    )
    .unwrap();
    assert_eq!(host.commands[0].log, None);
    run_mode(&mut host, Mode::Config, &settings(&[])).unwrap();
    assert_eq!(
        host.commands[1].log.as_ref().map(|l| l.dir.clone()),
        Some(PathBuf::from("/root/var/log/skyhook/demo/pkg/1.0.0"))
    );
}

#[test]
fn copy_resolv_copies_when_enabled_and_present() {
    let mut host = host_with_package(&config_json());
    host.add_file("/etc/resolv.conf", "nameserver 10.0.0.1\n");
    run_mode(
        &mut host,
        Mode::Config,
        &settings(&[("COPY_RESOLV", "true")]),
    )
    .unwrap();
    assert_eq!(
        host.text("/root/etc/resolv.conf"),
        Some("nameserver 10.0.0.1\n".into())
    );

    let mut host = host_with_package(&config_json());
    host.add_file("/etc/resolv.conf", "nameserver 10.0.0.1\n");
    run_mode(&mut host, Mode::Config, &settings(&[])).unwrap();
    assert!(!host.exists(Path::new("/root/etc/resolv.conf")));

    let mut host = host_with_package(&config_json());
    run_mode(
        &mut host,
        Mode::Config,
        &settings(&[("COPY_RESOLV", "true")]),
    )
    .unwrap();
}

fn interrupt_request(json: &str) -> Request {
    Request {
        interrupt_data: Some(STANDARD.encode(json)),
        ..request(Mode::Interrupt)
    }
}

const INTERRUPT_FLAGS: &str = "/root/var/lib/skyhook/demo/interrupts/flags/demo-uid-1_pkg_1.0.0";

#[test]
fn service_restart_runs_once_per_resource_id() {
    let mut host = FakeHost::default();
    let request = interrupt_request(r#"{"type": "service_restart", "services": ["containerd"]}"#);
    run(&mut host, &settings(&[]), &agent_env(), &request).unwrap();
    let argvs: Vec<Vec<String>> = host.commands.iter().map(|c| c.argv.clone()).collect();
    assert_eq!(
        argvs,
        [
            vec!["systemctl", "daemon-reload"],
            vec!["systemctl", "restart", "containerd"]
        ]
    );
    assert!(
        host.commands
            .iter()
            .all(|c| c.echo_command && !c.make_executable && c.cwd == COPY_DIR)
    );
    assert_eq!(
        host.commands[1]
            .log
            .as_ref()
            .map(|l| (l.dir.clone(), l.stem.clone())),
        Some((
            PathBuf::from("/root/var/log/skyhook/demo/pkg/1.0.0/interrupts"),
            "service_restart_1".into()
        ))
    );
    // The copy dir is created (upstream #181) and each marker is written after its command
    // succeeded, never while it runs.
    assert!(host.dirs.contains(Path::new(HOST_COPY)));
    let marker_writes: Vec<&Path> = host
        .changes
        .iter()
        .filter_map(|c| match c {
            FsChange::WriteFile { path, .. } if path.starts_with(INTERRUPT_FLAGS) => {
                Some(path.as_path())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        marker_writes,
        [
            Path::new(&format!("{INTERRUPT_FLAGS}/service_restart_0.complete")),
            Path::new(&format!("{INTERRUPT_FLAGS}/service_restart_1.complete"))
        ]
    );
    assert_eq!(
        host.text(format!("{INTERRUPT_FLAGS}/service_restart_0.complete")),
        Some("1748779200.25".into())
    );

    host.commands.clear();
    run(&mut host, &settings(&[]), &agent_env(), &request).unwrap();
    assert!(
        host.commands.is_empty(),
        "a second run for the same resource id does nothing"
    );

    let next_generation = settings(&[("SKYHOOK_RESOURCE_ID", "demo-uid-2_pkg_1.0.0")]);
    run(&mut host, &next_generation, &agent_env(), &request).unwrap();
    assert_eq!(host.commands.len(), 2);
}

#[test]
fn a_failed_interrupt_command_is_not_marked_and_runs_again() {
    let mut host = FakeHost::default();
    host.exit_with(&[0, 5]);
    let request = interrupt_request(r#"{"type": "service_restart", "services": ["a", "b"]}"#);
    let err = run(&mut host, &settings(&[]), &agent_env(), &request).unwrap_err();
    assert_eq!(err.kind(), "interrupt_failed");
    assert!(err.to_string().contains("systemctl restart a"), "{err}");
    assert!(host.exists(Path::new(&format!(
        "{INTERRUPT_FLAGS}/service_restart_0.complete"
    ))));
    assert!(!host.exists(Path::new(&format!(
        "{INTERRUPT_FLAGS}/service_restart_1.complete"
    ))));

    host.commands.clear();
    run(&mut host, &settings(&[]), &agent_env(), &request).unwrap();
    let argvs: Vec<String> = host.commands.iter().map(|c| c.argv.join(" ")).collect();
    assert_eq!(argvs, ["systemctl restart a", "systemctl restart b"]);
}

const BOOT_ID_FILE: &str = "/root/proc/sys/kernel/random/boot_id";

fn pending_marker() -> PathBuf {
    PathBuf::from(format!("{INTERRUPT_FLAGS}/node_restart_0.pending"))
}

fn complete_marker() -> PathBuf {
    PathBuf::from(format!("{INTERRUPT_FLAGS}/node_restart_0.complete"))
}

fn reboot_host(boot_id: &str) -> FakeHost {
    let mut host = FakeHost::default();
    host.add_file(BOOT_ID_FILE, format!("{boot_id}\n"));
    host
}

fn run_reboot(host: &mut FakeHost) -> Result<(), RunError> {
    let request = interrupt_request(r#"{"type": "node_restart"}"#);
    run(host, &settings(&[]), &agent_env(), &request)
}

#[test]
fn a_reboot_killed_by_sigterm_succeeds_and_the_next_boot_confirms_it() {
    for code in [-15, 143] {
        let mut host = reboot_host("boot-a");
        host.outcomes.push_back(CommandOutcome { code });
        run_reboot(&mut host).unwrap();
        assert_eq!(host.programs(), ["reboot"]);
        // The pending marker, holding the boot ID, was written before `reboot` ran.
        let pending_written = host.changes.iter().position(
            |c| matches!(c, FsChange::WriteFile { path, .. } if *path == pending_marker()),
        );
        assert!(pending_written.is_some(), "code {code}");
        assert_eq!(host.text(pending_marker()), Some("boot-a\n".into()));
        assert!(!host.exists(&complete_marker()));
        assert!(
            host.waits.is_empty(),
            "no wait after a SIGTERM-killed reboot"
        );

        // After the reboot the recreated pod runs the agent again on a new boot: the reboot is
        // confirmed, not repeated.
        host.commands.clear();
        host.add_file(BOOT_ID_FILE, "boot-b\n");
        run_reboot(&mut host).unwrap();
        assert!(host.commands.is_empty());
        assert!(host.exists(&complete_marker()));
        assert!(!host.exists(&pending_marker()));

        // And any later run of the same resource id does nothing.
        run_reboot(&mut host).unwrap();
        assert!(host.commands.is_empty());
    }
}

#[test]
fn an_unchanged_boot_id_means_the_reboot_did_not_happen_and_it_runs_again() {
    let mut host = reboot_host("boot-a");
    host.add_file(pending_marker(), "boot-a\n");
    host.outcomes.push_back(CommandOutcome { code: -15 });
    run_reboot(&mut host).unwrap();
    assert_eq!(host.programs(), ["reboot"]);
    assert_eq!(host.text(pending_marker()), Some("boot-a\n".into()));
    assert!(!host.exists(&complete_marker()));
}

#[test]
fn a_reboot_enqueued_but_not_happening_within_10s_fails() {
    let mut host = reboot_host("boot-a");
    host.exit_with(&[0]);
    let err = run_reboot(&mut host).unwrap_err();
    assert_eq!(err.kind(), "reboot_not_confirmed");
    assert!(
        err.to_string()
            .starts_with("reboot was enqueued but the host did not restart within 10s"),
        "{err}"
    );
    assert_eq!(host.waits, [std::time::Duration::from_secs(10)]);
    // The reboot may still come: the marker stays for the next run to judge by the boot ID.
    assert_eq!(host.text(pending_marker()), Some("boot-a\n".into()));
    assert!(!host.exists(&complete_marker()));
}

#[test]
fn sigterm_while_waiting_for_the_restart_fails_and_keeps_the_pending_marker() {
    let mut host = reboot_host("boot-a");
    host.exit_with(&[0]);
    host.sigterm_while_waiting = true;
    let err = run_reboot(&mut host).unwrap_err();
    assert_eq!(err.kind(), "terminated");
    assert!(host.exists(&pending_marker()));
    host.add_file(BOOT_ID_FILE, "boot-b");
    host.terminated = false;
    host.sigterm_while_waiting = false;
    run_reboot(&mut host).unwrap();
    assert!(host.exists(&complete_marker()));
    assert_eq!(host.commands.len(), 1, "no second reboot");
}

#[test]
fn a_reboot_that_fails_outright_leaves_no_marker() {
    let mut host = reboot_host("boot-a");
    host.exit_with(&[1]);
    let err = run_reboot(&mut host).unwrap_err();
    assert_eq!(err.kind(), "interrupt_failed");
    assert!(!host.exists(&complete_marker()));
    assert!(!host.exists(&pending_marker()));
}

#[test]
fn a_legacy_complete_marker_skips_the_reboot_and_an_unreadable_boot_id_fails() {
    let mut host = reboot_host("boot-a");
    host.add_file(complete_marker(), "1748779200.25");
    run_reboot(&mut host).unwrap();
    assert!(host.commands.is_empty());

    let mut host = FakeHost::default();
    let err = run_reboot(&mut host).unwrap_err();
    assert_eq!(err.kind(), "boot_id_unknown");
    assert!(err.to_string().contains(BOOT_ID_FILE), "{err}");
    assert!(host.commands.is_empty());
}

#[test]
fn sigterm_lets_the_running_interrupt_command_finish_and_mark_itself() {
    let mut host = FakeHost {
        sigterm_during_command: Some(0),
        ..FakeHost::default()
    };
    let request = interrupt_request(r#"{"type": "service_restart", "services": ["a"]}"#);
    let err = run(&mut host, &settings(&[]), &agent_env(), &request).unwrap_err();
    assert_eq!(err.kind(), "terminated");
    assert_eq!(host.commands.len(), 1, "the restart does not start");
    assert!(host.exists(Path::new(&format!(
        "{INTERRUPT_FLAGS}/service_restart_0.complete"
    ))));
    assert!(!host.exists(Path::new(&format!(
        "{INTERRUPT_FLAGS}/service_restart_1.complete"
    ))));
}

#[test]
fn a_relative_data_dir_is_refused() {
    let mut host = host_with_package(&config_json());
    let err = run_mode(
        &mut host,
        Mode::Apply,
        &settings(&[("SKYHOOK_DATA_DIR", "skyhook-package")]),
    )
    .unwrap_err();
    assert_eq!(err.kind(), "bad_input");
    assert!(err.to_string().contains("SKYHOOK_DATA_DIR"), "{err}");
    assert!(host.commands.is_empty());
}

#[test]
fn no_op_and_script_interrupts_run_nothing() {
    let mut host = FakeHost::default();
    run(
        &mut host,
        &settings(&[]),
        &agent_env(),
        &interrupt_request(r#"{"type": "no_op"}"#),
    )
    .unwrap();
    assert!(host.commands.is_empty());
    assert!(host.exists(Path::new(&format!("{INTERRUPT_FLAGS}/no_op.complete"))));

    let mut host = FakeHost::default();
    run(
        &mut host,
        &settings(&[]),
        &agent_env(),
        &interrupt_request(r#"{"type": "script_interrupt"}"#),
    )
    .unwrap();
    assert!(host.commands.is_empty());
    assert!(!host.files.keys().any(|p| p.starts_with(INTERRUPT_FLAGS)));
}

#[test]
fn interrupt_usage_errors_are_explained() {
    let mut host = FakeHost::default();
    let no_data = request(Mode::Interrupt);
    let err = run(&mut host, &settings(&[]), &agent_env(), &no_data).unwrap_err();
    assert_eq!(err.kind(), "bad_input");
    assert!(err.to_string().contains("needs the interrupt data"));

    let bad_id = settings(&[("SKYHOOK_RESOURCE_ID", "")]);
    let err = run(
        &mut host,
        &bad_id,
        &agent_env(),
        &interrupt_request(r#"{"type": "no_op"}"#),
    )
    .unwrap_err();
    assert_eq!(err.kind(), "bad_input");
    assert!(err.to_string().contains("SKYHOOK_RESOURCE_ID"));

    let bad_data = Request {
        interrupt_data: Some("***".into()),
        ..request(Mode::Interrupt)
    };
    let err = run(&mut host, &settings(&[]), &agent_env(), &bad_data).unwrap_err();
    assert_eq!(err.kind(), "bad_input");
    assert!(host.commands.is_empty());
}

#[test]
fn a_missing_copy_dir_is_provided_from_what_the_agent_has() {
    let copy_data = FsChange::CopyTree {
        from: "/skyhook-package".into(),
        root: ROOT.into(),
        dest: COPY_DIR.into(),
    };
    let copy_node_files = FsChange::CopyTree {
        from: LEGACY_NODE_FILES.into(),
        root: ROOT.into(),
        dest: COPY_DIR.into(),
    };
    let create = FsChange::CreateDir {
        path: HOST_COPY.into(),
    };
    let sources = |copy_dir_exists, data_dir_exists, node_files_exist| CopySources {
        copy_dir_exists,
        data_dir_exists,
        node_files_exist,
    };
    let cases = [
        (Mode::Apply, sources(true, true, true), vec![]),
        (Mode::Interrupt, sources(true, true, true), vec![]),
        (
            Mode::Apply,
            sources(false, true, false),
            vec![copy_data.clone()],
        ),
        (
            Mode::Apply,
            sources(false, true, true),
            vec![copy_data.clone(), copy_node_files.clone()],
        ),
        // A stage copies a missing data dir anyway, so the copy fails naming it.
        (
            Mode::Uninstall,
            sources(false, false, false),
            vec![copy_data.clone()],
        ),
        (
            Mode::Interrupt,
            sources(false, true, false),
            vec![copy_data.clone()],
        ),
        (
            Mode::Interrupt,
            sources(false, true, true),
            vec![copy_data.clone(), copy_node_files.clone()],
        ),
        (
            Mode::Interrupt,
            sources(false, false, false),
            vec![create.clone()],
        ),
        (
            Mode::Interrupt,
            sources(false, false, true),
            vec![create, copy_node_files],
        ),
    ];
    let settings = settings(&[]);
    for (mode, sources, want) in cases {
        let request = Request {
            mode,
            ..request(mode)
        };
        assert_eq!(
            copy_dir_changes(mode, sources, &settings, &request),
            want,
            "{mode} {sources:?}"
        );
    }
}

#[test]
fn an_interrupt_after_uninstall_removed_the_copy_dir_restores_the_package_first() {
    let mut host = FakeHost::default();
    add_package(&mut host, "/skyhook-package", &config_json());
    host.add_file("/etc/nvidia-bootstrap/node-files/node.txt", "n");
    let request = interrupt_request(r#"{"type": "service_restart", "services": ["containerd"]}"#);
    run(&mut host, &settings(&[]), &agent_env(), &request).unwrap();
    assert!(host.exists(Path::new(&format!("{HOST_COPY}/config.json"))));
    assert_eq!(host.text(format!("{HOST_COPY}/node.txt")), Some("n".into()));
    let copied = host
        .changes
        .iter()
        .position(|c| matches!(c, FsChange::CopyTree { .. }));
    let first_flag = host
        .changes
        .iter()
        .position(|c| matches!(c, FsChange::WriteFile { .. }));
    assert!(
        matches!((copied, first_flag), (Some(copy), Some(flag)) if copy < flag),
        "the copy comes before the interrupt runs: {:?}",
        host.changes
    );
    assert_eq!(host.commands.len(), 2);
}
