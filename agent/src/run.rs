//! One agent run: observe the host, let [`crate::decide`] and [`crate::interrupt`] decide, and
//! carry the decisions out through a [`Host`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use skyhook_api::interrupt_payload::{AgentInterruptType, InterruptPayload};
use tracing::{error, info, warn};

use crate::config::{self, PackageConfig, Step};
use crate::decide::{self, RunReason, StageInput, StageVerdict, StepDecision};
use crate::history::HistoryState;
use crate::host::{CommandSpec, FsChange, Host, HostError};
use crate::interrupt::{
    self, CommandAction, InterruptPlan, Observed, PlannedCommand, REBOOT_CONFIRMATION_TIMEOUT,
    Verdict,
};
use crate::layout::{Layout, under_root};
use crate::mode::Mode;
use crate::problem::{self, Location, Problem};
use crate::settings::{ResourceId, Settings};
use crate::timefmt;

/// The positional command line of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub mode: Mode,
    pub root_mount: PathBuf,
    /// The package copy on the host, as a path inside the host root.
    pub copy_dir: String,
    pub interrupt_data: Option<String>,
}

/// Legacy node files the upstream operator once placed next to the agent.
const LEGACY_NODE_FILES: &str = "/etc/nvidia-bootstrap/node-files";

/// Why a run failed. Every one exits 1, as upstream; [`RunError::kind`] names the reason in
/// the agent's last log line.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("invalid package in {copy_dir}:\n{}", problem::render(problems))]
    InvalidPackage {
        copy_dir: PathBuf,
        problems: Vec<Problem>,
    },
    #[error("{mode} step {name:?} ({path}) failed: {reason}")]
    StepFailed {
        mode: Mode,
        name: String,
        path: String,
        reason: String,
    },
    #[error("{mode} failed: these checks did not pass: {}", failed.join(", "))]
    ChecksFailed { mode: Mode, failed: Vec<String> },
    #[error(
        "interrupt command `{command}` failed with exit code {code}; it is not marked complete, so a retry runs it again"
    )]
    InterruptFailed { command: String, code: i32 },
    #[error(
        "reboot was enqueued but the host did not restart within {}s; its pending marker {} stays, so the run after a reboot confirms it by the changed boot ID and a run on this boot reboots again",
        REBOOT_CONFIRMATION_TIMEOUT.as_secs(),
        pending.display()
    )]
    RebootNotConfirmed { pending: PathBuf },
    #[error(
        "cannot read the host's boot ID at {}; a reboot interrupt needs it to confirm the reboot afterwards (mount the host's /proc under the root mount)",
        path.display()
    )]
    BootIdUnknown { path: PathBuf },
    #[error("stopped by SIGTERM {when}; recorded as a failure")]
    Terminated { when: String },
    /// The environment or the interrupt data cannot be used.
    #[error("{0}")]
    BadInput(String),
    #[error(transparent)]
    Host(#[from] HostError),
}

impl RunError {
    /// A short name of the reason, for the `failure` field of the log line.
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::InvalidPackage { .. } => "invalid_package",
            RunError::StepFailed { .. } => "step_failed",
            RunError::ChecksFailed { .. } => "checks_failed",
            RunError::InterruptFailed { .. } => "interrupt_failed",
            RunError::RebootNotConfirmed { .. } => "reboot_not_confirmed",
            RunError::BootIdUnknown { .. } => "boot_id_unknown",
            RunError::Terminated { .. } => "terminated",
            RunError::BadInput(_) => "bad_input",
            RunError::Host(_) => "host_error",
        }
    }
}

/// Runs one mode (or an interrupt) to completion.
pub fn run(
    host: &mut impl Host,
    settings: &Settings,
    agent_env: &BTreeMap<String, String>,
    request: &Request,
) -> Result<(), RunError> {
    if !settings.data_dir.starts_with('/') {
        return Err(RunError::BadInput(format!(
            "SKYHOOK_DATA_DIR={:?} is not absolute; unset it (default /skyhook-package) or give an absolute path",
            settings.data_dir
        )));
    }
    if settings.copy_resolv {
        copy_resolv(host, &request.root_mount)?;
    }
    if request.mode == Mode::Interrupt {
        run_interrupt(host, settings, request)
    } else {
        run_stage(host, settings, agent_env, request)
    }
}

fn copy_resolv(host: &mut impl Host, root: &Path) -> Result<(), RunError> {
    let source = Path::new("/etc/resolv.conf");
    if host.exists(source) {
        host.apply(&FsChange::CopyFile {
            from: source.to_path_buf(),
            root: root.to_path_buf(),
            dest: "/etc/resolv.conf".into(),
        })?;
    } else {
        warn!("COPY_RESOLV is true but the agent has no /etc/resolv.conf to copy; skipping");
    }
    Ok(())
}

fn layout(settings: &Settings, request: &Request) -> Layout {
    Layout::new(&request.root_mount, &settings.root_dir, &settings.log_dir)
}

fn run_stage(
    host: &mut impl Host,
    settings: &Settings,
    agent_env: &BTreeMap<String, String>,
    request: &Request,
) -> Result<(), RunError> {
    let mode = request.mode;
    let copy_dir = ensure_copy_dir(host, settings, request)?;
    let config = load_config(host, &copy_dir)?;
    if !mode.is_uninstall() {
        overlay_root_dir(host, &copy_dir, &request.root_mount)?;
        require_config_files(host, &config, &copy_dir)?;
    }
    let layout = layout(settings, request);
    host.apply(&FsChange::WriteFile {
        path: layout.start_flag(),
        contents: Vec::new(),
    })?;
    if config.steps(mode).is_empty() {
        warn!(%mode, "there are no {mode} steps defined; nothing to run");
    }

    let history_file = layout.history_file(&config.package_name);
    let history = if mode.is_upgrade() {
        HistoryState::read(host.read(&history_file)?.as_deref())
    } else {
        HistoryState::Missing
    };
    let existing_flags: BTreeSet<PathBuf> = config
        .steps(mode)
        .iter()
        .map(|step| layout.step_flag(&config.package_name, &config.package_version, step))
        .filter(|flag| host.exists(flag))
        .collect();
    let input = StageInput {
        mode,
        config: &config,
        layout: &layout,
        copy_dir: &request.copy_dir,
        always_run_step: settings.always_run_step,
        write_logs: settings.write_logs,
        existing_flags: &existing_flags,
        history: &history,
        agent_env,
    };
    let check_failed = run_steps(host, &input)?;
    if host.terminate_requested() {
        return Err(RunError::Terminated {
            when: format!("during the last {mode} step"),
        });
    }

    let history = if mode.records_history() {
        HistoryState::read(host.read(&history_file)?.as_deref())
    } else {
        history
    };
    if history == HistoryState::Corrupt {
        warn!(file = %history_file.display(), "the history file is corrupt; moving it to .backup and starting a new one");
    }
    let conclusion = decide::conclude(
        mode,
        &config,
        &layout,
        &check_failed,
        &history,
        host.now().timestamp(),
    );
    for change in &conclusion.changes {
        host.apply(change)?;
    }
    match conclusion.verdict {
        StageVerdict::Succeeded => Ok(()),
        StageVerdict::ChecksFailed { failed } => Err(RunError::ChecksFailed { mode, failed }),
    }
}

/// What the agent has on its side to fill a missing copy dir with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CopySources {
    copy_dir_exists: bool,
    data_dir_exists: bool,
    node_files_exist: bool,
}

impl CopySources {
    fn observe(host: &impl Host, settings: &Settings, copy_dir: &Path) -> CopySources {
        CopySources {
            copy_dir_exists: host.exists(copy_dir),
            data_dir_exists: host.exists(Path::new(&settings.data_dir)),
            node_files_exist: host.exists(Path::new(LEGACY_NODE_FILES)),
        }
    }
}

/// The changes that provide the copy dir when it is missing: `SKYHOOK_DATA_DIR` copied there,
/// then the legacy node files when present. A stage copies the data dir even when it is missing,
/// so the copy fails naming it. An interrupt without a data dir still gets an empty copy dir,
/// the working directory of its commands (upstream #181); with one, it gets the package back,
/// since an uninstall's interrupt can run after the uninstall removed the copy.
fn copy_dir_changes(
    mode: Mode,
    sources: CopySources,
    settings: &Settings,
    request: &Request,
) -> Vec<FsChange> {
    if sources.copy_dir_exists {
        return Vec::new();
    }
    let root = &request.root_mount;
    let copy_tree = |from: &str| FsChange::CopyTree {
        from: PathBuf::from(from),
        root: root.clone(),
        dest: request.copy_dir.clone(),
    };
    let mut changes = Vec::new();
    if sources.data_dir_exists || mode != Mode::Interrupt {
        changes.push(copy_tree(&settings.data_dir));
    } else {
        changes.push(FsChange::CreateDir {
            path: under_root(root, &request.copy_dir),
        });
    }
    if sources.node_files_exist {
        changes.push(copy_tree(LEGACY_NODE_FILES));
    }
    changes
}

/// The package copy on the host. When it is missing (legacy mode, or an interrupt after an
/// uninstall removed it), it is made first; see [`copy_dir_changes`].
fn ensure_copy_dir(
    host: &mut impl Host,
    settings: &Settings,
    request: &Request,
) -> Result<PathBuf, RunError> {
    let copy_dir = under_root(&request.root_mount, &request.copy_dir);
    let sources = CopySources::observe(host, settings, &copy_dir);
    let changes = copy_dir_changes(request.mode, sources, settings, request);
    if !changes.is_empty() {
        info!(copy_dir = %copy_dir.display(), data_dir = %settings.data_dir, data_dir_exists = sources.data_dir_exists, "copy dir missing: copying the package to the host");
    }
    for change in &changes {
        host.apply(change)?;
    }
    Ok(copy_dir)
}

/// Copies the package's `root_dir`, when it has one, onto the host root.
fn overlay_root_dir(host: &mut impl Host, copy_dir: &Path, root: &Path) -> Result<(), RunError> {
    let root_dir = copy_dir.join("root_dir");
    if host.exists(&root_dir) {
        info!("copying the package's root_dir onto the host root");
        host.apply(&FsChange::CopyTree {
            from: root_dir,
            root: root.to_path_buf(),
            dest: "/".into(),
        })?;
    }
    Ok(())
}

/// Runs the planned steps of the mode in order. A failing step stops any other mode; check modes
/// run every check and return, per check that ran, whether it failed.
fn run_steps(host: &mut impl Host, input: &StageInput<'_>) -> Result<Vec<bool>, RunError> {
    let mode = input.mode;
    let mut check_failed = Vec::new();
    for planned in decide::plan_steps(input) {
        let step = planned.step;
        if host.terminate_requested() {
            return Err(RunError::Terminated {
                when: format!("before {mode} step {:?} ({})", step.name, step.path),
            });
        }
        let failure = match planned.decision {
            StepDecision::Skip { flag } => {
                info!(%mode, step = %step.name, path = %step.path, flag = %flag.display(), "skipping: the step already succeeded");
                continue;
            }
            StepDecision::MissingEnv { names } => {
                let reason = format!(
                    "expected environment variable(s) {} for its env: arguments do not exist; set them on the agent",
                    names.join(", ")
                );
                error!(%mode, step = %step.name, path = %step.path, "{reason}");
                Some(reason)
            }
            StepDecision::Run {
                command,
                flag,
                reason,
            } => run_step(host, mode, step, &command, flag, reason)?,
        };
        if mode.is_check() {
            check_failed.push(failure.is_some());
        } else if let Some(reason) = failure {
            return Err(RunError::StepFailed {
                mode,
                name: step.name.clone(),
                path: step.path.clone(),
                reason,
            });
        }
    }
    Ok(check_failed)
}

/// Runs one step and, when it succeeds outside a check mode, writes its flag. Returns why it
/// failed, if it did.
fn run_step(
    host: &mut impl Host,
    mode: Mode,
    step: &Step,
    command: &CommandSpec,
    flag: Option<PathBuf>,
    reason: RunReason,
) -> Result<Option<String>, RunError> {
    info!(%mode, step = %step.name, path = %step.path, arguments = ?step.arguments, returncodes = ?step.returncodes, ?reason, "running step");
    let outcome = host.run(command)?;
    if !step.returncodes.contains(&i64::from(outcome.code)) {
        error!(%mode, step = %step.name, code = outcome.code, returncodes = ?step.returncodes, "step failed");
        return Ok(Some(format!(
            "exit code {} is not one of its returncodes {:?}",
            outcome.code, step.returncodes
        )));
    }
    info!(%mode, step = %step.name, code = outcome.code, "step succeeded");
    if let Some(flag) = flag.filter(|_| !mode.is_check()) {
        let last_run = timefmt::local_naive(&host.now());
        host.apply(&FsChange::WriteFile {
            path: flag,
            contents: decide::flag_contents(&last_run, step).into_bytes(),
        })?;
    }
    Ok(None)
}

/// Reads and checks `config.json` in the copy dir; every step's script must exist.
fn load_config(host: &impl Host, copy_dir: &Path) -> Result<PackageConfig, RunError> {
    let invalid = |problems| RunError::InvalidPackage {
        copy_dir: copy_dir.to_path_buf(),
        problems,
    };
    let path = copy_dir.join("config.json");
    let Some(text) = host.read(&path)? else {
        return Err(invalid(vec![Problem::error(
            Location::File("config.json".into()),
            format!("{} does not exist", path.display()),
            "the package image must contain /skyhook-package/config.json",
        )]));
    };
    let loaded = config::parse(&String::from_utf8_lossy(&text));
    for warning in loaded.problems.iter().filter(|p| !p.is_error()) {
        warn!("{warning}");
    }
    let Some(config) = loaded.config else {
        return Err(invalid(loaded.problems));
    };
    let steps_dir = copy_dir.join("skyhook_dir");
    let missing = config::missing_scripts(&config, |path| host.exists(&steps_dir.join(path)));
    if !missing.is_empty() {
        return Err(invalid(missing));
    }
    Ok(config)
}

fn require_config_files(
    host: &impl Host,
    config: &PackageConfig,
    copy_dir: &Path,
) -> Result<(), RunError> {
    let configmaps = copy_dir.join("configmaps");
    let problems: Vec<Problem> = config
        .expected_config_files
        .iter()
        .filter(|name| !host.exists(&configmaps.join(name)))
        .map(|name| {
            Problem::error(
                Location::Field("expected_config_files".into()),
                format!("expected config file {name} not found in {}", configmaps.display()),
                format!(
                    "add the key {name:?} to the package's configMap in the Skyhook resource (spec.packages.<package>.configMap)"
                ),
            )
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(RunError::InvalidPackage {
            copy_dir: copy_dir.to_path_buf(),
            problems,
        })
    }
}

fn run_interrupt(
    host: &mut impl Host,
    settings: &Settings,
    request: &Request,
) -> Result<(), RunError> {
    let resource = ResourceId::parse(&settings.resource_id)
        .map_err(|err| RunError::BadInput(err.to_string()))?;
    let data = request.interrupt_data.as_deref().ok_or_else(|| {
        RunError::BadInput(
            "interrupt mode needs the interrupt data: skyhook-agent interrupt <root_mount> <copy_dir> <base64 JSON>"
                .into(),
        )
    })?;
    let interrupt =
        InterruptPayload::decode(data).map_err(|err| RunError::BadInput(err.to_string()))?;
    // The commands run with the copy dir as their working directory; it may be missing for this
    // generation of the package (upstream #181) or removed by an uninstall.
    ensure_copy_dir(host, settings, request)?;
    let layout = layout(settings, request);
    let flag_dir = layout.interrupt_flag_dir(&settings.resource_id);
    host.apply(&FsChange::CreateDir {
        path: flag_dir.clone(),
    })?;
    let observed = observe_interrupt(host, &interrupt, &flag_dir, &layout)?;
    let commands = match interrupt::plan(&interrupt, &flag_dir, &observed) {
        InterruptPlan::RecordNoOp { flag } => {
            host.apply(&FsChange::WriteFile {
                path: flag,
                contents: timefmt::epoch_seconds(host.now().timestamp()).into_bytes(),
            })?;
            info!(resource_id = %settings.resource_id, "no_op interrupt recorded");
            return Ok(());
        }
        InterruptPlan::Commands(commands) => commands,
    };
    if commands.is_empty() {
        info!(
            interrupt = interrupt.type_.as_str(),
            "nothing to run: the package's own scripts do this interrupt"
        );
    }
    for command in commands {
        if host.terminate_requested() {
            return Err(RunError::Terminated {
                when: format!("before interrupt command {}", command.argv.join(" ")),
            });
        }
        let spec = CommandSpec {
            root: request.root_mount.clone(),
            cwd: request.copy_dir.clone(),
            argv: command.argv.clone(),
            env: BTreeMap::new(),
            make_executable: false,
            echo_command: true,
            log: settings.write_logs.then(|| {
                layout.log_target(
                    &resource.package,
                    &resource.version,
                    &format!("interrupts/{}", command.id),
                )
            }),
        };
        carry_out_command(host, &interrupt, &layout, command, &spec)?;
    }
    Ok(())
}

/// The interrupt's markers that exist and, for a reboot, the host's boot ID.
fn observe_interrupt(
    host: &impl Host,
    interrupt: &InterruptPayload,
    flag_dir: &Path,
    layout: &Layout,
) -> Result<Observed, RunError> {
    let mut observed = Observed::default();
    for (complete, pending) in interrupt::markers(interrupt, flag_dir) {
        if host.exists(&complete) {
            observed.complete.insert(complete);
        }
        if let Some(pending) = pending
            && let Some(text) = host.read(&pending)?
        {
            let boot_id = String::from_utf8_lossy(&text).trim().to_owned();
            observed.pending.insert(pending, boot_id);
        }
    }
    if interrupt.type_ == AgentInterruptType::NodeRestart {
        observed.boot_id = read_boot_id(host, layout)?;
    }
    Ok(observed)
}

fn read_boot_id(host: &impl Host, layout: &Layout) -> Result<Option<String>, RunError> {
    Ok(host
        .read(&layout.boot_id_file())?
        .map(|text| String::from_utf8_lossy(&text).trim().to_owned())
        .filter(|id| !id.is_empty()))
}

/// A marker's contents: seconds since the epoch.
fn epoch_now(host: &impl Host) -> Vec<u8> {
    timefmt::epoch_seconds(host.now().timestamp()).into_bytes()
}

/// Carries out one planned command: skip it, confirm a reboot that happened, or run it and
/// mark it complete once it succeeded.
fn carry_out_command(
    host: &mut impl Host,
    interrupt: &InterruptPayload,
    layout: &Layout,
    command: PlannedCommand,
    spec: &CommandSpec,
) -> Result<(), RunError> {
    match &command.action {
        CommandAction::Skip => {
            info!(id = %command.id, "skipping interrupt command: it already ran for this resource id");
            return Ok(());
        }
        CommandAction::BootIdUnknown => {
            return Err(RunError::BootIdUnknown {
                path: layout.boot_id_file(),
            });
        }
        CommandAction::ConfirmReboot { ran_on, now } => {
            info!(id = %command.id, ran_on = %ran_on, boot_id = %now, "the host restarted since reboot ran (its boot ID changed): the reboot is complete");
            host.apply(&FsChange::WriteFile {
                path: command.complete.clone(),
                contents: epoch_now(host),
            })?;
            if let Some(pending) = command.pending {
                host.apply(&FsChange::RemoveFile { path: pending })?;
            }
            return Ok(());
        }
        CommandAction::Run {
            boot_id,
            stale_pending,
        } => {
            if let (Some(pending), Some(boot_id)) = (&command.pending, boot_id) {
                if *stale_pending {
                    warn!(id = %command.id, %boot_id, "reboot ran before but the host's boot ID is unchanged: the reboot did not happen; running it again");
                }
                host.apply(&FsChange::WriteFile {
                    path: pending.clone(),
                    contents: format!("{boot_id}\n").into_bytes(),
                })?;
            }
        }
    }
    info!(id = %command.id, command = %command.argv.join(" "), "running interrupt command");
    let outcome = host.run(spec)?;
    match interrupt::judge(interrupt, outcome.code) {
        Verdict::Succeeded => {
            host.apply(&FsChange::WriteFile {
                path: command.complete,
                contents: epoch_now(host),
            })?;
            Ok(())
        }
        Verdict::Failed => {
            if let Some(pending) = command.pending {
                host.apply(&FsChange::RemoveFile { path: pending })?;
            }
            Err(RunError::InterruptFailed {
                command: command.argv.join(" "),
                code: outcome.code,
            })
        }
        Verdict::RebootUnderway => {
            info!(id = %command.id, "reboot was stopped by SIGTERM: the shutdown has begun; the run after the reboot confirms it");
            Ok(())
        }
        Verdict::AwaitRestart => {
            info!(id = %command.id, timeout_secs = REBOOT_CONFIRMATION_TIMEOUT.as_secs(), "reboot was enqueued; waiting for the host to go down");
            let pending = command.pending.unwrap_or(command.complete);
            if host.wait_for_sigterm(REBOOT_CONFIRMATION_TIMEOUT) {
                return Err(RunError::Terminated {
                    when: format!(
                        "while waiting for the host to restart after reboot (the pending marker {} stays for the run after the reboot)",
                        pending.display()
                    ),
                });
            }
            Err(RunError::RebootNotConfirmed { pending })
        }
    }
}

#[cfg(test)]
mod tests;
