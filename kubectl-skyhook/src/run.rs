//! The thin I/O layer: build a client from the kubeconfig flags, read what a command needs,
//! call the pure views and planners, and send their merge patches.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{ListParams, LogParams, Patch as KubePatch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Api, Client, Config};
use skyhook_api::keys;
use skyhook_api::v1alpha1::{DeploymentPolicy, Skyhook};

use crate::cli::{
    Cli, Command, CompletionShell, GlobalArgs, NodeCommand, PackageCommand, PolicyCommand, VERSION,
};
use crate::cluster::{self, Cluster};
use crate::output::{OutputError, View, render};
use crate::patches::{self, Change, Lifecycle, Patch, PlanError, Target};
use crate::pattern::{self, PatternError};
use crate::views;

/// How long `pause`/`disable` wait for the operator Deployment before going ahead without
/// knowing its version.
const OPERATOR_LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Field manager recorded on every patch.
const FIELD_MANAGER: &str = "kubectl-skyhook";

/// A failed command. `hint` says what to try.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The kubeconfig could not be loaded.
    #[error("failed to load the kubeconfig")]
    Kubeconfig {
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// The client could not be built.
    #[error("failed to create a Kubernetes client")]
    Client {
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Listing or reading objects failed.
    #[error("failed to {action}")]
    Read {
        /// What was read, e.g. `list Skyhooks`.
        action: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A Skyhook that does not exist.
    #[error("Skyhook {name:?} not found")]
    SkyhookNotFound {
        /// Its name.
        name: String,
    },
    /// A patch failed.
    #[error("failed to {description}")]
    Patch {
        /// What the patch does.
        description: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The manifest for `plan` could not be read.
    #[error("failed to read {path}")]
    ReadManifest {
        /// Its path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The manifest for `plan` is not a Skyhook.
    #[error("failed to parse {path} as a Skyhook")]
    ParseManifest {
        /// Its path.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_yaml::Error,
    },
    /// A node pattern is not a regex.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// A planner refused its arguments.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The output could not be rendered.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Writing the output or reading the answer to a prompt failed.
    #[error("failed to write the output or read the answer")]
    Terminal {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The user did not confirm.
    #[error("aborted: nothing was changed")]
    Aborted,
}

impl RunError {
    /// What to try next.
    pub fn hint(&self) -> &'static str {
        match self {
            RunError::Kubeconfig { .. } | RunError::Client { .. } => {
                "check --kubeconfig, --context, --cluster and --user (or $KUBECONFIG)"
            }
            RunError::Read { .. } => {
                "check that the cluster is reachable, the Skyhook CRDs are installed, and you may list these objects"
            }
            RunError::SkyhookNotFound { .. } => "`kubectl skyhook status` lists the Skyhooks",
            RunError::Patch { .. } => {
                "check that you may patch the object; `--dry-run` shows the intended change"
            }
            RunError::ReadManifest { .. } | RunError::ParseManifest { .. } => {
                "pass a Skyhook manifest (apiVersion skyhook.nvidia.com/v1alpha1, kind Skyhook) with -f"
            }
            RunError::Pattern(_) => {
                "a pattern with regex meta characters is an anchored regex; plain names match exactly"
            }
            RunError::Plan(PlanError::OperatorTooOld { .. }) => {
                "upgrade the Skyhook operator; older operators pause through spec.pause"
            }
            RunError::Plan(_) => "see `kubectl skyhook <command> --help`",
            RunError::Output(_) | RunError::Terminal { .. } => "try another -o format",
            RunError::Aborted => "pass --confirm (-y) to skip the question",
        }
    }
}

/// Where the command writes and how.
pub struct Console<'io> {
    /// Standard output.
    pub out: &'io mut dyn Write,
    /// Standard input, for confirmations.
    pub input: &'io mut dyn BufRead,
    /// Whether to colour tables (stdout is a terminal).
    pub colour: bool,
}

impl std::fmt::Debug for Console<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("colour", &self.colour)
            .finish_non_exhaustive()
    }
}

impl Console<'_> {
    fn print(&mut self, text: &str) -> Result<(), RunError> {
        self.out
            .write_all(text.as_bytes())
            .map_err(|source| RunError::Terminal { source })
    }

    fn line(&mut self, line: &str) -> Result<(), RunError> {
        self.print(&format!("{line}\n"))
    }

    fn show(&mut self, view: &impl View, global: &GlobalArgs) -> Result<(), RunError> {
        let text = render(view, global.output, self.colour)?;
        self.print(&text)
    }

    /// Asks `Continue? [y/N]:`; `y` or `yes` proceeds.
    fn confirm(&mut self) -> Result<bool, RunError> {
        self.print("Continue? [y/N]: ")?;
        self.out
            .flush()
            .map_err(|source| RunError::Terminal { source })?;
        let mut answer = String::new();
        self.input
            .read_line(&mut answer)
            .map_err(|source| RunError::Terminal { source })?;
        Ok(matches!(
            answer.trim().to_ascii_lowercase().as_str(),
            "y" | "yes"
        ))
    }
}

/// Runs one command line.
pub async fn run(cli: Cli, console: &mut Console<'_>) -> Result<(), RunError> {
    let global = cli.global;
    match cli.command {
        Command::Completion { shell } => {
            let shell = match shell {
                CompletionShell::Bash => clap_complete::Shell::Bash,
                CompletionShell::Zsh => clap_complete::Shell::Zsh,
                CompletionShell::Fish => clap_complete::Shell::Fish,
            };
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "kubectl-skyhook", console.out);
            Ok(())
        }
        Command::Version(args) => {
            console.line(&format!("Skyhook plugin:\t{VERSION}"))?;
            if args.client_only {
                return Ok(());
            }
            let operator = match tokio::time::timeout(args.timeout, operator_version(&global)).await
            {
                Ok(Ok(version)) => version,
                Ok(Err(reason)) => format!("unknown ({reason})"),
                Err(_) => format!("unknown (no answer within {:?})", args.timeout),
            };
            console.line(&format!("Skyhook operator:\t{operator}"))
        }
        Command::Status(args) => {
            let client = client(&global).await?;
            let mut shown = String::new();
            loop {
                let cluster = read_cluster(&client, &global, args.skyhook.is_some()).await?;
                let (text, complete) = match &args.skyhook {
                    None => {
                        let view = views::overview(&cluster);
                        (
                            render(&view, global.output, console.colour)?,
                            view.complete(),
                        )
                    }
                    Some(name) => {
                        let view = views::skyhook_detail(&cluster, name)
                            .ok_or_else(|| RunError::SkyhookNotFound { name: name.clone() })?;
                        (
                            render(&view, global.output, console.colour)?,
                            view.complete(),
                        )
                    }
                };
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
        Command::Plan(args) => {
            let client = client(&global).await?;
            let cluster = read_cluster(&client, &global, false).await?;
            // clap's argument group guarantees a file or a name.
            let planned = match args.file {
                Some(path) => read_manifest(path)?,
                None => find(&cluster, args.skyhook.as_deref().unwrap_or_default())?.clone(),
            };
            console.show(&views::plan(&cluster, &planned), &global)
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
            let patterns = pattern::parse_all(&nodes)?;
            let pods = Api::<Pod>::namespaced(client.clone(), &global.namespace);
            let listed = pods
                .list(&ListParams::default().labels(&format!("{}={skyhook}", keys::NAME_LABEL)))
                .await
                .map_err(|source| RunError::Read {
                    action: format!("list package pods in namespace {:?}", global.namespace),
                    source,
                })?;
            let targets =
                crate::logs::log_targets(&listed.items, &skyhook, &package, &patterns, stage);
            if targets.is_empty() {
                return console.line(&format!(
                    "No pods of package {package:?} of Skyhook {skyhook:?} exist in namespace {:?} (pods that succeeded are deleted quickly)",
                    global.namespace
                ));
            }
            for target in targets {
                console.line(&target.header())?;
                print_log(&pods, &target, follow, tail, console).await?;
            }
            Ok(())
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
    }
}

/// Prints one container's log, or streams it with `follow`.
async fn print_log(
    pods: &Api<Pod>,
    target: &crate::logs::LogTarget,
    follow: bool,
    tail: i64,
    console: &mut Console<'_>,
) -> Result<(), RunError> {
    let params = LogParams {
        container: Some(target.container.clone()),
        follow,
        tail_lines: (tail >= 0).then_some(tail),
        ..LogParams::default()
    };
    let failed = |source| RunError::Read {
        action: format!(
            "read the log of {}/{} container {}",
            target.namespace, target.pod, target.container
        ),
        source,
    };
    if !follow {
        let text = pods.logs(&target.pod, &params).await.map_err(failed)?;
        return console.print(&text);
    }
    let mut lines = pods
        .log_stream(&target.pod, &params)
        .await
        .map_err(failed)?
        .lines();
    while let Some(line) = lines.next().await {
        let line = line.map_err(|source| RunError::Terminal { source })?;
        console.line(&line)?;
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

async fn send(client: &Client, patch: &Patch) -> Result<(), RunError> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let body = KubePatch::Merge(&patch.body);
    let result = match &patch.target {
        Target::Skyhook(name) => Api::<Skyhook>::all(client.clone())
            .patch(name, &params, &body)
            .await
            .map(drop),
        Target::SkyhookStatus(name) => Api::<Skyhook>::all(client.clone())
            .patch_status(name, &params, &body)
            .await
            .map(drop),
        Target::Node(name) => Api::<Node>::all(client.clone())
            .patch(name, &params, &body)
            .await
            .map(drop),
    };
    result.map_err(|source| RunError::Patch {
        description: patch.description.clone(),
        source,
    })
}

/// A client from the kubeconfig flags.
pub async fn client(global: &GlobalArgs) -> Result<Client, RunError> {
    let options = KubeConfigOptions {
        context: global.context.clone(),
        cluster: global.cluster.clone(),
        user: global.user.clone(),
    };
    let config = match &global.kubeconfig {
        Some(path) => {
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|source| RunError::Kubeconfig { source })?;
            Config::from_custom_kubeconfig(kubeconfig, &options).await
        }
        None => Config::from_kubeconfig(&options).await,
    }
    .map_err(|source| RunError::Kubeconfig { source })?;
    Client::try_from(config).map_err(|source| RunError::Client { source })
}

async fn list<K>(api: Api<K>, action: &str) -> Result<Vec<K>, RunError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.list(&ListParams::default())
        .await
        .map(|list| list.items)
        .map_err(|source| RunError::Read {
            action: action.to_owned(),
            source,
        })
}

async fn get_skyhook(client: &Client, name: &str) -> Result<Skyhook, RunError> {
    Api::<Skyhook>::all(client.clone())
        .get_opt(name)
        .await
        .map_err(|source| RunError::Read {
            action: format!("get Skyhook {name:?}"),
            source,
        })?
        .ok_or_else(|| RunError::SkyhookNotFound {
            name: name.to_owned(),
        })
}

fn find<'c>(cluster: &'c Cluster, name: &str) -> Result<&'c Skyhook, RunError> {
    cluster
        .skyhook(name)
        .ok_or_else(|| RunError::SkyhookNotFound {
            name: name.to_owned(),
        })
}

/// Skyhooks, nodes and policies; with `pods`, also the package pods in the operator
/// namespace and the pods on nodes a Skyhook cordoned (for drain details).
async fn read_cluster(
    client: &Client,
    global: &GlobalArgs,
    pods: bool,
) -> Result<Cluster, RunError> {
    let mut cluster = Cluster {
        skyhooks: list(Api::<Skyhook>::all(client.clone()), "list Skyhooks").await?,
        nodes: list(Api::<Node>::all(client.clone()), "list nodes").await?,
        policies: list(
            Api::<DeploymentPolicy>::all(client.clone()),
            "list DeploymentPolicies",
        )
        .await?,
        pods: Vec::new(),
        pdbs: Vec::new(),
    };
    if pods {
        let package_pods = Api::<Pod>::namespaced(client.clone(), &global.namespace)
            .list(&ListParams::default().labels(keys::NAME_LABEL))
            .await
            .map_err(|source| RunError::Read {
                action: format!("list package pods in namespace {:?}", global.namespace),
                source,
            })?;
        cluster.pods = package_pods.items;
        let cordoned: Vec<String> = cluster
            .nodes
            .iter()
            .filter(|node| cluster::unschedulable(node))
            .filter(|node| {
                cluster::annotations(node)
                    .keys()
                    .any(|k| k.starts_with(keys::CORDON_ANNOTATION_PREFIX))
            })
            .map(|node| cluster::name_of(&node.metadata).to_owned())
            .collect();
        if !cordoned.is_empty() {
            cluster.pdbs = list(
                Api::<PodDisruptionBudget>::all(client.clone()),
                "list PodDisruptionBudgets",
            )
            .await?;
        }
        for node in cordoned {
            let on_node = Api::<Pod>::all(client.clone())
                .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
                .await
                .map_err(|source| RunError::Read {
                    action: format!("list pods on node {node:?}"),
                    source,
                })?;
            cluster.pods.extend(
                on_node
                    .items
                    .into_iter()
                    .filter(|pod| cluster::pod_label(pod, keys::NAME_LABEL).is_none()),
            );
        }
    }
    tracing::debug!(
        skyhooks = cluster.skyhooks.len(),
        nodes = cluster.nodes.len(),
        policies = cluster.policies.len(),
        pods = cluster.pods.len(),
        pdbs = cluster.pdbs.len(),
        "read the cluster"
    );
    Ok(cluster)
}

fn read_manifest(path: PathBuf) -> Result<Skyhook, RunError> {
    let text = std::fs::read_to_string(&path).map_err(|source| RunError::ReadManifest {
        path: path.clone(),
        source,
    })?;
    serde_yaml::from_str(&text).map_err(|source| RunError::ParseManifest { path, source })
}

/// The operator version from its Deployment in the namespace, or why it is unknown.
async fn operator_version(global: &GlobalArgs) -> Result<String, String> {
    let client = client(global).await.map_err(|e| error_chain(&e))?;
    let deployments = list(
        Api::<Deployment>::namespaced(client, &global.namespace),
        "list deployments",
    )
    .await
    .map_err(|e| error_chain(&e))?;
    crate::operator_version::operator_version(&deployments)
}

/// An error and its causes on one line: `a: b: c`.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
