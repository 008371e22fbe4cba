//! The pure decisions of a stage run: which steps run or are skipped, with which command line
//! and environment, and what to write when the run ends. No I/O: the caller observes the host
//! (flags that exist, the history file, the agent's environment) and carries out the result.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use jiff::Timestamp;

use crate::config::{PackageConfig, Step};
use crate::history::{HistoryState, UNINSTALLED};
use crate::host::{CommandSpec, FsChange};
use crate::layout::Layout;
use crate::mode::Mode;

/// What the planner needs to know about the run and the host.
#[derive(Debug)]
pub struct StageInput<'a> {
    pub mode: Mode,
    pub config: &'a PackageConfig,
    pub layout: &'a Layout,
    /// The package copy on the host, as a path inside the host root.
    pub copy_dir: &'a str,
    /// `OVERLAY_ALWAYS_RUN_STEP`.
    pub always_run_step: bool,
    /// `SKYHOOK_AGENT_WRITE_LOGS`.
    pub write_logs: bool,
    /// The step flags of this mode that exist on the host.
    pub existing_flags: &'a BTreeSet<PathBuf>,
    /// The history file (read for upgrade modes).
    pub history: &'a HistoryState,
    /// The agent's own environment, for `env:NAME` arguments.
    pub agent_env: &'a BTreeMap<String, String>,
}

/// Why a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunReason {
    /// It has never succeeded (no flag).
    FlagMissing,
    /// `OVERLAY_ALWAYS_RUN_STEP=true`.
    AlwaysRunStep,
    /// config, upgrade and uninstall re-run every time.
    ModeAlwaysReruns,
    /// The step manages its own idempotence (`"idempotence": true`).
    SelfManaged,
    /// Check modes run every step.
    CheckMode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepDecision {
    /// The step already succeeded (its flag exists).
    Skip { flag: PathBuf },
    /// Run the command; on success write `flag` (non-check modes).
    Run {
        command: CommandSpec,
        flag: Option<PathBuf>,
        reason: RunReason,
    },
    /// An `env:NAME` argument names variables the agent does not have: the step fails.
    MissingEnv { names: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedStep<'a> {
    pub index: usize,
    pub step: &'a Step,
    pub decision: StepDecision,
}

/// Decides every step of the mode, in order.
pub fn plan_steps<'a>(input: &StageInput<'a>) -> Vec<PlannedStep<'a>> {
    let config = input.config;
    input
        .config
        .steps(input.mode)
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let flag = input
                .layout
                .step_flag(&config.package_name, &config.package_version, step);
            let decision = match run_reason(input, step, input.existing_flags.contains(&flag)) {
                None => StepDecision::Skip { flag },
                Some(reason) => match step_command(input, step) {
                    Ok(command) => StepDecision::Run {
                        command,
                        flag: (!input.mode.is_check()).then_some(flag),
                        reason,
                    },
                    Err(names) => StepDecision::MissingEnv { names },
                },
            };
            PlannedStep {
                index,
                step,
                decision,
            }
        })
        .collect()
}

/// Upstream's idempotence rule. `None` means skip.
fn run_reason(input: &StageInput<'_>, step: &Step, flag_exists: bool) -> Option<RunReason> {
    if input.mode.is_check() {
        return Some(RunReason::CheckMode);
    }
    if !flag_exists {
        return Some(RunReason::FlagMissing);
    }
    if input.always_run_step {
        return Some(RunReason::AlwaysRunStep);
    }
    if input.mode.always_reruns() {
        return Some(RunReason::ModeAlwaysReruns);
    }
    if step.idempotence {
        return Some(RunReason::SelfManaged);
    }
    None
}

/// Replaces `env:NAME` arguments with the agent's variables; returns the missing names.
pub fn substitute_arguments(
    arguments: &[String],
    agent_env: &BTreeMap<String, String>,
) -> Result<Vec<String>, Vec<String>> {
    let mut missing = Vec::new();
    let resolved = arguments
        .iter()
        .map(|argument| match argument.strip_prefix("env:") {
            // Upstream takes `arg.split("env:")[1]`: the name ends at a second "env:".
            Some(rest) => {
                let name = rest.split("env:").next().unwrap_or_default();
                match agent_env.get(name) {
                    Some(value) => value.clone(),
                    None => {
                        missing.push(name.to_string());
                        String::new()
                    }
                }
            }
            None => argument.clone(),
        })
        .collect();
    if missing.is_empty() {
        Ok(resolved)
    } else {
        Err(missing)
    }
}

/// The variables a step gets on top of the container and chroot environments, lowest
/// precedence first: the step's `env`, upgrade versions, `STEP_ROOT` and `SKYHOOK_DIR`.
pub fn step_env(input: &StageInput<'_>, step: &Step) -> BTreeMap<String, String> {
    let mut env = step.env.clone();
    if input.mode.is_upgrade() {
        env.insert(
            "CURRENT_VERSION".into(),
            input.config.package_version.clone(),
        );
        env.insert(
            "PREVIOUS_VERSION".into(),
            input.history.current_version().to_string(),
        );
    }
    env.insert("STEP_ROOT".into(), steps_dir(input.copy_dir));
    env.insert("SKYHOOK_DIR".into(), input.copy_dir.to_string());
    env
}

fn steps_dir(copy_dir: &str) -> String {
    format!("{copy_dir}/skyhook_dir")
}

fn step_command(input: &StageInput<'_>, step: &Step) -> Result<CommandSpec, Vec<String>> {
    let mut arguments = substitute_arguments(&step.arguments, input.agent_env)?;
    if step.upgrade_step && input.mode.is_upgrade() {
        arguments.push(input.history.current_version().to_string());
        arguments.push(input.config.package_version.clone());
    }
    let mut argv = vec![format!("{}/{}", steps_dir(input.copy_dir), step.path)];
    argv.extend(arguments);
    let config = input.config;
    Ok(CommandSpec {
        root: input.layout.root_mount().to_path_buf(),
        cwd: input.copy_dir.to_string(),
        argv,
        env: step_env(input, step),
        make_executable: true,
        echo_command: false,
        log: input.write_logs.then(|| {
            input
                .layout
                .log_target(&config.package_name, &config.package_version, &step.path)
        }),
    })
}

/// The contents of a step's completion flag.
pub fn flag_contents(last_run: &str, step: &Step) -> String {
    let always = if step.idempotence { "True" } else { "False" };
    format!("last_run: {last_run}\nstep_always_runs: {always}")
}

/// How a stage ends once its steps ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StageVerdict {
    Succeeded,
    /// Check mode: these step paths failed.
    ChecksFailed {
        failed: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conclusion {
    pub changes: Vec<FsChange>,
    pub verdict: StageVerdict,
}

/// What to write after every step of the mode ran: `check_results` and `<mode>_ALL_CHECKED`
/// for check modes, the history for apply-check/upgrade-check/uninstall-check, and the removal
/// of every step flag after uninstall-check. `check_failed[i]` says whether step i failed.
pub fn conclude(
    mode: Mode,
    config: &PackageConfig,
    layout: &Layout,
    check_failed: &[bool],
    history: &HistoryState,
    now: Timestamp,
) -> Conclusion {
    let mut changes = Vec::new();
    let steps = config.steps(mode);
    if mode.is_check() && !steps.is_empty() {
        // Upstream writes whether each step *failed*, as Python booleans.
        let lines: Vec<String> = steps
            .iter()
            .zip(check_failed)
            .map(|(step, failed)| {
                format!("{} {}", step.path, if *failed { "True" } else { "False" })
            })
            .collect();
        changes.push(FsChange::WriteFile {
            path: layout.check_results(),
            contents: lines.join("\n").into_bytes(),
        });
        let failed: Vec<String> = steps
            .iter()
            .zip(check_failed)
            .filter(|(_, failed)| **failed)
            .map(|(step, _)| step.path.clone())
            .collect();
        if !failed.is_empty() {
            return Conclusion {
                changes,
                verdict: StageVerdict::ChecksFailed { failed },
            };
        }
        changes.push(FsChange::WriteFile {
            path: layout.all_checked_flag(mode),
            contents: Vec::new(),
        });
    }
    if mode.records_history() {
        let file = layout.history_file(&config.package_name);
        if *history == HistoryState::Corrupt {
            let mut backup = file.clone().into_os_string();
            backup.push(".backup");
            changes.push(FsChange::Rename {
                from: file.clone(),
                to: PathBuf::from(backup),
            });
        }
        let version = if mode == Mode::UninstallCheck {
            UNINSTALLED
        } else {
            config.package_version.as_str()
        };
        changes.push(FsChange::WriteFile {
            path: file,
            contents: history.record(version, now).into_bytes(),
        });
        if mode == Mode::UninstallCheck {
            let flags: BTreeSet<PathBuf> = config
                .all_steps()
                .map(|(_, _, step)| {
                    layout.step_flag(&config.package_name, &config.package_version, step)
                })
                .collect();
            changes.extend(flags.into_iter().map(|path| FsChange::RemoveFile { path }));
        }
    }
    Conclusion {
        changes,
        verdict: StageVerdict::Succeeded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use serde_json::json;

    fn step_json(
        name: &str,
        path: &str,
        arguments: &[&str],
        idempotence: bool,
    ) -> serde_json::Value {
        json!({
            "name": name, "path": path, "arguments": arguments, "returncodes": [0],
            "on_host": true, "idempotence": idempotence, "upgrade_step": false
        })
    }

    fn config() -> PackageConfig {
        let mut upgrade = step_json("up", "up.sh", &[], false);
        upgrade["upgrade_step"] = true.into();
        let mut with_env = step_json("second", "b.sh", &["env:NODE", "x"], false);
        with_env["env"] =
            json!({"STEP_ROOT": "overridden", "MINE": "1", "CURRENT_VERSION": "mine"});
        let doc = json!({
            "schema_version": "v1", "package_name": "pkg", "package_version": "2.0.0",
            "expected_config_files": [],
            "modes": {
                "apply": [step_json("first", "a.sh", &["apply"], false), with_env.clone()],
                "apply-check": [step_json("check", "a_check.sh", &[], false), step_json("check2", "b_check.sh", &[], false)],
                "config": [step_json("cfg", "a.sh", &["config"], false)],
                "config-check": [step_json("cfg_check", "a_check.sh", &["config"], false)],
                "post-interrupt": [step_json("post", "a.sh", &["post"], true)],
                "post-interrupt-check": [step_json("post_check", "a_check.sh", &["post"], false)],
                "upgrade": [upgrade, with_env],
                "upgrade-check": [step_json("up_check", "up_check.sh", &[], false)],
                "uninstall": [step_json("rm", "a.sh", &["rm"], false)],
                "uninstall-check": [step_json("rm_check", "a_check.sh", &["rm"], false)]
            }
        });
        let loaded = parse(&doc.to_string());
        loaded
            .config
            .unwrap_or_else(|| panic!("{:?}", loaded.problems))
    }

    fn layout() -> Layout {
        Layout::new("/root", "/var/lib/skyhook/demo", "/var/log/skyhook/demo")
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    struct Case {
        mode: Mode,
        always_run_step: bool,
        flagged: bool,
    }

    fn plan(case: &Case, config: &PackageConfig) -> Vec<(String, Option<RunReason>)> {
        let layout = layout();
        let flags: BTreeSet<PathBuf> = if case.flagged {
            config
                .steps(case.mode)
                .iter()
                .map(|s| layout.step_flag("pkg", "2.0.0", s))
                .collect()
        } else {
            BTreeSet::new()
        };
        let agent_env = env(&[("NODE", "node-1")]);
        let input = StageInput {
            mode: case.mode,
            config,
            layout: &layout,
            copy_dir: "/var/lib/skyhook/demo/pkg-2.0.0-uid-1",
            always_run_step: case.always_run_step,
            write_logs: true,
            existing_flags: &flags,
            history: &HistoryState::Missing,
            agent_env: &agent_env,
        };
        plan_steps(&input)
            .into_iter()
            .map(|p| {
                let reason = match p.decision {
                    StepDecision::Run { reason, .. } => Some(reason),
                    StepDecision::Skip { .. } => None,
                    StepDecision::MissingEnv { .. } => panic!("unexpected missing env"),
                };
                (p.step.name.clone(), reason)
            })
            .collect()
    }

    #[test]
    fn idempotence_rules_match_upstream() {
        use RunReason::*;
        let config = config();
        let cases: &[(Case, &[Option<RunReason>])] = &[
            (
                Case {
                    mode: Mode::Apply,
                    always_run_step: false,
                    flagged: false,
                },
                &[Some(FlagMissing), Some(FlagMissing)],
            ),
            (
                Case {
                    mode: Mode::Apply,
                    always_run_step: false,
                    flagged: true,
                },
                &[None, None],
            ),
            (
                Case {
                    mode: Mode::Apply,
                    always_run_step: true,
                    flagged: true,
                },
                &[Some(AlwaysRunStep), Some(AlwaysRunStep)],
            ),
            (
                Case {
                    mode: Mode::Config,
                    always_run_step: false,
                    flagged: true,
                },
                &[Some(ModeAlwaysReruns)],
            ),
            (
                Case {
                    mode: Mode::Upgrade,
                    always_run_step: false,
                    flagged: true,
                },
                &[Some(ModeAlwaysReruns), Some(ModeAlwaysReruns)],
            ),
            (
                Case {
                    mode: Mode::Uninstall,
                    always_run_step: false,
                    flagged: true,
                },
                &[Some(ModeAlwaysReruns)],
            ),
            (
                Case {
                    mode: Mode::PostInterrupt,
                    always_run_step: false,
                    flagged: true,
                },
                &[Some(SelfManaged)],
            ),
            (
                Case {
                    mode: Mode::PostInterrupt,
                    always_run_step: false,
                    flagged: false,
                },
                &[Some(FlagMissing)],
            ),
            (
                Case {
                    mode: Mode::ApplyCheck,
                    always_run_step: false,
                    flagged: true,
                },
                &[Some(CheckMode), Some(CheckMode)],
            ),
        ];
        for (case, expected) in cases {
            let reasons: Vec<_> = plan(case, &config).into_iter().map(|(_, r)| r).collect();
            assert_eq!(
                &reasons, expected,
                "{} flagged={} always={}",
                case.mode, case.flagged, case.always_run_step
            );
        }
    }

    fn run_command(decision: &StepDecision) -> &CommandSpec {
        match decision {
            StepDecision::Run { command, .. } => command,
            other => panic!("expected a run, got {other:?}"),
        }
    }

    #[test]
    fn commands_carry_paths_arguments_and_environment() {
        let config = config();
        let layout = layout();
        let flags = BTreeSet::new();
        let agent_env = env(&[("NODE", "node-1")]);
        let input = StageInput {
            mode: Mode::Apply,
            config: &config,
            layout: &layout,
            copy_dir: "/var/lib/skyhook/demo/pkg-2.0.0-uid-1",
            always_run_step: false,
            write_logs: true,
            existing_flags: &flags,
            history: &HistoryState::Missing,
            agent_env: &agent_env,
        };
        let planned = plan_steps(&input);
        let command = run_command(&planned[1].decision);
        assert_eq!(command.root, PathBuf::from("/root"));
        assert_eq!(command.cwd, "/var/lib/skyhook/demo/pkg-2.0.0-uid-1");
        assert_eq!(
            command.argv,
            [
                "/var/lib/skyhook/demo/pkg-2.0.0-uid-1/skyhook_dir/b.sh",
                "node-1",
                "x"
            ]
        );
        // SKYHOOK_DIR and STEP_ROOT win over the step's own env; upgrade versions only in
        // upgrade modes.
        assert_eq!(
            command.env,
            env(&[
                ("CURRENT_VERSION", "mine"),
                ("MINE", "1"),
                ("SKYHOOK_DIR", "/var/lib/skyhook/demo/pkg-2.0.0-uid-1"),
                (
                    "STEP_ROOT",
                    "/var/lib/skyhook/demo/pkg-2.0.0-uid-1/skyhook_dir"
                ),
            ])
        );
        assert!(command.make_executable);
        assert_eq!(
            command.log.as_ref().map(|l| l.dir.clone()),
            Some(PathBuf::from("/root/var/log/skyhook/demo/pkg/2.0.0"))
        );
        // The flag is named after the arguments as written, before substitution.
        match &planned[1].decision {
            StepDecision::Run {
                flag: Some(flag), ..
            } => {
                assert_eq!(flag, &layout.step_flag("pkg", "2.0.0", planned[1].step));
                assert!(flag.to_string_lossy().contains("b.sh_"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn upgrade_steps_get_versions_as_env_and_arguments() {
        let config = config();
        let layout = layout();
        let flags = BTreeSet::new();
        let agent_env = env(&[("NODE", "n")]);
        let history = HistoryState::read(Some(br#"{"current-version": "1.0.0", "history": []}"#));
        for (history, previous) in [
            (&history, "1.0.0"),
            (&HistoryState::Missing, "unknown"),
            (&HistoryState::Corrupt, "unknown"),
        ] {
            let input = StageInput {
                mode: Mode::Upgrade,
                config: &config,
                layout: &layout,
                copy_dir: "/c",
                always_run_step: false,
                write_logs: false,
                existing_flags: &flags,
                history,
                agent_env: &agent_env,
            };
            let planned = plan_steps(&input);
            let upgrade = run_command(&planned[0].decision);
            assert_eq!(upgrade.argv, ["/c/skyhook_dir/up.sh", previous, "2.0.0"]);
            assert_eq!(upgrade.env["PREVIOUS_VERSION"], previous);
            assert_eq!(upgrade.env["CURRENT_VERSION"], "2.0.0");
            assert_eq!(upgrade.log, None);
            // A plain step in upgrade mode gets the env (overriding its own) but no arguments.
            let plain = run_command(&planned[1].decision);
            assert_eq!(plain.argv, ["/c/skyhook_dir/b.sh", "n", "x"]);
            assert_eq!(plain.env["CURRENT_VERSION"], "2.0.0");
        }
    }

    #[test]
    fn env_arguments_are_substituted_or_reported() {
        let agent_env = env(&[("A", "1"), ("EMPTY", "")]);
        let args = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            substitute_arguments(
                &args(&["env:A", "plain", "env:EMPTY", "xenv:A"]),
                &agent_env
            ),
            Ok(args(&["1", "plain", "", "xenv:A"]))
        );
        assert_eq!(
            substitute_arguments(&args(&["env:B", "env:A", "env:C"]), &agent_env),
            Err(args(&["B", "C"]))
        );
        // Upstream's split("env:")[1]: the name stops at a second "env:".
        assert_eq!(
            substitute_arguments(&args(&["env:Aenv:B"]), &agent_env),
            Ok(args(&["1"]))
        );
        assert_eq!(
            substitute_arguments(&args(&["env:"]), &agent_env),
            Err(args(&[""]))
        );
    }

    #[test]
    fn a_missing_env_argument_fails_the_step_without_running_it() {
        let config = config();
        let layout = layout();
        let flags = BTreeSet::new();
        let agent_env = BTreeMap::new();
        let input = StageInput {
            mode: Mode::Apply,
            config: &config,
            layout: &layout,
            copy_dir: "/c",
            always_run_step: false,
            write_logs: true,
            existing_flags: &flags,
            history: &HistoryState::Missing,
            agent_env: &agent_env,
        };
        let planned = plan_steps(&input);
        assert_eq!(
            planned[1].decision,
            StepDecision::MissingEnv {
                names: vec!["NODE".into()]
            }
        );
    }

    #[test]
    fn flag_contents_match_upstream() {
        let config = config();
        assert_eq!(
            flag_contents("2025-06-01T12:00:00.123456", &config.steps(Mode::Apply)[0]),
            "last_run: 2025-06-01T12:00:00.123456\nstep_always_runs: False"
        );
        assert_eq!(
            flag_contents("t", &config.steps(Mode::PostInterrupt)[0]),
            "last_run: t\nstep_always_runs: True"
        );
    }

    fn written(changes: &[FsChange]) -> BTreeMap<String, String> {
        changes
            .iter()
            .filter_map(|c| match c {
                FsChange::WriteFile { path, contents } => Some((
                    path.to_string_lossy().into_owned(),
                    String::from_utf8_lossy(contents).into_owned(),
                )),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn passing_checks_write_results_all_checked_and_history() {
        let config = config();
        let now: Timestamp = "2025-06-01T12:00:00Z".parse().unwrap();
        let conclusion = conclude(
            Mode::ApplyCheck,
            &config,
            &layout(),
            &[false, false],
            &HistoryState::Missing,
            now,
        );
        assert_eq!(conclusion.verdict, StageVerdict::Succeeded);
        let files = written(&conclusion.changes);
        assert_eq!(
            files["/root/var/lib/skyhook/demo/flags/check_results"],
            "a_check.sh False\nb_check.sh False"
        );
        assert_eq!(
            files["/root/var/lib/skyhook/demo/flags/apply-check_ALL_CHECKED"],
            ""
        );
        assert_eq!(
            files["/root/var/lib/skyhook/demo/history/pkg.json"],
            r#"{"current-version": "2.0.0", "history": [{"version": "2.0.0", "time": "2025-06-01T12:00:00+00:00"}]}"#
        );
    }

    #[test]
    fn a_failing_check_writes_results_only() {
        let config = config();
        let now = Timestamp::UNIX_EPOCH;
        let conclusion = conclude(
            Mode::ApplyCheck,
            &config,
            &layout(),
            &[false, true],
            &HistoryState::Missing,
            now,
        );
        assert_eq!(
            conclusion.verdict,
            StageVerdict::ChecksFailed {
                failed: vec!["b_check.sh".into()]
            }
        );
        let files = written(&conclusion.changes);
        assert_eq!(files.len(), 1);
        assert_eq!(
            files["/root/var/lib/skyhook/demo/flags/check_results"],
            "a_check.sh False\nb_check.sh True"
        );
    }

    #[test]
    fn config_check_records_no_history() {
        let conclusion = conclude(
            Mode::ConfigCheck,
            &config(),
            &layout(),
            &[false],
            &HistoryState::Missing,
            Timestamp::UNIX_EPOCH,
        );
        let files = written(&conclusion.changes);
        assert_eq!(files.len(), 2);
        assert!(files.keys().all(|k| !k.contains("history")));
    }

    #[test]
    fn uninstall_check_records_uninstalled_and_removes_every_step_flag() {
        let config = config();
        let layout = layout();
        let conclusion = conclude(
            Mode::UninstallCheck,
            &config,
            &layout,
            &[false],
            &HistoryState::Corrupt,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(
            conclusion.changes[2],
            FsChange::Rename {
                from: PathBuf::from("/root/var/lib/skyhook/demo/history/pkg.json"),
                to: PathBuf::from("/root/var/lib/skyhook/demo/history/pkg.json.backup"),
            }
        );
        let files = written(&conclusion.changes);
        assert!(
            files["/root/var/lib/skyhook/demo/history/pkg.json"]
                .starts_with(r#"{"current-version": "uninstalled""#)
        );
        let removed: BTreeSet<PathBuf> = conclusion
            .changes
            .iter()
            .filter_map(|c| match c {
                FsChange::RemoveFile { path } => Some(path.clone()),
                _ => None,
            })
            .collect();
        let expected: BTreeSet<PathBuf> = config
            .all_steps()
            .map(|(_, _, s)| layout.step_flag("pkg", "2.0.0", s))
            .collect();
        assert_eq!(removed, expected);
        assert!(removed.len() >= 8);
    }

    #[test]
    fn a_mode_without_steps_still_records_history_for_upgrade_check() {
        let mut config = config();
        config.modes.remove(&Mode::UpgradeCheck);
        let conclusion = conclude(
            Mode::UpgradeCheck,
            &config,
            &layout(),
            &[],
            &HistoryState::Missing,
            Timestamp::UNIX_EPOCH,
        );
        let files = written(&conclusion.changes);
        assert_eq!(files.len(), 1);
        assert!(files.contains_key("/root/var/lib/skyhook/demo/history/pkg.json"));
    }
}
