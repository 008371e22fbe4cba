//! Golden rendering of every view in every format.

mod common;

use kubectl_skyhook::output::{OutputFormat, View, render};
use kubectl_skyhook::pattern::parse_all;
use kubectl_skyhook::views;
use skyhook_api::uninstall::UninstallMode;

const FORMATS: [(OutputFormat, &str); 4] = [
    (OutputFormat::Table, "txt"),
    (OutputFormat::Wide, "wide.txt"),
    (OutputFormat::Json, "json"),
    (OutputFormat::Yaml, "yaml"),
];

#[allow(clippy::unwrap_used)] // A view that cannot render must fail the test.
fn check_all(name: &str, view: &impl View) {
    for (format, extension) in FORMATS {
        let rendered = render(view, format, false).unwrap();
        common::golden(&format!("{name}.{extension}"), &rendered);
    }
}

#[test]
fn status_overview() {
    check_all("status", &views::overview(&common::cluster()));
}

#[test]
fn status_detail() {
    let cluster = common::cluster();
    check_all(
        "status-demo",
        &views::skyhook_detail(&cluster, "demo").unwrap(),
    );
    check_all(
        "status-gpu",
        &views::skyhook_detail(&cluster, "gpu").unwrap(),
    );
    assert!(views::skyhook_detail(&cluster, "missing").is_none());
}

#[test]
fn node_list() {
    check_all("node-list", &views::node_list(&common::cluster(), "demo"));
}

#[test]
fn node_status() {
    let cluster = common::cluster();
    check_all("node-status", &views::node_status(&cluster, &[], None));
    let only_f = views::node_status(
        &cluster,
        &parse_all(&["node-[f]".into()]).unwrap(),
        Some("gpu"),
    );
    check_all("node-status-filtered", &only_f);
}

#[test]
fn package_status() {
    check_all(
        "package-status",
        &views::package_status(&common::cluster(), "demo", "tuning", &[]),
    );
}

#[test]
fn plan_of_the_demo() {
    check_all(
        "plan-demo",
        &views::plan(&common::cluster(), &common::demo(), UninstallMode::Legacy),
    );
}

#[test]
fn colour_appears_only_when_asked() {
    let view = views::overview(&common::cluster());
    assert!(
        !render(&view, OutputFormat::Table, false)
            .unwrap()
            .contains('\u{1b}')
    );
    assert!(
        render(&view, OutputFormat::Table, true)
            .unwrap()
            .contains('\u{1b}')
    );
    assert!(
        !render(&view, OutputFormat::Json, true)
            .unwrap()
            .contains('\u{1b}')
    );
}

#[test]
fn watch_stops_only_when_every_node_is_complete() {
    let mut cluster = common::cluster();
    assert!(!views::overview(&cluster).complete());
    assert!(!views::skyhook_detail(&cluster, "demo").unwrap().complete());
    let done = common::progress(
        "demo",
        "complete",
        &[common::tuning("config", "complete", 0)],
    );
    for node in &mut cluster.nodes {
        let annotations = node
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        for (key, value) in done.as_object().unwrap() {
            annotations.insert(key.clone(), value.as_str().unwrap().to_owned());
        }
        if let Some(labels) = node.metadata.labels.as_mut() {
            labels.remove("skyhook.nvidia.com/ignore");
        }
    }
    assert!(views::skyhook_detail(&cluster, "demo").unwrap().complete());
    // gpu's driver is only applied on node-f.
    assert!(!views::overview(&cluster).complete());
}

#[test]
fn what_happens_next_when_held() {
    let mut cluster = common::cluster();
    let demo = skyhook_mut(&mut cluster, "demo");
    demo.spec.deployment_policy = Some("missing".into());
    let detail = views::skyhook_detail(&cluster, "demo").unwrap();
    assert!(detail.compartments.is_empty());
    assert_eq!(
        detail.next,
        [
            "nothing: DeploymentPolicy \"missing\" does not exist; create it or remove spec.deploymentPolicy"
        ]
    );

    let demo = skyhook_mut(&mut cluster, "demo");
    demo.spec.deployment_policy = None;
    demo.metadata.annotations =
        Some([("skyhook.nvidia.com/disable".to_owned(), "true".to_owned())].into());
    let detail = views::skyhook_detail(&cluster, "demo").unwrap();
    assert!(detail.disabled);
    assert_eq!(
        detail.next,
        ["nothing: the Skyhook is disabled; `kubectl skyhook enable demo` lets it work again"]
    );

    let gpu = views::skyhook_detail(&cluster, "gpu").unwrap();
    assert!(
        gpu.compartments
            .iter()
            .any(|c| c.name == "__default__" && c.should_stop)
    );
}

#[test]
fn a_stopped_compartment_says_how_to_restart() {
    let mut cluster = common::cluster();
    let gpu = skyhook_mut(&mut cluster, "gpu");
    gpu.metadata.annotations = None;
    let detail = views::skyhook_detail(&cluster, "gpu").unwrap();
    assert_eq!(
        detail.next,
        [
            "compartment __default__: stopped after 2 failed batches in a row; `kubectl skyhook deployment-policy reset gpu` starts it again"
        ]
    );
}

#[test]
fn an_unconfirmed_reboot_is_shown_as_a_warning() {
    let mut cluster = common::cluster();
    let demo = skyhook_mut(&mut cluster, "demo");
    demo.status.get_or_insert_default().conditions.push(condition(
        "skyhook.nvidia.com/RebootNotConfirmed",
        "True",
        "nodes asked to reboot ...: node-b (package tuning:1.1.0, reboot requested at 2026-01-01T00:00:00Z)",
    ));
    let detail = views::skyhook_detail(&cluster, "demo").unwrap();
    let text = render(&detail, OutputFormat::Table, false).unwrap();
    assert!(
        text.contains(
            "Warning: reboot not confirmed: nodes asked to reboot ...: node-b (package tuning:1.1.0"
        ),
        "{text}"
    );
}

#[test]
fn next_names_the_gates_that_hold_new_batches() {
    let mut cluster = common::cluster();
    let demo = skyhook_mut(&mut cluster, "demo");
    demo.status.get_or_insert_default().conditions.extend([
        condition(
            "skyhook.nvidia.com/OutsideMaintenanceWindow",
            "True",
            "compartment __default__: the next window opens at 2026-01-02T01:00:00Z",
        ),
        condition("skyhook.nvidia.com/HealthGateHeld", "False", "not held"),
    ]);
    let detail = views::skyhook_detail(&cluster, "demo").unwrap();
    assert_eq!(
        detail.next,
        [
            "compartment __default__: continues batch 2 on node-b",
            "held, waiting for a maintenance window: compartment __default__: the next window opens at 2026-01-02T01:00:00Z",
            "erroring packages are retried by the operator; `kubectl skyhook package rerun <package> --skyhook demo --node <node>` starts one over",
        ]
    );
}

/// The fixture's Skyhook `name`, to edit.
#[allow(clippy::unwrap_used)] // A fixture without it must fail the test.
fn skyhook_mut<'c>(
    cluster: &'c mut kubectl_skyhook::cluster::Cluster,
    name: &str,
) -> &'c mut skyhook_api::v1alpha1::Skyhook {
    cluster
        .skyhooks
        .iter_mut()
        .find(|s| s.metadata.name.as_deref() == Some(name))
        .unwrap()
}

/// A Skyhook condition as the operator writes it; the reason is its type's last segment.
#[allow(clippy::unwrap_used)] // A fixture time that does not parse must fail the test.
fn condition(
    type_: &str,
    status: &str,
    message: &str,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        type_: type_.into(),
        status: status.into(),
        reason: type_.rsplit('/').next().unwrap_or(type_).into(),
        message: message.into(),
        observed_generation: None,
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-01-01T00:00:00Z".parse().unwrap(),
        ),
    }
}

/// A node state with one entry per `(package, stage, state)`, all at version 1.1.0.
#[allow(clippy::unwrap_used)] // A fixture that does not parse must fail the test.
fn state_of(entries: &[(&str, &str, &str)]) -> skyhook_api::node_state::NodeState {
    let map: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(name, stage, state)| {
            (
                format!("{name}|1.1.0"),
                serde_json::json!({"name": name, "version": "1.1.0", "image": "i",
                    "stage": stage, "state": state, "restarts": 0}),
            )
        })
        .collect();
    skyhook_api::node_state::NodeState::parse(&serde_json::Value::Object(map).to_string()).unwrap()
}

/// The demo with `tuning`'s uninstall block, optionally being deleted.
#[allow(clippy::unwrap_used)] // The demo has a tuning package; without one the test must fail.
fn demo_uninstall(enabled: bool, apply: bool, deleting: bool) -> skyhook_api::v1alpha1::Skyhook {
    let mut demo = common::demo();
    demo.spec.packages.get_mut("tuning").unwrap().uninstall =
        Some(skyhook_api::v1alpha1::Uninstall { enabled, apply });
    if deleting {
        demo.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
    }
    demo
}

#[test]
fn uninstall_progress_counts_nodes_per_stage_and_the_uninstalled() {
    let installed = state_of(&[("tuning", "config", "complete")]);
    let uninstalling = state_of(&[("tuning", "uninstall", "in_progress")]);
    let failing = state_of(&[("tuning", "uninstall", "erroring")]);
    let interrupting = state_of(&[("tuning", "uninstall-interrupt", "in_progress")]);
    let gone = state_of(&[]);
    let nodes = [&installed, &uninstalling, &failing, &interrupting, &gone];
    // (enabled, apply, deleting, node states, expected (requested, uninstall,
    // uninstall-interrupt, erroring, uninstalled) or None for no row)
    type Counts = (bool, usize, usize, usize, Option<usize>);
    let cases: &[(bool, bool, bool, &[_], Option<Counts>)] = &[
        (true, true, false, &nodes, Some((true, 2, 1, 1, Some(1)))),
        (
            true,
            true,
            false,
            &[&gone, &gone],
            Some((true, 0, 0, 0, Some(2))),
        ),
        // Deleting the Skyhook requests the uninstall of every enabled package.
        (
            true,
            false,
            true,
            &[&installed],
            Some((true, 0, 0, 0, Some(0))),
        ),
        // Cancelled while an uncancellable interrupt finishes: shown, nothing uninstalled counted.
        (
            true,
            false,
            false,
            &[&interrupting, &gone],
            Some((false, 0, 1, 0, None)),
        ),
        (true, false, false, &[&installed, &gone], None),
        // apply without enabled is no request (the webhook refuses it anyway).
        (false, true, false, &[&installed], None),
    ];
    for (enabled, apply, deleting, states, want) in cases {
        let rows = views::uninstall_progress(&demo_uninstall(*enabled, *apply, *deleting), states);
        let got: Option<Counts> = rows.first().map(|r| {
            assert_eq!(r.package, "tuning@1.1.0");
            assert_eq!(r.nodes, states.len());
            (
                r.requested,
                r.uninstall,
                r.uninstall_interrupt,
                r.erroring,
                r.uninstalled,
            )
        });
        assert_eq!(
            got, *want,
            "enabled={enabled} apply={apply} deleting={deleting}"
        );
        assert!(rows.len() <= 1);
    }
}

#[test]
fn uninstall_table_renders_counts_and_uninstalled_of_total() {
    let row = |requested, uninstalled| views::UninstallRow {
        package: "tuning@1.1.0".into(),
        requested,
        uninstall: 2,
        uninstall_interrupt: 1,
        erroring: 1,
        uninstalled,
        nodes: 5,
    };
    assert!(views::uninstall_table(&[]).is_none());
    let table = views::uninstall_table(&[row(true, Some(1)), row(false, None)]).unwrap();
    let text = kubectl_skyhook::output::render_table(&table, false);
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines,
        [
            vec![
                "UNINSTALL",
                "PACKAGE",
                "REQUESTED",
                "UNINSTALL",
                "UNINSTALL-INTERRUPT",
                "ERRORING",
                "UNINSTALLED"
            ],
            vec!["tuning@1.1.0", "yes", "2", "1", "1", "1/5"],
            vec!["tuning@1.1.0", "no", "(cancelled)", "2", "1", "1", "-"],
        ]
    );
}

#[test]
fn status_shows_uninstall_progress_only_when_there_is_some() {
    let mut cluster = common::cluster();
    let plain = render(
        &views::skyhook_detail(&cluster, "demo").unwrap(),
        OutputFormat::Table,
        false,
    )
    .unwrap();
    assert!(!plain.contains("UNINSTALL"), "{plain}");
    let demo = skyhook_mut(&mut cluster, "demo");
    *demo = skyhook_api::v1alpha1::Skyhook {
        status: demo.status.take(),
        ..demo_uninstall(true, true, false)
    };
    let detail = views::skyhook_detail(&cluster, "demo").unwrap();
    assert_eq!(detail.uninstalls.len(), 1);
    let text = render(&detail, OutputFormat::Table, false).unwrap();
    assert!(text.contains("UNINSTALL PACKAGE"), "{text}");
    let json = render(&detail, OutputFormat::Json, false).unwrap();
    assert!(json.contains("\"uninstallInterrupt\": 0"), "{json}");
}

#[test]
fn uninstall_and_node_state_conditions_are_shown_as_warnings() {
    let mut cluster = common::cluster();
    let demo = skyhook_mut(&mut cluster, "demo");
    demo.status.get_or_insert_default().conditions.extend([
        condition(
            "UninstallInProgress",
            "True",
            "package a is being uninstalled",
        ),
        condition("UninstallFailed", "True", "package a uninstall is failing"),
        condition("Blocked", "True", "package b is blocked: dependency a"),
        condition(
            "NodeStateMalformed",
            "True",
            "nodeState annotation cannot be parsed",
        ),
        condition("Ready", "False", "0/2 nodes complete"),
    ]);
    let detail = views::skyhook_detail(&cluster, "demo").unwrap();
    let text = render(&detail, OutputFormat::Table, false).unwrap();
    for line in [
        "Warning: uninstall in progress: package a is being uninstalled",
        "Warning: uninstall failing: package a uninstall is failing",
        "Warning: blocked: package b is blocked: dependency a",
        "Warning: node state unreadable: nodeState annotation cannot be parsed",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
    assert!(!text.contains("0/2 nodes complete"), "{text}");
}
