//! A budget invariant check that runs alongside a rollout: never more nodes of a compartment
//! busy at once than the compartment's ceiling allows, nor nodes of more failure domains than
//! its topology allows.
//!
//! [`BudgetSampler`] watches Nodes and the controller's pods and checks the invariant after
//! every event, so it sees every state the API server went through, not a few polled
//! snapshots. A node is *busy* for a Skyhook when, on the Node, the Skyhook cordoned it
//! (`cordon_<skyhook>` with `spec.unschedulable`) or its status is `in_progress`; or, among the
//! pods, one of the Skyhook's package or interrupt pods is pending or running on it.
//!
//! The two watches are checked each on its own: one watch stream delivers its objects in the
//! order the API server wrote them, so each stream's state is one the cluster really was in,
//! whereas interleaving two streams could pair a new node's pod with an old node's pod whose
//! completion the other stream has not delivered yet, and report a violation that never was.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The label the controller puts on its package and interrupt pods: the Skyhook's name.
const SKYHOOK_NAME_LABEL: &str = "skyhook.nvidia.com/name";
/// Namespace of the controller's pods on a devcluster.
const CONTROLLER_NAMESPACE: &str = "skyhook";
/// Distinct violations kept for the failure message (the count is always complete).
const KEPT_VIOLATIONS: usize = 20;

/// One compartment of one Skyhook: its nodes and how many of them may be busy at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompartmentBudget {
    pub name: String,
    pub nodes: BTreeSet<String>,
    pub ceiling: usize,
    /// With a budget `topology`: each node's domain, and how many domains may be busy at once.
    pub domains: Option<(BTreeMap<String, String>, usize)>,
}

impl CompartmentBudget {
    pub fn new<'a>(name: &str, nodes: impl IntoIterator<Item = &'a str>, ceiling: usize) -> Self {
        CompartmentBudget {
            name: name.to_owned(),
            nodes: nodes.into_iter().map(str::to_owned).collect(),
            ceiling,
            domains: None,
        }
    }

    /// The same compartment, whose busy nodes may span at most `max_domains` of the domains
    /// `domain_of` gives (node name to the value of its topology label).
    pub fn with_domains(mut self, domain_of: BTreeMap<String, String>, max_domains: usize) -> Self {
        self.domains = Some((domain_of, max_domains));
        self
    }

    /// The distinct domains of `busy` nodes, when the compartment has domains.
    fn busy_domains(&self, busy: &BTreeSet<String>) -> Option<(BTreeSet<&str>, usize)> {
        let (domain_of, max) = self.domains.as_ref()?;
        let domains = busy
            .iter()
            .filter_map(|node| domain_of.get(node).map(String::as_str))
            .collect();
        Some((domains, *max))
    }
}

/// The compartments of one Skyhook, as the test expects them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkyhookBudget {
    pub skyhook: String,
    pub compartments: Vec<CompartmentBudget>,
}

/// Which watch saw the busy nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Cordon annotations and `status_<skyhook>` on the Nodes.
    Nodes,
    /// Pending or running package and interrupt pods.
    Pods,
}

/// More nodes of a compartment busy at once than its ceiling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub skyhook: String,
    pub compartment: String,
    pub ceiling: usize,
    pub busy: BTreeSet<String>,
    pub source: Source,
    /// For a domain violation, the busy domains (more than `ceiling` of them).
    pub domains: Option<BTreeSet<String>>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(domains) = &self.domains {
            return write!(
                f,
                "{}/{}: nodes of {} domains busy at once (at most {}) per the {:?} watch: {:?} on {:?}",
                self.skyhook,
                self.compartment,
                domains.len(),
                self.ceiling,
                self.source,
                self.busy,
                domains
            );
        }
        write!(
            f,
            "{}/{}: {} nodes busy at once (ceiling {}) per the {:?} watch: {:?}",
            self.skyhook,
            self.compartment,
            self.busy.len(),
            self.ceiling,
            self.source,
            self.busy
        )
    }
}

/// Whether `skyhook` cordoned `node`, has it `in_progress`, or has an interrupt in flight on it
/// (requested and not confirmed: the node may be rebooting or down after its reboot).
pub fn node_busy_for(node: &Node, skyhook: &str) -> bool {
    let annotation = |key: String| node.metadata.annotations.as_ref().and_then(|a| a.get(&key));
    cordoned_by(node, skyhook)
        || annotation(format!("skyhook.nvidia.com/status_{skyhook}"))
            .is_some_and(|status| status == "in_progress")
        || annotation(format!("skyhook.nvidia.com/nodeState_{skyhook}"))
            .is_some_and(|state| interrupt_in_flight(state))
}

/// Whether a node-state annotation value has an `interrupt` entry that is not complete.
fn interrupt_in_flight(state: &str) -> bool {
    serde_json::from_str::<BTreeMap<String, serde_json::Value>>(state).is_ok_and(|entries| {
        entries.values().any(|entry| {
            entry["stage"] == "interrupt"
                && matches!(
                    entry["state"].as_str(),
                    Some("in_progress" | "erroring" | "skipped")
                )
        })
    })
}

/// Whether `skyhook` holds `node` cordoned (`cordon_<skyhook>` on an unschedulable node).
pub fn cordoned_by(node: &Node, skyhook: &str) -> bool {
    let annotation = |key: &str| {
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    };
    let unschedulable = node
        .spec
        .as_ref()
        .and_then(|spec| spec.unschedulable)
        .unwrap_or(false);
    unschedulable && annotation(&format!("skyhook.nvidia.com/cordon_{skyhook}")) == Some("true")
}

/// The (Skyhook, node) a pod keeps busy: one of the controller's pods, bound to a node, not
/// finished and not being deleted.
pub fn pod_activity(pod: &Pod) -> Option<(String, String)> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return None;
    }
    let skyhook = pod.metadata.labels.as_ref()?.get(SKYHOOK_NAME_LABEL)?;
    let node = pod.spec.as_ref()?.node_name.as_ref()?;
    Some((skyhook.clone(), node.clone()))
}

/// The compartments of `budget` with more `busy` nodes than their ceiling.
pub fn over_ceiling(
    budget: &SkyhookBudget,
    busy: &BTreeSet<String>,
    source: Source,
) -> Vec<Violation> {
    budget
        .compartments
        .iter()
        .flat_map(|compartment| {
            let inside: BTreeSet<String> = compartment.nodes.intersection(busy).cloned().collect();
            let domains = compartment
                .busy_domains(&inside)
                .filter(|(domains, max)| domains.len() > *max)
                .map(|(domains, max)| Violation {
                    skyhook: budget.skyhook.clone(),
                    compartment: compartment.name.clone(),
                    ceiling: max,
                    busy: inside.clone(),
                    source,
                    domains: Some(domains.into_iter().map(str::to_owned).collect()),
                });
            let nodes = (inside.len() > compartment.ceiling).then(|| Violation {
                skyhook: budget.skyhook.clone(),
                compartment: compartment.name.clone(),
                ceiling: compartment.ceiling,
                busy: inside,
                source,
                domains: None,
            });
            nodes.into_iter().chain(domains)
        })
        .collect()
}

/// What the sampler saw over its whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetReport {
    /// Per (Skyhook, compartment), the most nodes busy at once.
    pub peaks: BTreeMap<(String, String), usize>,
    /// Watch events checked.
    pub events: usize,
    /// Per Skyhook, the nodes it was ever seen holding cordoned.
    pub cordoned: BTreeMap<String, BTreeSet<String>>,
    /// Watch errors (an API server restart, a stalled etcd) after which the watches listed
    /// again.
    pub watch_errors: usize,
}

impl BudgetReport {
    /// The nodes `skyhook` was ever seen holding cordoned.
    pub fn cordoned(&self, skyhook: &str) -> BTreeSet<String> {
        self.cordoned.get(skyhook).cloned().unwrap_or_default()
    }

    /// The most nodes of `compartment` of `skyhook` busy at once.
    pub fn peak(&self, skyhook: &str, compartment: &str) -> usize {
        self.peaks
            .get(&(skyhook.to_owned(), compartment.to_owned()))
            .copied()
            .unwrap_or(0)
    }
}

/// Checks each state of one watch stream against the budgets.
#[derive(Debug)]
struct Checker {
    budgets: Vec<SkyhookBudget>,
    report: BudgetReport,
    violations: Vec<Violation>,
    violation_count: usize,
}

impl Checker {
    fn new(budgets: Vec<SkyhookBudget>) -> Self {
        Checker {
            budgets,
            report: BudgetReport::default(),
            violations: Vec::new(),
            violation_count: 0,
        }
    }

    /// Checks one state: `busy` says which nodes are busy for a Skyhook.
    fn check(&mut self, source: Source, busy: impl Fn(&str) -> BTreeSet<String>) {
        self.report.events += 1;
        for budget in &self.budgets {
            let busy = busy(&budget.skyhook);
            for compartment in &budget.compartments {
                let count = compartment.nodes.intersection(&busy).count();
                let peak = self
                    .report
                    .peaks
                    .entry((budget.skyhook.clone(), compartment.name.clone()))
                    .or_default();
                *peak = (*peak).max(count);
            }
            for violation in over_ceiling(budget, &busy, source) {
                self.violation_count += 1;
                // Every later event repeats a lasting violation; keep each distinct one once.
                if self.violations.len() < KEPT_VIOLATIONS && !self.violations.contains(&violation)
                {
                    self.violations.push(violation);
                }
            }
        }
    }

    /// Checks the Nodes' state, and records which nodes each Skyhook holds cordoned.
    fn check_nodes(&mut self, nodes: &BTreeMap<String, Node>) {
        for budget in &self.budgets {
            let held = nodes
                .iter()
                .filter(|(_, node)| cordoned_by(node, &budget.skyhook))
                .map(|(name, _)| name.clone());
            self.report
                .cordoned
                .entry(budget.skyhook.clone())
                .or_default()
                .extend(held);
        }
        self.check(Source::Nodes, |skyhook| {
            nodes
                .iter()
                .filter(|(_, node)| node_busy_for(node, skyhook))
                .map(|(name, _)| name.clone())
                .collect()
        });
    }

    /// Checks the controller's pods' state.
    fn check_pods(&mut self, pods: &BTreeMap<String, Pod>) {
        self.check(Source::Pods, |skyhook| {
            pods.values()
                .filter_map(pod_activity)
                .filter(|(owner, _)| owner == skyhook)
                .map(|(_, node)| node)
                .collect()
        });
    }
}

/// A stream's objects by name, rebuilt on every (re)list.
#[derive(Debug)]
struct Store<K> {
    objects: BTreeMap<String, K>,
    relisting: Option<BTreeMap<String, K>>,
}

impl<K: kube::Resource> Store<K> {
    fn new() -> Self {
        Store {
            objects: BTreeMap::new(),
            relisting: None,
        }
    }

    /// Applies one event; true when the store holds a complete state to check.
    fn apply(&mut self, event: Event<K>) -> bool {
        let name = |object: &K| object.meta().name.clone().unwrap_or_default();
        match event {
            Event::Init => {
                self.relisting = Some(BTreeMap::new());
                false
            }
            Event::InitApply(object) => {
                if let Some(relisting) = &mut self.relisting {
                    relisting.insert(name(&object), object);
                }
                false
            }
            Event::InitDone => {
                if let Some(listed) = self.relisting.take() {
                    self.objects = listed;
                }
                true
            }
            Event::Apply(object) => {
                self.objects.insert(name(&object), object);
                true
            }
            Event::Delete(object) => {
                self.objects.remove(&name(&object));
                true
            }
        }
    }
}

/// A running budget check; [`BudgetSampler::finish`] stops it and gives the verdict.
#[derive(Debug)]
pub struct BudgetSampler {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<anyhow::Result<Checker>>,
}

impl BudgetSampler {
    /// Starts watching; returns once both watches have listed, so nothing that happens after
    /// this call is missed.
    pub async fn start(client: &kube::Client, budgets: Vec<SkyhookBudget>) -> anyhow::Result<Self> {
        let (stop, stopped) = oneshot::channel();
        let (listed, listed_rx) = oneshot::channel();
        let nodes: Api<Node> = Api::all(client.clone());
        let pods: Api<Pod> = Api::namespaced(client.clone(), CONTROLLER_NAMESPACE);
        let task = tokio::spawn(sample(nodes, pods, budgets, listed, stopped));
        match listed_rx.await {
            Ok(()) => Ok(BudgetSampler {
                stop: Some(stop),
                task,
            }),
            Err(_) => match task.await {
                Ok(Err(error)) => Err(error.context("starting the budget sampler")),
                _ => bail!("the budget sampler stopped before its first listing"),
            },
        }
    }

    /// Stops watching; fails with every violation seen, or returns what was seen.
    pub async fn finish(mut self) -> anyhow::Result<BudgetReport> {
        if let Some(stop) = self.stop.take() {
            let _unheard = stop.send(());
        }
        let checker = self
            .task
            .await
            .context("the budget sampler task panicked")??;
        if checker.violation_count > 0 {
            let listed: Vec<String> = checker.violations.iter().map(ToString::to_string).collect();
            bail!(
                "the budget was exceeded in {} checked states; the first distinct ones:\n{}",
                checker.violation_count,
                listed.join("\n")
            );
        }
        Ok(checker.report)
    }
}

async fn sample(
    nodes: Api<Node>,
    pods: Api<Pod>,
    budgets: Vec<SkyhookBudget>,
    listed: oneshot::Sender<()>,
    mut stopped: oneshot::Receiver<()>,
) -> anyhow::Result<Checker> {
    let mut events = node_and_pod_events(nodes, pods);
    let mut checker = Checker::new(budgets);
    let mut node_store = Store::<Node>::new();
    let mut pod_store = Store::<Pod>::new();
    let (mut nodes_listed, mut pods_listed) = (false, false);
    let mut listed = Some(listed);
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            _ = &mut stopped => return Ok(checker),
        };
        let event = match event.context("the Node and Pod watches ended")? {
            Ok(event) => event,
            Err(_) if listed.is_none() => {
                checker.report.watch_errors += 1;
                continue;
            }
            Err(error) => return Err(error).context("watching Nodes and the controller's pods"),
        };
        match event {
            Either::Node(event) => {
                if node_store.apply(*event) {
                    nodes_listed = true;
                    checker.check_nodes(&node_store.objects);
                }
            }
            Either::Pod(event) => {
                if pod_store.apply(*event) {
                    pods_listed = true;
                    checker.check_pods(&pod_store.objects);
                }
            }
        }
        if nodes_listed
            && pods_listed
            && let Some(listed) = listed.take()
        {
            let _unheard = listed.send(());
        }
    }
}

/// The events of both watches, Nodes and the controller's pods, merged.
fn node_and_pod_events(
    nodes: Api<Node>,
    pods: Api<Pod>,
) -> impl futures::Stream<Item = Result<Either, watcher::Error>> {
    let selector = watcher::Config::default().labels(SKYHOOK_NAME_LABEL);
    // Watches back off and list again after an error, so the check survives API server
    // restarts and etcd stalls; each re-list replaces the stores wholesale.
    let node_events = watcher::watcher(nodes, watcher::Config::default())
        .default_backoff()
        .map_ok(|event| Either::Node(Box::new(event)))
        .boxed();
    let pod_events = watcher::watcher(pods, selector)
        .default_backoff()
        .map_ok(|event| Either::Pod(Box::new(event)))
        .boxed();
    futures::stream::select(node_events, pod_events)
}

/// An event of either watch (boxed: a Pod is much larger than a Node).
enum Either {
    Node(Box<Event<Node>>),
    Pod(Box<Event<Pod>>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(annotations: serde_json::Value, unschedulable: bool) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "annotations": annotations},
            "spec": {"unschedulable": unschedulable}
        }))
        .unwrap()
    }

    #[test]
    fn a_node_is_busy_when_cordoned_by_the_skyhook_or_in_progress() {
        let cases = [
            (json!({}), false, false),
            (json!({"skyhook.nvidia.com/cordon_a": "true"}), true, true),
            // An annotation left behind on a schedulable node is not a cordon.
            (json!({"skyhook.nvidia.com/cordon_a": "true"}), false, false),
            // Cordoned by another Skyhook (or by hand).
            (json!({"skyhook.nvidia.com/cordon_b": "true"}), true, false),
            (json!({}), true, false),
            (
                json!({"skyhook.nvidia.com/status_a": "in_progress"}),
                false,
                true,
            ),
            (
                json!({"skyhook.nvidia.com/status_a": "complete"}),
                false,
                false,
            ),
            (
                json!({"skyhook.nvidia.com/status_b": "in_progress"}),
                false,
                false,
            ),
        ];
        for (annotations, unschedulable, busy) in cases {
            assert_eq!(
                node_busy_for(&node(annotations.clone(), unschedulable), "a"),
                busy,
                "{annotations} unschedulable={unschedulable}"
            );
        }
    }

    #[test]
    fn only_unfinished_bound_skyhook_pods_keep_a_node_busy() {
        let pod = |labels: serde_json::Value, node: Option<&str>, phase: &str, deleting: bool| {
            let mut metadata = json!({"name": "p", "labels": labels});
            if deleting {
                metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            serde_json::from_value::<Pod>(json!({
                "metadata": metadata,
                "spec": {"nodeName": node, "containers": []},
                "status": {"phase": phase}
            }))
            .unwrap()
        };
        let owned = json!({SKYHOOK_NAME_LABEL: "a"});
        let busy = Some(("a".to_owned(), "n1".to_owned()));
        let cases = [
            (
                pod(owned.clone(), Some("n1"), "Running", false),
                busy.clone(),
            ),
            (pod(owned.clone(), Some("n1"), "Pending", false), busy),
            (pod(owned.clone(), Some("n1"), "Succeeded", false), None),
            (pod(owned.clone(), Some("n1"), "Failed", false), None),
            (pod(owned.clone(), Some("n1"), "Running", true), None),
            (pod(owned, None, "Pending", false), None),
            (pod(json!({"app": "x"}), Some("n1"), "Running", false), None),
        ];
        for (index, (pod, expected)) in cases.into_iter().enumerate() {
            assert_eq!(pod_activity(&pod), expected, "case {index}");
        }
    }

    #[test]
    fn compartments_over_their_ceiling_are_reported() {
        let budget = SkyhookBudget {
            skyhook: "a".to_owned(),
            compartments: vec![
                CompartmentBudget::new("two", ["n1", "n2", "n3"], 2),
                CompartmentBudget::new("one", ["n4", "n5"], 1),
            ],
        };
        let set = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
        let cases: [(&[&str], &[&str]); 5] = [
            (&[], &[]),
            (&["n1", "n2", "n4"], &[]),
            (&["n1", "n2", "n3"], &["two"]),
            (&["n4", "n5", "n9"], &["one"]),
            (&["n1", "n2", "n3", "n4", "n5"], &["two", "one"]),
        ];
        for (busy, expected) in cases {
            let found: Vec<String> = over_ceiling(&budget, &set(busy), Source::Nodes)
                .into_iter()
                .map(|v| v.compartment)
                .collect();
            assert_eq!(found, expected, "busy {busy:?}");
        }
    }

    #[test]
    fn a_relist_replaces_the_state_only_when_it_is_complete() {
        let named = |name: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
        };
        let mut store = Store::<Node>::new();
        assert!(store.apply(Event::Apply(named("old"))));
        assert!(!store.apply(Event::Init));
        assert!(!store.apply(Event::InitApply(named("new"))));
        assert_eq!(store.objects.keys().collect::<Vec<_>>(), ["old"]);
        assert!(store.apply(Event::InitDone));
        assert_eq!(store.objects.keys().collect::<Vec<_>>(), ["new"]);
        assert!(store.apply(Event::Delete(named("new"))));
        assert!(store.objects.is_empty());
    }
}
