//! The node keys every workload of a node shares, read across both API groups.
//!
//! A node can be worked on by Skyhooks and NodeWrights at once, and each writes its keys under
//! its own group's prefix. Whatever a node shares (its cordon, its fleet slot, whether some
//! operator already processed it, the admin's `ignore` label) is decided over the keys of both
//! groups here, so that every reader counts them alike. A key of a name whose live object is of
//! the other group is a *shadow* (a migration keeps the old group's keys for a while) and holds
//! nothing ([`Owners::is_live`]).

use crate::generation::{Group, Owners, WorkloadId};
use crate::string_map::StringMap;

/// The workloads whose live `cordon_<name>` annotation is on the node, in key order of each
/// group (Skyhooks first).
pub fn live_cordons(annotations: &dyn StringMap, owners: &Owners) -> Vec<WorkloadId> {
    let mut cordons = Vec::new();
    for group in Group::ALL {
        let prefix = group.keys().cordon_annotation_prefix;
        annotations.any_key(&mut |key| {
            if let Some(name) = key.strip_prefix(prefix)
                && owners.is_live(group, name)
            {
                cordons.push(WorkloadId {
                    group,
                    name: name.to_owned(),
                });
            }
            false
        });
    }
    cordons
}

/// The names whose node state is on the node under the group a plan reads it from
/// ([`Owners::group_of`]), in key order of each group: a migration's shadow state, and the other
/// group's state of a name no object holds, are left out.
pub fn live_state_names(annotations: &dyn StringMap, owners: &Owners) -> Vec<String> {
    let mut names = Vec::new();
    for group in Group::ALL {
        let prefix = group.keys().node_state_annotation("");
        annotations.any_key(&mut |key| {
            if let Some(name) = key.strip_prefix(prefix.as_str())
                && owners.group_of(name) == group
            {
                names.push(name.to_owned());
            }
            false
        });
    }
    names
}

/// Whether a live `cordon_<name>` annotation of either group is on the node (some
/// [`live_cordons`]).
pub fn any_live_cordon(annotations: &dyn StringMap, owners: &Owners) -> bool {
    // Allocates only for a cordon found: most nodes have none.
    !live_cordons(annotations, owners).is_empty()
}

/// Whether some cordon other than a foreign one holds the node: a live `cordon_*` annotation of
/// either group, or the runtime-required cordon of either group (upstream v0.19's node-scoped
/// `runtimeRequiredCordon`, set when the runtime-required taint was removed for a workload with
/// `runtimeRequiredCordonAfter`). The one place that says which annotations keep a node
/// cordoned: a release uncordons only when none is left, and a cordoned node with none of them
/// is someone else's.
pub fn cordon_held(annotations: &dyn StringMap, owners: &Owners) -> bool {
    runtime_required_cordoned(annotations) || any_live_cordon(annotations, owners)
}

/// Whether the node is excluded from every workload: the `ignore` label of either group is
/// `"true"`. The label is the admin's node-scoped intent, and each plugin name sets its own.
pub fn ignored(labels: &dyn StringMap) -> bool {
    Group::ALL
        .into_iter()
        .any(|group| labels.value(group.keys().ignore_label) == Some("true"))
}

/// Whether the node carries any annotation under either group's prefix: some operator, of
/// either generation, already processed it (a "new" node, which auto-taint may taint, has
/// none).
pub fn has_operator_annotations(annotations: &dyn StringMap) -> bool {
    annotations.any_key(&mut |key| {
        Group::ALL.into_iter().any(|group| {
            key.strip_prefix(group.name())
                .is_some_and(|rest| rest.starts_with('/'))
        })
    })
}

/// Whether the node carries the runtime-required cordon annotation of either group.
pub fn runtime_required_cordoned(annotations: &dyn StringMap) -> bool {
    Group::ALL
        .into_iter()
        .any(|group| annotations.has(group.keys().runtime_required_cordon_annotation))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generation::Candidate;
    use crate::test_support::labels;

    /// `gpu` is live as a NodeWright (its Skyhook twin inert), `net` is a Skyhook alone, `old`
    /// is held by no object (keys a deleted object left behind).
    fn owners() -> Owners {
        let none = labels(&[]);
        let candidate = |annotations| {
            Some(Candidate {
                status: None,
                annotations,
                busy: false,
            })
        };
        Owners::new([
            ("gpu", candidate(&none), candidate(&none)),
            ("net", candidate(&none), None),
        ])
    }

    /// A node's string map as a table row writes it.
    type Entries<'a> = &'a [(&'a str, &'a str)];

    fn id(group: Group, name: &str) -> WorkloadId {
        WorkloadId {
            group,
            name: name.to_owned(),
        }
    }

    #[test]
    fn node_states_are_read_under_the_group_of_their_live_object() {
        let node = labels(&[
            ("skyhook.nvidia.com/nodeState_net", "{}"),
            ("skyhook.nvidia.com/nodeState_gpu", "{}"),
            ("nodewright.nvidia.com/nodeState_gpu", "{}"),
            ("nodewright.nvidia.com/nodeState_net", "{}"),
            ("skyhook.nvidia.com/nodeState_old", "{}"),
            ("nodewright.nvidia.com/nodeState_gone", "{}"),
            ("skyhook.nvidia.com/status_net", "complete"),
        ]);
        assert_eq!(
            live_state_names(&node, &owners()),
            ["net", "old", "gpu"],
            "gpu's skyhook state is a shadow, net's nodewright one too; a name no object holds \
             is read under the skyhook group"
        );
    }

    #[test]
    fn cordons_of_both_groups_hold_the_node_and_shadows_do_not() {
        use Group::{NodeWright, Skyhook};
        let cases: [(&str, Entries<'_>, Vec<WorkloadId>, bool); 8] = [
            (
                "no cordon",
                &[("other.io/cordon_gpu", "true")],
                vec![],
                false,
            ),
            (
                "a Skyhook's",
                &[("skyhook.nvidia.com/cordon_net", "true")],
                vec![id(Skyhook, "net")],
                true,
            ),
            (
                "a NodeWright's",
                &[("nodewright.nvidia.com/cordon_gpu", "true")],
                vec![id(NodeWright, "gpu")],
                true,
            ),
            (
                "the shadow a migration kept",
                &[("skyhook.nvidia.com/cordon_gpu", "true")],
                vec![],
                false,
            ),
            (
                "one left by a deleted object, in either group",
                &[
                    ("skyhook.nvidia.com/cordon_old", "true"),
                    ("nodewright.nvidia.com/cordon_old", "true"),
                ],
                vec![id(Skyhook, "old"), id(NodeWright, "old")],
                true,
            ),
            (
                "the runtime-required cordon of the skyhook group",
                &[("skyhook.nvidia.com/runtimeRequiredCordon", "true")],
                vec![],
                true,
            ),
            (
                "the runtime-required cordon of the nodewright group, beside a shadow",
                &[
                    ("nodewright.nvidia.com/runtimeRequiredCordon", "true"),
                    ("skyhook.nvidia.com/cordon_gpu", "true"),
                ],
                vec![],
                true,
            ),
            (
                "both groups' live cordons",
                &[
                    ("nodewright.nvidia.com/cordon_gpu", "true"),
                    ("skyhook.nvidia.com/cordon_gpu", "true"),
                    ("skyhook.nvidia.com/cordon_net", "true"),
                ],
                vec![id(Skyhook, "net"), id(NodeWright, "gpu")],
                true,
            ),
        ];
        let owners = owners();
        for (case, annotations, cordons, held) in cases {
            let annotations = labels(annotations);
            assert_eq!(
                any_live_cordon(&annotations, &owners),
                !cordons.is_empty(),
                "{case}"
            );
            assert_eq!(live_cordons(&annotations, &owners), cordons, "{case}");
            assert_eq!(cordon_held(&annotations, &owners), held, "{case}");
        }
        let skyhooks_only = Owners::default();
        let nodewright_node = labels(&[("nodewright.nvidia.com/cordon_gpu", "true")]);
        assert!(
            cordon_held(&nodewright_node, &skyhooks_only),
            "an upstream v0.20 node's cordon is an operator's, not a foreign one"
        );
    }

    #[test]
    fn node_scoped_keys_of_either_group() {
        let cases: [(&str, Entries<'_>, bool); 5] = [
            ("none", &[("kubernetes.io/hostname", "n1")], false),
            ("skyhook", &[("skyhook.nvidia.com/ignore", "true")], true),
            (
                "nodewright",
                &[("nodewright.nvidia.com/ignore", "true")],
                true,
            ),
            (
                "not true",
                &[("nodewright.nvidia.com/ignore", "yes")],
                false,
            ),
            (
                "a prefix only",
                &[("skyhook.nvidia.com.evil/ignore", "true")],
                false,
            ),
        ];
        for (case, node_labels, expected) in cases {
            assert_eq!(ignored(&labels(node_labels)), expected, "ignored: {case}");
        }
        let processed: [(&str, Entries<'_>, bool); 4] = [
            ("new", &[("kubernetes.io/hostname", "n1")], false),
            (
                "by a Skyhook",
                &[("skyhook.nvidia.com/status_a", "complete")],
                true,
            ),
            (
                "by a NodeWright",
                &[("nodewright.nvidia.com/nodeState_a", "{}")],
                true,
            ),
            ("a look-alike", &[("skyhook.nvidia.com.io/x", "1")], false),
        ];
        for (case, annotations, expected) in processed {
            assert_eq!(
                has_operator_annotations(&labels(annotations)),
                expected,
                "processed: {case}"
            );
        }
        assert!(runtime_required_cordoned(&labels(&[(
            "nodewright.nvidia.com/runtimeRequiredCordon",
            "true"
        )])));
        assert!(!runtime_required_cordoned(&labels(&[])));
    }
}
