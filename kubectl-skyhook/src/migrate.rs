//! `migrate`: moving a workload between `skyhook.nvidia.com` and `nodewright.nvidia.com` with
//! no step run again (the pure part). The plugin converts the object, marks the source as
//! handing its name over, creates the target, waits until the operator reports the source
//! inert and every node carrying the source's keys adopted by the target, and then deletes the
//! source (which the operator lets go without uninstalling anything; see docs/migration.md).

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};
use skyhook_api::generation::{Group, handoff_annotation};
use skyhook_api::keys;
use skyhook_api::migration::{ConvertError, Converted, convert, mirrored_from_annotation};
use skyhook_api::v1alpha1::{Skyhook, Status};

/// Why a migration does not go on. Each message names the object and says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigrateError {
    /// The source is mid-rollout: its work would change hands half done.
    #[error(
        "{kind} {name:?} is {status}: a workload moves to the other API group only once it is complete, paused or disabled; wait until `kubectl {plugin} status {name}` says complete, or pause it, and run migrate again"
    )]
    Busy {
        /// The source's kind.
        kind: &'static str,
        /// Its name.
        name: String,
        /// Its status.
        status: String,
        /// The plugin name of the source's group.
        plugin: &'static str,
    },
    /// An object of the target group and the name exists that no migration of this source
    /// made: it may be a user's or GitOps's, and is not taken over.
    #[error(
        "{kind} {name:?} already exists and was not made from {source_kind} {name:?} (its annotation {stamp} does not name it); delete it, or set that annotation to {name:?} if it is a copy of the {source_kind}, and run migrate again"
    )]
    TargetExists {
        /// The target's kind.
        kind: &'static str,
        /// The name.
        name: String,
        /// The source's kind.
        source_kind: &'static str,
        /// The stamp annotation.
        stamp: String,
    },
    /// The source cannot be converted.
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// The cluster does not serve one of the two groups.
    #[error(
        "the cluster does not serve {group}: install the CustomResourceDefinitions of both API groups (the chart installs them) before migrating"
    )]
    NotServed {
        /// The group missing.
        group: Group,
    },
    /// The source was deleted once adopted, but is still there at the timeout.
    #[error(
        "{target_kind} {name:?} took the work over, and {kind} {name:?} is deleted but still there after {timeout}: the operator removes its finalizer once it reads it inert. Check that the operator runs; `kubectl get {plural} {name} -o yaml` shows the finalizer"
    )]
    SourceNotGone {
        /// The source's kind.
        kind: &'static str,
        /// Its plural resource name.
        plural: &'static str,
        /// The name.
        name: String,
        /// The target's kind.
        target_kind: &'static str,
        /// How long it waited.
        timeout: String,
    },
    /// The operator did not finish the takeover in time; nothing was deleted.
    #[error(
        "{kind} {name:?} has not taken over within {timeout}: {pending}; the {source_kind} was kept. Check that the operator runs and serves both API groups (its log says why), then run migrate again: it goes on where it stopped"
    )]
    Timeout {
        /// The target's kind.
        kind: &'static str,
        /// The name.
        name: String,
        /// The source's kind.
        source_kind: &'static str,
        /// How long it waited.
        timeout: String,
        /// What is still missing.
        pending: String,
    },
}

/// Refuses a source that is mid-rollout: only a complete, paused or disabled object (or one not
/// counted yet) moves, as the operator's own takeover rule has it.
pub fn check_settled(source: &Skyhook, from: Group) -> Result<(), MigrateError> {
    let status = source.status.as_ref().and_then(|s| s.status);
    match status {
        None | Some(Status::Complete | Status::Paused | Status::Disabled) => Ok(()),
        Some(status) => Err(MigrateError::Busy {
            kind: from.kind(),
            name: source.metadata.name.clone().unwrap_or_default(),
            status: status.to_string(),
            plugin: plugin_word(from),
        }),
    }
}

/// The object to create in group `to` for `source` of `from`, as its manifest (no status: the
/// API server ignores it on create, and the operator seeds it).
pub fn target_manifest(source: &Skyhook, from: Group, to: Group) -> Result<Value, MigrateError> {
    let Converted { object, .. } = convert(source, from, to)?;
    Ok(json!({
        "apiVersion": to.api_version(),
        "kind": to.kind(),
        "metadata": object.metadata,
        "spec": object.spec,
    }))
}

/// Whether an object of the target group found under the name may be taken as the target: it
/// carries the stamp naming the source (a migrate that stopped half way, or upstream's mirror).
pub fn check_existing_target(
    existing: &Skyhook,
    name: &str,
    from: Group,
    to: Group,
) -> Result<(), MigrateError> {
    let stamp = mirrored_from_annotation(to);
    let stamped = (existing.metadata.annotations.as_ref()).and_then(|a| a.get(&stamp));
    if stamped.map(String::as_str) == Some(name) {
        return Ok(());
    }
    Err(MigrateError::TargetExists {
        kind: to.kind(),
        name: name.to_owned(),
        source_kind: from.kind(),
        stamp,
    })
}

/// The merge patch marking the source as handing its name to `to`: the target adopts its node
/// keys over any stale ones of its own, and (for a NodeWright handing back) the name moves.
pub fn handoff_patch(from: Group, to: Group) -> Value {
    json!({"metadata": {"annotations": {handoff_annotation(from): to.name()}}})
}

/// Where a takeover stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The nodes carrying the source's keys of the name that the target has not marked as
    /// adopted yet, sorted.
    pub pending_nodes: Vec<String>,
    /// The nodes the target adopted.
    pub adopted: usize,
    /// The operator reports the source inert (its `Migrated` condition).
    pub source_inert: bool,
}

impl Progress {
    /// Whether the source can go: inert, and every node of it adopted.
    pub fn done(&self) -> bool {
        self.source_inert && self.pending_nodes.is_empty()
    }

    /// What is still missing, for the timeout message.
    pub fn pending(&self, from: Group) -> String {
        let mut missing = Vec::new();
        if !self.source_inert {
            missing.push(format!(
                "the {} does not say Migrated=True yet",
                from.kind()
            ));
        }
        if !self.pending_nodes.is_empty() {
            missing.push(format!(
                "{} node(s) not adopted yet: {}",
                self.pending_nodes.len(),
                self.pending_nodes.join(", ")
            ));
        }
        missing.join("; ")
    }
}

/// Where the takeover of `name` by the object `target_uid` of `to` stands, from the nodes and
/// the source (`None`: gone, which counts as inert).
pub fn progress(
    nodes: &[Node],
    source: Option<&Skyhook>,
    (from, to): (Group, Group),
    name: &str,
    target_uid: &str,
) -> Progress {
    let marker = to.keys().adopted_by_annotation(name);
    let mut pending_nodes = Vec::new();
    let mut adopted = 0;
    for node in nodes {
        let annotations = node.metadata.annotations.as_ref();
        let adopted_here =
            annotations.and_then(|a| a.get(&marker)).map(String::as_str) == Some(target_uid);
        let carries_source = (annotations.into_iter().flatten())
            .any(|(key, _)| from.keys().is_skyhook_node_key(key, name));
        if adopted_here {
            adopted += 1;
        } else if carries_source {
            pending_nodes.push(node.metadata.name.clone().unwrap_or_default());
        }
    }
    pending_nodes.sort();
    let source_inert = source.is_none_or(|source| {
        (source.status.iter().flat_map(|s| &s.conditions)).any(|c| {
            c.type_ == keys::CONDITION_MIGRATED
                && c.status == "True"
                && c.reason == keys::MIGRATED_REASON_OWNED_BY_TWIN
        })
    });
    Progress {
        pending_nodes,
        adopted,
        source_inert,
    }
}

/// The plugin name serving `group`.
pub const fn plugin_word(group: Group) -> &'static str {
    match group {
        Group::Skyhook => "skyhook",
        Group::NodeWright => "nodewright",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
    use skyhook_api::v1alpha1::{SkyhookSpec, SkyhookStatus};

    use super::*;

    fn object(status: Option<Status>, annotations: &[(&str, &str)]) -> Skyhook {
        Skyhook {
            metadata: ObjectMeta {
                name: Some("gpu".into()),
                annotations: Some(
                    (annotations.iter())
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: SkyhookSpec::default(),
            status: Some(SkyhookStatus {
                status,
                ..SkyhookStatus::default()
            }),
        }
    }

    fn node(name: &str, annotations: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some(
                    (annotations.iter())
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    #[test]
    fn only_a_settled_object_moves() {
        for status in [
            None,
            Some(Status::Complete),
            Some(Status::Paused),
            Some(Status::Disabled),
        ] {
            assert_eq!(check_settled(&object(status, &[]), Group::Skyhook), Ok(()));
        }
        let refused = check_settled(&object(Some(Status::InProgress), &[]), Group::Skyhook)
            .expect_err("mid-rollout");
        assert_eq!(
            refused.to_string(),
            "Skyhook \"gpu\" is in_progress: a workload moves to the other API group only once it is complete, paused or disabled; wait until `kubectl skyhook status gpu` says complete, or pause it, and run migrate again"
        );
        let erroring = check_settled(&object(Some(Status::Erroring), &[]), Group::NodeWright)
            .expect_err("erroring");
        assert!(
            erroring
                .to_string()
                .contains("kubectl nodewright status gpu")
        );
    }

    #[test]
    fn the_target_is_the_converted_object_without_its_status() {
        let source = object(
            Some(Status::Complete),
            &[("skyhook.nvidia.com/pause", "true"), ("team", "a")],
        );
        let manifest = target_manifest(&source, Group::Skyhook, Group::NodeWright).unwrap();
        assert_eq!(manifest["apiVersion"], "nodewright.nvidia.com/v1alpha1");
        assert_eq!(manifest["kind"], "NodeWright");
        assert_eq!(manifest["metadata"]["name"], "gpu");
        let annotations = &manifest["metadata"]["annotations"];
        assert_eq!(annotations["nodewright.nvidia.com/pause"], "true");
        assert_eq!(annotations["nodewright.nvidia.com/mirrored-from"], "gpu");
        assert_eq!(annotations["team"], "a");
        assert!(manifest.get("status").is_none());
        let back = target_manifest(&source, Group::NodeWright, Group::Skyhook).unwrap();
        assert_eq!(back["apiVersion"], "skyhook.nvidia.com/v1alpha1");
    }

    #[test]
    fn an_existing_target_is_taken_only_when_it_names_the_source() {
        let stamped = object(None, &[("nodewright.nvidia.com/mirrored-from", "gpu")]);
        assert_eq!(
            check_existing_target(&stamped, "gpu", Group::Skyhook, Group::NodeWright),
            Ok(())
        );
        let foreign = object(None, &[]);
        let refused =
            check_existing_target(&foreign, "gpu", Group::Skyhook, Group::NodeWright).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "NodeWright \"gpu\" already exists and was not made from Skyhook \"gpu\" (its annotation nodewright.nvidia.com/mirrored-from does not name it); delete it, or set that annotation to \"gpu\" if it is a copy of the Skyhook, and run migrate again"
        );
    }

    #[test]
    fn progress_counts_the_nodes_of_the_source_and_its_condition() {
        let nodes = [
            node(
                "a",
                &[
                    ("skyhook.nvidia.com/nodeState_gpu", "{}"),
                    ("nodewright.nvidia.com/adoptedBy_gpu", "uid-nw"),
                ],
            ),
            node("b", &[("skyhook.nvidia.com/status_gpu", "complete")]),
            node("c", &[("skyhook.nvidia.com/status_other", "complete")]),
            node(
                "d",
                &[
                    ("skyhook.nvidia.com/nodeState_gpu", "{}"),
                    ("nodewright.nvidia.com/adoptedBy_gpu", "uid-old"),
                ],
            ),
        ];
        let mut source = object(Some(Status::Complete), &[]);
        let groups = (Group::Skyhook, Group::NodeWright);
        let waiting = progress(&nodes, Some(&source), groups, "gpu", "uid-nw");
        assert_eq!(
            waiting,
            Progress {
                pending_nodes: vec!["b".into(), "d".into()],
                adopted: 1,
                source_inert: false,
            }
        );
        assert!(!waiting.done());
        assert_eq!(
            waiting.pending(Group::Skyhook),
            "the Skyhook does not say Migrated=True yet; 2 node(s) not adopted yet: b, d"
        );
        if let Some(status) = source.status.as_mut() {
            status.conditions.push(Condition {
                type_: "Migrated".into(),
                status: "True".into(),
                reason: "OwnedByTwin".into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            });
        }
        let adopted_nodes = [nodes[0].clone()];
        let done = progress(&adopted_nodes, Some(&source), groups, "gpu", "uid-nw");
        assert!(done.done(), "{done:?}");
        assert!(
            progress(&[], None, groups, "gpu", "uid-nw").done(),
            "a source gone is inert"
        );
    }

    #[test]
    fn a_source_held_by_its_finalizer_says_how_to_look() {
        let error = MigrateError::SourceNotGone {
            kind: "Skyhook",
            plural: "skyhooks",
            name: "gpu".into(),
            target_kind: "NodeWright",
            timeout: "300s".into(),
        };
        assert_eq!(
            error.to_string(),
            "NodeWright \"gpu\" took the work over, and Skyhook \"gpu\" is deleted but still there after 300s: the operator removes its finalizer once it reads it inert. Check that the operator runs; `kubectl get skyhooks gpu -o yaml` shows the finalizer"
        );
    }

    #[test]
    fn the_handoff_patch_names_the_target_group_under_the_sources_prefix() {
        assert_eq!(
            handoff_patch(Group::NodeWright, Group::Skyhook),
            json!({"metadata": {"annotations": {"nodewright.nvidia.com/handoff-to": "skyhook.nvidia.com"}}})
        );
    }
}
