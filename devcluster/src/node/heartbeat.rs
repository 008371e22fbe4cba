//! Node heartbeats: one loop for all nodes renews their Leases and re-posts their status, with
//! bounded concurrency, as many kubelets would. A node that is down (rebooting, or dead after
//! [`super::NodeHandle::down`]) does neither.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch};
use kube::runtime::reflector::ObjectRef;
use tokio::time::{Instant, MissedTickBehavior};

use super::context::{Power, SimContext, SimNode, patch_params, post_params};
use super::object::{self, LEASE_NAMESPACE};

/// Renews the Leases every `lease_renew_interval` and, every `status_update_interval`, posts the
/// status of each node whose API copy differs from what its kubelet would post or whose last post
/// is `status_report_interval` old, as the kubelet does.
pub(crate) async fn run(ctx: Arc<SimContext>, nodes: Vec<Arc<SimNode>>) {
    let renew = ctx.opts.heartbeat.lease_renew_interval;
    let mut lease_ticker = tokio::time::interval_at(Instant::now() + renew, renew);
    lease_ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let update = ctx.opts.status_update_interval;
    let mut status_ticker = tokio::time::interval_at(Instant::now() + update, update);
    status_ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let concurrency = ctx.opts.write_concurrency.max(1);
    loop {
        let renew_leases = tokio::select! {
            _ = lease_ticker.tick() => true,
            _ = status_ticker.tick() => false,
        };
        let up: Vec<Arc<SimNode>> = nodes.iter().filter(|n| n.is_up()).cloned().collect();
        if renew_leases {
            futures::stream::iter(up)
                .map(|node| {
                    let ctx = ctx.clone();
                    async move { renew_lease(&ctx, &node).await }
                })
                .buffer_unordered(concurrency)
                .for_each(|()| async {})
                .await;
        } else {
            let due: Vec<Arc<SimNode>> = up
                .into_iter()
                .filter(|node| status_due(&ctx, node))
                .collect();
            futures::stream::iter(due)
                .map(|node| {
                    let ctx = ctx.clone();
                    async move { post_status(&ctx, &node, true, false).await }
                })
                .buffer_unordered(concurrency)
                .for_each(|()| async {})
                .await;
        }
    }
}

fn status_due(ctx: &SimContext, node: &SimNode) -> bool {
    let current = ctx.node_store.get(&ObjectRef::new(&node.name));
    let since_last_post = node
        .last_status_post
        .lock()
        .ok()
        .and_then(|last| last.map(|at| at.elapsed()));
    object::status_needs_post(
        current.as_deref(),
        &node.boot_id(),
        since_last_post,
        ctx.opts.status_report_interval,
    )
}

/// Renews the node's lease, recreating it if someone deleted it.
pub(crate) async fn renew_lease(ctx: &SimContext, node: &SimNode) {
    let _permit = ctx.writes.acquire().await;
    let now = Timestamp::now();
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), LEASE_NAMESPACE);
    let renewed = leases
        .patch(
            &node.name,
            &patch_params(),
            &Patch::Merge(object::lease_renewal(now)),
        )
        .await;
    let result = match renewed {
        Err(kube::Error::Api(e)) if e.code == 404 => leases
            .create(
                &post_params(),
                &object::build_lease(&node.name, now, ctx.opts.heartbeat),
            )
            .await
            .map(|_| ()),
        other => other.map(|_| ()),
    };
    if let Err(error) = result {
        tracing::warn!(node = %node.name, %error, "failed to renew node lease");
    }
}

/// Posts the node's conditions and boot ID (retrying a few times, as a transition must land).
pub(crate) async fn post_status(ctx: &SimContext, node: &SimNode, ready: bool, transition: bool) {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    for attempt in 0..5u32 {
        // A dead machine reports nothing, also when it died while this post was retrying.
        if *node.power.borrow() == Power::Off {
            return;
        }
        let patch = object::status_patch(ready, &node.boot_id(), Timestamp::now(), transition);
        let result = {
            let _permit = ctx.writes.acquire().await;
            nodes
                .patch_status(&node.name, &patch_params(), &Patch::Strategic(patch))
                .await
        };
        match result {
            Ok(_) => {
                if let Ok(mut last) = node.last_status_post.lock() {
                    *last = Some(std::time::Instant::now());
                }
                return;
            }
            Err(error) => {
                tracing::warn!(node = %node.name, %error, attempt, "failed to post node status");
                tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt + 1))).await;
            }
        }
    }
}
