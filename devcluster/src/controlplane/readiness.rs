//! Readiness checks of the control plane, each answering "ready yet?" once; the caller polls them
//! until a deadline while watching that the processes are still alive.

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::Api;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Whether etcd on `127.0.0.1:port` reports itself healthy (its `/health` endpoint, plain HTTP).
pub async fn etcd_healthy(port: u16) -> Result<(), String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|error| format!("connecting: {error}"))?;
    stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .map_err(|error| format!("sending: {error}"))?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .map_err(|error| format!("reading: {error}"))?;
    parse_etcd_health(&String::from_utf8_lossy(&response))
}

/// etcd answers `{"health":"true","reason":""}` with status 200 when it can serve requests.
fn parse_etcd_health(response: &str) -> Result<(), String> {
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response, ""));
    let status_ok = head
        .lines()
        .next()
        .is_some_and(|line| line.split_whitespace().nth(1) == Some("200"));
    let health: Option<serde_json::Value> = serde_json::from_str(body.trim()).ok();
    let healthy = health
        .as_ref()
        .and_then(|value| value.get("health"))
        .and_then(serde_json::Value::as_str)
        == Some("true");
    if status_ok && healthy {
        Ok(())
    } else {
        Err(format!("not healthy: {}", body.trim()))
    }
}

/// `/healthz` of a component (kube-controller-manager, kube-scheduler) answers `ok`.
pub async fn healthz(client: &kube::Client) -> Result<(), String> {
    answers_ok(client, "/healthz").await
}

/// Whether the API server's `/readyz` passes (every post-start hook done, etcd reachable).
pub async fn apiserver_ready(client: &kube::Client) -> Result<(), String> {
    answers_ok(client, "/readyz").await
}

/// `GET path` answers `ok`; otherwise the body or the error.
async fn answers_ok(client: &kube::Client, path: &str) -> Result<(), String> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|error| format!("building the request: {error}"))?;
    match client.request_text(request).await {
        Ok(body) if body.trim() == "ok" => Ok(()),
        Ok(body) => Err(body),
        Err(error) => Err(error.to_string()),
    }
}

/// Whether the controllers that every namespace relies on have run: the `default` service account
/// (service-account controller) and the `kube-root-ca.crt` ConfigMap (root CA publisher) exist in
/// the `default` namespace. Pods created before that are rejected or lack their CA.
pub async fn namespace_machinery_ready(client: &kube::Client) -> Result<(), String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let account = accounts
        .get_opt("default")
        .await
        .map_err(|error| error.to_string())?;
    let root_ca = config_maps
        .get_opt("kube-root-ca.crt")
        .await
        .map_err(|error| error.to_string())?;
    match (account, root_ca) {
        (Some(_), Some(_)) => Ok(()),
        (None, _) => Err("no `default` service account yet".to_string()),
        (_, None) => Err("no `kube-root-ca.crt` ConfigMap yet".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_health_responses() {
        let cases = [
            (
                "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"health\":\"true\",\"reason\":\"\"}",
                true,
            ),
            (
                "HTTP/1.0 503 Service Unavailable\r\n\r\n{\"health\":\"false\",\"reason\":\"RAFT NO LEADER\"}",
                false,
            ),
            ("HTTP/1.0 200 OK\r\n\r\n{\"health\":\"false\"}", false),
            ("HTTP/1.0 200 OK\r\n\r\nnot json", false),
            ("", false),
        ];
        for (response, healthy) in cases {
            assert_eq!(parse_etcd_health(response).is_ok(), healthy, "{response:?}");
        }
    }
}
