//! The Kubernetes calls: a client from the kubeconfig flags, lists, merge patches and logs.

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, LogParams, Patch as KubePatch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use skyhook_api::generation::Group;
use skyhook_api::nodewright_v1alpha1::{self, NodeWright};
use skyhook_api::v1alpha1::{DeploymentPolicy, Skyhook};

use crate::cli::{GlobalArgs, binary_name};
use crate::cluster::{self, Cluster};
use crate::namespace::{Probed, Step, Sweep, next_step};
use crate::operator_version::is_operator;
use crate::patches::{Patch, Target};

use super::{Console, RunError, error_chain};

/// Prints one container's log, or streams it with `follow`.
pub(super) async fn print_log(
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
    let failed = |source| RunError::Log {
        container: format!(
            "{}/{} container {}",
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

/// Sends `patch`; a workload object is one of `group`.
pub(super) async fn send(client: &Client, group: Group, patch: &Patch) -> Result<(), RunError> {
    let params = PatchParams {
        // The field manager recorded on every patch: the plugin's binary name.
        field_manager: Some(binary_name(group).to_owned()),
        ..PatchParams::default()
    };
    let body = KubePatch::Merge(&patch.body);
    let result = match (&patch.target, group) {
        (Target::Skyhook(name), Group::Skyhook) => Api::<Skyhook>::all(client.clone())
            .patch(name, &params, &body)
            .await
            .map(drop),
        (Target::Skyhook(name), Group::NodeWright) => Api::<NodeWright>::all(client.clone())
            .patch(name, &params, &body)
            .await
            .map(drop),
        (Target::SkyhookStatus(name), Group::Skyhook) => Api::<Skyhook>::all(client.clone())
            .patch_status(name, &params, &body)
            .await
            .map(drop),
        (Target::SkyhookStatus(name), Group::NodeWright) => Api::<NodeWright>::all(client.clone())
            .patch_status(name, &params, &body)
            .await
            .map(drop),
        (Target::Node(name), _) => Api::<Node>::all(client.clone())
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

pub(super) async fn list<K>(api: Api<K>, action: &str) -> Result<Vec<K>, RunError>
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

/// The workload object `name` of `group`; a NodeWright as the Skyhook of the same fields.
pub(super) async fn get_skyhook(
    client: &Client,
    group: Group,
    name: &str,
) -> Result<Skyhook, RunError> {
    let found = get_skyhook_opt(client, group, name)
        .await
        .map_err(|source| RunError::Read {
            action: format!("get {} {name:?}", group.kind()),
            source,
        })?;
    found.ok_or_else(|| RunError::SkyhookNotFound {
        name: name.to_owned(),
        group,
    })
}

/// The workload object `name` of `group`, `None` when it does not exist.
pub(super) async fn get_skyhook_opt(
    client: &Client,
    group: Group,
    name: &str,
) -> Result<Option<Skyhook>, kube::Error> {
    match group {
        Group::Skyhook => Api::<Skyhook>::all(client.clone()).get_opt(name).await,
        Group::NodeWright => Ok(Api::<NodeWright>::all(client.clone())
            .get_opt(name)
            .await?
            .map(Skyhook::from)),
    }
}

/// Every workload object of `group`, as Skyhooks.
async fn list_workloads(client: &Client, group: Group) -> Result<Vec<Skyhook>, RunError> {
    let action = format!("list {}s", group.kind());
    match group {
        Group::Skyhook => list(Api::<Skyhook>::all(client.clone()), &action).await,
        Group::NodeWright => Ok(list(Api::<NodeWright>::all(client.clone()), &action)
            .await?
            .into_iter()
            .map(Skyhook::from)
            .collect()),
    }
}

/// Every DeploymentPolicy of `group`, as the skyhook group's type of the same fields.
async fn list_policies(client: &Client, group: Group) -> Result<Vec<DeploymentPolicy>, RunError> {
    let action = "list DeploymentPolicies";
    match group {
        Group::Skyhook => list(Api::<DeploymentPolicy>::all(client.clone()), action).await,
        Group::NodeWright => Ok(list(
            Api::<nodewright_v1alpha1::DeploymentPolicy>::all(client.clone()),
            action,
        )
        .await?
        .into_iter()
        .map(DeploymentPolicy::from)
        .collect()),
    }
}

/// Skyhooks, nodes and policies; with `pods`, also the package pods in the operator
/// namespace and the pods on nodes a Skyhook cordoned (for drain details).
pub(super) async fn read_cluster(
    client: &Client,
    global: &GlobalArgs,
    pods: bool,
) -> Result<Cluster, RunError> {
    let group = global.group;
    let keys = group.keys();
    let mut cluster = Cluster {
        group,
        skyhooks: list_workloads(client, group).await?,
        nodes: list(Api::<Node>::all(client.clone()), "list nodes").await?,
        policies: list_policies(client, group).await?,
        pods: Vec::new(),
        pdbs: Vec::new(),
        read_at: Timestamp::now(),
    };
    if pods {
        let package_pods = Api::<Pod>::namespaced(client.clone(), &global.namespace)
            .list(&ListParams::default().labels(keys.name_label))
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
                    .any(|k| k.starts_with(keys.cordon_annotation_prefix))
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
                    .filter(|pod| cluster::pod_label(pod, keys.name_label).is_none()),
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

/// The operator version from its Deployment in the namespace, or why it is unknown.
pub(super) async fn operator_version(global: &GlobalArgs) -> Result<String, String> {
    let client = client(global).await.map_err(|e| error_chain(&e))?;
    let namespace = discover_namespace(&client, global).await;
    let deployments = list(
        Api::<Deployment>::namespaced(client, &namespace),
        "list deployments",
    )
    .await
    .map_err(|e| error_chain(&e))?;
    crate::operator_version::operator_version(&deployments)
}

/// The namespace of the operator: `-n` when given, else discovered by
/// [`crate::namespace::next_step`]. Every read failure counts as "not there": discovery only
/// chooses a default, and the command reports its own reads' failures.
pub(super) async fn discover_namespace(client: &Client, global: &GlobalArgs) -> String {
    let explicit = global.namespace_given.then_some(global.namespace.as_str());
    let mut probed = Probed::default();
    loop {
        match next_step(global.group, explicit, &probed) {
            Step::Use { namespace, note } => {
                if let Some(note) = note {
                    eprintln!("{note}");
                }
                tracing::debug!(%namespace, "operator namespace");
                return namespace;
            }
            Step::Probe(namespace) => {
                let found = Api::<Deployment>::namespaced(client.clone(), namespace)
                    .list(&ListParams::default())
                    .await
                    .is_ok_and(|list| list.items.iter().any(is_operator));
                probed.namespaces.push((namespace.to_owned(), found));
            }
            Step::Sweep => {
                let sweep = match Api::<Deployment>::all(client.clone())
                    .list(&ListParams::default())
                    .await
                {
                    Ok(list) => {
                        let mut namespaces: Vec<String> = (list.items.iter())
                            .filter(|d| is_operator(d))
                            .filter_map(|d| d.metadata.namespace.clone())
                            .collect();
                        namespaces.sort_unstable();
                        namespaces.dedup();
                        Sweep::Found(namespaces)
                    }
                    Err(error) => {
                        tracing::debug!(error = %error_chain(&error), "no cluster-wide Deployment sweep");
                        Sweep::Unavailable
                    }
                };
                probed.sweep = Some(sweep);
            }
        }
    }
}

/// Refuses to go on when the cluster does not serve the plugin's API group (see
/// [`crate::namespace::preflight`]); the skyhook binary never reads the groups.
pub(super) async fn preflight(client: &Client, group: Group) -> Result<(), RunError> {
    if !crate::namespace::checks_served_groups(group) {
        return Ok(());
    }
    let groups = client
        .list_api_groups()
        .await
        .map_err(|source| RunError::Read {
            action: "list the API groups the cluster serves".to_owned(),
            source,
        })?;
    let served = groups.groups.iter().map(|g| g.name.as_str());
    match crate::namespace::preflight(group, served) {
        None => Ok(()),
        Some(message) => Err(RunError::Preflight { message }),
    }
}
