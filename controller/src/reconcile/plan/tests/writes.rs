//! The writes of a one-package rollout without interrupt (issue 15's benchmark case), plan by
//! plan: each visible step of the node is one node patch carrying every transition of that plan
//! (state, status label, bookkeeping and conditions together), and a plan between pod runs
//! writes nothing to the node. With no spec change in any of them, the apply step writes each
//! patch in one request (`apply::node_writes`).

use super::sim::{Sim, node, package, skyhook};

/// What one plan writes for the node: (node patched, conditions changed, spec changed, pods
/// created, pods deleted, node-metadata ConfigMaps written).
type Writes = (bool, bool, bool, usize, usize, usize);

fn writes_of(planned: &crate::reconcile::plan::Plan) -> Writes {
    let patch = planned.nodes.get("worker");
    (
        patch.is_some(),
        patch.is_some_and(|p| !p.conditions.is_empty() || !p.remove_conditions.is_empty()),
        patch.is_some_and(|p| p.unschedulable.is_some() || p.taints.is_some()),
        planned.create_pods.len(),
        planned.delete_pods.len(),
        planned.upsert_configmaps.len(),
    )
}

#[test]
fn a_one_package_rollout_patches_the_node_once_per_visible_step() {
    let mut sim = Sim::new(
        vec![node("worker", 0)],
        vec![skyhook("w", vec![package("dexter", "1.2.3")])],
    );
    // (what happens before the plan, what the plan writes)
    let steps: [(&str, Writes); 6] = [
        ("apply starts", (true, true, false, 1, 0, 1)),
        ("apply pod running", (false, false, false, 0, 0, 0)),
        (
            "apply pod done: config starts",
            (true, false, false, 1, 1, 1),
        ),
        ("config pod running", (false, false, false, 0, 0, 0)),
        (
            "config pod done: node complete",
            (true, true, false, 0, 1, 0),
        ),
        ("settled", (false, false, false, 0, 0, 0)),
    ];
    for (index, (when, expected)) in steps.into_iter().enumerate() {
        if index == 2 || index == 4 {
            sim.settle(|_| false);
        }
        let planned = sim.step();
        assert_eq!(writes_of(&planned), expected, "{when}");
    }
    assert_eq!(sim.node_status("w", "worker").as_deref(), Some("complete"));
}
