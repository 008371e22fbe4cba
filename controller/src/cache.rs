//! Reflector caches of everything a reconcile reads, and the trigger that wakes the reconcile
//! loop when any of them changes.
//!
//! Contract: [`Caches::start`] watches Skyhooks, DeploymentPolicies and Nodes cluster-wide, and,
//! in the controller's namespace, the pods and package ConfigMaps labelled
//! `skyhook.nvidia.com/name` and the node-metadata ConfigMaps labelled
//! `skyhook.nvidia.com/skyhook-node-meta`. Every change the plan can see wakes the [`Notify`] it
//! was given (one pending wake-up absorbs a burst of changes); a Node's heartbeat or a change to
//! a Node field the plan does not read only refreshes the cache (see [`trigger`]).
//! [`Caches::snapshot`] copies the current contents of all stores at once, so one reconcile works
//! from one view of the cluster.
//!
//! Pods of other namespaces (workloads to drain, pods that block an interrupt) are deliberately
//! not cached: they are listed per node, only for nodes about to be interrupted, which keeps
//! memory proportional to the controller's own objects rather than to the cluster.
//!
//! Skyhooks are decoded without their `managedFields` ([`CachedSkyhook`]), which list every
//! node entry of the status the controller applies. Node objects are decoded with only what the
//! controller reads ([`CachedNode`]): no
//! `managedFields`, images, addresses, capacity or system info besides the boot ID. Labels and
//! annotations stay whole: the node-metadata ConfigMaps copy them. Pods are decoded with only
//! the fields the pod rules read, into types sized for them ([`CachedPod`]), and node-metadata
//! ConfigMaps keep a digest of their data instead of the data ([`CachedNodeMetadata`]).

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, future};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use skyhook_api::keys;
use skyhook_api::v1alpha1::{DeploymentPolicy, Skyhook};
use tokio::sync::Notify;
use tracing::warn;

/// `kube::Resource` for `$cached`, a form of the Kubernetes kind `$kind` the controller decodes
/// itself: watched, written and stored as `$kind` is. With only the two types, its `ObjectMeta`
/// is its `metadata` field; otherwise `meta` and `meta_mut` say where it is, and
/// `impl[...]` gives the impl's generic parameters.
macro_rules! resource_of {
    ($cached:ty, $kind:ty) => {
        resource_of!(impl[] $cached as $kind {
            meta: |object| object.metadata,
            meta_mut: |object| object.metadata,
        });
    };
    (impl[$($generics:tt)*] $cached:ty as $kind:ty {
        meta: |$object:ident| $meta:expr,
        meta_mut: |$object_mut:ident| $meta_mut:expr $(,)?
    }) => {
        impl<$($generics)*> kube::Resource for $cached {
            type DynamicType = ();
            type Scope = <$kind as kube::Resource>::Scope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::kind(dt)
            }

            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::group(dt)
            }

            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::version(dt)
            }

            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::plural(dt)
            }

            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                let $object = self;
                &$meta
            }

            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                let $object_mut = self;
                &mut $meta_mut
            }
        }
    };
}

pub mod answer;
pub mod job;
pub mod node_metadata;
pub mod own_writes;
pub mod pod;
pub mod skyhook;
pub mod slim;
pub mod trigger;

use job::CachedJob;
use node_metadata::CachedNodeMetadata;
use own_writes::{CachedKind, OwnWrite, shows};
pub use pod::CachedPod;
pub use skyhook::CachedSkyhook;
pub use slim::CachedNode;
use trigger::{Trigger, job_changed, node_changed, pod_changed, version_changed};

/// How often the caches are checked while the last reconcile's writes are not all shown.
const OWN_WRITES_POLL: Duration = Duration::from_millis(10);

/// The stores the reconcile reads.
#[derive(Clone)]
pub struct Caches {
    skyhooks: Store<CachedSkyhook>,
    policies: Store<DeploymentPolicy>,
    nodes: Store<CachedNode>,
    pods: Store<CachedPod>,
    jobs: Store<CachedJob>,
    package_configmaps: Store<ConfigMap>,
    metadata_configmaps: Store<CachedNodeMetadata>,
    /// The namespace of the controller's pods and ConfigMaps.
    namespace: String,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches").finish_non_exhaustive()
    }
}

/// One view of every cache, taken at one moment.
#[derive(Debug, Clone, Default)]
pub struct CachedObjects {
    /// Every Skyhook.
    pub skyhooks: Vec<Arc<Skyhook>>,
    /// Every DeploymentPolicy.
    pub policies: Vec<Arc<DeploymentPolicy>>,
    /// Every Node.
    pub nodes: Vec<Arc<CachedNode>>,
    /// The controller's package and interrupt pods: bare ones (made by an earlier release)
    /// and the attempts of its stage Jobs.
    pub pods: Vec<Arc<CachedPod>>,
    /// The controller's stage Jobs.
    pub jobs: Vec<Arc<CachedJob>>,
    /// The controller's package ConfigMaps.
    pub package_configmaps: Vec<Arc<ConfigMap>>,
    /// The controller's node-metadata ConfigMaps.
    pub metadata_configmaps: Vec<Arc<CachedNodeMetadata>>,
}

impl Caches {
    /// Starts watching. The returned future drives every watch and never ends on its own (only
    /// by a panic, after which the caches no longer follow the cluster); run it for as long as
    /// the caches are used. `changed` is woken on every change.
    pub fn start(
        client: &Client,
        namespace: &str,
        changed: Arc<Notify>,
    ) -> (Caches, impl Future<Output = ()> + Send + 'static) {
        let owned = watcher::Config::default().labels(keys::SKYHOOK.name_label);
        let node_meta = watcher::Config::default().labels(keys::SKYHOOK.node_meta_label);

        let (skyhooks, skyhooks_watch) = reflect(
            Api::<CachedSkyhook>::all(client.clone()),
            watcher::Config::default(),
            changed.clone(),
            |_| {},
            version_changed,
        );
        let (policies, policies_watch) = reflect(
            Api::<DeploymentPolicy>::all(client.clone()),
            watcher::Config::default(),
            changed.clone(),
            |_| {},
            version_changed,
        );
        let (nodes, nodes_watch) = reflect(
            Api::<CachedNode>::all(client.clone()),
            watcher::Config::default(),
            changed.clone(),
            |_| {},
            node_changed,
        );
        let (pods, pods_watch) = reflect(
            Api::<CachedPod>::namespaced(client.clone(), namespace),
            owned.clone(),
            changed.clone(),
            |_| {},
            pod_changed,
        );
        let (jobs, jobs_watch) = reflect(
            Api::<CachedJob>::namespaced(client.clone(), namespace),
            owned.clone(),
            changed.clone(),
            |_| {},
            job_changed,
        );
        let (package_configmaps, package_configmaps_watch) = reflect(
            Api::<ConfigMap>::namespaced(client.clone(), namespace),
            owned,
            changed.clone(),
            |cm: &mut ConfigMap| cm.managed_fields_mut().clear(),
            version_changed,
        );
        let (metadata_configmaps, metadata_configmaps_watch) = reflect(
            Api::<CachedNodeMetadata>::namespaced(client.clone(), namespace),
            node_meta,
            changed,
            |_| {},
            version_changed,
        );

        // One task for all of them: each watch on a task of its own decoded events in parallel
        // with the reconcile's pass, and made the rollouts slower (1,000 nodes: step p50 8.1 and
        // 8.9 s against 5.8 and 6.1 s, more controller CPU, no fewer watches ended).
        let drive = async move {
            futures::join!(
                skyhooks_watch,
                policies_watch,
                nodes_watch,
                pods_watch,
                jobs_watch,
                package_configmaps_watch,
                metadata_configmaps_watch,
            );
        };
        (
            Caches {
                skyhooks,
                policies,
                nodes,
                pods,
                jobs,
                package_configmaps,
                metadata_configmaps,
                namespace: namespace.to_owned(),
            },
            drive,
        )
    }

    /// Waits until every cache holds a complete first listing.
    pub async fn wait_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.skyhooks.wait_until_ready().await?;
        self.policies.wait_until_ready().await?;
        self.nodes.wait_until_ready().await?;
        self.pods.wait_until_ready().await?;
        self.jobs.wait_until_ready().await?;
        self.package_configmaps.wait_until_ready().await?;
        self.metadata_configmaps.wait_until_ready().await
    }

    /// Waits until the caches show each of `writes` (see [`own_writes`]), at most `bound`;
    /// `Err` carries how many they did not show in time.
    pub async fn until_shown(&self, writes: Vec<OwnWrite>, bound: Duration) -> Result<(), usize> {
        let started = Instant::now();
        let mut unseen = writes;
        loop {
            unseen.retain(|write| !shows(write, self.cached_version(write).as_deref()));
            if unseen.is_empty() {
                return Ok(());
            }
            if started.elapsed() >= bound {
                return Err(unseen.len());
            }
            tokio::time::sleep(OWN_WRITES_POLL).await;
        }
    }

    /// The `resourceVersion` at which the cache of the write's kind holds its object.
    fn cached_version(&self, write: &OwnWrite) -> Option<String> {
        fn version<K: Resource>(object: Option<Arc<K>>) -> Option<String> {
            object.and_then(|object| object.meta().resource_version.clone())
        }
        let name = write.name.as_str();
        match write.kind {
            CachedKind::Skyhook => version(self.skyhooks.get(&ObjectRef::new(name))),
            CachedKind::Node => version(self.nodes.get(&ObjectRef::new(name))),
            CachedKind::Pod => {
                version(self.pods.get(&ObjectRef::new(name).within(&self.namespace)))
            }
            CachedKind::Job => {
                version(self.jobs.get(&ObjectRef::new(name).within(&self.namespace)))
            }
            CachedKind::ConfigMap => version(
                self.package_configmaps
                    .get(&ObjectRef::new(name).within(&self.namespace)),
            )
            .or_else(|| {
                let metadata = ObjectRef::new(name).within(&self.namespace);
                version(self.metadata_configmaps.get(&metadata))
            }),
        }
    }

    /// Copies the current contents of every cache.
    pub fn objects(&self) -> CachedObjects {
        CachedObjects {
            skyhooks: (self.skyhooks.state().iter())
                .map(|cached| cached.skyhook().clone())
                .collect(),
            policies: self.policies.state(),
            nodes: self.nodes.state(),
            pods: self.pods.state(),
            jobs: self.jobs.state(),
            package_configmaps: self.package_configmaps.state(),
            metadata_configmaps: self.metadata_configmaps.state(),
        }
    }
}

/// The watches' `timeoutSeconds`: 0 lets the API server choose (its `--min-request-timeout` up
/// to twice that, 30 to 60 minutes by default) instead of kube's 290 s, so an idle controller
/// does not renew six watches every five minutes; client-go's informers ask for 5 to 10 minutes.
/// It also turns off kube's own dead-connection check (no event for the timeout plus 5 s): the
/// client's read timeout ([`crate::run::READ_TIMEOUT`]) takes its place.
const WATCH_AS_LONG_AS_THE_SERVER_ALLOWS: u32 = 0;

/// A store for `api` filtered by `config`, and the future that keeps it current, trimming each
/// object with `trim` before it is stored and waking `changed` once the store holds an event that
/// [`Trigger`] (comparing cached and new objects by `differs`) says the plan can see.
fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    changed: Arc<Notify>,
    trim: fn(&mut K),
    differs: fn(&K, &K) -> bool,
) -> (Store<K>, impl Future<Output = ()> + Send + 'static)
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store();
    let cached = store.clone();
    let mut trigger = Trigger::new(differs);
    // Decided before the store applies the event (it still holds the old version), acted on
    // after, so the woken reconcile reads the new one.
    let wake = Arc::new(AtomicBool::new(false));
    let woken = wake.clone();
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let drive = watcher(api, config.timeout(WATCH_AS_LONG_AS_THE_SERVER_ALLOWS))
        .default_backoff()
        .modify(trim)
        .inspect(move |event| {
            if let Ok(event) = event {
                let old = event_object(event).and_then(|obj| cached.get(&ObjectRef::from_obj(obj)));
                if trigger.wakes(event, old.as_deref(), || cached.len()) {
                    wake.store(true, Ordering::Relaxed);
                }
            }
        })
        .reflect(writer)
        .for_each(move |event| {
            match event {
                Ok(_) if woken.swap(false, Ordering::Relaxed) => changed.notify_one(),
                Ok(_) => {}
                Err(error) => warn!(%kind, error = %error, "watch failed; retrying"),
            }
            future::ready(())
        });
    (store, drive)
}

/// The object an event carries, if any.
fn event_object<K>(event: &watcher::Event<K>) -> Option<&K> {
    match event {
        watcher::Event::Apply(obj)
        | watcher::Event::Delete(obj)
        | watcher::Event::InitApply(obj) => Some(obj),
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}
