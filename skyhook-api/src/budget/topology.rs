//! Failure domains in a budget (`topology`): at most `maxDomains` distinct values of the
//! label `key` disrupted at once in a compartment, at most `maxPerDomain` nodes of one value.
//!
//! A node is disrupted while it holds a budget slot ([`super::slot`]), so a rebooting node, or
//! one a readiness gate holds cordoned, keeps its domain busy. A node without the label is in no
//! domain: it is `blocked` unless `allowUnlabelled`, and then only the node count limits it.
//!
//! Contract: [`DomainUse`] starts from the compartment's slot holders and is asked, candidate by
//! candidate in selection order, whether one more node may take a slot; it counts the nodes it
//! admits, so the picks of one selection never exceed either limit together with the holders.
//! Holders are never refused: limits that shrank under them (the spec changed) hold new nodes
//! back until enough holders finish.

use std::collections::BTreeMap;

use crate::string_map::StringMap;
use crate::v1alpha1::TopologyBudget;

/// What a budget's topology makes of a node's labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain<'a> {
    /// The node is in the domain named by this label value.
    Of(&'a str),
    /// The node does not carry the label.
    Unlabelled,
}

/// The node's domain under `topology`.
pub fn domain_of<'a>(labels: &'a dyn StringMap, topology: &TopologyBudget) -> Domain<'a> {
    labels
        .value(&topology.key)
        .map_or(Domain::Unlabelled, Domain::Of)
}

/// Whether a node without the label may be worked on at all.
pub fn refuses_unlabelled(labels: &dyn StringMap, topology: &TopologyBudget) -> bool {
    !topology.allow_unlabelled && domain_of(labels, topology) == Domain::Unlabelled
}

/// The domains disrupted in one compartment while a selection fills its free slots.
#[derive(Debug, Clone)]
pub struct DomainUse<'t, 'a> {
    topology: &'t TopologyBudget,
    busy: BTreeMap<&'a str, usize>,
}

fn limit(value: Option<i32>) -> usize {
    value.map_or(usize::MAX, |v| {
        usize::try_from(v.max(1)).unwrap_or(usize::MAX)
    })
}

impl<'t, 'a> DomainUse<'t, 'a> {
    /// The domains of `holders`, the labels of the nodes holding a slot now.
    pub fn new(
        topology: &'t TopologyBudget,
        holders: impl IntoIterator<Item = &'a dyn StringMap>,
    ) -> Self {
        let mut busy = BTreeMap::new();
        for labels in holders {
            if let Domain::Of(value) = domain_of(labels, topology) {
                *busy.entry(value).or_insert(0) += 1;
            }
        }
        DomainUse { topology, busy }
    }

    /// Whether one more node with `labels` may be disrupted; counts it when it may.
    pub fn admit(&mut self, labels: &'a dyn StringMap) -> bool {
        let value = match domain_of(labels, self.topology) {
            Domain::Unlabelled => return self.topology.allow_unlabelled,
            Domain::Of(value) => value,
        };
        let in_domain = self.busy.get(value).copied().unwrap_or(0);
        let new_domain = in_domain == 0;
        if in_domain >= limit(self.topology.max_per_domain)
            || (new_domain && self.busy.len() >= limit(self.topology.max_domains))
        {
            return false;
        }
        *self.busy.entry(value).or_insert(0) += 1;
        true
    }

    /// The disrupted domains and their node counts, by value.
    pub fn busy(&self) -> &BTreeMap<&'a str, usize> {
        &self.busy
    }
}

/// The message of a compartment whose free slots wait for domains: which domains are busy,
/// and the limits.
pub fn domains_held_message(
    compartment: &str,
    topology: &TopologyBudget,
    busy: &BTreeMap<&str, usize>,
    waiting: &[&str],
) -> String {
    let busy: Vec<String> = busy.iter().map(|(d, n)| format!("{d} ({n})")).collect();
    let mut limits = Vec::new();
    if let Some(n) = topology.max_domains {
        limits.push(format!("maxDomains {n}"));
    }
    if let Some(n) = topology.max_per_domain {
        limits.push(format!("maxPerDomain {n}"));
    }
    format!(
        "[{compartment}] {} wait for their {} domain: disrupted now {}; the budget's topology allows {}",
        waiting.join(", "),
        topology.key,
        if busy.is_empty() {
            "none".to_owned()
        } else {
            busy.join(", ")
        },
        limits.join(" and ")
    )
}

/// The message of a compartment whose nodes lack the topology label.
pub fn unlabelled_message(compartment: &str, topology: &TopologyBudget, nodes: &[&str]) -> String {
    format!(
        "[{compartment}] {} blocked: no {} label, and the budget's topology does not allowUnlabelled; label the nodes with their domain or set allowUnlabelled: true",
        nodes.join(", "),
        topology.key
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rack(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("rack".to_owned(), value.to_owned())])
    }

    fn topology(max_domains: Option<i32>, max_per_domain: Option<i32>) -> TopologyBudget {
        TopologyBudget {
            key: "rack".into(),
            max_domains,
            max_per_domain,
            allow_unlabelled: false,
        }
    }

    /// (limits, holders, candidates in order, admitted)
    type Case<'a> = (
        TopologyBudget,
        Vec<&'a BTreeMap<String, String>>,
        Vec<&'a BTreeMap<String, String>>,
        Vec<bool>,
    );

    #[test]
    fn admits_within_both_limits_counting_the_holders() {
        let a = rack("a");
        let b = rack("b");
        let c = rack("c");
        let none = BTreeMap::new();
        let cases: [Case<'_>; 5] = [
            (
                topology(Some(1), None),
                vec![],
                vec![&a, &b, &a],
                vec![true, false, true],
            ),
            (
                topology(Some(1), None),
                vec![&b],
                vec![&a, &b],
                vec![false, true],
            ),
            (
                topology(None, Some(1)),
                vec![&a],
                vec![&a, &b, &c, &b],
                vec![false, true, true, false],
            ),
            (
                topology(Some(2), Some(2)),
                vec![&a],
                vec![&a, &a, &b, &c],
                vec![true, false, true, false],
            ),
            (
                topology(Some(1), None),
                vec![&none],
                vec![&none, &a],
                vec![false, true],
            ),
        ];
        for (topology, holders, candidates, expected) in cases {
            let mut domains =
                DomainUse::new(&topology, holders.into_iter().map(|l| l as &dyn StringMap));
            let got: Vec<bool> = candidates
                .into_iter()
                .map(|l| domains.admit(l as &dyn StringMap))
                .collect();
            assert_eq!(got, expected, "{topology:?}");
        }
    }

    #[test]
    fn unlabelled_nodes_are_refused_unless_allowed_and_then_in_no_domain() {
        let none: BTreeMap<String, String> = BTreeMap::new();
        let a = rack("a");
        let strict = topology(Some(1), Some(1));
        assert!(refuses_unlabelled(&none, &strict));
        assert!(!refuses_unlabelled(&a, &strict));
        let lenient = TopologyBudget {
            allow_unlabelled: true,
            ..strict
        };
        assert!(!refuses_unlabelled(&none, &lenient));
        let mut domains = DomainUse::new(&lenient, [&a as &dyn StringMap]);
        assert!(domains.admit(&none), "in no domain, so no domain limit");
        assert!(domains.admit(&none));
        assert_eq!(domains.busy().len(), 1);
    }

    #[test]
    fn the_message_names_the_waiting_nodes_busy_domains_and_limits() {
        let busy = BTreeMap::from([("rack-a", 2)]);
        assert_eq!(
            domains_held_message(
                "__default__",
                &TopologyBudget {
                    key: "example.com/rack".into(),
                    max_domains: Some(1),
                    max_per_domain: Some(2),
                    allow_unlabelled: false,
                },
                &busy,
                &["node-3", "node-4"],
            ),
            "[__default__] node-3, node-4 wait for their example.com/rack domain: disrupted now rack-a (2); the budget's topology allows maxDomains 1 and maxPerDomain 2"
        );
    }
}
