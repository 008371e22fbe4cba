//! Draining a node before an interrupt (spec §2.7 "Drain rules"), the `podNonInterruptLabels`
//! gate, and the report of what blocks a drain that outlives its timeout.
//!
//! Contract: all functions are pure over the pods on one node (and the cluster's
//! PodDisruptionBudgets for the report). Evictions go through the Eviction API, so budgets are
//! honoured by the API server; these functions only decide which pods must leave and explain why
//! a drain is stuck.
//!
//! A pod must leave ([`must_evict`]) when it is Running or Pending and none of these hold:
//! * it tolerates the cordon (`node.kubernetes.io/unschedulable`, or a key-less `Exists`
//!   toleration), so it would come straight back;
//! * a DaemonSet owns it. Upstream exempted DaemonSet pods only when they had more than one owner
//!   (a slip); any DaemonSet owner exempts here, as in `kubectl drain`, since the DaemonSet
//!   controller would recreate the pod on the node anyway;
//! * it is in `kube-system`;
//! * it is a mirror pod (a static pod; the Eviction API cannot remove it);
//! * it is one of Skyhook's own pods (label `skyhook.nvidia.com/name`).
//!
//! A pod being deleted still counts until it is gone, but is not evicted again.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use skyhook_api::keys;
use skyhook_api::selector::{self, Selector, SelectorProblem};
use skyhook_api::toleration::UNSCHEDULABLE_TAINT_KEY;

/// Annotation the kubelet puts on the API mirror of a static pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// How many blocking pods a report names before summarising the rest.
pub const MAX_REPORTED_PODS: usize = 10;

/// What draining a node still requires.
#[derive(Debug, Default, PartialEq)]
pub struct Drain<'a> {
    /// Pods to evict now.
    pub evict: Vec<&'a Pod>,
    /// Pods already being deleted; the drain waits for them.
    pub terminating: Vec<&'a Pod>,
}

impl Drain<'_> {
    /// Whether nothing is left to remove from the node.
    pub fn is_complete(&self) -> bool {
        self.evict.is_empty() && self.terminating.is_empty()
    }
}

/// Sorts the pods on a node into those to evict and those already leaving.
pub fn drain(pods_on_node: &[Pod]) -> Drain<'_> {
    let mut drain = Drain::default();
    for pod in pods_on_node.iter().filter(|pod| must_evict(pod)) {
        if pod.metadata.deletion_timestamp.is_some() {
            drain.terminating.push(pod);
        } else {
            drain.evict.push(pod);
        }
    }
    drain
}

/// Whether `pod` must leave a node before it is interrupted. See the module documentation.
pub fn must_evict(pod: &Pod) -> bool {
    let active = matches!(phase(pod), Some("Running" | "Pending"));
    let tolerates_cordon = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.tolerations.as_ref())
        .is_some_and(|tolerations| {
            tolerations.iter().any(|toleration| {
                let key = toleration.key.as_deref().unwrap_or_default();
                key == UNSCHEDULABLE_TAINT_KEY
                    || (key.is_empty() && toleration.operator.as_deref() == Some("Exists"))
            })
        });
    let daemon_set = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.kind == "DaemonSet");
    let system = pod.metadata.namespace.as_deref() == Some("kube-system");
    let mirror = has_annotation(pod, MIRROR_POD_ANNOTATION);
    let ours = pod
        .metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(keys::NAME_LABEL));
    active && !tolerates_cordon && !daemon_set && !system && !mirror && !ours
}

/// The pods on a node that prevent interrupting it: Running or Pending pods matching the
/// Skyhook's `podNonInterruptLabels`. An absent or empty selector protects nothing. A selector
/// that does not parse is an error rather than "nothing", so that a typo never lets an interrupt
/// through.
pub fn interrupt_blockers<'a>(
    pod_non_interrupt_labels: Option<&LabelSelector>,
    pods_on_node: &'a [Pod],
) -> Result<Vec<&'a Pod>, Vec<SelectorProblem>> {
    let Some(labels) = pod_non_interrupt_labels.filter(|s| !selector::is_empty(s)) else {
        return Ok(Vec::new());
    };
    let selector = Selector::parse(labels)?;
    let empty = BTreeMap::new();
    Ok(pods_on_node
        .iter()
        .filter(|pod| matches!(phase(pod), Some("Running" | "Pending")))
        .filter(|pod| selector.matches(pod.metadata.labels.as_ref().unwrap_or(&empty)))
        .collect())
}

/// A pod a drain is waiting for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockingPod {
    /// `namespace/name`.
    pub pod: String,
    /// Whether it is already being deleted.
    pub terminating: bool,
    /// `namespace/name` of each PodDisruptionBudget selecting it that allows no disruption now.
    pub budgets: Vec<String>,
}

/// What keeps a node from draining.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainBlockers {
    /// The pods still on the node, sorted by `namespace/name`.
    pub pods: Vec<BlockingPod>,
}

impl DrainBlockers {
    /// A one-line summary for the Skyhook status and the node Event, naming at most
    /// [`MAX_REPORTED_PODS`] pods.
    pub fn message(&self, node: &str) -> String {
        let mut parts: Vec<String> = self
            .pods
            .iter()
            .take(MAX_REPORTED_PODS)
            .map(|blocker| {
                let mut why = Vec::new();
                if blocker.terminating {
                    why.push("terminating".to_owned());
                }
                for budget in &blocker.budgets {
                    why.push(format!("PodDisruptionBudget {budget} allows no disruption"));
                }
                if why.is_empty() {
                    blocker.pod.clone()
                } else {
                    format!("{} ({})", blocker.pod, why.join(", "))
                }
            })
            .collect();
        if self.pods.len() > MAX_REPORTED_PODS {
            parts.push(format!("and {} more", self.pods.len() - MAX_REPORTED_PODS));
        }
        format!(
            "drain of node {node} timed out; still waiting for {}",
            parts.join(", ")
        )
    }
}

/// Explains a stuck drain: every pod still to remove, and the PodDisruptionBudgets in its namespace
/// that select it and currently allow no disruption.
pub fn blockers(drain: &Drain<'_>, budgets: &[PodDisruptionBudget]) -> DrainBlockers {
    let empty = BTreeMap::new();
    let mut pods: Vec<BlockingPod> = drain
        .evict
        .iter()
        .map(|pod| (pod, false))
        .chain(drain.terminating.iter().map(|pod| (pod, true)))
        .map(|(pod, terminating)| {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
            let mut blocking_budgets: Vec<String> = budgets
                .iter()
                .filter(|budget| {
                    budget.metadata.namespace.as_deref().unwrap_or_default() == namespace
                })
                .filter(|budget| allows_no_disruption(budget))
                .filter(|budget| budget_selects(budget, labels))
                .map(|budget| {
                    format!(
                        "{namespace}/{}",
                        budget.metadata.name.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            blocking_budgets.sort();
            BlockingPod {
                pod: format!(
                    "{namespace}/{}",
                    pod.metadata.name.as_deref().unwrap_or_default()
                ),
                terminating,
                budgets: blocking_budgets,
            }
        })
        .collect();
    pods.sort_by(|a, b| a.pod.cmp(&b.pod));
    DrainBlockers { pods }
}

fn allows_no_disruption(budget: &PodDisruptionBudget) -> bool {
    budget
        .status
        .as_ref()
        .is_some_and(|status| status.disruptions_allowed == 0)
}

/// policy/v1 semantics: an absent selector selects nothing, an empty one every pod of the
/// namespace.
fn budget_selects(budget: &PodDisruptionBudget, labels: &BTreeMap<String, String>) -> bool {
    budget
        .spec
        .as_ref()
        .and_then(|spec| spec.selector.as_ref())
        .and_then(|selector| Selector::parse(selector).ok())
        .is_some_and(|selector| selector.matches(labels))
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()
        .and_then(|status| status.phase.as_deref())
}

fn has_annotation(pod: &Pod, key: &str) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(key))
}

#[cfg(test)]
mod tests;
