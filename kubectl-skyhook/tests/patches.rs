//! Table tests of the patch planners: the exact merge patches and messages of every verb.

mod common;

use kubectl_skyhook::patches::{self, Lifecycle, PlanError, Target};
use kubectl_skyhook::pattern::parse_all;
use serde_json::{Value, json};
use skyhook_api::node_state::NodeState;
use skyhook_api::transition::TransitionTimes;
use skyhook_api::v1alpha1::{Skyhook, Stage, Uninstall};

fn with_annotations(mut skyhook: Skyhook, annotations: &[(&str, &str)]) -> Skyhook {
    skyhook.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    skyhook
}

#[test]
fn lifecycle_verbs_set_or_remove_one_annotation() {
    let plain = common::demo();
    let paused = with_annotations(common::demo(), &[("skyhook.nvidia.com/pause", "true")]);
    let disabled = with_annotations(common::demo(), &[("skyhook.nvidia.com/disable", "true")]);
    // Only pause and disable ask; resume and enable undo them without asking, as upstream's.
    for (skyhook, verb, annotation, value, done, dry_run, asks) in [
        (
            &plain,
            Lifecycle::Pause,
            "skyhook.nvidia.com/pause",
            json!("true"),
            "Skyhook \"demo\" paused",
            "[dry-run] Would pause Skyhook \"demo\"",
            true,
        ),
        (
            &paused,
            Lifecycle::Resume,
            "skyhook.nvidia.com/pause",
            Value::Null,
            "Skyhook \"demo\" resumed",
            "[dry-run] Would resume Skyhook \"demo\"",
            false,
        ),
        (
            &plain,
            Lifecycle::Disable,
            "skyhook.nvidia.com/disable",
            json!("true"),
            "Skyhook \"demo\" disabled",
            "[dry-run] Would disable Skyhook \"demo\"",
            true,
        ),
        (
            &disabled,
            Lifecycle::Enable,
            "skyhook.nvidia.com/disable",
            Value::Null,
            "Skyhook \"demo\" enabled",
            "[dry-run] Would enable Skyhook \"demo\"",
            false,
        ),
    ] {
        let change = patches::lifecycle(skyhook, verb, None).unwrap();
        assert_eq!(change.patches.len(), 1, "{verb:?}");
        assert_eq!(change.patches[0].target, Target::Skyhook("demo".into()));
        assert_eq!(
            change.patches[0].body,
            json!({"metadata": {"annotations": {annotation: value}}}),
            "{verb:?}"
        );
        assert_eq!(change.done, [done]);
        assert_eq!(change.dry_run(), [dry_run]);
        assert_eq!(change.confirm, asks, "{verb:?}");
        assert_eq!(verb.asks(), asks, "{verb:?}");
    }
}

#[test]
fn lifecycle_verbs_with_nothing_to_do_only_say_so() {
    let plain = common::demo();
    let paused = with_annotations(common::demo(), &[("skyhook.nvidia.com/pause", "true")]);
    for (skyhook, verb, note) in [
        (
            &paused,
            Lifecycle::Pause,
            "Skyhook \"demo\" is already paused",
        ),
        (&plain, Lifecycle::Resume, "Skyhook \"demo\" is not paused"),
        (
            &plain,
            Lifecycle::Enable,
            "Skyhook \"demo\" is not disabled",
        ),
        // Resume leaves disable alone: a paused and disabled Skyhook stays disabled.
        (
            &with_annotations(common::demo(), &[("skyhook.nvidia.com/disable", "true")]),
            Lifecycle::Disable,
            "Skyhook \"demo\" is already disabled",
        ),
    ] {
        let change = patches::lifecycle(skyhook, verb, None).unwrap();
        assert!(change.patches.is_empty(), "{verb:?}");
        assert_eq!(change.notes, [note]);
    }
}

#[test]
fn lifecycle_verbs_refuse_operators_older_than_0_8_0() {
    let annotated = with_annotations(common::demo(), &[("skyhook.nvidia.com/version", "v0.7.3")]);
    for (skyhook, deployment, allowed) in [
        (&annotated, None, false),
        // The operator's annotation wins over the Deployment.
        (&annotated, Some("v0.13.0"), false),
        (&common::demo(), Some("v0.7.9"), false),
        (&common::demo(), Some("0.8.0"), true),
        (&common::demo(), Some("v0.13.0"), true),
        (&common::demo(), Some("not-a-version"), true),
        (&common::demo(), None, true),
        // This workspace's controller annotates the upstream release it is compatible with.
        (
            &with_annotations(
                common::demo(),
                &[(
                    "skyhook.nvidia.com/version",
                    skyhook_api::keys::COMPATIBLE_OPERATOR_VERSION,
                )],
            ),
            None,
            true,
        ),
    ] {
        let operator = patches::operator_version_of(skyhook, deployment);
        let result = patches::lifecycle(skyhook, Lifecycle::Pause, operator);
        assert_eq!(result.is_ok(), allowed, "{operator:?}");
        if let Err(error) = result {
            assert!(
                matches!(error, PlanError::OperatorTooOld { verb: "pause", .. }),
                "{error}"
            );
        }
    }
}

#[test]
fn reset_clears_every_key_of_the_skyhook_on_nodes_with_its_state_then_the_batch_state() {
    let cluster = common::cluster();
    let demo = cluster.skyhook("demo").unwrap();
    let change = patches::reset(&cluster, demo, false);
    let targets: Vec<&Target> = change.patches.iter().map(|p| &p.target).collect();
    assert_eq!(
        targets,
        [
            &Target::Node("node-a".into()),
            &Target::Node("node-b".into()),
            &Target::Node("node-c".into()),
            &Target::Node("node-f".into()),
            &Target::SkyhookStatus("demo".into()),
            &Target::SkyhookStatus("demo".into()),
        ]
    );
    assert_eq!(
        change.patches[0].body,
        json!({"metadata": {
            "annotations": {
                "skyhook.nvidia.com/nodeState_demo": null,
                "skyhook.nvidia.com/status_demo": null,
                "skyhook.nvidia.com/version_demo": null,
                "skyhook.nvidia.com/cordonedAt_demo": null,
                "skyhook.nvidia.com/drainFail_demo": null,
                "skyhook.nvidia.com/drainStart_demo": null,
                "skyhook.nvidia.com/drainBlocked_demo": null,
                "skyhook.nvidia.com/bootId_demo": null,
                "skyhook.nvidia.com/pickedAt_demo": null,
                "skyhook.nvidia.com/stageTimes_demo": null,
                "skyhook.nvidia.com/readyGate_demo": null,
                "skyhook.nvidia.com/autoTaint_demo": null,
            },
            "labels": {"skyhook.nvidia.com/status_demo": null},
        }})
    );
    assert_eq!(
        change.patches[4].body,
        json!({"status": {"compartmentStatuses": {"__default__": {"batchState": {
            "currentBatch": 1, "consecutiveFailures": null, "completedNodes": null,
            "failedNodes": null, "shouldStop": null, "lastBatchSize": null, "lastBatchFailed": null,
        }}}}})
    );
    assert_eq!(
        change.summary,
        [
            "Skyhook \"demo\": resetting node state on 4 node(s):",
            "  - node-a (1 packages)",
            "  - node-b (1 packages)",
            "  - node-c (1 packages)",
            "  - node-f (1 packages)",
            "Batch state of 1 compartment(s) goes back to batch 1.",
        ]
    );
    assert_eq!(
        change.done,
        [
            "Skyhook \"demo\" reset on 4 node(s)",
            "Node \"node-b\" keeps the cordon of Skyhook \"demo\": its next run releases it",
            "Batch state of Skyhook \"demo\" reset"
        ]
    );

    // node-f is no longer selected: no re-run will release a cordon there.
    assert_eq!(
        change.patches[3].body["metadata"]["annotations"]["skyhook.nvidia.com/cordon_demo"],
        Value::Null
    );
    assert!(
        (change.patches[3].body["metadata"]["annotations"].as_object())
            .is_some_and(|a| a.contains_key("skyhook.nvidia.com/cordon_demo"))
    );
    assert!(
        !(change.patches[1].body["metadata"]["annotations"].as_object())
            .is_some_and(|a| a.contains_key("skyhook.nvidia.com/cordon_demo")),
        "node-b, still selected, keeps its cordon"
    );

    let skip = patches::reset(&cluster, demo, true);
    assert_eq!(skip.patches.len(), 4);
    assert!(
        skip.patches
            .iter()
            .all(|p| matches!(p.target, Target::Node(_)))
    );
}

/// Which node keys `reset` removes: upstream's (spec §4) plus our `cordonedAt_`, so that the
/// next drain does not start from a stale time; node conditions are not metadata and stay.
/// On node-f, which the Skyhook no longer selects, its cordon annotation goes too.
#[test]
fn reset_removes_upstreams_node_keys_and_the_drain_start() {
    let cluster = common::cluster();
    let change = patches::reset(&cluster, cluster.skyhook("demo").unwrap(), true);
    assert_eq!(change.patches[3].target, Target::Node("node-f".into()));
    let body = &change.patches[3].body["metadata"];
    let removed = |section: &str, key: &str| body[section].get(key) == Some(&Value::Null);
    for (key, annotation, label) in [
        ("skyhook.nvidia.com/nodeState_demo", true, false),
        ("skyhook.nvidia.com/status_demo", true, true),
        ("skyhook.nvidia.com/cordon_demo", true, false),
        ("skyhook.nvidia.com/version_demo", true, false),
        ("skyhook.nvidia.com/autoTaint_demo", true, false),
        ("skyhook.nvidia.com/cordonedAt_demo", true, false),
        ("skyhook.nvidia.com/drainStart_demo", true, false),
        ("skyhook.nvidia.com/drainBlocked_demo", true, false),
        ("skyhook.nvidia.com/demo/NotReady", false, false),
        ("skyhook.nvidia.com/demo/Erroring", false, false),
        ("skyhook.nvidia.com/nodeState_other", false, false),
    ] {
        assert_eq!(removed("annotations", key), annotation, "annotation {key}");
        assert_eq!(removed("labels", key), label, "label {key}");
    }
    // A per-Skyhook metadata key added later is removed by reset without another edit, but for
    // the migration's adoption mark, which keeps a migrated node from adopting its old keys
    // again.
    let adopted = skyhook_api::keys::SKYHOOK.adopted_by_annotation("demo");
    for key in skyhook_api::keys::SKYHOOK.per_skyhook_node_keys("demo") {
        if key.kind != skyhook_api::keys::NodeKeyKind::ConditionType {
            assert_eq!(
                removed("annotations", &key.key),
                key.key != adopted,
                "{key:?}"
            );
        }
    }
}

#[test]
fn reset_without_node_state_only_resets_batches() {
    let cluster = common::cluster();
    let mut lonely = cluster.skyhook("demo").unwrap().clone();
    lonely.metadata.name = Some("lonely".into());
    let change = patches::reset(&cluster, &lonely, false);
    assert_eq!(
        change.notes,
        ["No node has node state for Skyhook \"lonely\""]
    );
    assert_eq!(change.patches.len(), 2);
    assert!(
        change
            .patches
            .iter()
            .all(|p| p.target == Target::SkyhookStatus("lonely".into()))
    );
}

#[test]
fn deployment_policy_reset_reports_and_resets_compartments_with_batch_state() {
    let cluster = common::cluster();
    let change = patches::deployment_policy_reset(cluster.skyhook("gpu").unwrap());
    assert_eq!(
        change.summary,
        [
            "Compartments: 2 total, 1 with batch state",
            "  - __default__: current batch 3"
        ]
    );
    assert_eq!(change.patches.len(), 1);
    assert_eq!(
        change.patches[0].body["status"]["compartmentStatuses"]["__default__"]["batchState"]["currentBatch"],
        json!(1)
    );
    assert!(
        change.patches[0].body["status"]["compartmentStatuses"]
            .get("canary")
            .is_none()
    );
    assert_eq!(
        change.dry_run(),
        [
            "[dry-run] Would reset the batch state of 1 compartment(s) of Skyhook \"gpu\" to currentBatch 1"
        ]
    );

    let fresh = common::demo();
    let nothing = patches::deployment_policy_reset(&fresh);
    assert!(nothing.patches.is_empty());
    assert_eq!(
        nothing.notes,
        ["Skyhook \"demo\" has no batch state to reset"]
    );
}

#[test]
fn node_reset_removes_only_the_node_state_on_matching_nodes() {
    let cluster = common::cluster();
    for (patterns, expected) in [
        (vec!["node-a"], vec!["node-a"]),
        (vec!["node-[ab]"], vec!["node-a", "node-b"]),
        (
            vec!["node-.*"],
            vec!["node-a", "node-b", "node-c", "node-f"],
        ),
        (vec!["node-d"], vec![]),
        (vec!["node"], vec![]),
    ] {
        let patterns =
            parse_all(&patterns.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>()).unwrap();
        let change = patches::node_reset(&cluster, "demo", &patterns);
        let nodes: Vec<String> = change
            .patches
            .iter()
            .map(|p| match &p.target {
                Target::Node(n) => n.clone(),
                other => panic!("unexpected target {other:?}"),
            })
            .collect();
        assert_eq!(nodes, expected);
        for patch in &change.patches {
            assert_eq!(
                patch.body,
                json!({"metadata": {"annotations": {"skyhook.nvidia.com/nodeState_demo": null}}})
            );
        }
        if expected.is_empty() {
            assert_eq!(
                change.notes,
                ["No matching node has node state for Skyhook \"demo\""]
            );
        }
    }
}

#[test]
fn ignore_and_unignore_set_the_label_and_report_no_ops() {
    let cluster = common::cluster();
    let patterns = parse_all(&["node-[cd]".into()]).unwrap();
    let ignore = patches::node_ignore(&cluster, &patterns, true);
    assert_eq!(ignore.notes, ["Node \"node-d\" already ignored"]);
    assert_eq!(ignore.patches.len(), 1);
    assert_eq!(ignore.patches[0].target, Target::Node("node-c".into()));
    assert_eq!(
        ignore.patches[0].body,
        json!({"metadata": {"labels": {"skyhook.nvidia.com/ignore": "true"}}})
    );
    assert_eq!(ignore.done, ["Node \"node-c\" ignored"]);

    let unignore = patches::node_ignore(&cluster, &patterns, false);
    assert_eq!(unignore.notes, ["Node \"node-c\" not ignored"]);
    assert_eq!(
        unignore.patches[0].body,
        json!({"metadata": {"labels": {"skyhook.nvidia.com/ignore": null}}})
    );
    assert_eq!(unignore.patches[0].target, Target::Node("node-d".into()));

    let none = patches::node_ignore(&cluster, &parse_all(&["nope".into()]).unwrap(), true);
    assert_eq!(none.notes, ["No node matches"]);
}

#[allow(clippy::unwrap_used)] // A patch with a broken annotation must fail the test.
fn node_state_in(body: &Value) -> Option<NodeState> {
    body["metadata"]["annotations"]["skyhook.nvidia.com/nodeState_demo"]
        .as_str()
        .map(|v| NodeState::parse(v).unwrap())
}

#[test]
fn rerun_deletes_or_rewinds_the_spec_version_entry() {
    let cluster = common::cluster();
    let demo = cluster.skyhook("demo").unwrap();
    let all = parse_all(&["node-.*".into()]).unwrap();

    // Without a stage the entry goes; the only entry going removes the annotation.
    let change = patches::package_rerun(&cluster, demo, "tuning", &all, None).unwrap();
    assert_eq!(
        change.patches.len(),
        4,
        "every node with the entry, not node-d/node-e"
    );
    for patch in &change.patches {
        let mut annotations = json!({"skyhook.nvidia.com/nodeState_demo": null});
        // node-a's stage times go with its last entry; the other nodes have none.
        if patch.target == Target::Node("node-a".into()) {
            annotations["skyhook.nvidia.com/stageTimes_demo"] = Value::Null;
        }
        assert_eq!(
            patch.body,
            json!({"metadata": {"annotations": annotations}})
        );
    }

    // With a stage the entry becomes (stage, in_progress), everything else kept.
    let change = patches::package_rerun(
        &cluster,
        demo,
        "tuning",
        &parse_all(&["node-a".into()]).unwrap(),
        Some(Stage::Config),
    )
    .unwrap();
    assert_eq!(change.patches.len(), 1);
    let state = node_state_in(&change.patches[0].body).unwrap();
    let entry = state.get_version("tuning", "1.1.0").unwrap();
    assert_eq!(
        (entry.stage.as_str(), entry.state.as_str()),
        ("config", "in_progress")
    );
    assert_eq!(entry.image, "ghcr.io/nvidia/skyhook-packages/shellscript");
    // node-a's entry completed at 11:10; the rerun starts when the cluster was read.
    let times =
        &change.patches[0].body["metadata"]["annotations"]["skyhook.nvidia.com/stageTimes_demo"];
    let times = TransitionTimes::parse(times.as_str().unwrap()).unwrap();
    assert_eq!(
        times.of(entry),
        Some(cluster.read_at),
        "the rerun is timed from when it was asked for"
    );
    assert_eq!(
        change.dry_run(),
        ["[dry-run] Would rerun package \"tuning\" (1.1.0) on node \"node-a\" from stage config"]
    );
}

#[test]
fn rerun_refuses_unknown_packages() {
    let cluster = common::cluster();
    let demo = cluster.skyhook("demo").unwrap();
    let error = patches::package_rerun(&cluster, demo, "nope", &[], None).unwrap_err();
    assert_eq!(
        error,
        PlanError::UnknownPackage {
            package: "nope".into(),
            skyhook: "demo".into(),
            kind: "Skyhook",
        }
    );
}

/// Like upstream's, `reset` starts the rollout order (`SKYHOOK_NODE_ORDER`) from 0 again after
/// the batch reset, unless `--skip-batch-reset`; with nothing picked and no offset it writes
/// nothing for it.
#[test]
fn reset_restarts_the_rollout_order() {
    let cluster = common::cluster();
    let mut ordered = cluster.skyhook("demo").unwrap().clone();
    let status = ordered.status.get_or_insert_default();
    status.node_order_offset = 4;
    status.node_priority.insert(
        "node-a".into(),
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ),
    );
    let change = patches::reset(&cluster, &ordered, false);
    let last = change.patches.last().unwrap();
    assert_eq!(last.target, Target::SkyhookStatus("demo".into()));
    assert_eq!(
        last.body,
        json!({"status": {"nodeOrderOffset": 0, "nodePriority": null}})
    );
    let skip = patches::reset(&cluster, &ordered, true);
    assert!(
        skip.patches
            .iter()
            .all(|p| matches!(p.target, Target::Node(_)))
    );

    let mut unordered = ordered.clone();
    let status = unordered.status.get_or_insert_default();
    status.node_order_offset = 0;
    status.node_priority.clear();
    let change = patches::reset(&cluster, &unordered, false);
    assert!(change.patches.iter().all(|p| {
        !p.body["status"]
            .as_object()
            .is_some_and(|s| s.contains_key("nodeOrderOffset"))
    }));
}

/// The demo with `tuning`'s uninstall block set to `block` (`None` removes it).
#[allow(clippy::unwrap_used)] // The demo has a tuning package; without one the test must fail.
fn with_uninstall(block: Option<(bool, bool)>) -> Skyhook {
    let mut skyhook = common::demo();
    let tuning = skyhook.spec.packages.get_mut("tuning").unwrap();
    tuning.uninstall = block.map(|(enabled, apply)| Uninstall { enabled, apply });
    skyhook
}

#[test]
fn package_uninstall_sets_only_uninstall_apply_with_a_merge_patch() {
    // (uninstall block, cancel, apply sent, asks, summary start, done start)
    let cases = [
        (
            (true, false),
            false,
            true,
            true,
            "This will uninstall package \"tuning\" (1.1.0) of Skyhook \"demo\" from every node",
            "Uninstall of package \"tuning\" of Skyhook \"demo\" requested;",
        ),
        (
            (true, true),
            true,
            false,
            false,
            "This will cancel the uninstall of package \"tuning\" (1.1.0) of Skyhook \"demo\"",
            "Uninstall of package \"tuning\" of Skyhook \"demo\" cancelled;",
        ),
        // apply without enabled (stored before the webhook checked it): a cancel clears it.
        (
            (false, true),
            true,
            false,
            false,
            "This will cancel the uninstall of package \"tuning\" (1.1.0) of Skyhook \"demo\"",
            "Uninstall of package \"tuning\" of Skyhook \"demo\" cancelled;",
        ),
    ];
    for (block, cancel, apply, asks, summary, done) in cases {
        let change =
            patches::package_uninstall(&with_uninstall(Some(block)), "tuning", cancel).unwrap();
        assert_eq!(change.patches.len(), 1, "{block:?} cancel={cancel}");
        let patch = &change.patches[0];
        assert_eq!(patch.target, Target::Skyhook("demo".into()));
        assert_eq!(
            patch.body,
            json!({"spec": {"packages": {"tuning": {"uninstall": {"apply": apply}}}}})
        );
        assert_eq!(change.confirm, asks, "cancel={cancel}");
        assert!(
            change.summary[0].starts_with(summary),
            "{:?}",
            change.summary
        );
        assert!(change.done[0].starts_with(done), "{:?}", change.done);
        assert!(change.notes.is_empty());
        let verb = if cancel {
            "cancel the uninstall"
        } else {
            "request the uninstall"
        };
        assert_eq!(
            change.dry_run(),
            [format!(
                "[dry-run] Would {verb} of package \"tuning\" of Skyhook \"demo\""
            )]
        );
    }
}

#[test]
fn package_uninstall_with_nothing_to_do_only_says_so() {
    for (block, cancel, note) in [
        (
            (true, true),
            false,
            "The uninstall of package \"tuning\" of Skyhook \"demo\" is already requested; `kubectl skyhook status` shows its progress",
        ),
        (
            (true, false),
            true,
            "The uninstall of package \"tuning\" of Skyhook \"demo\" is not requested; nothing to cancel",
        ),
        // A cancel needs no uninstall support: with `enabled` false there is nothing to cancel.
        (
            (false, false),
            true,
            "The uninstall of package \"tuning\" of Skyhook \"demo\" is not requested; nothing to cancel",
        ),
    ] {
        let change =
            patches::package_uninstall(&with_uninstall(Some(block)), "tuning", cancel).unwrap();
        assert!(change.patches.is_empty(), "{block:?} cancel={cancel}");
        assert_eq!(change.notes, [note]);
    }
    let no_block = patches::package_uninstall(&with_uninstall(None), "tuning", true).unwrap();
    assert!(no_block.patches.is_empty() && no_block.notes.len() == 1);
}

#[test]
fn package_uninstall_refusals_name_the_fix() {
    let mut deleting = with_uninstall(Some((true, true)));
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-01-01T00:00:00Z".parse().unwrap(),
        ));
    let cases = [
        (
            with_uninstall(Some((true, false))),
            "nope",
            false,
            "package \"nope\" is not in the spec of Skyhook \"demo\"",
        ),
        (
            with_uninstall(None),
            "tuning",
            false,
            "set packages.tuning.uninstall.enabled: true first",
        ),
        (
            with_uninstall(Some((false, false))),
            "tuning",
            false,
            "set packages.tuning.uninstall.enabled: true first",
        ),
        (
            deleting,
            "tuning",
            true,
            "Skyhook \"demo\" is being deleted",
        ),
    ];
    for (skyhook, package, cancel, message) in cases {
        let error = patches::package_uninstall(&skyhook, package, cancel).unwrap_err();
        assert!(
            error.to_string().contains(message),
            "{package} cancel={cancel}: {error}"
        );
    }
}

#[test]
fn reset_also_frees_the_pick_of_a_node_without_node_state() {
    let mut cluster = common::cluster();
    let node_e = cluster
        .nodes
        .iter_mut()
        .find(|n| n.metadata.name.as_deref() == Some("node-e"))
        .unwrap();
    node_e.metadata.annotations.get_or_insert_default().insert(
        "skyhook.nvidia.com/pickedAt_demo".into(),
        "2026-01-01T11:00:00Z".into(),
    );
    let demo = cluster.skyhook("demo").unwrap().clone();
    let change = patches::reset(&cluster, &demo, true);
    let targets: Vec<&Target> = change.patches.iter().map(|p| &p.target).collect();
    assert!(
        targets.contains(&&Target::Node("node-e".into())),
        "{targets:?}"
    );
    assert!(
        change
            .summary
            .contains(&"  - node-e (0 packages)".to_owned())
    );
}
