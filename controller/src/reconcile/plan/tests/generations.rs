//! One engine, two API groups: a NodeWright's pass writes every key under its own group's
//! prefix (node state and status, cordon, conditions, pod labels and owner references, its own
//! status conditions, finalizer and Event words), and a Skyhook and a NodeWright working on one
//! node share its cordon: the node is schedulable again only once neither holds it.

use skyhook_api::generation::Group;
use skyhook_api::keys;
use skyhook_api::node_keys::cordon_held;

use super::sim::{Sim, TEST_LABEL, node, package, restarting, skyhook};
use crate::reconcile::plan::{EventTarget, Plan};

const NODE: &str = "node-0";

/// The one test node, with a workload-pod listing so that drains can run.
fn one_node() -> Sim {
    let mut sim = Sim::new(vec![node(NODE, 0)], Vec::new());
    sim.snapshot.workload_pods.insert(NODE.into(), Vec::new());
    sim
}

/// Steps and settles until every pod ran (at most `steps` plans); returns the plans made.
fn run(sim: &mut Sim, steps: usize, mut sample: impl FnMut(&Sim, &Plan)) -> Vec<Plan> {
    let mut plans = Vec::new();
    for _ in 0..steps {
        let planned = sim.step();
        sample(sim, &planned);
        let idle = planned.create_pods.is_empty()
            && planned.nodes.is_empty()
            && planned.statuses.is_empty()
            && sim.snapshot.pods.is_empty();
        plans.push(planned);
        if idle {
            break;
        }
        sim.settle(|_| false);
    }
    plans
}

#[test]
fn a_nodewright_writes_every_key_under_its_own_group() {
    let mut sim = one_node();
    sim.add(Group::NodeWright, skyhook("gpu", vec![restarting()]));
    let plans = run(&mut sim, 40, |_, _| {});
    assert_eq!(
        sim.node_status("gpu", NODE).as_deref(),
        Some("complete"),
        "{:?}",
        sim.node(NODE).annotations
    );
    let node = sim.node(NODE);
    let foreign: Vec<&str> = (node.annotations.iter())
        .map(|(key, _)| key)
        .chain(node.labels.iter().map(|(key, _)| key))
        .chain(node.conditions.iter().map(|c| c.type_.as_str()))
        .filter(|key| key.starts_with("skyhook.nvidia.com/") && *key != TEST_LABEL)
        .collect();
    assert!(
        foreign.is_empty(),
        "skyhook-group keys written: {foreign:?}"
    );
    let nodewright = keys::NODEWRIGHT;
    assert!(
        (node.annotations).contains_key(&nodewright.node_state_annotation("gpu")),
        "{:?}",
        node.annotations
    );
    assert!(
        (node.conditions.iter()).any(|c| c.type_ == nodewright.node_not_ready_condition("gpu")),
        "{:?}",
        node.conditions
    );
    assert!(!node.unschedulable, "the cordon was released");

    let pods: Vec<_> = plans.iter().flat_map(Plan::created_pods).collect();
    assert!(!pods.is_empty());
    for pod in &pods {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(nodewright.name_label).map(String::as_str),
            Some("gpu")
        );
        assert!(
            !labels.keys().any(|k| k.starts_with("skyhook.nvidia.com/")),
            "{labels:?}"
        );
        let owner = &pod.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!(
            (owner.api_version.as_str(), owner.kind.as_str()),
            ("nodewright.nvidia.com/v1alpha1", "NodeWright")
        );
    }

    let object = sim.skyhook("gpu");
    let status = object.status.as_ref().expect("a status is written");
    assert!(
        (status.conditions.iter())
            .filter(|c| c.type_.contains('/'))
            .all(|c| c.type_.starts_with("nodewright.nvidia.com/")),
        "{:?}",
        status.conditions
    );
    assert_eq!(
        object.metadata.finalizers.as_deref(),
        Some(&["nodewright.nvidia.com/nodewright".to_owned()][..])
    );
    let messages: Vec<&str> = (plans.iter().flat_map(|p| &p.events))
        .map(|e| e.message.as_str())
        .collect();
    assert!(
        messages.contains(&"NodeWright [gpu] complete."),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("on [nodewright:gpu]")),
        "{messages:?}"
    );
    assert!(
        (plans.iter().flat_map(|p| &p.events))
            .any(|e| e.target == EventTarget::Skyhook("gpu".into())
                && e.message.starts_with("NodeWright transitioned")),
        "{messages:?}"
    );
}

#[test]
fn a_skyhook_and_a_nodewright_share_one_nodes_cordon() {
    let mut sim = one_node();
    sim.add(Group::Skyhook, skyhook("net", vec![restarting()]));
    let mut tuning = restarting();
    tuning.name = "gpu-tuning".into();
    sim.add(
        Group::NodeWright,
        skyhook("gpu", vec![tuning, package("driver", "1.0.0")]),
    );
    let cordon = |group: Group, name: &str, sim: &Sim| {
        (sim.node(NODE).annotations).contains_key(&group.keys().cordon_annotation(name))
    };
    // (Skyhook's cordon, NodeWright's cordon, unschedulable) after each plan.
    let mut samples = Vec::new();
    run(&mut sim, 60, |sim, _| {
        let node = sim.node(NODE);
        assert_eq!(
            node.unschedulable,
            cordon_held(&node.annotations, &sim.snapshot.owners),
            "the node is cordoned exactly while some workload of either group holds it: {:?}",
            node.annotations
        );
        let held = (
            cordon(Group::Skyhook, "net", sim),
            cordon(Group::NodeWright, "gpu", sim),
            node.unschedulable,
        );
        if samples.last() != Some(&held) {
            samples.push(held);
        }
    });
    // One interrupting workload at a time per node, whatever its group: the NodeWright (first
    // by name) hands the cordon to the Skyhook in one plan, and the node is never schedulable
    // in between.
    assert_eq!(
        samples,
        [
            (false, true, true),
            (true, false, true),
            (false, false, false)
        ],
        "(net's cordon, gpu's cordon, unschedulable) as they changed"
    );
    for name in ["net", "gpu"] {
        assert_eq!(
            sim.node_status(name, NODE).as_deref(),
            Some("complete"),
            "{name}"
        );
    }
    let node = sim.node(NODE);
    assert!(!node.unschedulable);
    assert!(
        !(node.annotations.iter()).any(|(key, _)| key.contains("/cordon_")),
        "{:?}",
        node.annotations
    );
    assert!(
        (node.annotations).contains_key(&keys::SKYHOOK.node_state_annotation("net"))
            && (node.annotations).contains_key(&keys::NODEWRIGHT.node_state_annotation("gpu")),
        "each state under its own group: {:?}",
        node.annotations
    );
}
