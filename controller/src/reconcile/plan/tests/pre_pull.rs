//! Pre-pull (`spec.prePullImages`, `PRE_PULL_IMAGES`): before a node is cordoned for a package
//! with an interrupt, a short pod pulls its images while the node keeps working; a pull the
//! kubelet reports failing makes the package `erroring` and the node is never cordoned. Off by
//! default, and never for a Skyhook that does not cordon.

use skyhook_api::keys;
use skyhook_api::v1alpha1::{InterruptionBudget, Stage, State};

use super::sim::{Sim, node, package, rebooting, skyhook};
use crate::pre_pull::{PullFailure, PullState};
use crate::reconcile::plan::{EventTarget, Plan};

const NAME: &str = "pulled";
const NODE: &str = "node-0";

fn sim(pre_pull: Option<bool>, packages: Vec<skyhook_api::v1alpha1::Package>) -> Sim {
    let mut s = skyhook(NAME, packages);
    s.spec.pre_pull_images = pre_pull;
    s.spec.interruption_budget = Some(InterruptionBudget {
        count: Some(1),
        percent: None,
        topology: None,
    });
    let mut sim = Sim::new(vec![node(NODE, 0), node("node-1", 1)], vec![s]);
    for n in [NODE, "node-1"] {
        sim.snapshot.workload_pods.insert(n.into(), Vec::new());
    }
    sim
}

fn events<'p>(planned: &'p Plan, target: &EventTarget, reason: &str) -> Vec<&'p str> {
    (planned.events.iter())
        .filter(|e| &e.target == target && e.reason == reason)
        .map(|e| e.message.as_str())
        .collect()
}

fn held(sim: &Sim) -> Option<(String, String)> {
    sim.true_condition(NAME, keys::SKYHOOK.condition_pre_pull_held)
        .map(|c| (c.reason.clone(), c.message.clone()))
}

fn failing() -> PullState {
    PullState::Failed(PullFailure {
        image: "ghcr.io/nvidia/skyhook/agentless:1.2.3".into(),
        reason: "ErrImagePull".into(),
        message: "manifest unknown".into(),
    })
}

#[test]
fn off_unless_asked_and_never_for_a_skyhook_that_does_not_cordon() {
    let cases = [
        ("unset, controller default off", None, false, true),
        (
            "spec false beats the controller's true",
            Some(false),
            true,
            true,
        ),
        ("nothing interrupts", Some(true), false, false),
    ];
    for (case, spec, controller, interrupting) in cases {
        let packages = match interrupting {
            true => vec![rebooting()],
            false => vec![package("tuning", "1.0.0")],
        };
        let mut sim = sim(spec, packages);
        sim.config.pre_pull_images = controller;
        for _ in 0..4 {
            let planned = sim.step();
            assert!(planned.create_pre_pulls.is_empty(), "{case}");
            sim.settle(|_| false);
        }
        assert!(held(&sim).is_none(), "{case}");
    }
}

#[test]
fn the_node_is_cordoned_only_once_its_images_are_on_it() {
    for (case, spec, controller) in [
        ("spec.prePullImages", Some(true), false),
        ("PRE_PULL_IMAGES", None, true),
    ] {
        let mut sim = sim(spec, vec![rebooting()]);
        sim.config.pre_pull_images = controller;
        let planned = sim.step();
        let [pod] = planned.create_pre_pulls.as_slice() else {
            panic!("{case}: one pre-pull pod: {:?}", planned.create_pre_pulls);
        };
        let spec_of = pod.spec.as_ref().unwrap();
        assert_eq!(spec_of.node_name.as_deref(), Some(NODE), "{case}");
        let images: Vec<&str> = (spec_of.init_containers.iter().flatten())
            .filter_map(|c| c.image.as_deref())
            .collect();
        assert_eq!(
            images,
            [
                "ghcr.io/nvidia/skyhook/agentless:1.2.3",
                "ghcr.io/nvidia/skyhook/agentless:6.2.0"
            ],
            "{case}: the package image, then the agent's"
        );
        assert_eq!(
            events(&planned, &EventTarget::Node(NODE.into()), "PrePull"),
            [format!(
                "pulling [ghcr.io/nvidia/skyhook/agentless:1.2.3, ghcr.io/nvidia/skyhook/agentless:6.2.0] on node [{NODE}] for Skyhook [{NAME}] before it is cordoned"
            )],
            "{case}"
        );
        assert!(planned.create_pods.is_empty(), "{case}: no stage yet");
        for _ in 0..3 {
            let planned = sim.step();
            assert!(planned.create_pre_pulls.is_empty(), "{case}: made once");
            assert!(
                !sim.node(NODE).unschedulable,
                "{case}: not cordoned while pulling"
            );
            assert_eq!(sim.node_status(NAME, NODE).as_deref(), Some("in_progress"));
            assert!(
                !sim.node("node-1").unschedulable,
                "{case}: node-0 has the slot"
            );
        }
        let (reason, message) = held(&sim).expect("the condition says what holds the node");
        assert_eq!(reason, keys::PRE_PULL_PULLING_REASON);
        assert_eq!(
            message,
            format!("pulling images before the cordon on 1 node: {NODE}")
        );
        sim.set_pre_pulls(&PullState::Pulled);
        sim.step();
        assert!(sim.node(NODE).unschedulable, "{case}: cordoned once pulled");
        let planned = sim.step();
        assert_eq!(
            planned.delete_pods.keys().collect::<Vec<_>>(),
            [&pod.metadata.name.clone().unwrap()],
            "{case}: the pod goes once the node is cordoned"
        );
        assert!(held(&sim).is_none(), "{case}");
        sim.run(60);
        assert_eq!(sim.node_status(NAME, NODE).as_deref(), Some("complete"));
        assert_eq!(sim.node_status(NAME, "node-1").as_deref(), Some("complete"));
        assert!(sim.snapshot.pre_pulls.is_empty(), "{case}: none left");
    }
}

#[test]
fn a_pull_failure_makes_the_package_erroring_and_the_node_is_never_cordoned() {
    let mut sim = sim(Some(true), vec![rebooting()]);
    sim.step();
    sim.set_pre_pulls(&failing());
    let planned = sim.step();
    let message = "image [ghcr.io/nvidia/skyhook/agentless:1.2.3] of package [dexter:1.2.3] cannot be pulled on node [node-0]: ErrImagePull: manifest unknown; the node was not cordoned. Fix the image or version in spec.packages, or the registry or spec.imagePullSecrets: the kubelet keeps retrying";
    for target in [
        EventTarget::Node(NODE.into()),
        EventTarget::Skyhook(NAME.into()),
    ] {
        let warned: Vec<_> = (planned.events.iter())
            .filter(|e| e.target == target && e.reason == "PrePullFailed")
            .collect();
        assert_eq!(warned.len(), 1, "{target:?}");
        assert!(warned[0].warning);
        assert_eq!(warned[0].message, message);
    }
    assert_eq!(
        sim.state(NAME, NODE),
        [("dexter|1.2.3".into(), Stage::Apply, State::Erroring)]
    );
    assert_eq!(sim.node_status(NAME, NODE).as_deref(), Some("erroring"));
    let (reason, condition) = held(&sim).expect("held");
    assert_eq!(reason, keys::PRE_PULL_FAILED_REASON);
    assert!(
        condition.starts_with(
            "an image cannot be pulled on 1 node: node-0 ([ghcr.io/nvidia/skyhook/agentless:1.2.3] ErrImagePull)"
        ),
        "{condition}"
    );
    // Released like any uncordoned failed node: it leaves the batch and the next node is
    // tried; its failing pull stays (the kubelet keeps retrying it), so its next batch finds
    // the failure at once. Nothing is ever cordoned while the image cannot be pulled.
    let planned = sim.step();
    assert!(planned.delete_pods.is_empty(), "{:?}", planned.delete_pods);
    assert_eq!(planned.create_pre_pulls.len(), 1);
    assert!(
        (planned.create_pre_pulls[0].metadata.name.as_deref())
            .is_some_and(|p| p.contains("prepull-node-1"))
    );
    for _ in 0..6 {
        sim.set_pre_pulls(&failing());
        let planned = sim.step();
        assert!(planned.create_pods.is_empty(), "no stage runs");
        assert!(planned.create_pre_pulls.is_empty(), "no pull made again");
        assert!(planned.delete_pods.is_empty(), "no failing pull deleted");
        assert!(
            events(&planned, &EventTarget::Node(NODE.into()), "PrePullFailed").is_empty(),
            "warned once"
        );
        assert!(!sim.node(NODE).unschedulable && !sim.node("node-1").unschedulable);
        let (reason, _) = held(&sim).expect("held while the image cannot be pulled");
        assert_eq!(reason, keys::PRE_PULL_FAILED_REASON);
    }
    assert_eq!(
        sim.state(NAME, "node-1"),
        [("dexter|1.2.3".into(), Stage::Apply, State::Erroring)]
    );
    assert_eq!(sim.snapshot.pre_pulls.len(), 2, "one failing pull per node");
    // The registry is back: the kubelet's next try pulls, or a later batch pulls again.
    for run in &mut sim.snapshot.pre_pulls {
        run.state = PullState::Pulled;
    }
    sim.run(80);
    assert_eq!(sim.node_status(NAME, NODE).as_deref(), Some("complete"));
    assert_eq!(sim.node_status(NAME, "node-1").as_deref(), Some("complete"));
}

#[test]
fn a_new_version_is_another_pull_and_a_refused_pod_is_made_again() {
    let mut sim = sim(Some(true), vec![rebooting()]);
    let first = sim.step().create_pre_pulls[0]
        .metadata
        .name
        .clone()
        .unwrap();
    sim.skyhook_mut(NAME)
        .spec
        .packages
        .get_mut("dexter")
        .unwrap()
        .version = "1.2.4".into();
    let planned = sim.step();
    assert!(
        planned.delete_pods.contains_key(&first),
        "the stale pull goes"
    );
    let second = planned.create_pre_pulls[0].metadata.name.clone().unwrap();
    assert_ne!(first, second);
    let images: Vec<&str> = (planned.create_pre_pulls[0].spec.iter())
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter_map(|c| c.image.as_deref())
        .collect();
    assert_eq!(images[0], "ghcr.io/nvidia/skyhook/agentless:1.2.4");
    sim.set_pre_pulls(&PullState::Refused("OutOfpods".into()));
    let planned = sim.step();
    assert!(
        planned.delete_pods.contains_key(&second),
        "refused: deleted"
    );
    assert!(planned.create_pre_pulls.is_empty(), "made once it is gone");
    let planned = sim.step();
    assert_eq!(
        planned.create_pre_pulls[0].metadata.name.as_deref(),
        Some(second.as_str())
    );
    assert!(!sim.node(NODE).unschedulable);
}
