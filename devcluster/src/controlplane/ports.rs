//! Free loopback ports, so several clusters (parallel tests) run side by side.
//!
//! A port is found by binding port 0 and released before the component binds it, so another
//! process can take it in between; the caller detects that ("address already in use" in a
//! component's log) and starts again with fresh ports.

use std::net::{Ipv4Addr, TcpListener};

/// Ports of one cluster's listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ports {
    pub etcd_client: u16,
    pub etcd_peer: u16,
    pub apiserver: u16,
    pub controller_manager: u16,
    pub scheduler: u16,
}

impl Ports {
    /// Distinct free ports: all listeners are held open together until every port is known.
    pub fn pick() -> std::io::Result<Self> {
        let listeners = (0..5)
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .collect::<std::io::Result<Vec<_>>>()?;
        let ports = listeners
            .iter()
            .map(|listener| listener.local_addr().map(|addr| addr.port()))
            .collect::<std::io::Result<Vec<_>>>()?;
        match ports[..] {
            [
                etcd_client,
                etcd_peer,
                apiserver,
                controller_manager,
                scheduler,
            ] => Ok(Self {
                etcd_client,
                etcd_peer,
                apiserver,
                controller_manager,
                scheduler,
            }),
            _ => Err(std::io::Error::other("expected five listeners")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn picked_ports_are_distinct_and_bindable() -> std::io::Result<()> {
        let ports = Ports::pick()?;
        let all = [
            ports.etcd_client,
            ports.etcd_peer,
            ports.apiserver,
            ports.controller_manager,
            ports.scheduler,
        ];
        assert_eq!(
            all.iter().collect::<BTreeSet<_>>().len(),
            all.len(),
            "{ports:?}"
        );
        for port in all {
            TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
        }
        Ok(())
    }
}
