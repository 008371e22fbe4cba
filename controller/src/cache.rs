//! Reflector caches of everything a reconcile reads, and the trigger that wakes the reconcile
//! loop when any of them changes.
//!
//! Contract: [`Caches::start`] watches Skyhooks, DeploymentPolicies and Nodes cluster-wide, and,
//! in the controller's namespace, the pods, Jobs and package ConfigMaps labelled
//! `skyhook.nvidia.com/name` and the node-metadata ConfigMaps labelled
//! `skyhook.nvidia.com/skyhook-node-meta`. Where the API server serves the nodewright group it
//! also watches NodeWrights and that group's DeploymentPolicies, and the same four kinds of
//! objects under the `nodewright.nvidia.com/` labels; a snapshot holds both groups' objects
//! once each. Every change the plan can see wakes the [`Notify`] it
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
use skyhook_api::generation::Group;
use skyhook_api::keys::Keys;
use skyhook_api::nodewright_v1alpha1;
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
pub use skyhook::{CachedNodeWright, CachedSkyhook};
pub use slim::CachedNode;
use trigger::{Trigger, job_changed, node_changed, pod_changed, version_changed};

/// How often the caches are checked while the last reconcile's writes are not all shown.
const OWN_WRITES_POLL: Duration = Duration::from_millis(10);

/// The stores the reconcile reads.
#[derive(Clone)]
pub struct Caches {
    skyhooks: Store<CachedSkyhook>,
    policies: Store<DeploymentPolicy>,
    /// `None` where the API server does not serve the nodewright group.
    nodewrights: Option<NodeWrightStores>,
    nodes: Store<CachedNode>,
    /// The controller's objects of each served group, in its namespace.
    owned: Vec<OwnedStores>,
    /// The namespace of the controller's pods and ConfigMaps.
    namespace: String,
}

/// The nodewright group's workload objects and policies.
#[derive(Clone)]
struct NodeWrightStores {
    nodewrights: Store<CachedNodeWright>,
    policies: Store<nodewright_v1alpha1::DeploymentPolicy>,
}

/// The controller's objects labelled with one group's keys. Label selectors cannot ask for one
/// label or another, so each group has watches of its own.
#[derive(Clone)]
struct OwnedStores {
    pods: Store<CachedPod>,
    jobs: Store<CachedJob>,
    package_configmaps: Store<ConfigMap>,
    metadata_configmaps: Store<CachedNodeMetadata>,
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
    /// Every DeploymentPolicy of the skyhook group.
    pub policies: Vec<Arc<DeploymentPolicy>>,
    /// Every NodeWright, in the Skyhook's shape (empty where the group is not served).
    pub nodewrights: Vec<Arc<Skyhook>>,
    /// Every DeploymentPolicy of the nodewright group.
    pub nodewright_policies: Vec<Arc<nodewright_v1alpha1::DeploymentPolicy>>,
    /// Every Node.
    pub nodes: Vec<Arc<CachedNode>>,
    /// The controller's package and interrupt pods of both groups: bare ones (made by an
    /// earlier release) and the attempts of its stage Jobs.
    pub pods: Vec<Arc<CachedPod>>,
    /// The controller's stage Jobs.
    pub jobs: Vec<Arc<CachedJob>>,
    /// The controller's package ConfigMaps.
    pub package_configmaps: Vec<Arc<ConfigMap>>,
    /// The controller's node-metadata ConfigMaps.
    pub metadata_configmaps: Vec<Arc<CachedNodeMetadata>>,
}

/// A watch's future, boxed so that the watches of every kind and group run as one.
type Watch = future::BoxFuture<'static, ()>;

impl Caches {
    /// Starts watching the objects of `groups` (the skyhook group is always watched). The
    /// returned future drives every watch and never ends on its own (only by a panic, after
    /// which the caches no longer follow the cluster); run it for as long as the caches are
    /// used. `changed` is woken on every change.
    pub fn start(
        client: &Client,
        namespace: &str,
        groups: &[Group],
        changed: Arc<Notify>,
    ) -> (Caches, impl Future<Output = ()> + Send + 'static) {
        let mut watches: Vec<Watch> = Vec::new();
        let skyhooks = reflect_all::<CachedSkyhook>(client, &changed, &mut watches);
        let policies = reflect_all::<DeploymentPolicy>(client, &changed, &mut watches);
        let nodewrights = groups
            .contains(&Group::NodeWright)
            .then(|| NodeWrightStores {
                nodewrights: reflect_all(client, &changed, &mut watches),
                policies: reflect_all(client, &changed, &mut watches),
            });
        let (nodes, nodes_watch) = reflect(
            Api::<CachedNode>::all(client.clone()),
            watcher::Config::default(),
            changed.clone(),
            |_| {},
            node_changed,
        );
        watches.push(Box::pin(nodes_watch));
        let owned = (Group::ALL.into_iter())
            .filter(|group| *group == Group::Skyhook || groups.contains(group))
            .map(|group| reflect_owned(client, namespace, group.keys(), &changed, &mut watches))
            .collect();

        // One task for all of them: each watch on a task of its own decoded events in parallel
        // with the reconcile's pass, and made the rollouts slower (1,000 nodes: step p50 8.1 and
        // 8.9 s against 5.8 and 6.1 s, more controller CPU, no fewer watches ended).
        let drive = async move {
            future::join_all(watches).await;
        };
        (
            Caches {
                skyhooks,
                policies,
                nodewrights,
                nodes,
                owned,
                namespace: namespace.to_owned(),
            },
            drive,
        )
    }

    /// Waits until every cache holds a complete first listing.
    pub async fn wait_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.skyhooks.wait_until_ready().await?;
        self.policies.wait_until_ready().await?;
        if let Some(stores) = &self.nodewrights {
            stores.nodewrights.wait_until_ready().await?;
            stores.policies.wait_until_ready().await?;
        }
        self.nodes.wait_until_ready().await?;
        for stores in &self.owned {
            stores.pods.wait_until_ready().await?;
            stores.jobs.wait_until_ready().await?;
            stores.package_configmaps.wait_until_ready().await?;
            stores.metadata_configmaps.wait_until_ready().await?;
        }
        Ok(())
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

    /// The `resourceVersion` at which the cache of the write's kind holds its object. Names of
    /// one kind are unique in the namespace, so the first group's store holding the name holds
    /// the object.
    fn cached_version(&self, write: &OwnWrite) -> Option<String> {
        fn version<K: Resource>(object: Option<Arc<K>>) -> Option<String> {
            object.and_then(|object| object.meta().resource_version.clone())
        }
        let name = write.name.as_str();
        let namespace = self.namespace.as_str();
        match write.kind {
            CachedKind::Workload(Group::Skyhook) => {
                version(self.skyhooks.get(&ObjectRef::new(name)))
            }
            CachedKind::Workload(Group::NodeWright) => (self.nodewrights.as_ref())
                .and_then(|stores| version(stores.nodewrights.get(&ObjectRef::new(name)))),
            CachedKind::Node => version(self.nodes.get(&ObjectRef::new(name))),
            CachedKind::Pod => self.owned.iter().find_map(|stores| {
                version(stores.pods.get(&ObjectRef::new(name).within(namespace)))
            }),
            CachedKind::Job => self.owned.iter().find_map(|stores| {
                version(stores.jobs.get(&ObjectRef::new(name).within(namespace)))
            }),
            CachedKind::ConfigMap => self.owned.iter().find_map(|stores| {
                let at = ObjectRef::new(name).within(namespace);
                version(stores.package_configmaps.get(&at)).or_else(|| {
                    let at = ObjectRef::new(name).within(namespace);
                    version(stores.metadata_configmaps.get(&at))
                })
            }),
        }
    }

    /// Copies the current contents of every cache.
    pub fn objects(&self) -> CachedObjects {
        let (nodewrights, nodewright_policies) = match &self.nodewrights {
            Some(stores) => (
                (stores.nodewrights.state().iter())
                    .map(|cached| cached.skyhook().clone())
                    .collect(),
                stores.policies.state(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        CachedObjects {
            skyhooks: (self.skyhooks.state().iter())
                .map(|cached| cached.skyhook().clone())
                .collect(),
            policies: self.policies.state(),
            nodewrights,
            nodewright_policies,
            nodes: self.nodes.state(),
            pods: self.owned_state(|s| s.pods.state()),
            jobs: self.owned_state(|s| s.jobs.state()),
            package_configmaps: self.owned_state(|s| s.package_configmaps.state()),
            metadata_configmaps: self.owned_state(|s| s.metadata_configmaps.state()),
        }
    }

    /// The objects of one kind in every group's store, each once: an object labelled with both
    /// groups' names (upstream's operator copies a legacy pod's labels while it adopts it) is in
    /// both stores.
    fn owned_state<K: Resource>(&self, state: fn(&OwnedStores) -> Vec<Arc<K>>) -> Vec<Arc<K>> {
        let mut groups = self.owned.iter();
        let Some(first) = groups.next() else {
            return Vec::new();
        };
        let mut objects = state(first);
        for stores in groups {
            let more = state(stores);
            if more.is_empty() {
                continue;
            }
            let held: std::collections::HashSet<String> = (objects.iter())
                .filter_map(|object| object.meta().name.clone())
                .collect();
            objects.extend(more.into_iter().filter(|object| {
                object
                    .meta()
                    .name
                    .as_ref()
                    .is_none_or(|n| !held.contains(n))
            }));
        }
        objects
    }
}

/// A store of every object of kind `K` in the cluster, its watch added to `watches`.
fn reflect_all<K>(client: &Client, changed: &Arc<Notify>, watches: &mut Vec<Watch>) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (store, watch) = reflect(
        Api::<K>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
        |_| {},
        version_changed,
    );
    watches.push(Box::pin(watch));
    store
}

/// The stores of the controller's objects labelled with `keys`' labels in `namespace`, their
/// watches added to `watches`.
fn reflect_owned(
    client: &Client,
    namespace: &str,
    keys: &'static Keys,
    changed: &Arc<Notify>,
    watches: &mut Vec<Watch>,
) -> OwnedStores {
    let owned = watcher::Config::default().labels(keys.name_label);
    let node_meta = watcher::Config::default().labels(keys.node_meta_label);
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
        changed.clone(),
        |_| {},
        version_changed,
    );
    watches.push(Box::pin(pods_watch));
    watches.push(Box::pin(jobs_watch));
    watches.push(Box::pin(package_configmaps_watch));
    watches.push(Box::pin(metadata_configmaps_watch));
    OwnedStores {
        pods,
        jobs,
        package_configmaps,
        metadata_configmaps,
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
