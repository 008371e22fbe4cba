//! Interrupt mode: decoding the operator's interrupt, the commands it means, and the
//! exactly-once rules (flags written before each command, kept across a reboot).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::Value;

/// An interrupt as the operator encodes it: base64 of `{"type": "...", ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interrupt {
    NodeRestart,
    ServiceRestart { services: Vec<String> },
    RestartAllServices,
    NoOp,
    ScriptInterrupt,
}

const TYPES: &str = "node_restart, service_restart, restart_all_services, no_op, script_interrupt";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InterruptError {
    #[error(
        "interrupt data is not base64 of a JSON object with a \"type\"; pass base64 of e.g. {{\"type\": \"service_restart\", \"services\": [\"containerd\"]}}"
    )]
    Encoding,
    #[error("unknown interrupt type {0:?}; use one of {TYPES}")]
    UnknownType(String),
    #[error(
        "service_restart needs \"services\": a list of unit names, e.g. {{\"type\": \"service_restart\", \"services\": [\"containerd\"]}}"
    )]
    Services,
}

impl Interrupt {
    pub fn decode(encoded: &str) -> Result<Self, InterruptError> {
        // Python's b64decode accepts input with or without padding.
        let engine = GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
        );
        let bytes = engine
            .decode(encoded.trim())
            .map_err(|_| InterruptError::Encoding)?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|_| InterruptError::Encoding)?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .ok_or(InterruptError::Encoding)?;
        match kind {
            "node_restart" => Ok(Interrupt::NodeRestart),
            "restart_all_services" => Ok(Interrupt::RestartAllServices),
            "no_op" => Ok(Interrupt::NoOp),
            "script_interrupt" => Ok(Interrupt::ScriptInterrupt),
            "service_restart" => {
                let services = value
                    .get("services")
                    .and_then(Value::as_array)
                    .ok_or(InterruptError::Services)?
                    .iter()
                    .map(|s| s.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or(InterruptError::Services)?;
                Ok(Interrupt::ServiceRestart { services })
            }
            other => Err(InterruptError::UnknownType(other.to_string())),
        }
    }

    /// The type name used in flag and log names.
    pub fn type_name(&self) -> &'static str {
        match self {
            Interrupt::NodeRestart => "node_restart",
            Interrupt::ServiceRestart { .. } => "service_restart",
            Interrupt::RestartAllServices => "restart_all_services",
            Interrupt::NoOp => "no_op",
            Interrupt::ScriptInterrupt => "script_interrupt",
        }
    }

    /// The commands, run in order inside the host root.
    pub fn commands(&self) -> Vec<Vec<String>> {
        let words = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self {
            Interrupt::NodeRestart => vec![words(&["reboot"])],
            Interrupt::ServiceRestart { services } => {
                let mut commands = vec![words(&["systemctl", "daemon-reload"])];
                commands.extend(
                    services
                        .iter()
                        .map(|service| words(&["systemctl", "restart", service])),
                );
                commands
            }
            // Despite its name this only reloads sysctl settings, as upstream.
            Interrupt::RestartAllServices => vec![words(&["service", "procps", "force-reload"])],
            Interrupt::NoOp | Interrupt::ScriptInterrupt => Vec::new(),
        }
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

pub fn plan(interrupt: &Interrupt, flag_dir: &Path, existing: &BTreeSet<PathBuf>) -> InterruptPlan {
    if *interrupt == Interrupt::NoOp {
        return InterruptPlan::RecordNoOp {
            flag: flag_dir.join("no_op.complete"),
        };
    }
    let commands = interrupt
        .commands()
        .into_iter()
        .enumerate()
        .map(|(index, argv)| {
            let id = format!("{}_{index}", interrupt.type_name());
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

pub fn judge(interrupt: &Interrupt, code: i32, terminated_during: bool) -> Verdict {
    let reboot = *interrupt == Interrupt::NodeRestart;
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
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};

    fn encode(json: &str) -> String {
        STANDARD.encode(json)
    }

    #[test]
    fn every_type_decodes() {
        let cases = [
            (r#"{"type": "node_restart"}"#, Interrupt::NodeRestart),
            (
                r#"{"type": "service_restart", "services": ["containerd", "kubelet"]}"#,
                Interrupt::ServiceRestart {
                    services: vec!["containerd".into(), "kubelet".into()],
                },
            ),
            (
                r#"{"type": "restart_all_services"}"#,
                Interrupt::RestartAllServices,
            ),
            (r#"{"type": "no_op"}"#, Interrupt::NoOp),
            (
                r#"{"type": "script_interrupt"}"#,
                Interrupt::ScriptInterrupt,
            ),
        ];
        for (json, expected) in cases {
            assert_eq!(
                Interrupt::decode(&encode(json)),
                Ok(expected.clone()),
                "{json}"
            );
            assert_eq!(
                Interrupt::decode(&STANDARD_NO_PAD.encode(json)),
                Ok(expected)
            );
        }
    }

    #[test]
    fn bad_interrupt_data_is_explained() {
        assert_eq!(Interrupt::decode("%%%"), Err(InterruptError::Encoding));
        assert_eq!(
            Interrupt::decode(&encode("[1]")),
            Err(InterruptError::Encoding)
        );
        assert_eq!(
            Interrupt::decode(&encode(r#"{"type": "reboot"}"#)),
            Err(InterruptError::UnknownType("reboot".into()))
        );
        assert_eq!(
            Interrupt::decode(&encode(r#"{"type": "service_restart"}"#)),
            Err(InterruptError::Services)
        );
        let message = InterruptError::UnknownType("x".into()).to_string();
        assert!(message.contains("node_restart, service_restart"));
    }

    #[test]
    fn commands_match_upstream() {
        let svc = Interrupt::ServiceRestart {
            services: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            svc.commands(),
            [
                vec!["systemctl", "daemon-reload"],
                vec!["systemctl", "restart", "a"],
                vec!["systemctl", "restart", "b"]
            ]
        );
        assert_eq!(Interrupt::NodeRestart.commands(), [vec!["reboot"]]);
        assert_eq!(
            Interrupt::RestartAllServices.commands(),
            [vec!["service", "procps", "force-reload"]]
        );
        assert!(Interrupt::ScriptInterrupt.commands().is_empty());
    }

    #[test]
    fn flags_are_per_command_and_existing_ones_are_skipped() {
        let dir = Path::new("/s/interrupts/flags/demo-uid-1_pkg_1.0.0");
        let svc = Interrupt::ServiceRestart {
            services: vec!["containerd".into()],
        };
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
            plan(&Interrupt::NoOp, dir, &BTreeSet::new()),
            InterruptPlan::RecordNoOp {
                flag: dir.join("no_op.complete")
            }
        );
        assert_eq!(
            plan(&Interrupt::ScriptInterrupt, dir, &BTreeSet::new()),
            InterruptPlan::Commands(vec![])
        );
    }

    #[test]
    fn verdicts_keep_the_flag_only_for_an_interrupted_reboot() {
        let svc = Interrupt::ServiceRestart { services: vec![] };
        let cases = [
            (Interrupt::NodeRestart, 0, false, Verdict::Succeeded),
            (Interrupt::NodeRestart, -15, false, Verdict::RebootUnderway),
            (Interrupt::NodeRestart, 143, false, Verdict::RebootUnderway),
            (Interrupt::NodeRestart, 1, true, Verdict::RebootUnderway),
            (Interrupt::NodeRestart, 1, false, Verdict::Failed),
            (Interrupt::NodeRestart, -9, false, Verdict::Failed),
            (svc.clone(), 0, true, Verdict::Succeeded),
            (svc.clone(), -15, false, Verdict::Failed),
            (svc, 5, false, Verdict::Failed),
            (Interrupt::RestartAllServices, 1, false, Verdict::Failed),
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
