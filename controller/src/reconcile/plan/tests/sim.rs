//! A fake cluster for plan tests: it applies plans to a [`Snapshot`] and lets tests decide pod
//! outcomes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodSpec, PodStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::api::ObjectMeta;
use skyhook_api::generation::{Group, group_of_labels};
use skyhook_api::keys;
use skyhook_api::node_state::NodeState;
use skyhook_api::pod_annotation::PodPackageAnnotation;
use skyhook_api::string_map::PackedMap;
use skyhook_api::v1alpha1::{
    DeploymentPolicySpec, DeploymentStrategy, FixedStrategy, HealthGate, Interrupt, InterruptType,
    MaintenanceWindow, Package, PolicyBudget, PolicyDefault, Skyhook, SkyhookSpec, Stage, State,
    Status,
};

use crate::cache::node_metadata::CachedNodeMetadata;
use crate::config::{Config, LogEncoder, LogSettings, PodSettings, TimeEncoder};
use crate::pod_outcome::{PodFailure, PodOutcome};
use crate::pre_pull::PullState;
use crate::reconcile::plan::{Plan, plan};
use crate::reconcile::snapshot::{
    NodeView, OwnedConfigMap, OwnedPod, PrePullRun, Snapshot, Workload, live_objects_of,
};

pub(super) const TEST_LABEL: &str = "skyhook.nvidia.com/test-node";
pub(super) const IMAGE: &str = "ghcr.io/nvidia/skyhook/agentless";

pub(super) fn config() -> Config {
    Config {
        pods: PodSettings {
            namespace: "skyhook".into(),
            image_pull_secret: None,
            copy_dir_root: "/var/lib/skyhook".into(),
            agent_log_root: "/var/log/skyhook".into(),
            agent_image: "ghcr.io/nvidia/skyhook/agentless:6.2.0".into(),
            agent_version: "6.2.0".into(),
            pause_image: "registry.k8s.io/pause:3.10".into(),
            runtime_required_taint: runtime_taint(),
            priority_class_name: None,
        },
        default_interval: Duration::from_secs(600),
        reapply_on_reboot: false,
        metrics_addr: None,
        probe_addr: None,
        leader_election: false,
        log: LogSettings {
            encoder: LogEncoder::Json,
            level: tracing::Level::DEBUG,
            time_encoder: TimeEncoder::Rfc3339,
        },
        drain_timeout: Duration::from_secs(600),
        reboot_deadline: Duration::from_secs(1800),
        max_pods_per_node: 4,
        fleet_budget: None,
        uninstall_mode: skyhook_api::uninstall::UninstallMode::Legacy,
        jobs: crate::config::JobSettings::default(),
        pre_pull_images: false,
        publish_legacy_metrics: true,
        legacy_cleanup_delay: std::time::Duration::from_secs(86_400),
    }
}

pub(super) fn runtime_taint() -> Taint {
    taint("skyhook.nvidia.com", Some("runtime-required"))
}

pub(super) fn taint(key: &str, value: Option<&str>) -> Taint {
    Taint {
        key: key.into(),
        value: value.map(Into::into),
        effect: "NoSchedule".into(),
        time_added: None,
    }
}

pub(super) fn start() -> Timestamp {
    "2026-01-01T00:00:00Z"
        .parse()
        .expect("a valid timestamp literal")
}

/// A ready node selected by the test label, created `index` seconds after [`start`].
pub(super) fn node(name: &str, index: i64) -> NodeView {
    NodeView {
        name: name.into(),
        labels: PackedMap::from_iter([(TEST_LABEL, "skyhooke2e")]),
        created: Some(start() - jiff::SignedDuration::from_secs(1000 - index)),
        boot_id: Some("boot-1".into()),
        ready: true,
        ..NodeView::default()
    }
}

pub(super) fn package(name: &str, version: &str) -> Package {
    Package {
        name: name.into(),
        version: version.into(),
        image: IMAGE.into(),
        ..Package::default()
    }
}

/// The package `dexter` 1.2.3 with a reboot interrupt: what the drain tests drain for.
pub(super) fn rebooting() -> Package {
    let mut reboot = package("dexter", "1.2.3");
    reboot.interrupt = Some(Interrupt {
        type_: InterruptType::Reboot,
        services: Vec::new(),
    });
    reboot
}

/// The package `tuning` 1.0.0 restarting containerd: an interrupt without a reboot.
pub(super) fn restarting() -> Package {
    let mut tuning = package("tuning", "1.0.0");
    tuning.interrupt = Some(Interrupt {
        type_: InterruptType::Service,
        services: vec!["containerd".into()],
    });
    tuning
}

pub(super) fn depends(mut package: Package, on: &[(&str, &str)]) -> Package {
    package.depends_on = on
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    package
}

/// A Skyhook selecting the test nodes, already carrying the finalizer.
pub(super) fn skyhook(name: &str, packages: Vec<Package>) -> Skyhook {
    Skyhook {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            generation: Some(1),
            finalizers: Some(vec![keys::SKYHOOK.finalizer.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: SkyhookSpec {
            node_selectors: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    TEST_LABEL.to_owned(),
                    "skyhooke2e".to_owned(),
                )])),
                match_expressions: None,
            }),
            packages: packages.into_iter().map(|p| (p.name.clone(), p)).collect(),
            ..SkyhookSpec::default()
        },
        status: None,
    }
}

/// A workload pod on `node`.
/// A DeploymentPolicy of one node per batch (a fixed strategy of 1 within a budget of 1)
/// with these maintenance windows and health gate: the policy the batch gates are tested under.
pub(super) fn one_node_batches(
    maintenance_windows: Vec<MaintenanceWindow>,
    health_gate: Option<HealthGate>,
) -> DeploymentPolicySpec {
    DeploymentPolicySpec {
        default: PolicyDefault {
            budget: PolicyBudget {
                percent: None,
                count: Some(1),
                topology: None,
            },
            strategy: DeploymentStrategy {
                fixed: Some(FixedStrategy {
                    initial_batch: Some(1),
                    ..FixedStrategy::default()
                }),
                ..DeploymentStrategy::default()
            },
        },
        compartments: vec![],
        reset_batch_state_on_completion: true,
        maintenance_windows,
        health_gate,
    }
}

pub(super) fn workload(name: &str, node: &str, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            ..PodStatus::default()
        }),
    }
}

/// A pod as the test sees it: (skyhook, package, version, stage).
pub(super) type PodKey = (String, String, String, Stage);

pub(super) struct Sim {
    pub(super) snapshot: Snapshot,
    pub(super) config: Config,
    pub(super) now: Timestamp,
    /// Every ConfigMap as last written, by name: the cache keeps only a digest of a node-metadata
    /// ConfigMap's data.
    pub(super) written_configmaps: BTreeMap<String, ConfigMap>,
}

impl Sim {
    pub(super) fn new(nodes: Vec<NodeView>, skyhooks: Vec<Skyhook>) -> Self {
        Sim {
            snapshot: Snapshot {
                skyhooks: (skyhooks.into_iter())
                    .map(|s| Workload::new(Group::Skyhook, s))
                    .collect(),
                nodes: nodes.into_iter().map(Arc::new).collect(),
                ..Snapshot::default()
            },
            config: config(),
            now: start(),
            written_configmaps: BTreeMap::new(),
        }
    }

    /// Adds `object` as an object of `group` (carrying that group's finalizer; a NodeWright
    /// gets a uid of its own), and reads every name's live group again.
    pub(super) fn add(&mut self, group: Group, mut object: Skyhook) {
        object.metadata.finalizers = Some(vec![group.keys().finalizer.to_owned()]);
        if group == Group::NodeWright {
            let uid = object.metadata.uid.get_or_insert_default();
            uid.push_str("-nw");
        }
        self.snapshot.skyhooks.push(Workload::new(group, object));
        self.relive();
    }

    /// Reads every name's live object and twin again, as `Snapshot::build` does from the
    /// objects and the runs in flight.
    pub(super) fn relive(&mut self) {
        let snapshot = &mut self.snapshot;
        let mut objects: Vec<Workload> = std::mem::take(&mut snapshot.skyhooks);
        objects
            .extend((snapshot.twins.drain(..)).map(|twin| Workload::new(twin.group, twin.object)));
        let busy: BTreeSet<(Group, String)> = (snapshot.pods.iter())
            .filter(|pod| match &pod.job {
                Some(job) => !job.finished,
                None => pod.outcome == PodOutcome::Running,
            })
            .map(|pod| (pod.group, pod.skyhook.clone()))
            .collect();
        let of = |group: Group| -> Vec<Arc<Skyhook>> {
            (objects.iter())
                .filter(|w| w.group == group)
                .map(|w| Arc::clone(&w.object))
                .collect()
        };
        let (owners, twins) = live_objects_of(&of(Group::Skyhook), &of(Group::NodeWright), &busy);
        snapshot.skyhooks = (objects.into_iter())
            .filter(|w| {
                owners.live(w.metadata.name.as_deref().unwrap_or_default()) == Some(w.group)
            })
            .collect();
        snapshot.twins = twins;
        snapshot.owners = owners;
    }

    /// The inert twin named `name`.
    pub(super) fn twin(&self, name: &str) -> &crate::reconcile::snapshot::Twin {
        (self.snapshot.twins.iter())
            .find(|twin| twin.name() == name)
            .expect("the test names a known twin")
    }

    /// Plans once and applies the plan.
    pub(super) fn step(&mut self) -> Plan {
        let planned = plan(&self.snapshot, &self.config, self.now);
        self.apply(&planned);
        self.relive();
        self.snapshot.lost_picks.clear();
        self.now += jiff::SignedDuration::from_secs(1);
        planned
    }

    /// Plans once and applies the plan but its patches of the nodes `lost`, as when they are
    /// refused with a conflict (the node changed since the cache read it). As the apply
    /// layer, it then writes no status and keeps the lost nodes' picks for the next plan.
    pub(super) fn step_losing_node_writes(&mut self, lost: &[&str]) -> Plan {
        let mut planned = plan(&self.snapshot, &self.config, self.now);
        planned
            .nodes
            .retain(|name, _| !lost.contains(&name.as_str()));
        let refused: std::collections::BTreeSet<String> =
            lost.iter().map(|name| (*name).to_owned()).collect();
        let lost_picks = crate::reconcile::snapshot::lost_picks(&planned.statuses, &refused);
        planned.statuses.clear();
        self.apply(&planned);
        self.snapshot.lost_picks = lost_picks;
        self.now += jiff::SignedDuration::from_secs(1);
        planned
    }

    fn apply(&mut self, planned: &Plan) {
        let now = self.now;
        let snapshot = &mut self.snapshot;
        // What the reconcile loop keeps for the next plan.
        snapshot.non_interrupt_held = Some(planned.non_interrupt_holds.keys().cloned().collect());
        for (name, patch) in &planned.nodes {
            let node = snapshot
                .nodes
                .iter_mut()
                .map(Arc::make_mut)
                .find(|n| n.name == *name)
                .expect("plans only patch known nodes");
            for (key, value) in &patch.annotations {
                match value {
                    Some(v) => node.annotations.insert(key, v),
                    None => {
                        node.annotations.remove(key);
                    }
                }
            }
            for (key, value) in &patch.labels {
                match value {
                    Some(v) => node.labels.insert(key, v),
                    None => {
                        node.labels.remove(key);
                    }
                }
            }
            if let Some(unschedulable) = patch.unschedulable {
                node.unschedulable = unschedulable;
            }
            if let Some(taints) = &patch.taints {
                node.taints.clone_from(taints);
            }
            for condition in &patch.conditions {
                node.conditions.retain(|c| c.type_ != condition.type_);
                node.conditions.push(condition.clone());
            }
            node.conditions
                .retain(|c| !patch.remove_conditions.contains(&c.type_));
        }
        snapshot
            .pods
            .retain(|p| !planned.delete_pods.contains_key(&p.name));
        for mut created in planned.created_pods() {
            created.metadata.creation_timestamp = Some(Time(now));
            snapshot.pods.push(owned(created));
        }
        (snapshot.pre_pulls).retain(|p| !planned.delete_pods.contains_key(&p.name));
        for pod in &planned.create_pre_pulls {
            let cached = crate::cache::CachedPod::from(pod.clone());
            let run = PrePullRun {
                name: pod.metadata.name.clone().unwrap_or_default(),
                skyhook: (pod.metadata.labels.as_ref())
                    .and_then(|l| l.get(group_of_labels(Some(l)).keys().name_label).cloned())
                    .unwrap_or_default(),
                node: (pod.spec.as_ref())
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                images: crate::pre_pull::recorded_images(&cached),
                state: PullState::Pulling,
                deleting: false,
            };
            assert!(
                !snapshot.pre_pulls.iter().any(|p| p.name == run.name),
                "a plan creates a pre-pull pod that exists: {}",
                run.name
            );
            snapshot.pre_pulls.push(run);
        }
        for eviction in &planned.evictions {
            if let Some(pods) = snapshot.workload_pods.get_mut(&eviction.node) {
                pods.retain(|p| p.metadata.name.as_deref() != Some(eviction.name.as_str()));
            }
        }
        for cm in &planned.upsert_configmaps {
            let labels = cm.metadata.labels.clone().unwrap_or_default();
            // A node-metadata ConfigMap has no name label: its group is its meta label's.
            let group = (Group::ALL.into_iter())
                .find(|g| {
                    labels.contains_key(g.keys().node_meta_label)
                        || labels.contains_key(g.keys().name_label)
                })
                .unwrap_or_default();
            let keys = group.keys();
            let name = cm.metadata.name.clone().unwrap_or_default();
            let node = cm
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys.node_name_annotation))
                .cloned();
            self.written_configmaps.insert(name.clone(), cm.clone());
            let shared = std::sync::Arc::new(cm.clone());
            if let Some(skyhook) = labels.get(keys.node_meta_label) {
                let cached = Arc::new(CachedNodeMetadata::from(cm.clone()));
                snapshot.metadata_configmaps.insert(
                    name,
                    OwnedConfigMap::new(group, skyhook.clone(), node, cached),
                );
            } else if let Some(skyhook) = labels.get(keys.name_label) {
                snapshot.package_configmaps.insert(
                    name,
                    OwnedConfigMap::new(group, skyhook.clone(), None, shared),
                );
            }
        }
        for name in &planned.delete_configmaps {
            snapshot.package_configmaps.remove(name);
            snapshot.metadata_configmaps.remove(name);
        }
        for skyhook in &mut snapshot.skyhooks {
            let finalizer = skyhook.group.keys().finalizer;
            let skyhook = Arc::make_mut(&mut skyhook.object);
            let name = skyhook.metadata.name.clone().unwrap_or_default();
            if let Some(status) = planned.statuses.get(&name) {
                skyhook.status = Some(status.clone());
            }
            if let Some(annotations) = planned.skyhook_annotations.get(&name) {
                let current = skyhook.metadata.annotations.get_or_insert_default();
                for (key, value) in annotations {
                    match value {
                        Some(value) => current.insert(key.clone(), value.clone()),
                        None => current.remove(key),
                    };
                }
            }
            match planned.finalizers.get(&name) {
                Some(true) => skyhook
                    .metadata
                    .finalizers
                    .get_or_insert_default()
                    .push(finalizer.to_owned()),
                Some(false) => skyhook
                    .metadata
                    .finalizers
                    .get_or_insert_default()
                    .retain(|f| f != finalizer),
                None => {}
            }
        }
        for twin in &mut snapshot.twins {
            let Some(write) = planned.twins.get(twin.name()) else {
                continue;
            };
            let finalizer = twin.group.keys().finalizer;
            let object = Arc::make_mut(&mut twin.object);
            if let Some(status) = &write.status {
                object.status = Some(status.clone());
            }
            if write.remove_finalizer {
                object
                    .metadata
                    .finalizers
                    .get_or_insert_default()
                    .retain(|f| f != finalizer);
            }
        }
        let deleted: BTreeSet<&str> = (planned.delete_leftovers.iter())
            .map(|leftover| leftover.name.as_str())
            .collect();
        snapshot.leftovers.retain(|leftover| {
            !deleted.contains(leftover.name.as_str())
                && !planned.move_configmaps.contains_key(&leftover.name)
        });
    }

    /// The pods of the controller, as (skyhook, package, version, stage), sorted.
    pub(super) fn pods(&self) -> Vec<PodKey> {
        let mut pods: Vec<PodKey> = self.snapshot.pods.iter().filter_map(key).collect();
        pods.sort();
        pods
    }

    /// Settles every running pod: `fail` decides which ones fail. Pre-pulls succeed.
    pub(super) fn settle(&mut self, fail: impl Fn(&PodPackageAnnotation) -> bool) {
        self.set_pre_pulls(&PullState::Pulled);
        for pod in &mut self.snapshot.pods {
            if pod.outcome != PodOutcome::Running {
                continue;
            }
            let Some(annotation) = &pod.annotation else {
                continue;
            };
            pod.outcome = if fail(annotation) {
                PodOutcome::Failed(PodFailure {
                    container: Some(format!("{}-{}", annotation.name, annotation.stage)),
                    exit_code: Some(2),
                    reason: "Error".into(),
                    message: None,
                    restarts: 2,
                    reboot_requested: None,
                })
            } else {
                PodOutcome::Succeeded {
                    container: "check".into(),
                    restarts: 0,
                }
            };
        }
    }

    /// Steps and settles every pod successfully until nothing is left to do; returns every pod
    /// created on the way, in creation order.
    pub(super) fn run(&mut self, max_steps: usize) -> Vec<PodKey> {
        let mut created = Vec::new();
        for _ in 0..max_steps {
            let planned = self.step();
            created.extend(
                planned
                    .created_pods()
                    .into_iter()
                    .map(|p| key(&owned(p)).expect("created pods are annotated")),
            );
            if planned.create_pods.is_empty()
                && planned.create_pre_pulls.is_empty()
                && planned.delete_pods.is_empty()
                && planned.nodes.is_empty()
                && planned.statuses.is_empty()
                && self.snapshot.pods.is_empty()
            {
                return created;
            }
            self.settle(|_| false);
        }
        created
    }

    /// Puts every pre-pull pod still pulling in `state`.
    pub(super) fn set_pre_pulls(&mut self, state: &PullState) {
        for run in &mut self.snapshot.pre_pulls {
            if run.state == PullState::Pulling {
                run.state = state.clone();
            }
        }
    }

    pub(super) fn node(&self, name: &str) -> &NodeView {
        self.snapshot
            .nodes
            .iter()
            .find(|n| n.name == name)
            .expect("the test names a known node")
    }

    /// The node state of `skyhook` on `node` as `(key, stage, state)` rows.
    pub(super) fn state(&self, skyhook: &str, node: &str) -> Vec<(String, Stage, State)> {
        self.node(node)
            .annotations
            .get(
                &self
                    .snapshot
                    .owners
                    .keys_of(skyhook)
                    .node_state_annotation(skyhook),
            )
            .map(|text| NodeState::parse(text).expect("the plan writes readable state"))
            .map(|state| {
                state
                    .iter()
                    .map(|(k, e)| (k.as_str().to_owned(), e.stage, e.state))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn node_status(&self, skyhook: &str, node: &str) -> Option<String> {
        self.node(node)
            .annotations
            .get(
                &self
                    .snapshot
                    .owners
                    .keys_of(skyhook)
                    .node_status_key(skyhook),
            )
            .map(str::to_owned)
    }

    pub(super) fn skyhook_status(&self, skyhook: &str) -> Option<Status> {
        self.skyhook(skyhook).status.as_ref().and_then(|s| s.status)
    }

    /// The condition `type_` of Skyhook `skyhook`'s status, while it is True.
    pub(super) fn true_condition(&self, skyhook: &str, type_: &str) -> Option<&Condition> {
        (self.skyhook(skyhook).status.as_ref())?
            .conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    }

    pub(super) fn skyhook(&self, name: &str) -> &Skyhook {
        self.snapshot
            .skyhooks
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name))
            .expect("the test names a known Skyhook")
    }

    pub(super) fn skyhook_mut(&mut self, name: &str) -> &mut Skyhook {
        self.snapshot
            .skyhooks
            .iter_mut()
            .map(|s| Arc::make_mut(&mut s.object))
            .find(|s| s.metadata.name.as_deref() == Some(name))
            .expect("the test names a known Skyhook")
    }
}

fn key(pod: &OwnedPod) -> Option<PodKey> {
    let a = pod.annotation.as_ref()?;
    Some((
        a.skyhook.clone(),
        a.name.clone(),
        a.version.clone(),
        a.stage,
    ))
}

/// A created pod as the cache would hold it, still running.
pub(super) fn owned(pod: Pod) -> OwnedPod {
    OwnedPod::new(std::sync::Arc::new(pod.into()), PodOutcome::Running)
        .expect("test pods are bound to a node")
}
