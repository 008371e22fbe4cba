//! The Skyhook status conditions of upstream's newest release: `Ready` and its deprecated
//! mirrors, `skyhook.nvidia.com/Transition`, the node lists of `TaintNotTolerable` and
//! `NodesIgnored`, and the explicit-uninstall conditions (`UninstallInProgress`,
//! `UninstallFailed`, `Blocked`, `NodeStateMalformed`). Pure: the controller gathers the facts,
//! these functions decide the texts, and [`set_condition`] decides what a write keeps.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::keys;
use crate::node_state::NodeState;
use crate::stage::package_complete;
use crate::uninstall::in_cycle;
use crate::v1alpha1::{Package, State, Status};

/// The most node names a condition message lists; longer lists are replaced by
/// [`TRUNCATED_LIST`] and logged whole by the controller.
pub const MAX_LISTED_NODES: usize = 10;
/// What stands for a node list longer than [`MAX_LISTED_NODES`] (upstream's text).
pub const TRUNCATED_LIST: &str = " (list truncated; see controller logs)";
/// The most node names the `NodeStateMalformed` message lists.
const MAX_MALFORMED_LISTED: usize = 5;
/// Node names longer than this are cut in the `NodeStateMalformed` message.
const MAX_MALFORMED_NAME_CHARS: usize = 10;

/// A node list a condition message left out for being too long; the controller logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongList {
    /// The condition type.
    pub condition: &'static str,
    /// Which list: a node status, or a package.
    pub group: String,
    /// Every node, sorted.
    pub nodes: Vec<String>,
}

/// Collects the lists left out of condition messages.
#[derive(Debug, Default)]
struct Lists {
    condition: &'static str,
    long: Vec<LongList>,
}

impl Lists {
    fn new(condition: &'static str) -> Self {
        Lists {
            condition,
            long: Vec::new(),
        }
    }

    /// ` (a, b)` with the names sorted, or [`TRUNCATED_LIST`] above [`MAX_LISTED_NODES`]
    /// names (the list is then kept for the log).
    fn suffix(&mut self, group: &str, mut nodes: Vec<String>) -> String {
        nodes.sort();
        if nodes.len() > MAX_LISTED_NODES {
            self.long.push(LongList {
                condition: self.condition,
                group: group.to_owned(),
                nodes,
            });
            return TRUNCATED_LIST.to_owned();
        }
        format!(" ({})", nodes.join(", "))
    }
}

/// One selected node as `Ready` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadyNode<'a> {
    /// The node's name.
    pub name: &'a str,
    /// Its status in `status.nodeStatus` (`unknown` when missing).
    pub status: Status,
    /// Whether every package is complete on it by the package rule.
    pub complete: bool,
}

/// The status, reason and message of `Ready` (and of its mirror `skyhook.nvidia.com/Ready`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadySummary {
    /// True exactly when every selected node is complete (no node counts).
    pub ready: bool,
    /// From the Skyhook's status ([`ready_reason`]).
    pub reason: &'static str,
    /// `<c>/<t> nodes complete`, then the other groups.
    pub message: String,
    /// The groups too long for the message.
    pub long_lists: Vec<LongList>,
}

/// The order of the groups after the complete one in `Ready`'s message.
const READY_GROUPS: [Status; 7] = [
    Status::InProgress,
    Status::Blocked,
    Status::Erroring,
    Status::Waiting,
    Status::Paused,
    Status::Disabled,
    Status::Unknown,
];

/// The `Ready` condition's status, reason and message for a Skyhook in `skyhook_status` over
/// its selected `nodes`.
pub fn ready_summary(skyhook_status: Status, nodes: &[ReadyNode<'_>]) -> ReadySummary {
    let mut lists = Lists::new(keys::CONDITION_READY);
    let names_with = |status: Status| -> Vec<String> {
        nodes
            .iter()
            .filter(|n| n.status == status)
            .map(|n| n.name.to_owned())
            .collect()
    };
    let complete = names_with(Status::Complete);
    let mut message = format!("{}/{} nodes complete", complete.len(), nodes.len());
    if !complete.is_empty() {
        message.push_str(&lists.suffix(Status::Complete.as_str(), complete));
    }
    for status in READY_GROUPS {
        let group = names_with(status);
        if group.is_empty() {
            continue;
        }
        let label = match status {
            Status::InProgress => "in progress",
            other => other.as_str(),
        };
        message.push_str(&format!(", {} {label}", group.len()));
        message.push_str(&lists.suffix(status.as_str(), group));
    }
    ReadySummary {
        ready: nodes.iter().all(|n| n.complete),
        reason: ready_reason(skyhook_status),
        message,
        long_lists: lists.long,
    }
}

/// `Ready`'s reason for the Skyhook's `.status.status`.
pub const fn ready_reason(status: Status) -> &'static str {
    match status {
        Status::Complete => "NodesConverged",
        Status::InProgress => "Progressing",
        Status::Blocked => "Blocked",
        Status::Erroring => "Erroring",
        Status::Paused => "Paused",
        Status::Waiting => "Waiting",
        Status::Disabled => "Disabled",
        Status::Unknown => "Unknown",
    }
}

/// `skyhook.nvidia.com/Transition`'s reason and message: the raw status (`unknown` when
/// there is none), and `Transitioned [<prior>] -> [<now>]` in a pass that changed the status,
/// otherwise `Ready`'s message.
pub fn transition_text(
    status: Option<Status>,
    transition: Option<&str>,
    ready_message: &str,
) -> (String, String) {
    let reason = status.map_or(Status::Unknown, |s| s).as_str().to_owned();
    let message =
        transition.map_or_else(|| ready_message.to_owned(), |t| format!("Transitioned {t}"));
    (reason, message)
}

/// `TaintNotTolerable`'s message while True: one `<node>: <taints>` per node, sorted by node, or the
/// count alone above [`MAX_LISTED_NODES`] nodes (upstream's text).
pub fn intolerable_message(mut nodes: Vec<String>) -> String {
    if nodes.len() > MAX_LISTED_NODES {
        return format!(
            "{} nodes have taints that are not tolerable. Skipping.",
            nodes.len()
        );
    }
    nodes.sort_by(|a, b| a.split(": ").next().cmp(&b.split(": ").next()));
    format!(
        "nodes with taints the Skyhook does not tolerate: {}",
        nodes.join("; ")
    )
}

/// `NodesIgnored`'s message while True: the nodes, sorted, or the count alone above
/// [`MAX_LISTED_NODES`] nodes (upstream's text).
pub fn ignored_message(mut nodes: Vec<String>) -> String {
    if nodes.len() > MAX_LISTED_NODES {
        return format!("{} nodes have ignore label set. Skipping.", nodes.len());
    }
    nodes.sort();
    format!(
        "nodes labelled {}=true: {}",
        keys::SKYHOOK.ignore_label,
        nodes.join(", ")
    )
}

/// Sets `condition` in `conditions`, replacing the one of its type. Its `lastTransitionTime`
/// is kept from the old one while the status is unchanged; for
/// [`keys::Keys::condition_transition`], only while the status, reason and message are. So
/// an identical condition leaves the list exactly as it was, and costs no write.
pub fn set_condition(conditions: &mut Vec<Condition>, mut condition: Condition) {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        conditions.push(condition);
        return;
    };
    let same_status = existing.status == condition.status;
    let keep_time = if condition.type_ == keys::SKYHOOK.condition_transition {
        same_status && existing.reason == condition.reason && existing.message == condition.message
    } else {
        same_status
    };
    if keep_time {
        condition.last_transition_time = existing.last_transition_time.clone();
    }
    *existing = condition;
}

/// Sets `condition` when `Some`, otherwise removes every condition of type `type_`.
pub fn set_or_remove(conditions: &mut Vec<Condition>, type_: &str, condition: Option<Condition>) {
    match condition {
        Some(condition) => set_condition(conditions, condition),
        None => conditions.retain(|c| c.type_ != type_),
    }
}

/// A node's `nodeState_<skyhook>` annotation as read.
#[derive(Debug, Clone, Copy)]
pub enum NodeStateRead<'a> {
    /// It parsed (absent reads as empty).
    Parsed(&'a NodeState),
    /// It did not parse.
    Malformed,
}

/// What the explicit-uninstall conditions read of one Skyhook.
#[derive(Debug, Clone, Copy)]
pub struct UninstallFacts<'a> {
    /// Its spec packages, by name.
    pub packages: &'a BTreeMap<String, Package>,
    /// Whether it is being deleted (so `enabled` packages count as requested).
    pub deleting: bool,
    /// Its nodes, by name.
    pub nodes: &'a BTreeMap<String, NodeStateRead<'a>>,
    /// The packages with an effective interrupt (for the completion rule).
    pub interrupting: &'a BTreeSet<String>,
}

impl<'a> UninstallFacts<'a> {
    fn parsed(&self) -> impl Iterator<Item = (&'a String, &'a NodeState)> + '_ {
        self.nodes.iter().filter_map(|(node, read)| match read {
            NodeStateRead::Parsed(state) => Some((node, *state)),
            NodeStateRead::Malformed => None,
        })
    }

    fn malformed(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, read)| matches!(read, NodeStateRead::Malformed))
            .map(|(node, _)| node.clone())
            .collect()
    }

    /// The nodes where `package`'s spec version is in its uninstall cycle and, when `erroring`,
    /// only those where that entry is `erroring`.
    fn in_cycle_on(&self, package: &Package, erroring: bool) -> Vec<String> {
        self.parsed()
            .filter(|(_, state)| {
                in_cycle(state, package).is_some_and(|e| !erroring || e.state == State::Erroring)
            })
            .map(|(node, _)| node.clone())
            .collect()
    }
}

/// The condition types [`uninstall_conditions`] decides; each one it does not return is removed.
pub const UNINSTALL_CONDITION_TYPES: [&str; 4] = [
    keys::CONDITION_UNINSTALL_IN_PROGRESS,
    keys::CONDITION_UNINSTALL_FAILED,
    keys::CONDITION_BLOCKED,
    keys::CONDITION_NODE_STATE_MALFORMED,
];

/// A condition that holds (status True).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrueCondition {
    /// The condition type (bare).
    pub type_: &'static str,
    /// Its reason.
    pub reason: &'static str,
    /// Its message.
    pub message: String,
}

/// The explicit-uninstall conditions that hold, and the node lists their messages left out.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UninstallConditions {
    /// True conditions, among [`UNINSTALL_CONDITION_TYPES`].
    pub holding: Vec<TrueCondition>,
    /// The lists too long for the messages.
    pub long_lists: Vec<LongList>,
}

/// `UninstallInProgress`, `UninstallFailed`, `Blocked` and `NodeStateMalformed` for one
/// Skyhook: each present only while it holds.
pub fn uninstall_conditions(facts: &UninstallFacts<'_>) -> UninstallConditions {
    let mut out = UninstallConditions::default();
    for (type_, reason, erroring) in [
        (
            keys::CONDITION_UNINSTALL_IN_PROGRESS,
            keys::UNINSTALL_IN_PROGRESS_REASON,
            false,
        ),
        (
            keys::CONDITION_UNINSTALL_FAILED,
            keys::UNINSTALL_FAILED_REASON,
            true,
        ),
    ] {
        let mut lists = Lists::new(type_);
        let per_package: Vec<String> = facts
            .packages
            .iter()
            .filter_map(|(name, package)| {
                let nodes = facts.in_cycle_on(package, erroring);
                (!nodes.is_empty()).then(|| uninstall_message(&mut lists, name, nodes, erroring))
            })
            .collect();
        if !per_package.is_empty() {
            out.holding.push(TrueCondition {
                type_,
                reason,
                message: per_package.join("; "),
            });
        }
        out.long_lists.extend(lists.long);
    }
    let blocked = blocked_messages(facts);
    if !blocked.is_empty() {
        out.holding.push(TrueCondition {
            type_: keys::CONDITION_BLOCKED,
            reason: keys::DEPENDENCY_UNINSTALLED_REASON,
            message: blocked.join("; "),
        });
    }
    let malformed = facts.malformed();
    if !malformed.is_empty() {
        out.holding.push(TrueCondition {
            type_: keys::CONDITION_NODE_STATE_MALFORMED,
            reason: keys::NODE_STATE_MALFORMED_REASON,
            message: malformed_message(malformed),
        });
    }
    out
}

/// One package's part of `UninstallInProgress` or `UninstallFailed` (our wording: upstream's
/// is not recorded).
fn uninstall_message(
    lists: &mut Lists,
    package: &str,
    nodes: Vec<String>,
    failing: bool,
) -> String {
    let what = if failing {
        "uninstall is failing"
    } else {
        "is being uninstalled"
    };
    let count = nodes.len();
    let suffix = lists.suffix(package, nodes);
    format!("package {package} {what} on {count} node(s){suffix}")
}

/// `Blocked`'s messages, sorted: a package B waits for a dependency A that is in its uninstall
/// cycle on some node, or that is requested and uninstalled everywhere (every node readable, at
/// least one node). Not raised when B is itself requested or complete on every node.
fn blocked_messages(facts: &UninstallFacts<'_>) -> Vec<String> {
    let readable_everywhere = !facts.nodes.is_empty() && facts.malformed().is_empty();
    let mut messages = Vec::new();
    for (name, package) in facts.packages {
        let complete_everywhere = facts.parsed().all(|(_, state)| {
            package_complete(
                state.get_version(name, &package.version),
                facts.interrupting.contains(name),
            )
        });
        if package.uninstall_requested(facts.deleting) || complete_everywhere {
            continue;
        }
        for dependency in package.depends_on.keys() {
            let Some(dep) = facts.packages.get(dependency) else {
                continue;
            };
            let cycling = facts.parsed().any(|(_, s)| in_cycle(s, dep).is_some());
            let gone = readable_everywhere
                && dep.uninstall_requested(facts.deleting)
                && facts
                    .parsed()
                    .all(|(_, s)| s.get_version(dependency, &dep.version).is_none());
            let state = if cycling {
                "is being uninstalled"
            } else if gone {
                "has been uninstalled"
            } else {
                continue;
            };
            messages.push(format!(
                "package {name} is blocked: dependency {dependency} {state}"
            ));
        }
    }
    messages.sort();
    messages
}

/// `NodeStateMalformed`'s message: at most five names, sorted, each over ten characters cut
/// to ten and `...`, then ` and <k> more`.
pub fn malformed_message(mut nodes: Vec<String>) -> String {
    nodes.sort();
    let listed: Vec<String> = nodes
        .iter()
        .take(MAX_MALFORMED_LISTED)
        .map(|name| {
            if name.chars().count() > MAX_MALFORMED_NAME_CHARS {
                let cut: String = name.chars().take(MAX_MALFORMED_NAME_CHARS).collect();
                format!("{cut}...")
            } else {
                name.clone()
            }
        })
        .collect();
    let mut message = format!(
        "nodeState annotation cannot be parsed on {} node(s): {}",
        nodes.len(),
        listed.join(", ")
    );
    if nodes.len() > MAX_MALFORMED_LISTED {
        message.push_str(&format!(" and {} more", nodes.len() - MAX_MALFORMED_LISTED));
    }
    message
}

#[cfg(test)]
#[path = "conditions_tests.rs"]
mod tests;
