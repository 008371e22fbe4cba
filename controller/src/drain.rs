//! Draining a node before an interrupt (upstream v0.20's drain, §2.6), the
//! `podNonInterruptLabels` gate, and the report of what blocks a drain.
//!
//! Contract: all functions are pure over the pods on one node (and the cluster's
//! PodDisruptionBudgets for the report). The settings come from
//! [`skyhook_api::drain::effective_drain`]; these functions only decide which pods must leave,
//! how, and explain why a drain is stuck.
//!
//! [`disposition`] follows upstream's order, first match wins:
//! 1. phase not Running or Pending: stays;
//! 2. one of Skyhook's own pods (labels `name` and `package`, in the controller's namespace
//!    when known): stays;
//! 3. it tolerates the cordon (`node.kubernetes.io/unschedulable:NoSchedule`, by the
//!    Kubernetes toleration rules): stays, it would come straight back;
//! 4. its controller is a DaemonSet and `ignoreDaemonSets` (default): stays. With
//!    `drainConfig.ignoreDaemonSets: false` it is removed like any pod; with the deprecated
//!    `spec.drain.ignoreDaemonSets: false` it blocks the drain, as before;
//! 5. namespace `kube-system`: stays; 6. a mirror (static) pod: stays; (ours) it matches
//!    `podSelector`: stays;
//! 7. being deleted: the drain waits until it is gone;
//! 8. no controller owns it and `force: false`: it blocks (`UnmanagedPod`);
//! 9. it has an `emptyDir` volume and `deleteEmptyDirData: false`: it blocks (`EmptyDirData`);
//! 10. it is deleted (`disableEviction`) or evicted.

pub mod refusals;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use skyhook_api::drain::{DaemonSetPods, EffectiveDrain};
use skyhook_api::generation::group_of_labels;
use skyhook_api::selector::{self, Selector, SelectorProblem};
use skyhook_api::toleration::{UNSCHEDULABLE_TAINT_KEY, tolerates};

/// Annotation the kubelet puts on the API mirror of a static pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// How many blocking pods a report names before summarising the rest.
pub const MAX_REPORTED_PODS: usize = 10;

/// How one Skyhook's effective drain settings sort the pods on a node. The default is
/// upstream's drain.
#[derive(Debug, Clone)]
pub struct DrainRules {
    /// What happens to DaemonSet pods.
    pub daemon_sets: DaemonSetPods,
    /// Pods no controller owns are removed (`force`).
    pub evict_unowned: bool,
    /// Pods with `emptyDir` volumes are removed (`deleteEmptyDirData`).
    pub evict_empty_dir: bool,
    /// Pods matching this stay and do not block (`podSelector`).
    pub skip: Option<Selector>,
    /// The controller's namespace: Skyhook's own pods are recognised there only. `None`: in
    /// any namespace.
    pub own_namespace: Option<String>,
}

impl Default for DrainRules {
    fn default() -> Self {
        DrainRules {
            daemon_sets: DaemonSetPods::Ignore,
            evict_unowned: true,
            evict_empty_dir: true,
            skip: None,
            own_namespace: None,
        }
    }
}

impl DrainRules {
    /// The rules of the effective drain settings. An absent or empty `podSelector` skips no
    /// pod; one that does not parse is an error rather than "nothing", so that a typo never
    /// evicts a pod the selector meant to keep.
    pub fn of(
        effective: &EffectiveDrain,
        own_namespace: Option<&str>,
    ) -> Result<DrainRules, Vec<SelectorProblem>> {
        let skip = match effective
            .pod_selector
            .as_ref()
            .filter(|s| !selector::is_empty(s))
        {
            Some(labels) => Some(Selector::parse(labels)?),
            None => None,
        };
        Ok(DrainRules {
            daemon_sets: effective.daemon_sets,
            evict_unowned: effective.force,
            evict_empty_dir: effective.delete_empty_dir_data,
            skip,
            own_namespace: own_namespace.map(str::to_owned),
        })
    }
}

/// Why a pod that must leave is not evicted: `spec.drain` forbids it, so it blocks the drain
/// until it is gone or the rule changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// A DaemonSet owns it and `ignoreDaemonSets` is false.
    DaemonSet,
    /// No controller owns it and `force` is false.
    Unowned,
    /// It has an `emptyDir` volume and `deleteEmptyDirData` is false.
    EmptyDir,
}

impl Held {
    /// Why the pod stays, and the setting that would let the drain evict it.
    pub fn explain(self) -> &'static str {
        match self {
            Held::DaemonSet => {
                "owned by a DaemonSet; set ignoreDaemonSets: true to leave it in place"
            }
            Held::Unowned => {
                "owned by no controller; set drainConfig.force: true to evict it or delete it yourself"
            }
            Held::EmptyDir => {
                "uses emptyDir data; set drainConfig.deleteEmptyDirData: true to evict it"
            }
        }
    }
}

/// What a drain does with one pod on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// It stays and does not block the drain.
    Stays,
    /// It is evicted.
    Evict,
    /// It is already being deleted; the drain waits for it.
    Leaving,
    /// It must leave but may not be evicted; it blocks the drain.
    Held(Held),
}

/// What draining a node still requires.
#[derive(Debug, Default, PartialEq)]
pub struct Drain<'a> {
    /// Pods to evict now.
    pub evict: Vec<&'a Pod>,
    /// Pods already being deleted; the drain waits for them.
    pub terminating: Vec<&'a Pod>,
    /// Pods `spec.drain` forbids evicting, which keep the drain from completing.
    pub held: Vec<(&'a Pod, Held)>,
}

impl Drain<'_> {
    /// Whether nothing is left to remove from the node.
    pub fn is_complete(&self) -> bool {
        self.evict.is_empty() && self.terminating.is_empty() && self.held.is_empty()
    }
}

/// Sorts the pods on a node into those to evict, those already leaving and those held.
pub fn drain<'a>(pods_on_node: &'a [Pod], rules: &DrainRules) -> Drain<'a> {
    let mut drain = Drain::default();
    for pod in pods_on_node {
        match disposition(pod, rules) {
            Disposition::Stays => {}
            Disposition::Evict => drain.evict.push(pod),
            Disposition::Leaving => drain.terminating.push(pod),
            Disposition::Held(why) => drain.held.push((pod, why)),
        }
    }
    drain
}

/// What a drain under `rules` does with `pod`. See the module documentation for the order.
pub fn disposition(pod: &Pod, rules: &DrainRules) -> Disposition {
    if !matches!(phase(pod), Some("Running" | "Pending")) {
        return Disposition::Stays;
    }
    let empty = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let keys = group_of_labels(Some(labels)).keys();
    let ours = labels.contains_key(keys.name_label)
        && labels.contains_key(keys.package_label)
        && rules
            .own_namespace
            .as_deref()
            .is_none_or(|own| own == namespace);
    if ours || tolerates_cordon(pod) {
        return Disposition::Stays;
    }
    let owners = pod.metadata.owner_references.as_deref().unwrap_or_default();
    let controller = owners.iter().find(|owner| owner.controller == Some(true));
    let daemon_set = controller.is_some_and(|owner| owner.kind == "DaemonSet");
    let mut held = None;
    if daemon_set {
        match rules.daemon_sets {
            DaemonSetPods::Ignore => return Disposition::Stays,
            DaemonSetPods::Block => held = Some(Held::DaemonSet),
            DaemonSetPods::Remove => {}
        }
    }
    let mirror = has_annotation(pod, MIRROR_POD_ANNOTATION);
    let skipped = rules.skip.as_ref().is_some_and(|s| s.matches(labels));
    if namespace == "kube-system" || mirror || skipped {
        return Disposition::Stays;
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return Disposition::Leaving;
    }
    if held.is_none() && !rules.evict_unowned && controller.is_none() {
        held = Some(Held::Unowned);
    }
    if held.is_none() && !rules.evict_empty_dir && has_empty_dir(pod) {
        held = Some(Held::EmptyDir);
    }
    held.map_or(Disposition::Evict, Disposition::Held)
}

/// Whether the pod tolerates the cordon's `node.kubernetes.io/unschedulable:NoSchedule` taint
/// by the Kubernetes rules.
fn tolerates_cordon(pod: &Pod) -> bool {
    let taint = Taint {
        key: UNSCHEDULABLE_TAINT_KEY.to_owned(),
        effect: "NoSchedule".to_owned(),
        ..Taint::default()
    };
    pod.spec
        .as_ref()
        .and_then(|spec| spec.tolerations.as_ref())
        .is_some_and(|tolerations| tolerations.iter().any(|t| tolerates(t, &taint)))
}

fn has_empty_dir(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.volumes.as_ref())
        .is_some_and(|volumes| volumes.iter().any(|v| v.empty_dir.is_some()))
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
    /// Why `spec.drain` keeps it from being evicted, if it does.
    pub held: Option<Held>,
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
                if let Some(held) = blocker.held {
                    why.push(held.explain().to_owned());
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
    let mut pods: Vec<BlockingPod> = drain
        .evict
        .iter()
        .map(|pod| (*pod, false, None))
        .chain(drain.terminating.iter().map(|pod| (*pod, true, None)))
        .chain(
            drain
                .held
                .iter()
                .map(|(pod, why)| (*pod, false, Some(*why))),
        )
        .map(|(pod, terminating, held)| BlockingPod {
            pod: qualified(
                pod.metadata.namespace.as_deref(),
                pod.metadata.name.as_deref(),
            ),
            terminating,
            held,
            budgets: blocking_budgets(pod, budgets),
        })
        .collect();
    pods.sort_by(|a, b| a.pod.cmp(&b.pod));
    DrainBlockers { pods }
}

/// The PodDisruptionBudgets in `pod`'s namespace that select it and allow no disruption now, as
/// sorted `namespace/name`s.
fn blocking_budgets(pod: &Pod, budgets: &[PodDisruptionBudget]) -> Vec<String> {
    let empty = BTreeMap::new();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    let mut names: Vec<String> = budgets
        .iter()
        .filter(|budget| budget.metadata.namespace.as_deref().unwrap_or_default() == namespace)
        .filter(|budget| allows_no_disruption(budget))
        .filter(|budget| budget_selects(budget, labels))
        .map(|budget| qualified(Some(namespace), budget.metadata.name.as_deref()))
        .collect();
    names.sort();
    names
}

fn qualified(namespace: Option<&str>, name: Option<&str>) -> String {
    format!(
        "{}/{}",
        namespace.unwrap_or_default(),
        name.unwrap_or_default()
    )
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
