//! The command line: `kubectl skyhook <command>`, with kubectl's global flags.

use std::path::PathBuf;
use std::time::Duration;

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use skyhook_api::generation::Group;
use skyhook_api::uninstall::{UninstallMode, UnknownUninstallMode};
use skyhook_api::v1alpha1::{Stage, State};

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

/// The binary name the plugin serves NodeWrights under; any other name serves Skyhooks.
pub const NODEWRIGHT_BINARY: &str = "kubectl-nodewright";

/// The API group a plugin binary serves, from the file name it was started as (`argv[0]`):
/// `kubectl-nodewright` (with or without `.exe`) serves NodeWrights, anything else Skyhooks.
pub fn group_of_program(argv0: &std::ffi::OsStr) -> Group {
    let file = std::path::Path::new(argv0)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = file.strip_suffix(".exe").unwrap_or(&file);
    if stem == NODEWRIGHT_BINARY {
        Group::NodeWright
    } else {
        Group::Skyhook
    }
}

/// The plugin's binary name for `group`: `kubectl-skyhook` or `kubectl-nodewright`.
pub const fn binary_name(group: Group) -> &'static str {
    match group {
        Group::Skyhook => "kubectl-skyhook",
        Group::NodeWright => NODEWRIGHT_BINARY,
    }
}

/// A help text written for the skyhook group, as the nodewright binary says it: the help is
/// written once, and the two binaries differ only in the group's words.
pub fn nodewright_text(text: &str) -> String {
    text.replace("Skyhook", "NodeWright")
        .replace("skyhook", "nodewright")
        .replace("SKYHOOK", "NODEWRIGHT")
}

/// The `-n` help: where the operator is looked for when it is not given.
fn namespace_help(group: Group) -> String {
    let (first, second) = (group.keys().word, group.other().keys().word);
    format!(
        "Namespace of the operator (its pods and deployment). Without -n, the plugin looks for the operator in {first}, then {second}, then in every namespace it may list, and uses {first} when it finds none"
    )
}

/// The command-line flags that name a workload object, as given on a command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NameFlags {
    /// `--skyhook` was given.
    pub skyhook: bool,
    /// `--nodewright` was given.
    pub nodewright: bool,
}

/// Which of `--skyhook` and `--nodewright` a command line uses (before any `--`). Both spell
/// the same argument, so clap cannot tell them apart once parsed.
pub fn name_flags(args: &[OsString]) -> NameFlags {
    let mut flags = NameFlags::default();
    for arg in args.iter().skip(1) {
        let arg = arg.to_string_lossy();
        if arg == "--" {
            break;
        }
        let flag = arg.split_once('=').map_or(arg.as_ref(), |(flag, _)| flag);
        match flag {
            "--skyhook" => flags.skyhook = true,
            "--nodewright" => flags.nodewright = true,
            _ => {}
        }
    }
    flags
}

/// Why a command line that clap accepted is still refused, or what to warn about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameFlagVerdict {
    /// Nothing to say.
    Fine,
    /// The deprecated spelling was used: the note to print on stderr.
    Deprecated(String),
    /// Both spellings: the error message.
    Conflict(String),
}

/// The rule for the two spellings of the object flag: under the nodewright binary
/// `--nodewright` is the flag and `--skyhook` a deprecated alias, as upstream's; under the
/// skyhook binary `--skyhook` stays the flag and `--nodewright` is accepted silently. Giving
/// both is refused: they are one argument, and which one should win is a guess.
pub fn name_flag_verdict(group: Group, flags: NameFlags) -> NameFlagVerdict {
    let own = format!("--{}", group.keys().word);
    match (group, flags) {
        (
            _,
            NameFlags {
                skyhook: true,
                nodewright: true,
            },
        ) => NameFlagVerdict::Conflict(format!(
            "--nodewright and --skyhook cannot be used together: they name the same object; give it once, with {own}"
        )),
        (Group::NodeWright, NameFlags { skyhook: true, .. }) => NameFlagVerdict::Deprecated(
            "Flag --skyhook has been deprecated, use --nodewright instead".to_owned(),
        ),
        _ => NameFlagVerdict::Fine,
    }
}

/// A parsed command line and the notes to print on stderr before running it.
#[derive(Debug)]
pub struct Parsed {
    /// The command line.
    pub cli: Cli,
    /// Notes for stderr (a deprecated flag).
    pub notes: Vec<String>,
}

impl Cli {
    /// The command definition as the binary of `group` presents it: its name, help texts in the
    /// group's words, `--<group word>` as the object flag with the other spelling as an alias,
    /// and the `-n` default.
    pub fn command_for(group: Group) -> clap::Command {
        let command = Cli::command().mut_arg("namespace", |arg| {
            arg.help(namespace_help(group))
                .default_value(group.keys().word)
        });
        match group {
            Group::Skyhook => with_name_flags(command, group),
            Group::NodeWright => with_name_flags(
                reword(command)
                    .name(NODEWRIGHT_BINARY)
                    .bin_name("kubectl nodewright")
                    .display_name("NodeWright plugin:"),
                group,
            ),
        }
    }

    /// Parses `args` (`argv[0]` first) for the binary of `group`.
    pub fn parse_for(group: Group, args: Vec<OsString>) -> Result<Parsed, clap::Error> {
        let mut command = Cli::command_for(group);
        let mut notes = Vec::new();
        match name_flag_verdict(group, name_flags(&args)) {
            NameFlagVerdict::Fine => {}
            NameFlagVerdict::Deprecated(note) => notes.push(note),
            NameFlagVerdict::Conflict(message) => {
                return Err(command.error(clap::error::ErrorKind::ArgumentConflict, message));
            }
        }
        let matches = command.try_get_matches_from_mut(args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        cli.global.group = group;
        cli.global.namespace_given = namespace_given(&matches);
        Ok(Parsed { cli, notes })
    }
}

/// Whether `-n` was on the command line, at whichever level it was given (it is global).
fn namespace_given(matches: &ArgMatches) -> bool {
    let mut level = Some(matches);
    while let Some(current) = level {
        if current.value_source("namespace") == Some(ValueSource::CommandLine) {
            return true;
        }
        level = current.subcommand().map(|(_, sub)| sub);
    }
    false
}

/// Every about, after-help and argument help of `command` and its subcommands in the nodewright
/// group's words.
fn reword(command: clap::Command) -> clap::Command {
    let reworded =
        |text: Option<&clap::builder::StyledStr>| text.map(|t| nodewright_text(&t.to_string()));
    let about = reworded(command.get_about());
    let long_about = reworded(command.get_long_about());
    let after = reworded(command.get_after_help());
    let mut command = command
        .mut_args(|arg| {
            let help = reworded(arg.get_help());
            let long = reworded(arg.get_long_help());
            let names_the_object = arg
                .get_value_names()
                .is_some_and(|names| names.iter().any(|n| n.as_str() == "SKYHOOK"));
            let mut arg = arg;
            if let Some(help) = help {
                arg = arg.help(help);
            }
            if let Some(long) = long {
                arg = arg.long_help(long);
            }
            if names_the_object {
                arg = arg.value_name("NODEWRIGHT");
            }
            arg
        })
        .mut_subcommands(reword);
    if let Some(about) = about {
        command = command.about(about);
    }
    if let Some(long_about) = long_about {
        command = command.long_about(long_about);
    }
    if let Some(after) = after {
        command = command.after_help(after);
    }
    command
}

/// The object flag of every subcommand spelled for `group`: `--skyhook` stays the argument's
/// id (the parsed field), its long name becomes the group's word and the other word an alias.
fn with_name_flags(command: clap::Command, group: Group) -> clap::Command {
    let other = group.other().keys().word;
    command
        .mut_args(|arg| {
            if arg.get_long() == Some("skyhook") {
                arg.long(group.keys().word)
                    .alias(other)
                    .value_name(match group {
                        Group::Skyhook => "SKYHOOK",
                        Group::NodeWright => "NODEWRIGHT",
                    })
            } else {
                arg
            }
        })
        .mut_subcommands(|sub| with_name_flags(sub, group))
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
    /// Namespace of the operator (its pods and deployment); see `namespace_help`.
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
    /// The API group the plugin serves, from the name it was started under; not a flag.
    #[arg(skip = Group::Skyhook)]
    pub group: Group,
    /// Whether `-n` was given: without it the namespace is discovered.
    #[arg(skip)]
    pub namespace_given: bool,
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
    /// Forget a Skyhook's progress on every node and reset its batch state; with --package,
    /// forget only that package's entries (the batch state stays).
    #[command(
        after_help = "Examples:\n  kubectl skyhook reset demo\n  kubectl skyhook reset demo --skip-batch-reset -y\n  kubectl skyhook reset demo --package tuning\n  kubectl skyhook reset demo --package tuning:1.2.0 --dry-run"
    )]
    Reset(ResetArgs),
    /// Set a package's stage and state in the node state of a Skyhook (pause the Skyhook first:
    /// the operator may overwrite it).
    #[command(
        after_help = "Examples:\n  kubectl skyhook update-state demo tuning 1.2.0 config complete --node worker-1\n  kubectl skyhook update-state demo tuning 1.2.0 apply erroring -l pool=gpu -y\n  kubectl skyhook update-state demo tuning 1.2.0 config complete --node worker-9 --add --dry-run"
    )]
    UpdateState(UpdateStateArgs),
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
    /// Move a workload to the other API group with no step run again: create it in the group
    /// --to names, wait until the operator adopted every node of the old object, then delete
    /// the old object (which uninstalls nothing).
    #[command(
        after_help = "Examples:\n  kubectl skyhook migrate demo\n  kubectl skyhook migrate demo --dry-run\n  kubectl skyhook migrate demo -y --timeout 10m"
    )]
    Migrate(MigrateArgs),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  source <(kubectl-skyhook completion bash)\n  kubectl-skyhook completion zsh > \"${fpath[1]}/_kubectl-skyhook\""
    )]
    Completion {
        /// The shell.
        shell: CompletionShell,
    },
}

/// `migrate` arguments.
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// The name of the object to move (its object in the other group is the one moved).
    pub skyhook: String,
    /// The API group to move it to: nodewright (nodewright.nvidia.com, from skyhook.nvidia.com)
    /// or skyhook (back from nodewright.nvidia.com).
    #[arg(long, value_enum, default_value_t = MigrateTo::Nodewright)]
    pub to: MigrateTo,
    /// How long to wait for the operator to take the work over (e.g. 30s, 5m).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub confirm: bool,
}

/// The group `migrate` moves a workload to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MigrateTo {
    /// nodewright.nvidia.com.
    Nodewright,
    /// skyhook.nvidia.com.
    Skyhook,
}

impl MigrateTo {
    /// The target group.
    pub const fn group(self) -> Group {
        match self {
            MigrateTo::Nodewright => Group::NodeWright,
            MigrateTo::Skyhook => Group::Skyhook,
        }
    }
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
    /// Only this package's entries (any version, or only `<version>`); never the batch state.
    #[arg(long, value_name = "NAME[:VERSION]", value_parser = parse_package_filter)]
    pub package: Option<PackageFilter>,
}

/// `reset --package`: a package name and, optionally, one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageFilter {
    /// The package name.
    pub name: String,
    /// Only this version; every version when absent.
    pub version: Option<String>,
}

impl std::fmt::Display for PackageFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.version {
            Some(version) => write!(f, "{}:{version}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// `<name>` or `<name>:<version>`, neither part empty.
pub fn parse_package_filter(value: &str) -> Result<PackageFilter, String> {
    let (name, version) = match value.split_once(':') {
        Some((name, version)) => (name, Some(version)),
        None => (value, None),
    };
    if name.is_empty() || version.is_some_and(str::is_empty) {
        return Err(format!(
            "{value:?} is not a package: use <name> or <name>:<version>"
        ));
    }
    Ok(PackageFilter {
        name: name.to_owned(),
        version: version.map(str::to_owned),
    })
}

/// `update-state` arguments.
#[derive(Debug, Clone, Args)]
pub struct UpdateStateArgs {
    /// The Skyhook.
    pub skyhook: String,
    /// The package (it must be in the Skyhook's spec).
    pub package: String,
    /// The package version (the spec's).
    pub version: String,
    /// The stage to record (apply, config, interrupt, post-interrupt, uninstall, upgrade).
    #[arg(value_parser = parse_stage)]
    pub stage: Stage,
    /// The state to record (complete, in_progress, erroring, skipped, unknown).
    #[arg(value_parser = parse_state)]
    pub state: State,
    /// Only these nodes (names or anchored regexes); repeatable.
    #[arg(long = "node")]
    pub nodes: Vec<String>,
    /// Only nodes matching this label selector (as kubectl's -l).
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Create the entry on target nodes that do not have it (needs --node or --selector).
    #[arg(long)]
    pub add: bool,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub confirm: bool,
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

/// Any package state.
fn parse_state(value: &str) -> Result<State, String> {
    value.parse::<State>().map_err(|error| error.to_string())
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

    fn parse_as(group: Group, args: &[&str]) -> Result<Parsed, clap::Error> {
        let argv: Vec<OsString> = std::iter::once(binary_name(group))
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        Cli::parse_for(group, argv)
    }

    #[test]
    fn the_binary_name_picks_the_group() {
        for (argv0, group) in [
            ("kubectl-nodewright", Group::NodeWright),
            ("/usr/local/bin/kubectl-nodewright", Group::NodeWright),
            ("kubectl-nodewright.exe", Group::NodeWright),
            ("kubectl-skyhook", Group::Skyhook),
            ("/home/u/.krew/bin/kubectl-skyhook", Group::Skyhook),
            ("kubectl-nodewright-dev", Group::Skyhook),
            ("", Group::Skyhook),
        ] {
            assert_eq!(group_of_program(argv0.as_ref()), group, "{argv0}");
        }
    }

    #[test]
    fn both_command_definitions_are_consistent() {
        for group in Group::ALL {
            Cli::command_for(group).debug_assert();
        }
    }

    #[test]
    fn the_object_flag_rule() {
        let flags = |skyhook, nodewright| NameFlags {
            skyhook,
            nodewright,
        };
        let deprecated = NameFlagVerdict::Deprecated(
            "Flag --skyhook has been deprecated, use --nodewright instead".to_owned(),
        );
        for (group, given, expected) in [
            (Group::NodeWright, flags(false, true), NameFlagVerdict::Fine),
            (Group::NodeWright, flags(true, false), deprecated),
            (
                Group::NodeWright,
                flags(false, false),
                NameFlagVerdict::Fine,
            ),
            (Group::Skyhook, flags(true, false), NameFlagVerdict::Fine),
            (Group::Skyhook, flags(false, true), NameFlagVerdict::Fine),
        ] {
            assert_eq!(
                name_flag_verdict(group, given),
                expected,
                "{group:?} {given:?}"
            );
        }
        for group in Group::ALL {
            assert!(matches!(
                name_flag_verdict(group, flags(true, true)),
                NameFlagVerdict::Conflict(_)
            ));
        }
        let args = |list: &[&str]| -> Vec<OsString> { list.iter().map(OsString::from).collect() };
        assert_eq!(
            name_flags(&args(&["k", "node", "list", "--skyhook=demo"])),
            flags(true, false)
        );
        assert_eq!(
            name_flags(&args(&["k", "--nodewright", "x", "--", "--skyhook"])),
            flags(false, true)
        );
    }

    #[test]
    fn the_nodewright_binary_takes_nodewright_and_the_deprecated_skyhook_flag() {
        let parsed =
            parse_as(Group::NodeWright, &["node", "list", "--nodewright", "demo"]).unwrap();
        assert!(parsed.notes.is_empty());
        assert_eq!(parsed.cli.global.group, Group::NodeWright);
        match parsed.cli.command {
            Command::Node {
                action: NodeCommand::List { skyhook },
            } => assert_eq!(skyhook, "demo"),
            other => panic!("parsed as {other:?}"),
        }
        let old = parse_as(
            Group::NodeWright,
            &["package", "status", "p", "--skyhook", "demo"],
        )
        .unwrap();
        assert_eq!(
            old.notes,
            ["Flag --skyhook has been deprecated, use --nodewright instead"]
        );
        let both = parse_as(
            Group::NodeWright,
            &["node", "list", "--nodewright", "a", "--skyhook", "b"],
        )
        .unwrap_err();
        assert_eq!(both.kind(), clap::error::ErrorKind::ArgumentConflict);
        let missing = parse_as(Group::NodeWright, &["node", "list"]).unwrap_err();
        assert_eq!(
            missing.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        assert!(
            missing.to_string().contains("--nodewright <NODEWRIGHT>"),
            "{missing}"
        );
    }

    #[test]
    fn the_skyhook_binary_accepts_nodewright_silently() {
        let parsed = parse_as(Group::Skyhook, &["node", "list", "--nodewright", "demo"]).unwrap();
        assert!(parsed.notes.is_empty());
        assert_eq!(parsed.cli.global.group, Group::Skyhook);
        let both = parse_as(
            Group::Skyhook,
            &["node", "list", "--skyhook", "a", "--nodewright", "b"],
        );
        assert!(both.is_err());
    }

    #[test]
    fn the_namespace_default_is_the_groups_and_an_explicit_one_is_marked() {
        for (group, args, namespace, given) in [
            (Group::NodeWright, vec!["status"], "nodewright", false),
            (Group::Skyhook, vec!["status"], "skyhook", false),
            (Group::NodeWright, vec!["-n", "ops", "status"], "ops", true),
            (
                Group::Skyhook,
                vec!["status", "-n", "skyhook"],
                "skyhook",
                true,
            ),
            (
                Group::Skyhook,
                vec!["node", "status", "--namespace=x"],
                "x",
                true,
            ),
        ] {
            let global = parse_as(group, &args).unwrap().cli.global;
            assert_eq!(
                (global.namespace.as_str(), global.namespace_given),
                (namespace, given),
                "{args:?}"
            );
        }
    }

    #[test]
    fn the_nodewright_help_speaks_of_nodewrights() {
        let mut command = Cli::command_for(Group::NodeWright);
        let help = command.render_help().to_string();
        assert!(help.contains("kubectl nodewright status"), "{help}");
        assert!(
            !help.contains("kubectl skyhook") && !help.contains("Skyhook"),
            "{help}"
        );
        let version = command.render_version();
        assert!(version.starts_with("NodeWright plugin: "), "{version}");
        let mut skyhook = Cli::command_for(Group::Skyhook);
        assert_eq!(
            skyhook.render_help().to_string(),
            Cli::command()
                .mut_arg("namespace", |a| a.help(namespace_help(Group::Skyhook)))
                .render_help()
                .to_string(),
            "the skyhook binary's help only gains the discovery note"
        );
        assert!(skyhook.render_version().starts_with("Skyhook plugin: "));
    }

    #[test]
    fn nodewright_words() {
        for (text, expected) in [
            ("Pause a Skyhook", "Pause a NodeWright"),
            (
                "kubectl skyhook node list --skyhook demo",
                "kubectl nodewright node list --nodewright demo",
            ),
            (
                "label skyhook.nvidia.com/ignore=true",
                "label nodewright.nvidia.com/ignore=true",
            ),
            ("Every Skyhooks' SKYHOOK", "Every NodeWrights' NODEWRIGHT"),
        ] {
            assert_eq!(nodewright_text(text), expected);
        }
    }

    #[test]
    fn package_filters() {
        let filter = |name: &str, version: Option<&str>| PackageFilter {
            name: name.to_owned(),
            version: version.map(str::to_owned),
        };
        for (input, expected) in [
            ("tuning", Ok(filter("tuning", None))),
            ("tuning:1.2.0", Ok(filter("tuning", Some("1.2.0")))),
            ("", Err(())),
            (":1.0", Err(())),
            ("tuning:", Err(())),
        ] {
            assert_eq!(
                parse_package_filter(input).map_err(|_| ()),
                expected,
                "{input}"
            );
        }
        assert_eq!(filter("a", Some("1")).to_string(), "a:1");
        match parse(&["reset", "demo", "--package", "tuning:1.1.0"])
            .unwrap()
            .command
        {
            Command::Reset(args) => assert_eq!(args.package, Some(filter("tuning", Some("1.1.0")))),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn update_state_takes_five_positionals_and_its_flags() {
        match parse(&[
            "update-state",
            "demo",
            "tuning",
            "1.1.0",
            "config",
            "complete",
            "--node",
            "a",
            "--node",
            "b",
            "-l",
            "pool=gpu",
            "--add",
            "-y",
            "--dry-run",
        ])
        .unwrap()
        .command
        {
            Command::UpdateState(args) => {
                assert_eq!(
                    (
                        args.skyhook.as_str(),
                        args.package.as_str(),
                        args.version.as_str()
                    ),
                    ("demo", "tuning", "1.1.0")
                );
                assert_eq!((args.stage, args.state), (Stage::Config, State::Complete));
                assert_eq!(args.nodes, ["a", "b"]);
                assert_eq!(args.selector.as_deref(), Some("pool=gpu"));
                assert!(args.add && args.confirm);
            }
            other => panic!("parsed as {other:?}"),
        }
        assert!(parse(&["update-state", "demo", "tuning", "1.1.0", "config", "done"]).is_err());
        assert!(
            parse(&[
                "update-state",
                "demo",
                "tuning",
                "1.1.0",
                "cleanup",
                "complete"
            ])
            .is_err()
        );
        assert!(parse(&["update-state", "demo", "tuning", "1.1.0"]).is_err());
    }
}
