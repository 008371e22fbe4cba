//! skyhook-agent: parse the command line, then run a stage, an interrupt or `validate`.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use agent::banner::{self, BannerInput};
use agent::cli::{self, CliError, Invocation};
use agent::execute::{RealHost, chroot};
use agent::exit::Exit;
use agent::run::{self, Request};
use agent::settings::Settings;
use agent::validate;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let invocation = match cli::parse(&args) {
        Ok(invocation) => invocation,
        Err(err @ CliError::Clap(_)) => {
            let exit = err.exit();
            if let CliError::Clap(err) = err {
                // Help goes to stdout, errors to stderr, as clap does.
                let _ = err.print();
            }
            return exit.into();
        }
        Err(CliError::Usage(message)) => {
            eprintln!("skyhook-agent: {message}");
            return Exit::Usage.into();
        }
    };
    match invocation {
        Invocation::ChrootExec { spec } => ExitCode::from(chroot::exec(&spec)),
        Invocation::Version => {
            print_stdout(&format!("{}\n", env!("CARGO_PKG_VERSION")));
            Exit::Success.into()
        }
        Invocation::UnsupportedMode(mode) => {
            init_tracing();
            tracing::warn!(
                stage = %mode,
                "this agent version does not support the requested stage; treating it as a no-op"
            );
            Exit::Success.into()
        }
        Invocation::Validate { package_dir } => {
            let report = validate::validate(&package_dir);
            print_stdout(&report.render(&package_dir));
            if report.is_clean() {
                Exit::Success.into()
            } else {
                Exit::Failure.into()
            }
        }
        Invocation::Run(request) => run_request(&request).into(),
    }
}

fn print_stdout(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

fn init_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .init();
}

fn run_request(request: &Request) -> Exit {
    init_tracing();
    let agent_env: BTreeMap<String, String> = std::env::vars().collect();
    let (settings, warnings) = Settings::from_vars(&agent_env);
    for warning in &warnings {
        tracing::warn!(name = warning.name, value = %warning.value, "{warning}");
    }
    print_stdout(&banner::render(&BannerInput {
        mode: request.mode,
        root_mount: &request.root_mount.to_string_lossy(),
        copy_dir: &request.copy_dir,
        interrupt_data: request.interrupt_data.as_deref(),
        settings: &settings,
    }));
    tracing::info!(version = env!("CARGO_PKG_VERSION"), mode = %request.mode, "skyhook-agent starting");
    let mut host = match RealHost::new() {
        Ok(host) => host,
        Err(err) => {
            tracing::error!(failure = "host_error", "{:#}", anyhow::Error::new(err));
            return Exit::Failure;
        }
    };
    match run::run(&mut host, &settings, &agent_env, request) {
        Ok(()) => {
            tracing::info!(mode = %request.mode, "succeeded");
            Exit::Success
        }
        Err(err) => {
            let failure = err.kind();
            tracing::error!(
                failure,
                exit_code = Exit::Failure.code(),
                "{:#}",
                anyhow::Error::new(err)
            );
            Exit::Failure
        }
    }
}
