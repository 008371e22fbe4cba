//! Every version of the watched objects a test saw, so a test can assert on states that come and
//! go faster than it could poll (a pod that runs for a second, an intermediate node state).

use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, bail};
use futures::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Records every object version a watch delivers, from its first list on, until dropped.
#[derive(Debug)]
pub struct Recorder<K> {
    seen: Arc<Mutex<Vec<K>>>,
    count: watch::Receiver<usize>,
    task: JoinHandle<()>,
}

impl<K> Recorder<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// Starts watching `api` (narrowed by `config`) and returns once the initial list is in, so
    /// that nothing created after this call can be missed.
    pub async fn start(api: Api<K>, config: watcher::Config) -> anyhow::Result<Self> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (count_tx, count) = watch::channel(0);
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let store = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut listed_tx = Some(listed_tx);
            // Back off between retries so an API server restart or an etcd stall is not a
            // busy loop.
            let mut events = watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                        let mut seen = store.lock().unwrap_or_else(PoisonError::into_inner);
                        seen.push(object);
                        count_tx.send_replace(seen.len());
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = listed_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    // Deletions keep what was seen; watch errors are retried by the watcher.
                    Ok(watcher::Event::Delete(_) | watcher::Event::Init) | Err(_) => {}
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(60), listed)
            .await
            .context("the recorder's initial list took over 60 s")?
            .context("the recorder's watch ended before its initial list")?;
        Ok(Self { seen, count, task })
    }

    /// Every version seen so far, oldest first.
    pub fn seen(&self) -> Vec<K> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until `condition` holds for the versions seen so far; returns them then.
    pub async fn wait_until(
        &self,
        what: &str,
        condition: impl Fn(&[K]) -> bool,
    ) -> anyhow::Result<Vec<K>> {
        let mut count = self.count.clone();
        let waited = tokio::time::timeout(crate::WAIT, async {
            loop {
                let seen = self.seen();
                if condition(&seen) {
                    return Ok(seen);
                }
                if count.changed().await.is_err() {
                    bail!("the recorder's watch ended while waiting for {what}");
                }
            }
        })
        .await;
        waited.with_context(|| format!("timed out after {:?} waiting for {what}", crate::WAIT))?
    }
}

impl<K> Drop for Recorder<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Records every version of the Node `name` (its node-state annotations as they change).
pub async fn record_node(
    client: &kube::Client,
    name: &str,
) -> anyhow::Result<Recorder<k8s_openapi::api::core::v1::Node>> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    Recorder::start(Api::all(client.clone()), config).await
}
