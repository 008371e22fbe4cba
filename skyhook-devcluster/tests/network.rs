//! The pod network (`DevClusterOptions::pod_network`): pods in network namespaces of their own
//! reach each other on one node and across nodes, reach the API server at
//! `KUBERNETES_SERVICE_HOST`, and `hostNetwork` pods stay in the node's network. Everything the
//! cluster added to the machine's network is gone once it stops.

use anyhow::{Context, Result};
use devcluster::{DevCluster, DevClusterOptions};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::json;

mod common;
use common::{WAIT, phase, wait_pod};

fn pod(name: &str, node: &str, spec: serde_json::Value) -> Result<Pod> {
    let mut spec = spec;
    spec["nodeName"] = json!(node);
    Ok(serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": spec}),
    )?)
}

/// A pod of one `devcluster.local/shell` container running `script`.
fn shell_pod(name: &str, node: &str, script: &str, extra: serde_json::Value) -> Result<Pod> {
    let mut spec = json!({"restartPolicy": "Never",
        "containers": [{"name": "sh", "image": "devcluster.local/shell", "args": [script],
                        "env": [{"name": "POD_IP",
                                 "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    pod(name, node, spec)
}

fn finished(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

fn pod_ip(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default()
}

/// Runs a shell pod to its end and returns it once it succeeded.
async fn run_to_success(pods: &Api<Pod>, pod: &Pod) -> Result<Pod> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    pods.create(&PostParams::default(), pod).await?;
    let done = wait_pod(pods, &name, "finished", finished).await?;
    anyhow::ensure!(
        phase(&done) == "Succeeded",
        "pod {name} failed: {:?}",
        done.status.as_ref().map(|s| &s.container_statuses)
    );
    Ok(done)
}

fn in_cidr(ip: &str, cidr: &str) -> bool {
    cidr.strip_suffix("0/24")
        .is_some_and(|network| ip.starts_with(network))
}

async fn pod_cidr(nodes: &Api<Node>, name: &str) -> Result<String> {
    nodes
        .get(name)
        .await?
        .spec
        .and_then(|s| s.pod_cidr)
        .with_context(|| format!("node {name} has no podCIDR"))
}

fn links() -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir("/sys/class/net")? {
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    Ok(names)
}

#[tokio::test]
async fn pods_reach_each_other_and_the_api_server_and_the_network_goes_with_the_cluster()
-> Result<()> {
    let cluster = DevCluster::start(DevClusterOptions {
        nodes: 2,
        pod_network: true,
        ..DevClusterOptions::default()
    })
    .await?;
    let client = cluster.client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client);
    let (cidr1, cidr2) = (
        pod_cidr(&nodes, "node-1").await?,
        pod_cidr(&nodes, "node-2").await?,
    );
    assert_ne!(cidr1, cidr2, "two nodes share a pod range");
    // 100.(64+N).1.0/24: the links of cluster N are dcp<N>n...
    let number = cidr1
        .split('.')
        .nth(1)
        .and_then(|octet| octet.parse::<u8>().ok())
        .and_then(|octet| octet.checked_sub(64))
        .with_context(|| format!("podCIDR {cidr1} is not in 100.64.0.0/10"))?;
    let link_prefix = format!("dcp{number}n");
    let bridge = format!("{link_prefix}1");
    assert!(links()?.contains(&bridge), "no bridge {bridge} for node-1");

    let serve = "mkdir -p /tmp/web && echo served-by-$HOSTNAME > /tmp/web/hello \
                 && cd /tmp/web && exec python3 -m http.server --bind $POD_IP 8080";
    let server = shell_pod("server", "node-2", serve, json!({}))?;
    pods.create(&PostParams::default(), &server).await?;
    let server = wait_pod(&pods, "server", "running", |p| phase(p) == "Running").await?;
    let server_ip = pod_ip(&server);
    assert!(
        in_cidr(&server_ip, &cidr2),
        "server IP {server_ip} not in {cidr2}"
    );

    // The server may take a moment to listen once its container runs: clients retry.
    let fetch = format!(
        "for attempt in $(seq 60); do \
           curl -sf -m 2 http://{server_ip}:8080/hello | grep -qx served-by-server && exit 0; \
           sleep 1; done; exit 1"
    );
    for (name, node, cidr) in [
        ("other-node", "node-1", &cidr1),
        ("same-node", "node-2", &cidr2),
    ] {
        let done = run_to_success(&pods, &shell_pod(name, node, &fetch, json!({}))?).await?;
        let ip = pod_ip(&done);
        assert!(in_cidr(&ip, cidr), "{name} IP {ip} not in {cidr}");
    }

    // The API server, as an in-cluster client finds it: a non-loopback address, the service
    // account's CA and token.
    let call_api = r#"case "$KUBERNETES_SERVICE_HOST" in 127.*) exit 3;; esac
        sa=/var/run/secrets/kubernetes.io/serviceaccount
        curl -sf -m 5 --cacert $sa/ca.crt -H "Authorization: Bearer $(cat $sa/token)" \
          https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/version | grep -q gitVersion"#;
    run_to_success(
        &pods,
        &shell_pod("api-client", "node-1", call_api, json!({}))?,
    )
    .await?;
    // ... which is also the `kubernetes` Service's endpoint (the API server publishes it).
    let slices: Api<EndpointSlice> = Api::namespaced(cluster.client()?, "default");
    let address = format!("100.{}.0.1", 64 + u16::from(number));
    let published = {
        let address = address.clone();
        move |slice: Option<&EndpointSlice>| {
            slice.is_some_and(|slice| {
                slice
                    .endpoints
                    .iter()
                    .any(|endpoint| endpoint.addresses == [address.clone()])
            })
        }
    };
    tokio::time::timeout(WAIT, await_condition(slices, "kubernetes", published))
        .await
        .with_context(|| format!("the kubernetes Service never got endpoint {address}"))??;

    // A pod sees its own interfaces only; a hostNetwork pod keeps the node's address and
    // network, with the bridges.
    let own = format!("grep -q eth0 /proc/net/dev && ! grep -q {bridge} /proc/net/dev");
    run_to_success(&pods, &shell_pod("own-network", "node-1", &own, json!({}))?).await?;
    let host = run_to_success(
        &pods,
        &shell_pod(
            "host-network",
            "node-1",
            &format!("grep -q {bridge} /proc/net/dev"),
            json!({"hostNetwork": true}),
        )?,
    )
    .await?;
    assert!(pod_ip(&host).starts_with("127.1."), "{}", pod_ip(&host));

    cluster.stop();
    let left: Vec<String> = links()?
        .into_iter()
        .filter(|link| link.starts_with(&link_prefix))
        .collect();
    assert!(left.is_empty(), "links left behind: {left:?}");
    Ok(())
}
