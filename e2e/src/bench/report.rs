//! What each benchmark case reports: one JSON object per case on stdout, and Markdown tables
//! (the README's Performance section) on stderr. Everything here is pure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

/// The verbs that change state (`apply`: the API server's name for a server-side apply).
const WRITE_VERBS: [&str; 6] = [
    "create",
    "update",
    "patch",
    "apply",
    "delete",
    "deletecollection",
];

/// The controller's API requests over a case: by verb, and by `verb resource`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Requests {
    pub by_verb: BTreeMap<String, u64>,
    pub by_verb_and_resource: BTreeMap<String, u64>,
}

impl Requests {
    /// Requests that change state (see `WRITE_VERBS`).
    pub fn writes(&self) -> u64 {
        WRITE_VERBS
            .iter()
            .filter_map(|verb| self.by_verb.get(*verb))
            .sum()
    }

    /// The writes by `verb resource`, each divided by `per` (node-packages): where the
    /// writes per node and package go.
    pub fn writes_by_resource_per(&self, per: f64) -> BTreeMap<String, f64> {
        self.by_verb_and_resource
            .iter()
            .filter(|(key, _)| {
                key.split_once(' ')
                    .is_some_and(|(verb, _)| WRITE_VERBS.contains(&verb))
            })
            .map(|(key, count)| (key.clone(), *count as f64 / per))
            .collect()
    }

    pub fn total(&self) -> u64 {
        self.by_verb.values().sum()
    }
}

/// A rollout from apply to `complete`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RolloutReport {
    /// `rollout` (one package) or `chain` (three dependent packages, a service interrupt).
    pub case: &'static str,
    pub nodes: usize,
    pub budget_percent: u32,
    pub packages: usize,
    /// Complete Skyhooks already on the cluster while this one rolled out.
    pub other_skyhooks: usize,
    pub wall_seconds: f64,
    pub controller_cpu_seconds: f64,
    pub controller_peak_rss_mib: f64,
    pub apiserver_cpu_seconds: f64,
    /// Share of the whole machine's CPU that was busy: near 100, the machine is the bottleneck.
    pub machine_busy_percent: f64,
    /// Reconciles the controller ran, and their total duration.
    pub reconciles: u64,
    pub reconcile_seconds: f64,
    pub requests: Requests,
    pub writes_per_node_package: f64,
    /// `writes_per_node_package` split by `verb resource` (Events are `create events` and
    /// `patch events`, a series' repeat).
    pub writes_per_node_package_by_resource: BTreeMap<String, f64>,
    /// Every client's writes per node and package, from the API server's counter: the
    /// controller's, the simulated kubelets', kube-controller-manager's (the Job controller's
    /// pods and Job status) and the benchmark's own few.
    pub all_clients_writes_per_node_package: f64,
    pub all_clients_writes_per_node_package_by_resource: BTreeMap<String, f64>,
    /// Pod completions followed by a next step on their node (see `steps`).
    pub steps: usize,
    /// From a package pod's completion to its node's next step (next pod or complete).
    pub step_latency_p50_seconds: Option<f64>,
    pub step_latency_p99_seconds: Option<f64>,
}

/// A settled cluster with complete Skyhooks, measured over a while.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleReport {
    pub case: &'static str,
    pub nodes: usize,
    pub skyhooks: usize,
    pub measured_seconds: f64,
    pub controller_cpu_seconds_per_minute: f64,
    pub controller_rss_mib: f64,
    pub apiserver_cpu_seconds_per_minute: f64,
    pub requests_per_minute: f64,
    pub requests: Requests,
}

/// Server-side dry-run creates of one kind of Skyhook through the API server and the webhook.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdmissionReport {
    pub case: &'static str,
    /// `valid` (allowed) or `invalid` (denied by the webhook).
    pub object: &'static str,
    pub concurrency: usize,
    pub requests: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub per_second: f64,
}

/// `kubectl skyhook status` over all Skyhooks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusReport {
    pub case: &'static str,
    pub nodes: usize,
    pub skyhooks: usize,
    pub runs: usize,
    pub median_seconds: f64,
    pub min_seconds: f64,
}

/// One case's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CaseReport {
    Rollout(RolloutReport),
    Idle(IdleReport),
    Admission(AdmissionReport),
    Status(StatusReport),
}

/// The `q` quantile (0..=1) of `values` by the nearest-rank method; `None` when empty.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    // Nearest rank: the smallest value with at least q of the values at or below it.
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.saturating_sub(1)).copied()
}

/// `create 1200, patch 3400, list 2` ordered by count, largest first.
fn verb_summary(requests: &Requests) -> String {
    let mut verbs: Vec<(&String, &u64)> = requests.by_verb.iter().collect();
    verbs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    verbs
        .iter()
        .map(|(verb, count)| format!("{verb} {count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The cases as Markdown tables, one per kind of case present: rollouts, idle, admission,
/// then status.
pub fn markdown_tables(reports: &[CaseReport]) -> String {
    let mut out = String::new();
    push_table(
        &mut out,
        "| rollout | nodes | budget | wall | controller CPU | reconciles (mean) | peak RSS | controller requests | writes/node/pkg | step p50 / p99 | API server CPU | machine busy |\n\
         |---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n",
        reports.iter().filter_map(|r| match r {
            CaseReport::Rollout(r) => Some(rollout_row(r)),
            _ => None,
        }),
    );
    push_table(
        &mut out,
        "| writes per node and package | nodes | budget | by verb and resource |\n\
         |---|---:|---:|---|\n",
        reports.iter().filter_map(|r| match r {
            CaseReport::Rollout(r) => Some(writes_row(r)),
            _ => None,
        }),
    );
    push_table(
        &mut out,
        "| all clients' writes per node and package (API server) | nodes | budget | total | by verb and resource |\n\
         |---|---:|---:|---:|---|\n",
        reports.iter().filter_map(|r| match r {
            CaseReport::Rollout(r) => Some(all_clients_writes_row(r)),
            _ => None,
        }),
    );
    push_table(
        &mut out,
        "| idle | nodes | Skyhooks | controller CPU/min | RSS | requests/min | API server CPU/min |\n\
         |---|---:|---:|---:|---:|---|---:|\n",
        reports.iter().filter_map(|r| match r {
            CaseReport::Idle(r) => Some(idle_row(r)),
            _ => None,
        }),
    );
    push_table(
        &mut out,
        "| admission (dry-run create) | concurrency | requests | p50 | p99 | per second |\n\
         |---|---:|---:|---:|---:|---:|\n",
        reports.iter().filter_map(|r| match r {
            CaseReport::Admission(r) => Some(admission_row(r)),
            _ => None,
        }),
    );
    push_table(
        &mut out,
        "| `kubectl skyhook status` | nodes | Skyhooks | runs | median | min |\n\
         |---|---:|---:|---:|---:|---:|\n",
        reports.iter().filter_map(|r| match r {
            CaseReport::Status(r) => Some(status_row(r)),
            _ => None,
        }),
    );
    out
}

/// Appends a table with `header` (its two lines) and the rows, then a blank line; nothing when
/// there are no rows.
fn push_table(out: &mut String, header: &str, rows: impl Iterator<Item = String>) {
    let mut rows = rows.peekable();
    if rows.peek().is_none() {
        return;
    }
    out.push_str(header);
    for row in rows {
        let _ = writeln!(out, "{row}");
    }
    out.push('\n');
}

fn rollout_row(r: &RolloutReport) -> String {
    format!(
        "| {} ({} pkg) | {} | {}% | {:.1} s | {:.1} s | {} ({:.2} s) | {:.0} MiB | {} ({}) | {:.2} | {} / {} | {:.1} s | {:.0}% |",
        r.case,
        r.packages,
        r.nodes,
        r.budget_percent,
        r.wall_seconds,
        r.controller_cpu_seconds,
        r.reconciles,
        r.reconcile_seconds / (r.reconciles.max(1) as f64),
        r.controller_peak_rss_mib,
        r.requests.total(),
        verb_summary(&r.requests),
        r.writes_per_node_package,
        seconds(r.step_latency_p50_seconds),
        seconds(r.step_latency_p99_seconds),
        r.apiserver_cpu_seconds,
        r.machine_busy_percent,
    )
}

/// `1.25 s`, or `-` when nothing was measured.
fn seconds(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2} s"))
}

/// `patch nodes 4.00, create pods 2.00` ordered by count, largest first.
fn writes_row(r: &RolloutReport) -> String {
    format!(
        "| {} ({} pkg) | {} | {}% | {} |",
        r.case,
        r.packages,
        r.nodes,
        r.budget_percent,
        per_resource_summary(&r.writes_per_node_package_by_resource)
    )
}

fn all_clients_writes_row(r: &RolloutReport) -> String {
    format!(
        "| {} ({} pkg) | {} | {}% | {:.2} | {} |",
        r.case,
        r.packages,
        r.nodes,
        r.budget_percent,
        r.all_clients_writes_per_node_package,
        per_resource_summary(&r.all_clients_writes_per_node_package_by_resource)
    )
}

/// `verb resource per` pairs, most first.
fn per_resource_summary(writes: &BTreeMap<String, f64>) -> String {
    let mut writes: Vec<(&String, &f64)> = writes.iter().collect();
    writes.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    writes
        .iter()
        .map(|(key, per)| format!("{key} {per:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn idle_row(r: &IdleReport) -> String {
    format!(
        "| {:.0} s measured | {} | {} | {:.2} s | {:.0} MiB | {:.1} ({}) | {:.2} s |",
        r.measured_seconds,
        r.nodes,
        r.skyhooks,
        r.controller_cpu_seconds_per_minute,
        r.controller_rss_mib,
        r.requests_per_minute,
        verb_summary(&r.requests),
        r.apiserver_cpu_seconds_per_minute,
    )
}

fn admission_row(r: &AdmissionReport) -> String {
    format!(
        "| {} | {} | {} | {:.1} ms | {:.1} ms | {:.0} |",
        r.object, r.concurrency, r.requests, r.p50_ms, r.p99_ms, r.per_second,
    )
}

fn status_row(r: &StatusReport) -> String {
    format!(
        "| all Skyhooks | {} | {} | {} | {:.2} s | {:.2} s |",
        r.nodes, r.skyhooks, r.runs, r.median_seconds, r.min_seconds,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests(pairs: &[(&str, u64)]) -> Requests {
        Requests {
            by_verb: pairs.iter().map(|(v, c)| ((*v).to_owned(), *c)).collect(),
            by_verb_and_resource: BTreeMap::new(),
        }
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        let cases: [(&[f64], f64, Option<f64>); 7] = [
            (&[], 0.5, None),
            (&[7.0], 0.99, Some(7.0)),
            (&[3.0, 1.0, 2.0], 0.5, Some(2.0)),
            (&hundred, 0.5, Some(50.0)),
            (&hundred, 0.99, Some(99.0)),
            (&hundred, 1.0, Some(100.0)),
            (&[1.0, f64::NAN, 2.0], 0.0, Some(1.0)),
        ];
        for (values, q, expected) in cases {
            assert_eq!(quantile(values, q), expected, "{values:?} q={q}");
        }
    }

    #[test]
    fn writes_count_only_changing_verbs() {
        let cases = [
            (requests(&[]), 0, 0),
            (requests(&[("get", 5), ("list", 2), ("watch", 4)]), 0, 11),
            (
                requests(&[("create", 3), ("patch", 10), ("delete", 3), ("list", 1)]),
                16,
                17,
            ),
            (requests(&[("update", 1), ("deletecollection", 2)]), 3, 3),
        ];
        for (requests, writes, total) in cases {
            assert_eq!(
                (requests.writes(), requests.total()),
                (writes, total),
                "{requests:?}"
            );
        }
    }

    #[test]
    fn writes_by_resource_leave_out_reads_and_divide() {
        let requests = Requests {
            by_verb: BTreeMap::new(),
            by_verb_and_resource: BTreeMap::from([
                ("create events".to_owned(), 300),
                ("list pods".to_owned(), 7),
                ("patch nodes/status".to_owned(), 200),
                ("watch nodes".to_owned(), 2),
            ]),
        };
        assert_eq!(
            requests.writes_by_resource_per(100.0),
            BTreeMap::from([
                ("create events".to_owned(), 3.0),
                ("patch nodes/status".to_owned(), 2.0),
            ])
        );
    }

    #[test]
    fn verbs_are_summarised_largest_first() {
        let summary = verb_summary(&requests(&[("create", 3), ("patch", 10), ("delete", 3)]));
        assert_eq!(summary, "patch 10, create 3, delete 3");
    }

    #[test]
    fn tables_have_one_row_per_case_and_skip_absent_kinds() {
        let reports = [
            CaseReport::Rollout(RolloutReport {
                case: "rollout",
                nodes: 100,
                budget_percent: 10,
                packages: 1,
                other_skyhooks: 0,
                wall_seconds: 12.34,
                controller_cpu_seconds: 1.5,
                controller_peak_rss_mib: 40.2,
                apiserver_cpu_seconds: 7.0,
                machine_busy_percent: 97.4,
                reconciles: 40,
                reconcile_seconds: 3.0,
                requests: requests(&[("create", 200), ("patch", 400)]),
                writes_per_node_package: 6.0,
                writes_per_node_package_by_resource: BTreeMap::from([
                    ("create pods".to_owned(), 2.0),
                    ("patch nodes".to_owned(), 4.0),
                ]),
                all_clients_writes_per_node_package: 14.5,
                all_clients_writes_per_node_package_by_resource: BTreeMap::from([
                    ("create jobs".to_owned(), 2.0),
                    ("patch pods/status".to_owned(), 8.5),
                    ("patch nodes".to_owned(), 4.0),
                ]),
                steps: 200,
                step_latency_p50_seconds: Some(0.5),
                step_latency_p99_seconds: None,
            }),
            CaseReport::Status(StatusReport {
                case: "status",
                nodes: 1000,
                skyhooks: 3,
                runs: 5,
                median_seconds: 0.5,
                min_seconds: 0.25,
            }),
        ];
        let tables = markdown_tables(&reports);
        let expected = "\
| rollout | nodes | budget | wall | controller CPU | reconciles (mean) | peak RSS | controller requests | writes/node/pkg | step p50 / p99 | API server CPU | machine busy |
|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|
| rollout (1 pkg) | 100 | 10% | 12.3 s | 1.5 s | 40 (0.07 s) | 40 MiB | 600 (patch 400, create 200) | 6.00 | 0.50 s / - | 7.0 s | 97% |

| writes per node and package | nodes | budget | by verb and resource |
|---|---:|---:|---|
| rollout (1 pkg) | 100 | 10% | patch nodes 4.00, create pods 2.00 |

| all clients' writes per node and package (API server) | nodes | budget | total | by verb and resource |
|---|---:|---:|---:|---|
| rollout (1 pkg) | 100 | 10% | 14.50 | patch pods/status 8.50, patch nodes 4.00, create jobs 2.00 |

| `kubectl skyhook status` | nodes | Skyhooks | runs | median | min |
|---|---:|---:|---:|---:|---:|
| all Skyhooks | 1000 | 3 | 5 | 0.50 s | 0.25 s |

";
        assert_eq!(tables, expected);
    }

    #[test]
    fn json_lines_are_flat_objects_named_by_case() -> Result<(), serde_json::Error> {
        let report = CaseReport::Admission(AdmissionReport {
            case: "admission",
            object: "invalid",
            concurrency: 16,
            requests: 400,
            p50_ms: 3.0,
            p99_ms: 9.5,
            per_second: 800.0,
        });
        let json = serde_json::to_value(&report)?;
        assert_eq!(json["case"], "admission");
        assert_eq!(json["object"], "invalid");
        assert_eq!(json["concurrency"], 16);
        Ok(())
    }
}
