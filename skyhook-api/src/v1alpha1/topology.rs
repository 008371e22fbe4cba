//! A budget's failure domains, shared by a Skyhook's `interruptionBudget` and a
//! DeploymentPolicy compartment's `budget`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How many failure domains, and how many nodes of one, may be disrupted at once: a domain is
/// the value of a node label (`nvidia.com/gpu.clique`, `topology.kubernetes.io/rack`). A node
/// counts as disrupted while it holds a budget slot (cordoned by the Skyhook, interrupting or
/// rebooting, or with a package pod at work). Set `maxDomains`, `maxPerDomain` or both.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyBudget {
    /// The node label whose value names the node's domain.
    pub key: String,
    /// Most distinct domains disrupted at once (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_domains: Option<i32>,
    /// Most nodes of one domain disrupted at once (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_per_domain: Option<i32>,
    /// Whether nodes without the label are worked on (in no domain, limited only by the node
    /// count). Default false: they are `blocked` until labelled.
    #[serde(default)]
    pub allow_unlabelled: bool,
}
