//! Reflector caches behind [`Lookups`], per API group: DeploymentPolicy names (metadata only)
//! and, for each Skyhook or NodeWright, its name and `spec.deploymentPolicy`. Skyhooks are read untyped so that one stored
//! object the current types cannot decode (written while the webhook was down, or by an older
//! version) cannot stall the whole cache.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use skyhook_api::generation::Group;
use skyhook_api::nodewright_v1alpha1::{DeploymentPolicy as NodeWrightPolicy, NodeWright};
use skyhook_api::v1alpha1::{DeploymentPolicy, Skyhook};
use skyhook_api::validate::PolicyReference;

use crate::lookups::Lookups;

/// The caches, readable while [`run`](ClusterCache) keeps them current.
#[derive(Clone)]
pub struct ClusterCache {
    skyhooks: Store<DynamicObject>,
    policies: Store<PartialObjectMeta<DeploymentPolicy>>,
    /// The nodewright group's, when the API server served it at start.
    nodewright: Option<NodeWrightStores>,
    synced: Arc<AtomicBool>,
}

/// The NodeWrights and the nodewright group's DeploymentPolicies.
#[derive(Clone)]
struct NodeWrightStores {
    nodewrights: Store<DynamicObject>,
    policies: Store<PartialObjectMeta<NodeWrightPolicy>>,
}

impl std::fmt::Debug for ClusterCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCache")
            .field("synced", &self.is_synced())
            .field("nodewright", &self.nodewright.is_some())
            .finish_non_exhaustive()
    }
}

impl ClusterCache {
    /// Whether every cache has completed its first list.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
}

/// The caches and the future that fills them; the future runs until dropped, retrying with
/// backoff when the API server is unreachable. `nodewright`: the API server serves the
/// nodewright group (read once, at start, as the controller does), so its objects are cached
/// too; otherwise no NodeWright or nodewright DeploymentPolicy can exist, and admission reads
/// none.
pub fn cluster_cache(
    client: Client,
    nodewright: bool,
) -> (ClusterCache, impl Future<Output = ()> + Send) {
    let (skyhooks, skyhook_stream) = untyped_store(&client, ApiResource::erase::<Skyhook>(&()));
    let (policies, policy_stream) = metadata_store::<DeploymentPolicy>(&client);
    let (nodewright_stores, nodewright_streams) = if nodewright {
        let (nodewrights, workloads) =
            untyped_store(&client, ApiResource::erase::<NodeWright>(&()));
        let (policies, policy_stream) = metadata_store::<NodeWrightPolicy>(&client);
        let streams = futures::future::join(workloads, policy_stream);
        (
            Some(NodeWrightStores {
                nodewrights,
                policies,
            }),
            futures::future::Either::Left(async move {
                streams.await;
            }),
        )
    } else {
        (
            None,
            futures::future::Either::Right(futures::future::ready(())),
        )
    };
    let synced = Arc::new(AtomicBool::new(false));
    let cache = ClusterCache {
        skyhooks: skyhooks.clone(),
        policies: policies.clone(),
        nodewright: nodewright_stores.clone(),
        synced: Arc::clone(&synced),
    };
    let readiness = async move {
        let skyhook_group =
            skyhooks.wait_until_ready().await.is_ok() && policies.wait_until_ready().await.is_ok();
        let nodewright_group = match &nodewright_stores {
            Some(stores) => {
                stores.nodewrights.wait_until_ready().await.is_ok()
                    && stores.policies.wait_until_ready().await.is_ok()
            }
            None => true,
        };
        if skyhook_group && nodewright_group {
            synced.store(true, Ordering::Release);
            tracing::info!(
                nodewright = nodewright_stores.is_some(),
                "workload and deploymentpolicy caches synced"
            );
        }
    };
    let run = async move {
        futures::join!(skyhook_stream, policy_stream, nodewright_streams, readiness);
    };
    (cache, run)
}

/// A store of the objects of `resource`, read untyped, and the watch that fills it.
fn untyped_store(
    client: &Client,
    resource: ApiResource,
) -> (
    Store<DynamicObject>,
    impl Future<Output = ()> + Send + use<>,
) {
    let writer = Writer::<DynamicObject>::new(resource.clone());
    let store = writer.as_reader();
    let plural = resource.plural.clone();
    let stream = watcher(
        Api::<DynamicObject>::all_with(client.clone(), &resource),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .touched_objects()
    .for_each(move |event| {
        if let Err(err) = event {
            tracing::warn!(error = %err, resource = %plural, "watch failed; retrying");
        }
        async {}
    });
    (store, stream)
}

/// A store of the metadata of every `K`, and the watch that fills it.
fn metadata_store<K>(
    client: &Client,
) -> (
    Store<PartialObjectMeta<K>>,
    impl Future<Output = ()> + Send + use<K>,
)
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
    PartialObjectMeta<K>: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned,
{
    let (store, writer) = reflector::store::<PartialObjectMeta<K>>();
    let stream = watcher(
        Api::<PartialObjectMeta<K>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .touched_objects()
    .map_err(|err| tracing::warn!(error = %err, kind = K::kind(&()).as_ref(), "deploymentpolicy watch failed; retrying"))
    .for_each(|_| async {});
    (store, stream)
}

impl Lookups for ClusterCache {
    fn policy_names(&self, group: Group) -> Option<BTreeSet<String>> {
        if !self.is_synced() {
            return None;
        }
        Some(match (group, &self.nodewright) {
            (Group::Skyhook, _) => self.policies.state().iter().map(|p| p.name_any()).collect(),
            (Group::NodeWright, Some(stores)) => stores
                .policies
                .state()
                .iter()
                .map(|p| p.name_any())
                .collect(),
            (Group::NodeWright, None) => BTreeSet::new(),
        })
    }

    fn policy_references(&self, group: Group) -> Option<Vec<PolicyReference>> {
        if !self.is_synced() {
            return None;
        }
        let objects = match (group, &self.nodewright) {
            (Group::Skyhook, _) => self.skyhooks.state(),
            (Group::NodeWright, Some(stores)) => stores.nodewrights.state(),
            (Group::NodeWright, None) => Vec::new(),
        };
        Some(
            objects
                .iter()
                .map(|object| policy_reference(object))
                .collect(),
        )
    }
}

/// The part of a stored Skyhook or NodeWright that admission reads: its name and `spec.deploymentPolicy`.
fn policy_reference(object: &DynamicObject) -> PolicyReference {
    PolicyReference {
        skyhook: object.name_any(),
        policy: object
            .data
            .pointer("/spec/deploymentPolicy")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_policy_reference_of_an_undecodable_skyhook() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "skyhook.nvidia.com/v1alpha1",
            "kind": "Skyhook",
            "metadata": {"name": "old"},
            "spec": {"deploymentPolicy": "ramp", "packages": ["not", "a", "map"]},
        }))
        .unwrap();
        assert_eq!(
            policy_reference(&object),
            PolicyReference {
                skyhook: "old".to_owned(),
                policy: Some("ramp".to_owned()),
            }
        );
    }
}
