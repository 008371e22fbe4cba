//! Reflector caches behind [`Lookups`]: DeploymentPolicy names (metadata only) and, for each
//! Skyhook, its name and `spec.deploymentPolicy`. Skyhooks are read untyped so that one stored
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
use skyhook_api::v1alpha1::{DeploymentPolicy, Skyhook};
use skyhook_api::validate::PolicyReference;

use crate::lookups::Lookups;

/// The caches, readable while [`run`](ClusterCache) keeps them current.
#[derive(Clone)]
pub struct ClusterCache {
    skyhooks: Store<DynamicObject>,
    policies: Store<PartialObjectMeta<DeploymentPolicy>>,
    synced: Arc<AtomicBool>,
}

impl std::fmt::Debug for ClusterCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCache")
            .field("synced", &self.is_synced())
            .finish_non_exhaustive()
    }
}

impl ClusterCache {
    /// Whether both caches have completed their first list.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
}

/// The caches and the future that fills them; the future runs until dropped, retrying with
/// backoff when the API server is unreachable.
pub fn cluster_cache(client: Client) -> (ClusterCache, impl Future<Output = ()> + Send) {
    let resource = ApiResource::erase::<Skyhook>(&());
    let skyhook_writer = Writer::<DynamicObject>::new(resource.clone());
    let skyhooks = skyhook_writer.as_reader();
    let (policies, policy_writer) = reflector::store::<PartialObjectMeta<DeploymentPolicy>>();
    let synced = Arc::new(AtomicBool::new(false));
    let cache = ClusterCache {
        skyhooks: skyhooks.clone(),
        policies: policies.clone(),
        synced: Arc::clone(&synced),
    };

    let skyhook_stream = watcher(
        Api::<DynamicObject>::all_with(client.clone(), &resource),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(skyhook_writer)
    .touched_objects()
    .for_each(|event| async move {
        if let Err(err) = event {
            tracing::warn!(error = %err, "skyhook watch failed; retrying");
        }
    });
    let policy_stream = watcher(
        Api::<PartialObjectMeta<DeploymentPolicy>>::all(client),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(policy_writer)
    .touched_objects()
    .map_err(|err| tracing::warn!(error = %err, "deploymentpolicy watch failed; retrying"))
    .for_each(|_| async {});
    let readiness = async move {
        if skyhooks.wait_until_ready().await.is_ok() && policies.wait_until_ready().await.is_ok() {
            synced.store(true, Ordering::Release);
            tracing::info!("skyhook and deploymentpolicy caches synced");
        }
    };
    let run = async move {
        futures::join!(skyhook_stream, policy_stream, readiness);
    };
    (cache, run)
}

impl Lookups for ClusterCache {
    fn policy_names(&self) -> Option<BTreeSet<String>> {
        self.is_synced()
            .then(|| self.policies.state().iter().map(|p| p.name_any()).collect())
    }

    fn policy_references(&self) -> Option<Vec<PolicyReference>> {
        self.is_synced().then(|| {
            self.skyhooks
                .state()
                .iter()
                .map(|object| policy_reference(object))
                .collect()
        })
    }
}

/// The part of a stored Skyhook that admission reads: its name and `spec.deploymentPolicy`.
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
