//! Node and Skyhook status aggregation and the printer-column counters (the conditions are in
//! [`crate::conditions`]).

use std::collections::BTreeMap;

use crate::node_state::NodeState;
use crate::v1alpha1::{Package, State, Status};

/// What deciding a node's status needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeStatusInput {
    /// The node's current status for the Skyhook (`unknown` when it has none).
    pub current: Status,
    /// Whether the node is complete for the Skyhook (see [`crate::stage::node_complete`]).
    pub complete: bool,
    /// Whether some package entry on the node is `erroring` or `unknown` ([`node_erroring`]).
    pub failing: bool,
    /// Whether the node is ready for the Skyhook by priority (see [`crate::ordering`]).
    pub ready: bool,
    /// Whether the Skyhook is disabled.
    pub disabled: bool,
    /// Whether the Skyhook is paused.
    pub paused: bool,
    /// Whether the Skyhook has rollout compartments (false only while its DeploymentPolicy is
    /// missing).
    pub has_compartments: bool,
}

/// A node's status for a Skyhook, recomputed each reconcile (upstream's `IntrospectNode`):
/// - a disabled or paused Skyhook gives its nodes the same status;
/// - an incomplete node not ready by priority is `waiting`;
/// - a node leaving `disabled`, `paused` or `waiting` becomes `complete` if it is, otherwise
///   `waiting` (or `unknown` without compartments);
/// - a complete node is `complete`; a node marked complete that no longer is becomes
///   `unknown`, and an `unknown` incomplete node `waiting` (or stays `unknown` without
///   compartments);
/// - an `erroring` node none of whose entries fails any more (the failing entry was deleted
///   by hand or by `package rerun`, or its pod succeeded after all) becomes `waiting` (or
///   `unknown` without compartments), so that it is worked on again; a stale `erroring` would
///   keep it out of every batch while its Erroring condition says it is not;
/// - otherwise the status is kept: `in_progress`, `erroring` and `blocked` are set by pod
///   launches, pod failures and node selection.
pub fn node_status(input: NodeStatusInput) -> Status {
    let waiting_or_unknown = if input.has_compartments {
        Status::Waiting
    } else {
        Status::Unknown
    };
    if input.disabled {
        return Status::Disabled;
    }
    if input.paused {
        return Status::Paused;
    }
    if !input.complete && !input.ready {
        return Status::Waiting;
    }
    match (input.current, input.complete) {
        (Status::Disabled | Status::Paused | Status::Waiting, true) => Status::Complete,
        (Status::Disabled | Status::Paused | Status::Waiting, false) => waiting_or_unknown,
        (Status::Complete, false) => Status::Unknown,
        (Status::Unknown, false) => waiting_or_unknown,
        (Status::Erroring, false) if !input.failing => waiting_or_unknown,
        (_, true) => Status::Complete,
        (current, false) => current,
    }
}

/// Skyhook-level overrides of the aggregate status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkyhookOverrides {
    /// The Skyhook is disabled.
    pub disabled: bool,
    /// The Skyhook is paused.
    pub paused: bool,
    /// The referenced DeploymentPolicy does not exist.
    pub policy_missing: bool,
}

/// The Skyhook's aggregate status from its nodes' statuses (upstream's `CollectNodeStatus`):
/// no node or every node complete → `complete`; any `in_progress` → `in_progress`; otherwise
/// over the incomplete nodes: all `erroring` → `erroring`, all `blocked` → `blocked`, all
/// `unknown` → `unknown`, all `waiting` → `waiting`, a mix → `unknown`. Then, on an incomplete
/// Skyhook, disabled → `disabled`, paused → `paused`, missing policy → `blocked`; a missing
/// policy also overrides `complete`.
pub fn skyhook_status(
    nodes: impl IntoIterator<Item = Status>,
    overrides: SkyhookOverrides,
) -> Status {
    let incomplete: Vec<Status> = nodes
        .into_iter()
        .filter(|s| *s != Status::Complete)
        .collect();
    let collected = if incomplete.is_empty() {
        Status::Complete
    } else if incomplete.contains(&Status::InProgress) {
        Status::InProgress
    } else {
        let first = incomplete[0];
        let uniform = incomplete.iter().all(|s| *s == first);
        match first {
            Status::Erroring | Status::Blocked | Status::Unknown | Status::Waiting if uniform => {
                first
            }
            _ => Status::Unknown,
        }
    };
    match collected {
        _ if overrides.policy_missing && !overrides.disabled && !overrides.paused => {
            Status::Blocked
        }
        Status::Complete => Status::Complete,
        _ if overrides.disabled => Status::Disabled,
        _ if overrides.paused => Status::Paused,
        other => other,
    }
}

/// The printer-column counters of a Skyhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCounters {
    /// `completeNodes`: `"<complete>/<total>"`.
    pub complete_nodes: String,
    /// `nodesInProgress`: nodes `in_progress` plus `erroring`.
    pub nodes_in_progress: i32,
    /// `packageList`: sorted `name:version` joined by commas.
    pub package_list: String,
}

/// Computes the printer-column counters.
pub fn counters(
    node_statuses: &BTreeMap<String, Status>,
    packages: &BTreeMap<String, Package>,
) -> StatusCounters {
    let complete = node_statuses
        .values()
        .filter(|s| **s == Status::Complete)
        .count();
    let in_progress = node_statuses
        .values()
        .filter(|s| matches!(s, Status::InProgress | Status::Erroring))
        .count();
    StatusCounters {
        complete_nodes: format!("{complete}/{}", node_statuses.len()),
        nodes_in_progress: i32::try_from(in_progress).unwrap_or(i32::MAX),
        package_list: package_list(packages),
    }
}

/// `packageList`: `name:version` of every package, sorted, joined by commas.
pub fn package_list(packages: &BTreeMap<String, Package>) -> String {
    let mut entries: Vec<String> = packages
        .iter()
        .map(|(name, p)| format!("{name}:{}", p.version))
        .collect();
    entries.sort();
    entries.join(",")
}

/// Whether any package entry on the node is `erroring` or `unknown`, which sets the node
/// condition `skyhook.nvidia.com/<skyhook>/Erroring` to True.
pub fn node_erroring(state: &NodeState) -> bool {
    state
        .iter()
        .any(|(_, e)| matches!(e.state, State::Erroring | State::Unknown))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1alpha1::{PackageStatus, Stage};
    use Status::*;

    fn input(current: Status, complete: bool) -> NodeStatusInput {
        NodeStatusInput {
            current,
            complete,
            failing: current == Erroring,
            ready: true,
            disabled: false,
            paused: false,
            has_compartments: true,
        }
    }

    #[test]
    fn node_status_table() {
        let cases = [
            (input(InProgress, false), InProgress),
            (input(Erroring, false), Erroring),
            (input(Blocked, false), Blocked),
            // The failing entry is gone: worked on again.
            (
                NodeStatusInput {
                    failing: false,
                    ..input(Erroring, false)
                },
                Waiting,
            ),
            (
                NodeStatusInput {
                    failing: false,
                    has_compartments: false,
                    ..input(Erroring, false)
                },
                Unknown,
            ),
            // A failing entry keeps any status the launches and selection set.
            (
                NodeStatusInput {
                    failing: true,
                    ..input(InProgress, false)
                },
                InProgress,
            ),
            (input(InProgress, true), Complete),
            (input(Erroring, true), Complete),
            (input(Complete, true), Complete),
            (input(Complete, false), Unknown),
            (input(Unknown, false), Waiting),
            (input(Unknown, true), Complete),
            (input(Waiting, false), Waiting),
            (input(Waiting, true), Complete),
            (input(Paused, false), Waiting),
            (input(Disabled, true), Complete),
            (
                NodeStatusInput {
                    has_compartments: false,
                    ..input(Unknown, false)
                },
                Unknown,
            ),
            (
                NodeStatusInput {
                    has_compartments: false,
                    ..input(Paused, false)
                },
                Unknown,
            ),
            (
                NodeStatusInput {
                    ready: false,
                    ..input(InProgress, false)
                },
                Waiting,
            ),
            (
                NodeStatusInput {
                    ready: false,
                    ..input(Complete, true)
                },
                Complete,
            ),
            (
                NodeStatusInput {
                    disabled: true,
                    ..input(Complete, true)
                },
                Disabled,
            ),
            (
                NodeStatusInput {
                    paused: true,
                    ..input(InProgress, false)
                },
                Paused,
            ),
            (
                NodeStatusInput {
                    paused: true,
                    disabled: true,
                    ..input(InProgress, false)
                },
                Disabled,
            ),
        ];
        for (i, (inp, want)) in cases.iter().enumerate() {
            assert_eq!(node_status(*inp), *want, "case {i}: {inp:?}");
        }
    }

    #[test]
    fn collect_precedence() {
        let none = SkyhookOverrides::default();
        let cases: [(&[Status], Status); 12] = [
            (&[], Complete),
            (&[Complete, Complete], Complete),
            (&[Complete, InProgress, Erroring], InProgress),
            (&[Complete, Erroring, Erroring], Erroring),
            (&[Blocked, Blocked], Blocked),
            (&[Unknown], Unknown),
            (&[Waiting, Complete, Waiting], Waiting),
            (&[Waiting, Blocked], Unknown),
            (&[Erroring, Blocked], Unknown),
            (&[Disabled], Unknown),
            (&[Paused, Paused], Unknown),
            (&[InProgress, Waiting], InProgress),
        ];
        for (nodes, want) in cases {
            assert_eq!(
                skyhook_status(nodes.iter().copied(), none),
                want,
                "{nodes:?}"
            );
        }
    }

    #[test]
    fn collect_overrides() {
        let over = |disabled, paused, policy_missing| SkyhookOverrides {
            disabled,
            paused,
            policy_missing,
        };
        let cases: [(&[Status], SkyhookOverrides, Status); 8] = [
            (&[Disabled, Disabled], over(true, false, false), Disabled),
            (&[Paused], over(false, true, false), Paused),
            (&[Complete], over(true, false, false), Complete),
            (&[Complete], over(false, true, false), Complete),
            (&[Unknown], over(false, false, true), Blocked),
            (&[Complete], over(false, false, true), Blocked),
            (&[], over(false, false, true), Blocked),
            (&[Unknown], over(true, false, true), Disabled),
        ];
        for (nodes, overrides, want) in cases {
            assert_eq!(
                skyhook_status(nodes.iter().copied(), overrides),
                want,
                "{nodes:?} {overrides:?}"
            );
        }
    }

    fn package(version: &str) -> Package {
        Package {
            version: version.into(),
            image: "x".into(),
            ..Package::default()
        }
    }

    #[test]
    fn printer_counters() {
        // failure-skyhook e2e.
        let statuses = BTreeMap::from([("node".to_owned(), Erroring)]);
        let packages = BTreeMap::from([
            ("failure".to_owned(), package("1.2.3")),
            ("dexter".to_owned(), package("1.2.3")),
        ]);
        let c = counters(&statuses, &packages);
        assert_eq!(c.complete_nodes, "0/1");
        assert_eq!(c.nodes_in_progress, 1);
        assert_eq!(c.package_list, "dexter:1.2.3,failure:1.2.3");

        let statuses = BTreeMap::from([
            ("a".to_owned(), Complete),
            ("b".to_owned(), InProgress),
            ("c".to_owned(), Waiting),
            ("d".to_owned(), Complete),
        ]);
        let c = counters(&statuses, &BTreeMap::new());
        assert_eq!(
            (
                c.complete_nodes.as_str(),
                c.nodes_in_progress,
                c.package_list.as_str()
            ),
            ("2/4", 1, "")
        );
        assert_eq!(
            counters(&BTreeMap::new(), &BTreeMap::new()).complete_nodes,
            "0/0"
        );
    }

    #[test]
    fn erroring_condition() {
        let entry = |state| PackageStatus {
            name: "a".into(),
            version: "1".into(),
            image: "x".into(),
            container_sha: String::new(),
            stage: Stage::Apply,
            state,
            restarts: 0,
        };
        assert!(!node_erroring(&NodeState::new()));
        assert!(!node_erroring(
            &[entry(State::Complete)].into_iter().collect()
        ));
        assert!(node_erroring(
            &[entry(State::Erroring)].into_iter().collect()
        ));
        assert!(node_erroring(
            &[entry(State::Unknown)].into_iter().collect()
        ));
    }
}
