//! Publishing each live Skyhook's and NodeWright's metrics from a cache snapshot (the metrics
//! half of upstream's `ReportState`), and removing the series of objects that are gone.
//!
//! Contract: [`skyhook_metrics`] is pure: for every live object of the snapshot, of either
//! group (the snapshot's workloads: a NodeWright shadowed by a Skyhook of its name publishes
//! nothing), it counts the nodes its `nodeSelectors` select (an empty selector selects every
//! node; one that does not parse selects none) and names the strategy of each of its
//! compartments (its own group's policy's compartments plus `__default__`; a single Fixed
//! `__default__` without a policy; none while the policy is missing), reads its nodes' statuses
//! and node states from their annotations under its group's keys (or its status while that
//! mirrors them), then computes the series with [`crate::metrics::skyhook_series`].
//! [`MetricsReporter::report`] publishes them and deletes the series of objects that left the
//! snapshot or stopped being live.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use skyhook_api::budget::skyhook_compartments;
use skyhook_api::generation::Group;
use skyhook_api::keys::Keys;
use skyhook_api::node_state::NodeState;
use skyhook_api::v1alpha1::{DeploymentPolicySpec, Skyhook, StrategyKind};

use super::snapshot::{Snapshot, Workload};
use crate::cache::CachedNode;
use crate::metrics::{Metrics, NodeReadings, SkyhookSeries, skyhook_series};

/// The nodes `skyhook` targets.
fn targeted_nodes<'n>(
    skyhook: &Skyhook,
    nodes: &'n [Arc<CachedNode>],
) -> impl Iterator<Item = &'n Arc<CachedNode>> {
    let selector = skyhook.spec.target_selector();
    nodes
        .iter()
        .filter(move |node| selector.matches(&node.labels))
}

/// What `targeted`, the nodes `skyhook` targets, read under its group's `keys`: each one's
/// status from its `status_<name>` annotation, and its node state from its
/// `nodeState_<name>` annotation unless the status mirrors them (then borrowed from it). Past a
/// few thousand nodes the status no longer mirrors them ([`skyhook_api::node_mirror`],
/// `bound_node_state_mirror`), and the node and package counts must not fall to zero then.
fn node_readings<'a>(
    keys: &Keys,
    skyhook: &'a Skyhook,
    targeted: &[&Arc<CachedNode>],
) -> NodeReadings<'a> {
    let name = skyhook.metadata.name.as_deref().unwrap_or_default();
    let annotated = |key: String| {
        targeted
            .iter()
            .filter_map(move |node| node.annotations.get(&key))
    };
    let statuses = annotated(keys.node_status_key(name))
        .filter_map(|value| value.parse().ok())
        .collect();
    let mirror = skyhook
        .status
        .as_ref()
        .map(|status| &status.node_state)
        .filter(|states| !states.is_empty());
    let states = match mirror {
        Some(states) => states.values().map(Cow::Borrowed).collect(),
        None => annotated(keys.node_state_annotation(name))
            .filter_map(|value| Some(Cow::Owned(NodeState::parse(value).ok()?)))
            .collect(),
    };
    NodeReadings { statuses, states }
}

/// The strategy of each compartment of `skyhook`, whose policy (of its own group) is
/// `policy` if it names one that exists.
pub fn compartment_strategies(
    skyhook: &Skyhook,
    policy: Option<&DeploymentPolicySpec>,
    targets: usize,
) -> BTreeMap<String, StrategyKind> {
    let compartments = skyhook_compartments(&skyhook.spec, policy, targets);
    (compartments.iter().flatten())
        .map(|compartment| (compartment.name.clone(), compartment.strategy_kind()))
        .collect()
}

/// The series of every object of `workloads` (the snapshot's live objects of both groups), by
/// group and name; `policies` are the snapshot's, by group and name, and `nodes` the cache's.
pub fn skyhook_metrics(
    workloads: &[Workload],
    policies: &BTreeMap<(Group, String), DeploymentPolicySpec>,
    nodes: &[Arc<CachedNode>],
) -> BTreeMap<(Group, String), SkyhookSeries> {
    (workloads.iter())
        .filter_map(|workload| {
            let (group, skyhook) = (workload.group, &*workload.object);
            let name = skyhook.metadata.name.clone()?;
            let keys = group.keys();
            let targeted: Vec<_> = targeted_nodes(skyhook, nodes).collect();
            let policy =
                (skyhook.spec.policy_name()).and_then(|p| policies.get(&(group, p.to_owned())));
            let strategies = compartment_strategies(skyhook, policy, targeted.len());
            let nodes = node_readings(keys, skyhook, &targeted);
            let series = skyhook_series(keys, skyhook, &nodes, targeted.len(), &strategies);
            Some(((group, name), series))
        })
        .collect()
}

/// Publishes metrics and remembers which objects have series.
#[derive(Debug)]
pub struct MetricsReporter {
    metrics: Arc<Metrics>,
    published: BTreeSet<(Group, String)>,
}

impl MetricsReporter {
    /// A reporter into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        MetricsReporter {
            metrics,
            published: BTreeSet::new(),
        }
    }

    /// Publishes the series of every live object of `snapshot`, whose nodes the cache holds as
    /// `nodes`, and removes those of objects that are gone or no longer live.
    pub fn report(&mut self, snapshot: &Snapshot, nodes: &[Arc<CachedNode>]) {
        let series = skyhook_metrics(&snapshot.skyhooks, &snapshot.policies, nodes);
        let now: BTreeSet<(Group, String)> = series.keys().cloned().collect();
        for (group, gone) in self.published.difference(&now) {
            self.metrics.remove(*group, gone);
        }
        self.published = now;
        for ((group, name), series) in series {
            self.metrics.publish(group, &name, series);
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kube::api::ObjectMeta;
    use skyhook_api::keys;
    use skyhook_api::v1alpha1::{
        Compartment, DeploymentStrategy, ExponentialStrategy, PolicyBudget, PolicyDefault, Status,
    };

    use super::*;
    use crate::cache::CachedObjects;
    use crate::pods::tests::skyhook;

    /// The snapshot a reconcile builds from `cached`.
    fn snapshot_of(cached: &CachedObjects) -> Snapshot {
        let deadline = std::time::Duration::from_secs(600);
        Snapshot::build(
            cached,
            BTreeMap::new(),
            Vec::new(),
            jiff::Timestamp::UNIX_EPOCH,
            deadline,
        )
    }

    /// The series of `cached`'s live objects, as a reconcile reports them.
    fn metrics_of(cached: &CachedObjects) -> BTreeMap<(Group, String), SkyhookSeries> {
        let snapshot = snapshot_of(cached);
        skyhook_metrics(&snapshot.skyhooks, &snapshot.policies, &cached.nodes)
    }

    fn node(name: &str, labels: &[(&str, &str)]) -> Arc<CachedNode> {
        node_with(name, labels, None)
    }

    /// The node `name` with `labels` and `annotations`.
    fn node_with(
        name: &str,
        labels: &[(&str, &str)],
        annotations: Option<BTreeMap<String, String>>,
    ) -> Arc<CachedNode> {
        Arc::new(CachedNode::from(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).into(), (*v).into()))
                        .collect(),
                ),
                annotations,
                ..ObjectMeta::default()
            },
            ..Node::default()
        }))
    }

    fn selector(labels: &[(&str, &str)]) -> LabelSelector {
        LabelSelector {
            match_labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            match_expressions: None,
        }
    }

    /// The node `name` with `labels` and the one annotation `key: value`.
    fn annotated_node(
        name: &str,
        labels: &[(&str, &str)],
        key: &str,
        value: &str,
    ) -> Arc<CachedNode> {
        let annotations = BTreeMap::from([(key.to_owned(), value.to_owned())]);
        node_with(name, labels, Some(annotations))
    }

    #[test]
    fn node_status_counts_come_from_the_nodes_when_the_status_no_longer_mirrors_them() {
        let annotated = |name: &str, labels: &[(&str, &str)], status: &str| {
            annotated_node(name, labels, "skyhook.nvidia.com/status_s", status)
        };
        let target = [("skyhook.nvidia.com/test-node", "skyhooke2e")];
        let nodes = vec![
            annotated("a", &target, "complete"),
            annotated("b", &target, "in_progress"),
            annotated("c", &[], "complete"),
            node("d", &target),
        ];
        let mut sky = skyhook("s", vec![]);
        sky.spec.node_selectors = Some(selector(&target));
        let read = node_readings(
            &keys::SKYHOOK,
            &sky,
            &targeted_nodes(&sky, &nodes).collect::<Vec<_>>(),
        );
        assert_eq!(read.statuses, [Status::Complete, Status::InProgress]);
    }

    #[test]
    fn package_counts_come_from_the_nodes_when_the_status_no_longer_mirrors_them() {
        let state = r#"{"pkg|1.0.0":{"name":"pkg","version":"1.0.0","image":"img","stage":"apply","state":"in_progress"}}"#;
        let annotated = |name: &str, labels: &[(&str, &str)], value: &str| {
            annotated_node(name, labels, "skyhook.nvidia.com/nodeState_s", value)
        };
        let target = [("skyhook.nvidia.com/test-node", "skyhooke2e")];
        let nodes = vec![
            annotated("a", &target, state),
            annotated("b", &target, "{not json"),
            annotated("c", &[], state),
        ];
        let mut sky = skyhook("s", vec![]);
        sky.spec.node_selectors = Some(selector(&target));
        let parsed = NodeState::parse(state).unwrap();
        let read = node_readings(
            &keys::SKYHOOK,
            &sky,
            &targeted_nodes(&sky, &nodes).collect::<Vec<_>>(),
        );
        assert_eq!(
            read.states,
            [Cow::<NodeState>::Owned(parsed.clone())],
            "read from the targeted nodes when the mirror is empty, unreadable ones left out"
        );

        let mut mirrored = sky.clone();
        let mirror = BTreeMap::from([
            ("b".to_owned(), parsed.clone()),
            ("x".to_owned(), NodeState::default()),
        ]);
        mirrored.status.get_or_insert_default().node_state = mirror;
        let read = node_readings(
            &keys::SKYHOOK,
            &mirrored,
            &targeted_nodes(&mirrored, &nodes).collect::<Vec<_>>(),
        );
        assert!(
            matches!(read.states.as_slice(), [Cow::Borrowed(b), Cow::Borrowed(x)] if **b == parsed && **x == NodeState::default()),
            "a mirror is read in place, whatever the nodes say: {:?}",
            read.states
        );
    }

    #[test]
    fn targets_follow_node_selectors() {
        let nodes = vec![
            node("a", &[("skyhook.nvidia.com/test-node", "skyhooke2e")]),
            node("b", &[("skyhook.nvidia.com/test-node", "skyhooke2e")]),
            node("c", &[]),
        ];
        let mut sky = skyhook("s", vec![]);
        assert_eq!(
            targeted_nodes(&sky, &nodes).count(),
            3,
            "no selector selects every node"
        );
        sky.spec.node_selectors = Some(LabelSelector::default());
        assert_eq!(
            targeted_nodes(&sky, &nodes).count(),
            3,
            "an empty selector selects every node"
        );
        sky.spec.node_selectors = Some(selector(&[("skyhook.nvidia.com/test-node", "skyhooke2e")]));
        assert_eq!(targeted_nodes(&sky, &nodes).count(), 2);
        sky.spec.node_selectors = Some(selector(&[("bad key!", "x")]));
        assert_eq!(
            targeted_nodes(&sky, &nodes).count(),
            0,
            "a broken selector selects nothing"
        );
    }

    #[test]
    fn strategies() {
        let policy = DeploymentPolicySpec {
            default: PolicyDefault {
                budget: PolicyBudget {
                    percent: Some(50),
                    count: None,
                    topology: None,
                },
                strategy: DeploymentStrategy {
                    exponential: Some(ExponentialStrategy::default()),
                    ..DeploymentStrategy::default()
                },
            },
            compartments: vec![Compartment {
                name: "critical".into(),
                selector: selector(&[("tier", "critical")]),
                budget: PolicyBudget {
                    percent: None,
                    count: Some(1),
                    topology: None,
                },
                strategy: None,
            }],
            reset_batch_state_on_completion: true,
            maintenance_windows: vec![],
            health_gate: None,
        };
        let mut sky = skyhook("s", vec![]);
        assert_eq!(
            compartment_strategies(&sky, None, 3),
            BTreeMap::from([("__default__".into(), StrategyKind::Fixed)])
        );
        sky.spec.deployment_policy = Some("tiers".into());
        assert_eq!(
            compartment_strategies(&sky, Some(&policy), 3),
            BTreeMap::from([
                ("critical".into(), StrategyKind::Unknown),
                ("__default__".into(), StrategyKind::Exponential),
            ])
        );
        sky.spec.deployment_policy = Some("missing".into());
        assert!(compartment_strategies(&sky, None, 3).is_empty());
    }

    #[test]
    fn each_live_object_publishes_under_its_group_and_a_shadowed_twin_publishes_nothing() {
        let annotated = |name: &str, key: &str| annotated_node(name, &[], key, "complete");
        let nodes = vec![
            annotated("a", "nodewright.nvidia.com/status_gpu"),
            annotated("b", "skyhook.nvidia.com/status_gpu"),
            annotated("c", "nodewright.nvidia.com/status_net"),
        ];
        // The Skyhook net is mid-rollout: the NodeWright of its name waits for it.
        let mut busy_net = skyhook("net", vec![]);
        busy_net.status = Some(skyhook_api::v1alpha1::SkyhookStatus {
            status: Some(skyhook_api::v1alpha1::Status::InProgress),
            ..Default::default()
        });
        let snapshot = CachedObjects {
            skyhooks: vec![Arc::new(busy_net)],
            nodewrights: vec![
                Arc::new(skyhook("gpu", vec![])),
                Arc::new(skyhook("net", vec![])),
            ],
            nodes,
            ..CachedObjects::default()
        };
        let series = metrics_of(&snapshot);
        assert_eq!(
            series.keys().cloned().collect::<Vec<_>>(),
            [
                (Group::Skyhook, "net".to_owned()),
                (Group::NodeWright, "gpu".to_owned())
            ],
            "the NodeWright net waits for the busy Skyhook of its name"
        );
        let complete = |group: Group, name: &str| {
            let labels = crate::metrics::StatusLabels {
                status: "complete".into(),
            };
            (series[&(group, name.to_owned())].node_status.iter())
                .find(|(l, _)| *l == labels)
                .map(|(_, v)| *v)
        };
        assert_eq!(
            complete(Group::NodeWright, "gpu"),
            Some(1),
            "read under its own keys"
        );
        assert_eq!(complete(Group::Skyhook, "net"), Some(0));

        let metrics = Arc::new(Metrics::new(true));
        let mut reporter = MetricsReporter::new(metrics.clone());
        reporter.report(&snapshot_of(&snapshot), &snapshot.nodes);
        let text = metrics.encode().unwrap();
        assert!(
            text.contains("nodewright_node_target_count{nodewright_name=\"gpu\"} 3"),
            "{text}"
        );
        assert!(!text.contains("nodewright_name=\"net\""), "{text}");
        // The Skyhook goes: the NodeWright net is live from the next report on.
        let snapshot = CachedObjects {
            skyhooks: vec![],
            ..snapshot
        };
        reporter.report(&snapshot_of(&snapshot), &snapshot.nodes);
        let text = metrics.encode().unwrap();
        assert!(
            text.contains("nodewright_node_target_count{nodewright_name=\"net\"} 3"),
            "{text}"
        );
    }

    #[test]
    fn reporter_removes_deleted_skyhooks() {
        let metrics = Arc::new(Metrics::new(true));
        let mut reporter = MetricsReporter::new(metrics.clone());
        let snapshot = CachedObjects {
            skyhooks: vec![
                Arc::new(skyhook("kept", vec![])),
                Arc::new(skyhook("deleted", vec![])),
            ],
            nodes: vec![node("a", &[])],
            ..CachedObjects::default()
        };
        reporter.report(&snapshot_of(&snapshot), &snapshot.nodes);
        let text = metrics.encode().unwrap();
        assert!(
            text.contains("skyhook_node_target_count{skyhook_name=\"deleted\"} 1"),
            "{text}"
        );

        let snapshot = CachedObjects {
            skyhooks: vec![Arc::new(skyhook("kept", vec![]))],
            ..snapshot
        };
        reporter.report(&snapshot_of(&snapshot), &snapshot.nodes);
        let text = metrics.encode().unwrap();
        assert!(!text.contains("skyhook_name=\"deleted\""), "{text}");
        assert!(text.contains("skyhook_name=\"kept\""), "{text}");
    }
}
