use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::v1alpha1::{PackageStatus, Stage, Uninstall};
use Status::*;

fn node(name: &str, status: Status) -> ReadyNode<'_> {
    ReadyNode {
        name,
        status,
        complete: status == Complete,
    }
}

fn names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}{i:02}")).collect()
}

#[test]
fn ready_message_and_status_table() {
    let eleven = names("n", 11);
    let many: Vec<ReadyNode<'_>> = eleven.iter().map(|n| node(n, InProgress)).collect();
    let cases: Vec<(Status, Vec<ReadyNode<'_>>, bool, &str, &str)> = vec![
        (
            Complete,
            vec![],
            true,
            "NodesConverged",
            "0/0 nodes complete",
        ),
        (
            Complete,
            vec![node("b", Complete), node("a", Complete)],
            true,
            "NodesConverged",
            "2/2 nodes complete (a, b)",
        ),
        (
            InProgress,
            vec![
                node("c", Unknown),
                node("b", InProgress),
                node("a", Complete),
                node("e", Blocked),
                node("d", Erroring),
                node("f", Waiting),
            ],
            false,
            "Progressing",
            "1/6 nodes complete (a), 1 in progress (b), 1 blocked (e), 1 erroring (d), 1 waiting (f), 1 unknown (c)",
        ),
        (
            Disabled,
            vec![node("x", Disabled), node("y", Paused)],
            false,
            "Disabled",
            "0/2 nodes complete, 1 paused (y), 1 disabled (x)",
        ),
        (
            InProgress,
            many,
            false,
            "Progressing",
            "0/11 nodes complete, 11 in progress (list truncated; see controller logs)",
        ),
    ];
    for (status, nodes, ready, reason, message) in cases {
        let summary = ready_summary(status, &nodes);
        assert_eq!(
            (summary.ready, summary.reason, summary.message.as_str()),
            (ready, reason, message),
            "{nodes:?}"
        );
    }
}

#[test]
fn ready_is_true_when_every_node_is_complete_whatever_the_status_says() {
    // A paused Skyhook forces its nodes to `paused`; Ready follows the package rule.
    let nodes = [ReadyNode {
        name: "a",
        status: Paused,
        complete: true,
    }];
    let summary = ready_summary(Paused, &nodes);
    assert_eq!(
        (summary.ready, summary.reason, summary.message.as_str()),
        (true, "Paused", "0/1 nodes complete, 1 paused (a)")
    );
}

#[test]
fn a_truncated_ready_group_is_returned_whole_for_the_log() {
    let eleven = names("n", 11);
    let mut nodes: Vec<ReadyNode<'_>> = eleven.iter().rev().map(|n| node(n, Complete)).collect();
    nodes.push(node("z", Waiting));
    let summary = ready_summary(Waiting, &nodes);
    assert_eq!(
        summary.message,
        "11/12 nodes complete (list truncated; see controller logs), 1 waiting (z)"
    );
    assert_eq!(
        summary.long_lists,
        vec![LongList {
            condition: keys::CONDITION_READY,
            group: "complete".into(),
            nodes: eleven,
        }]
    );
}

#[test]
fn ready_reasons_cover_every_status() {
    let cases = [
        (Complete, "NodesConverged"),
        (InProgress, "Progressing"),
        (Blocked, "Blocked"),
        (Erroring, "Erroring"),
        (Paused, "Paused"),
        (Waiting, "Waiting"),
        (Disabled, "Disabled"),
        (Unknown, "Unknown"),
    ];
    assert_eq!(cases.len(), Status::ALL.len());
    for (status, reason) in cases {
        assert_eq!(ready_reason(status), reason);
    }
}

#[test]
fn transition_texts() {
    let cases = [
        (
            Some(Complete),
            Some("[in_progress] -> [complete]"),
            ("complete", "Transitioned [in_progress] -> [complete]"),
        ),
        (
            Some(InProgress),
            None,
            ("in_progress", "1/2 nodes complete"),
        ),
        (None, None, ("unknown", "1/2 nodes complete")),
    ];
    for (status, transition, (reason, message)) in cases {
        let got = transition_text(status, transition, "1/2 nodes complete");
        assert_eq!((got.0.as_str(), got.1.as_str()), (reason, message));
    }
}

#[test]
fn blocked_node_messages_are_sorted_and_become_a_count_above_ten() {
    assert_eq!(
        intolerable_message(vec![
            "b: t=x:NoSchedule".into(),
            "a-b: v:NoSchedule".into(),
            "a: u:NoExecute".into()
        ]),
        "nodes with taints the Skyhook does not tolerate: a: u:NoExecute; a-b: v:NoSchedule; b: t=x:NoSchedule"
    );
    assert_eq!(
        intolerable_message(names("n", 11)),
        "11 nodes have taints that are not tolerable. Skipping."
    );
    assert_eq!(
        ignored_message(vec!["b".into(), "a".into()]),
        "nodes labelled skyhook.nvidia.com/ignore=true: a, b"
    );
    assert_eq!(
        ignored_message(names("n", 10)),
        format!(
            "nodes labelled skyhook.nvidia.com/ignore=true: {}",
            names("n", 10).join(", ")
        )
    );
    assert_eq!(
        ignored_message(names("n", 12)),
        "12 nodes have ignore label set. Skipping."
    );
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, at: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(1),
        last_transition_time: Time(Timestamp::from_second(at).unwrap()),
    }
}

#[test]
fn transition_time_is_kept_while_the_status_is_unchanged_and_for_transition_while_all_is() {
    let t = keys::SKYHOOK.condition_transition;
    // (type, old (status, reason, message), new, kept)
    let cases = [
        (
            "Ready",
            ("False", "Progressing", "m"),
            ("False", "Erroring", "n"),
            true,
        ),
        (
            "Ready",
            ("False", "Progressing", "m"),
            ("True", "NodesConverged", "m"),
            false,
        ),
        (
            t,
            ("False", "in_progress", "m"),
            ("False", "in_progress", "m"),
            true,
        ),
        (
            t,
            ("False", "in_progress", "m"),
            ("False", "in_progress", "n"),
            false,
        ),
        (
            t,
            ("False", "in_progress", "m"),
            ("False", "erroring", "m"),
            false,
        ),
    ];
    for (type_, old, new, kept) in cases {
        let mut list = vec![condition(type_, old.0, old.1, old.2, 100)];
        set_condition(&mut list, condition(type_, new.0, new.1, new.2, 200));
        assert_eq!(list.len(), 1);
        let want = if kept { 100 } else { 200 };
        assert_eq!(
            list[0].last_transition_time.0.as_second(),
            want,
            "{type_} {old:?} -> {new:?}"
        );
        assert_eq!(list[0].message, new.2);
    }
    let mut list = vec![condition("A", "True", "R", "m", 100)];
    let before = list.clone();
    set_condition(&mut list, condition("A", "True", "R", "m", 300));
    assert_eq!(list, before, "an identical condition changes nothing");
    set_or_remove(&mut list, "A", None);
    assert!(list.is_empty());
}

fn package(name: &str, depends_on: &[&str], uninstall: Option<(bool, bool)>) -> Package {
    Package {
        name: name.into(),
        version: "1.0.0".into(),
        image: "img".into(),
        depends_on: depends_on
            .iter()
            .map(|d| ((*d).to_owned(), "1.0.0".to_owned()))
            .collect(),
        uninstall: uninstall.map(|(enabled, apply)| Uninstall { enabled, apply }),
        ..Package::default()
    }
}

fn entry(name: &str, stage: Stage, state: State) -> PackageStatus {
    PackageStatus {
        name: name.into(),
        version: "1.0.0".into(),
        image: "img".into(),
        container_sha: String::new(),
        stage,
        state,
        restarts: 0,
    }
}

fn state(entries: &[(&str, Stage, State)]) -> NodeState {
    entries
        .iter()
        .map(|(name, stage, state)| entry(name, *stage, *state))
        .collect()
}

fn holding(
    packages: &[Package],
    deleting: bool,
    nodes: &[(&str, Option<&NodeState>)],
) -> BTreeMap<&'static str, String> {
    let packages: BTreeMap<String, Package> = packages
        .iter()
        .map(|p| (p.name.clone(), p.clone()))
        .collect();
    let nodes: BTreeMap<String, NodeStateRead<'_>> = nodes
        .iter()
        .map(|(name, state)| {
            let read = state.map_or(NodeStateRead::Malformed, NodeStateRead::Parsed);
            ((*name).to_owned(), read)
        })
        .collect();
    let no_interrupt = BTreeSet::new();
    let facts = UninstallFacts {
        packages: &packages,
        deleting,
        nodes: &nodes,
        interrupting: &no_interrupt,
    };
    let out = uninstall_conditions(&facts);
    out.holding
        .into_iter()
        .map(|c| {
            assert!(UNINSTALL_CONDITION_TYPES.contains(&c.type_));
            (c.type_, format!("{}: {}", c.reason, c.message))
        })
        .collect()
}

#[test]
fn uninstall_in_progress_and_failed_follow_the_node_states() {
    use Stage::{Apply, Config, Uninstall, UninstallInterrupt};
    use State::{Complete as Done, Erroring as Failing, InProgress as Running};
    let a = package("a", &[], Some((true, true)));
    let b = package("b", &[], Some((true, false)));
    let cycling = state(&[("a", Uninstall, Failing), ("b", UninstallInterrupt, Done)]);
    let uninstalling = state(&[("a", Uninstall, Running), ("b", Config, Done)]);
    let installed = state(&[("a", Apply, Done), ("b", Config, Done)]);
    let got = holding(
        &[a.clone(), b.clone()],
        false,
        &[
            ("n2", Some(&uninstalling)),
            ("n1", Some(&cycling)),
            ("n3", Some(&installed)),
        ],
    );
    assert_eq!(
        got,
        BTreeMap::from([
            (
                keys::CONDITION_UNINSTALL_IN_PROGRESS,
                "UninstallInProgress: package a is being uninstalled on 2 node(s) (n1, n2); package b is being uninstalled on 1 node(s) (n1)".to_owned()
            ),
            (
                keys::CONDITION_UNINSTALL_FAILED,
                "UninstallPodFailing: package a uninstall is failing on 1 node(s) (n1)".to_owned()
            ),
        ])
    );
    // An entry of another version, or of a package not in the spec, is not the spec's.
    let mut other = entry("a", Uninstall, Running);
    other.version = "0.9.0".into();
    let old: NodeState = [other, entry("gone", Uninstall, Running)]
        .into_iter()
        .collect();
    assert!(holding(&[a, b], false, &[("n1", Some(&old))]).is_empty());
}

#[test]
fn uninstall_node_lists_are_capped_like_ready() {
    let a = package("a", &[], Some((true, true)));
    let cycling = state(&[("a", Stage::Uninstall, State::InProgress)]);
    let nodes: Vec<(String, NodeStateRead<'_>)> = names("n", 11)
        .into_iter()
        .map(|n| (n, NodeStateRead::Parsed(&cycling)))
        .collect();
    let nodes: BTreeMap<String, NodeStateRead<'_>> = nodes.into_iter().collect();
    let packages = BTreeMap::from([("a".to_owned(), a)]);
    let out = uninstall_conditions(&UninstallFacts {
        packages: &packages,
        deleting: false,
        nodes: &nodes,
        interrupting: &BTreeSet::new(),
    });
    assert_eq!(
        out.holding[0].message,
        "package a is being uninstalled on 11 node(s) (list truncated; see controller logs)"
    );
    assert_eq!(out.long_lists.len(), 1);
    assert_eq!(out.long_lists[0].nodes, names("n", 11));
}

#[test]
fn blocked_table() {
    use Stage::{Apply, Config, Uninstall};
    use State::{Complete as Done, InProgress as Running};
    let requested = |name, deps: &[&str]| package(name, deps, Some((true, true)));
    let enabled = |name, deps: &[&str]| package(name, deps, Some((true, false)));
    let plain = |name, deps: &[&str]| package(name, deps, None);
    let a_cycling = state(&[("a", Uninstall, Running)]);
    let a_gone = NodeState::new();
    let b_done = state(&[("b", Config, Done)]);
    let b_running = state(&[("b", Apply, Running)]);
    let being = "DependencyUninstalled: package b is blocked: dependency a is being uninstalled";
    let been = "DependencyUninstalled: package b is blocked: dependency a has been uninstalled";
    type Case<'a> = (
        Vec<Package>,
        bool,
        Vec<(&'a str, Option<&'a NodeState>)>,
        Option<&'a str>,
    );
    let cases: Vec<Case<'_>> = vec![
        // A in cycle on one node blocks B.
        (
            vec![requested("a", &[]), plain("b", &["a"])],
            false,
            vec![("n1", Some(&a_cycling)), ("n2", Some(&b_running))],
            Some(being),
        ),
        // Cancelled but still in its cycle: still blocks.
        (
            vec![enabled("a", &[]), plain("b", &["a"])],
            false,
            vec![("n1", Some(&a_cycling))],
            Some(being),
        ),
        // A requested and absent everywhere.
        (
            vec![requested("a", &[]), plain("b", &["a"])],
            false,
            vec![("n1", Some(&a_gone)), ("n2", Some(&b_running))],
            Some(been),
        ),
        // ... but not while a node is unreadable, nor with no node.
        (
            vec![requested("a", &[]), plain("b", &["a"])],
            false,
            vec![("n1", Some(&a_gone)), ("n2", None)],
            None,
        ),
        (
            vec![requested("a", &[]), plain("b", &["a"])],
            false,
            vec![],
            None,
        ),
        // Absent but not requested: it simply has not installed yet.
        (
            vec![plain("a", &[]), plain("b", &["a"])],
            false,
            vec![("n1", Some(&a_gone))],
            None,
        ),
        // Deleting makes `enabled` count as requested.
        (
            vec![enabled("a", &[]), plain("b", &["a"])],
            true,
            vec![("n1", Some(&a_gone))],
            Some(been),
        ),
        // B requested itself, or complete on every node: not blocked.
        (
            vec![requested("a", &[]), requested("b", &["a"])],
            false,
            vec![("n1", Some(&a_cycling))],
            None,
        ),
        (
            vec![requested("a", &[]), plain("b", &["a"])],
            false,
            vec![("n1", Some(&b_done))],
            None,
        ),
    ];
    for (i, (packages, deleting, nodes, want)) in cases.into_iter().enumerate() {
        let got = holding(&packages, deleting, &nodes);
        assert_eq!(
            got.get(keys::CONDITION_BLOCKED).map(String::as_str),
            want,
            "case {i}"
        );
    }
}

#[test]
fn blocked_messages_are_sorted_and_joined() {
    let requested = |name| package(name, &[], Some((true, true)));
    let packages = [
        requested("a"),
        requested("c"),
        package("z", &["c", "a"], None),
        package("b", &["c"], None),
    ];
    let cycling = state(&[
        ("a", Stage::Uninstall, State::InProgress),
        ("c", Stage::UninstallInterrupt, State::InProgress),
    ]);
    let got = holding(&packages, false, &[("n1", Some(&cycling))]);
    assert_eq!(
        got[keys::CONDITION_BLOCKED],
        "DependencyUninstalled: package b is blocked: dependency c is being uninstalled; package z is blocked: dependency a is being uninstalled; package z is blocked: dependency c is being uninstalled"
    );
}

#[test]
fn node_state_malformed_message_table() {
    let cases: [(Vec<String>, &str); 4] = [
        (
            vec!["node-b".into()],
            "ParseError: nodeState annotation cannot be parsed on 1 node(s): node-b",
        ),
        (
            vec![
                "b".into(),
                "a-very-long-node-name".into(),
                "exactly-10".into(),
            ],
            "ParseError: nodeState annotation cannot be parsed on 3 node(s): a-very-lon..., b, exactly-10",
        ),
        (
            names("n", 5),
            "ParseError: nodeState annotation cannot be parsed on 5 node(s): n00, n01, n02, n03, n04",
        ),
        (
            names("n", 8).into_iter().rev().collect(),
            "ParseError: nodeState annotation cannot be parsed on 8 node(s): n00, n01, n02, n03, n04 and 3 more",
        ),
    ];
    for (malformed, want) in cases {
        let nodes: Vec<(&str, Option<&NodeState>)> =
            malformed.iter().map(|n| (n.as_str(), None)).collect();
        let got = holding(&[], false, &nodes);
        assert_eq!(got[keys::CONDITION_NODE_STATE_MALFORMED], want);
    }
    let fine = NodeState::new();
    assert!(holding(&[], false, &[("n1", Some(&fine))]).is_empty());
}
