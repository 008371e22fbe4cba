//! The thin I/O layer: build a client from the kubeconfig flags, read what a command needs,
//! call the pure views and planners, and send their merge patches.

mod console;
mod error;
mod kube_io;

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};
use skyhook_api::keys;
use skyhook_api::v1alpha1::Skyhook;

pub use console::Console;
pub use error::{RunError, error_chain};
pub use kube_io::client;
use kube_io::{get_skyhook, list, operator_version, print_log, read_cluster, send};

use crate::cli::{
    Cli, Command, CompletionShell, GlobalArgs, NodeCommand, PackageCommand, PolicyCommand,
    StatusArgs, VERSION, VersionArgs,
};
use crate::cluster::Cluster;
use crate::output::render;
use crate::patches::{self, Change, Lifecycle};
use crate::pattern;
use crate::views;

/// How long `pause`/`disable` wait for the operator Deployment before going ahead without
/// knowing its version.
const OPERATOR_LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Runs one command line.
pub async fn run(cli: Cli, console: &mut Console<'_>) -> Result<(), RunError> {
    let global = cli.global;
    match cli.command {
        Command::Completion { shell } => {
            completion(shell, console);
            Ok(())
        }
        Command::Version(args) => version(&global, console, args).await,
        Command::Status(args) => status(&global, console, args).await,
        Command::Plan(args) => {
            let client = client(&global).await?;
            let cluster = read_cluster(&client, &global, false).await?;
            // clap's argument group guarantees a file or a name.
            let planned = match args.file {
                Some(path) => read_manifest(path)?,
                None => find(&cluster, args.skyhook.as_deref().unwrap_or_default())?.clone(),
            };
            console.show(
                &views::plan(&cluster, &planned, args.uninstall_mode),
                &global,
            )
        }
        Command::Pause(target) => lifecycle(&global, console, target, Lifecycle::Pause).await,
        Command::Resume(target) => lifecycle(&global, console, target, Lifecycle::Resume).await,
        Command::Disable(target) => lifecycle(&global, console, target, Lifecycle::Disable).await,
        Command::Enable(target) => lifecycle(&global, console, target, Lifecycle::Enable).await,
        Command::Reset(args) => {
            let client = client(&global).await?;
            let cluster = read_cluster(&client, &global, false).await?;
            let skyhook = find(&cluster, &args.target.skyhook)?;
            let change = patches::reset(&cluster, skyhook, args.skip_batch_reset);
            apply(&client, &global, console, &change, args.target.confirm).await
        }
        Command::DeploymentPolicy {
            action: PolicyCommand::Reset(target),
        } => {
            let client = client(&global).await?;
            let skyhook = get_skyhook(&client, &target.skyhook).await?;
            let change = patches::deployment_policy_reset(&skyhook);
            apply(&client, &global, console, &change, target.confirm).await
        }
        Command::Node { action } => node(&global, console, action).await,
        Command::Package { action } => package(&global, console, action).await,
    }
}

/// `completion`: the shell completion script.
fn completion(shell: CompletionShell, console: &mut Console<'_>) {
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut command = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut command, "kubectl-skyhook", console.out);
}

/// `version`: the plugin's version and, unless `--client-only`, the operator's.
async fn version(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    args: VersionArgs,
) -> Result<(), RunError> {
    console.line(&format!("Skyhook plugin:\t{VERSION}"))?;
    if args.client_only {
        return Ok(());
    }
    let operator = match tokio::time::timeout(args.timeout, operator_version(global)).await {
        Ok(Ok(version)) => version,
        Ok(Err(reason)) => format!("unknown ({reason})"),
        Err(_) => format!("unknown (no answer within {:?})", args.timeout),
    };
    console.line(&format!("Skyhook operator:\t{operator}"))
}

/// `status`: the overview or one Skyhook's detail; with `--watch`, redrawn whenever it changes
/// until the rollout is complete.
async fn status(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    args: StatusArgs,
) -> Result<(), RunError> {
    let client = client(global).await?;
    let mut shown = String::new();
    loop {
        let cluster = read_cluster(&client, global, args.skyhook.is_some()).await?;
        let (text, complete) =
            render_status(&cluster, args.skyhook.as_deref(), global, console.colour)?;
        if text != shown {
            if !shown.is_empty() {
                // A terminal shows the latest state in place; a pipe gets a history.
                console.print(if console.colour {
                    "\u{1b}[H\u{1b}[2J"
                } else {
                    "\n"
                })?;
            }
            console.print(&text)?;
            shown = text;
        }
        if !args.watch || complete {
            return Ok(());
        }
        // A refresh interval for a human watching, not a synchronisation point.
        tokio::time::sleep(args.interval).await;
    }
}

/// The status text, and whether the rollout it shows is complete.
fn render_status(
    cluster: &Cluster,
    skyhook: Option<&str>,
    global: &GlobalArgs,
    colour: bool,
) -> Result<(String, bool), RunError> {
    match skyhook {
        None => {
            let view = views::overview(cluster);
            Ok((render(&view, global.output, colour)?, view.complete()))
        }
        Some(name) => {
            let view =
                views::skyhook_detail(cluster, name).ok_or_else(|| RunError::SkyhookNotFound {
                    name: name.to_owned(),
                })?;
            Ok((render(&view, global.output, colour)?, view.complete()))
        }
    }
}

async fn lifecycle(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    target: crate::cli::SkyhookTarget,
    verb: Lifecycle,
) -> Result<(), RunError> {
    let client = client(global).await?;
    let skyhook = get_skyhook(&client, &target.skyhook).await?;
    // The Deployment is only consulted when the operator has not annotated the Skyhook.
    let deployment = match patches::operator_version_of(&skyhook, None) {
        Some(_) => None,
        None => tokio::time::timeout(OPERATOR_LOOKUP_TIMEOUT, operator_version(global))
            .await
            .ok()
            .and_then(Result::ok),
    };
    let operator = patches::operator_version_of(&skyhook, deployment.as_deref());
    let change = patches::lifecycle(&skyhook, verb, operator)?;
    apply(&client, global, console, &change, target.confirm).await
}

async fn node(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    action: NodeCommand,
) -> Result<(), RunError> {
    let client = client(global).await?;
    let cluster = Cluster {
        nodes: list(Api::<Node>::all(client.clone()), "list nodes").await?,
        read_at: Timestamp::now(),
        ..Cluster::default()
    };
    match action {
        NodeCommand::List { skyhook } => {
            console.show(&views::node_list(&cluster, &skyhook), global)
        }
        NodeCommand::Status { patterns, skyhook } => {
            let patterns = pattern::parse_all(&patterns)?;
            console.show(
                &views::node_status(&cluster, &patterns, skyhook.as_deref()),
                global,
            )
        }
        NodeCommand::Reset {
            patterns,
            skyhook,
            confirm,
        } => {
            let patterns = pattern::parse_all(&patterns)?;
            let change = patches::node_reset(&cluster, &skyhook, &patterns);
            apply(&client, global, console, &change, confirm).await
        }
        NodeCommand::Ignore { patterns } => {
            let patterns = pattern::parse_all(&patterns)?;
            let change = patches::node_ignore(&cluster, &patterns, true);
            apply(&client, global, console, &change, true).await
        }
        NodeCommand::Unignore { patterns } => {
            let patterns = pattern::parse_all(&patterns)?;
            let change = patches::node_ignore(&cluster, &patterns, false);
            apply(&client, global, console, &change, true).await
        }
    }
}

async fn package(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    action: PackageCommand,
) -> Result<(), RunError> {
    let client = client(global).await?;
    let nodes = list(Api::<Node>::all(client.clone()), "list nodes").await?;
    let cluster = Cluster {
        nodes,
        read_at: Timestamp::now(),
        ..Cluster::default()
    };
    match action {
        PackageCommand::Status {
            package,
            skyhook,
            nodes,
        } => {
            let patterns = pattern::parse_all(&nodes)?;
            console.show(
                &views::package_status(&cluster, &skyhook, &package, &patterns),
                global,
            )
        }
        PackageCommand::Logs {
            package,
            skyhook,
            nodes,
            stage,
            follow,
            tail,
        } => {
            let selection = LogSelection {
                package,
                skyhook,
                nodes,
                stage,
            };
            package_logs(global, console, &client, selection, (follow, tail)).await
        }
        PackageCommand::Rerun {
            package,
            skyhook,
            nodes,
            stage,
            confirm,
        } => {
            let patterns = pattern::parse_all(&nodes)?;
            let skyhook = get_skyhook(&client, &skyhook).await?;
            let change = patches::package_rerun(&cluster, &skyhook, &package, &patterns, stage)?;
            apply(&client, global, console, &change, confirm).await
        }
        PackageCommand::Uninstall {
            package,
            skyhook,
            cancel,
            confirm,
        } => {
            let skyhook = get_skyhook(&client, &skyhook).await?;
            let change = patches::package_uninstall(&skyhook, &package, cancel)?;
            apply(&client, global, console, &change, confirm).await
        }
    }
}

/// Which package logs `package logs` shows.
struct LogSelection {
    package: String,
    skyhook: String,
    nodes: Vec<String>,
    stage: Option<skyhook_api::v1alpha1::Stage>,
}

/// `package logs`: the logs of the selected package pods' containers, one after another.
async fn package_logs(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    client: &Client,
    selection: LogSelection,
    (follow, tail): (bool, i64),
) -> Result<(), RunError> {
    let LogSelection {
        package,
        skyhook,
        nodes,
        stage,
    } = selection;

    let patterns = pattern::parse_all(&nodes)?;
    let pods = Api::<Pod>::namespaced(client.clone(), &global.namespace);
    let listed = pods
        .list(&ListParams::default().labels(&format!("{}={skyhook}", keys::SKYHOOK.name_label)))
        .await
        .map_err(|source| RunError::Read {
            action: format!("list package pods in namespace {:?}", global.namespace),
            source,
        })?;
    let targets = crate::logs::log_targets(&listed.items, &skyhook, &package, &patterns, stage);
    if targets.is_empty() {
        let container = stage.map_or_else(
            || "a started container".to_owned(),
            |stage| format!("a container {package}-{stage}"),
        );
        return console.line(&format!(
                    "No log to show: no pod of package {package:?} of Skyhook {skyhook:?} in namespace {:?} has {container} (pods that succeeded are deleted quickly)",
                    global.namespace
                ));
    }
    for target in targets {
        console.line(&target.header())?;
        print_log(&pods, &target, follow, tail, console).await?;
    }
    Ok(())
}

/// Prints the change, asks unless confirmed, then sends the patches in order (or, in a dry
/// run, prints what they would do).
async fn apply(
    client: &Client,
    global: &GlobalArgs,
    console: &mut Console<'_>,
    change: &Change,
    confirmed: bool,
) -> Result<(), RunError> {
    for note in &change.notes {
        console.line(note)?;
    }
    if change.patches.is_empty() {
        return Ok(());
    }
    for line in &change.summary {
        console.line(line)?;
    }
    if global.dry_run {
        for line in change.dry_run() {
            console.line(&line)?;
        }
        return Ok(());
    }
    if change.confirm && !confirmed && !console.confirm()? {
        return Err(RunError::Aborted);
    }
    for patch in &change.patches {
        send(client, patch).await?;
        tracing::debug!(description = %patch.description, body = %patch.body, "patched");
    }
    for line in &change.done {
        console.line(line)?;
    }
    Ok(())
}

fn find<'c>(cluster: &'c Cluster, name: &str) -> Result<&'c Skyhook, RunError> {
    cluster
        .skyhook(name)
        .ok_or_else(|| RunError::SkyhookNotFound {
            name: name.to_owned(),
        })
}

fn read_manifest(path: PathBuf) -> Result<Skyhook, RunError> {
    let text = std::fs::read_to_string(&path).map_err(|source| RunError::ReadManifest {
        path: path.clone(),
        source,
    })?;
    serde_yaml::from_str(&text).map_err(|source| RunError::ParseManifest { path, source })
}
