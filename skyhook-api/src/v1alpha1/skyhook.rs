//! The `Skyhook` custom resource: which packages to apply to which nodes, in which order.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{LocalObjectReference, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::package::{Package, deserialize_packages};
use super::status::SkyhookStatus;
use super::topology::TopologyBudget;
use crate::duration;
use crate::keys;
use crate::selector::Selector;

/// Desired state of a Skyhook: packages to apply to the host OS of the selected nodes, and how
/// fast to roll them out.
// Every `printcolumn(...)` repeats the keys `name`, `type_` and `json_path`, which the lint
// mistakes for duplicates of one attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "skyhook.nvidia.com",
    version = "v1alpha1",
    kind = "Skyhook",
    plural = "skyhooks",
    shortname = "sky",
    status = "SkyhookStatus",
    doc = "Skyhook applies packages (container images with lifecycle scripts) to the host OS of the selected nodes, rolling through the cluster within a disruption budget.",
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.status",
        description = "Aggregate status of the Skyhook"
    ),
    printcolumn(
        name = "Priority",
        type_ = "integer",
        json_path = ".spec.priority",
        description = "Lower runs first"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Nodes In-Progress",
        type_ = "integer",
        json_path = ".status.nodesInProgress",
        description = "Nodes in progress or erroring"
    ),
    printcolumn(
        name = "Complete Nodes",
        type_ = "string",
        json_path = ".status.completeNodes",
        description = "Complete nodes out of matched nodes"
    ),
    printcolumn(
        name = "Packages",
        type_ = "string",
        json_path = ".status.packageList",
        description = "Packages as name:version"
    ),
    printcolumn(
        name = "Policy",
        type_ = "string",
        json_path = ".spec.deploymentPolicy",
        description = "DeploymentPolicy used for the rollout"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SkyhookSpec {
    /// Apply one package at a time instead of every runnable package at once. Default false.
    #[serde(default)]
    pub serial: bool,

    /// Deprecated and ignored. Pause a Skyhook with the annotation
    /// `skyhook.nvidia.com/pause: "true"` instead, which does not change the generation.
    #[serde(default)]
    pub pause: bool,

    /// Pods matching this selector that are Running or Pending on a node prevent that node from
    /// being interrupted (drained, service-restarted or rebooted) until they are gone. An empty
    /// or absent selector matches no pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_non_interrupt_labels: Option<LabelSelector>,

    /// Nodes to apply the packages to. An empty or absent selector selects every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selectors: Option<LabelSelector>,

    /// Name of the DeploymentPolicy that defines the rollout compartments, budgets and batch
    /// strategies. The policy must exist. Cannot be combined with `interruptionBudget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_policy: Option<String>,

    /// Per-Skyhook overrides of the referenced DeploymentPolicy's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_policy_options: Option<DeploymentPolicyOptions>,

    /// Legacy rollout budget: how many of the selected nodes may be worked on at once, as a
    /// `percent` or a `count` (not both). Without a budget or policy every node goes at once.
    /// Cannot be combined with `deploymentPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruption_budget: Option<InterruptionBudget>,

    /// Packages to apply, keyed by package name. Packages run in dependency order (`dependsOn`);
    /// packages without dependencies between them run in parallel.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "deserialize_packages"
    )]
    pub packages: BTreeMap<String, Package>,

    /// Tolerations added to every package and interrupt pod. Nodes whose taints are not all
    /// tolerated by these (plus the unschedulable taint) are reported as blocked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_tolerations: Vec<Toleration>,

    /// The runtime-required taint is removed from a node only after this Skyhook (and every
    /// other runtime-required Skyhook on the node) is complete there. Default false.
    #[serde(default)]
    pub runtime_required: bool,

    /// With `runtimeRequired`, cordon each node when the runtime-required taint is removed from
    /// it (in the same write), and mark it with the node annotation
    /// `skyhook.nvidia.com/runtimeRequiredCordon`. The cordon outlives later interrupts and
    /// resets; release it by removing the annotation and setting `unschedulable: false` in one
    /// patch. Only nodes that carried the taint are cordoned. Default false.
    #[serde(default)]
    pub runtime_required_cordon_after: bool,

    /// With `runtimeRequired`, add the runtime-required taint to new matching nodes that carry no
    /// `skyhook.nvidia.com/*` annotation yet. Default false.
    #[serde(default)]
    pub auto_taint_new_nodes: bool,

    /// Order between Skyhooks: lower values run first, ties are broken by name. On each node a
    /// Skyhook starts only once every enabled Skyhook before it is complete there. Convention:
    /// 1-99 infrastructure, 100-199 configuration, 200+ user tuning. Minimum 1, default 200.
    #[serde(default = "default_priority")]
    #[schemars(range(min = 1))]
    pub priority: i32,

    /// How the priority order gates nodes: `node` (default) lets each node move on as soon as
    /// the earlier Skyhooks are complete on that node; `all` waits until they are complete on
    /// every node they target.
    #[serde(default)]
    pub sequencing: Sequencing,

    /// How nodes are drained before an interrupt (upstream v0.18's `drainConfig`, plus our
    /// `podSelector` and `onTimeout`). Absent: upstream's defaults. Cannot be combined with the
    /// deprecated `drain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_config: Option<DrainConfig>,

    /// Deprecated: use `drainConfig`. How nodes are drained before an interrupt; kept working
    /// with its own rules (the controller's `DRAIN_TIMEOUT`, keep waiting past it). Cannot be
    /// combined with `drainConfig`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainSpec>,

    /// What happens to a node whose package is `erroring`. Absent: it stays cordoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,

    /// How long a node asked to reboot may stay away before the reboot is reported as not
    /// confirmed, as a Go duration (`45m`). Overrides the controller's `REBOOT_DEADLINE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot_deadline: Option<String>,

    /// Secrets to pull this Skyhook's package images with, added to its package and interrupt
    /// pods beside the controller's `IMAGE_PULL_SECRET`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,

    /// Node conditions a node must report `True`, each transitioned after the node's
    /// interrupt, before the node counts as complete and is uncordoned: a GPU validator's
    /// verdict after a reboot (DCGM diagnostics, NCCL tests, node-problem-detector). Until then
    /// the node stays cordoned and keeps its budget slot; past a gate's timeout it is
    /// `erroring`. Nodes completed without an interrupt are not gated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readiness_gates: Vec<ReadinessGate>,

    /// Pull the package and agent images on a node, in a short pod that disrupts nothing,
    /// before the node is cordoned for a package with an interrupt: a tag that does not exist
    /// or a registry out of reach then makes the package `erroring` with the pull error while
    /// the node keeps working, instead of after its drain. Unset: the controller's
    /// `PRE_PULL_IMAGES` (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_pull_images: Option<bool>,
}

/// One entry of `spec.readinessGates`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessGate {
    /// The node condition type that must be `True` (e.g. `GpuHealthy`).
    pub condition_type: String,
    /// How long after the node's packages finished the condition may take, as a Go duration
    /// (`30m`); past it the node is `erroring` and stays cordoned. Default `1h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// The default of `spec.priority`.
pub const DEFAULT_PRIORITY: i32 = 200;

fn default_priority() -> i32 {
    DEFAULT_PRIORITY
}

impl Default for SkyhookSpec {
    fn default() -> Self {
        SkyhookSpec {
            serial: false,
            pause: false,
            pod_non_interrupt_labels: None,
            node_selectors: None,
            deployment_policy: None,
            deployment_policy_options: None,
            interruption_budget: None,
            packages: BTreeMap::new(),
            additional_tolerations: Vec::new(),
            runtime_required: false,
            runtime_required_cordon_after: false,
            auto_taint_new_nodes: false,
            priority: DEFAULT_PRIORITY,
            sequencing: Sequencing::default(),
            drain_config: None,
            drain: None,
            on_failure: None,
            reboot_deadline: None,
            image_pull_secrets: Vec::new(),
            readiness_gates: Vec::new(),
            pre_pull_images: None,
        }
    }
}

impl SkyhookSpec {
    /// Which nodes this Skyhook targets, as a selector to match node labels against. The one
    /// rule the controller's plan, the metrics and the plugin share: an absent or empty
    /// `nodeSelectors` selects every node (as upstream and every Kubernetes label selector do);
    /// one that does not parse selects none, so that a broken selector never widens a rollout.
    pub fn target_selector(&self) -> Selector {
        self.node_selectors
            .as_ref()
            .map_or_else(Selector::everything, Selector::parse_or_nothing)
    }

    /// The name of the DeploymentPolicy this Skyhook rolls out by, or `None` when it has none:
    /// an absent and an empty `deploymentPolicy` both mean "no policy" (upstream, validation,
    /// the plan, the metrics and the plugin alike).
    pub fn policy_name(&self) -> Option<&str> {
        self.deployment_policy.as_deref().filter(|p| !p.is_empty())
    }

    /// How long a reboot may take: `spec.rebootDeadline`, else the controller's `fallback`. A
    /// value that does not parse (the webhook rejects it) falls back too.
    pub fn reboot_deadline(&self, fallback: Duration) -> Duration {
        override_or(self.reboot_deadline.as_deref(), fallback)
    }

    /// Whether a node whose package is `erroring` is uncordoned (`spec.onFailure.uncordon`).
    pub fn uncordon_on_failure(&self) -> bool {
        self.on_failure.as_ref().is_some_and(|f| f.uncordon)
    }

    /// Whether images are pulled before a cordon: `spec.prePullImages`, else the controller's
    /// `PRE_PULL_IMAGES` (`fallback`).
    pub fn pre_pulls_images(&self, fallback: bool) -> bool {
        self.pre_pull_images.unwrap_or(fallback)
    }
}

fn override_or(setting: Option<&str>, fallback: Duration) -> Duration {
    setting
        .and_then(|text| duration::parse(text).ok())
        .unwrap_or(fallback)
}

/// Per-Skyhook overrides of DeploymentPolicy settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentPolicyOptions {
    /// Start the rollout again from the first batch when this Skyhook completes or a package
    /// version changes. Overrides the policy's own setting. Default true.
    #[serde(default = "default_true")]
    pub reset_batch_state_on_completion: bool,
}

impl Default for DeploymentPolicyOptions {
    fn default() -> Self {
        DeploymentPolicyOptions {
            reset_batch_state_on_completion: true,
        }
    }
}

pub(crate) fn default_true() -> bool {
    true
}

/// Deprecated (use [`DrainConfig`]): how a Skyhook drains a node before interrupting it. Every field is optional; absent fields
/// keep upstream's behaviour. Evictions always go through the Eviction API, so every
/// PodDisruptionBudget is honoured whatever these say.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainSpec {
    /// How long a drain may take before it is reported as blocked, as a Go duration (`15m`).
    /// Overrides the controller's `DRAIN_TIMEOUT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Grace period given to each evicted pod, in seconds. Absent: the pod's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub grace_period_seconds: Option<i64>,
    /// Whether pods with `emptyDir` volumes (whose data is lost) may be evicted. Absent: they
    /// are, as upstream did; `false`: they are left and block the drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_empty_dir_data: Option<bool>,
    /// Whether DaemonSet pods are ignored (never evicted). Default true; `false`: they block
    /// the drain, as `kubectl drain` without `--ignore-daemonsets` refuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_daemon_sets: Option<bool>,
    /// Whether pods no controller owns (which nothing recreates) may be evicted. Absent: they
    /// are, as upstream did; `false`: they are left and block the drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    /// Pods matching this selector are left on the node and do not block the drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// What a drain past its timeout does: `wait` (default) keeps waiting and reports the
    /// blockers; `fail` marks the node's package `erroring` with the blocker report and
    /// uncordons the node, giving back its budget slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<DrainTimeoutAction>,
}

/// How a Skyhook drains a node before interrupting it: upstream's `drainConfig` (v0.18), whose
/// six fields and defaults are upstream's, plus two of ours (`podSelector`, `onTimeout`). The
/// defaults reproduce the drain upstream hard-coded before the field existed. The effective
/// settings come from [`crate::drain::effective_drain`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainConfig {
    /// Delete pods directly instead of evicting them. This bypasses PodDisruptionBudgets.
    /// Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub disable_eviction: Option<bool>,
    /// Whether pods with `emptyDir` volumes (whose data is lost) are removed. Default true;
    /// `false`: they block the drain (reason `EmptyDirData`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub delete_empty_dir_data: Option<bool>,
    /// Whether pods no controller owns (which nothing recreates) are removed. Default true;
    /// `false`: they block the drain (reason `UnmanagedPod`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub force: Option<bool>,
    /// Whether pods a DaemonSet controls are left alone. Default true; `false`: they are
    /// removed like any other pod (and the DaemonSet recreates them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub ignore_daemon_sets: Option<bool>,
    /// How long the whole drain may take, as a Go duration (`15m`), measured from the first
    /// pass that found the node not drained. Unset or `0`: no timeout. Past it the node turns
    /// `erroring` and stays cordoned (see `onTimeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Grace period for each evicted or deleted pod, as a Go duration, rounded up to whole
    /// seconds. Unset: each pod's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period: Option<String>,
    /// Ours: pods matching this selector are left on the node and do not block the drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// Ours: what a drain past `timeout` does. Absent: as upstream, the node turns `erroring`
    /// and stays cordoned. `wait`: keep draining and report the blockers. `fail`: the node
    /// turns `erroring` and is uncordoned, giving back its budget slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<DrainTimeoutAction>,
}

/// What a drain past its timeout does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DrainTimeoutAction {
    /// Keep draining and report what blocks it.
    #[default]
    Wait,
    /// Give up: the package turns `erroring` and the node is uncordoned.
    Fail,
}

/// What happens to a node whose package is `erroring`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OnFailure {
    /// Uncordon the node (if this Skyhook cordoned it) so workloads return while the package
    /// is fixed; the node then gives back its budget slot. Default false: it stays cordoned.
    #[serde(default)]
    pub uncordon: bool,
}

/// Legacy rollout budget. Set `percent` or `count`, not both.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InterruptionBudget {
    /// Percentage (0-100) of the selected nodes worked on at once, rounded down, at least one
    /// node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub percent: Option<i32>,
    /// Number of the selected nodes worked on at once, at least one node. Minimum 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub count: Option<i32>,
    /// Failure domains (racks, NVLink domains) disrupted at once, on top of the node count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyBudget>,
}

/// How the priority order between Skyhooks gates the nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Sequencing {
    /// Per node: a node moves on once the earlier Skyhooks are complete on it.
    #[default]
    Node,
    /// Global: every node waits until the earlier Skyhooks are complete on all their nodes.
    All,
}

impl Skyhook {
    /// Whether the `skyhook.nvidia.com/pause` annotation is `"true"`: no work is done and later
    /// Skyhooks stay blocked on nodes where this one is incomplete.
    pub fn is_paused(&self) -> bool {
        self.annotation_is_true(keys::SKYHOOK.pause_annotation)
    }

    /// Whether the `skyhook.nvidia.com/disable` annotation is `"true"`: no work is done and later
    /// Skyhooks are not blocked.
    pub fn is_disabled(&self) -> bool {
        self.annotation_is_true(keys::SKYHOOK.disable_annotation)
    }

    fn annotation_is_true(&self, key: &str) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(key))
            .is_some_and(|value| value == "true")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_skyhook_durations_override_the_controllers() {
        let fallback = Duration::from_secs(600);
        #[rustfmt::skip]
        let cases = [
            ("absent: the controller's", None, fallback),
            ("set", Some("90s"), Duration::from_secs(90)),
            ("compound", Some("1h30m"), Duration::from_secs(5400)),
            ("zero", Some("0"), Duration::ZERO),
            ("unparsable (the webhook rejects it): the controller's", Some("soon"), fallback),
            ("negative (the webhook rejects it): the controller's", Some("-5m"), fallback),
        ];
        for (case, text, expected) in cases {
            let spec = SkyhookSpec {
                reboot_deadline: text.map(str::to_owned),
                ..SkyhookSpec::default()
            };
            assert_eq!(
                spec.reboot_deadline(fallback),
                expected,
                "reboot deadline, {case}"
            );
        }
    }

    #[test]
    fn an_upstream_manifest_keeps_upstreams_drain_and_failure_policy() {
        let spec: SkyhookSpec = serde_json::from_str("{}").expect("an empty spec");
        assert!(!spec.uncordon_on_failure());
        assert!(spec.image_pull_secrets.is_empty());
        let written = serde_json::to_value(&spec).expect("serialisable");
        for field in [
            "drain",
            "drainConfig",
            "onFailure",
            "rebootDeadline",
            "imagePullSecrets",
        ] {
            assert!(
                written.get(field).is_none(),
                "{field} is not written when absent"
            );
        }
    }
}
