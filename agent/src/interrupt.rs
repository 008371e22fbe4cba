//! Interrupt mode: the commands an interrupt means and the exactly-once rules. A command's
//! `<type>_<i>.complete` marker is written after it succeeded; a reboot first writes
//! `<type>_<i>.pending` holding the host's boot ID, and the run after it compares boot IDs to
//! tell whether the reboot happened. The payload itself is decoded by
//! [`skyhook_api::interrupt_payload`], the codec the controller encodes with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use skyhook_api::interrupt_payload::{AgentInterruptType, InterruptPayload};

/// The commands of an interrupt, run in order inside the host root.
pub fn commands(interrupt: &InterruptPayload) -> Vec<Vec<String>> {
    let words = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match interrupt.type_ {
        AgentInterruptType::NodeRestart => vec![words(&["reboot"])],
        AgentInterruptType::ServiceRestart => {
            let mut commands = vec![words(&["systemctl", "daemon-reload"])];
            commands.extend(
                interrupt
                    .services
                    .iter()
                    .map(|service| words(&["systemctl", "restart", service])),
            );
            commands
        }
        // Despite its name this only reloads sysctl settings, as upstream.
        AgentInterruptType::RestartAllServices => {
            vec![words(&["service", "procps", "force-reload"])]
        }
        AgentInterruptType::NoOp | AgentInterruptType::ScriptInterrupt => Vec::new(),
    }
}

/// How long the host has to go down after `reboot` returned 0 before the reboot counts as failed.
/// `systemctl reboot` only enqueues the shutdown and returns at once.
pub const REBOOT_CONFIRMATION_TIMEOUT: Duration = Duration::from_secs(10);

/// What the host holds for an interrupt: its markers and, for a reboot, the boot ID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The `.complete` markers that exist.
    pub complete: BTreeSet<PathBuf>,
    /// The `.pending` markers that exist, with the boot ID written in each (trimmed).
    pub pending: BTreeMap<PathBuf, String>,
    /// The host's current boot ID (trimmed), when it could be read.
    pub boot_id: Option<String>,
}

/// One interrupt command and its exactly-once markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCommand {
    /// `<type>_<i>`: names the markers and the log.
    pub id: String,
    pub argv: Vec<String>,
    /// `<id>.complete`, written after the command succeeded (for a reboot: once the host came
    /// back with another boot ID).
    pub complete: PathBuf,
    /// `<id>.pending` (reboots only), written before `reboot` runs, holding the boot ID it ran on.
    pub pending: Option<PathBuf>,
    pub action: CommandAction,
}

/// What to do about one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandAction {
    /// Its `.complete` marker exists: it already ran for this resource id.
    Skip,
    /// A reboot ran on another boot: the host restarted. Write `.complete`, remove `.pending`.
    ConfirmReboot { ran_on: String, now: String },
    /// Run it. A reboot first writes `.pending` with `boot_id`; `stale_pending` says a pending
    /// marker of this same boot exists (the reboot did not happen) and is replaced.
    Run {
        boot_id: Option<String>,
        stale_pending: bool,
    },
    /// A reboot must run but the host's boot ID could not be read, so its completion could
    /// never be confirmed.
    BootIdUnknown,
}

/// The plan for an interrupt run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterruptPlan {
    /// `no_op` only records that it happened.
    RecordNoOp {
        flag: PathBuf,
    },
    Commands(Vec<PlannedCommand>),
}

/// The markers of each command of `interrupt`, as [`plan`] names them: (complete, pending).
pub fn markers(interrupt: &InterruptPayload, flag_dir: &Path) -> Vec<(PathBuf, Option<PathBuf>)> {
    plan(interrupt, flag_dir, &Observed::default())
        .commands()
        .iter()
        .map(|c| (c.complete.clone(), c.pending.clone()))
        .collect()
}

impl InterruptPlan {
    pub fn commands(&self) -> &[PlannedCommand] {
        match self {
            InterruptPlan::RecordNoOp { .. } => &[],
            InterruptPlan::Commands(commands) => commands,
        }
    }
}

pub fn plan(interrupt: &InterruptPayload, flag_dir: &Path, observed: &Observed) -> InterruptPlan {
    if interrupt.type_ == AgentInterruptType::NoOp {
        return InterruptPlan::RecordNoOp {
            flag: flag_dir.join("no_op.complete"),
        };
    }
    let reboot = interrupt.type_ == AgentInterruptType::NodeRestart;
    let commands = commands(interrupt)
        .into_iter()
        .enumerate()
        .map(|(index, argv)| {
            let id = format!("{}_{index}", interrupt.type_);
            let complete = flag_dir.join(format!("{id}.complete"));
            let pending = reboot.then(|| flag_dir.join(format!("{id}.pending")));
            let done = observed.complete.contains(&complete);
            let action = match &pending {
                None if done => CommandAction::Skip,
                None => CommandAction::Run {
                    boot_id: None,
                    stale_pending: false,
                },
                Some(pending) => reboot_action(
                    done,
                    observed.pending.get(pending).map(String::as_str),
                    observed.boot_id.as_deref(),
                ),
            };
            PlannedCommand {
                id,
                argv,
                complete,
                pending,
                action,
            }
        })
        .collect();
    InterruptPlan::Commands(commands)
}

/// What a reboot's markers and the host's boot ID mean. A `.complete` marker (ours, or the one
/// the Python agent wrote before rebooting) means done; a `.pending` marker from another boot
/// means the reboot happened; one from this boot means it did not, so it runs again.
pub fn reboot_action(
    complete: bool,
    pending_boot: Option<&str>,
    current_boot: Option<&str>,
) -> CommandAction {
    if complete {
        return CommandAction::Skip;
    }
    match (pending_boot, current_boot) {
        (_, None) => CommandAction::BootIdUnknown,
        (Some(ran_on), Some(now)) if ran_on != now => CommandAction::ConfirmReboot {
            ran_on: ran_on.to_owned(),
            now: now.to_owned(),
        },
        (pending, Some(now)) => CommandAction::Run {
            boot_id: Some(now.to_owned()),
            stale_pending: pending.is_some(),
        },
    }
}

/// What a finished interrupt command means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Write its `.complete` marker.
    Succeeded,
    /// It failed: nothing is marked (a reboot's `.pending` marker is removed: no reboot was
    /// asked for), so a retry runs it again.
    Failed,
    /// `reboot` was killed by SIGTERM: the shutdown has begun. A success; the `.pending`
    /// marker stays for the run after the reboot to confirm.
    RebootUnderway,
    /// `reboot` exited 0: the shutdown is enqueued. Wait up to
    /// [`REBOOT_CONFIRMATION_TIMEOUT`] for it; a host still up then is a failure.
    AwaitRestart,
}

/// Killed by SIGTERM: the chroot helper reports the signal as -15; a shell that got it exits
/// 128+15.
const SIGTERM_CODES: [i32; 2] = [-15, 143];

pub fn judge(interrupt: &InterruptPayload, code: i32) -> Verdict {
    let reboot = interrupt.type_ == AgentInterruptType::NodeRestart;
    match (reboot, code) {
        (true, code) if SIGTERM_CODES.contains(&code) => Verdict::RebootUnderway,
        (true, 0) => Verdict::AwaitRestart,
        (false, 0) => Verdict::Succeeded,
        _ => Verdict::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AgentInterruptType::*;

    fn service_restart(services: &[&str]) -> InterruptPayload {
        InterruptPayload {
            type_: ServiceRestart,
            services: services.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn commands_match_upstream() {
        let svc = service_restart(&["a", "b"]);
        assert_eq!(
            commands(&svc),
            [
                vec!["systemctl", "daemon-reload"],
                vec!["systemctl", "restart", "a"],
                vec!["systemctl", "restart", "b"]
            ]
        );
        assert_eq!(commands(&NodeRestart.into()), [vec!["reboot"]]);
        assert_eq!(
            commands(&RestartAllServices.into()),
            [vec!["service", "procps", "force-reload"]]
        );
        assert!(commands(&ScriptInterrupt.into()).is_empty());
    }

    #[test]
    fn markers_are_per_command_and_completed_ones_are_skipped() {
        let dir = Path::new("/s/interrupts/flags/demo-uid-1_pkg_1.0.0");
        let svc = service_restart(&["containerd"]);
        let observed = Observed {
            complete: BTreeSet::from([dir.join("service_restart_0.complete")]),
            ..Observed::default()
        };
        let commands = plan(&svc, dir, &observed).commands().to_vec();
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[0].id, "service_restart_0");
        assert_eq!(commands[0].action, CommandAction::Skip);
        assert_eq!(commands[1].complete, dir.join("service_restart_1.complete"));
        assert_eq!(commands[1].pending, None);
        assert_eq!(
            commands[1].action,
            CommandAction::Run {
                boot_id: None,
                stale_pending: false
            }
        );
        assert_eq!(
            plan(&NoOp.into(), dir, &Observed::default()),
            InterruptPlan::RecordNoOp {
                flag: dir.join("no_op.complete")
            }
        );
        assert_eq!(
            plan(&ScriptInterrupt.into(), dir, &Observed::default()),
            InterruptPlan::Commands(vec![])
        );
        assert_eq!(
            markers(&NodeRestart.into(), dir),
            [(
                dir.join("node_restart_0.complete"),
                Some(dir.join("node_restart_0.pending"))
            )]
        );
    }

    #[test]
    fn a_reboot_is_confirmed_by_a_changed_boot_id() {
        use CommandAction::*;
        let run = |stale_pending| Run {
            boot_id: Some("boot-a".into()),
            stale_pending,
        };
        // (complete marker, pending marker's boot ID, current boot ID) → action
        let cases = [
            (true, None, Some("boot-a"), Skip),
            (true, Some("boot-a"), Some("boot-a"), Skip),
            (true, None, None, Skip),
            (false, None, Some("boot-a"), run(false)),
            (false, Some("boot-a"), Some("boot-a"), run(true)),
            (
                false,
                Some("boot-z"),
                Some("boot-a"),
                ConfirmReboot {
                    ran_on: "boot-z".into(),
                    now: "boot-a".into(),
                },
            ),
            (false, None, None, BootIdUnknown),
            (false, Some("boot-z"), None, BootIdUnknown),
        ];
        for (complete, pending, current, expected) in cases {
            assert_eq!(
                reboot_action(complete, pending, current),
                expected,
                "complete={complete} pending={pending:?} current={current:?}"
            );
        }
        let dir = Path::new("/f");
        let observed = Observed {
            pending: BTreeMap::from([(dir.join("node_restart_0.pending"), "boot-z".into())]),
            boot_id: Some("boot-a".into()),
            ..Observed::default()
        };
        assert!(matches!(
            plan(&NodeRestart.into(), dir, &observed).commands()[0].action,
            ConfirmReboot { .. }
        ));
    }

    #[test]
    fn verdicts_follow_upstreams_reboot_rules() {
        let svc = service_restart(&[]);
        let cases = [
            (NodeRestart.into(), 0, Verdict::AwaitRestart),
            (NodeRestart.into(), -15, Verdict::RebootUnderway),
            (NodeRestart.into(), 143, Verdict::RebootUnderway),
            (NodeRestart.into(), 1, Verdict::Failed),
            (NodeRestart.into(), -9, Verdict::Failed),
            (svc.clone(), 0, Verdict::Succeeded),
            (svc.clone(), -15, Verdict::Failed),
            (svc, 5, Verdict::Failed),
            (RestartAllServices.into(), 0, Verdict::Succeeded),
            (RestartAllServices.into(), 1, Verdict::Failed),
        ];
        for (interrupt, code, expected) in cases {
            assert_eq!(
                judge(&interrupt, code),
                expected,
                "{interrupt:?} code={code}"
            );
        }
    }
}
