//! The two API generations the operator serves, `skyhook.nvidia.com` (the Skyhooks of our seeds)
//! and `nodewright.nvidia.com` (upstream's NodeWrights since v0.18), and which of two objects
//! sharing a name does the work (pure).
//!
//! Both groups are writable and one engine drives them. A name held by a Skyhook and a
//! NodeWright at once is one workload, and exactly one of the two objects is *live* for it: the
//! live one runs the packages, holds the node keys and counts in the budgets; the other is
//! *inert* and only reports so. Every rule that reads another object's node keys asks
//! [`Owners::is_live`] first, so that the keys a migration left under the old group's prefix (kept
//! for the rollback window) hold no cordon and no budget slot.

use std::collections::BTreeMap;
use std::fmt;

use crate::keys::{self, Keys};
use crate::string_map::StringMap;
use crate::v1alpha1::Status;

/// An API group whose objects the operator drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Group {
    /// `skyhook.nvidia.com`: `Skyhook`, `DeploymentPolicy`.
    #[default]
    Skyhook,
    /// `nodewright.nvidia.com`: `NodeWright`, `DeploymentPolicy`.
    NodeWright,
}

impl Group {
    /// Both groups, in the order maps keyed by group iterate.
    pub const ALL: [Group; 2] = [Group::Skyhook, Group::NodeWright];

    /// Every key of the group's objects.
    pub const fn keys(self) -> &'static Keys {
        match self {
            Group::Skyhook => &keys::SKYHOOK,
            Group::NodeWright => &keys::NODEWRIGHT,
        }
    }

    /// The API group, e.g. `nodewright.nvidia.com`.
    pub const fn name(self) -> &'static str {
        self.keys().group
    }

    /// The kind of the group's workload objects: `Skyhook`, `NodeWright`.
    pub const fn kind(self) -> &'static str {
        self.keys().kind
    }

    /// The resource name of the workload objects: `skyhooks`, `nodewrights`.
    pub const fn plural(self) -> &'static str {
        match self {
            Group::Skyhook => "skyhooks",
            Group::NodeWright => "nodewrights",
        }
    }

    /// The `apiVersion` of the group's objects.
    pub const fn api_version(self) -> &'static str {
        match self {
            Group::Skyhook => "skyhook.nvidia.com/v1alpha1",
            Group::NodeWright => "nodewright.nvidia.com/v1alpha1",
        }
    }

    /// The group of an `apiVersion` (`<group>/<version>`), or `None` for another group's.
    pub fn of_api_version(api_version: &str) -> Option<Group> {
        let group = api_version.split_once('/').map_or("", |(group, _)| group);
        Group::ALL.into_iter().find(|g| g.name() == group)
    }

    /// The other group.
    pub const fn other(self) -> Group {
        match self {
            Group::Skyhook => Group::NodeWright,
            Group::NodeWright => Group::Skyhook,
        }
    }
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One workload object: its group and name (names are cluster-wide within a group).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadId {
    /// The object's API group.
    pub group: Group,
    /// `metadata.name`.
    pub name: String,
}

impl fmt::Display for WorkloadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.group.kind(), self.name)
    }
}

/// Annotation (ours, written by `kubectl skyhook migrate`) on the object that holds a name until
/// its twin takes it over: the group the work is handed to. On a NodeWright,
/// `nodewright.nvidia.com/handoff-to: skyhook.nvidia.com` makes its Skyhook twin the live one
/// (a migration back to the seeds' API). On either, it makes the twin's adoption a hand-off,
/// where the handing object's node keys win ([`crate::migration::adoption_kind`]).
pub fn handoff_annotation(group: Group) -> String {
    format!("{}/handoff-to", group.name())
}

/// Annotation (RFC 3339) on the object that adopted its twin's node state: when it did, which
/// starts the window the twin's keys are kept for (`LEGACY_CLEANUP_DELAY`). Upstream's
/// `nodewright.nvidia.com/legacy-migrated-at` on a NodeWright; ours, in the skyhook group, on a
/// Skyhook that took a NodeWright's place.
pub fn migrated_at_annotation(group: Group) -> String {
    format!("{}/legacy-migrated-at", group.name())
}

/// What the liveness rule reads of one object.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// `status.status`, when the object has one.
    pub status: Option<Status>,
    /// The object's annotations.
    pub annotations: &'a dyn StringMap,
    /// Whether a run of the object is in flight: a stage Job not finished, or a bare package
    /// pod still running (a suspended Job counts, since resuming it would run the stage).
    pub busy: bool,
}

/// Whether an object does the work of its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// It runs its packages, holds its node keys and counts in the budgets.
    Live,
    /// Its twin of the other group does the work; it runs nothing.
    Inert(InertReason),
}

/// Why an object is inert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InertReason {
    /// The twin of this group owns the name.
    OwnedByTwin(Group),
    /// This object takes the name over from its twin, which is mid-rollout or has a run in
    /// flight: the twin finishes first (upstream's migration hold, applied per name).
    HeldForMigration,
}

/// The liveness of a Skyhook and a NodeWright of one name, each `None` when absent; the answer
/// is `None` exactly where the object is.
///
/// An object alone for its name is live. When both exist, the name moves to the NodeWright, as
/// upstream's operator makes it, or to the Skyhook when the NodeWright hands it to the skyhook
/// group ([`handoff_annotation`]). The object the name moves to is live once it has adopted its
/// twin's nodes ([`migrated_at_annotation`] in its own group), or once the twin is settled: its
/// status complete, paused, disabled or not counted yet, and no run of it in flight. Until then
/// the twin stays live and the object taking over is held, so that no stage in flight changes
/// hands and no half-done rollout is read under the other group's keys.
pub fn liveness(
    skyhook: Option<Candidate<'_>>,
    nodewright: Option<Candidate<'_>>,
) -> (Option<Liveness>, Option<Liveness>) {
    let (skyhook, nodewright) = match (skyhook, nodewright) {
        (None, None) => return (None, None),
        (Some(_), None) => return (Some(Liveness::Live), None),
        (None, Some(_)) => return (None, Some(Liveness::Live)),
        (Some(skyhook), Some(nodewright)) => (skyhook, nodewright),
    };
    let handed_back = nodewright
        .annotations
        .value(&handoff_annotation(Group::NodeWright))
        == Some(Group::Skyhook.name());
    let (claimant, claim, source) = if handed_back {
        (Group::Skyhook, skyhook, nodewright)
    } else {
        (Group::NodeWright, nodewright, skyhook)
    };
    let settled = !source.busy
        && matches!(
            source.status,
            None | Some(Status::Complete | Status::Paused | Status::Disabled)
        );
    let adopted = claim.annotations.has(&migrated_at_annotation(claimant));
    let (claim, source) = if settled || adopted {
        (
            Liveness::Live,
            Liveness::Inert(InertReason::OwnedByTwin(claimant)),
        )
    } else {
        (
            Liveness::Inert(InertReason::HeldForMigration),
            Liveness::Live,
        )
    };
    match claimant {
        Group::NodeWright => (Some(source), Some(claim)),
        Group::Skyhook => (Some(claim), Some(source)),
    }
}

/// The live group of every name some object holds, decided once per snapshot by [`liveness`]
/// and read by every rule that looks at another object's node keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owners(BTreeMap<String, Group>);

impl Owners {
    /// The owners of the names in `objects`: each name with the Skyhook and the NodeWright of it.
    pub fn new<'a>(
        objects: impl IntoIterator<Item = (&'a str, Option<Candidate<'a>>, Option<Candidate<'a>>)>,
    ) -> Self {
        let live = objects
            .into_iter()
            .filter_map(|(name, skyhook, nodewright)| {
                let group = match liveness(skyhook, nodewright) {
                    (Some(Liveness::Live), _) => Group::Skyhook,
                    (_, Some(Liveness::Live)) => Group::NodeWright,
                    _ => return None,
                };
                Some((name.to_owned(), group))
            })
            .collect();
        Owners(live)
    }

    /// The owners where every object is a Skyhook: each name its own.
    pub fn skyhooks_only<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        Owners(
            names
                .into_iter()
                .map(|name| (name.to_owned(), Group::Skyhook))
                .collect(),
        )
    }

    /// The group whose object of `name` is live, or `None` when no object holds the name.
    pub fn live(&self, name: &str) -> Option<Group> {
        self.0.get(name).copied()
    }

    /// The group whose keys a plan reads and writes for `name`: its live object's, and the
    /// skyhook group for a name no object holds (whose keys only a cleanup still reads).
    pub fn group_of(&self, name: &str) -> Group {
        self.live(name).unwrap_or_default()
    }

    /// The keys of [`Owners::group_of`].
    pub fn keys_of(&self, name: &str) -> &'static Keys {
        self.group_of(name).keys()
    }

    /// Whether a key of `group` for `name` is in force. It is not (a *shadow*) when the name's
    /// live object is of the other group: a migration keeps the old group's keys for a while,
    /// and they must hold no cordon and no slot. Keys of a name no object holds (left by a
    /// deleted object) are in force in their own group.
    pub fn is_live(&self, group: Group, name: &str) -> bool {
        self.live(name).is_none_or(|live| live == group)
    }
}

/// The group of a run or ConfigMap of an operator's: the group whose `<group>/name` label it
/// carries. Upstream's operator copies a legacy pod's labels to its own prefix while a
/// NodeWright adopts it, so a run carrying both reads as the skyhook group's, as before the
/// copy, until the liveness rule hands its name over. The watches select by these labels, so
/// one is always there; a run without either reads as the skyhook group's, with no name.
pub fn group_of_labels(labels: Option<&BTreeMap<String, String>>) -> Group {
    let labelled = |group: &Group| labels.is_some_and(|l| l.contains_key(group.keys().name_label));
    Group::ALL
        .into_iter()
        .find(labelled)
        .unwrap_or(Group::Skyhook)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::labels as annotations;

    #[test]
    fn a_run_belongs_to_the_group_of_its_name_label() {
        let labels = |entries: &[(&str, &str)]| -> BTreeMap<String, String> {
            (entries.iter())
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let cases = [
            (labels(&[("skyhook.nvidia.com/name", "a")]), Group::Skyhook),
            (
                labels(&[("nodewright.nvidia.com/name", "a")]),
                Group::NodeWright,
            ),
            (
                labels(&[
                    ("skyhook.nvidia.com/name", "a"),
                    ("nodewright.nvidia.com/name", "a"),
                ]),
                Group::Skyhook,
            ),
            (labels(&[("other.io/name", "a")]), Group::Skyhook),
        ];
        for (labels, group) in cases {
            assert_eq!(group_of_labels(Some(&labels)), group, "{labels:?}");
        }
        assert_eq!(group_of_labels(None), Group::Skyhook);
    }

    #[test]
    fn groups_spell_their_keys_and_kinds() {
        assert_eq!(Group::Skyhook.kind(), "Skyhook");
        assert_eq!(Group::NodeWright.kind(), "NodeWright");
        assert_eq!(
            Group::NodeWright.keys().finalizer,
            "nodewright.nvidia.com/nodewright"
        );
        assert_eq!(
            Group::Skyhook.keys().finalizer,
            "skyhook.nvidia.com/skyhook"
        );
        assert_eq!(
            Group::NodeWright.keys().node_state_annotation("gpu"),
            "nodewright.nvidia.com/nodeState_gpu"
        );
        assert_eq!(
            Group::NodeWright.keys().node_meta_label,
            "nodewright.nvidia.com/skyhook-node-meta"
        );
        assert_eq!(
            Group::NodeWright.keys().default_runtime_required_taint,
            "nodewright.nvidia.com=runtime-required:NoSchedule"
        );
        for group in Group::ALL {
            assert_eq!(Group::of_api_version(group.api_version()), Some(group));
            assert_eq!(group.other().other(), group);
            assert!(group.api_version().starts_with(group.name()));
        }
        assert_eq!(Group::of_api_version("v1"), None);
        assert_eq!(Group::of_api_version("skyhook.nvidia.comx/v1alpha1"), None);
    }

    #[test]
    fn which_object_of_a_name_is_live() {
        use InertReason::*;
        use Liveness::*;
        let none = annotations(&[]);
        let handed_back =
            annotations(&[("nodewright.nvidia.com/handoff-to", "skyhook.nvidia.com")]);
        let handed_elsewhere = annotations(&[("nodewright.nvidia.com/handoff-to", "example.com")]);
        let adopted = annotations(&[(
            "nodewright.nvidia.com/legacy-migrated-at",
            "2026-12-01T10:00:00Z",
        )]);
        let candidate = |status, annotations| {
            Some(Candidate {
                status,
                annotations,
                busy: false,
            })
        };
        let busy = |status, annotations| {
            Some(Candidate {
                status,
                annotations,
                busy: true,
            })
        };
        let skyhook_adopted = annotations(&[(
            "skyhook.nvidia.com/legacy-migrated-at",
            "2026-12-01T10:00:00Z",
        )]);
        type Case<'a> = (
            &'a str,
            Option<Candidate<'a>>,
            Option<Candidate<'a>>,
            (Option<Liveness>, Option<Liveness>),
        );
        let cases: Vec<Case<'_>> = vec![
            ("nothing", None, None, (None, None)),
            (
                "a Skyhook alone",
                candidate(Some(Status::InProgress), &none),
                None,
                (Some(Live), None),
            ),
            (
                "a NodeWright alone",
                None,
                candidate(None, &none),
                (None, Some(Live)),
            ),
            (
                "both, the Skyhook complete",
                candidate(Some(Status::Complete), &none),
                candidate(None, &none),
                (Some(Inert(OwnedByTwin(Group::NodeWright))), Some(Live)),
            ),
            (
                "both, the Skyhook never counted",
                candidate(None, &none),
                candidate(None, &none),
                (Some(Inert(OwnedByTwin(Group::NodeWright))), Some(Live)),
            ),
            (
                "both, the Skyhook paused",
                candidate(Some(Status::Paused), &none),
                candidate(None, &none),
                (Some(Inert(OwnedByTwin(Group::NodeWright))), Some(Live)),
            ),
            (
                "both, the Skyhook mid-rollout: the NodeWright waits",
                candidate(Some(Status::InProgress), &none),
                candidate(None, &none),
                (Some(Live), Some(Inert(HeldForMigration))),
            ),
            (
                "both, the Skyhook erroring: the NodeWright waits",
                candidate(Some(Status::Erroring), &none),
                candidate(None, &none),
                (Some(Live), Some(Inert(HeldForMigration))),
            ),
            (
                "the NodeWright adopted already: a status turned busy again does not take it back",
                candidate(Some(Status::InProgress), &none),
                candidate(None, &adopted),
                (Some(Inert(OwnedByTwin(Group::NodeWright))), Some(Live)),
            ),
            (
                "the NodeWright hands the name back",
                candidate(Some(Status::Complete), &none),
                candidate(Some(Status::Complete), &handed_back),
                (Some(Live), Some(Inert(OwnedByTwin(Group::Skyhook)))),
            ),
            (
                "both, the Skyhook complete with a run in flight: the NodeWright waits",
                busy(Some(Status::Complete), &none),
                candidate(None, &none),
                (Some(Live), Some(Inert(HeldForMigration))),
            ),
            (
                "both, the Skyhook paused with a suspended Job: the NodeWright waits",
                busy(Some(Status::Paused), &none),
                candidate(None, &none),
                (Some(Live), Some(Inert(HeldForMigration))),
            ),
            (
                "the NodeWright hands the name back mid-rollout: the Skyhook waits",
                candidate(Some(Status::Complete), &none),
                candidate(Some(Status::InProgress), &handed_back),
                (Some(Inert(HeldForMigration)), Some(Live)),
            ),
            (
                "the NodeWright hands the name back with a Job in flight: the Skyhook waits",
                candidate(Some(Status::Complete), &none),
                busy(Some(Status::Complete), &handed_back),
                (Some(Inert(HeldForMigration)), Some(Live)),
            ),
            (
                "the Skyhook adopted the handed-back name: it stays live",
                candidate(None, &skyhook_adopted),
                busy(Some(Status::InProgress), &handed_back),
                (Some(Live), Some(Inert(OwnedByTwin(Group::Skyhook)))),
            ),
            (
                "a hand-off to a group we do not serve is no hand-off",
                candidate(Some(Status::Complete), &none),
                candidate(None, &handed_elsewhere),
                (Some(Inert(OwnedByTwin(Group::NodeWright))), Some(Live)),
            ),
        ];
        for (case, skyhook, nodewright, expected) in cases {
            assert_eq!(liveness(skyhook, nodewright), expected, "{case}");
        }
    }

    #[test]
    fn keys_of_an_inert_twin_are_shadows() {
        let none = annotations(&[]);
        let complete = Candidate {
            status: Some(Status::Complete),
            annotations: &none,
            busy: false,
        };
        let owners = Owners::new([
            ("both", Some(complete), Some(complete)),
            ("old", Some(complete), None),
            ("new", None, Some(complete)),
        ]);
        assert_eq!(owners.live("both"), Some(Group::NodeWright));
        assert!(owners.is_live(Group::NodeWright, "both"));
        assert!(!owners.is_live(Group::Skyhook, "both"), "a shadow");
        assert!(owners.is_live(Group::Skyhook, "old"));
        assert!(!owners.is_live(Group::NodeWright, "old"));
        assert!(owners.is_live(Group::NodeWright, "new"));
        assert!(
            owners.is_live(Group::Skyhook, "deleted")
                && owners.is_live(Group::NodeWright, "deleted"),
            "the keys of a name no object holds are in force in their own group"
        );
        let skyhooks = Owners::skyhooks_only(["a", "b"]);
        assert_eq!(skyhooks.live("a"), Some(Group::Skyhook));
        assert!(!skyhooks.is_live(Group::NodeWright, "b"));
    }
}
