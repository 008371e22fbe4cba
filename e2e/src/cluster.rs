//! A devcluster with skyhook installed, and the Kubernetes calls the tests share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use devcluster::node::{Heartbeat, NodeSize};
use devcluster::{DevCluster, DevClusterOptions};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use skyhook_api::nodewright_v1alpha1::NodeWright;
use skyhook_devcluster::{ControllerProcess, InstallOptions, SkyhookInstall};

/// A running cluster with the controller. Fields drop in order: the controller stops before the
/// cluster it talks to.
#[derive(Debug)]
pub struct Installed {
    pub controller: ControllerProcess,
    pub cluster: DevCluster,
}

impl Installed {
    /// The last lines of the controller's log, for failure messages.
    pub fn controller_log_tail(&self, lines: usize) -> String {
        devcluster::controlplane::process::log_tail(&self.controller.record().log, lines)
    }

    /// Waits for the Skyhook's `status.status` to be `wanted`, with the controller's log tail
    /// in the error.
    pub async fn wait_for_status(
        &self,
        skyhook: &str,
        wanted: &str,
    ) -> anyhow::Result<DynamicObject> {
        let client = self.cluster.client()?;
        wait_for_skyhook_status(&client, skyhook, wanted, crate::WAIT)
            .await
            .with_context(|| format!("controller log tail:\n{}", self.controller_log_tail(40)))
    }

    /// Waits until the Skyhook satisfies `condition` (see [`wait_for_skyhook`]), with the
    /// controller's log tail in the error.
    pub async fn wait_for_skyhook(
        &self,
        skyhook: &str,
        what: &str,
        condition: impl Fn(&DynamicObject) -> bool,
    ) -> anyhow::Result<DynamicObject> {
        let client = self.cluster.client()?;
        wait_for_skyhook(&client, skyhook, what, condition)
            .await
            .with_context(|| format!("controller log tail:\n{}", self.controller_log_tail(40)))
    }

    /// Waits until the Skyhook is `complete` and the controller has seen its current
    /// generation (a rollout of the last edit finished, not an earlier one).
    pub async fn wait_settled(&self, skyhook: &str) -> anyhow::Result<DynamicObject> {
        self.wait_for_skyhook(skyhook, "complete at its current generation", |s| {
            skyhook_status(s) == Some("complete")
                && s.data["status"]["observedGeneration"].as_i64() == s.metadata.generation
        })
        .await
    }

    /// The controller's Prometheus port on 127.0.0.1 (see [`crate::metrics`]).
    pub fn metrics_port(&self) -> u16 {
        self.controller.record().metrics_port
    }
}

/// Builds the binaries, starts a cluster of `nodes` full nodes and installs skyhook into it.
pub async fn install(nodes: usize) -> anyhow::Result<Installed> {
    install_with_env(nodes, &[]).await
}

/// [`install`], with extra controller environment variables (e.g. a short `DRAIN_TIMEOUT`).
pub async fn install_with_env(
    nodes: usize,
    controller_env: &[(&str, &str)],
) -> anyhow::Result<Installed> {
    install_with(Setup {
        nodes,
        controller_env: controller_env
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect(),
        ..Setup::default()
    })
    .await
}

/// What [`install_with`] starts.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    pub nodes: usize,
    /// Nodes without overlay mounts: enough for the `agentless` image, which runs no process.
    pub light: bool,
    /// Labels every node gets.
    pub node_labels: BTreeMap<String, String>,
    /// The controller's `AGENT_IMAGE`; `None`: its default (the built skyhook-agent).
    pub agent_image: Option<String>,
    /// Extra controller environment variables.
    pub controller_env: BTreeMap<String, String>,
    /// The nodes' lease renewals and the node lifecycle controller's grace period.
    pub heartbeat: Heartbeat,
    /// How much each Node object carries.
    pub node_size: NodeSize,
    /// An image map (the format of `devcluster/images.yaml`) tried before the built-in one.
    pub image_map: Option<PathBuf>,
}

impl Setup {
    /// Upstream's core e2e set-up (spec §6.1): `nodes` light nodes labelled
    /// `skyhook.nvidia.com/test-node=skyhooke2e`, and `ghcr.io/nvidia/skyhook/agentless:6.2.0` as
    /// the agent image, so every stage sleeps `SLEEP_LEN` and exits `EXIT_CODE` from the package env.
    pub fn agentless(nodes: usize) -> Self {
        Self {
            nodes,
            light: true,
            node_labels: BTreeMap::from([(TEST_NODE_LABEL.to_owned(), TEST_NODE_VALUE.to_owned())]),
            agent_image: Some(AGENTLESS_AGENT_IMAGE.to_owned()),
            controller_env: BTreeMap::new(),
            heartbeat: Heartbeat::KUBELET,
            node_size: NodeSize::Small,
            image_map: None,
        }
    }

    /// `/metrics` over HTTPS to authorised readers (`METRICS_SECURE=true`, the binary's and the
    /// chart's default); without it the harness scrapes plain HTTP (see
    /// `skyhook_devcluster::install::controller_env`).
    pub fn secure_metrics(mut self) -> Self {
        self.controller_env
            .insert("METRICS_SECURE".to_owned(), "true".to_owned());
        self
    }

    /// One attempt per package stage (`JOB_BACKOFF_LIMIT=0`): for a test of what a failed
    /// stage does to its node and rollout, not of the retries before it, which the Job
    /// controller spaces 10, 20 and 40 s apart. The retries have tests of their own.
    pub fn single_attempt(mut self) -> Self {
        self.controller_env
            .insert("JOB_BACKOFF_LIMIT".to_owned(), "0".to_owned());
        self
    }
}

/// The label upstream's e2e Skyhooks select their nodes by, and its value.
pub const TEST_NODE_LABEL: &str = "skyhook.nvidia.com/test-node";
pub const TEST_NODE_VALUE: &str = "skyhooke2e";
/// Upstream's e2e agent image (the operator's `AGENT_IMAGE` in its test deployment).
pub const AGENTLESS_AGENT_IMAGE: &str = "ghcr.io/nvidia/skyhook/agentless:6.2.0";

/// Builds the binaries, starts a cluster as `setup` says and installs skyhook into it.
pub async fn install_with(setup: Setup) -> anyhow::Result<Installed> {
    crate::build_binaries()?;
    install_built(setup).await
}

/// [`install_with`] with the binaries already built (the benchmark runs those next to it).
pub async fn install_built(setup: Setup) -> anyhow::Result<Installed> {
    let (cluster, options) = start_cluster(setup).await?;
    install_controller(cluster, options).await
}

/// Starts the cluster `setup` describes; returns it with the controller's install options, for
/// a caller that prepares the cluster before the controller starts.
pub async fn start_cluster(setup: Setup) -> anyhow::Result<(DevCluster, InstallOptions)> {
    let cluster = DevCluster::start(DevClusterOptions {
        images: skyhook_devcluster::images(),
        nodes: setup.nodes,
        light: setup.light,
        node_labels: setup.node_labels,
        heartbeat: setup.heartbeat,
        node_size: setup.node_size,
        image_map: setup.image_map,
        ..DevClusterOptions::default()
    })
    .await
    .context("starting the devcluster")?;
    let options = InstallOptions {
        agent_image: setup.agent_image,
        extra_env: setup.controller_env,
        ..InstallOptions::default()
    };
    Ok((cluster, options))
}

/// Installs skyhook's controller into `cluster`.
pub async fn install_controller(
    cluster: DevCluster,
    options: InstallOptions,
) -> anyhow::Result<Installed> {
    let controller = cluster
        .install(options)
        .await
        .context("installing skyhook into the devcluster")?;
    Ok(Installed {
        controller,
        cluster,
    })
}

/// The Skyhook resource API (cluster scoped).
pub fn skyhook_api(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("skyhook.nvidia.com", "v1alpha1", "Skyhook"),
        "skyhooks",
    );
    Api::all_with(client.clone(), &resource)
}

/// Applies a one-document Skyhook manifest verbatim (server-side apply); returns its name.
pub async fn apply_manifest(client: &kube::Client, path: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let object: DynamicObject =
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let kind = object.types.as_ref().map(|types| types.kind.as_str());
    if kind != Some("Skyhook") {
        bail!("{} holds a {kind:?}, not a Skyhook", path.display());
    }
    let name = object
        .metadata
        .name
        .clone()
        .with_context(|| format!("{} has no metadata.name", path.display()))?;
    skyhook_api(client)
        .patch(&name, &PatchParams::apply("e2e"), &Patch::Apply(&object))
        .await
        .with_context(|| format!("applying {}", path.display()))?;
    Ok(name)
}

/// Waits until the Skyhook's `status.status` is `wanted`; returns the Skyhook then.
pub async fn wait_for_skyhook_status(
    client: &kube::Client,
    name: &str,
    wanted: &str,
    timeout: Duration,
) -> anyhow::Result<DynamicObject> {
    let wanted_owned = wanted.to_string();
    let reached = move |object: Option<&DynamicObject>| {
        object.is_some_and(|object| skyhook_status(object) == Some(wanted_owned.as_str()))
    };
    let waited =
        tokio::time::timeout(timeout, await_condition(skyhook_api(client), name, reached)).await;
    match waited {
        Ok(Ok(Some(object))) => Ok(object),
        Ok(Ok(None)) => bail!("Skyhook {name} was deleted while waiting for {wanted}"),
        Ok(Err(error)) => Err(error).with_context(|| format!("watching Skyhook {name}")),
        Err(_) => {
            let last = skyhook_api(client).get_opt(name).await.ok().flatten();
            bail!(
                "Skyhook {name} did not reach {wanted} within {timeout:?}; last status: {}",
                last.map_or_else(
                    || "(gone)".to_string(),
                    |object| object.data["status"].to_string()
                )
            )
        }
    }
}

/// Waits until the Skyhook `name` satisfies `condition`; the error names `what` and shows the
/// Skyhook's last status.
pub async fn wait_for_skyhook(
    client: &kube::Client,
    name: &str,
    what: &str,
    condition: impl Fn(&DynamicObject) -> bool,
) -> anyhow::Result<DynamicObject> {
    crate::wait::wait_for_showing_last(&skyhook_api(client), name, what, condition, |last| {
        let status = last.map_or_else(|| "(gone)".to_owned(), |s| s.data["status"].to_string());
        format!("Skyhook {name} last status: {status}")
    })
    .await
}

/// Waits until the NodeWright `name` of `nodewrights` has `status.status` `wanted`; returns it
/// then.
pub async fn wait_for_nodewright_status(
    nodewrights: &Api<NodeWright>,
    name: &str,
    wanted: &str,
) -> anyhow::Result<NodeWright> {
    let what = format!("NodeWright {name} to be {wanted}");
    crate::wait_for(nodewrights, name, &what, |n| {
        (n.status.as_ref())
            .and_then(|s| s.status)
            .is_some_and(|status| status.to_string() == wanted)
    })
    .await
}

/// A Skyhook's `status.status`.
pub fn skyhook_status(object: &DynamicObject) -> Option<&str> {
    object.data.get("status")?.get("status")?.as_str()
}
