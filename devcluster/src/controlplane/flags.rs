//! The command line of each control-plane component, as a pure function of the cluster's layout.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::pki::PkiFiles;
use super::ports::Ports;
use crate::network::ServiceRange;

const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Component {
    Etcd,
    KubeApiserver,
    KubeControllerManager,
    KubeScheduler,
}

impl std::str::FromStr for Component {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::from_cli_name(name).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(|c| c.short_name()).collect();
            format!(
                "no control-plane component {name:?}; one of {}",
                known.join(", ")
            )
        })
    }
}

impl Component {
    /// In start order; stopped in reverse.
    pub const ALL: [Component; 4] = [
        Component::Etcd,
        Component::KubeApiserver,
        Component::KubeControllerManager,
        Component::KubeScheduler,
    ];

    /// The multi-call binary's first argument, also the log file's name.
    pub fn name(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::KubeApiserver => "kube-apiserver",
            Component::KubeControllerManager => "kube-controller-manager",
            Component::KubeScheduler => "kube-scheduler",
        }
    }

    /// The component a name on the command line means: its short name (`etcd`, `apiserver`,
    /// `controller-manager`, `scheduler`) or its full one ([`Component::name`]).
    pub fn from_cli_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|component| component.name() == name || component.short_name() == name)
    }

    /// `etcd`, `apiserver`, `controller-manager`, `scheduler`.
    pub fn short_name(self) -> &'static str {
        self.name().trim_start_matches("kube-")
    }

    pub fn port(self, ports: &Ports) -> u16 {
        match self {
            Component::Etcd => ports.etcd_client,
            Component::KubeApiserver => ports.apiserver,
            Component::KubeControllerManager => ports.controller_manager,
            Component::KubeScheduler => ports.scheduler,
        }
    }
}

/// Everything the command lines refer to.
#[derive(Debug, Clone)]
pub struct Layout {
    pub ports: Ports,
    pub pki: PkiFiles,
    pub kubeconfig: PathBuf,
    pub etcd_data: PathBuf,
    /// Working directory for kube-controller-manager and kube-scheduler (their self-signed
    /// serving certificates).
    pub components_dir: PathBuf,
    pub node_monitor_grace_period: Duration,
    pub apiserver_address: std::net::Ipv4Addr,
    /// Where Services get their ClusterIPs; the first one is the `kubernetes` Service's.
    pub service_range: ServiceRange,
}

impl Layout {
    /// With a pod network the API server serves on a routable address and devcluster's Service
    /// proxy routes ClusterIPs (`crate::services`); on loopback neither is there.
    fn routes_cluster_ips(&self) -> bool {
        !self.apiserver_address.is_loopback()
    }
}

/// The arguments after the component name.
pub fn args(component: Component, layout: &Layout) -> Vec<String> {
    match component {
        Component::Etcd => etcd_args(layout),
        Component::KubeApiserver => apiserver_args(layout),
        Component::KubeControllerManager => controller_manager_args(layout),
        Component::KubeScheduler => scheduler_args(layout),
    }
}

fn flag(name: &str, value: &str) -> String {
    format!("--{name}={value}")
}

fn path_flag(name: &str, value: &Path) -> String {
    flag(name, &value.display().to_string())
}

fn etcd_args(layout: &Layout) -> Vec<String> {
    vec![
        flag("name", "devcluster"),
        path_flag("data-dir", &layout.etcd_data),
        flag(
            "client-url",
            &format!("http://127.0.0.1:{}", layout.ports.etcd_client),
        ),
        flag(
            "peer-url",
            &format!("http://127.0.0.1:{}", layout.ports.etcd_peer),
        ),
        // A throwaway test cluster: losing data on a machine crash is fine, and fsync on a
        // loaded disk is what makes etcd (and so every API write) slow.
        "--unsafe-no-fsync".to_string(),
    ]
}

fn apiserver_args(layout: &Layout) -> Vec<String> {
    vec![
        flag(
            "etcd-servers",
            &format!("http://127.0.0.1:{}", layout.ports.etcd_client),
        ),
        flag("bind-address", &layout.apiserver_address.to_string()),
        flag("advertise-address", &layout.apiserver_address.to_string()),
        flag("secure-port", &layout.ports.apiserver.to_string()),
        // Endpoints may not hold loopback addresses, so on loopback the `kubernetes` Service
        // gets none rather than an error every few seconds.
        flag(
            "endpoint-reconciler-type",
            if layout.routes_cluster_ips() {
                "lease"
            } else {
                "none"
            },
        ),
        path_flag("tls-cert-file", &layout.pki.apiserver_cert),
        path_flag("tls-private-key-file", &layout.pki.apiserver_key),
        path_flag("client-ca-file", &layout.pki.ca_cert),
        flag("authorization-mode", "Node,RBAC"),
        flag("enable-admission-plugins", "NodeRestriction"),
        flag("allow-privileged", "true"),
        flag("service-cluster-ip-range", &layout.service_range.cidr()),
        flag("service-account-issuer", SERVICE_ACCOUNT_ISSUER),
        path_flag(
            "service-account-key-file",
            &layout.pki.service_account_public,
        ),
        path_flag(
            "service-account-signing-key-file",
            &layout.pki.service_account_key,
        ),
        // Webhooks and aggregated APIs are reached at their Service's ClusterIP, as in a cluster
        // with kube-proxy, where devcluster routes ClusterIPs; elsewhere at an endpoint of the
        // Service, since nothing routes a ClusterIP.
        flag(
            "enable-aggregator-routing",
            if layout.routes_cluster_ips() {
                "false"
            } else {
                "true"
            },
        ),
        path_flag(
            "proxy-client-cert-file",
            &layout.pki.front_proxy_client_cert,
        ),
        path_flag("proxy-client-key-file", &layout.pki.front_proxy_client_key),
        path_flag(
            "requestheader-client-ca-file",
            &layout.pki.front_proxy_ca_cert,
        ),
        flag("requestheader-allowed-names", "front-proxy-client"),
        flag("requestheader-username-headers", "X-Remote-User"),
        flag("requestheader-group-headers", "X-Remote-Group"),
        flag("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
        path_flag(
            "kubelet-client-certificate",
            &layout.pki.kubelet_client_cert,
        ),
        path_flag("kubelet-client-key", &layout.pki.kubelet_client_key),
        // Kubelets serve certificates of the cluster CA, verified as in a hardened cluster, and
        // are reached at their InternalIP: simulated nodes' host names resolve nowhere.
        path_flag("kubelet-certificate-authority", &layout.pki.ca_cert),
        flag("kubelet-preferred-address-types", "InternalIP"),
        flag("profiling", "false"),
    ]
}

/// The flags kube-controller-manager and kube-scheduler share: the admin kubeconfig for
/// everything, a local secure port, their own certificate directory, no leader election.
fn local_component_args(layout: &Layout, component: Component) -> Vec<String> {
    let kubeconfig = &layout.kubeconfig;
    vec![
        path_flag("kubeconfig", kubeconfig),
        path_flag("authentication-kubeconfig", kubeconfig),
        path_flag("authorization-kubeconfig", kubeconfig),
        flag("bind-address", "127.0.0.1"),
        flag("secure-port", &component.port(&layout.ports).to_string()),
        path_flag("cert-dir", &layout.components_dir.join(component.name())),
        flag("leader-elect", "false"),
        flag("profiling", "false"),
    ]
}

fn controller_manager_args(layout: &Layout) -> Vec<String> {
    let mut args = local_component_args(layout, Component::KubeControllerManager);
    args.extend([
        flag("use-service-account-credentials", "true"),
        path_flag(
            "service-account-private-key-file",
            &layout.pki.service_account_key,
        ),
        path_flag("root-ca-file", &layout.pki.ca_cert),
        path_flag("cluster-signing-cert-file", &layout.pki.ca_cert),
        path_flag("cluster-signing-key-file", &layout.pki.ca_key),
        flag("service-cluster-ip-range", &layout.service_range.cidr()),
        // Tests create and delete objects in bursts; client-side throttling at the default
        // 20 requests/s would make garbage collection and PDB status lag behind.
        flag("kube-api-qps", "100"),
        flag("kube-api-burst", "200"),
        flag(
            "node-monitor-grace-period",
            &format!("{}s", layout.node_monitor_grace_period.as_secs()),
        ),
    ]);
    args
}

fn scheduler_args(layout: &Layout) -> Vec<String> {
    local_component_args(layout, Component::KubeScheduler)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn layout() -> Layout {
        Layout {
            ports: Ports {
                etcd_client: 1001,
                etcd_peer: 1002,
                apiserver: 1003,
                controller_manager: 1004,
                scheduler: 1005,
            },
            pki: PkiFiles::in_dir(Path::new("/s/pki")),
            kubeconfig: PathBuf::from("/s/kubeconfig"),
            etcd_data: PathBuf::from("/s/etcd"),
            components_dir: PathBuf::from("/s/components"),
            node_monitor_grace_period: Duration::from_secs(300),
            apiserver_address: std::net::Ipv4Addr::LOCALHOST,
            service_range: ServiceRange::WITHOUT_POD_NETWORK,
        }
    }

    /// Each component is wired to the right ports and files of its own cluster.
    #[test]
    fn components_point_at_their_cluster() {
        let layout = layout();
        let cases: &[(Component, &[&str])] = &[
            (
                Component::Etcd,
                &[
                    "--data-dir=/s/etcd",
                    "--client-url=http://127.0.0.1:1001",
                    "--peer-url=http://127.0.0.1:1002",
                ],
            ),
            (
                Component::KubeApiserver,
                &[
                    "--etcd-servers=http://127.0.0.1:1001",
                    "--secure-port=1003",
                    "--client-ca-file=/s/pki/ca.crt",
                    "--service-account-signing-key-file=/s/pki/sa.key",
                    "--service-account-key-file=/s/pki/sa.pub",
                    "--enable-aggregator-routing=true",
                    "--service-cluster-ip-range=10.96.0.0/16",
                ],
            ),
            (
                Component::KubeControllerManager,
                &[
                    "--kubeconfig=/s/kubeconfig",
                    "--secure-port=1004",
                    "--leader-elect=false",
                    "--service-account-private-key-file=/s/pki/sa.key",
                    "--root-ca-file=/s/pki/ca.crt",
                    "--cert-dir=/s/components/kube-controller-manager",
                    "--node-monitor-grace-period=300s",
                ],
            ),
            (
                Component::KubeScheduler,
                &[
                    "--kubeconfig=/s/kubeconfig",
                    "--secure-port=1005",
                    "--leader-elect=false",
                    "--cert-dir=/s/components/kube-scheduler",
                ],
            ),
        ];
        for (component, expected) in cases {
            let actual = args(*component, &layout);
            for flag in *expected {
                assert!(
                    actual.iter().any(|arg| arg == flag),
                    "{component:?}: {flag} missing from {actual:?}"
                );
            }
        }
    }

    /// On loopback the `kubernetes` Service keeps no endpoints (Endpoints refuse loopback); on the
    /// pod network's address the API server serves there and publishes it as its endpoint.
    #[test]
    fn the_api_server_serves_and_advertises_its_address() {
        let pod_network = crate::network::ClusterNetwork::new(0).expect("cluster 0");
        let cases = [
            (
                std::net::Ipv4Addr::LOCALHOST,
                ServiceRange::WITHOUT_POD_NETWORK,
                "127.0.0.1",
                "none",
                "10.96.0.0/16",
                "true",
            ),
            (
                pod_network.apiserver_address(),
                pod_network.service_range(),
                "100.64.0.1",
                "lease",
                "100.64.255.0/24",
                "false",
            ),
        ];
        for (address, service_range, shown, reconciler, services, endpoint_routing) in cases {
            let layout = Layout {
                apiserver_address: address,
                service_range,
                ..layout()
            };
            let actual = args(Component::KubeApiserver, &layout);
            for flag in [
                format!("--bind-address={shown}"),
                format!("--advertise-address={shown}"),
                format!("--endpoint-reconciler-type={reconciler}"),
                format!("--service-cluster-ip-range={services}"),
                format!("--enable-aggregator-routing={endpoint_routing}"),
            ] {
                assert!(actual.contains(&flag), "{flag} missing from {actual:?}");
            }
        }
    }

    /// Every component binds loopback only, so clusters never collide on, or expose, a wildcard port.
    #[test]
    fn components_are_named_on_the_command_line_short_or_full() {
        let cases = [
            ("etcd", Some(Component::Etcd)),
            ("apiserver", Some(Component::KubeApiserver)),
            ("kube-apiserver", Some(Component::KubeApiserver)),
            ("controller-manager", Some(Component::KubeControllerManager)),
            (
                "kube-controller-manager",
                Some(Component::KubeControllerManager),
            ),
            ("scheduler", Some(Component::KubeScheduler)),
            ("kube-scheduler", Some(Component::KubeScheduler)),
            ("kube-etcd", None),
            ("controller", None),
            ("", None),
        ];
        for (name, expected) in cases {
            assert_eq!(name.parse::<Component>().ok(), expected, "{name:?}");
        }
    }

    #[test]
    fn servers_bind_loopback_only() {
        let layout = layout();
        for component in Component::ALL {
            let actual = args(component, &layout);
            let binds_all = actual.iter().any(|arg| arg.contains("0.0.0.0"));
            assert!(!binds_all, "{component:?}: {actual:?}");
        }
    }
}
