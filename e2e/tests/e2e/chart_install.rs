//! The chart as a user runs it: `helm install` with the chart's defaults (2 controller replicas
//! with leader election, 2 webhook replicas with self-managed certificates) into a devcluster
//! with the pod network, so every pod has its own address and the API server calls the webhook
//! at its Service's ClusterIP (devcluster's Service proxy forwards to the ready replicas, which
//! the simulated kubelet's readiness probes decide). One cluster carries the whole life of the release, since each step needs
//! the previous one's state:
//!
//! 1. install: both Deployments available, the configurations point at the Service;
//! 2. leader election: one controller pod holds the Lease and reconciles, the other waits; the
//!    API server allows each service account exactly the requests of e2e::rbac's table;
//! 3. a Skyhook with a dependency cycle (which the CRD schema accepts) is refused at apply time
//!    with the webhook's message, and the seed Quick Start rolls out to completion, with no
//!    request the table leaves out;
//! 4. the webhook replica that served is deleted, and admission keeps working through the other;
//! 5. `helm upgrade` with a changed value rolls both Deployments, and admission still works;
//! 6. `helm uninstall`: the pre-delete cleanup deletes the Skyhooks while the controller still
//!    runs, and nothing of skyhook is left, on the nodes or in the API.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use devcluster::{DevCluster, DevClusterOptions};
use e2e::{Kubectl, helm, rbac};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, ListParams};

const RELEASE: &str = "skyhook-operator";
const NAMESPACE: &str = "skyhook";
const LEASE: &str = "3c22c1ae.nvidia.com";
const WEBHOOK_SERVICE: &str = "skyhook-operator-webhook-service";
const WEBHOOK_ADMIN_PORT: u16 = 8081;
const CONTROLLER_METRICS_PORT: u16 = 8080;
const CONTROLLER: &str = "skyhook-operator-controller-manager";
const WEBHOOK: &str = "skyhook-operator-webhook";
const CONTROLLER_PODS: &str = "app.kubernetes.io/component=controller";
const WEBHOOK_PODS: &str = "app.kubernetes.io/component=webhook";
const RELEASE_OBJECTS: &str = "app.kubernetes.io/instance=skyhook-operator";
const CYCLE: &str = "examples/invalid/dependency-cycle.yaml";
const CYCLE_DENIED: [&str; 2] = [
    "admission webhook \"validate-skyhook.nvidia.com\" denied the request",
    "dependency cycle aa -> bb -> aa",
];
/// Generous for a loaded 2-core machine: 4 stage pods of ~10 s per node.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_upgrade_and_uninstall_of_the_whole_chart() -> anyhow::Result<()> {
    e2e::build_binaries()?;
    let cluster = DevCluster::start(DevClusterOptions {
        images: skyhook_devcluster::images(),
        nodes: 2,
        pod_network: true,
        node_labels: BTreeMap::from([(
            e2e::TEST_NODE_LABEL.to_owned(),
            // What examples/demo.yaml selects.
            "demo".to_owned(),
        )]),
        ..DevClusterOptions::default()
    })
    .await
    .context("starting the devcluster")?;
    let kubeconfig = cluster.kubeconfig_path();
    let client = cluster.client()?;
    let kubectl = Kubectl::new(kubeconfig.clone());
    let chart = helm::chart_dir();
    let chart = chart.to_string_lossy();

    helm::run_on(
        &kubeconfig,
        &[
            "install",
            RELEASE,
            &chart,
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            // The leader's request count is scraped over plain HTTP from the pod's IP; the HTTPS
            // endpoint with its token checks has its own test (observability.rs).
            "--set",
            "metrics.secure=false",
            "--wait",
            "--timeout",
            "300s",
        ],
    )?;
    expect_available(&client, 2).await?;
    expect_configurations_call_the_service(&client).await?;
    let leader = expect_one_leader(&client, &kubectl).await?;
    expect_permissions(&client).await?;

    expect_cycle_denied(&kubectl).await?;
    e2e::apply_manifest(&client, &e2e::workspace().join("examples/demo.yaml")).await?;
    e2e::wait_for_skyhook_status(&client, "demo", "complete", ROLLOUT_TIMEOUT).await?;
    expect_only_listed_requests(&leader).await?;

    admission_survives_the_serving_replica(&client, &kubectl).await?;

    helm::run_on(
        &kubeconfig,
        &[
            "upgrade",
            RELEASE,
            &chart,
            "--namespace",
            NAMESPACE,
            "--reuse-values",
            "--set",
            "webhook.logFormat=plain",
            "--set",
            "controllerManager.manager.env.logLevel=debug",
            "--wait",
            "--timeout",
            "300s",
        ],
    )?;
    expect_upgraded(&client).await?;
    expect_available(&client, 2).await?;
    expect_cycle_denied(&kubectl).await?;

    helm::run_on(
        &kubeconfig,
        &[
            "uninstall",
            RELEASE,
            "--namespace",
            NAMESPACE,
            "--wait",
            "--timeout",
            "300s",
        ],
    )?;
    expect_nothing_left(&client, &kubectl).await
}

async fn expect_available(client: &kube::Client, replicas: i32) -> anyhow::Result<()> {
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    for name in [CONTROLLER, WEBHOOK] {
        let deployment = deployments.get(name).await?;
        let available = deployment
            .status
            .as_ref()
            .and_then(|status| status.available_replicas)
            .unwrap_or_default();
        ensure!(
            available == replicas,
            "{name}: {available} available replicas, expected {replicas}"
        );
    }
    Ok(())
}

/// The chart's configurations name the Service, not a URL: the API server finds the webhook
/// through it.
async fn expect_configurations_call_the_service(client: &kube::Client) -> anyhow::Result<()> {
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get("skyhook-operator-validating-webhook")
        .await?;
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get("skyhook-operator-mutating-webhook")
        .await?;
    let configs = validating
        .webhooks
        .iter()
        .flatten()
        .map(|w| (&w.name, &w.client_config))
        .chain(
            mutating
                .webhooks
                .iter()
                .flatten()
                .map(|w| (&w.name, &w.client_config)),
        );
    for (name, config) in configs {
        let service = config.service.as_ref().map(|s| s.name.as_str());
        ensure!(
            service == Some(WEBHOOK_SERVICE) && config.url.is_none(),
            "{name} calls {:?}/{service:?}, not the Service {WEBHOOK_SERVICE}",
            config.url
        );
    }
    Ok(())
}

async fn pods(client: &kube::Client, selector: &str) -> anyhow::Result<Vec<Pod>> {
    Ok(Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels(selector))
        .await?
        .items)
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn pod_ip(pod: &Pod) -> anyhow::Result<IpAddr> {
    let ip = pod
        .status
        .as_ref()
        .and_then(|status| status.pod_ip.as_deref())
        .with_context(|| format!("pod {} has no IP", pod_name(pod)))?;
    ip.parse()
        .with_context(|| format!("pod {}'s IP {ip:?}", pod_name(pod)))
}

/// One controller pod holds the Lease and has synced its caches (it reconciles); the other
/// waits for the Lease and never started its caches. Returns the leader.
async fn expect_one_leader(client: &kube::Client, kubectl: &Kubectl) -> anyhow::Result<Pod> {
    let lease = e2e::wait_for(
        &Api::<Lease>::namespaced(client.clone(), NAMESPACE),
        LEASE,
        "a controller pod to hold the Lease",
        |lease: &Lease| {
            lease
                .spec
                .as_ref()
                .and_then(|spec| spec.holder_identity.as_ref())
                .is_some()
        },
    )
    .await?;
    let holder = lease
        .spec
        .and_then(|spec| spec.holder_identity)
        .unwrap_or_default();
    let controllers = pods(client, CONTROLLER_PODS).await?;
    let (leaders, standbys): (Vec<&Pod>, Vec<&Pod>) = controllers
        .iter()
        .partition(|pod| holder.starts_with(&format!("{}_", pod_name(pod))));
    let ([leader], [standby]) = (leaders.as_slice(), standbys.as_slice()) else {
        bail!(
            "the Lease is held by {holder:?}; controller pods: {:?}",
            controllers.iter().map(pod_name).collect::<Vec<_>>()
        );
    };
    let leader_log = e2e::within(
        "the leader to sync its caches",
        e2e::WAIT,
        wait_for_log(kubectl, pod_name(leader), "caches synced"),
    )
    .await?;
    ensure!(leader_log.contains("became leader"), "{leader_log}");
    let standby_log = e2e::within(
        "the standby to wait for the Lease",
        e2e::WAIT,
        wait_for_log(kubectl, pod_name(standby), "waiting for leadership"),
    )
    .await?;
    ensure!(
        !standby_log.contains("caches synced") && !standby_log.contains("became leader"),
        "the standby {} reconciles too:\n{standby_log}",
        pod_name(standby)
    );
    Ok((*leader).clone())
}

/// The API server's authorizer, asked as each chart service account: every request the
/// component sends is allowed, in the namespaces it sends it to (a drain's delete in a workload
/// namespace, say), and the requests it never sends are refused.
async fn expect_permissions(client: &kube::Client) -> anyhow::Result<()> {
    for (account, sends, must_not) in [
        (
            CONTROLLER,
            rbac::CONTROLLER_SENDS,
            rbac::CONTROLLER_MUST_NOT,
        ),
        (WEBHOOK, rbac::WEBHOOK_SENDS, rbac::WEBHOOK_MUST_NOT),
    ] {
        rbac::check_with_api_server(client, NAMESPACE, account, sends, true).await?;
        rbac::check_with_api_server(client, NAMESPACE, account, must_not, false).await?;
    }
    Ok(())
}

/// After a rollout, the leader sent no kind of request the permission table leaves out (its
/// own count by verb and resource), so the table the chart is checked against is complete for
/// what ran.
async fn expect_only_listed_requests(leader: &Pod) -> anyhow::Result<()> {
    let samples =
        e2e::metrics::scrape_at(SocketAddr::new(pod_ip(leader)?, CONTROLLER_METRICS_PORT)).await?;
    let unlisted = rbac::unlisted_controller_requests(&samples);
    ensure!(
        unlisted.is_empty(),
        "the controller sent requests e2e::rbac::CONTROLLER_SENDS does not list: {unlisted:?}"
    );
    Ok(())
}

/// `kubectl logs` of a chart pod once it contains `text`.
async fn wait_for_log(
    kubectl: &Kubectl,
    pod: &str,
    text: &str,
) -> Result<String, kube::runtime::wait::Error> {
    loop {
        if let Ok(output) = kubectl.run(&["logs", "-n", NAMESPACE, pod]).await {
            let log = String::from_utf8_lossy(&output.stdout).into_owned();
            if log.contains(text) {
                return Ok(log);
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `kubectl apply` of the dependency cycle is refused with the webhook's own message.
async fn expect_cycle_denied(kubectl: &Kubectl) -> anyhow::Result<()> {
    let refused = kubectl.run(&["apply", "-f", CYCLE]).await?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    ensure!(!refused.status.success(), "{CYCLE} was accepted");
    for expected in CYCLE_DENIED {
        ensure!(
            stderr.contains(expected),
            "{CYCLE} was refused without {expected:?}: {stderr}"
        );
    }
    Ok(())
}

/// Admission reviews each webhook pod has answered (its `/metrics`).
async fn admissions(pod: &Pod) -> anyhow::Result<f64> {
    let samples =
        e2e::metrics::scrape_at(SocketAddr::new(pod_ip(pod)?, WEBHOOK_ADMIN_PORT)).await?;
    Ok(samples
        .iter()
        .filter(|sample| sample.name == "skyhook_webhook_admissions_total")
        .map(|sample| sample.value)
        .sum())
}

/// Deletes a webhook pod that has answered reviews, waits until the Service no longer sends to
/// it, and checks that a refusal still comes, answered by the replicas still serving.
async fn admission_survives_the_serving_replica(
    client: &kube::Client,
    kubectl: &Kubectl,
) -> anyhow::Result<()> {
    let mut serving = None;
    for pod in pods(client, WEBHOOK_PODS).await? {
        if admissions(&pod).await? > 0.0 {
            serving = Some(pod);
        }
    }
    let serving = serving.context("no webhook pod has answered a review")?;
    let killed = pod_ip(&serving)?.to_string();
    let webhook_pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    webhook_pods
        .delete(pod_name(&serving), &DeleteParams::default())
        .await?;
    e2e::within(
        "the Service to stop sending to the deleted webhook pod",
        e2e::WAIT,
        wait_until_not_ready_endpoint(client, &killed),
    )
    .await?;
    // While the deleted pod drains, a review is answered, by it (on a connection the API
    // server kept alive, which it then closes) or by another replica: never an EOF.
    expect_cycle_denied(kubectl).await?;
    let uid = serving.metadata.uid.clone().unwrap_or_default();
    e2e::within(
        "the deleted webhook pod to be gone",
        e2e::WAIT,
        kube::runtime::wait::await_condition(
            webhook_pods,
            pod_name(&serving),
            kube::runtime::wait::conditions::is_deleted(&uid),
        ),
    )
    .await?;

    let others: Vec<Pod> = pods(client, WEBHOOK_PODS)
        .await?
        .into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none() && pod_ip(pod).is_ok())
        .collect();
    let mut before = 0.0;
    for pod in &others {
        before += admissions(pod).await.unwrap_or(0.0);
    }
    expect_cycle_denied(kubectl).await?;
    let mut after = 0.0;
    for pod in &others {
        after += admissions(pod).await.unwrap_or(0.0);
    }
    ensure!(
        after > before,
        "the refusal was not answered by the remaining webhook pods ({before} -> {after})"
    );
    Ok(())
}

/// Waits until no ready endpoint of the webhook Service has `address`.
async fn wait_until_not_ready_endpoint(
    client: &kube::Client,
    address: &str,
) -> Result<(), kube::runtime::wait::Error> {
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), NAMESPACE);
    let selector = format!("kubernetes.io/service-name={WEBHOOK_SERVICE}");
    loop {
        if let Ok(list) = slices.list(&ListParams::default().labels(&selector)).await {
            let still_ready = list.items.iter().flat_map(|s| &s.endpoints).any(|e| {
                e.addresses.iter().any(|a| a == address)
                    && e.conditions.as_ref().and_then(|c| c.ready) == Some(true)
            });
            if !still_ready {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The upgraded values reached the pods that now run.
async fn expect_upgraded(client: &kube::Client) -> anyhow::Result<()> {
    for pod in pods(client, CONTROLLER_PODS).await? {
        let env = pod
            .spec
            .iter()
            .flat_map(|spec| &spec.containers)
            .flat_map(|c| c.env.iter().flatten())
            .find(|e| e.name == "LOG_LEVEL")
            .and_then(|e| e.value.clone());
        ensure!(
            env.as_deref() == Some("debug") || pod.metadata.deletion_timestamp.is_some(),
            "controller pod {} runs with LOG_LEVEL {env:?} after the upgrade",
            pod_name(&pod)
        );
    }
    for pod in pods(client, WEBHOOK_PODS).await? {
        let args: Vec<String> = pod
            .spec
            .iter()
            .flat_map(|spec| &spec.containers)
            .flat_map(|c| c.args.iter().flatten().cloned())
            .collect();
        ensure!(
            args.iter().any(|a| a == "--log-format=plain")
                || pod.metadata.deletion_timestamp.is_some(),
            "webhook pod {} runs with {args:?} after the upgrade",
            pod_name(&pod)
        );
    }
    Ok(())
}

/// After `helm uninstall`: no Skyhook or DeploymentPolicy, no skyhook key, taint or condition on
/// any node, no webhook configuration, and no object of the release. The garbage collector
/// removes what the deleted objects owned (the hook jobs' pods, say) after helm returns, so this
/// waits for the leftovers to go and shows them if they stay.
async fn expect_nothing_left(client: &kube::Client, kubectl: &Kubectl) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + e2e::WAIT;
    loop {
        let left = leftovers(client, kubectl).await?;
        if left.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("left behind after uninstall:\n{left}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What of skyhook is still there, one line per kind of leftover; empty when nothing is.
async fn leftovers(client: &kube::Client, kubectl: &Kubectl) -> anyhow::Result<String> {
    let mut left = String::new();
    let skyhooks = e2e::skyhook_api(client)
        .list(&ListParams::default())
        .await?
        .items
        .len();
    if skyhooks > 0 {
        left.push_str(&format!("{skyhooks} Skyhooks\n"));
    }
    for node in Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
    {
        if let Some(state) = node_skyhook_state(&node) {
            left.push_str(&format!(
                "node {}: {state}\n",
                node.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    let kinds = "deploymentpolicies.skyhook.nvidia.com,validatingwebhookconfigurations,\
                 mutatingwebhookconfigurations,clusterroles,clusterrolebindings";
    let namespaced = "deployments,replicasets,pods,services,endpointslices,serviceaccounts,\
                      roles,rolebindings,configmaps,secrets,jobs,poddisruptionbudgets,\
                      networkpolicies,limitranges";
    for (args, only_skyhook) in [
        (vec!["get", kinds, "-o", "name"], true),
        (
            vec!["get", kinds, "-l", RELEASE_OBJECTS, "-o", "name"],
            false,
        ),
        (
            vec!["get", namespaced, "-n", NAMESPACE, "-o", "name"],
            false,
        ),
    ] {
        let output = kubectl.run(&args).await?;
        ensure!(
            output.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let found: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| !only_skyhook || line.contains("skyhook"))
            .filter(|line| !is_namespace_default(line))
            .map(str::to_owned)
            .collect();
        if !found.is_empty() {
            left.push_str(&format!("kubectl {args:?}: {found:?}\n"));
        }
    }
    Ok(left)
}

/// The node's skyhook annotations, labels, conditions, taints and cordon, for the message; `None`
/// when it has none. Not counted: the test's selector label, and the markers a deleted Skyhook
/// leaves by design (upstream §2.8, `forget_skyhook` in the controller): `nodeState_demo` and
/// `version_demo` stay while they record packages that were never uninstalled from the host,
/// which is so for the Quick Start's package (no `uninstall.enabled`).
fn node_skyhook_state(node: &Node) -> Option<String> {
    let ours = |key: &String| key.starts_with("skyhook.nvidia.com");
    let kept = [
        e2e::TEST_NODE_LABEL.to_owned(),
        e2e::nodes::node_state_key("demo"),
        "skyhook.nvidia.com/version_demo".to_owned(),
    ];
    let has_key = |map: Option<&BTreeMap<String, String>>| {
        map.into_iter()
            .flatten()
            .any(|(key, _)| ours(key) && !kept.contains(key))
    };
    let conditions = node
        .status
        .iter()
        .flat_map(|status| status.conditions.iter().flatten())
        .any(|condition| ours(&condition.type_));
    let taints = e2e::nodes::taints(node);
    let left = has_key(node.metadata.annotations.as_ref())
        || has_key(node.metadata.labels.as_ref())
        || conditions
        || taints
            .iter()
            .any(|taint| taint.starts_with("skyhook.nvidia.com"))
        || e2e::nodes::is_cordoned(node);
    // The markers name the Quick Start's package and nothing else.
    let markers_only_of_the_package = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&e2e::nodes::node_state_key("demo")))
        .is_none_or(|state| {
            serde_json::from_str::<BTreeMap<String, serde_json::Value>>(state)
                .is_ok_and(|entries| entries.keys().eq(["tuning|1.1.0"]))
        });
    (left || !markers_only_of_the_package)
        .then(|| format!("{}; taints {taints:?}", e2e::nodes::skyhook_keys(node)))
}

/// What every namespace has, whoever installed into it.
fn is_namespace_default(name: &str) -> bool {
    matches!(
        name,
        "serviceaccount/default" | "configmap/kube-root-ca.crt"
    )
}
