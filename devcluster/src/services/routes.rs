//! Which endpoints serve which ClusterIP and port (pure), and the record of the routes in effect.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};

/// Where a cluster's Service proxy records the routes in effect, in its state directory.
const ROUTES_FILE: &str = "services.json";

pub fn routes_file(state_root: &std::path::Path) -> std::path::PathBuf {
    state_root.join(ROUTES_FILE)
}

/// The routes the cluster's Service proxy has put in effect, as `"<ClusterIP>:<port>"` to
/// `["<endpoint IP>:<port>", ...]`: new connections to a ClusterIP port go to these endpoints
/// only. Empty before the proxy's first update, and without a pod network.
pub fn routes_in_effect(state_root: &std::path::Path) -> BTreeMap<String, Vec<String>> {
    std::fs::read(routes_file(state_root))
        .ok()
        .and_then(|json| serde_json::from_slice(&json).ok())
        .unwrap_or_default()
}

/// The label that ties an EndpointSlice to its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// For each ClusterIP and Service port, the endpoints new connections go to (sorted, without
/// duplicates; empty when the Service has no ready endpoint, and connections are then refused).
pub type Routes = BTreeMap<SocketAddrV4, Vec<SocketAddrV4>>;

/// What kube-proxy would route, given every Service and EndpointSlice of the cluster: each TCP
/// port of each Service with an IPv4 ClusterIP, to the ready IPv4 endpoints of the Service's
/// slices whose port has the same name. Headless Services (`clusterIP: None`) and other
/// protocols get nothing.
pub fn routes(services: &[Service], slices: &[EndpointSlice]) -> Routes {
    let mut routes = Routes::new();
    for service in services {
        let Some(spec) = &service.spec else { continue };
        let cluster_ips = spec
            .cluster_ips
            .iter()
            .flatten()
            .chain(spec.cluster_ip.iter())
            .filter_map(|ip| ip.parse::<Ipv4Addr>().ok());
        let service_slices: Vec<&EndpointSlice> = slices
            .iter()
            .filter(|slice| belongs_to(slice, service))
            .collect();
        for cluster_ip in cluster_ips {
            for port in spec.ports.iter().flatten().filter(|p| is_tcp(&p.protocol)) {
                let Ok(number) = u16::try_from(port.port) else {
                    continue;
                };
                let mut backends = ready_endpoints(&service_slices, port);
                backends.sort();
                backends.dedup();
                routes.insert(SocketAddrV4::new(cluster_ip, number), backends);
            }
        }
    }
    routes
}

fn is_tcp(protocol: &Option<String>) -> bool {
    protocol.as_deref().is_none_or(|p| p == "TCP")
}

fn belongs_to(slice: &EndpointSlice, service: &Service) -> bool {
    let labels = slice.metadata.labels.as_ref();
    slice.address_type == "IPv4"
        && slice.metadata.namespace == service.metadata.namespace
        && labels.and_then(|l| l.get(SERVICE_NAME_LABEL)) == service.metadata.name.as_ref()
}

/// A Service port and a slice port are the same port when their names are (unnamed is `""`).
fn same_name(service_port: &ServicePort, slice_port: &EndpointPort) -> bool {
    service_port.name.as_deref().unwrap_or("") == slice_port.name.as_deref().unwrap_or("")
        && is_tcp(&slice_port.protocol)
}

fn ready_endpoints(slices: &[&EndpointSlice], port: &ServicePort) -> Vec<SocketAddrV4> {
    let mut endpoints = Vec::new();
    for slice in slices {
        let target = slice
            .ports
            .iter()
            .flatten()
            .find(|slice_port| same_name(port, slice_port))
            .and_then(|slice_port| slice_port.port)
            .and_then(|number| u16::try_from(number).ok());
        let Some(target) = target else { continue };
        for endpoint in &slice.endpoints {
            // An unknown readiness counts as ready (the API's rule, and kube-proxy's).
            let ready = endpoint.conditions.as_ref().and_then(|c| c.ready);
            if ready == Some(false) {
                continue;
            }
            endpoints.extend(
                endpoint
                    .addresses
                    .iter()
                    .filter_map(|address| address.parse::<Ipv4Addr>().ok())
                    .map(|address| SocketAddrV4::new(address, target)),
            );
        }
    }
    endpoints
}

/// The order in which the `turn`-th connection tries `backends`: each connection starts at the
/// next one, so connections spread over them, and falls back to the others in turn.
pub fn attempt_order(backends: &[SocketAddrV4], turn: usize) -> Vec<SocketAddrV4> {
    let mut order = backends.to_vec();
    if !order.is_empty() {
        let start = turn % order.len();
        order.rotate_left(start);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(name: &str, cluster_ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": cluster_ip, "clusterIPs": [cluster_ip], "ports": ports},
        }))
        .expect("a valid Service")
    }

    fn slice(
        service: &str,
        ports: serde_json::Value,
        endpoints: serde_json::Value,
    ) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{service}-abc"), "namespace": "default",
                         "labels": {SERVICE_NAME_LABEL: service}},
            "addressType": "IPv4",
            "ports": ports,
            "endpoints": endpoints,
        }))
        .expect("a valid EndpointSlice")
    }

    fn addr(text: &str) -> SocketAddrV4 {
        text.parse().expect("an IPv4 socket address")
    }

    #[test]
    fn service_ports_route_to_the_ready_endpoints_of_their_slices() {
        struct Case {
            name: &'static str,
            services: Vec<Service>,
            slices: Vec<EndpointSlice>,
            expected: Vec<(&'static str, Vec<&'static str>)>,
        }
        let web = || {
            service(
                "web",
                "100.64.255.10",
                json!([{"port": 80, "targetPort": 8080}]),
            )
        };
        let cases = [
            Case {
                name: "ready and unknown readiness are served, not ready is not",
                services: vec![web()],
                slices: vec![slice(
                    "web",
                    json!([{"port": 8080, "protocol": "TCP"}]),
                    json!([
                        {"addresses": ["100.64.2.3"], "conditions": {"ready": true}},
                        {"addresses": ["100.64.1.2"]},
                        {"addresses": ["100.64.1.4"], "conditions": {"ready": false}},
                    ]),
                )],
                expected: vec![(
                    "100.64.255.10:80",
                    vec!["100.64.1.2:8080", "100.64.2.3:8080"],
                )],
            },
            Case {
                name: "endpoints of several slices are merged without duplicates",
                services: vec![web()],
                slices: vec![
                    slice(
                        "web",
                        json!([{"port": 8080}]),
                        json!([{"addresses": ["100.64.1.2"]}]),
                    ),
                    slice(
                        "web",
                        json!([{"port": 8080}]),
                        json!([{"addresses": ["100.64.1.2"]}, {"addresses": ["100.64.2.2"]}]),
                    ),
                ],
                expected: vec![(
                    "100.64.255.10:80",
                    vec!["100.64.1.2:8080", "100.64.2.2:8080"],
                )],
            },
            Case {
                name: "a Service without endpoints keeps its ClusterIP, with nowhere to go",
                services: vec![web()],
                slices: vec![slice(
                    "other",
                    json!([{"port": 8080}]),
                    json!([{"addresses": ["100.64.1.2"]}]),
                )],
                expected: vec![("100.64.255.10:80", vec![])],
            },
            Case {
                name: "named ports match slice ports by name, whatever their numbers",
                services: vec![service(
                    "web",
                    "100.64.255.10",
                    json!([{"name": "http", "port": 80}, {"name": "admin", "port": 9000}]),
                )],
                slices: vec![slice(
                    "web",
                    json!([{"name": "admin", "port": 9443}, {"name": "http", "port": 8080}]),
                    json!([{"addresses": ["100.64.1.2"]}]),
                )],
                expected: vec![
                    ("100.64.255.10:80", vec!["100.64.1.2:8080"]),
                    ("100.64.255.10:9000", vec!["100.64.1.2:9443"]),
                ],
            },
            Case {
                name: "headless Services, UDP ports and UDP slice ports are not routed",
                services: vec![
                    service("headless", "None", json!([{"port": 80}])),
                    service(
                        "dns",
                        "100.64.255.11",
                        json!([{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "tcp", "port": 53}]),
                    ),
                ],
                slices: vec![
                    slice(
                        "headless",
                        json!([{"port": 80}]),
                        json!([{"addresses": ["100.64.1.2"]}]),
                    ),
                    slice(
                        "dns",
                        json!([{"name": "tcp", "port": 5353, "protocol": "UDP"}]),
                        json!([{"addresses": ["100.64.1.3"]}]),
                    ),
                ],
                expected: vec![("100.64.255.11:53", vec![])],
            },
        ];
        for case in cases {
            let expected: Routes = case
                .expected
                .into_iter()
                .map(|(front, backs)| (addr(front), backs.into_iter().map(addr).collect()))
                .collect();
            assert_eq!(
                routes(&case.services, &case.slices),
                expected,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn slices_of_a_same_named_service_in_another_namespace_do_not_count() {
        let mut other = slice(
            "web",
            json!([{"port": 8080}]),
            json!([{"addresses": ["100.64.1.2"]}]),
        );
        other.metadata.namespace = Some("elsewhere".to_owned());
        let web = service("web", "100.64.255.10", json!([{"port": 80}]));
        let actual = routes(&[web], &[other]);
        assert_eq!(actual.get(&addr("100.64.255.10:80")), Some(&vec![]));
    }

    #[test]
    fn connections_take_turns_and_fall_back_to_the_others() {
        let backends = [addr("10.0.0.1:1"), addr("10.0.0.2:1"), addr("10.0.0.3:1")];
        let cases: [(usize, [&str; 3]); 4] = [
            (0, ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"]),
            (1, ["10.0.0.2:1", "10.0.0.3:1", "10.0.0.1:1"]),
            (2, ["10.0.0.3:1", "10.0.0.1:1", "10.0.0.2:1"]),
            (3, ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"]),
        ];
        for (turn, expected) in cases {
            let expected: Vec<SocketAddrV4> = expected.into_iter().map(addr).collect();
            assert_eq!(attempt_order(&backends, turn), expected, "turn {turn}");
        }
        assert!(attempt_order(&[], 5).is_empty());
    }
}
