//! `SKYHOOK_NODE_ORDER` on every agent container, and `status.nodeOrderOffset`: the first batch
//! of a rollout counts 0, 1; the next continues at 2.

use std::collections::BTreeMap;

use skyhook_api::keys;
use skyhook_api::v1alpha1::InterruptionBudget;

use super::sim::{Sim, node, package, skyhook};

/// Per node, the distinct `SKYHOOK_NODE_ORDER` values of the pods created on it.
fn orders_of(created: &[k8s_openapi::api::core::v1::Pod]) -> BTreeMap<String, Vec<String>> {
    let mut orders: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in created {
        let spec = pod.spec.as_ref().unwrap();
        let node = spec.node_name.clone().unwrap();
        for container in spec.init_containers.iter().flatten() {
            let order = container
                .env
                .iter()
                .flatten()
                .find(|e| e.name == keys::ENV_SKYHOOK_NODE_ORDER)
                .and_then(|e| e.value.clone());
            if let Some(order) = order {
                let seen = orders.entry(node.clone()).or_default();
                if !seen.contains(&order) {
                    seen.push(order);
                }
            }
        }
    }
    orders
}

#[test]
fn batches_count_on_from_where_the_last_one_ended() {
    let mut s = skyhook("order", vec![package("pkg", "1.0.0")]);
    s.spec.interruption_budget = Some(InterruptionBudget {
        count: Some(2),
        percent: None,
        topology: None,
    });
    let mut sim = Sim::new(
        vec![node("node-a", 0), node("node-b", 1), node("node-c", 2)],
        vec![s],
    );
    let mut created = Vec::new();
    for _ in 0..40 {
        let planned = sim.step();
        created.extend(planned.created_pods());
        sim.settle(|_| false);
    }
    let orders = orders_of(&created);
    let want = |order: &str| vec![order.to_owned()];
    assert_eq!(orders.get("node-a"), Some(&want("0")), "{orders:?}");
    assert_eq!(orders.get("node-b"), Some(&want("1")), "{orders:?}");
    assert_eq!(orders.get("node-c"), Some(&want("2")), "{orders:?}");
    let status = sim.skyhook("order").status.clone().unwrap();
    assert!(status.node_priority.is_empty());
    assert_eq!(status.node_order_offset, 3);
}
