//! How often the simulated kubelets renew their node Leases, and how long the control plane waits
//! for them: settings the Node objects, the heartbeat loop and the control plane's flags share.

use std::time::Duration;

/// How often the simulated kubelets renew their node Leases, and how long the node lifecycle
/// controller waits for a renewal before it taints a node `unreachable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub lease_renew_interval: Duration,
    pub node_monitor_grace_period: Duration,
}

impl Heartbeat {
    /// What a kubelet and kube-controller-manager do by default: renew every 10 s (a quarter of
    /// the 40 s lease), unreachable after 50 s without a renewal.
    pub const KUBELET: Self = Self {
        lease_renew_interval: Duration::from_secs(10),
        node_monitor_grace_period: Duration::from_secs(50),
    };
    /// For thousands of light nodes on one machine, where 5,000 kubelets renewing every 10 s
    /// (500 writes/s) would take most of the API server: renew every 60 s, unreachable after
    /// 300 s (five missed renewals, as with the defaults).
    pub const RELAXED: Self = Self {
        lease_renew_interval: Duration::from_secs(60),
        node_monitor_grace_period: Duration::from_secs(300),
    };

    /// The `leaseDurationSeconds` a kubelet renewing this often writes (four renewals).
    pub fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_renew_interval.as_secs().saturating_mul(4)).unwrap_or(i32::MAX)
    }
}

impl Default for Heartbeat {
    fn default() -> Self {
        Self::KUBELET
    }
}
