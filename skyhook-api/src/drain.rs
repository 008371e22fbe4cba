//! The effective drain settings of a Skyhook: one function turns `spec.drainConfig` (upstream
//! v0.18's field, the current one) or `spec.drain` (ours, deprecated) into the settings the
//! controller drains by, so that the two spellings cannot drift apart.
//!
//! Contract: [`effective_drain`] is pure. The webhook refuses a Skyhook that sets both fields;
//! when one arrives anyway (webhook bypassed), `drainConfig` wins.
//!
//! The two fields differ on purpose where upstream and our earlier field disagreed:
//!
//! | setting | `drainConfig` (upstream) | `drain` (deprecated, ours) | neither |
//! |---|---|---|---|
//! | timeout | `timeout`; unset or `0`: none | `timeout`, else `DRAIN_TIMEOUT` | `DRAIN_TIMEOUT` |
//! | past the timeout | node `erroring`, stays cordoned (`onTimeout` overrides) | keep waiting and report (`onTimeout: fail` gives up) | keep waiting and report |
//! | DaemonSet pods with `ignoreDaemonSets: false` | evicted | block the drain | – |
//! | delete instead of evict | `disableEviction` | never | never |
//! | grace period | `gracePeriod` (duration, rounded up to seconds) | `gracePeriodSeconds` | the pod's own |

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

use crate::duration;
use crate::keys::{
    DRAIN_BLOCKED_EMPTY_DIR_REASON, DRAIN_BLOCKED_MULTIPLE_REASON, DRAIN_BLOCKED_PDB_REASON,
    DRAIN_BLOCKED_UNMANAGED_REASON,
};
use crate::v1alpha1::{DrainConfig, DrainSpec, DrainTimeoutAction, SkyhookSpec};

/// Which field the effective settings come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainSource {
    /// `spec.drainConfig`.
    DrainConfig,
    /// `spec.drain` (deprecated).
    Drain,
    /// Neither is set.
    Default,
}

/// What a drain past its timeout does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDrainTimeout {
    /// Keep draining and report what blocks it.
    KeepWaiting,
    /// Upstream: the node's interrupting package turns `erroring`, the node stays cordoned
    /// and no further pod is removed.
    Erroring,
    /// The package turns `erroring` and the node is uncordoned, giving back its budget slot.
    ErroringAndUncordon,
}

/// What a drain does with DaemonSet pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonSetPods {
    /// Left on the node (`ignoreDaemonSets: true`, the default).
    Ignore,
    /// Removed like any other pod (upstream `drainConfig.ignoreDaemonSets: false`).
    Remove,
    /// They block the drain (`spec.drain.ignoreDaemonSets: false`, as `kubectl drain` without
    /// `--ignore-daemonsets` refuses).
    Block,
}

/// The settings a drain runs by.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveDrain {
    /// Where they come from.
    pub source: DrainSource,
    /// Delete pods instead of evicting them (bypasses PodDisruptionBudgets).
    pub disable_eviction: bool,
    /// Pods with `emptyDir` volumes are removed; otherwise they block.
    pub delete_empty_dir_data: bool,
    /// Pods no controller owns are removed; otherwise they block.
    pub force: bool,
    /// What happens to DaemonSet pods.
    pub daemon_sets: DaemonSetPods,
    /// How long the drain may take; `None`: no bound.
    pub timeout: Option<Duration>,
    /// What a drain past `timeout` does.
    pub on_timeout: OnDrainTimeout,
    /// Grace period for each removed pod, whole seconds; `None`: each pod's own.
    pub grace_period_seconds: Option<i64>,
    /// Pods matching it stay and do not block (ours).
    pub pod_selector: Option<LabelSelector>,
}

/// The effective drain settings of `spec`. `default_timeout` is the controller's
/// `DRAIN_TIMEOUT`, used by the deprecated `spec.drain` and when neither field is set. A
/// duration that does not parse (the webhook refuses it) counts as unset.
pub fn effective_drain(spec: &SkyhookSpec, default_timeout: Duration) -> EffectiveDrain {
    match (&spec.drain_config, &spec.drain) {
        (Some(config), _) => from_drain_config(config),
        (None, Some(drain)) => from_drain(drain, default_timeout),
        (None, None) => EffectiveDrain {
            source: DrainSource::Default,
            ..from_drain(&DrainSpec::default(), default_timeout)
        },
    }
}

fn from_drain_config(config: &DrainConfig) -> EffectiveDrain {
    let timeout = config
        .timeout
        .as_deref()
        .and_then(|text| duration::parse(text).ok())
        .filter(|d| !d.is_zero());
    EffectiveDrain {
        source: DrainSource::DrainConfig,
        disable_eviction: config.disable_eviction.unwrap_or(false),
        delete_empty_dir_data: config.delete_empty_dir_data.unwrap_or(true),
        force: config.force.unwrap_or(true),
        daemon_sets: if config.ignore_daemon_sets.unwrap_or(true) {
            DaemonSetPods::Ignore
        } else {
            DaemonSetPods::Remove
        },
        timeout,
        on_timeout: match config.on_timeout {
            None => OnDrainTimeout::Erroring,
            Some(DrainTimeoutAction::Wait) => OnDrainTimeout::KeepWaiting,
            Some(DrainTimeoutAction::Fail) => OnDrainTimeout::ErroringAndUncordon,
        },
        grace_period_seconds: config
            .grace_period
            .as_deref()
            .and_then(|text| duration::parse(text).ok())
            .map(whole_seconds_up),
        pod_selector: config.pod_selector.clone(),
    }
}

fn from_drain(drain: &DrainSpec, default_timeout: Duration) -> EffectiveDrain {
    let timeout = drain
        .timeout
        .as_deref()
        .and_then(|text| duration::parse(text).ok())
        .unwrap_or(default_timeout);
    EffectiveDrain {
        source: DrainSource::Drain,
        disable_eviction: false,
        delete_empty_dir_data: drain.delete_empty_dir_data.unwrap_or(true),
        force: drain.force.unwrap_or(true),
        daemon_sets: if drain.ignore_daemon_sets.unwrap_or(true) {
            DaemonSetPods::Ignore
        } else {
            DaemonSetPods::Block
        },
        timeout: Some(timeout),
        on_timeout: match drain.on_timeout.unwrap_or_default() {
            DrainTimeoutAction::Wait => OnDrainTimeout::KeepWaiting,
            DrainTimeoutAction::Fail => OnDrainTimeout::ErroringAndUncordon,
        },
        grace_period_seconds: drain.grace_period_seconds.filter(|s| *s >= 0),
        pod_selector: drain.pod_selector.clone(),
    }
}

/// Upstream rounds the grace period up to whole seconds (`1500ms` is 2 s).
fn whole_seconds_up(d: Duration) -> i64 {
    let seconds = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i64::try_from(seconds).unwrap_or(i64::MAX)
}

/// Why a pod keeps a drain from progressing (upstream v0.20's `BlockReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum BlockReason {
    /// A PodDisruptionBudget refused its eviction.
    PodDisruptionBudget,
    /// No controller owns it and `force` is false.
    UnmanagedPod,
    /// It has `emptyDir` data and `deleteEmptyDirData` is false.
    EmptyDirData,
}

impl BlockReason {
    /// The reason as the `DrainBlocked` condition and the node annotation spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockReason::PodDisruptionBudget => DRAIN_BLOCKED_PDB_REASON,
            BlockReason::UnmanagedPod => DRAIN_BLOCKED_UNMANAGED_REASON,
            BlockReason::EmptyDirData => DRAIN_BLOCKED_EMPTY_DIR_REASON,
        }
    }
}

/// One pod that blocks a drain: an element of the `drainBlocked_<skyhook>` node annotation
/// (upstream's JSON: `{namespace, name, reason, detail?}`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockedPod {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// Why it blocks.
    pub reason: BlockReason,
    /// The API server's refusal, verbatim (PodDisruptionBudget refusals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// How many nodes, and detail lines, a drain or hold message names before it refers to the
/// controller's logs (upstream's bound).
pub const MAX_LISTED: usize = 10;

/// The `DrainBlocked` condition's reason over every blocked pod: the one kind, or
/// `MultipleCauses`. `None` when nothing blocks.
pub fn drain_blocked_reason<'a>(
    blocked: impl IntoIterator<Item = &'a BlockedPod>,
) -> Option<&'static str> {
    let mut kinds: Vec<BlockReason> = blocked.into_iter().map(|pod| pod.reason).collect();
    kinds.sort_unstable();
    kinds.dedup();
    match kinds.as_slice() {
        [] => None,
        [one] => Some(one.as_str()),
        _ => Some(DRAIN_BLOCKED_MULTIPLE_REASON),
    }
}

/// The `DrainBlocked` condition's message (upstream v0.20): `<k>/<total> nodes blocked
/// draining (<sorted names>)`, then one `<ns>/<pod> on <node>: <detail>` part per blocked pod
/// (the detail is the API server's refusal, or the reason), at most [`MAX_LISTED`] of them,
/// all joined by `; `.
pub fn drain_blocked_message(
    total_nodes: usize,
    blocked: &BTreeMap<String, Vec<BlockedPod>>,
) -> String {
    let nodes: Vec<&str> = blocked
        .iter()
        .filter(|(_, pods)| !pods.is_empty())
        .map(|(node, _)| node.as_str())
        .collect();
    let mut parts = vec![format!(
        "{}/{total_nodes} nodes blocked draining ({})",
        nodes.len(),
        name_list(&nodes)
    )];
    let details: Vec<String> = blocked
        .iter()
        .flat_map(|(node, pods)| {
            pods.iter().map(move |pod| {
                let detail = pod.detail.as_deref().unwrap_or(pod.reason.as_str());
                format!("{}/{} on {node}: {detail}", pod.namespace, pod.name)
            })
        })
        .collect();
    let truncated = details.len() > MAX_LISTED;
    parts.extend(details.into_iter().take(MAX_LISTED));
    if truncated {
        parts.push("(additional detail truncated; see controller logs)".to_owned());
    }
    parts.join("; ")
}

/// The `Blocked`/`NonInterruptPodsRunning` condition's message (upstream v0.20):
/// `1 node blocked by non-interrupt pods (node-a). Waiting.`
pub fn non_interrupt_message(nodes: &[&str]) -> String {
    let noun = if nodes.len() == 1 { "node" } else { "nodes" };
    format!(
        "{} {noun} blocked by non-interrupt pods ({}). Waiting.",
        nodes.len(),
        name_list(nodes)
    )
}

/// The Warning Event on a node that pods matching `podNonInterruptLabels` hold (upstream v0.20
/// sends one "listing the blocking pods and the package"; its wording is not recorded):
/// `package [<name>:<version>] waits on node [<node>] for non-interrupt pods (<ns>/<pod>, ...)`,
/// the pods sorted, at most [`MAX_LISTED`] of them and then a pointer to the controller's logs.
pub fn non_interrupt_node_message(node: &str, package: &str, pods: &[String]) -> String {
    let mut sorted: Vec<&str> = pods.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let mut listed = sorted
        .iter()
        .take(MAX_LISTED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if sorted.len() > MAX_LISTED {
        listed.push_str(" (list truncated; see controller logs)");
    }
    format!(
        "package [{package}] waits on node [{node}] for non-interrupt pods ({listed}). Waiting."
    )
}

/// Sorted names joined by `, `; above [`MAX_LISTED`] the list is replaced, as upstream does.
fn name_list(names: &[&str]) -> String {
    if names.len() > MAX_LISTED {
        return "list truncated; see controller logs".to_owned();
    }
    let mut sorted = names.to_vec();
    sorted.sort_unstable();
    sorted.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FALLBACK: Duration = Duration::from_secs(600);

    /// case, spec, source, disableEviction, deleteEmptyDirData, force, DaemonSets, timeout
    /// (seconds), on timeout, grace period (seconds).
    type Case = (
        &'static str,
        &'static str,
        DrainSource,
        bool,
        bool,
        bool,
        DaemonSetPods,
        Option<u64>,
        OnDrainTimeout,
        Option<i64>,
    );

    fn config(yaml: &str) -> SkyhookSpec {
        serde_yaml::from_str(yaml).expect("a spec")
    }

    #[test]
    fn each_field_maps_to_its_effective_setting() {
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // case, spec, source, disableEviction, deleteEmptyDirData, force, DaemonSets, timeout s, on timeout, grace s
            ("neither: today's drain", "{}",
             DrainSource::Default, false, true, true, DaemonSetPods::Ignore, Some(600), OnDrainTimeout::KeepWaiting, None),
            ("empty drainConfig: upstream's defaults, no timeout", "drainConfig: {}",
             DrainSource::DrainConfig, false, true, true, DaemonSetPods::Ignore, None, OnDrainTimeout::Erroring, None),
            ("drainConfig, every field", "drainConfig: {disableEviction: true, deleteEmptyDirData: false, force: false, ignoreDaemonSets: false, timeout: 5m, gracePeriod: 1500ms}",
             DrainSource::DrainConfig, true, false, false, DaemonSetPods::Remove, Some(300), OnDrainTimeout::Erroring, Some(2)),
            ("drainConfig timeout 0: none", "drainConfig: {timeout: '0'}",
             DrainSource::DrainConfig, false, true, true, DaemonSetPods::Ignore, None, OnDrainTimeout::Erroring, None),
            ("drainConfig onTimeout wait", "drainConfig: {timeout: 1m, onTimeout: wait}",
             DrainSource::DrainConfig, false, true, true, DaemonSetPods::Ignore, Some(60), OnDrainTimeout::KeepWaiting, None),
            ("drainConfig onTimeout fail", "drainConfig: {timeout: 1m, onTimeout: fail}",
             DrainSource::DrainConfig, false, true, true, DaemonSetPods::Ignore, Some(60), OnDrainTimeout::ErroringAndUncordon, None),
            ("drainConfig gracePeriod 0", "drainConfig: {gracePeriod: '0'}",
             DrainSource::DrainConfig, false, true, true, DaemonSetPods::Ignore, None, OnDrainTimeout::Erroring, Some(0)),
            ("drain: controller timeout, keep waiting", "drain: {}",
             DrainSource::Drain, false, true, true, DaemonSetPods::Ignore, Some(600), OnDrainTimeout::KeepWaiting, None),
            ("drain, every field", "drain: {timeout: 90s, gracePeriodSeconds: 7, deleteEmptyDirData: false, force: false, ignoreDaemonSets: false, onTimeout: fail}",
             DrainSource::Drain, false, false, false, DaemonSetPods::Block, Some(90), OnDrainTimeout::ErroringAndUncordon, Some(7)),
            ("both (the webhook refuses it): drainConfig wins", "{drainConfig: {force: false}, drain: {timeout: 90s}}",
             DrainSource::DrainConfig, false, true, false, DaemonSetPods::Ignore, None, OnDrainTimeout::Erroring, None),
            ("unparsable durations count as unset", "drainConfig: {timeout: soon, gracePeriod: -1s}",
             DrainSource::DrainConfig, false, true, true, DaemonSetPods::Ignore, None, OnDrainTimeout::Erroring, None),
        ];
        for (
            case,
            yaml,
            source,
            disable,
            empty_dir,
            force,
            daemon_sets,
            timeout,
            on_timeout,
            grace,
        ) in cases
        {
            let got = effective_drain(&config(yaml), FALLBACK);
            assert_eq!(got.source, *source, "{case}: source");
            assert_eq!(got.disable_eviction, *disable, "{case}: disableEviction");
            assert_eq!(
                got.delete_empty_dir_data, *empty_dir,
                "{case}: deleteEmptyDirData"
            );
            assert_eq!(got.force, *force, "{case}: force");
            assert_eq!(got.daemon_sets, *daemon_sets, "{case}: DaemonSets");
            assert_eq!(
                got.timeout,
                timeout.map(Duration::from_secs),
                "{case}: timeout"
            );
            assert_eq!(got.on_timeout, *on_timeout, "{case}: on timeout");
            assert_eq!(got.grace_period_seconds, *grace, "{case}: grace period");
        }
    }

    #[test]
    fn the_pod_selector_comes_from_either_field() {
        for yaml in [
            "drainConfig: {podSelector: {matchLabels: {keep: 'yes'}}}",
            "drain: {podSelector: {matchLabels: {keep: 'yes'}}}",
        ] {
            let got = effective_drain(&config(yaml), FALLBACK);
            let labels = got.pod_selector.and_then(|s| s.match_labels);
            assert_eq!(
                labels.and_then(|l| l.get("keep").cloned()).as_deref(),
                Some("yes"),
                "{yaml}"
            );
        }
    }

    fn blocked(ns: &str, name: &str, reason: BlockReason, detail: Option<&str>) -> BlockedPod {
        BlockedPod {
            namespace: ns.into(),
            name: name.into(),
            reason,
            detail: detail.map(str::to_owned),
        }
    }

    #[test]
    fn the_reason_names_the_one_kind_or_multiple_causes() {
        use BlockReason::*;
        #[rustfmt::skip]
        let cases: &[(&[BlockReason], Option<&str>)] = &[
            (&[], None),
            (&[UnmanagedPod], Some("UnmanagedPod")),
            (&[PodDisruptionBudget, PodDisruptionBudget], Some("PodDisruptionBudget")),
            (&[EmptyDirData], Some("EmptyDirData")),
            (&[UnmanagedPod, EmptyDirData], Some("MultipleCauses")),
        ];
        for (reasons, expected) in cases {
            let pods: Vec<BlockedPod> = reasons
                .iter()
                .map(|r| blocked("ns", "p", *r, None))
                .collect();
            assert_eq!(drain_blocked_reason(&pods), *expected, "{reasons:?}");
        }
    }

    #[test]
    fn the_message_counts_nodes_and_details_each_pod() {
        let blocked_nodes = BTreeMap::from([
            (
                "node-b".to_owned(),
                vec![blocked(
                    "web",
                    "api-0",
                    BlockReason::PodDisruptionBudget,
                    Some("Cannot evict pod as it would violate the pod's disruption budget."),
                )],
            ),
            (
                "node-a".to_owned(),
                vec![blocked(
                    "default",
                    "lonely",
                    BlockReason::UnmanagedPod,
                    None,
                )],
            ),
            ("node-c".to_owned(), vec![]),
        ]);
        assert_eq!(
            drain_blocked_message(3, &blocked_nodes),
            "2/3 nodes blocked draining (node-a, node-b); default/lonely on node-a: UnmanagedPod; web/api-0 on node-b: Cannot evict pod as it would violate the pod's disruption budget."
        );
        let many: BTreeMap<String, Vec<BlockedPod>> = (0..12)
            .map(|i| {
                (
                    format!("n{i:02}"),
                    vec![blocked("ns", "p", BlockReason::EmptyDirData, None)],
                )
            })
            .collect();
        let message = drain_blocked_message(20, &many);
        assert!(
            message.starts_with(
                "12/20 nodes blocked draining (list truncated; see controller logs); "
            ),
            "{message}"
        );
        assert!(
            message.ends_with(
                "ns/p on n09: EmptyDirData; (additional detail truncated; see controller logs)"
            ),
            "{message}"
        );
    }

    #[test]
    fn the_annotation_is_upstreams_json() {
        let pods = vec![blocked(
            "nodewright",
            "drain-config-blocker",
            BlockReason::UnmanagedPod,
            None,
        )];
        assert_eq!(
            serde_json::to_string(&pods).expect("serialisable"),
            r#"[{"namespace":"nodewright","name":"drain-config-blocker","reason":"UnmanagedPod"}]"#
        );
    }

    #[test]
    fn the_node_hold_message_names_the_package_and_the_sorted_pods() {
        let pods = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let eleven: Vec<String> = (0..11).map(|i| format!("ml/train-{i:02}")).collect();
        let cases = [
            (
                "one pod",
                pods(&["ml/train"]),
                "package [dexter:1.2.3] waits on node [worker] for non-interrupt pods (ml/train). Waiting.",
            ),
            (
                "sorted",
                pods(&["ml/b", "db/a", "ml/a"]),
                "package [dexter:1.2.3] waits on node [worker] for non-interrupt pods (db/a, ml/a, ml/b). Waiting.",
            ),
            (
                "ten listed, then the logs",
                eleven,
                "package [dexter:1.2.3] waits on node [worker] for non-interrupt pods (ml/train-00, ml/train-01, \
                 ml/train-02, ml/train-03, ml/train-04, ml/train-05, ml/train-06, ml/train-07, ml/train-08, \
                 ml/train-09 (list truncated; see controller logs)). Waiting.",
            ),
        ];
        for (case, pods, expected) in cases {
            assert_eq!(
                non_interrupt_node_message("worker", "dexter:1.2.3", &pods),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn the_hold_message_is_upstreams() {
        assert_eq!(
            non_interrupt_message(&["node-a"]),
            "1 node blocked by non-interrupt pods (node-a). Waiting."
        );
        assert_eq!(
            non_interrupt_message(&["b", "a"]),
            "2 nodes blocked by non-interrupt pods (a, b). Waiting."
        );
    }
}
