//! What the devcluster integration tests share: waiting on pods.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::wait::await_condition;

/// How long a test waits for one thing to happen.
pub const WAIT: Duration = Duration::from_secs(90);

/// Waits until `check` holds for the pod; `what` says what that means, for the error.
pub async fn wait_pod(
    pods: &Api<Pod>,
    name: &str,
    what: &str,
    check: impl Fn(&Pod) -> bool,
) -> Result<Pod> {
    let condition = move |pod: Option<&Pod>| pod.is_some_and(&check);
    let pod = tokio::time::timeout(WAIT, await_condition(pods.clone(), name, condition))
        .await
        .with_context(|| format!("timed out waiting for pod {name} to be {what}"))??;
    pod.with_context(|| format!("pod {name} vanished"))
}

/// The pod's phase, empty before it has one.
#[allow(dead_code)] // Not every test binary reads phases.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}
