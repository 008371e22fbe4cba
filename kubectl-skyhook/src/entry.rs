//! The program both binaries run: parse the command line for the API group the binary's name
//! says, run it, print errors on stderr with a hint.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;

use skyhook_api::generation::Group;

use crate::cli::{Cli, group_of_program};

use crate::run::{Console, error_chain, run};

/// Runs the command line `args` (`argv[0]` first) and says how the process exits.
pub async fn main(args: Vec<OsString>) -> ExitCode {
    // One binary serves both names (krew links the second to the first): the name it was
    // started under picks the API group.
    let group = args
        .first()
        .map_or(Group::Skyhook, |argv0| group_of_program(argv0));
    let cli = match Cli::parse_for(group, args) {
        Ok(parsed) => {
            for note in &parsed.notes {
                eprintln!("{note}");
            }
            parsed.cli
        }
        Err(error) => {
            // Help and --version go to stdout with success; every usage error (an unknown
            // -o value included) goes to stderr with exit code 1, as kubectl plugins do.
            let failed = error.use_stderr();
            // If even the usage message cannot be written there is nobody left to tell.
            let _ = error.print();
            return if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // --verbose shows the plugin's own steps, not every HTTP detail of the client. Without it,
    // the client's own "failed with status 500" lines are silenced: the plugin reports every
    // failed request once, in its error message.
    let level = if cli.global.verbose {
        "warn,kubectl_skyhook=debug"
    } else {
        "warn,kube_client=off"
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .init();
    // The process-wide TLS provider must be chosen before the first client exists; a second
    // install can only fail because one is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let stdout = std::io::stdout();
    let colour = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut out = stdout.lock();
    let mut input = std::io::stdin().lock();
    let mut console = Console {
        out: &mut out,
        input: &mut input,
        colour,
    };
    match run(cli, &mut console).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {}", error_chain(&error));
            eprintln!("Hint: {}", error.hint_for(group));
            ExitCode::FAILURE
        }
    }
}
