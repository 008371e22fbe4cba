//! The command line: upstream's positional forms, parsed exactly as upstream does, and the
//! `validate` subcommand, `--help` and `--version` through clap.

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::execute::chroot::CHROOT_EXEC_ARG;
use crate::exit::Exit;
use crate::mode::Mode;
use crate::run::Request;
use crate::settings::VARIABLES;

/// Where upstream's legacy forms put the host root.
const LEGACY_ROOT_MOUNT: &str = "/root";

const USAGE: &str = "skyhook-agent <MODE> <ROOT_MOUNT> <COPY_DIR> [INTERRUPT_DATA]\n       \
     skyhook-agent <MODE> <COPY_DIR>                 (legacy: ROOT_MOUNT=/root)\n       \
     skyhook-agent interrupt <COPY_DIR> <INTERRUPT_DATA>  (legacy: ROOT_MOUNT=/root)\n       \
     skyhook-agent validate <PACKAGE_DIR>";

/// Runs a Skyhook package's lifecycle stages on the host, compatible with upstream packages.
#[derive(Debug, Parser)]
#[command(name = "skyhook-agent", version, override_usage = USAGE)]
struct Cli {
    #[command(subcommand)]
    command: Option<Subcommands>,
}

#[derive(Debug, Subcommand)]
enum Subcommands {
    /// Check a package directory before publishing it: config.json against schema v1, the step
    /// rules, and that every step script exists and is executable.
    Validate {
        /// The package directory (holding config.json, skyhook_dir/ and optionally root_dir/).
        package_dir: PathBuf,
    },
}

fn long_help() -> String {
    let modes = Mode::ALL.map(Mode::as_str).join(", ");
    let variables = VARIABLES
        .iter()
        .map(|(name, default, meaning)| format!("  {name} (default {default}): {meaning}"))
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        "MODES: {modes}\n\
         \n\
         ROOT_MOUNT is where the host's / is mounted; COPY_DIR is the package copy on the host\n\
         (a path inside ROOT_MOUNT). interrupt takes INTERRUPT_DATA, base64 of\n\
         {{\"type\": \"node_restart|service_restart|restart_all_services|no_op|script_interrupt\", ...}}.\n\
         \n\
         ENVIRONMENT:\n{variables}\n\
         \n\
         EXIT CODES:\n{}",
        Exit::table()
    )
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    Run(Request),
    Validate {
        package_dir: PathBuf,
    },
    /// Internal: the chroot helper (see `execute::chroot`).
    ChrootExec {
        spec: String,
    },
}

/// A command-line problem: either clap's own output (help, version, its errors) or ours.
#[derive(Debug)]
pub enum CliError {
    Clap(clap::Error),
    Usage(String),
}

impl CliError {
    pub fn exit(&self) -> Exit {
        match self {
            CliError::Clap(err) if err.exit_code() == 0 => Exit::Success,
            CliError::Clap(_) | CliError::Usage(_) => Exit::Usage,
        }
    }
}

/// Parses `args` (including the program name).
pub fn parse(args: &[String]) -> Result<Invocation, CliError> {
    let rest = args.get(1..).unwrap_or_default();
    match rest.first().map(String::as_str) {
        Some(CHROOT_EXEC_ARG) if rest.len() == 2 => {
            return Ok(Invocation::ChrootExec {
                spec: rest[1].clone(),
            });
        }
        None => {
            return Err(CliError::Usage(format!(
                "missing arguments\nusage: {USAGE}\nsee skyhook-agent --help"
            )));
        }
        Some(first) if first == "validate" || first == "help" || first.starts_with('-') => {
            return parse_with_clap(args);
        }
        Some(_) => {}
    }
    parse_positional(rest).map(Invocation::Run)
}

fn parse_with_clap(args: &[String]) -> Result<Invocation, CliError> {
    let command = Cli::command().after_long_help(long_help());
    let matches = command.try_get_matches_from(args).map_err(CliError::Clap)?;
    let cli = Cli::from_arg_matches(&matches).map_err(CliError::Clap)?;
    match cli.command {
        Some(Subcommands::Validate { package_dir }) => Ok(Invocation::Validate { package_dir }),
        None => Err(CliError::Usage(format!(
            "missing a mode or subcommand\nusage: {USAGE}"
        ))),
    }
}

/// Upstream's forms: `<mode> <root> <copy> [data]`, `<mode> <copy>` and
/// `interrupt <copy> <data>` (the legacy forms imply the root mount `/root`).
fn parse_positional(args: &[String]) -> Result<Request, CliError> {
    let Some(mode) = Mode::parse(&args[0]) else {
        return Err(CliError::Usage(format!(
            "unknown mode {:?}; valid modes are: {}\nusage: {USAGE}",
            args[0],
            Mode::valid_list()
        )));
    };
    let request = |root: &str, copy: &str, data: Option<&String>| Request {
        mode,
        root_mount: PathBuf::from(root),
        copy_dir: copy.to_string(),
        interrupt_data: data.cloned(),
    };
    match args {
        [_, copy] => Ok(request(LEGACY_ROOT_MOUNT, copy, None)),
        [_, copy, data] if mode == Mode::Interrupt => {
            Ok(request(LEGACY_ROOT_MOUNT, copy, Some(data)))
        }
        [_, root, copy] => Ok(request(root, copy, None)),
        [_, root, copy, data] => Ok(request(root, copy, Some(data))),
        _ => Err(CliError::Usage(format!(
            "{mode} takes 1 to 3 arguments after the mode, got {}\nusage: {USAGE}",
            args.len() - 1
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(items: &[&str]) -> Vec<String> {
        std::iter::once("skyhook-agent")
            .chain(items.iter().copied())
            .map(str::to_string)
            .collect()
    }

    fn run_request(items: &[&str]) -> Request {
        match parse(&argv(items)) {
            Ok(Invocation::Run(request)) => request,
            other => panic!("{items:?}: {other:?}"),
        }
    }

    #[test]
    fn upstream_argument_forms_parse_exactly() {
        type Case<'a> = (&'a [&'a str], Mode, &'a str, &'a str, Option<&'a str>);
        let cases: &[Case] = &[
            (
                &["apply", "/root", "/var/lib/skyhook/x"],
                Mode::Apply,
                "/root",
                "/var/lib/skyhook/x",
                None,
            ),
            (
                &["config-check", "/host", "/c", "ignored"],
                Mode::ConfigCheck,
                "/host",
                "/c",
                Some("ignored"),
            ),
            (
                &["interrupt", "/root", "/c", "eyJ9"],
                Mode::Interrupt,
                "/root",
                "/c",
                Some("eyJ9"),
            ),
            (&["apply", "/c"], Mode::Apply, "/root", "/c", None),
            (
                &["uninstall-check", "/c"],
                Mode::UninstallCheck,
                "/root",
                "/c",
                None,
            ),
            (
                &["interrupt", "/c", "eyJ9"],
                Mode::Interrupt,
                "/root",
                "/c",
                Some("eyJ9"),
            ),
            (
                &["post-interrupt", "/r", "/c"],
                Mode::PostInterrupt,
                "/r",
                "/c",
                None,
            ),
        ];
        for (items, mode, root, copy, data) in cases {
            let request = run_request(items);
            assert_eq!(request.mode, *mode, "{items:?}");
            assert_eq!(request.root_mount, PathBuf::from(root), "{items:?}");
            assert_eq!(request.copy_dir, *copy, "{items:?}");
            assert_eq!(request.interrupt_data.as_deref(), *data, "{items:?}");
        }
    }

    #[test]
    fn every_mode_is_accepted() {
        for mode in Mode::ALL {
            assert_eq!(run_request(&[mode.as_str(), "/r", "/c"]).mode, mode);
        }
    }

    fn usage_error(items: &[&str]) -> String {
        match parse(&argv(items)) {
            Err(CliError::Usage(message)) => message,
            other => panic!("{items:?}: expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn an_unknown_mode_lists_the_valid_ones() {
        let message = usage_error(&["install", "/root", "/c"]);
        assert!(
            message.starts_with(
                "unknown mode \"install\"; valid modes are: apply, apply-check, config"
            ),
            "{message}"
        );
        assert!(message.contains("post-interrupt-check, interrupt"));
        assert!(usage_error(&["Apply", "/c"]).contains("unknown mode"));
    }

    #[test]
    fn wrong_argument_counts_are_usage_errors() {
        assert!(usage_error(&[]).contains("missing arguments"));
        assert!(usage_error(&["apply"]).contains("got 0"));
        assert!(usage_error(&["apply", "a", "b", "c", "d"]).contains("got 4"));
    }

    #[test]
    fn validate_help_and_version_go_through_clap() {
        assert_eq!(
            parse(&argv(&["validate", "pkg"])).unwrap(),
            Invocation::Validate {
                package_dir: PathBuf::from("pkg")
            }
        );
        let help = match parse(&argv(&["--help"])) {
            Err(CliError::Clap(err)) => {
                let text = err.to_string();
                assert_eq!(CliError::Clap(err).exit(), Exit::Success);
                text
            }
            other => panic!("{other:?}"),
        };
        for fragment in [
            "MODES: apply",
            "SKYHOOK_AGENT_WRITE_LOGS (default true)",
            "EXIT CODES:",
            "  4  invalid package",
            "validate",
        ] {
            assert!(help.contains(fragment), "help lacks {fragment:?}:\n{help}");
        }
        assert!(
            matches!(parse(&argv(&["--version"])), Err(CliError::Clap(e)) if e.exit_code() == 0)
        );
        let err = parse(&argv(&["validate"])).unwrap_err();
        assert_eq!(err.exit(), Exit::Usage);
        assert_eq!(parse(&argv(&["--bogus"])).unwrap_err().exit(), Exit::Usage);
    }

    #[test]
    fn the_chroot_helper_is_recognised() {
        assert_eq!(
            parse(&argv(&[CHROOT_EXEC_ARG, "{}"])).unwrap(),
            Invocation::ChrootExec { spec: "{}".into() }
        );
    }
}
