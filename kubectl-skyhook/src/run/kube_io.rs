//! The Kubernetes calls: a client from the kubeconfig flags, lists, merge patches and logs.

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, LogParams, Patch as KubePatch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use skyhook_api::keys;
use skyhook_api::v1alpha1::{DeploymentPolicy, Skyhook};

use crate::cli::GlobalArgs;
use crate::cluster::{self, Cluster};
use crate::patches::{Patch, Target};

use super::{Console, RunError, error_chain};

/// Field manager recorded on every patch.
const FIELD_MANAGER: &str = "kubectl-skyhook";

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

pub(super) async fn send(client: &Client, patch: &Patch) -> Result<(), RunError> {
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

pub(super) async fn get_skyhook(client: &Client, name: &str) -> Result<Skyhook, RunError> {
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

/// Skyhooks, nodes and policies; with `pods`, also the package pods in the operator
/// namespace and the pods on nodes a Skyhook cordoned (for drain details).
pub(super) async fn read_cluster(
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
        read_at: Timestamp::now(),
    };
    if pods {
        let package_pods = Api::<Pod>::namespaced(client.clone(), &global.namespace)
            .list(&ListParams::default().labels(keys::SKYHOOK.name_label))
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
                    .any(|k| k.starts_with(keys::SKYHOOK.cordon_annotation_prefix))
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
                    .filter(|pod| cluster::pod_label(pod, keys::SKYHOOK.name_label).is_none()),
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
    let deployments = list(
        Api::<Deployment>::namespaced(client, &global.namespace),
        "list deployments",
    )
    .await
    .map_err(|e| error_chain(&e))?;
    crate::operator_version::operator_version(&deployments)
}
