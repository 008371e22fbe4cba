//! Every annotation, label, finalizer, condition type and environment variable name that
//! Skyhook reads or writes. They are part of the compatibility promise with upstream: tools and
//! scripts (`kubectl get nodes -o jsonpath=...nodeState_demo`) depend on the exact spelling.

/// The keys of one API group. Every node annotation, node label, finalizer, condition type,
/// Skyhook annotation and pod or ConfigMap label the operator writes is spelled from the group
/// prefix here, and nowhere else: objects of a second API group (upstream's newer
/// `nodewright.nvidia.com`) get theirs from the same type, with their own prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys {
    /// The API group, also the prefix of every key.
    pub group: &'static str,
    /// The kind of the group's workload objects: `Skyhook`, `NodeWright`.
    pub kind: &'static str,
    /// The kind in lower case, as Event messages and the plugin spell it (`[skyhook:<name>]`,
    /// `[nodewright:<name>]`).
    pub word: &'static str,
    /// The label naming the object in the group's metrics (`skyhook_name`, `nodewright_name`);
    /// [`Keys::word`] is also the prefix of those metrics' names.
    pub metric_name_label: &'static str,
    /// Skyhook annotation: `"true"` pauses the Skyhook. It does no work and still blocks later
    /// Skyhooks on the nodes where it is incomplete.
    pub pause_annotation: &'static str,
    /// Skyhook annotation: `"true"` disables the Skyhook. It does no work and blocks nothing.
    pub disable_annotation: &'static str,
    /// Skyhook annotation: the operator version that last migrated the Skyhook.
    pub version_annotation: &'static str,
    /// Finalizer on every Skyhook, removed after cleanup (uncordon, metrics) on deletion.
    pub finalizer: &'static str,
    /// Prefix shared by every cordon-ownership annotation, to find all owners of a cordon.
    pub cordon_annotation_prefix: &'static str,
    /// Prefix of [`Keys::cordoned_at_annotation`], to find every Skyhook's drain start.
    pub cordoned_at_prefix: &'static str,
    /// Prefix of [`Keys::drain_start_annotation`], to find every node being drained.
    pub drain_start_prefix: &'static str,
    /// Node label `"true"` set by an administrator: the node is `blocked` for every Skyhook.
    pub ignore_label: &'static str,
    /// Label (and annotation) on package pods, interrupt pods and package ConfigMaps: the
    /// Skyhook name. Only pods with this label are watched.
    pub name_label: &'static str,
    /// Pod label: `<package>-<version>`.
    pub package_label: &'static str,
    /// Pod annotation holding the package reference JSON
    /// (see [`crate::pod_annotation::PodPackageAnnotation`]).
    pub package_annotation: &'static str,
    /// Pod label `"True"` ([`INTERRUPT_LABEL_VALUE`]) on interrupt pods.
    pub interrupt_label: &'static str,
    /// Label on node-metadata ConfigMaps: the Skyhook name.
    pub node_meta_label: &'static str,
    /// Package ConfigMap annotation: the package name.
    pub package_name_annotation: &'static str,
    /// Package ConfigMap annotation: the package version.
    pub package_version_annotation: &'static str,
    /// Node-metadata ConfigMap annotation: the node name.
    pub node_name_annotation: &'static str,
    /// Annotation on interrupt pods: the node's `status.nodeInfo.bootID` when the pod was
    /// created.
    pub boot_id_annotation: &'static str,
    /// Deprecated mirror of [`CONDITION_READY`], identical to it, kept for one release.
    pub condition_ready_prefixed: &'static str,
    /// Condition always present: Ready's status, reason = the raw Skyhook status, message the
    /// transition in a pass that changed the status, otherwise Ready's message.
    pub condition_transition: &'static str,
    /// Condition naming the package and node of the last pod launch.
    pub condition_apply_package: &'static str,
    /// Condition: True while some selected node has a taint the packages do not tolerate.
    pub condition_taint_not_tolerable: &'static str,
    /// Condition: True while some selected node carries the ignore label.
    pub condition_nodes_ignored: &'static str,
    /// Condition: True while the referenced DeploymentPolicy does not exist.
    pub condition_deployment_policy_not_found: &'static str,
    /// Condition (ours, not upstream's): True while a node was asked to reboot by one of the
    /// Skyhook's interrupts and has not come back with a new boot ID within the reboot
    /// deadline; the message lists the nodes, packages and when each reboot was requested. The
    /// node keeps its budget slot meanwhile.
    pub condition_reboot_not_confirmed: &'static str,
    /// Condition (ours, not upstream's): True while nodes the Skyhook would cordon wait because
    /// the controller's fleet budget (`FLEET_BUDGET`) is used up by nodes cordoned or
    /// interrupting across all Skyhooks; the message says how many and which nodes wait.
    /// Removed once none waits.
    pub condition_fleet_budget_wait: &'static str,
    /// Condition (ours, not upstream's): True while compartments of the Skyhook hold their next
    /// batch because their DeploymentPolicy's maintenance windows are closed; the message says
    /// when the next window opens. Removed once no compartment is held by a window.
    pub condition_outside_maintenance_window: &'static str,
    /// Condition (ours, not upstream's): True while compartments of the Skyhook hold their next
    /// batch because their DeploymentPolicy's health gate is closed; the message names, per
    /// compartment, the node that holds it. Removed once no compartment is held by the gate.
    pub condition_health_gate_held: &'static str,
    /// Condition (ours, not upstream's): True while the budget of an open maintenance window
    /// holds compartments of the Skyhook to fewer nodes at once than their own budgets would
    /// take; the message names the policy, the compartments and their window ceilings. Removed
    /// once no window budget holds work.
    pub condition_window_budget_held: &'static str,
    /// Condition (ours, not upstream's): True while `spec.readinessGates` hold nodes whose
    /// packages finished after an interrupt (reason [`READINESS_GATE_WAITING_REASON`]), or
    /// past a gate's timeout (reason [`READINESS_GATE_TIMED_OUT_REASON`]); the message names
    /// each node, its pending gates and their deadlines. Removed once no node is held.
    pub condition_readiness_gate_held: &'static str,
    /// Condition (ours, not upstream's): True while a budget's `topology` holds nodes of the
    /// Skyhook back: free slots wait for their failure domain (reason
    /// [`TOPOLOGY_DOMAINS_BUSY_REASON`]), or nodes lack the topology label (reason
    /// [`TOPOLOGY_LABEL_MISSING_REASON`]); the message names, per compartment, the nodes, the
    /// busy domains and the limits. Removed once none is held.
    pub condition_topology_budget_held: &'static str,
    /// Condition (ours, not upstream's): True while nodes wait, uncordoned, for the pre-pull of
    /// their package images (`spec.prePullImages`; reason [`PRE_PULL_PULLING_REASON`]) or a
    /// pull failed there (reason [`PRE_PULL_FAILED_REASON`]); the message names each node and,
    /// for a failure, the image and the kubelet's error. Removed once none is held.
    pub condition_pre_pull_held: &'static str,
    /// Label `"true"` on the pods that pull a node's package images before its cordon, beside
    /// [`Keys::name_label`] and [`Keys::node_label`].
    pub pre_pull_label: &'static str,
    /// Pre-pull pod annotation: the JSON list of the images it pulls, in container order.
    pub pre_pull_images_annotation: &'static str,
    /// Deprecated prefixed mirror of [`CONDITION_DRAIN_BLOCKED`], identical to it: ours before
    /// upstream v0.20 named the condition.
    pub condition_drain_blocked: &'static str,
    /// Condition set while the spec breaks the validation rules (the webhook was bypassed or
    /// is older); nothing of that Skyhook runs until it is fixed.
    pub condition_spec_invalid: &'static str,
    /// Node annotation `"true"` (node-scoped, no `_<skyhook>`): the node was cordoned when the
    /// runtime-required taint was removed, for a Skyhook setting `runtimeRequiredCordonAfter`.
    /// While it is there no Skyhook's release uncordons the node; an external actor releases
    /// it by removing the annotation and setting `unschedulable: false` in one patch, and the
    /// controller removes it from a node found schedulable.
    pub runtime_required_cordon_annotation: &'static str,
    /// The runtime-required taint the operator applies and removes unless configured otherwise
    /// (`RUNTIME_REQUIRED_TAINT`, chart value `runtimeRequiredTaint`), as `key=value:Effect`.
    pub default_runtime_required_taint: &'static str,
    /// Stage Job and pod-template label: the stage the Job runs (`apply`, `interrupt`, …).
    pub stage_label: &'static str,
    /// Stage Job and pod-template label: the node the Job runs on (longer names shortened as
    /// Job names are).
    pub node_label: &'static str,
    /// Stage Job and pod-template label: the Skyhook's `metadata.generation` at creation.
    pub generation_label: &'static str,
    /// Stage Job annotation: the full id of the run (Skyhook, package, version, stage, node),
    /// too long for a label.
    pub resource_id_annotation: &'static str,
    /// Stage Job annotation `"true"`: its end is written to the node state; never again.
    pub state_recorded_annotation: &'static str,
    /// Stage Job annotation: the stuck container's last log lines or waiting reason.
    pub last_logs_annotation: &'static str,
    /// Non-reboot interrupt Job annotation: how many restarts of its container are allowed.
    pub restart_allowance_annotation: &'static str,
    /// Non-reboot interrupt Job annotation: the restart count that spent the allowance.
    pub restart_limit_exceeded_annotation: &'static str,
}

/// The [`Keys`] of API group `$group`, whose workload kind is `$kind` (`$word` in lower case,
/// also the name part of its finalizer), every constant key spelled with `concat!` so that it
/// stays a `&'static str` usable in constants.
macro_rules! group_keys {
    ($group:literal, $kind:literal, $word:literal) => {
        Keys {
            group: $group,
            kind: $kind,
            word: $word,
            metric_name_label: concat!($word, "_name"),
            pause_annotation: concat!($group, "/pause"),
            disable_annotation: concat!($group, "/disable"),
            version_annotation: concat!($group, "/version"),
            finalizer: concat!($group, "/", $word),
            cordon_annotation_prefix: concat!($group, "/cordon_"),
            cordoned_at_prefix: concat!($group, "/cordonedAt_"),
            drain_start_prefix: concat!($group, "/drainStart_"),
            ignore_label: concat!($group, "/ignore"),
            name_label: concat!($group, "/name"),
            package_label: concat!($group, "/package"),
            package_annotation: concat!($group, "/package"),
            interrupt_label: concat!($group, "/interrupt"),
            node_meta_label: concat!($group, "/skyhook-node-meta"),
            package_name_annotation: concat!($group, "/Package.Name"),
            package_version_annotation: concat!($group, "/Package.Version"),
            node_name_annotation: concat!($group, "/Node.name"),
            boot_id_annotation: concat!($group, "/bootId"),
            condition_ready_prefixed: concat!($group, "/Ready"),
            condition_transition: concat!($group, "/Transition"),
            condition_apply_package: concat!($group, "/ApplyPackage"),
            condition_taint_not_tolerable: concat!($group, "/TaintNotTolerable"),
            condition_nodes_ignored: concat!($group, "/NodesIgnored"),
            condition_deployment_policy_not_found: concat!($group, "/DeploymentPolicyNotFound"),
            condition_reboot_not_confirmed: concat!($group, "/RebootNotConfirmed"),
            condition_fleet_budget_wait: concat!($group, "/WaitingForFleetBudget"),
            condition_outside_maintenance_window: concat!($group, "/OutsideMaintenanceWindow"),
            condition_health_gate_held: concat!($group, "/HealthGateHeld"),
            condition_window_budget_held: concat!($group, "/WindowBudgetHeld"),
            condition_readiness_gate_held: concat!($group, "/ReadinessGateHeld"),
            condition_topology_budget_held: concat!($group, "/TopologyBudgetHeld"),
            condition_pre_pull_held: concat!($group, "/PrePullHeld"),
            pre_pull_label: concat!($group, "/pre-pull"),
            pre_pull_images_annotation: concat!($group, "/pre-pull-images"),
            condition_drain_blocked: concat!($group, "/DrainBlocked"),
            condition_spec_invalid: concat!($group, "/SpecInvalid"),
            runtime_required_cordon_annotation: concat!($group, "/runtimeRequiredCordon"),
            default_runtime_required_taint: concat!($group, "=runtime-required:NoSchedule"),
            stage_label: concat!($group, "/stage"),
            node_label: concat!($group, "/node"),
            generation_label: concat!($group, "/generation"),
            resource_id_annotation: concat!($group, "/resource-id"),
            state_recorded_annotation: concat!($group, "/state-recorded"),
            last_logs_annotation: concat!($group, "/last-logs"),
            restart_allowance_annotation: concat!($group, "/restart-allowance"),
            restart_limit_exceeded_annotation: concat!($group, "/restart-limit-exceeded"),
        }
    };
}

/// The keys of `skyhook.nvidia.com`, the API group of the Skyhooks and DeploymentPolicies in
/// our seeds.
pub const SKYHOOK: Keys = group_keys!("skyhook.nvidia.com", "Skyhook", "skyhook");

/// The keys of `nodewright.nvidia.com`, upstream's API group since v0.18: the NodeWrights and
/// their DeploymentPolicies.
pub const NODEWRIGHT: Keys = group_keys!("nodewright.nvidia.com", "NodeWright", "nodewright");

impl Keys {
    /// A per-Skyhook key: `<group>/<kind>_<skyhook>`.
    fn per_skyhook(&self, kind: &str, skyhook: &str) -> String {
        format!("{}/{kind}_{skyhook}", self.group)
    }

    /// Node annotation holding the node-state JSON of Skyhook `skyhook` (the source of truth).
    pub fn node_state_annotation(&self, skyhook: &str) -> String {
        self.per_skyhook("nodeState", skyhook)
    }

    /// Node annotation **and** label holding the node's status for Skyhook `skyhook`.
    pub fn node_status_key(&self, skyhook: &str) -> String {
        self.per_skyhook("status", skyhook)
    }

    /// Node annotation `"true"`: Skyhook `skyhook` cordoned the node and owns that cordon.
    pub fn cordon_annotation(&self, skyhook: &str) -> String {
        format!("{}{skyhook}", self.cordon_annotation_prefix)
    }

    /// Node annotation: the operator version that last touched the node for Skyhook `skyhook`.
    pub fn node_version_annotation(&self, skyhook: &str) -> String {
        self.per_skyhook("version", skyhook)
    }

    /// Node annotation (RFC 3339): when Skyhook `skyhook` cordoned the node, so that the drain
    /// timeout survives controller restarts. Ours; upstream has no such key.
    pub fn cordoned_at_annotation(&self, skyhook: &str) -> String {
        format!("{}{skyhook}", self.cordoned_at_prefix)
    }

    /// Node annotation (RFC 3339): when a drain of Skyhook `skyhook` on the node timed out with
    /// `spec.drain.onTimeout: fail`. The node was uncordoned and its interrupting package
    /// marked `erroring` without an interrupt having run, so it holds no budget slot
    /// ([`crate::budget::slot_hold`]); the next cordon of the Skyhook removes it. Ours.
    pub fn drain_failed_annotation(&self, skyhook: &str) -> String {
        self.per_skyhook("drainFail", skyhook)
    }

    /// Node annotation (RFC 3339 with nanoseconds): when the drain of Skyhook `skyhook` on the
    /// node started, the first pass that found the node not drained; `drainConfig.timeout` is
    /// measured from it. Removed once the node is drained. Upstream v0.18.
    pub fn drain_start_annotation(&self, skyhook: &str) -> String {
        format!("{}{skyhook}", self.drain_start_prefix)
    }

    /// Node annotation (JSON array of `{namespace, name, reason, detail?}`, see
    /// [`crate::drain::BlockedPod`]): the pods that keep Skyhook `skyhook`'s drain of the node
    /// from progressing. Removed once none does. Upstream v0.20.
    pub fn drain_blocked_annotation(&self, skyhook: &str) -> String {
        self.per_skyhook("drainBlocked", skyhook)
    }

    /// Node annotation (JSON, see [`crate::transition::TransitionTimes`]): when each entry of
    /// Skyhook `skyhook`'s node state entered its stage and state, for stage durations, the
    /// health gate and the plugin's ETA. Ours: kept beside `nodeState_<skyhook>`, which stays
    /// exactly upstream's JSON.
    pub fn stage_times_annotation(&self, skyhook: &str) -> String {
        self.per_skyhook("stageTimes", skyhook)
    }

    /// Node annotation (JSON, [`crate::readiness::GateRecord`]): when an interrupt of Skyhook
    /// `skyhook` began on the node and since when its `spec.readinessGates` hold the node.
    /// Ours; present from the interrupt until the node completes.
    pub fn ready_gate_annotation(&self, skyhook: &str) -> String {
        self.per_skyhook("readyGate", skyhook)
    }

    /// Node annotation: the boot ID Skyhook `skyhook` last saw on the node, to detect reboots
    /// (spec §2.11). Ours: upstream keeps it only in `status.nodeBootIds`, which a status over
    /// thousands of nodes can no longer hold ([`crate::node_mirror`]).
    pub fn node_boot_id_annotation(&self, skyhook: &str) -> String {
        self.per_skyhook("bootId", skyhook)
    }

    /// Node annotation (RFC 3339, whole seconds): when Skyhook `skyhook` picked the node for
    /// its current batch; present while the node keeps its batch slot (spec §2.4, batch
    /// stickiness). Ours: upstream keeps it only in `status.nodePriority`
    /// ([`crate::node_mirror`]).
    pub fn node_picked_annotation(&self, skyhook: &str) -> String {
        self.per_skyhook("pickedAt", skyhook)
    }

    /// Node annotation: the UID of the object of this group that adopted the node state
    /// another group's object of the same name left on the node (a migration between the two
    /// API groups). Present once the copy is done, so it is never done twice. Ours.
    pub fn adopted_by_annotation(&self, skyhook: &str) -> String {
        self.per_skyhook("adoptedBy", skyhook)
    }

    /// Node annotation `"true"`: the operator added the taint with key `taint_key` to a new
    /// node. The suffix is the taint key, not a Skyhook name.
    pub fn auto_taint_annotation(&self, taint_key: &str) -> String {
        self.per_skyhook("autoTaint", taint_key)
    }

    /// Whether the node annotation or label `key` belongs to Skyhook `skyhook`: it starts with
    /// `<group>/` and ends with `_<skyhook>`. The auto-taint annotation is never one, even when
    /// the taint key happens to equal the Skyhook's name (upstream's cleanup removed it then).
    pub fn is_skyhook_node_key(&self, key: &str, skyhook: &str) -> bool {
        let Some(rest) = key
            .strip_prefix(self.group)
            .and_then(|r| r.strip_prefix('/'))
        else {
            return false;
        };
        !rest.starts_with("autoTaint_")
            && rest
                .strip_suffix(skyhook)
                .is_some_and(|head| head.ends_with('_'))
    }

    /// The prefix of every node condition type of Skyhook `skyhook`: `<group>/<s>/`.
    pub fn node_condition_prefix(&self, skyhook: &str) -> String {
        format!("{}/{skyhook}/", self.group)
    }

    /// Whether node condition type `type_` is one some Skyhook sets (`<group>/<s>/...`): the
    /// only node conditions the controller reads whole (of the kubelet's, it reads whether and
    /// since when the node is Ready).
    pub fn is_skyhook_node_condition(&self, type_: &str) -> bool {
        type_
            .strip_prefix(self.group)
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(skyhook, condition)| !skyhook.is_empty() && !condition.is_empty())
    }

    /// Node condition type: True (reason [`NODE_NOT_READY_REASON_INCOMPLETE`]) while Skyhook
    /// `skyhook` is incomplete on the node.
    pub fn node_not_ready_condition(&self, skyhook: &str) -> String {
        format!("{}NotReady", self.node_condition_prefix(skyhook))
    }

    /// Node condition type: True (reason [`NODE_ERRORING_REASON`]) while a package of Skyhook
    /// `skyhook` is erroring or unknown on the node.
    pub fn node_erroring_condition(&self, skyhook: &str) -> String {
        format!("{}Erroring", self.node_condition_prefix(skyhook))
    }

    /// Message of the node `NotReady` condition of object `name`: upstream's `Skyhook <name>
    /// Ready` (`NodeWright <name> Ready` for its NodeWrights) once it is complete on the node,
    /// and the counterpart `… Not Ready` while it is not (upstream's text for that case is not
    /// recorded; see docs/compatibility.md).
    pub fn node_not_ready_message(&self, name: &str, complete: bool) -> String {
        if complete {
            format!("{} {name} Ready", self.kind)
        } else {
            format!("{} {name} Not Ready", self.kind)
        }
    }

    /// Message of the node `Erroring` condition of object `name`: upstream's `Package Erroring
    /// or Unknown for <name>` (the same for both groups) while a package is erroring or unknown
    /// on the node, and the counterpart `No Package Erroring or Unknown for <name>` otherwise
    /// (upstream's text for that case is not recorded; see docs/compatibility.md).
    pub fn node_erroring_message(&self, name: &str, erroring: bool) -> String {
        if erroring {
            format!("Package Erroring or Unknown for {name}")
        } else {
            format!("No Package Erroring or Unknown for {name}")
        }
    }

    /// Every node annotation, label and condition type the controller writes for Skyhook
    /// `skyhook`: what a node reset or the deletion cleanup removes, and what bounds the length
    /// of a Skyhook name ([`Keys::max_skyhook_name_len`]). A new per-Skyhook key must be added
    /// here.
    pub fn per_skyhook_node_keys(&self, skyhook: &str) -> [NodeKey; 15] {
        let key = |key: String, kind: NodeKeyKind| NodeKey { key, kind };
        [
            key(self.node_state_annotation(skyhook), NodeKeyKind::Annotation),
            key(
                self.node_status_key(skyhook),
                NodeKeyKind::AnnotationAndLabel,
            ),
            key(self.cordon_annotation(skyhook), NodeKeyKind::Annotation),
            key(
                self.node_version_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.cordoned_at_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.drain_failed_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.drain_start_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.drain_blocked_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.node_boot_id_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.node_picked_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.stage_times_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(self.adopted_by_annotation(skyhook), NodeKeyKind::Annotation),
            key(self.ready_gate_annotation(skyhook), NodeKeyKind::Annotation),
            key(
                self.node_not_ready_condition(skyhook),
                NodeKeyKind::ConditionType,
            ),
            key(
                self.node_erroring_condition(skyhook),
                NodeKeyKind::ConditionType,
            ),
        ]
    }

    /// The per-Skyhook node keys a reboot reset (`REAPPLY_ON_REBOOT`) removes, so that every
    /// package of Skyhook `skyhook` runs again on the rebooted node: its node state, status
    /// (annotation and label), operator version, drain starts (upstream's `drainStart_` and our
    /// `cordonedAt_`), drain blockers, drain-failure mark and readiness-gate record (the re-run's interrupt starts a new one), as upstream's reset removes
    /// `nodeState_`, `status_`, `version_` and `drainStart_`: the re-run drains afresh. Every
    /// key of [`Keys::per_skyhook_node_keys`] is either here or in
    /// [`Keys::reboot_reset_keeps`].
    pub fn reboot_reset_node_keys(&self, skyhook: &str) -> [NodeKey; 8] {
        let key = |key: String, kind: NodeKeyKind| NodeKey { key, kind };
        [
            key(self.node_state_annotation(skyhook), NodeKeyKind::Annotation),
            key(
                self.node_status_key(skyhook),
                NodeKeyKind::AnnotationAndLabel,
            ),
            key(
                self.node_version_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.cordoned_at_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.drain_failed_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.drain_start_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.drain_blocked_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(self.ready_gate_annotation(skyhook), NodeKeyKind::Annotation),
        ]
    }

    /// The per-Skyhook node keys a reboot reset keeps: the cordon (upstream v0.20 keeps
    /// `cordon_<skyhook>` so that the re-run, which finds the node already cordoned by it,
    /// releases the cordon when it completes); the boot ID just seen (a reboot is detected
    /// against it); when the node was picked (it keeps its batch slot, as upstream's
    /// `nodePriority` survives the reset); the stage times (rewritten from the reset node state
    /// in the same pass); the adoption mark (the node's state is still this object's after a
    /// reset); and the node conditions (recomputed in the same pass).
    pub fn reboot_reset_keeps(&self, skyhook: &str) -> [NodeKey; 7] {
        let key = |key: String, kind: NodeKeyKind| NodeKey { key, kind };
        [
            key(self.cordon_annotation(skyhook), NodeKeyKind::Annotation),
            key(self.adopted_by_annotation(skyhook), NodeKeyKind::Annotation),
            key(
                self.node_boot_id_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.node_picked_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.stage_times_annotation(skyhook),
                NodeKeyKind::Annotation,
            ),
            key(
                self.node_not_ready_condition(skyhook),
                NodeKeyKind::ConditionType,
            ),
            key(
                self.node_erroring_condition(skyhook),
                NodeKeyKind::ConditionType,
            ),
        ]
    }

    /// The longest Skyhook name whose every per-Skyhook annotation and label key
    /// ([`Keys::per_skyhook_node_keys`]) is valid, and which fits the label values that carry
    /// the name ([`Keys::name_label`], [`Keys::node_meta_label`]). Computed from the keys
    /// themselves, so a new or longer key lowers it rather than breaking every node patch of a
    /// long-named Skyhook.
    pub fn max_skyhook_name_len(&self) -> usize {
        self.per_skyhook_node_keys("")
            .iter()
            .filter(|k| k.kind != NodeKeyKind::ConditionType)
            .map(|k| {
                let name_part = k.key.rsplit_once('/').map_or(k.key.as_str(), |(_, n)| n);
                MAX_QUALIFIED_NAME_PART.saturating_sub(name_part.len())
            })
            .fold(MAX_QUALIFIED_NAME_PART, usize::min)
    }
}

/// The operator version we write into [`Keys::version_annotation`] and `version_<skyhook>`:
/// the upstream release whose node state and behaviour we are compatible with. Upstream tools
/// read these annotations (its operator to decide on migrations, its CLI to refuse pausing
/// operators older than v0.8.0), so our own crate version, which follows a different
/// numbering, must not appear there.
pub const COMPATIBLE_OPERATOR_VERSION: &str = "v0.13.0";

/// The operator-version marker to write over `current` (the Skyhook's
/// [`Keys::version_annotation`] or a node's `version_<skyhook>`): ours
/// ([`COMPATIBLE_OPERATOR_VERSION`]) where there is none, or an older one, or one that is not a
/// version; `None` (leave it) where it is ours or newer. Upstream reads the marker to decide
/// which migrations to run when it takes the cluster back, so a marker left by a newer upstream
/// operator must never be lowered. Versions are compared as semver, with or without their `v`.
pub fn operator_version_to_write(current: Option<&str>) -> Option<&'static str> {
    use std::cmp::Ordering;
    let parse = |text: &str| crate::version::Version::parse(text.strip_prefix('v').unwrap_or(text));
    let Some(current) = current.and_then(|text| parse(text).ok()) else {
        return Some(COMPATIBLE_OPERATOR_VERSION);
    };
    let ours = parse(COMPATIBLE_OPERATOR_VERSION).ok()?;
    (current.cmp_precedence(&ours) == Ordering::Less).then_some(COMPATIBLE_OPERATOR_VERSION)
}

/// Where the controller writes a per-Skyhook node key, which decides the limits it must meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKeyKind {
    /// A node annotation key: a qualified name whose name part is at most 63 characters.
    Annotation,
    /// Both a node annotation key and a node label key: a qualified name as above.
    AnnotationAndLabel,
    /// A node condition type. The API server does not validate node condition types, so they
    /// put no bound on the Skyhook name; they are listed for cleanup.
    ConditionType,
}

/// One key the controller writes on nodes for one Skyhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeKey {
    /// The full key, e.g. `skyhook.nvidia.com/nodeState_demo`.
    pub key: String,
    /// Where it is written.
    pub kind: NodeKeyKind,
}

/// The longest name part of a qualified annotation or label key (after `prefix/`), and the
/// longest label value.
pub const MAX_QUALIFIED_NAME_PART: usize = 63;

/// Reason of the node `NotReady` condition while True.
pub const NODE_NOT_READY_REASON_INCOMPLETE: &str = "Incomplete";
/// Reason of the node `NotReady` condition while False.
pub const NODE_NOT_READY_REASON_COMPLETE: &str = "Complete";
/// Reason of the node `Erroring` condition while True.
pub const NODE_ERRORING_REASON: &str = "Package(s) Erroring or Unknown";
/// Reason of the node `Erroring` condition while False.
pub const NODE_NOT_ERRORING_REASON: &str = "Not Erroring";

// ---- Pods and ConfigMaps the operator creates ----------------------------------------------

/// Value of [`Keys::interrupt_label`].
pub const INTERRUPT_LABEL_VALUE: &str = "True";

/// Value of [`Keys::pre_pull_label`].
pub const PRE_PULL_LABEL_VALUE: &str = "true";

impl Keys {
    /// Whether a pod with `labels` is one that pulls images before a cordon: it runs no
    /// package stage, so no rule about a Skyhook's pods on a node counts it.
    pub fn is_pre_pull_pod(
        &self,
        labels: Option<&std::collections::BTreeMap<String, String>>,
    ) -> bool {
        labels
            .and_then(|l| l.get(self.pre_pull_label))
            .is_some_and(|value| value == PRE_PULL_LABEL_VALUE)
    }
}

// ---- Environment of the agent containers ----------------------------------------------------

/// Agent and copy-container env: the package's copy directory on the host.
pub const ENV_SKYHOOK_DIR: &str = "SKYHOOK_DIR";
/// Agent env: `<AGENT_LOG_ROOT>/<skyhook>`.
pub const ENV_SKYHOOK_LOG_DIR: &str = "SKYHOOK_LOG_DIR";
/// Agent env: `<COPY_DIR_ROOT>/<skyhook>`.
pub const ENV_SKYHOOK_ROOT_DIR: &str = "SKYHOOK_ROOT_DIR";
/// Agent env: always `false`.
pub const ENV_COPY_RESOLV: &str = "COPY_RESOLV";
/// Agent env: `<skyhook>-<uid>-<generation>_<package>_<version>`, the key of interrupt flags.
pub const ENV_SKYHOOK_RESOURCE_ID: &str = "SKYHOOK_RESOURCE_ID";
/// Agent environment: the node's place in the Skyhook's rollout order, a decimal that only grows
/// across batches (see [`crate::budget::node_orders`]).
pub const ENV_SKYHOOK_NODE_ORDER: &str = "SKYHOOK_NODE_ORDER";
/// The environment variables the operator injects into agent containers, in the order it adds
/// them after the package's own `env`. A pod is compared with the spec without them.
pub const OPERATOR_AGENT_ENV: [&str; 5] = [
    ENV_SKYHOOK_LOG_DIR,
    ENV_SKYHOOK_ROOT_DIR,
    ENV_COPY_RESOLV,
    ENV_SKYHOOK_RESOURCE_ID,
    ENV_SKYHOOK_NODE_ORDER,
];

// ---- Skyhook condition types ---------------------------------------------------------------

/// Standard condition: True once the Skyhook is complete on every selected node, for
/// `kubectl wait --for=condition=Ready` and GitOps tools.
pub const CONDITION_READY: &str = "Ready";
/// The bare types written beside [`Keys::condition_apply_package`], [`Keys::condition_taint_not_tolerable`],
/// [`Keys::condition_nodes_ignored`] and [`Keys::condition_deployment_policy_not_found`], which upstream
/// deprecated but still writes for one release. Each pair always carries the same condition.
pub const CONDITION_APPLY_PACKAGE_BARE: &str = "ApplyPackage";
/// See [`CONDITION_APPLY_PACKAGE_BARE`].
pub const CONDITION_TAINT_NOT_TOLERABLE_BARE: &str = "TaintNotTolerable";
/// See [`CONDITION_APPLY_PACKAGE_BARE`].
pub const CONDITION_NODES_IGNORED_BARE: &str = "NodesIgnored";
/// See [`CONDITION_APPLY_PACKAGE_BARE`].
pub const CONDITION_DEPLOYMENT_POLICY_NOT_FOUND_BARE: &str = "DeploymentPolicyNotFound";
/// Reason of [`Keys::condition_taint_not_tolerable`], True or False (upstream: the type's last
/// segment either way).
pub const TAINT_NOT_TOLERABLE_REASON: &str = "TaintNotTolerable";
/// Message of [`Keys::condition_taint_not_tolerable`] while False.
pub const ALL_TAINTS_TOLERABLE_MESSAGE: &str = "All nodes have tolerable taints.";
/// Reason of [`Keys::condition_nodes_ignored`], True or False (upstream: the type's last segment
/// either way).
pub const NODES_IGNORED_REASON: &str = "NodesIgnored";
/// Message of [`Keys::condition_nodes_ignored`] while False.
pub const NO_NODES_IGNORED_MESSAGE: &str = "No nodes have ignore label set.";
/// Reason of [`Keys::condition_apply_package`].
pub const APPLY_PACKAGE_REASON: &str = "ApplyPackage";

/// Message of [`Keys::condition_apply_package`] (upstream's, without the stage): the package and node
/// of the last pod launch.
pub fn apply_package_message(package: &str, version: &str, node: &str) -> String {
    format!("Applying package [{package}:{version}] to node [{node}]")
}

/// Reason of [`Keys::condition_fleet_budget_wait`].
pub const FLEET_BUDGET_FULL_REASON: &str = "FleetBudgetFull";

/// Reason of [`Keys::condition_outside_maintenance_window`].
pub const MAINTENANCE_WINDOW_CLOSED_REASON: &str = "MaintenanceWindowClosed";

/// Reason of [`Keys::condition_health_gate_held`].
pub const HEALTH_GATE_HELD_REASON: &str = "NodeNotSettled";

/// Reason of [`Keys::condition_window_budget_held`].
pub const WINDOW_BUDGET_FULL_REASON: &str = "WindowBudgetFull";

/// Reason of [`Keys::condition_readiness_gate_held`] while no gate is past its timeout.
pub const READINESS_GATE_WAITING_REASON: &str = "WaitingForNodeCondition";

/// Reason of [`Keys::condition_readiness_gate_held`] once a gate of a held node timed out.
pub const READINESS_GATE_TIMED_OUT_REASON: &str = "ReadinessGateTimedOut";

/// Reason of [`Keys::condition_topology_budget_held`] while nodes wait for their domain.
pub const TOPOLOGY_DOMAINS_BUSY_REASON: &str = "DomainsBusy";

/// Reason of [`Keys::condition_topology_budget_held`] while nodes lack the topology label.
pub const TOPOLOGY_LABEL_MISSING_REASON: &str = "TopologyLabelMissing";

/// Reason of [`Keys::condition_pre_pull_held`] while every held node is still pulling.
pub const PRE_PULL_PULLING_REASON: &str = "PullingImages";

/// Reason of [`Keys::condition_pre_pull_held`] once a pull failed on a held node.
pub const PRE_PULL_FAILED_REASON: &str = "ImagePullFailed";

/// Condition (upstream v0.20): True while some selected node's drain cannot progress; the
/// reason is one of the `DRAIN_BLOCKED_*` reasons, the message
/// [`crate::drain::drain_blocked_message`]. Removed once no drain is blocked.
pub const CONDITION_DRAIN_BLOCKED: &str = "DrainBlocked";
/// [`CONDITION_DRAIN_BLOCKED`] reason: a PodDisruptionBudget refuses an eviction.
pub const DRAIN_BLOCKED_PDB_REASON: &str = "PodDisruptionBudget";
/// [`CONDITION_DRAIN_BLOCKED`] reason: a pod no controller owns, with `drainConfig.force: false`.
pub const DRAIN_BLOCKED_UNMANAGED_REASON: &str = "UnmanagedPod";
/// [`CONDITION_DRAIN_BLOCKED`] reason: a pod with `emptyDir` data, with
/// `drainConfig.deleteEmptyDirData: false`.
pub const DRAIN_BLOCKED_EMPTY_DIR_REASON: &str = "EmptyDirData";
/// [`CONDITION_DRAIN_BLOCKED`] reason: blockers of more than one kind.
pub const DRAIN_BLOCKED_MULTIPLE_REASON: &str = "MultipleCauses";
/// Reason of [`CONDITION_BLOCKED`] while pods matching `podNonInterruptLabels` hold nodes
/// (upstream v0.20).
pub const NON_INTERRUPT_PODS_RUNNING_REASON: &str = "NonInterruptPodsRunning";

// ---- Explicit uninstall and deletion conditions (bare types only, upstream §2.9) ----------

/// Condition: True while some node has a spec package in its uninstall cycle (`uninstall` or
/// `uninstall-interrupt`); removed once none has.
pub const CONDITION_UNINSTALL_IN_PROGRESS: &str = "UninstallInProgress";
/// Reason of [`CONDITION_UNINSTALL_IN_PROGRESS`].
pub const UNINSTALL_IN_PROGRESS_REASON: &str = "UninstallInProgress";
/// Condition: True while such an uninstall entry is `erroring`.
pub const CONDITION_UNINSTALL_FAILED: &str = "UninstallFailed";
/// Reason of [`CONDITION_UNINSTALL_FAILED`].
pub const UNINSTALL_FAILED_REASON: &str = "UninstallPodFailing";
/// Condition: True while a package cannot run because a package it depends on is being, or
/// has been, uninstalled.
pub const CONDITION_BLOCKED: &str = "Blocked";
/// Reason of [`CONDITION_BLOCKED`].
pub const DEPENDENCY_UNINSTALLED_REASON: &str = "DependencyUninstalled";
/// Condition: True while some node's `nodeState_<skyhook>` annotation does not parse.
pub const CONDITION_NODE_STATE_MALFORMED: &str = "NodeStateMalformed";
/// Reason of [`CONDITION_NODE_STATE_MALFORMED`].
pub const NODE_STATE_MALFORMED_REASON: &str = "ParseError";
/// Condition (ours) on an object whose twin of the other API group does its name's work: True
/// (reason [`MIGRATED_REASON_OWNED_BY_TWIN`]) while the twin is live, False (reason
/// [`MIGRATED_REASON_WAITING`]) on an object waiting to take a name over from its busy twin.
pub const CONDITION_MIGRATED: &str = "Migrated";
/// [`CONDITION_MIGRATED`] reason: the twin owns the name; this object runs nothing.
pub const MIGRATED_REASON_OWNED_BY_TWIN: &str = "OwnedByTwin";
/// [`CONDITION_MIGRATED`] reason: the twin is mid-rollout or has a stage in flight.
pub const MIGRATED_REASON_WAITING: &str = "WaitingForTwin";
/// Condition: True while a deleted Skyhook waits before it can uninstall and clean its nodes;
/// also the reason of its Warning Event.
pub const CONDITION_DELETION_BLOCKED: &str = "DeletionBlocked";
/// [`CONDITION_DELETION_BLOCKED`] reason: a node's state is unreadable.
pub const DELETION_BLOCKED_MALFORMED_REASON: &str = "MalformedNodeState";
/// [`CONDITION_DELETION_BLOCKED`] reason: the Skyhook is paused with uninstalls pending.
pub const DELETION_BLOCKED_PAUSED_REASON: &str = "PausedWithPendingUninstall";
/// [`CONDITION_DELETION_BLOCKED`] reason: the Skyhook is disabled with uninstalls pending.
pub const DELETION_BLOCKED_DISABLED_REASON: &str = "DisabledWithPendingUninstall";
/// [`CONDITION_DELETION_BLOCKED`] reason: an uninstall the deletion waits for cannot run, or
/// keeps failing, because its package is `erroring` on some nodes. Ours: upstream's deletion
/// waits there without a word (a known issue it documents).
pub const DELETION_BLOCKED_ERRORING_REASON: &str = "ErroringWithPendingUninstall";

// ---- Rollout names -------------------------------------------------------------------------

/// Name of the compartment holding the nodes no compartment selects, and of the single
/// compartment of a Skyhook without a DeploymentPolicy. Reserved in policies.
pub const DEFAULT_COMPARTMENT: &str = "__default__";
/// `policy_name` metric label of a Skyhook without a DeploymentPolicy.
pub const LEGACY_POLICY_NAME: &str = "legacy";

#[cfg(test)]
mod tests {
    use super::*;

    /// Every per-Skyhook node key is classified for the reboot reset, exactly once: a new key
    /// must say whether a reboot removes it.
    #[test]
    fn a_pre_pull_pod_is_told_by_its_label_value() {
        use std::collections::BTreeMap;
        let labels =
            |value: &str| BTreeMap::from([(SKYHOOK.pre_pull_label.to_owned(), value.to_owned())]);
        assert!(SKYHOOK.is_pre_pull_pod(Some(&labels("true"))));
        assert!(!SKYHOOK.is_pre_pull_pod(Some(&labels("false"))));
        assert!(!SKYHOOK.is_pre_pull_pod(None));
        assert!(
            !NODEWRIGHT.is_pre_pull_pod(Some(&labels("true"))),
            "another group's label"
        );
    }

    #[test]
    fn reboot_reset_classifies_every_node_key() {
        let all: Vec<NodeKey> = SKYHOOK.per_skyhook_node_keys("demo").to_vec();
        let removed = SKYHOOK.reboot_reset_node_keys("demo");
        let kept = SKYHOOK.reboot_reset_keeps("demo");
        let classified: Vec<&NodeKey> = removed.iter().chain(kept.iter()).collect();
        assert_eq!(
            classified.len(),
            all.len(),
            "no key classified that is not a node key"
        );
        for key in &all {
            let times = classified.iter().filter(|c| **c == key).count();
            assert_eq!(times, 1, "{key:?} is classified {times} times");
        }
        assert!(
            kept.iter()
                .any(|k| k.key == "skyhook.nvidia.com/cordon_demo")
        );
        assert!(removed.iter().all(|k| k.kind != NodeKeyKind::ConditionType));
    }

    #[test]
    fn node_keys_of_a_skyhook() {
        let cases = [
            ("skyhook.nvidia.com/nodeState_gpu", true),
            ("skyhook.nvidia.com/status_gpu", true),
            ("skyhook.nvidia.com/cordonedAt_gpu", true),
            ("skyhook.nvidia.com/bootId_gpu", true),
            ("skyhook.nvidia.com/pickedAt_gpu", true),
            ("skyhook.nvidia.com/status_other-gpu", false),
            ("skyhook.nvidia.com/status_gpu2", false),
            ("skyhook.nvidia.com/autoTaint_gpu", false),
            ("example.com/status_gpu", false),
            ("skyhook.nvidia.com/gpu", false),
        ];
        for (key, expected) in cases {
            assert_eq!(SKYHOOK.is_skyhook_node_key(key, "gpu"), expected, "{key}");
        }
    }

    #[test]
    fn node_conditions_of_skyhooks() {
        let cases = [
            (SKYHOOK.node_not_ready_condition("gpu"), true),
            (SKYHOOK.node_erroring_condition("other"), true),
            ("Ready".to_owned(), false),
            ("MemoryPressure".to_owned(), false),
            ("skyhook.nvidia.com/gpu".to_owned(), false),
            ("skyhook.nvidia.com//NotReady".to_owned(), false),
            ("skyhook.nvidia.com/gpu/".to_owned(), false),
            ("skyhook.nvidia.comx/gpu/NotReady".to_owned(), false),
            ("example.com/gpu/NotReady".to_owned(), false),
        ];
        for (type_, expected) in cases {
            assert_eq!(
                SKYHOOK.is_skyhook_node_condition(&type_),
                expected,
                "{type_}"
            );
        }
    }

    #[test]
    fn per_skyhook_keys_match_upstream_spelling() {
        let cases: [(String, &str); 7] = [
            (
                SKYHOOK.node_state_annotation("demo"),
                "skyhook.nvidia.com/nodeState_demo",
            ),
            (
                SKYHOOK.node_status_key("demo"),
                "skyhook.nvidia.com/status_demo",
            ),
            (
                SKYHOOK.cordon_annotation("demo"),
                "skyhook.nvidia.com/cordon_demo",
            ),
            (
                SKYHOOK.node_version_annotation("demo"),
                "skyhook.nvidia.com/version_demo",
            ),
            (
                SKYHOOK.auto_taint_annotation("skyhook.nvidia.com"),
                "skyhook.nvidia.com/autoTaint_skyhook.nvidia.com",
            ),
            (
                SKYHOOK.node_not_ready_condition("demo"),
                "skyhook.nvidia.com/demo/NotReady",
            ),
            (
                SKYHOOK.node_erroring_condition("demo"),
                "skyhook.nvidia.com/demo/Erroring",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
        assert!(
            SKYHOOK
                .cordon_annotation("x")
                .starts_with(SKYHOOK.cordon_annotation_prefix)
        );
        assert_eq!(
            SKYHOOK.cordoned_at_annotation("demo"),
            "skyhook.nvidia.com/cordonedAt_demo"
        );
        assert_eq!(
            SKYHOOK.node_boot_id_annotation("demo"),
            "skyhook.nvidia.com/bootId_demo"
        );
        assert_eq!(
            SKYHOOK.node_picked_annotation("demo"),
            "skyhook.nvidia.com/pickedAt_demo"
        );
    }

    #[test]
    fn every_per_skyhook_key_is_listed_once_and_names_its_skyhook() {
        let keys = SKYHOOK.per_skyhook_node_keys("demo");
        let mut spelled: Vec<&str> = keys.iter().map(|k| k.key.as_str()).collect();
        spelled.sort_unstable();
        spelled.dedup();
        assert_eq!(spelled.len(), keys.len());
        for key in &keys {
            assert!(key.key.starts_with("skyhook.nvidia.com/"), "{key:?}");
            assert!(key.key.contains("demo"), "{key:?}");
            assert!(
                !SKYHOOK
                    .per_skyhook_node_keys("other")
                    .iter()
                    .any(|o| o.key == key.key)
            );
        }
    }

    /// Upstream v0.20's spelling of the nodewright group's keys (delta §1.1, §1.7), which a
    /// takeover of a v0.20 cluster reads from its nodes, Jobs and ConfigMaps.
    #[test]
    fn nodewright_keys_match_upstream_v0_20() {
        let keys = NODEWRIGHT;
        let cases: [(String, &str); 12] = [
            (
                keys.node_state_annotation("n"),
                "nodewright.nvidia.com/nodeState_n",
            ),
            (keys.node_status_key("n"), "nodewright.nvidia.com/status_n"),
            (
                keys.node_version_annotation("n"),
                "nodewright.nvidia.com/version_n",
            ),
            (
                keys.cordon_annotation("n"),
                "nodewright.nvidia.com/cordon_n",
            ),
            (
                keys.drain_start_annotation("n"),
                "nodewright.nvidia.com/drainStart_n",
            ),
            (
                keys.drain_blocked_annotation("n"),
                "nodewright.nvidia.com/drainBlocked_n",
            ),
            (
                keys.auto_taint_annotation("nodewright.nvidia.com"),
                "nodewright.nvidia.com/autoTaint_nodewright.nvidia.com",
            ),
            (
                keys.node_not_ready_condition("n"),
                "nodewright.nvidia.com/n/NotReady",
            ),
            (
                keys.node_erroring_condition("n"),
                "nodewright.nvidia.com/n/Erroring",
            ),
            (keys.node_not_ready_message("n", true), "NodeWright n Ready"),
            (
                keys.node_erroring_message("n", true),
                "Package Erroring or Unknown for n",
            ),
            (SKYHOOK.node_not_ready_message("n", true), "Skyhook n Ready"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
        let constants = [
            (keys.finalizer, "nodewright.nvidia.com/nodewright"),
            (keys.pause_annotation, "nodewright.nvidia.com/pause"),
            (keys.disable_annotation, "nodewright.nvidia.com/disable"),
            (keys.version_annotation, "nodewright.nvidia.com/version"),
            (keys.ignore_label, "nodewright.nvidia.com/ignore"),
            (
                keys.runtime_required_cordon_annotation,
                "nodewright.nvidia.com/runtimeRequiredCordon",
            ),
            (keys.name_label, "nodewright.nvidia.com/name"),
            (keys.package_label, "nodewright.nvidia.com/package"),
            (keys.stage_label, "nodewright.nvidia.com/stage"),
            (keys.node_label, "nodewright.nvidia.com/node"),
            (keys.generation_label, "nodewright.nvidia.com/generation"),
            (keys.interrupt_label, "nodewright.nvidia.com/interrupt"),
            (keys.pre_pull_label, "nodewright.nvidia.com/pre-pull"),
            (
                keys.pre_pull_images_annotation,
                "nodewright.nvidia.com/pre-pull-images",
            ),
            (
                keys.condition_pre_pull_held,
                "nodewright.nvidia.com/PrePullHeld",
            ),
            (
                keys.resource_id_annotation,
                "nodewright.nvidia.com/resource-id",
            ),
            (
                keys.state_recorded_annotation,
                "nodewright.nvidia.com/state-recorded",
            ),
            (keys.last_logs_annotation, "nodewright.nvidia.com/last-logs"),
            (
                keys.restart_allowance_annotation,
                "nodewright.nvidia.com/restart-allowance",
            ),
            (
                keys.restart_limit_exceeded_annotation,
                "nodewright.nvidia.com/restart-limit-exceeded",
            ),
            (
                keys.node_meta_label,
                "nodewright.nvidia.com/skyhook-node-meta",
            ),
            (
                keys.package_name_annotation,
                "nodewright.nvidia.com/Package.Name",
            ),
            (
                keys.package_version_annotation,
                "nodewright.nvidia.com/Package.Version",
            ),
            (keys.node_name_annotation, "nodewright.nvidia.com/Node.name"),
            (
                keys.condition_apply_package,
                "nodewright.nvidia.com/ApplyPackage",
            ),
            (
                keys.condition_transition,
                "nodewright.nvidia.com/Transition",
            ),
        ];
        for (got, want) in constants {
            assert_eq!(got, want);
        }
        assert_eq!(NODEWRIGHT.max_skyhook_name_len(), 50);
        for key in NODEWRIGHT.per_skyhook_node_keys("n") {
            assert!(
                NODEWRIGHT.is_skyhook_node_key(&key.key, "n")
                    || key.kind == NodeKeyKind::ConditionType,
                "{key:?}"
            );
            assert!(!SKYHOOK.is_skyhook_node_key(&key.key, "n"), "{key:?}");
        }
    }

    /// `drainBlocked_` (13 characters) is the longest name-part prefix: 63 - 13 = 50, which
    /// is upstream's limit since v0.20 for the same reason.
    #[test]
    fn the_name_limit_comes_from_the_longest_key() {
        assert_eq!(SKYHOOK.max_skyhook_name_len(), 50);
    }

    #[test]
    fn the_operator_version_marker_is_never_lowered() {
        let ours = Some(COMPATIBLE_OPERATOR_VERSION);
        let cases = [
            (None, ours),
            (Some(""), ours),
            (Some("not a version"), ours),
            (Some("v0.12.3"), ours),
            (Some("0.9.0"), ours),
            (Some("v0.13.0-rc.1"), ours),
            (Some(COMPATIBLE_OPERATOR_VERSION), None),
            (Some("0.13.0"), None),
            // Written by a newer upstream operator: it decides migrations from it.
            (Some("v0.13.1"), None),
            (Some("v0.20.0"), None),
            (Some("v1.0.0"), None),
        ];
        for (current, expected) in cases {
            assert_eq!(operator_version_to_write(current), expected, "{current:?}");
        }
    }
}
