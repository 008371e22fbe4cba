//! Readiness probes of the simulated kubelet: a running container whose probe passes becomes
//! ready, one whose probe finds nothing listening runs but stays unready, and only the ready pod
//! is a ready endpoint of a Service selecting both.

use std::time::Duration;

use anyhow::{Context, Result};
use devcluster::{DevCluster, DevClusterOptions};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

mod common;
use common::{WAIT, wait_pod};

/// A pod labelled `app=probed` whose shell container runs `script`, probed on port 8080.
fn probed_pod(name: &str, script: &str, probe: serde_json::Value) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "probed"}},
        "spec": {
            "nodeName": "node-1",
            "containers": [{
                "name": "sh",
                "image": "devcluster.local/shell",
                "args": [script],
                "env": [{"name": "POD_IP",
                         "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "ports": [{"name": "web", "containerPort": 8080}],
                "readinessProbe": probe,
            }],
        },
    }))?)
}

fn condition(pod: &Pod, type_: &str) -> Option<(String, Option<String>)> {
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

fn running_started(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some("Running")
            && s.container_statuses
                .iter()
                .flatten()
                .all(|c| c.started == Some(true))
    })
}

#[tokio::test]
async fn readiness_probes_decide_when_a_running_container_is_ready() -> Result<()> {
    let cluster = DevCluster::start(DevClusterOptions {
        nodes: 1,
        pod_network: true,
        ..DevClusterOptions::default()
    })
    .await?;
    let client = cluster.client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "probed"},
        "spec": {"selector": {"app": "probed"}, "ports": [{"port": 80, "targetPort": "web"}]},
    }))?;
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &service)
        .await?;

    let serve = "mkdir -p /tmp/probed && cd /tmp/probed \
                 && exec python3 -m http.server --bind $POD_IP 8080";
    let http = json!({"httpGet": {"path": "/", "port": "web"}, "periodSeconds": 1});
    pods.create(&PostParams::default(), &probed_pod("serving", serve, http)?)
        .await?;
    let tcp = json!({"tcpSocket": {"port": 8080}, "periodSeconds": 1, "failureThreshold": 1});
    pods.create(
        &PostParams::default(),
        &probed_pod("silent", "exec sleep 600", tcp)?,
    )
    .await?;

    let serving = wait_pod(&pods, "serving", "ready", |pod| {
        condition(pod, "Ready").is_some_and(|(status, _)| status == "True")
    })
    .await?;
    // Its probe has run (and found nothing) by the time the other's passed: both probe every
    // second from the start of their containers.
    let silent = wait_pod(&pods, "silent", "running", running_started).await?;
    assert_eq!(
        condition(&silent, "Ready"),
        Some(("False".to_owned(), Some("ContainersNotReady".to_owned()))),
        "{:?}",
        silent.status
    );
    let ready = silent
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .map(|c| c.ready)
        .collect::<Vec<_>>();
    assert_eq!(ready, [false]);

    // The EndpointSlice controller follows the pods' readiness.
    let serving_ip = serving
        .status
        .and_then(|s| s.pod_ip)
        .context("the serving pod has no IP")?;
    let slices: Api<EndpointSlice> = Api::namespaced(client, "default");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let list = slices
            .list(&ListParams::default().labels("kubernetes.io/service-name=probed"))
            .await?;
        let endpoints: Vec<(Vec<String>, Option<bool>)> = list
            .items
            .iter()
            .flat_map(|slice| &slice.endpoints)
            .map(|e| {
                (
                    e.addresses.clone(),
                    e.conditions.as_ref().and_then(|c| c.ready),
                )
            })
            .collect();
        let ready: Vec<&Vec<String>> = endpoints
            .iter()
            .filter(|(_, ready)| *ready == Some(true))
            .map(|(addresses, _)| addresses)
            .collect();
        if endpoints.len() == 2 && ready == [&vec![serving_ip.clone()]] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Service's endpoints are {endpoints:?}, expected only {serving_ip} ready"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cluster.stop();
    Ok(())
}
