//! Skyhook's verbs of the `devcluster` command: `install` runs the controller (and the webhook)
//! against the running cluster; `status` and `down` show and stop them.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{FromArgMatches, Subcommand};
use devcluster::cli::{CliExtension, client_for, running_record, stdout_line};
use devcluster::images::ImageExtensions;
use devcluster::state::StateDir;

use crate::background::BackgroundRecord;
use crate::install::{self, CONTROLLER_BINARY, ControllerRecord, InstallOptions};
use crate::webhook::{self, WEBHOOK_BINARY, WebhookOptions, WebhookRecord};

#[derive(Debug, Subcommand)]
enum SkyhookCommand {
    /// Install skyhook into the running cluster: apply the CRDs from chart/crds/, create the
    /// `skyhook` namespace and its LimitRange, and run `skyhook-controller` in the background
    /// (log in <state>/logs/skyhook-controller.log). Restarts a controller already running.
    Install {
        /// Directory of the CRD manifests [default: chart/crds/ of this workspace]
        #[arg(long)]
        crds: Option<std::path::PathBuf>,
        /// The controller's AGENT_IMAGE [default: the controller's own default]
        #[arg(long)]
        agent_image: Option<String>,
        /// Give up after this many seconds if the controller is not ready.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
        /// Also run `skyhook-webhook` in the background (log in
        /// <state>/logs/skyhook-webhook.log) and register upstream's webhook configurations for
        /// it, so invalid Skyhooks and DeploymentPolicies are refused at apply time. Without it,
        /// configurations left by an earlier `--webhook` install are removed.
        #[arg(long)]
        webhook: bool,
    },
}

/// Skyhook's part of the `devcluster` command.
#[derive(Debug, Clone, Copy, Default)]
pub struct SkyhookVerbs;

impl CliExtension for SkyhookVerbs {
    fn augment_subcommands(&self, command: clap::Command) -> clap::Command {
        SkyhookCommand::augment_subcommands(command)
    }

    fn has_subcommand(&self, name: &str) -> bool {
        SkyhookCommand::has_subcommand(name)
    }

    fn run(&self, matches: &clap::ArgMatches, state: &StateDir) -> anyhow::Result<ExitCode> {
        match SkyhookCommand::from_arg_matches(matches)? {
            SkyhookCommand::Install {
                crds,
                agent_image,
                timeout,
                webhook,
            } => install(
                state,
                InstallOptions {
                    crds_dir: crds,
                    agent_image,
                    ready_timeout: Duration::from_secs(timeout),
                    ..InstallOptions::default()
                },
                webhook.then(|| WebhookOptions {
                    ready_timeout: Duration::from_secs(timeout),
                    ..WebhookOptions::default()
                }),
            ),
        }
    }

    fn images(&self) -> ImageExtensions {
        crate::images()
    }

    fn stop(&self, state: &StateDir) -> bool {
        let mut stopped_something = false;
        if let Some(pid) = install::stop_recorded_controller(state, Duration::from_secs(30)) {
            eprintln!("devcluster: stopped {CONTROLLER_BINARY} (pid {pid})");
            stopped_something = true;
        }
        if let Some(pid) = webhook::stop_recorded_webhook(state, Duration::from_secs(30)) {
            eprintln!("devcluster: stopped {WEBHOOK_BINARY} (pid {pid})");
            stopped_something = true;
        }
        stopped_something
    }

    fn status_lines(&self, state: &StateDir) -> Vec<String> {
        installed_process_lines(state).into()
    }
}

/// The controller's and the webhook's lines: running, or how to install it.
fn installed_process_lines(state: &StateDir) -> [String; 2] {
    let controller = match ControllerRecord::running(state) {
        Some(controller) => format!(
            "  {CONTROLLER_BINARY:<24} pid {:<8} port {:<6} running (metrics port {}, log {})",
            controller.pid,
            controller.probe_port,
            controller.metrics_port,
            controller.log.display()
        ),
        None => format!("  {CONTROLLER_BINARY:<24} not installed (`devcluster install` runs it)"),
    };
    let webhook = match WebhookRecord::running(state) {
        Some(webhook) => format!(
            "  {WEBHOOK_BINARY:<24} pid {:<8} port {:<6} running (https://127.0.0.1:{}, admin port {}, log {})",
            webhook.pid,
            webhook.port,
            webhook.port,
            webhook.admin_port,
            webhook.log.display()
        ),
        None => {
            format!("  {WEBHOOK_BINARY:<24} not installed (`devcluster install --webhook` runs it)")
        }
    };
    [controller, webhook]
}

fn install(
    state: &StateDir,
    options: InstallOptions,
    webhook_options: Option<WebhookOptions>,
) -> anyhow::Result<ExitCode> {
    let Some(record) = running_record(state)? else {
        bail!(
            "no cluster is running in {}; start one with `devcluster up`",
            state.root().display()
        );
    };
    if let Some(pid) = install::stop_recorded_controller(state, Duration::from_secs(30)) {
        eprintln!("devcluster: stopped the running {CONTROLLER_BINARY} (pid {pid}) to restart it");
    }
    if let Some(pid) = webhook::stop_recorded_webhook(state, Duration::from_secs(30)) {
        eprintln!("devcluster: stopped the running {WEBHOOK_BINARY} (pid {pid})");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a tokio runtime")?;
    let started = Instant::now();
    let controller = runtime.block_on(async {
        let client = client_for(&record.kubeconfig).await?;
        eprintln!(
            "devcluster: applying the CRDs, the {} namespace and its LimitRange",
            install::NAMESPACE
        );
        let crds_dir = options
            .crds_dir
            .clone()
            .unwrap_or_else(install::default_crds_dir);
        let crds = install::apply_crds(&client, &crds_dir).await?;
        eprintln!("devcluster: CRDs established: {}", crds.join(", "));
        install::apply_namespace(&client).await?;
        // The webhook first: the controller's own Skyhook updates go through it.
        let webhook = match &webhook_options {
            Some(webhook_options) => {
                eprintln!(
                    "devcluster: starting {WEBHOOK_BINARY}, registering its configurations and waiting until the API server reaches it"
                );
                let webhook_started = Instant::now();
                let process = webhook::start_webhook(&client, state, webhook_options).await?;
                eprintln!(
                    "devcluster: {WEBHOOK_BINARY} serving the API server in {:.1} s (pid {}, https://127.0.0.1:{}, log {})",
                    webhook_started.elapsed().as_secs_f64(),
                    process.record().pid,
                    process.record().port,
                    process.record().log.display()
                );
                Some(process)
            }
            None => {
                webhook::unregister(&client).await?;
                None
            }
        };
        eprintln!("devcluster: starting {CONTROLLER_BINARY} and waiting for /readyz");
        let controller = install::start_controller(state, &options).await?;
        anyhow::Ok((controller, webhook))
    })?;
    let (controller, webhook) = controller;
    if let Some(webhook) = webhook {
        let _record = webhook.detach();
    }
    let record = controller.detach();
    eprintln!(
        "devcluster: {CONTROLLER_BINARY} ready in {:.1} s (pid {}, metrics on 127.0.0.1:{}, probes on 127.0.0.1:{})",
        started.elapsed().as_secs_f64(),
        record.pid,
        record.metrics_port,
        record.probe_port
    );
    eprintln!("devcluster: controller log: {}", record.log.display());
    stdout_line(&record.log.display().to_string())?;
    Ok(ExitCode::SUCCESS)
}
