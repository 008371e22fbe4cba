//! The metric names a PromQL expression reads, and the expressions of the chart's Grafana
//! dashboard and PrometheusRule, so a test can check every name against the controller's
//! `/metrics`.
//!
//! The extractor knows just enough PromQL: strings, label matchers (`{...}`), ranges and
//! subqueries (`[...]`) and Grafana variables (`$name`) hold no metric name; an identifier
//! followed by `(` is a function or aggregation, and so are the aggregation keywords; the parenthesised list after `by`, `without`,
//! `on`, `ignoring`, `group_left` and `group_right` names labels; keywords and numbers are
//! skipped. Grafana's `label_values(metric, label)` reads its first argument only.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use serde_json::Value;

/// Keywords, constants and aggregations (`sum by (x) (...)` puts `by` before the `(`) that
/// look like identifiers.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
    "atan2",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
/// Keywords followed by a parenthesised list of label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names `expr` reads.
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_string(&chars, i),
            '{' => i = skip_to(&chars, i, '}'),
            '[' => i = skip_to(&chars, i, ']'),
            '$' => i = skip_identifier(&chars, i + 1),
            c if c.is_ascii_digit() || c == '.' => i = skip_identifier(&chars, i + 1),
            c if is_identifier_start(c) => {
                let end = skip_identifier(&chars, i);
                let word: String = chars[i..end].iter().collect();
                let next = next_non_space(&chars, end);
                i = end;
                if LABEL_LISTS.contains(&word.as_str()) && next == Some('(') {
                    i = skip_to(&chars, skip_spaces(&chars, end), ')');
                } else if word == "label_values" && next == Some('(') {
                    let start = skip_spaces(&chars, skip_spaces(&chars, end) + 1);
                    let first_end = skip_identifier(&chars, start);
                    if first_end > start && next_non_space(&chars, first_end) == Some(',') {
                        names.insert(chars[start..first_end].iter().collect());
                    }
                    i = skip_to(&chars, skip_spaces(&chars, end), ')');
                } else if next != Some('(') && !KEYWORDS.contains(&word.as_str()) {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

fn is_identifier_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn skip_identifier(chars: &[char], mut i: usize) -> usize {
    while i < chars.len()
        && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
    {
        i += 1;
    }
    i
}

fn skip_spaces(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

fn next_non_space(chars: &[char], i: usize) -> Option<char> {
    chars.get(skip_spaces(chars, i)).copied()
}

/// Past the string opening at `i` (backslash escapes, except in raw backtick strings).
fn skip_string(chars: &[char], i: usize) -> usize {
    let quote = chars[i];
    let mut j = i + 1;
    while j < chars.len() && chars[j] != quote {
        if chars[j] == '\\' && quote != '`' {
            j += 1;
        }
        j += 1;
    }
    j + 1
}

/// Past the `close` matching the opener at `i`, skipping strings inside.
fn skip_to(chars: &[char], i: usize, close: char) -> usize {
    let open = chars[i];
    let mut depth = 0;
    let mut j = i;
    while j < chars.len() {
        match chars[j] {
            '"' | '\'' | '`' => {
                j = skip_string(chars, j);
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    j
}

/// Every PromQL expression of a Grafana dashboard: the panels' targets (nested rows included)
/// and the query variables.
pub fn dashboard_exprs(dashboard: &Value) -> Vec<String> {
    let mut exprs = Vec::new();
    collect_targets(&dashboard["panels"], &mut exprs);
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if variable["type"] == "query" {
            let query = &variable["query"];
            let text = query["query"].as_str().or(query.as_str());
            exprs.extend(text.map(str::to_owned));
        }
    }
    exprs
}

fn collect_targets(panels: &Value, exprs: &mut Vec<String>) {
    for panel in panels.as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.extend(target["expr"].as_str().map(str::to_owned));
        }
        collect_targets(&panel["panels"], exprs);
    }
}

/// Every `expr` of a PrometheusRule, with its rule's `alert` or `record` name.
pub fn rule_exprs(rule: &Value) -> anyhow::Result<Vec<(String, String)>> {
    let groups = rule["spec"]["groups"]
        .as_array()
        .context("the PrometheusRule has no spec.groups")?;
    Ok(groups
        .iter()
        .flat_map(|group| group["rules"].as_array().into_iter().flatten())
        .filter_map(|rule| {
            let name = rule["alert"].as_str().or(rule["record"].as_str())?;
            Some((name.to_owned(), rule["expr"].as_str()?.to_owned()))
        })
        .collect())
}

/// The chart's dashboard and PrometheusRule as `helm template` renders them with both enabled:
/// (the dashboard JSON, the PrometheusRule).
pub fn rendered_dashboard_and_rule() -> anyhow::Result<(Value, Value)> {
    let docs = crate::helm::render(
        &[
            "metrics.dashboard.enabled=true",
            "metrics.prometheusRule.enabled=true",
        ],
        &[],
    )?;
    let of_kind = |kind: &'static str| docs.iter().filter(move |doc| doc["kind"] == kind);
    let configmap = of_kind("ConfigMap")
        .find(|doc| doc["metadata"]["labels"]["grafana_dashboard"] == "1")
        .context("no ConfigMap labelled grafana_dashboard=1 in the render")?;
    let (_, text) = configmap["data"]
        .as_object()
        .and_then(|data| data.iter().next())
        .context("the dashboard ConfigMap has no data")?;
    let dashboard = serde_json::from_str(text.as_str().unwrap_or_default())
        .context("the dashboard is not JSON")?;
    let rule = of_kind("PrometheusRule")
        .next()
        .context("no PrometheusRule in the render")?
        .clone();
    Ok((dashboard, rule))
}

/// Every metric name the chart's dashboard and alerts query, with where (panel expression or
/// alert name) it is used first.
pub fn chart_metric_names() -> anyhow::Result<BTreeMap<String, String>> {
    let (dashboard, rule) = rendered_dashboard_and_rule()?;
    let mut names = BTreeMap::new();
    let dashboard = dashboard_exprs(&dashboard)
        .into_iter()
        .map(|expr| (format!("dashboard query {expr}"), expr));
    let alerts = rule_exprs(&rule)?
        .into_iter()
        .map(|(alert, expr)| (format!("alert {alert}"), expr));
    for (place, expr) in dashboard.chain(alerts) {
        for name in metric_names(&expr) {
            names.entry(name).or_insert_with(|| place.clone());
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn finds_metric_names_only() {
        let cases: &[(&str, &[&str])] = &[
            ("up", &["up"]),
            (
                r#"sum by (skyhook_name) (skyhook_node_status_count{status="erroring", skyhook_name=~"$skyhook"}) > 0"#,
                &["skyhook_node_status_count"],
            ),
            (
                "histogram_quantile(0.95, sum by (le, stage) (rate(skyhook_package_stage_duration_seconds_bucket[$__rate_interval])))",
                &["skyhook_package_stage_duration_seconds_bucket"],
            ),
            (
                "sum(rate(a_sum[5m])) by (package_name) / on(package_name) group_left(stage) sum(rate(a_count[5m:1m] offset 1h)) by (package_name)",
                &["a_count", "a_sum"],
            ),
            (
                r#"(min_over_time(skyhook_status{status="in_progress"}[30m]) == 1) unless on (skyhook_name) (changes(x{a="b}{"}[30m]) > 0) and bool y"#,
                &["skyhook_status", "x", "y"],
            ),
            ("{__name__=\"hidden\"}", &[]),
            (
                "label_values(skyhook_node_target_count, skyhook_name)",
                &["skyhook_node_target_count"],
            ),
            ("1e3 * 2.5 + 0x1f - inf", &[]),
            ("rate(ns:recorded:rate5m[1m])", &["ns:recorded:rate5m"]),
        ];
        for (expr, expected) in cases {
            let got: Vec<String> = metric_names(expr).into_iter().collect();
            assert_eq!(got, *expected, "{expr}");
        }
    }

    #[test]
    fn reads_the_expressions_of_dashboards_and_rules() {
        let dashboard = json!({
            "panels": [
                {"targets": [{"expr": "a"}, {"refId": "B"}]},
                {"type": "row", "panels": [{"targets": [{"expr": "b"}]}]},
            ],
            "templating": {"list": [
                {"type": "datasource", "query": "prometheus"},
                {"type": "query", "query": {"query": "label_values(c, skyhook_name)"}},
            ]},
        });
        assert_eq!(
            dashboard_exprs(&dashboard),
            ["a", "b", "label_values(c, skyhook_name)"]
        );
        let rule = json!({"spec": {"groups": [{"rules": [
            {"alert": "A", "expr": "x > 0"},
            {"record": "r", "expr": "sum(y)"},
        ]}]}});
        assert_eq!(
            rule_exprs(&rule).unwrap(),
            [
                ("A".to_owned(), "x > 0".to_owned()),
                ("r".to_owned(), "sum(y)".to_owned())
            ]
        );
        assert!(rule_exprs(&json!({})).is_err());
    }
}
