//! Which watch events wake the reconcile loop (pure).
//!
//! Every kubelet re-posts its node's status every five minutes (new condition heartbeat times,
//! nothing else), and other controllers touch fields the plan never reads. A reconcile over an
//! unchanged view of the cluster plans nothing new, so such events only refresh the cache: a
//! Node wakes the loop when what the plan reads of it ([`NodeView`]) changes; the controller's
//! own objects and the Skyhooks when their `resourceVersion` does (every change of theirs
//! matters to the plan), except a stage Job, which wakes it when what the plan reads of it
//! changes ([`job_changed`]): the Job controller rewrites its status for each pod it counts; and a
//! pod, which wakes it when what the pod rules read of it changes ([`pod_changed`]). A relist after a lost watch wakes the loop only when it found a change.

use kube::Resource;
use kube::runtime::watcher::Event;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::job::{CachedJob, JobCondition};
use super::{CachedNode, CachedPod};
use crate::node_view::NodeView;

/// Whether a Node changed in what the plan reads: labels, annotations, taints, unschedulable,
/// creation time, boot ID, readiness (and since when), the Skyhooks' node conditions (type,
/// status, reason, message), other parties' conditions (type, status, transition time) and allocatable CPU and memory. Not heartbeat times, the kubelet's
/// other conditions and reasons, images, addresses or the resource version (the next reconcile
/// reads the latest one anyway).
pub fn node_changed(old: &CachedNode, new: &CachedNode) -> bool {
    !same_plan_input(old.view(), new.view())
}

/// Every field of the views but the resource version; destructured, so that a field added to
/// [`NodeView`] cannot be left out unnoticed.
fn same_plan_input(old: &NodeView, new: &NodeView) -> bool {
    let NodeView {
        name,
        labels,
        annotations,
        taints,
        unschedulable,
        created,
        boot_id,
        ready,
        not_ready_since,
        ready_since,
        conditions,
        foreign_conditions,
        allocatable,
        resource_version: _,
    } = old;
    (
        name,
        labels,
        annotations,
        taints,
        unschedulable,
        created,
        boot_id,
    ) == (
        &new.name,
        &new.labels,
        &new.annotations,
        &new.taints,
        &new.unschedulable,
        &new.created,
        &new.boot_id,
    ) && (
        ready,
        not_ready_since,
        ready_since,
        conditions,
        foreign_conditions,
        allocatable,
    ) == (
        &new.ready,
        &new.not_ready_since,
        &new.ready_since,
        &new.conditions,
        &new.foreign_conditions,
        &new.allocatable,
    )
}

/// Whether a stage Job changed in what the plan reads: its identity, labels, annotations,
/// owners and deletion, `last-logs`, suspension, backoff limit, TTL, true conditions and failed
/// attempts. Not the Job controller's bookkeeping between them (`active`, `ready`,
/// `terminating`, `uncountedTerminatedPods`, `startTime`), which is most of its status writes:
/// about three per stage. The template is immutable, and a Job made again under its name has
/// another UID.
pub fn job_changed(old: &CachedJob, new: &CachedJob) -> bool {
    old.metadata.resource_version.is_none() || job_plan_input(old) != job_plan_input(new)
}

/// What [`job_changed`] compares.
#[allow(clippy::type_complexity)]
fn job_plan_input(
    job: &CachedJob,
) -> (
    (
        &Option<String>,
        &Option<BTreeMap<String, String>>,
        &Option<BTreeMap<String, String>>,
    ),
    (&Option<Vec<OwnerReference>>, &Option<Time>),
    (bool, bool, Option<i32>),
    (Option<i32>, &Vec<JobCondition>, i32),
) {
    let meta = &job.metadata;
    (
        (&meta.uid, &meta.labels, &meta.annotations),
        (&meta.owner_references, &meta.deletion_timestamp),
        (job.last_logs, job.suspend, job.backoff_limit),
        (job.ttl_seconds_after_finished, &job.conditions, job.failed),
    )
}

/// Whether one of the controller's pods changed in what the plan reads. [`CachedPod`] already
/// holds only what the pod rules read, so this is every cached field but the resource version,
/// the finalizers and the generation: the Job controller removes its tracking finalizer from
/// every attempt once it counted it (a write per attempt no rule reads), and the kubelet's status
/// reports change the pod's conditions, IP and main container, which are not cached.
pub fn pod_changed(old: &CachedPod, new: &CachedPod) -> bool {
    old.metadata.resource_version.is_none() || !same_pod_plan_input(old, new)
}

/// Every field of the pods but the bookkeeping [`pod_changed`] leaves out; destructured, so that
/// a field added to [`ObjectMeta`] or [`CachedPod`] cannot be left out unnoticed.
fn same_pod_plan_input(old: &CachedPod, new: &CachedPod) -> bool {
    let CachedPod {
        metadata,
        spec,
        status,
    } = old;
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers: _,
        generate_name,
        generation: _,
        labels,
        managed_fields: _,
        name,
        namespace,
        owner_references,
        resource_version: _,
        self_link: _,
        uid,
    } = metadata;
    let theirs = &new.metadata;
    (spec, status) == (&new.spec, &new.status)
        && (name, namespace, uid, generate_name)
            == (
                &theirs.name,
                &theirs.namespace,
                &theirs.uid,
                &theirs.generate_name,
            )
        && (labels, annotations, owner_references)
            == (
                &theirs.labels,
                &theirs.annotations,
                &theirs.owner_references,
            )
        && (
            creation_timestamp,
            deletion_timestamp,
            deletion_grace_period_seconds,
        ) == (
            &theirs.creation_timestamp,
            &theirs.deletion_timestamp,
            &theirs.deletion_grace_period_seconds,
        )
}

/// Whether an object the plan reads whole changed: its `resourceVersion` moved (or is unknown).
pub fn version_changed<K: Resource>(old: &K, new: &K) -> bool {
    let (old, new) = (old.meta(), new.meta());
    old.resource_version.is_none() || old.resource_version != new.resource_version
}

/// The wake-up decision for one watch stream, which remembers what a relist found so far.
#[derive(Debug)]
pub struct Trigger<K> {
    changed: fn(&K, &K) -> bool,
    relist: Relist,
}

/// What the relist in progress found.
#[derive(Debug, Default, Clone, Copy)]
struct Relist {
    seen: usize,
    changed: bool,
}

impl<K> Trigger<K> {
    /// A trigger comparing a cached object with its new version by `changed`.
    pub fn new(changed: fn(&K, &K) -> bool) -> Self {
        Self {
            changed,
            relist: Relist::default(),
        }
    }

    /// Whether `event` wakes the reconcile loop. `cached` is the event's object as the cache
    /// holds it before the event, `cached_count` how many objects the cache holds before it
    /// (read only at the end of a relist).
    pub fn wakes(
        &mut self,
        event: &Event<K>,
        cached: Option<&K>,
        cached_count: impl FnOnce() -> usize,
    ) -> bool {
        let changed = |new: &K| cached.is_none_or(|old| (self.changed)(old, new));
        match event {
            Event::Apply(new) => changed(new),
            Event::Delete(_) => true,
            Event::Init => {
                self.relist = Relist::default();
                false
            }
            Event::InitApply(new) => {
                let changed = changed(new);
                self.relist.seen += 1;
                self.relist.changed |= changed;
                false
            }
            Event::InitDone => {
                let relist = std::mem::take(&mut self.relist);
                // Same count and every listed object cached unchanged: nothing was deleted.
                relist.changed || relist.seen != cached_count()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;
    use k8s_openapi::api::core::v1::{
        ContainerImage, Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use kube::ResourceExt;
    use std::collections::BTreeMap;

    fn time(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn condition(type_: &str, status: &str, reason: &str, heartbeat: i64) -> NodeCondition {
        NodeCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(format!("{type_} is {status}")),
            last_heartbeat_time: Some(time(heartbeat)),
            last_transition_time: Some(time(1_000)),
        }
    }

    fn node() -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("node-1".to_owned()),
                resource_version: Some("10".to_owned()),
                creation_timestamp: Some(time(500)),
                labels: Some(BTreeMap::from([("tier".to_owned(), "gpu".to_owned())])),
                annotations: Some(BTreeMap::from([("a".to_owned(), "1".to_owned())])),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                conditions: Some(vec![
                    condition(
                        "MemoryPressure",
                        "False",
                        "KubeletHasSufficientMemory",
                        2_000,
                    ),
                    condition("Ready", "True", "KubeletReady", 2_000),
                    condition("skyhook.nvidia.com/gpu/NotReady", "False", "Ready", 2_000),
                ]),
                node_info: Some(NodeSystemInfo {
                    boot_id: "boot-1".to_owned(),
                    ..NodeSystemInfo::default()
                }),
                ..NodeStatus::default()
            }),
        }
    }

    fn edited(edit: fn(&mut Node)) -> Node {
        let mut node = node();
        node.metadata.resource_version = Some("11".to_owned());
        edit(&mut node);
        node
    }

    fn conditions(node: &mut Node) -> &mut Vec<NodeCondition> {
        node.status.as_mut().unwrap().conditions.as_mut().unwrap()
    }

    #[test]
    fn only_what_the_plan_reads_of_a_node_wakes_the_loop() {
        let cases: [(&str, Node, bool); 16] = [
            ("resource version only", edited(|_| {}), false),
            (
                "heartbeat times (a kubelet status report)",
                edited(|n| {
                    conditions(n)
                        .iter_mut()
                        .for_each(|c| c.last_heartbeat_time = Some(time(2_300)))
                }),
                false,
            ),
            (
                "images",
                edited(|n| {
                    n.status.as_mut().unwrap().images = Some(vec![ContainerImage::default()])
                }),
                false,
            ),
            (
                "managed fields",
                edited(|n| n.metadata.managed_fields = Some(Vec::new())),
                false,
            ),
            (
                "kernel version",
                edited(|n| {
                    n.status
                        .as_mut()
                        .unwrap()
                        .node_info
                        .as_mut()
                        .unwrap()
                        .kernel_version = "6.2".to_owned()
                }),
                false,
            ),
            (
                "label",
                edited(|n| {
                    n.labels_mut().insert("tier".to_owned(), "cpu".to_owned());
                }),
                true,
            ),
            (
                "annotation",
                edited(|n| {
                    n.annotations_mut().remove("a");
                }),
                true,
            ),
            (
                "taint",
                edited(|n| n.spec.as_mut().unwrap().taints = Some(vec![Taint::default()])),
                true,
            ),
            (
                "cordon",
                edited(|n| n.spec.as_mut().unwrap().unschedulable = Some(true)),
                true,
            ),
            (
                "Ready flips",
                edited(|n| {
                    conditions(n)[1] = condition("Ready", "False", "KubeletNotReady", 2_300)
                }),
                true,
            ),
            (
                "Ready reason",
                edited(|n| conditions(n)[1].reason = Some("Other".to_owned())),
                false,
            ),
            (
                "a kubelet condition's status",
                edited(|n| conditions(n)[0].status = "True".to_owned()),
                false,
            ),
            (
                "a Skyhook's node condition appears",
                edited(|n| {
                    conditions(n).push(condition(
                        "skyhook.nvidia.com/other/NotReady",
                        "True",
                        "NotReady",
                        2_300,
                    ))
                }),
                true,
            ),
            (
                "a Skyhook's node condition's message",
                edited(|n| {
                    conditions(n)[2].message = Some("other".to_owned());
                }),
                true,
            ),
            (
                "boot ID (a reboot)",
                edited(|n| {
                    n.status
                        .as_mut()
                        .unwrap()
                        .node_info
                        .as_mut()
                        .unwrap()
                        .boot_id = "boot-2".to_owned()
                }),
                true,
            ),
            (
                "recreated",
                edited(|n| n.metadata.creation_timestamp = Some(time(600))),
                true,
            ),
        ];
        for (case, new, expected) in cases {
            let (old, new) = (CachedNode::from(node()), CachedNode::from(new));
            assert_eq!(node_changed(&old, &new), expected, "{case}");
        }
    }

    #[test]
    fn events_wake_the_loop_on_a_change_only() {
        let old = CachedNode::from(node());
        let heartbeat = CachedNode::from(edited(|n| {
            conditions(n)[1].last_heartbeat_time = Some(time(2_300));
        }));
        let relabelled = CachedNode::from(edited(|n| {
            n.labels_mut().insert("x".to_owned(), "y".to_owned());
        }));
        let step =
            |trigger: &mut Trigger<CachedNode>,
             event: Event<CachedNode>,
             cached: Option<&CachedNode>| { trigger.wakes(&event, cached, || 1) };
        let mut trigger = Trigger::new(node_changed);
        let cases: Vec<(&str, Event<CachedNode>, Option<&CachedNode>, bool)> = vec![
            (
                "heartbeat",
                Event::Apply(heartbeat.clone()),
                Some(&old),
                false,
            ),
            ("label", Event::Apply(relabelled.clone()), Some(&old), true),
            ("new node", Event::Apply(old.clone()), None, true),
            ("deleted", Event::Delete(old.clone()), Some(&old), true),
            ("relist starts", Event::Init, None, false),
            (
                "relist: heartbeat",
                Event::InitApply(heartbeat.clone()),
                Some(&old),
                false,
            ),
            ("relist unchanged", Event::InitDone, None, false),
            ("relist starts", Event::Init, None, false),
            (
                "relist: label",
                Event::InitApply(relabelled),
                Some(&old),
                false,
            ),
            ("relist found a change", Event::InitDone, None, true),
            ("relist starts", Event::Init, None, false),
            (
                "relist found none of the one cached",
                Event::InitDone,
                None,
                true,
            ),
        ];
        for (case, event, cached, expected) in cases {
            assert_eq!(step(&mut trigger, event, cached), expected, "{case}");
        }
    }

    #[test]
    fn a_job_wakes_the_loop_on_what_the_plan_reads_only() {
        let job = || CachedJob {
            metadata: ObjectMeta {
                name: Some("gpu-driver-1.0.0-apply-node-1".into()),
                uid: Some("u1".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            ..CachedJob::default()
        };
        let edited = |edit: fn(&mut CachedJob)| {
            let mut new = job();
            new.metadata.resource_version = Some("8".into());
            edit(&mut new);
            new
        };
        let cases: [(&str, CachedJob, bool); 9] = [
            // The Job controller's bookkeeping (active, ready, uncounted pods) is not cached:
            // such a write moves the resource version only.
            ("a status write of counts only", edited(|_| {}), false),
            ("a failed attempt", edited(|job| job.failed = 1), true),
            (
                "a condition",
                edited(|job| {
                    job.conditions.push(JobCondition {
                        type_: "Complete".into(),
                        ..JobCondition::default()
                    });
                }),
                true,
            ),
            ("suspended", edited(|job| job.suspend = true), true),
            (
                "annotated recorded",
                edited(|job| {
                    job.metadata.annotations =
                        Some([("state-recorded".into(), "true".into())].into());
                }),
                true,
            ),
            (
                "a TTL",
                edited(|job| job.ttl_seconds_after_finished = Some(3600)),
                true,
            ),
            (
                "its backoff limit",
                edited(|job| job.backoff_limit = Some(0)),
                true,
            ),
            (
                "made again",
                edited(|job| job.metadata.uid = Some("u2".into())),
                true,
            ),
            (
                "being deleted",
                edited(|job| {
                    job.metadata.deletion_timestamp = Some(time(5));
                }),
                true,
            ),
        ];
        for (what, new, wakes) in cases {
            assert_eq!(job_changed(&job(), &new), wakes, "{what}");
        }
        let mut unknown = job();
        unknown.metadata.resource_version = None;
        assert!(job_changed(&unknown, &job()), "an unknown version");
    }

    #[test]
    fn a_pod_wakes_the_loop_on_what_the_pod_rules_read_only() {
        use k8s_openapi::api::core::v1::{
            ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition, PodSpec,
            PodStatus,
        };
        let pod = || Pod {
            metadata: ObjectMeta {
                name: Some("gpu-driver-1.0.0-apply-node-1-x7k2p".into()),
                uid: Some("u1".into()),
                resource_version: Some("7".into()),
                finalizers: Some(vec!["batch.kubernetes.io/job-tracking".into()]),
                labels: Some([("skyhook.nvidia.com/name".into(), "gpu".into())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-1".into()),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                ..PodStatus::default()
            }),
        };
        let edited = |edit: fn(&mut Pod)| {
            let mut new = pod();
            new.metadata.resource_version = Some("8".into());
            edit(&mut new);
            CachedPod::from(new)
        };
        fn set_true_condition(pod: &mut Pod, type_: &str) {
            pod.status.as_mut().unwrap().conditions = Some(vec![PodCondition {
                type_: type_.into(),
                status: "True".into(),
                ..PodCondition::default()
            }]);
        }
        let cases: [(&str, CachedPod, bool); 8] = [
            ("resource version only", edited(|_| {}), false),
            (
                "the Job controller removed its tracking finalizer",
                edited(|pod| pod.metadata.finalizers = None),
                false,
            ),
            (
                "the kubelet reported readiness",
                edited(|pod| set_true_condition(pod, "Ready")),
                false,
            ),
            (
                "the kubelet reported the pod's IP",
                edited(|pod| pod.status.as_mut().unwrap().pod_ip = Some("10.0.0.7".into())),
                false,
            ),
            (
                "an init container ended",
                edited(|pod| {
                    pod.status.as_mut().unwrap().init_container_statuses =
                        Some(vec![ContainerStatus {
                            name: "gpu-driver-apply".into(),
                            state: Some(ContainerState {
                                terminated: Some(ContainerStateTerminated {
                                    exit_code: 1,
                                    ..ContainerStateTerminated::default()
                                }),
                                ..ContainerState::default()
                            }),
                            ..ContainerStatus::default()
                        }])
                }),
                true,
            ),
            (
                "its phase",
                edited(|pod| pod.status.as_mut().unwrap().phase = Some("Failed".into())),
                true,
            ),
            (
                "a DisruptionTarget",
                edited(|pod| set_true_condition(pod, "DisruptionTarget")),
                true,
            ),
            (
                "being deleted",
                edited(|pod| pod.metadata.deletion_timestamp = Some(time(5))),
                true,
            ),
        ];
        let old = CachedPod::from(pod());
        for (what, new, wakes) in cases {
            assert_eq!(pod_changed(&old, &new), wakes, "{what}");
        }
        let mut relabelled = pod();
        relabelled
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("x".into(), "y".into());
        assert!(pod_changed(&old, &CachedPod::from(relabelled)), "a label");
        let mut unknown = old.clone();
        unknown.metadata.resource_version = None;
        assert!(pod_changed(&unknown, &old), "an unknown version");
    }

    #[test]
    fn other_objects_wake_on_a_new_resource_version() {
        let old = node();
        assert!(!version_changed(&old, &old));
        assert!(version_changed(&old, &edited(|_| {})));
        let unversioned = Node::default();
        assert!(version_changed(&unversioned, &unversioned));
    }
}
