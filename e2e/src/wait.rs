//! Waiting for conditions on watched objects, with a deadline that names what was awaited.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use anyhow::{Context, bail};
use futures::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use kube::runtime::watcher;
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

/// [`wait_for`], whose error also shows the object as it was last, as `describe` puts it
/// (`None`: the object no longer exists).
pub(crate) async fn wait_for_showing_last<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    condition: impl Fn(&K) -> bool,
    describe: impl Fn(Option<&K>) -> String,
) -> anyhow::Result<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    match wait_for(api, name, what, condition).await {
        Ok(object) => Ok(object),
        Err(error) => {
            let last = api.get_opt(name).await.ok().flatten();
            Err(error.context(describe(last.as_ref())))
        }
    }
}

/// Waits until `condition` holds for the set of objects of `api` matching `config` that are
/// not being deleted, checked after every watch event (so a state both sides of a race see at
/// once, e.g. two nodes at different priorities, is not missed); returns that set, by name.
pub(crate) async fn wait_for_all<K>(
    api: Api<K>,
    config: watcher::Config,
    what: &str,
    condition: impl Fn(&[K]) -> bool,
) -> anyhow::Result<Vec<K>>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let mut events = watcher(api, config).boxed();
    let mut current: BTreeMap<String, K> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, K>> = None;
    let name = |object: &K| object.meta().name.clone().unwrap_or_default();
    let waited = tokio::time::timeout(WAIT, async {
        while let Some(event) = events.next().await {
            match event.with_context(|| format!("watching for {what}"))? {
                watcher::Event::Init => listing = Some(BTreeMap::new()),
                watcher::Event::InitApply(object) => {
                    if let Some(listing) = listing.as_mut() {
                        listing.insert(name(&object), object);
                    }
                }
                watcher::Event::InitDone => current = listing.take().unwrap_or_default(),
                watcher::Event::Apply(object) => {
                    current.insert(name(&object), object);
                }
                watcher::Event::Delete(object) => {
                    current.remove(&name(&object));
                }
            }
            if listing.is_some() {
                continue;
            }
            let live: Vec<K> = current
                .values()
                .filter(|object| object.meta().deletion_timestamp.is_none())
                .cloned()
                .collect();
            if condition(&live) {
                return Ok(live);
            }
        }
        bail!("the watch ended while waiting for {what}")
    })
    .await;
    waited.with_context(|| format!("timed out after {WAIT:?} waiting for {what}"))?
}
