//! A budget's `topology`, wherever a budget is (a Skyhook's `interruptionBudget`, a
//! DeploymentPolicy's compartments and default).

use super::violation::Violation;
use crate::selector::validate_label_key;
use crate::v1alpha1::TopologyBudget;

/// `key` is a label key; `maxDomains` and `maxPerDomain` are at least 1, and one is set.
pub(super) fn check_topology(topology: &TopologyBudget, field: &str, out: &mut Vec<Violation>) {
    if let Err(problem) = validate_label_key(&topology.key) {
        out.push(Violation::new(
            format!("{field}.key"),
            format!("{:?} is not a node label key: {problem}", topology.key),
            "name the label whose value is the node's rack or NVLink domain, e.g. nvidia.com/gpu.clique",
        ));
    }
    for (name, value) in [
        ("maxDomains", topology.max_domains),
        ("maxPerDomain", topology.max_per_domain),
    ] {
        if let Some(v) = value.filter(|v| *v < 1) {
            out.push(Violation::new(
                format!("{field}.{name}"),
                format!("{name} {v} is below 1"),
                "use 1 or more, or leave it out for no limit",
            ));
        }
    }
    if topology.max_domains.is_none() && topology.max_per_domain.is_none() {
        out.push(Violation::new(
            field,
            "neither maxDomains nor maxPerDomain is set, so the topology limits nothing",
            "set maxDomains (domains disrupted at once), maxPerDomain (nodes of one domain at once) or both",
        ));
    }
}
