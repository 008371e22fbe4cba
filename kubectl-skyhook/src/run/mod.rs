//! The thin I/O layer: build a client from the kubeconfig flags, read what a command needs,
//! call the pure views and planners, and send their merge patches.

mod console;
mod error;
mod kube_io;
mod migrate;

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, Client};
use skyhook_api::generation::Group;
use skyhook_api::nodewright_v1alpha1::NodeWright;
use skyhook_api::v1alpha1::Skyhook;

pub use console::Console;
pub use error::{RunError, error_chain};
pub use kube_io::client;
use kube_io::{
    discover_namespace, get_skyhook, get_skyhook_opt, list, operator_version, preflight, print_log,
    read_cluster, send,
};

use crate::cli::{
    Cli, Command, CompletionShell, GlobalArgs, NodeCommand, PackageCommand, PolicyCommand,
    ResetArgs, StatusArgs, UpdateStateArgs, VERSION, VersionArgs, binary_name,
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
            completion(global.group, shell, console);
            Ok(())
        }
        // `version` reports an unreachable or foreign cluster as an unknown operator version.
        Command::Version(args) => version(&global, console, args).await,
        command => {
            preflight(&client(&global).await?, global.group).await?;
            cluster_command(global, command, console).await
        }
    }
}

/// A command that reads or changes the cluster.
async fn cluster_command(
    global: GlobalArgs,
    command: Command,
    console: &mut Console<'_>,
) -> Result<(), RunError> {
    match command {
        Command::Completion { .. } | Command::Version(_) => Ok(()),
        Command::Status(args) => status(&global, console, args).await,
        Command::Plan(args) => {
            let client = client(&global).await?;
            let cluster = read_cluster(&client, &global, false).await?;
            // clap's argument group guarantees a file or a name.
            let planned = match args.file {
                Some(path) => read_manifest(global.group, path)?,
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
        Command::Reset(args) => reset(&global, console, args).await,
        Command::UpdateState(args) => update_state(&global, console, args).await,
        Command::DeploymentPolicy {
            action: PolicyCommand::Reset(target),
        } => {
            let client = client(&global).await?;
            let skyhook = get_skyhook(&client, global.group, &target.skyhook).await?;
            let change = patches::deployment_policy_reset_in(global.group, &skyhook);
            apply(&client, &global, console, &change, target.confirm).await
        }
        Command::Node { action } => node(&global, console, action).await,
        Command::Migrate(args) => {
            migrate::migrate(&client(&global).await?, &global, console, args).await
        }
        Command::Package { action } => package(&global, console, action).await,
    }
}

/// `completion`: the shell completion script, for the binary's own name and flags.
fn completion(group: Group, shell: CompletionShell, console: &mut Console<'_>) {
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut command = Cli::command_for(group);
    clap_complete::generate(shell, &mut command, binary_name(group), console.out);
}

/// `reset`: the whole node state and batch state, or with `--package` only that package's
/// node-state entries.
async fn reset(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    args: ResetArgs,
) -> Result<(), RunError> {
    let client = client(global).await?;
    let name = &args.target.skyhook;
    // Only the nodes and the object itself: a reset must also clear what a deleted (or
    // unreadable) object left on the nodes.
    let cluster = Cluster {
        group: global.group,
        nodes: list(Api::<Node>::all(client.clone()), "list nodes").await?,
        read_at: Timestamp::now(),
        ..Cluster::default()
    };
    let object = get_skyhook_opt(&client, global.group, name)
        .await
        .map_err(|error| error_chain(&error));
    let change = match (&args.package, &object) {
        (Some(filter), _) => {
            let operator = match &object {
                Ok(Some(object)) => operator_of(global, object).await,
                _ => deployment_operator_version(global).await,
            };
            patches::require_node_state_edits("reset --package", operator.as_deref())?;
            patches::reset_package(&cluster, name, &filter.name, filter.version.as_deref())
        }
        (None, Ok(Some(object))) => patches::reset(&cluster, object, args.skip_batch_reset),
        (None, Ok(None)) => {
            patches::reset_gone(&cluster, name).ok_or_else(|| RunError::SkyhookNotFound {
                name: name.clone(),
                group: global.group,
            })?
        }
        (None, Err(reason)) => patches::reset_unreadable(&cluster, name, reason),
    };
    apply(&client, global, console, &change, args.target.confirm).await
}

/// `update-state`: one package entry's stage and state on the target nodes.
async fn update_state(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    args: UpdateStateArgs,
) -> Result<(), RunError> {
    let client = client(global).await?;
    let object = get_skyhook(&client, global.group, &args.skyhook).await?;
    let operator = operator_of(global, &object).await;
    patches::require_node_state_edits("update-state", operator.as_deref())?;
    let cluster = Cluster {
        group: global.group,
        nodes: list(Api::<Node>::all(client.clone()), "list nodes").await?,
        read_at: Timestamp::now(),
        ..Cluster::default()
    };
    // The API server evaluates the selector, exactly as for `kubectl get nodes -l`.
    let selected = match &args.selector {
        None => None,
        Some(selector) => Some(
            Api::<Node>::all(client.clone())
                .list(&ListParams::default().labels(selector))
                .await
                .map_err(|source| RunError::Read {
                    action: format!("list nodes matching {selector:?}"),
                    source,
                })?
                .items
                .iter()
                .map(|node| crate::cluster::name_of(&node.metadata).to_owned())
                .collect::<Vec<String>>(),
        ),
    };
    let patterns = pattern::parse_all(&args.nodes)?;
    let update = patches::StateUpdate {
        package: &args.package,
        version: &args.version,
        stage: args.stage,
        state: args.state,
        nodes: &patterns,
        selected: selected.as_deref(),
        add: args.add,
    };
    let change = patches::update_state(&cluster, &object, &update)?;
    apply(&client, global, console, &change, args.confirm).await
}

/// The operator version that gates a verb on `object`: its version annotation, else the
/// operator Deployment's (waited for at most [`OPERATOR_LOOKUP_TIMEOUT`]).
async fn operator_of(global: &GlobalArgs, object: &Skyhook) -> Option<String> {
    match patches::operator_version_in(global.group, object, None) {
        Some(version) => Some(version.to_owned()),
        None => deployment_operator_version(global).await,
    }
}

/// The operator Deployment's version, `None` when unknown within [`OPERATOR_LOOKUP_TIMEOUT`].
async fn deployment_operator_version(global: &GlobalArgs) -> Option<String> {
    tokio::time::timeout(OPERATOR_LOOKUP_TIMEOUT, operator_version(global))
        .await
        .ok()
        .and_then(Result::ok)
}

/// `version`: the plugin's version and, unless `--client-only`, the operator's.
async fn version(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    args: VersionArgs,
) -> Result<(), RunError> {
    let kind = global.group.kind();
    console.line(&format!("{kind} plugin:\t{VERSION}"))?;
    if args.client_only {
        return Ok(());
    }
    let operator = match tokio::time::timeout(args.timeout, operator_version(global)).await {
        Ok(Ok(version)) => version,
        Ok(Err(reason)) => format!("unknown ({reason})"),
        Err(_) => format!("unknown (no answer within {:?})", args.timeout),
    };
    console.line(&format!("{kind} operator:\t{operator}"))
}

/// `status`: the overview or one Skyhook's detail; with `--watch`, redrawn whenever it changes
/// until the rollout is complete.
async fn status(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    args: StatusArgs,
) -> Result<(), RunError> {
    let client = client(global).await?;
    // Only the detail view reads the operator's pods.
    let global = &if args.skyhook.is_some() {
        with_namespace(&client, global).await
    } else {
        global.clone()
    };
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
                    group: cluster.group,
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
    let skyhook = get_skyhook(&client, global.group, &target.skyhook).await?;
    // The Deployment is only consulted when the operator has not annotated the Skyhook.
    let operator = operator_of(global, &skyhook).await;
    let change = patches::lifecycle_in(global.group, &skyhook, verb, operator.as_deref())?;
    apply(&client, global, console, &change, target.confirm).await
}

async fn node(
    global: &GlobalArgs,
    console: &mut Console<'_>,
    action: NodeCommand,
) -> Result<(), RunError> {
    let client = client(global).await?;
    let cluster = Cluster {
        group: global.group,
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
        group: global.group,
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
            let global = with_namespace(&client, global).await;
            package_logs(&global, console, &client, selection, (follow, tail)).await
        }
        PackageCommand::Rerun {
            package,
            skyhook,
            nodes,
            stage,
            confirm,
        } => {
            let patterns = pattern::parse_all(&nodes)?;
            let skyhook = get_skyhook(&client, global.group, &skyhook).await?;
            let change = patches::package_rerun(&cluster, &skyhook, &package, &patterns, stage)?;
            apply(&client, global, console, &change, confirm).await
        }
        PackageCommand::Uninstall {
            package,
            skyhook,
            cancel,
            confirm,
        } => {
            let skyhook = get_skyhook(&client, global.group, &skyhook).await?;
            let change = patches::package_uninstall_in(global.group, &skyhook, &package, cancel)?;
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

    let keys = global.group.keys();
    let patterns = pattern::parse_all(&nodes)?;
    let pods = Api::<Pod>::namespaced(client.clone(), &global.namespace);
    let listed = pods
        .list(&ListParams::default().labels(&format!("{}={skyhook}", keys.name_label)))
        .await
        .map_err(|source| RunError::Read {
            action: format!("list package pods in namespace {:?}", global.namespace),
            source,
        })?;
    let targets =
        crate::logs::log_targets_in(keys, &listed.items, &skyhook, &package, &patterns, stage);
    if targets.is_empty() {
        let container = stage.map_or_else(
            || "a started container".to_owned(),
            |stage| format!("a container {package}-{stage}"),
        );
        return console.line(&format!(
                    "No log to show: no pod of package {package:?} of {} {skyhook:?} in namespace {:?} has {container} (pods that succeeded are deleted quickly)",
                    keys.kind,
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
        send(client, global.group, patch).await?;
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
            group: cluster.group,
        })
}

/// `global` with the operator namespace discovered when `-n` was not given.
async fn with_namespace(client: &Client, global: &GlobalArgs) -> GlobalArgs {
    GlobalArgs {
        namespace: discover_namespace(client, global).await,
        ..global.clone()
    }
}

/// The manifest `plan -f` plans: a Skyhook, or a NodeWright under `kubectl nodewright`.
fn read_manifest(group: Group, path: PathBuf) -> Result<Skyhook, RunError> {
    let text = std::fs::read_to_string(&path).map_err(|source| RunError::ReadManifest {
        path: path.clone(),
        source,
    })?;
    let parsed = match group {
        Group::Skyhook => serde_yaml::from_str(&text),
        Group::NodeWright => serde_yaml::from_str::<NodeWright>(&text).map(Skyhook::from),
    };
    parsed.map_err(|source| RunError::ParseManifest {
        path,
        group,
        source,
    })
}
