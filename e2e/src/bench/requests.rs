//! The controller's API requests over an interval, from two scrapes of its own counter
//! `skyhook_api_requests_total{verb,resource}`, and its reconciles, from the histogram
//! `skyhook_controller_reconcile_duration_seconds`; every client's requests (the kubelets', the
//! Job controller's and the controller's together), from the API server's own counter
//! `apiserver_request_total`.

use std::collections::BTreeMap;

use super::report::Requests;
use crate::metrics::Sample;

/// The controller's request counter.
const COUNTER: &str = "skyhook_api_requests_total";

/// Cumulative request counts by (verb, resource) in one scrape.
pub type Counts = BTreeMap<(String, String), u64>;

/// The reconcile histogram's count and sum.
const RECONCILES: &str = "skyhook_controller_reconcile_duration_seconds";

/// How many reconciles ran so far and how long they took in all.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReconcileTotals {
    pub count: u64,
    pub seconds: f64,
}

impl ReconcileTotals {
    /// The totals of a scrape (zero before the first reconcile).
    pub fn of(samples: &[Sample]) -> Self {
        let value = |suffix: &str| {
            samples
                .iter()
                .find(|sample| sample.name == format!("{RECONCILES}_{suffix}"))
                .map_or(0.0, |sample| sample.value)
        };
        ReconcileTotals {
            count: value("count").max(0.0).round() as u64,
            seconds: value("sum"),
        }
    }

    /// What ran between `before` and `self`.
    pub fn since(self, before: ReconcileTotals) -> ReconcileTotals {
        ReconcileTotals {
            count: self.count.saturating_sub(before.count),
            seconds: (self.seconds - before.seconds).max(0.0),
        }
    }
}

/// The request counters of a scrape.
pub fn counts(samples: &[Sample]) -> Counts {
    samples
        .iter()
        .filter(|sample| sample.name == COUNTER)
        .filter_map(|sample| {
            let verb = sample.labels.get("verb")?.clone();
            let resource = sample.labels.get("resource")?.clone();
            // Counters are whole numbers; the text format writes them as floats.
            Some(((verb, resource), sample.value.max(0.0).round() as u64))
        })
        .collect()
}

/// The API server's request counter, over every client.
const APISERVER_COUNTER: &str = "apiserver_request_total";

/// The API server's request counters of a scrape, by (verb, resource): the verb as the
/// controller's counter spells it (the API server counts a create as `POST` and an update as
/// `PUT`; `APPLY` is a server-side apply, kept apart from `PATCH`), a subresource after a slash
/// (`pods/status`), every other label (code, scope, group, version) summed.
pub fn apiserver_counts(samples: &[Sample]) -> Counts {
    let mut counts = Counts::new();
    for sample in samples.iter().filter(|s| s.name == APISERVER_COUNTER) {
        let (Some(verb), Some(resource)) =
            (sample.labels.get("verb"), sample.labels.get("resource"))
        else {
            continue;
        };
        let resource = match sample.labels.get("subresource").filter(|s| !s.is_empty()) {
            Some(subresource) => format!("{resource}/{subresource}"),
            None => resource.clone(),
        };
        let verb = match verb.to_lowercase().as_str() {
            "post" => "create".to_owned(),
            "put" => "update".to_owned(),
            other => other.to_owned(),
        };
        *counts.entry((verb, resource)).or_default() += sample.value.max(0.0).round() as u64;
    }
    counts
}

/// The watches the controller starts, by resource and how many (the package and node-metadata
/// ConfigMaps are two), each once its first listing is complete.
const WATCHES: [(&str, u64); 5] = [
    ("skyhooks", 1),
    ("deploymentpolicies", 1),
    ("nodes", 1),
    ("pods", 1),
    ("configmaps", 2),
];

/// Whether the controller has filled its caches: every watch it keeps has started, which kube's
/// watcher does only after the paged listing that fills its cache (at 5,000 realistic Nodes,
/// ten pages that take seconds). A case measured before would count that listing as its own.
pub fn caches_filled(counts: &Counts) -> bool {
    WATCHES.iter().all(|(resource, watches)| {
        counts
            .get(&("watch".to_owned(), (*resource).to_owned()))
            .is_some_and(|started| started >= watches)
    })
}

/// What was requested between two scrapes of the same process. A series absent before started
/// at zero.
pub fn between(before: &Counts, after: &Counts) -> Requests {
    let mut requests = Requests::default();
    for ((verb, resource), count) in after {
        let previous = before
            .get(&(verb.clone(), resource.clone()))
            .copied()
            .unwrap_or(0);
        let delta = count.saturating_sub(previous);
        if delta == 0 {
            continue;
        }
        *requests.by_verb.entry(verb.clone()).or_default() += delta;
        *requests
            .by_verb_and_resource
            .entry(format!("{verb} {resource}"))
            .or_default() += delta;
    }
    requests
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str, verb: &str, resource: &str, value: f64) -> Sample {
        Sample {
            name: name.to_owned(),
            labels: BTreeMap::from([
                ("verb".to_owned(), verb.to_owned()),
                ("resource".to_owned(), resource.to_owned()),
            ]),
            value,
        }
    }

    #[test]
    fn the_api_servers_counter_sums_codes_and_keeps_subresources() {
        let labelled =
            |verb: &str, resource: &str, subresource: &str, code: &str, value: f64| Sample {
                name: APISERVER_COUNTER.to_owned(),
                labels: BTreeMap::from([
                    ("verb".to_owned(), verb.to_owned()),
                    ("resource".to_owned(), resource.to_owned()),
                    ("subresource".to_owned(), subresource.to_owned()),
                    ("code".to_owned(), code.to_owned()),
                ]),
                value,
            };
        let samples = [
            labelled("PATCH", "pods", "status", "200", 7.0),
            labelled("PATCH", "pods", "status", "409", 2.0),
            labelled("POST", "jobs", "", "201", 3.0),
            labelled("PUT", "leases", "", "200", 5.0),
            labelled("APPLY", "configmaps", "", "200", 4.0),
            sample("skyhook_api_requests_total", "create", "jobs", 99.0),
        ];
        assert_eq!(
            apiserver_counts(&samples),
            Counts::from([
                (("apply".to_owned(), "configmaps".to_owned()), 4),
                (("create".to_owned(), "jobs".to_owned()), 3),
                (("patch".to_owned(), "pods/status".to_owned()), 9),
                (("update".to_owned(), "leases".to_owned()), 5),
            ])
        );
    }

    #[test]
    fn reconcile_totals_come_from_the_histogram() {
        let scrape = |count: f64, sum: f64| {
            [
                sample(&format!("{RECONCILES}_count"), "", "", count),
                sample(&format!("{RECONCILES}_sum"), "", "", sum),
                sample(COUNTER, "patch", "nodes", 7.0),
            ]
        };
        let before = ReconcileTotals::of(&scrape(10.0, 2.5));
        let after = ReconcileTotals::of(&scrape(14.0, 4.0));
        assert_eq!(
            after.since(before),
            ReconcileTotals {
                count: 4,
                seconds: 1.5
            }
        );
        assert_eq!(ReconcileTotals::of(&[]), ReconcileTotals::default());
    }

    #[test]
    fn caches_are_filled_once_every_watch_started() {
        let watches = |configmaps: f64, nodes: f64| {
            counts(&[
                sample(COUNTER, "list", "nodes", 10.0),
                sample(COUNTER, "watch", "skyhooks", 1.0),
                sample(COUNTER, "watch", "deploymentpolicies", 1.0),
                sample(COUNTER, "watch", "pods", 3.0),
                sample(COUNTER, "watch", "configmaps", configmaps),
                sample(COUNTER, "watch", "nodes", nodes),
            ])
        };
        assert!(caches_filled(&watches(2.0, 1.0)));
        assert!(caches_filled(&watches(5.0, 2.0)), "watches started again");
        assert!(!caches_filled(&watches(2.0, 0.0)), "Nodes still listing");
        assert!(
            !caches_filled(&watches(1.0, 1.0)),
            "one ConfigMap kind left"
        );
        assert!(!caches_filled(&Counts::new()), "nothing started");
    }

    #[test]
    fn deltas_by_verb_and_resource() {
        let before = counts(&[
            sample(COUNTER, "patch", "nodes", 10.0),
            sample(COUNTER, "list", "pods", 3.0),
            sample("other_total", "patch", "nodes", 99.0),
        ]);
        let after = counts(&[
            sample(COUNTER, "patch", "nodes", 25.0),
            sample(COUNTER, "list", "pods", 3.0),
            sample(COUNTER, "create", "pods", 4.0),
            sample(COUNTER, "patch", "skyhooks/status", 2.0),
        ]);
        let requests = between(&before, &after);
        assert_eq!(
            requests.by_verb,
            BTreeMap::from([("create".to_owned(), 4), ("patch".to_owned(), 17)])
        );
        assert_eq!(
            requests.by_verb_and_resource,
            BTreeMap::from([
                ("create pods".to_owned(), 4),
                ("patch nodes".to_owned(), 15),
                ("patch skyhooks/status".to_owned(), 2),
            ])
        );
    }

    #[test]
    fn nothing_between_equal_scrapes() {
        let scrape = counts(&[sample(COUNTER, "get", "leases", 7.0)]);
        assert_eq!(between(&scrape, &scrape), Requests::default());
    }
}
