//! Readiness probes, as the kubelet runs them: a container with a `readinessProbe` is not ready
//! until the probe has passed `successThreshold` times in a row, and stops being ready after
//! `failureThreshold` failures in a row. Endpoints follow the pod's `Ready` condition, so a
//! Service (or the API server calling a webhook) reaches a replica only once it serves.
//!
//! `httpGet` (status 200-399 passes) and `tcpSocket` (a connection passes) are run against the
//! pod's IP. `https` is checked as the kubelet does without verifying the certificate, except
//! that the handshake is not made: a connection passes. `exec` and `grpc` probes are not
//! simulated, and a container with one counts as ready while it runs. Liveness and startup
//! probes are not simulated.
//!
//! The decisions (what to probe, when the container's readiness changes) are pure; [`run`] is
//! the thin loop that probes over TCP.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// What a probe checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeCheck {
    /// `GET path` over plain HTTP; a status of 200-399 passes.
    Http {
        host: Option<String>,
        port: u16,
        path: String,
    },
    /// A TCP connection passes (`tcpSocket`, and `httpGet` with scheme `HTTPS`).
    Connect { host: Option<String>, port: u16 },
}

/// A readiness probe with the API's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadinessProbe {
    pub check: ProbeCheck,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

/// The container's readiness probe; `None` when it has none or one of a kind not simulated
/// (the container is then ready while it runs). A named port that the container does not
/// declare is an error, as the kubelet reports it.
pub fn readiness_probe(container: &Container) -> Result<Option<ReadinessProbe>, String> {
    let Some(probe) = &container.readiness_probe else {
        return Ok(None);
    };
    let Some(check) = probe_check(container, probe)? else {
        return Ok(None);
    };
    let seconds = |value: Option<i32>, default: u64| {
        Duration::from_secs(value.and_then(|v| u64::try_from(v).ok()).unwrap_or(default))
    };
    let count = |value: Option<i32>, default: u32| {
        value
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v > 0)
            .unwrap_or(default)
    };
    Ok(Some(ReadinessProbe {
        check,
        initial_delay: seconds(probe.initial_delay_seconds, 0),
        period: seconds(probe.period_seconds, 10).max(Duration::from_secs(1)),
        timeout: seconds(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
        success_threshold: count(probe.success_threshold, 1),
        failure_threshold: count(probe.failure_threshold, 3),
    }))
}

fn probe_check(container: &Container, probe: &Probe) -> Result<Option<ProbeCheck>, String> {
    if let Some(http) = &probe.http_get {
        let port = container_port(container, &http.port)?;
        let host = http.host.clone().filter(|h| !h.is_empty());
        let https = http
            .scheme
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("https"));
        return Ok(Some(if https {
            ProbeCheck::Connect { host, port }
        } else {
            ProbeCheck::Http {
                host,
                port,
                path: http.path.clone().unwrap_or_else(|| "/".to_owned()),
            }
        }));
    }
    if let Some(tcp) = &probe.tcp_socket {
        return Ok(Some(ProbeCheck::Connect {
            host: tcp.host.clone().filter(|h| !h.is_empty()),
            port: container_port(container, &tcp.port)?,
        }));
    }
    Ok(None)
}

/// A probe's port: a number, or the name of one of the container's ports.
fn container_port(container: &Container, port: &IntOrString) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(number) => *number,
        IntOrString::String(name) => match name.parse::<i32>() {
            Ok(number) => number,
            Err(_) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| p.container_port)
                .ok_or_else(|| {
                    format!(
                        "readiness probe of container {:?}: no port named {name:?}",
                        container.name
                    )
                })?,
        },
    };
    u16::try_from(number).map_err(|_| {
        format!(
            "readiness probe of container {:?}: invalid port {number}",
            container.name
        )
    })
}

/// A probed container's readiness: consecutive results decide it, as in the kubelet's prober.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    successes: u32,
    failures: u32,
}

impl Readiness {
    /// Counts one probe result; true when the readiness changed.
    pub fn observe(&mut self, passed: bool, probe: &ReadinessProbe) -> bool {
        let was = self.ready;
        if passed {
            self.failures = 0;
            self.successes = self.successes.saturating_add(1);
            if self.successes >= probe.success_threshold {
                self.ready = true;
            }
        } else {
            self.successes = 0;
            self.failures = self.failures.saturating_add(1);
            if self.failures >= probe.failure_threshold {
                self.ready = false;
            }
        }
        self.ready != was
    }
}

/// The status code of an HTTP response's status line (`HTTP/1.1 200 OK`).
pub fn status_code(response: &str) -> Option<u16> {
    let line = response.lines().next()?;
    let mut words = line.split_whitespace();
    words.next().filter(|v| v.starts_with("HTTP/"))?;
    words.next()?.parse().ok()
}

/// Whether an HTTP probe's status passes (the kubelet's 200 <= code < 400).
pub fn http_passes(code: u16) -> bool {
    (200..400).contains(&code)
}

/// Probes once: the check against `host` (the probe's own, else the pod's IP), within the
/// probe's timeout.
pub async fn probe_once(probe: &ReadinessProbe, pod_ip: &str) -> bool {
    let attempt = async {
        match &probe.check {
            ProbeCheck::Connect { host, port } => {
                let host = host.as_deref().unwrap_or(pod_ip);
                TcpStream::connect((host, *port)).await.is_ok()
            }
            ProbeCheck::Http { host, port, path } => {
                let host = host.as_deref().unwrap_or(pod_ip);
                http_get(host, *port, path).await.is_some_and(http_passes)
            }
        }
    };
    tokio::time::timeout(probe.timeout, attempt)
        .await
        .unwrap_or(false)
}

async fn http_get(host: &str, port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect((host, port)).await.ok()?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/devcluster\r\n\
         Accept: */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut head = vec![0u8; 256];
    let mut filled = 0;
    while filled < head.len() && !head[..filled].contains(&b'\n') {
        let read = stream.read(&mut head[filled..]).await.ok()?;
        if read == 0 {
            break;
        }
        filled += read;
    }
    status_code(&String::from_utf8_lossy(&head[..filled]))
}

/// Probes after the initial delay and then every period, sending each result until the
/// receiver is gone (the container stopped, or the pod's worker ended).
pub async fn run<T: Clone>(
    probe: ReadinessProbe,
    pod_ip: String,
    tag: T,
    results: tokio::sync::mpsc::UnboundedSender<(T, bool)>,
) {
    tokio::time::sleep(probe.initial_delay).await;
    loop {
        let passed = probe_once(&probe, &pod_ip).await;
        if results.send((tag.clone(), passed)).is_err() {
            return;
        }
        tokio::time::sleep(probe.period).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, ExecAction, HTTPGetAction, TCPSocketAction};

    fn container(probe: Option<Probe>) -> Container {
        Container {
            name: "web".to_owned(),
            ports: Some(vec![ContainerPort {
                name: Some("admin".to_owned()),
                container_port: 8081,
                ..ContainerPort::default()
            }]),
            readiness_probe: probe,
            ..Container::default()
        }
    }

    fn http(port: IntOrString, scheme: Option<&str>) -> Probe {
        Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/readyz".to_owned()),
                port,
                scheme: scheme.map(str::to_owned),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        }
    }

    #[test]
    fn probes_are_read_from_the_container() {
        let named = ProbeCheck::Http {
            host: None,
            port: 8081,
            path: "/readyz".to_owned(),
        };
        // (case, probe, the check read or a part of the error)
        type Case = (
            &'static str,
            Option<Probe>,
            Result<Option<ProbeCheck>, &'static str>,
        );
        let cases: Vec<Case> = vec![
            ("no probe", None, Ok(None)),
            (
                "named port",
                Some(http(IntOrString::String("admin".to_owned()), None)),
                Ok(Some(named.clone())),
            ),
            (
                "number",
                Some(http(IntOrString::Int(8081), Some("HTTP"))),
                Ok(Some(named)),
            ),
            (
                "https connects only",
                Some(http(IntOrString::Int(9443), Some("HTTPS"))),
                Ok(Some(ProbeCheck::Connect {
                    host: None,
                    port: 9443,
                })),
            ),
            (
                "tcp",
                Some(Probe {
                    tcp_socket: Some(TCPSocketAction {
                        host: Some("10.0.0.1".to_owned()),
                        port: IntOrString::Int(53),
                    }),
                    ..Probe::default()
                }),
                Ok(Some(ProbeCheck::Connect {
                    host: Some("10.0.0.1".to_owned()),
                    port: 53,
                })),
            ),
            (
                "exec is not simulated",
                Some(Probe {
                    exec: Some(ExecAction::default()),
                    ..Probe::default()
                }),
                Ok(None),
            ),
            (
                "unknown port name",
                Some(http(IntOrString::String("metrics".to_owned()), None)),
                Err("no port named \"metrics\""),
            ),
            (
                "port out of range",
                Some(http(IntOrString::Int(70000), None)),
                Err("invalid port 70000"),
            ),
        ];
        for (name, probe, want) in cases {
            let got = readiness_probe(&container(probe)).map(|p| p.map(|p| p.check));
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{name}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{name}: {got}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn defaults_are_the_apis() {
        let probe = readiness_probe(&container(Some(http(IntOrString::Int(1), None))))
            .unwrap()
            .unwrap();
        assert_eq!(probe.initial_delay, Duration::ZERO);
        assert_eq!(probe.period, Duration::from_secs(10));
        assert_eq!(probe.timeout, Duration::from_secs(1));
        assert_eq!((probe.success_threshold, probe.failure_threshold), (1, 3));
    }

    #[test]
    fn readiness_follows_consecutive_results() {
        let mut probe = readiness_probe(&container(Some(http(IntOrString::Int(1), None))))
            .unwrap()
            .unwrap();
        probe.success_threshold = 2;
        probe.failure_threshold = 2;
        // (result, ready after it, changed)
        let steps = [
            (false, false, false),
            (true, false, false),
            (false, false, false),
            (true, false, false),
            (true, true, true),
            (true, true, false),
            (false, true, false),
            (true, true, false),
            (false, true, false),
            (false, false, true),
            (false, false, false),
            (true, false, false),
            (true, true, true),
        ];
        let mut readiness = Readiness::default();
        for (i, (passed, ready, changed)) in steps.into_iter().enumerate() {
            assert_eq!(readiness.observe(passed, &probe), changed, "step {i}");
            assert_eq!(readiness.ready, ready, "step {i}");
        }
    }

    #[test]
    fn http_status_lines() {
        let cases = [
            ("HTTP/1.1 200 OK\r\n", Some(200), true),
            ("HTTP/1.0 302 Found\r\n", Some(302), true),
            ("HTTP/1.1 503 Service Unavailable\r\n", Some(503), false),
            ("HTTP/1.1 404\r\n", Some(404), false),
            ("garbage", None, false),
            ("", None, false),
        ];
        for (response, code, passes) in cases {
            assert_eq!(status_code(response), code, "{response:?}");
            assert_eq!(code.is_some_and(http_passes), passes, "{response:?}");
        }
    }
}
