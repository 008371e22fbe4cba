//! The command line: `kubectl skyhook <command>`, with kubectl's global flags.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use skyhook_api::uninstall::{UninstallMode, UnknownUninstallMode};
use skyhook_api::v1alpha1::Stage;

use crate::output::OutputFormat;

/// The plugin version, printed by `--version` and `version`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// kubectl skyhook: where a Skyhook rollout stands, why a node is stuck, and safe verbs to
/// pause, resume and reset it.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-skyhook",
    bin_name = "kubectl skyhook",
    version = VERSION,
    // `--version` prints "Skyhook plugin: <version>", as upstream's plugin does.
    display_name = "Skyhook plugin:",
    after_help = "Examples:\n  kubectl skyhook status\n  kubectl skyhook status demo\n  kubectl skyhook plan -f examples/demo.yaml\n  kubectl skyhook pause demo --confirm\n  kubectl skyhook node list --skyhook demo -o wide\n  kubectl skyhook package uninstall tuning --skyhook demo"
)]
pub struct Cli {
    /// Flags every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's connection flags plus output and dry-run.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file (default: the files in $KUBECONFIG, merged as kubectl
    /// does, then ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The kubeconfig cluster to use.
    #[arg(long, global = true)]
    pub cluster: Option<String>,
    /// The kubeconfig user to use.
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// Namespace of the Skyhook operator (its pods and deployment).
    #[arg(short = 'n', long, global = true, default_value = "skyhook")]
    pub namespace: String,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Log what the plugin does on stderr.
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,
    /// Print what would change without changing anything.
    #[arg(long, global = true)]
    pub dry_run: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the plugin and operator versions.
    #[command(
        after_help = "Examples:\n  kubectl skyhook version\n  kubectl skyhook version --client-only"
    )]
    Version(VersionArgs),
    /// Where rollouts stand: every Skyhook, or one in detail.
    #[command(
        after_help = "Examples:\n  kubectl skyhook status\n  kubectl skyhook status demo\n  kubectl skyhook status demo -o json"
    )]
    Status(StatusArgs),
    /// Dry-run a Skyhook manifest against the cluster: nodes, compartments, batches, stages.
    #[command(
        after_help = "Examples:\n  kubectl skyhook plan -f examples/demo.yaml\n  kubectl skyhook plan demo -o yaml"
    )]
    Plan(PlanArgs),
    /// Pause a Skyhook: no new work, and later Skyhooks wait on its incomplete nodes.
    #[command(
        after_help = "Examples:\n  kubectl skyhook pause demo\n  kubectl skyhook pause demo --confirm --dry-run"
    )]
    Pause(SkyhookTarget),
    /// Resume a paused Skyhook (does not ask; `--confirm` is accepted and changes nothing).
    #[command(after_help = "Examples:\n  kubectl skyhook resume demo")]
    Resume(SkyhookTarget),
    /// Disable a Skyhook: no work, and later Skyhooks do not wait for it.
    #[command(after_help = "Examples:\n  kubectl skyhook disable demo -y")]
    Disable(SkyhookTarget),
    /// Enable a disabled Skyhook (does not ask; `--confirm` is accepted and changes nothing).
    #[command(after_help = "Examples:\n  kubectl skyhook enable demo")]
    Enable(SkyhookTarget),
    /// Forget a Skyhook's progress on every node and reset its batch state.
    #[command(
        after_help = "Examples:\n  kubectl skyhook reset demo\n  kubectl skyhook reset demo --skip-batch-reset -y"
    )]
    Reset(ResetArgs),
    /// DeploymentPolicy batch state of a Skyhook.
    #[command(
        visible_alias = "dp",
        after_help = "Examples:\n  kubectl skyhook deployment-policy reset demo\n  kubectl skyhook dp reset demo -y"
    )]
    DeploymentPolicy {
        /// The action.
        #[command(subcommand)]
        action: PolicyCommand,
    },
    /// Nodes: progress, reset and the ignore label.
    #[command(
        after_help = "Examples:\n  kubectl skyhook node list --skyhook demo\n  kubectl skyhook node status 'worker-.*' -o wide\n  kubectl skyhook node ignore worker-3"
    )]
    Node {
        /// The action.
        #[command(subcommand)]
        action: NodeCommand,
    },
    /// Packages: progress per node, reruns and explicit uninstall.
    #[command(
        after_help = "Examples:\n  kubectl skyhook package status tuning --skyhook demo\n  kubectl skyhook package rerun tuning --skyhook demo --node worker-1\n  kubectl skyhook package uninstall tuning --skyhook demo"
    )]
    Package {
        /// The action.
        #[command(subcommand)]
        action: PackageCommand,
    },
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  source <(kubectl-skyhook completion bash)\n  kubectl-skyhook completion zsh > \"${fpath[1]}/_kubectl-skyhook\""
    )]
    Completion {
        /// The shell.
        shell: CompletionShell,
    },
}

/// Shells with completion scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    /// bash.
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
}

/// `version` flags.
#[derive(Debug, Clone, Args)]
pub struct VersionArgs {
    /// Print only the plugin version; do not contact the cluster.
    #[arg(long)]
    pub client_only: bool,
    /// How long to wait for the cluster (e.g. 10s, 500ms, 1m).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// `status` arguments.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// A Skyhook to show in detail; all Skyhooks when omitted.
    pub skyhook: Option<String>,
    /// Refresh until every selected node is complete (printing only when something changed).
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// How often `--watch` reads the cluster again.
    #[arg(long, default_value = "2s", value_parser = parse_duration, requires = "watch")]
    pub interval: Duration,
}

/// `plan` arguments.
#[derive(Debug, Clone, Args)]
#[group(id = "source", required = true, multiple = false)]
pub struct PlanArgs {
    /// A Skyhook manifest (YAML) to plan.
    #[arg(short = 'f', long = "filename", value_name = "FILE", group = "source")]
    pub file: Option<PathBuf>,
    /// An existing Skyhook to plan as it stands.
    #[arg(group = "source")]
    pub skyhook: Option<String>,
    /// The controller's uninstall mode (its `UNINSTALL_MODE`): `legacy` uninstalls removed and
    /// downgraded packages, `explicit` only packages with `uninstall.apply`.
    #[arg(long, value_name = "MODE", default_value = "legacy", value_parser = parse_uninstall_mode)]
    pub uninstall_mode: UninstallMode,
}

fn parse_uninstall_mode(text: &str) -> Result<UninstallMode, String> {
    text.parse()
        .map_err(|error: UnknownUninstallMode| error.to_string())
}

/// A Skyhook name and `--confirm`.
#[derive(Debug, Clone, Args)]
pub struct SkyhookTarget {
    /// The Skyhook.
    pub skyhook: String,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub confirm: bool,
}

/// `reset` arguments.
#[derive(Debug, Clone, Args)]
pub struct ResetArgs {
    /// The Skyhook.
    #[command(flatten)]
    pub target: SkyhookTarget,
    /// Keep the compartments' batch state.
    #[arg(long)]
    pub skip_batch_reset: bool,
}

/// `deployment-policy` actions.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Reset every compartment's batch state to batch 1.
    #[command(after_help = "Examples:\n  kubectl skyhook dp reset demo --dry-run")]
    Reset(SkyhookTarget),
}

/// `node` actions.
#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Nodes with progress for a Skyhook.
    #[command(
        after_help = "Examples:\n  kubectl skyhook node list --skyhook demo\n  kubectl skyhook node list --skyhook demo -o json"
    )]
    List {
        /// The Skyhook.
        #[arg(long)]
        skyhook: String,
    },
    /// Progress of every Skyhook on the matching nodes.
    #[command(
        after_help = "Examples:\n  kubectl skyhook node status\n  kubectl skyhook node status worker-1 'gpu-.*' --skyhook demo -o wide"
    )]
    Status {
        /// Node names, or anchored regexes when they contain regex meta characters.
        patterns: Vec<String>,
        /// Only this Skyhook.
        #[arg(long)]
        skyhook: Option<String>,
    },
    /// Forget a Skyhook's progress on the matching nodes (removes only its node state).
    #[command(after_help = "Examples:\n  kubectl skyhook node reset worker-1 --skyhook demo -y")]
    Reset {
        /// Node names or anchored regexes.
        #[arg(required = true)]
        patterns: Vec<String>,
        /// The Skyhook.
        #[arg(long)]
        skyhook: String,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long)]
        confirm: bool,
    },
    /// Label the matching nodes skyhook.nvidia.com/ignore=true: every Skyhook skips them.
    #[command(
        after_help = "Examples:\n  kubectl skyhook node ignore worker-3\n  kubectl skyhook node ignore 'worker-[0-9]+'"
    )]
    Ignore {
        /// Node names or anchored regexes.
        #[arg(required = true)]
        patterns: Vec<String>,
    },
    /// Remove the ignore label from the matching nodes.
    #[command(after_help = "Examples:\n  kubectl skyhook node unignore worker-3")]
    Unignore {
        /// Node names or anchored regexes.
        #[arg(required = true)]
        patterns: Vec<String>,
    },
}

/// `package` actions.
#[derive(Debug, Subcommand)]
pub enum PackageCommand {
    /// A package's stage and state on every node.
    #[command(
        after_help = "Examples:\n  kubectl skyhook package status tuning --skyhook demo -o wide"
    )]
    Status {
        /// The package.
        package: String,
        /// The Skyhook.
        #[arg(long)]
        skyhook: String,
        /// Only these nodes (names or anchored regexes); repeatable.
        #[arg(long = "node")]
        nodes: Vec<String>,
    },
    /// Print the logs of a package's pods (only while the pods exist; successful pods are
    /// deleted quickly).
    #[command(
        after_help = "Examples:\n  kubectl skyhook package logs tuning --skyhook demo\n  kubectl skyhook package logs tuning --skyhook demo --node worker-1 --stage config -f"
    )]
    Logs {
        /// The package.
        package: String,
        /// The Skyhook.
        #[arg(long)]
        skyhook: String,
        /// Only pods on these nodes (names or anchored regexes); repeatable.
        #[arg(long = "node")]
        nodes: Vec<String>,
        /// Only the container of this stage (e.g. apply, config, interrupt).
        #[arg(long, value_parser = parse_stage)]
        stage: Option<Stage>,
        /// Keep streaming new log lines.
        #[arg(short = 'f', long)]
        follow: bool,
        /// Lines from the end of each log; -1 prints everything.
        #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
        tail: i64,
    },
    /// Run a package again on the matching nodes, from the start or from a stage.
    #[command(
        after_help = "Examples:\n  kubectl skyhook package rerun tuning --skyhook demo --node worker-1\n  kubectl skyhook package rerun tuning --skyhook demo --node 'worker-.*' --stage config -y"
    )]
    Rerun {
        /// The package.
        package: String,
        /// The Skyhook.
        #[arg(long)]
        skyhook: String,
        /// Nodes (names or anchored regexes); repeatable, at least one.
        #[arg(long = "node", required = true)]
        nodes: Vec<String>,
        /// Start from this stage instead of from the beginning.
        #[arg(long, value_parser = parse_rerun_stage)]
        stage: Option<Stage>,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long)]
        confirm: bool,
    },
    /// Request the explicit uninstall of a package on every node where it is installed (sets
    /// packages.<pkg>.uninstall.apply: true; the package needs uninstall.enabled: true), or
    /// cancel it with --cancel (does not ask).
    #[command(
        after_help = "Examples:\n  kubectl skyhook package uninstall tuning --skyhook demo\n  kubectl skyhook package uninstall tuning --skyhook demo -y --dry-run\n  kubectl skyhook package uninstall tuning --skyhook demo --cancel\n  kubectl skyhook status demo   (shows the uninstall progress)"
    )]
    Uninstall {
        /// The package.
        package: String,
        /// The Skyhook.
        #[arg(long)]
        skyhook: String,
        /// Cancel a requested uninstall (sets uninstall.apply: false): nodes still uninstalling
        /// reinstall the package.
        #[arg(long)]
        cancel: bool,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long)]
        confirm: bool,
    },
}

/// Any stage.
fn parse_stage(value: &str) -> Result<Stage, String> {
    value.parse::<Stage>().map_err(|error| error.to_string())
}

/// The stages `package rerun --stage` accepts.
fn parse_rerun_stage(value: &str) -> Result<Stage, String> {
    match value.parse::<Stage>() {
        Ok(stage @ (Stage::Apply | Stage::Config | Stage::Interrupt | Stage::PostInterrupt)) => {
            Ok(stage)
        }
        _ => Err(format!(
            "{value:?} is not a stage to rerun from: use apply, config, interrupt or post-interrupt"
        )),
    }
}

/// A duration as kubectl writes them: a number with `ms`, `s`, `m` or `h`.
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let amount: u64 = number
        .parse()
        .map_err(|_| format!("{value:?} is not a duration such as 10s, 500ms or 1m"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(amount)),
        "s" | "" => Ok(Duration::from_secs(amount)),
        "m" => Ok(Duration::from_secs(amount * 60)),
        "h" => Ok(Duration::from_secs(amount * 3600)),
        _ => Err(format!(
            "{value:?} is not a duration such as 10s, 500ms or 1m"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubectl-skyhook").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn output_formats_are_the_four_and_nothing_else() {
        for (flag, expected) in [
            ("table", OutputFormat::Table),
            ("wide", OutputFormat::Wide),
            ("json", OutputFormat::Json),
            ("yaml", OutputFormat::Yaml),
        ] {
            let cli = parse(&["status", "-o", flag]).unwrap();
            assert_eq!(cli.global.output, expected);
        }
        let error = parse(&["status", "-o", "bogus"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue);
    }

    #[test]
    fn global_flags_go_before_or_after_the_command() {
        let cli = parse(&[
            "--context",
            "dev",
            "-n",
            "ops",
            "node",
            "list",
            "--skyhook",
            "demo",
            "--dry-run",
            "--kubeconfig",
            "/tmp/kc",
            "--cluster",
            "c",
            "--user",
            "u",
            "-v",
        ])
        .unwrap();
        assert_eq!(cli.global.context.as_deref(), Some("dev"));
        assert_eq!(cli.global.namespace, "ops");
        assert_eq!(cli.global.cluster.as_deref(), Some("c"));
        assert_eq!(cli.global.user.as_deref(), Some("u"));
        assert!(cli.global.dry_run && cli.global.verbose);
        assert_eq!(cli.global.kubeconfig, Some(PathBuf::from("/tmp/kc")));
    }

    #[test]
    fn namespace_defaults_to_skyhook() {
        assert_eq!(parse(&["status"]).unwrap().global.namespace, "skyhook");
    }

    #[test]
    fn dp_is_an_alias_of_deployment_policy() {
        for name in ["dp", "deployment-policy"] {
            let cli = parse(&[name, "reset", "demo", "-y"]).unwrap();
            match cli.command {
                Command::DeploymentPolicy {
                    action: PolicyCommand::Reset(target),
                } => {
                    assert_eq!(target.skyhook, "demo");
                    assert!(target.confirm);
                }
                other => panic!("{name}: parsed as {other:?}"),
            }
        }
    }

    #[test]
    fn confirm_has_a_short_and_a_long_form() {
        for flag in ["-y", "--confirm"] {
            match parse(&["pause", "demo", flag]).unwrap().command {
                Command::Pause(target) => assert!(target.confirm, "{flag}"),
                other => panic!("parsed as {other:?}"),
            }
        }
    }

    /// Scripts written for either form keep working: resume and enable do not ask, but still
    /// accept `--confirm` and `-y`.
    #[test]
    fn resume_and_enable_accept_confirm_as_a_no_op() {
        for verb in ["resume", "enable"] {
            for (args, confirm) in [
                (vec![verb, "demo"], false),
                (vec![verb, "demo", "-y"], true),
                (vec![verb, "demo", "--confirm"], true),
            ] {
                let target = match parse(&args).unwrap().command {
                    Command::Resume(target) | Command::Enable(target) => target,
                    other => panic!("{args:?}: parsed as {other:?}"),
                };
                assert_eq!(target.skyhook, "demo", "{args:?}");
                assert_eq!(target.confirm, confirm, "{args:?}");
            }
        }
    }

    #[test]
    fn package_uninstall_takes_cancel_and_confirm() {
        for (args, cancel, confirm) in [
            (vec!["tuning", "--skyhook", "demo"], false, false),
            (vec!["tuning", "--skyhook", "demo", "-y"], false, true),
            (
                vec!["tuning", "--skyhook", "demo", "--confirm"],
                false,
                true,
            ),
            (vec!["tuning", "--skyhook", "demo", "--cancel"], true, false),
        ] {
            let line: Vec<&str> = ["package", "uninstall"]
                .into_iter()
                .chain(args.clone())
                .collect();
            match parse(&line).unwrap().command {
                Command::Package {
                    action:
                        PackageCommand::Uninstall {
                            package,
                            skyhook,
                            cancel: got_cancel,
                            confirm: got_confirm,
                        },
                } => {
                    assert_eq!((package.as_str(), skyhook.as_str()), ("tuning", "demo"));
                    assert_eq!((got_cancel, got_confirm), (cancel, confirm), "{args:?}");
                }
                other => panic!("{args:?}: parsed as {other:?}"),
            }
        }
        assert!(
            parse(&["package", "uninstall", "tuning"]).is_err(),
            "--skyhook is required"
        );
    }

    #[test]
    fn rerun_needs_a_node_and_a_rerunnable_stage() {
        assert!(parse(&["package", "rerun", "p", "--skyhook", "s"]).is_err());
        assert!(
            parse(&[
                "package",
                "rerun",
                "p",
                "--skyhook",
                "s",
                "--node",
                "n",
                "--stage",
                "upgrade"
            ])
            .is_err()
        );
        match parse(&[
            "package",
            "rerun",
            "p",
            "--skyhook",
            "s",
            "--node",
            "a",
            "--node",
            "b",
            "--stage",
            "post-interrupt",
        ])
        .unwrap()
        .command
        {
            Command::Package {
                action: PackageCommand::Rerun { nodes, stage, .. },
            } => {
                assert_eq!(nodes, ["a", "b"]);
                assert_eq!(stage, Some(Stage::PostInterrupt));
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn logs_defaults_to_the_whole_log() {
        match parse(&["package", "logs", "p", "--skyhook", "s"])
            .unwrap()
            .command
        {
            Command::Package {
                action:
                    PackageCommand::Logs {
                        tail,
                        follow,
                        stage,
                        ..
                    },
            } => assert_eq!((tail, follow, stage), (-1, false, None)),
            other => panic!("parsed as {other:?}"),
        }
        match parse(&[
            "package",
            "logs",
            "p",
            "--skyhook",
            "s",
            "-f",
            "--tail",
            "20",
            "--stage",
            "apply",
        ])
        .unwrap()
        .command
        {
            Command::Package {
                action:
                    PackageCommand::Logs {
                        tail,
                        follow,
                        stage,
                        ..
                    },
            } => assert_eq!((tail, follow, stage), (20, true, Some(Stage::Apply))),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn plan_takes_a_file_or_a_name_but_not_both() {
        assert!(parse(&["plan", "-f", "x.yaml"]).is_ok());
        assert!(parse(&["plan", "demo"]).is_ok());
        assert!(parse(&["plan"]).is_err());
        assert!(parse(&["plan", "demo", "-f", "x.yaml"]).is_err());
    }

    #[test]
    fn node_verbs_need_patterns() {
        assert!(parse(&["node", "ignore"]).is_err());
        assert!(parse(&["node", "reset", "--skyhook", "s"]).is_err());
        assert!(parse(&["node", "status"]).is_ok());
    }

    #[test]
    fn durations() {
        for (input, expected) in [
            ("10s", Some(Duration::from_secs(10))),
            ("500ms", Some(Duration::from_millis(500))),
            ("2m", Some(Duration::from_secs(120))),
            ("1h", Some(Duration::from_secs(3600))),
            ("7", Some(Duration::from_secs(7))),
            ("ten", None),
            ("5d", None),
        ] {
            assert_eq!(parse_duration(input).ok(), expected, "{input}");
        }
        let cli = parse(&["version", "--client-only", "--timeout", "3s"]).unwrap();
        match cli.command {
            Command::Version(args) => {
                assert!(args.client_only);
                assert_eq!(args.timeout, Duration::from_secs(3));
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn every_command_has_examples_in_its_help() {
        let mut cli = Cli::command();
        cli.build();
        fn check(command: &clap::Command, path: &str) {
            // clap's generated `help` subcommands document themselves.
            if command.get_name() == "help" {
                return;
            }
            let help = command
                .get_after_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(help.contains("Examples:"), "{path} has no examples");
            for sub in command.get_subcommands() {
                check(sub, &format!("{path} {}", sub.get_name()));
            }
        }
        check(&cli, "kubectl skyhook");
    }
}
