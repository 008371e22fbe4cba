//! ClusterIP Services on devcluster's pod network (issue #16), between two nodes: a pod reaches
//! a pod of the other node at its pod IP and through a Service's ClusterIP, reaches the API
//! server through the `kubernetes` Service, connections to a Service spread over its ready
//! endpoints, and an endpoint taken out of the Service (while it still serves) gets no new
//! connection. kube-apiserver calls an admission webhook through its Service's ClusterIP.

use anyhow::{Context, Result, ensure};
use devcluster::{DevCluster, DevClusterOptions};
use e2e::{WAIT, wait_for};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const PORT_NAME: &str = "http";

/// A pod of one `devcluster.local/shell` container running `script` once.
fn shell_pod(name: &str, node: &str, labels: serde_json::Value, script: &str) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "restartPolicy": "Never",
                 "containers": [{"name": "sh", "image": "devcluster.local/shell", "args": [script],
                                 "env": [{"name": "POD_IP",
                                          "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}]},
    }))?)
}

/// An HTTP server on port 8080 of its pod IP whose `/name` is `served-by-<pod name>`.
fn echo_pod(name: &str, node: &str) -> Result<Pod> {
    let serve = "mkdir -p /tmp/web && echo served-by-$HOSTNAME > /tmp/web/name \
                 && cd /tmp/web && exec python3 -m http.server --bind $POD_IP 8080";
    shell_pod(name, node, json!({"app": "echo"}), serve)
}

fn echo_service() -> Result<Service> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": "echo"},
        "spec": {"selector": {"app": "echo"},
                 "ports": [{"name": PORT_NAME, "port": 80, "targetPort": 8080}]},
    }))?)
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn pod_ip(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default()
}

async fn start_running(pods: &Api<Pod>, pod: &Pod) -> Result<Pod> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    pods.create(&PostParams::default(), pod).await?;
    wait_for(pods, &name, "the pod to run", |p| phase(p) == "Running").await
}

/// Runs a client pod on `node` whose `script` exits 0 when what it checks holds.
async fn run_client(pods: &Api<Pod>, name: &str, node: &str, script: &str) -> Result<()> {
    pods.create(
        &PostParams::default(),
        &shell_pod(name, node, json!({}), script)?,
    )
    .await?;
    let done = wait_for(pods, name, "the client pod to finish", |p| {
        matches!(phase(p), "Succeeded" | "Failed")
    })
    .await?;
    ensure!(
        phase(&done) == "Succeeded",
        "client {name} failed: {:?}",
        done.status.as_ref().map(|s| &s.container_statuses)
    );
    Ok(())
}

/// The ready endpoint addresses of the Service `echo`.
async fn echo_endpoints(slices: &Api<EndpointSlice>) -> Result<Vec<String>> {
    let listed = slices
        .list(&ListParams::default().labels("kubernetes.io/service-name=echo"))
        .await?;
    let mut addresses: Vec<String> = listed
        .items
        .iter()
        .flat_map(|slice| &slice.endpoints)
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .flat_map(|e| e.addresses.clone())
        .collect();
    addresses.sort();
    Ok(addresses)
}

/// Waits until the Service `echo` has exactly `wanted` as ready endpoints in its EndpointSlices
/// and the cluster's Service proxy forwards `frontend` to exactly those.
async fn wait_for_echo_endpoints(
    cluster: &DevCluster,
    frontend: &str,
    wanted: &[&str],
) -> Result<()> {
    let slices: Api<EndpointSlice> = Api::namespaced(cluster.client()?, "default");
    let mut wanted_addresses: Vec<String> = wanted.iter().map(|ip| (*ip).to_owned()).collect();
    wanted_addresses.sort();
    let wanted_backends: Vec<String> = wanted_addresses
        .iter()
        .map(|ip| format!("{ip}:8080"))
        .collect();
    let settled = async {
        loop {
            let in_effect = devcluster::services::routes_in_effect(cluster.state_dir());
            let routed = in_effect.get(frontend).cloned().unwrap_or_default();
            if echo_endpoints(&slices).await? == wanted_addresses && routed == wanted_backends {
                return anyhow::Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(WAIT, settled).await.with_context(|| {
        format!(
            "the Service echo never routed {frontend} to {wanted:?} only; in effect: {:?}",
            devcluster::services::routes_in_effect(cluster.state_dir())
        )
    })?
}

/// `curl` of `url`, retried while the server may still be starting, must print `expected`.
fn fetch_until(url: &str, expected: &str) -> String {
    format!(
        "for attempt in $(seq 60); do \
           curl -sf -m 2 {url} | grep -qx {expected} && break; sleep 1; \
         done && curl -sf -m 2 {url} | grep -qx {expected}"
    )
}

/// A webhook server (Python's `ssl` and `http.server`) that denies every request it reviews
/// with `denied-by-<pod name>`.
const WEBHOOK_SERVER: &str = r#"
import http.server, json, os, ssl

class Review(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        message = "denied-by-" + os.environ["HOSTNAME"]
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": {"uid": review["request"]["uid"], "allowed": False,
                                        "status": {"code": 403, "message": message}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

server = http.server.HTTPServer((os.environ["POD_IP"], 8443), Review)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("/hook/tls.crt", "/hook/tls.key")
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"#;

/// A self-signed certificate and key for the Service `hook` in `default`, made with `openssl`.
fn webhook_certificate() -> Result<(String, String)> {
    let dir = tempfile::tempdir()?;
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let status = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=hook.default.svc"])
        .args(["-addext", "subjectAltName=DNS:hook.default.svc"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .context("running openssl to make the webhook's certificate")?;
    ensure!(status.success(), "openssl failed: {status}");
    Ok((
        std::fs::read_to_string(cert)?,
        std::fs::read_to_string(key)?,
    ))
}

/// Registers a validating webhook by `service` reference and checks that a ConfigMap it
/// selects is denied by the webhook's pod: kube-apiserver resolved the Service to its ClusterIP
/// (`--enable-aggregator-routing=false`) and the Service proxy forwarded the call.
async fn webhook_through_its_service(cluster: &DevCluster) -> Result<()> {
    use base64::Engine;
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};

    let client = cluster.client()?;
    let (cert, key) = webhook_certificate()?;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "hook"},
        "stringData": {"tls.crt": cert, "tls.key": key, "server.py": WEBHOOK_SERVER},
    }))?;
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await?;
    let mut server = shell_pod(
        "hook-server",
        "node-2",
        json!({"app": "hook"}),
        "exec python3 /hook/server.py",
    )?;
    let spec = serde_json::to_value(&server.spec)?;
    let mut spec = spec;
    spec["volumes"] = json!([{"name": "hook", "secret": {"secretName": "hook"}}]);
    spec["containers"][0]["volumeMounts"] = json!([{"name": "hook", "mountPath": "/hook"}]);
    server.spec = serde_json::from_value(spec)?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    start_running(&pods, &server).await?;
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "hook"},
        "spec": {"selector": {"app": "hook"}, "ports": [{"port": 443, "targetPort": 8443}]},
    }))?;
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &service)
        .await?;
    let webhook: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": "hook"},
        "webhooks": [{
            "name": "hook.default.svc",
            "clientConfig": {
                "service": {"namespace": "default", "name": "hook", "path": "/validate", "port": 443},
                "caBundle": base64::engine::general_purpose::STANDARD.encode(&cert),
            },
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}],
            "objectSelector": {"matchLabels": {"hook-test": "deny"}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }],
    }))?;
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &webhook)
        .await?;

    // Until the server listens (and the API server has the configuration), calls fail or
    // are not made; the webhook's own denial is what shows the call went through.
    let config_maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut attempt = 0;
    let denied = async {
        loop {
            attempt += 1;
            let probe: ConfigMap = serde_json::from_value(json!({
                "metadata": {"name": format!("probe-{attempt}"), "labels": {"hook-test": "deny"}},
            }))?;
            match config_maps.create(&PostParams::default(), &probe).await {
                Err(kube::Error::Api(status))
                    if status.message.contains("denied-by-hook-server") =>
                {
                    return anyhow::Ok(());
                }
                Err(_) | Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
            }
        }
    };
    tokio::time::timeout(WAIT, denied)
        .await
        .context("the API server never got the webhook's answer through the Service hook")?
}

#[tokio::test]
async fn services_route_across_nodes_and_follow_endpoint_slices() -> Result<()> {
    e2e::build_binaries()?;
    let began = std::time::Instant::now();
    let step = |what: &str| eprintln!("services: {what} after {:?}", began.elapsed());
    let cluster = DevCluster::start(DevClusterOptions {
        images: skyhook_devcluster::images(),
        nodes: 2,
        pod_network: true,
        ..DevClusterOptions::default()
    })
    .await?;
    step("cluster up");
    let client = cluster.client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");

    let echo_a = start_running(&pods, &echo_pod("echo-a", "node-2")?).await?;
    let service = services
        .create(&PostParams::default(), &echo_service()?)
        .await?;
    let cluster_ip = service
        .spec
        .and_then(|spec| spec.cluster_ip)
        .context("the Service echo got no ClusterIP")?;
    ensure!(
        cluster_ip.starts_with("100.") && cluster_ip.split('.').nth(2) == Some("255"),
        "ClusterIP {cluster_ip} is not in the cluster's own Service range"
    );
    let frontend = format!("{cluster_ip}:80");
    let ip_a = pod_ip(&echo_a);
    wait_for_echo_endpoints(&cluster, &frontend, &[&ip_a]).await?;

    // From node-1: the pod of node-2 at its pod IP, through the Service, and the API server
    // through the `kubernetes` Service (whose ClusterIP its certificate names).
    let kubernetes_ip = services
        .get("kubernetes")
        .await?
        .spec
        .and_then(|spec| spec.cluster_ip)
        .context("the kubernetes Service has no ClusterIP")?;
    let across = format!(
        "{} && {} && \
         sa=/var/run/secrets/kubernetes.io/serviceaccount && \
         curl -sf -m 5 --cacert $sa/ca.crt -H \"Authorization: Bearer $(cat $sa/token)\" \
           https://{kubernetes_ip}/version | grep -q gitVersion",
        fetch_until(&format!("http://{ip_a}:8080/name"), "served-by-echo-a"),
        fetch_until(&format!("http://{cluster_ip}/name"), "served-by-echo-a"),
    );
    run_client(&pods, "across-nodes", "node-1", &across).await?;
    step("pod to pod and pod to Service across nodes");

    // A second endpoint on node-1: connections spread over both.
    let echo_b = start_running(&pods, &echo_pod("echo-b", "node-1")?).await?;
    let ip_b = pod_ip(&echo_b);
    wait_for_echo_endpoints(&cluster, &frontend, &[&ip_a, &ip_b]).await?;
    let both = format!(
        "{} && seen='' && for attempt in $(seq 60); do \
           seen=\"$seen $(curl -sf -m 2 http://{cluster_ip}/name)\"; \
           case $seen in *served-by-echo-a*served-by-echo-b*|*served-by-echo-b*served-by-echo-a*) exit 0;; esac; \
         done; echo \"only saw:$seen\"; exit 1",
        fetch_until(&format!("http://{ip_b}:8080/name"), "served-by-echo-b"),
    );
    run_client(&pods, "spread", "node-2", &both).await?;
    step("connections spread over two endpoints");

    // echo-a leaves the Service but keeps serving at its pod IP: no new connection reaches it.
    pods.patch(
        "echo-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "retired"}}})),
    )
    .await?;
    wait_for_echo_endpoints(&cluster, &frontend, &[&ip_b]).await?;
    let only_b = format!(
        "curl -sf -m 2 http://{ip_a}:8080/name | grep -qx served-by-echo-a || exit 2; \
         for attempt in $(seq 10); do \
           curl -sf -m 2 http://{cluster_ip}/name | grep -qx served-by-echo-b || exit 1; \
         done"
    );
    run_client(&pods, "after-removal", "node-2", &only_b).await?;
    step("a removed endpoint gets no new connection");

    // A deleted Service's ClusterIP port stops being served.
    services.delete("echo", &Default::default()).await?;
    let gone = async {
        while devcluster::services::routes_in_effect(cluster.state_dir()).contains_key(&frontend) {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(WAIT, gone)
        .await
        .context("the deleted Service's ClusterIP is still routed")?;
    ensure!(
        tokio::net::TcpStream::connect(&frontend).await.is_err(),
        "{frontend} still accepts connections after its Service was deleted"
    );
    step("a deleted Service's port refuses");
    webhook_through_its_service(&cluster).await?;
    step("the API server called a webhook through its Service");
    cluster.stop();
    step("cluster stopped");
    Ok(())
}
