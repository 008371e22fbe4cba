//! The one watch of the pods bound to any simulated node, which runs a worker per pod.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::worker::{self, PodUpdate};
use crate::node::context::{SimContext, SimNode};

/// The kubelet of every simulated node.
#[derive(Debug)]
pub(crate) struct Kubelet {
    ctx: Arc<SimContext>,
    nodes: HashMap<String, Arc<SimNode>>,
    stop: watch::Sender<bool>,
}

impl Kubelet {
    pub fn new(ctx: Arc<SimContext>, nodes: &[Arc<SimNode>]) -> Arc<Self> {
        Arc::new(Self {
            ctx,
            nodes: nodes.iter().map(|n| (n.name.clone(), n.clone())).collect(),
            stop: watch::Sender::new(false),
        })
    }

    /// Asks [`Kubelet::run`] to kill every container and return.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Watches pods bound to the simulated nodes and runs a worker per pod, until stopped.
    pub async fn run(self: Arc<Self>) {
        let api: Api<Pod> = Api::all(self.ctx.client.clone());
        let config = watcher::Config::default().fields("spec.nodeName!=");
        let events = watcher(api, config).default_backoff();
        futures::pin_mut!(events);
        let mut stop = self.stop.subscribe();
        let mut workers: HashMap<String, watch::Sender<PodUpdate>> = HashMap::new();
        let mut tasks: JoinSet<String> = JoinSet::new();
        let mut relisted: Option<HashSet<String>> = None;
        loop {
            tokio::select! {
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        // Dropping the workers kills their containers.
                        tasks.shutdown().await;
                        return;
                    }
                }
                Some(done) = tasks.join_next() => {
                    if let Ok(uid) = done {
                        workers.remove(&uid);
                    }
                }
                event = events.next() => match event {
                    Some(Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod))) => {
                        if let Some(seen) = relisted.as_mut()
                            && let Some(uid) = &pod.metadata.uid
                        {
                            seen.insert(uid.clone());
                        }
                        self.dispatch(pod, &mut workers, &mut tasks);
                    }
                    Some(Ok(watcher::Event::Delete(pod))) => {
                        if let Some(worker) = pod.metadata.uid.as_ref().and_then(|u| workers.get(u)) {
                            worker.send_replace(PodUpdate::Gone);
                        }
                    }
                    Some(Ok(watcher::Event::Init)) => relisted = Some(HashSet::new()),
                    Some(Ok(watcher::Event::InitDone)) => {
                        // Pods that vanished while the watch was down.
                        if let Some(seen) = relisted.take() {
                            for (uid, worker) in &workers {
                                if !seen.contains(uid) {
                                    worker.send_replace(PodUpdate::Gone);
                                }
                            }
                        }
                    }
                    Some(Err(error)) => tracing::warn!(%error, "pod watch failed; retrying"),
                    None => return,
                },
            }
        }
    }

    fn dispatch(
        &self,
        pod: Pod,
        workers: &mut HashMap<String, watch::Sender<PodUpdate>>,
        tasks: &mut JoinSet<String>,
    ) {
        let Some(node) = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .and_then(|n| self.nodes.get(n))
        else {
            return;
        };
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let update = PodUpdate::Present(Arc::new(pod));
        if let Some(worker) = workers.get(&uid) {
            worker.send_replace(update);
            return;
        }
        let (sender, receiver) = watch::channel(update);
        workers.insert(uid.clone(), sender);
        let (ctx, node) = (self.ctx.clone(), node.clone());
        tasks.spawn(async move {
            worker::run(ctx, node, uid.clone(), receiver).await;
            uid
        });
    }
}
