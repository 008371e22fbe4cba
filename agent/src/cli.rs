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

const USAGE: &str = "skyhook-agent <MODE> <ROOT_MOUNT> <COPY_DIR>\n       \
     skyhook-agent interrupt <ROOT_MOUNT> <COPY_DIR> <INTERRUPT_DATA>\n       \
     skyhook-agent <MODE> <COPY_DIR>                 (legacy: ROOT_MOUNT=/root)\n       \
     skyhook-agent interrupt <COPY_DIR> <INTERRUPT_DATA>  (legacy: ROOT_MOUNT=/root)\n       \
     skyhook-agent validate <PACKAGE_DIR>\n       \
     skyhook-agent --version";

/// Prints only the version, as upstream's `agent --version` does.
const VERSION_ARG: &str = "--version";

/// Runs a Skyhook package's lifecycle stages on the host, compatible with upstream packages.
#[derive(Debug, Parser)]
#[command(name = "skyhook-agent", override_usage = USAGE)]
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
         An unsupported MODE is skipped with a warning (exit 0), as upstream does.\n\
         ROOT_MOUNT is where the host's / is mounted; COPY_DIR is the package copy on the host\n\
         (a path inside ROOT_MOUNT); both must be absolute. interrupt takes INTERRUPT_DATA, base64 of\n\
         {{\"type\": \"node_restart|service_restart|restart_all_services|no_op|script_interrupt\", ...}}.\n\
         \n\
         ENVIRONMENT:\n{variables}\n\
         \n\
         EXIT CODES:\n{}\n\
         validate exits 0 without errors, 1 with errors, 2 on malformed arguments.",
        Exit::table()
    )
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    Run(Request),
    /// A mode this agent does not know: skipped with a warning, as upstream skips modes added
    /// by a newer operator.
    UnsupportedMode(String),
    /// `--version`: the version alone on stdout.
    Version,
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
        Some(VERSION_ARG) if rest.len() == 1 => return Ok(Invocation::Version),
        Some(VERSION_ARG) => {
            return Err(CliError::Usage(format!(
                "--version does not accept additional arguments\nusage: {USAGE}"
            )));
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
    parse_positional(rest)
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

/// Upstream's forms, checked in upstream's order: the number of arguments, then the mode (an
/// unknown one is skipped, whatever follows it), then the paths and the interrupt data.
/// `<mode> <root> <copy> [data]`, `<mode> <copy>` and `interrupt <copy> <data>` (the legacy
/// forms imply the root mount `/root`).
fn parse_positional(args: &[String]) -> Result<Invocation, CliError> {
    let usage = |message: String| CliError::Usage(format!("{message}\nusage: {USAGE}"));
    let (root, copy, data) = match args {
        [_, copy] => (LEGACY_ROOT_MOUNT, copy, None),
        [mode, copy, data] if mode == Mode::Interrupt.as_str() => {
            (LEGACY_ROOT_MOUNT, copy, Some(data))
        }
        [_, root, copy] => (root.as_str(), copy, None),
        [_, root, copy, data] => (root.as_str(), copy, Some(data)),
        _ => {
            return Err(usage(format!(
                "expected 2, 3, or 4 arguments; received {}",
                args.len()
            )));
        }
    };
    let Some(mode) = Mode::parse(&args[0]) else {
        return Ok(Invocation::UnsupportedMode(args[0].clone()));
    };
    if !root.starts_with('/') {
        return Err(usage(format!(
            "root mount {root:?} is not absolute; pass where the host's / is mounted, e.g. /root"
        )));
    }
    if !copy.starts_with('/') {
        return Err(usage(format!(
            "copy directory {copy:?} is not absolute; pass the package copy as a path on the host"
        )));
    }
    match (mode, data) {
        (Mode::Interrupt, None) => {
            return Err(usage(
                "interrupt needs INTERRUPT_DATA (base64 of the interrupt's JSON)".into(),
            ));
        }
        (Mode::Interrupt, Some(data)) if data.is_empty() => {
            return Err(usage("interrupt data must not be empty".into()));
        }
        (mode, Some(_)) if mode != Mode::Interrupt => {
            return Err(usage(format!(
                "stage {:?} does not accept interrupt data; only interrupt takes a fourth argument",
                mode.as_str()
            )));
        }
        _ => {}
    }
    Ok(Invocation::Run(Request {
        mode,
        root_mount: PathBuf::from(root),
        copy_dir: copy.clone(),
        interrupt_data: data.cloned(),
    }))
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
        for mode in Mode::ALL.into_iter().filter(|m| *m != Mode::Interrupt) {
            assert_eq!(run_request(&[mode.as_str(), "/r", "/c"]).mode, mode);
        }
    }

    fn usage_error(items: &[&str]) -> String {
        match parse(&argv(items)) {
            Err(err @ CliError::Usage(_)) => {
                assert_eq!(err.exit(), Exit::Usage);
                let CliError::Usage(message) = err else {
                    unreachable!()
                };
                message
            }
            other => panic!("{items:?}: expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn an_unknown_mode_is_skipped_whatever_follows_it() {
        for items in [
            &["install", "/root", "/c"][..],
            &["future-stage", "relative", "also-relative"],
            &["Apply", "/c"],
            &["future-stage", "/r", "/c", ""],
        ] {
            assert_eq!(
                parse(&argv(items)).unwrap(),
                Invocation::UnsupportedMode(items[0].into()),
                "{items:?}"
            );
        }
        // The argument count is checked first, as upstream does.
        assert!(usage_error(&["future-stage"]).contains("expected 2, 3, or 4 arguments"));
    }

    #[test]
    fn malformed_arguments_are_usage_errors() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "missing arguments"),
            (&["apply"], "expected 2, 3, or 4 arguments; received 1"),
            (&["apply", "a", "b", "c", "d"], "received 5"),
            (
                &["apply", "host", "/package"],
                "root mount \"host\" is not absolute",
            ),
            (
                &["apply", "/host", "package"],
                "copy directory \"package\" is not absolute",
            ),
            (
                &["apply", "package"],
                "copy directory \"package\" is not absolute",
            ),
            (
                &["interrupt", "/host", "/package", ""],
                "interrupt data must not be empty",
            ),
            (
                &["interrupt", "/package", ""],
                "interrupt data must not be empty",
            ),
            (
                &["apply", "/host", "/package", "payload"],
                "stage \"apply\" does not accept interrupt data",
            ),
            (
                &["--version", "extra"],
                "--version does not accept additional arguments",
            ),
        ];
        for (items, expected) in cases {
            let message = usage_error(items);
            assert!(message.contains(expected), "{items:?}: {message}");
            assert!(
                message.contains("usage: skyhook-agent"),
                "{items:?}: {message}"
            );
        }
    }

    #[test]
    fn version_prints_the_version_alone() {
        assert_eq!(parse(&argv(&["--version"])).unwrap(), Invocation::Version);
    }

    #[test]
    fn validate_and_help_go_through_clap() {
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
            "  2  malformed arguments",
            "validate exits 0 without errors, 1 with errors, 2",
            "skyhook-agent --version",
        ] {
            assert!(help.contains(fragment), "help lacks {fragment:?}:\n{help}");
        }
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
