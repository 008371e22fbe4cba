//! What a reconcile reads beyond the caches: the pods of the nodes a Skyhook has cordoned (all
//! namespaces; workload pods are not cached, since only those nodes can be drained or held by
//! `podNonInterruptLabels`) and the PodDisruptionBudgets that explain a stuck drain. The node
//! listings and the budget listing run concurrently.
//!
//! Contract: a listing that fails is recorded in [`Failures`] and left out, so the plan waits
//! for that node instead of draining blind, and a drain report names no budget.

use std::collections::BTreeMap;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::{Api, Client};
use tracing::debug;

use super::apply::{Failures, Operation};
use super::snapshot::Snapshot;
use crate::cache::CachedObjects;

/// How many node listings are in flight at once.
const LISTINGS_IN_FLIGHT: usize = 16;

/// What one reconcile listed.
#[derive(Debug, Default)]
pub struct Observed {
    /// All pods of each listed node, by node; a node whose listing failed is missing.
    pub workload_pods: BTreeMap<String, Vec<Pod>>,
    /// Every PodDisruptionBudget; empty when no node is listed or the listing failed.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// The listings that failed.
    pub failures: Failures,
}

/// Lists the pods of every node a Skyhook has cordoned, and the budgets when there is one.
pub async fn observe(client: &Client, cached: &CachedObjects) -> Observed {
    let to_list = Snapshot::nodes_to_list(&cached.nodes);
    if to_list.is_empty() {
        return Observed::default();
    }
    let (listed, pdbs) = futures::join!(list_pods_on(client, to_list), list_pdbs(client));
    let mut observed = Observed::default();
    for (node, result) in listed {
        match result {
            Ok(pods) => {
                observed.workload_pods.insert(node, pods);
            }
            Err(error) => {
                observed
                    .failures
                    .record(Operation::ListNodePods, &node, Err(error));
            }
        }
    }
    match pdbs {
        Ok(pdbs) => observed.pdbs = pdbs,
        Err(error) => {
            observed
                .failures
                .record(Operation::ListPodDisruptionBudgets, "*", Err(error));
            debug!("drain reports will not name PodDisruptionBudgets this reconcile");
        }
    }
    observed
}

async fn list_pods_on(
    client: &Client,
    nodes: Vec<String>,
) -> Vec<(String, Result<Vec<Pod>, kube::Error>)> {
    let api = Api::<Pod>::all(client.clone());
    stream::iter(nodes)
        .map(|node| {
            let api = &api;
            async move {
                let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
                let result = api.list(&params).await.map(|list| list.items);
                (node, result)
            }
        })
        .buffer_unordered(LISTINGS_IN_FLIGHT)
        .collect()
        .await
}

async fn list_pdbs(client: &Client) -> Result<Vec<PodDisruptionBudget>, kube::Error> {
    Api::<PodDisruptionBudget>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
}
