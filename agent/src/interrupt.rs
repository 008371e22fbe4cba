//! Interrupt mode: the commands an interrupt means and the exactly-once rules (flags written
//! before each command, kept across a reboot). The payload itself is decoded by
//! [`skyhook_api::interrupt_payload`], the codec the controller encodes with.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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

/// One interrupt command and its exactly-once flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCommand {
    /// `<type>_<i>`: names the flag (`.complete`) and the log.
    pub id: String,
    pub argv: Vec<String>,
    pub flag: PathBuf,
    /// The flag exists: the command already ran for this resource id.
    pub already_done: bool,
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

pub fn plan(
    interrupt: &InterruptPayload,
    flag_dir: &Path,
    existing: &BTreeSet<PathBuf>,
) -> InterruptPlan {
    if interrupt.type_ == AgentInterruptType::NoOp {
        return InterruptPlan::RecordNoOp {
            flag: flag_dir.join("no_op.complete"),
        };
    }
    let commands = commands(interrupt)
        .into_iter()
        .enumerate()
        .map(|(index, argv)| {
            let id = format!("{}_{index}", interrupt.type_);
            let flag = flag_dir.join(format!("{id}.complete"));
            PlannedCommand {
                already_done: existing.contains(&flag),
                id,
                argv,
                flag,
            }
        })
        .collect();
    InterruptPlan::Commands(commands)
}

/// What a finished interrupt command means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Succeeded,
    /// The command failed: remove its flag so a retry runs it again.
    Failed,
    /// The reboot is underway (the command or the agent was stopped by the shutdown's
    /// SIGTERM): keep the flag so the run after the reboot does not reboot again.
    RebootUnderway,
}

/// `SIGTERM` as an exit code: Python's -15, or a shell's 128+15.
const SIGTERM_CODES: [i32; 2] = [-15, 143];

pub fn judge(interrupt: &InterruptPayload, code: i32, terminated_during: bool) -> Verdict {
    let reboot = interrupt.type_ == AgentInterruptType::NodeRestart;
    if reboot && (terminated_during || SIGTERM_CODES.contains(&code)) {
        return Verdict::RebootUnderway;
    }
    if code == 0 {
        Verdict::Succeeded
    } else {
        Verdict::Failed
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
    fn flags_are_per_command_and_existing_ones_are_skipped() {
        let dir = Path::new("/s/interrupts/flags/demo-uid-1_pkg_1.0.0");
        let svc = service_restart(&["containerd"]);
        let existing = BTreeSet::from([dir.join("service_restart_0.complete")]);
        let InterruptPlan::Commands(commands) = plan(&svc, dir, &existing) else {
            panic!("expected commands");
        };
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[0].id, "service_restart_0");
        assert!(commands[0].already_done);
        assert_eq!(commands[1].flag, dir.join("service_restart_1.complete"));
        assert!(!commands[1].already_done);
        assert_eq!(
            plan(&NoOp.into(), dir, &BTreeSet::new()),
            InterruptPlan::RecordNoOp {
                flag: dir.join("no_op.complete")
            }
        );
        assert_eq!(
            plan(&ScriptInterrupt.into(), dir, &BTreeSet::new()),
            InterruptPlan::Commands(vec![])
        );
    }

    #[test]
    fn verdicts_keep_the_flag_only_for_an_interrupted_reboot() {
        let svc = service_restart(&[]);
        let cases = [
            (NodeRestart.into(), 0, false, Verdict::Succeeded),
            (NodeRestart.into(), -15, false, Verdict::RebootUnderway),
            (NodeRestart.into(), 143, false, Verdict::RebootUnderway),
            (NodeRestart.into(), 1, true, Verdict::RebootUnderway),
            (NodeRestart.into(), 1, false, Verdict::Failed),
            (NodeRestart.into(), -9, false, Verdict::Failed),
            (svc.clone(), 0, true, Verdict::Succeeded),
            (svc.clone(), -15, false, Verdict::Failed),
            (svc, 5, false, Verdict::Failed),
            (RestartAllServices.into(), 1, false, Verdict::Failed),
        ];
        for (interrupt, code, terminated, expected) in cases {
            assert_eq!(
                judge(&interrupt, code, terminated),
                expected,
                "{interrupt:?} code={code} terminated={terminated}"
            );
        }
    }
}
