//! Node heartbeats: one loop for all nodes renews their Leases and re-posts their status, with
//! bounded concurrency, as many kubelets would.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch};
use tokio::time::{Instant, MissedTickBehavior};

use super::object::{self, LEASE_NAMESPACE};
use super::sim::{SimContext, SimNode, patch_params, post_params};

pub(crate) async fn run(ctx: Arc<SimContext>, nodes: Vec<Arc<SimNode>>) {
    let renew = ctx.opts.heartbeat.lease_renew_interval;
    let mut ticker = tokio::time::interval_at(Instant::now() + renew, renew);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_status = Instant::now();
    loop {
        ticker.tick().await;
        let report_status = last_status.elapsed() >= ctx.opts.status_report_interval;
        if report_status {
            last_status = Instant::now();
        }
        let concurrency = ctx.opts.write_concurrency.max(1);
        let up: Vec<Arc<SimNode>> = nodes.iter().filter(|n| n.is_up()).cloned().collect();
        futures::stream::iter(up)
            .map(|node| {
                let ctx = ctx.clone();
                async move { beat(&ctx, &node, report_status).await }
            })
            .buffer_unordered(concurrency)
            .for_each(|()| async {})
            .await;
    }
}

async fn beat(ctx: &SimContext, node: &SimNode, report_status: bool) {
    renew_lease(ctx, node).await;
    if report_status {
        post_status(ctx, node, true, false).await;
    }
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
        let patch = object::status_patch(ready, &node.boot_id(), Timestamp::now(), transition);
        let result = {
            let _permit = ctx.writes.acquire().await;
            nodes
                .patch_status(&node.name, &patch_params(), &Patch::Strategic(patch))
                .await
        };
        match result {
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(node = %node.name, %error, attempt, "failed to post node status");
                tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt + 1))).await;
            }
        }
    }
}
