//! Waiting for conditions on watched objects, with a deadline that names what was awaited.

use std::fmt::Debug;
use std::time::Duration;

use anyhow::Context;
use kube::Resource;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use serde::de::DeserializeOwned;

/// Generous for a loaded 2-core machine; every wait ends as soon as its condition holds.
pub const WAIT: Duration = Duration::from_secs(300);

/// Awaits a watch condition (e.g. [`await_condition`]) within `timeout`, naming `what` on failure.
pub async fn within<T>(
    what: &str,
    timeout: Duration,
    condition: impl Future<Output = Result<T, kube::runtime::wait::Error>>,
) -> anyhow::Result<T> {
    tokio::time::timeout(timeout, condition)
        .await
        .with_context(|| format!("timed out after {timeout:?} waiting for {what}"))?
        .with_context(|| format!("watching for {what}"))
}

/// Waits until the object `name` exists and `condition` holds for it; returns it then.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    condition: impl Fn(&K) -> bool,
) -> anyhow::Result<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let found = within(
        what,
        WAIT,
        await_condition(api.clone(), name, |object: Option<&K>| {
            object.is_some_and(&condition)
        }),
    )
    .await?;
    found.with_context(|| format!("{name} vanished while waiting for {what}"))
}
