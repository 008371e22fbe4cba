//! Validation, defaulting and delete protection of a DeploymentPolicy.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::topology::check_topology;
use super::violation::{Violation, Violations};
use crate::health::parse_settle;
use crate::keys::DEFAULT_COMPARTMENT;
use crate::selector::Selector;
use crate::v1alpha1::{
    DEFAULT_BATCH_THRESHOLD, DEFAULT_DELTA, DEFAULT_GROWTH_FACTOR, DEFAULT_INITIAL_BATCH,
    DEFAULT_SAFETY_LIMIT, DeploymentPolicySpec, DeploymentStrategy, MaintenanceWindow,
    PolicyBudget, Skyhook,
};
use crate::window::parse_window;

/// Validates a DeploymentPolicy spec, returning every violation found: exactly one of
/// `percent`/`count` per budget, exactly one strategy, field ranges, unique compartment names,
/// `__default__` reserved, selectors that parse, and no two compartments with identical
/// selectors.
pub fn validate_policy(spec: &DeploymentPolicySpec) -> Result<(), Violations> {
    let mut out = Vec::new();
    check_budget(&spec.default.budget, "spec.default.budget", &mut out);
    if let Some(topology) = &spec.default.budget.topology {
        check_topology(topology, "spec.default.budget.topology", &mut out);
    }
    check_strategy(&spec.default.strategy, "spec.default.strategy", &mut out);
    let mut seen_names: BTreeMap<&str, usize> = BTreeMap::new();
    let mut seen_selectors: Vec<(NormalSelector, &str)> = Vec::new();
    for (i, compartment) in spec.compartments.iter().enumerate() {
        let field = format!("spec.compartments[{i}]");
        let name = compartment.name.as_str();
        if name.is_empty() {
            out.push(Violation::new(
                format!("{field}.name"),
                "the compartment name is empty",
                "give the compartment a name",
            ));
        } else if name == DEFAULT_COMPARTMENT {
            out.push(Violation::new(
                format!("{field}.name"),
                format!("{DEFAULT_COMPARTMENT} is reserved for the nodes no compartment selects"),
                "choose another name; configure those nodes in spec.default",
            ));
        } else if let Some(first) = seen_names.insert(name, i) {
            out.push(Violation::new(
                format!("{field}.name"),
                format!("compartment name {name:?} is already used by spec.compartments[{first}]"),
                "give every compartment a unique name",
            ));
        }
        check_budget(&compartment.budget, &format!("{field}.budget"), &mut out);
        if let Some(topology) = &compartment.budget.topology {
            check_topology(topology, &format!("{field}.budget.topology"), &mut out);
        }
        if let Some(strategy) = &compartment.strategy {
            check_strategy(strategy, &format!("{field}.strategy"), &mut out);
        }
        match Selector::parse(&compartment.selector) {
            Err(problems) => out.extend(problems.into_iter().map(|p| {
                Violation::new(format!("{field}.selector.{}", p.path), p.message, p.hint)
            })),
            Ok(_) => {
                let normal = NormalSelector::of(&compartment.selector);
                if let Some((_, other)) = seen_selectors.iter().find(|(s, _)| *s == normal) {
                    out.push(Violation::new(
                        format!("{field}.selector"),
                        format!(
                            "compartment {name:?} has the same selector as compartment {other:?}"
                        ),
                        "make the selectors differ, or merge the two compartments",
                    ));
                } else {
                    seen_selectors.push((normal, name));
                }
            }
        }
    }
    check_windows(&spec.maintenance_windows, &mut out);
    if let Some(Err(problem)) = spec.health_gate.as_ref().map(parse_settle) {
        out.push(Violation::new(
            "spec.healthGate.settle",
            problem.to_string(),
            "write a Go duration of zero or more, e.g. 90s or 5m",
        ));
    }
    Violations::check(out)
}

/// Every wrong field of every maintenance window: the cron schedule, the duration (a Go
/// duration greater than zero), the IANA time zone and the budget (as a compartment's).
fn check_windows(windows: &[MaintenanceWindow], out: &mut Vec<Violation>) {
    for (i, window) in windows.iter().enumerate() {
        if let Err(errors) = parse_window(window) {
            out.extend(errors.iter().map(|e| {
                let field = format!("spec.maintenanceWindows[{i}].{}", e.field());
                Violation::new(field, e.to_string(), e.hint())
            }));
        }
        if let Some(budget) = &window.budget {
            check_budget(budget, &format!("spec.maintenanceWindows[{i}].budget"), out);
            if budget.topology.is_some() {
                out.push(Violation::new(
                    format!("spec.maintenanceWindows[{i}].budget.topology"),
                    "a maintenance window's budget cannot set topology: the compartment's own topology holds while the window is open",
                    "move topology to the compartment's budget (spec.default.budget or spec.compartments[i].budget)",
                ));
            }
        }
    }
}

/// A selector with absent and empty fields made equal and value lists sorted, so that two
/// selectors selecting by the same requirements compare equal.
#[derive(Debug, PartialEq, Eq)]
struct NormalSelector {
    labels: BTreeMap<String, String>,
    expressions: BTreeSet<(String, String, BTreeSet<String>)>,
}

impl NormalSelector {
    fn of(selector: &LabelSelector) -> Self {
        NormalSelector {
            labels: selector.match_labels.clone().unwrap_or_default(),
            expressions: selector
                .match_expressions
                .iter()
                .flatten()
                .map(|e| {
                    (
                        e.key.clone(),
                        e.operator.clone(),
                        e.values.iter().flatten().cloned().collect(),
                    )
                })
                .collect(),
        }
    }
}

fn check_budget(budget: &PolicyBudget, field: &str, out: &mut Vec<Violation>) {
    match (budget.percent, budget.count) {
        (Some(_), Some(_)) => out.push(Violation::new(
            field,
            "both percent and count are set",
            "keep only one of percent or count",
        )),
        (None, None) => out.push(Violation::new(
            field,
            "neither percent nor count is set",
            "set percent (1-100) or count (1 or more)",
        )),
        (Some(p), None) if !(1..=100).contains(&p) => {
            out.push(Violation::new(
                format!("{field}.percent"),
                format!("percent {p} is outside 1-100"),
                "use a percentage from 1 to 100",
            ));
        }
        (None, Some(c)) if c < 1 => {
            out.push(Violation::new(
                format!("{field}.count"),
                format!("count {c} is below 1"),
                "use a count of 1 or more",
            ));
        }
        _ => {}
    }
}

fn check_strategy(strategy: &DeploymentStrategy, field: &str, out: &mut Vec<Violation>) {
    let set = strategy.count_set();
    if set != 1 {
        out.push(Violation::new(
            field,
            if set == 0 {
                "no strategy is set".to_owned()
            } else {
                format!("{set} strategies are set")
            },
            "set exactly one of fixed, linear or exponential",
        ));
        return;
    }
    let (kind, initial, threshold, failure, safety, extra) = if let Some(s) = &strategy.fixed {
        (
            "fixed",
            s.initial_batch,
            s.batch_threshold,
            s.failure_threshold,
            s.safety_limit,
            None,
        )
    } else if let Some(s) = &strategy.linear {
        (
            "linear",
            s.initial_batch,
            s.batch_threshold,
            s.failure_threshold,
            s.safety_limit,
            Some(("delta", s.delta, 1)),
        )
    } else if let Some(s) = &strategy.exponential {
        (
            "exponential",
            s.initial_batch,
            s.batch_threshold,
            s.failure_threshold,
            s.safety_limit,
            Some(("growthFactor", s.growth_factor, 2)),
        )
    } else {
        return;
    };
    let mut range = |name: &str, value: Option<i32>, min: i32, max: Option<i32>| {
        let Some(value) = value else { return };
        if value < min || max.is_some_and(|m| value > m) {
            let allowed = max.map_or(format!("{min} or more"), |m| format!("{min} to {m}"));
            out.push(Violation::new(
                format!("{field}.{kind}.{name}"),
                format!("{name} {value} is out of range"),
                format!("use {allowed}"),
            ));
        }
    };
    range("initialBatch", initial, 1, None);
    range("batchThreshold", threshold, 1, Some(100));
    range("failureThreshold", failure, 1, None);
    range("safetyLimit", safety, 1, Some(100));
    if let Some((name, value, min)) = extra {
        range(name, value, min, None);
    }
}

/// The mutating webhook's defaults: every strategy present gets `initialBatch` 1,
/// `batchThreshold` 100 and `safetyLimit` 50 when unset, linear `delta` 1 and exponential
/// `growthFactor` 2; `failureThreshold` stays unset (the rollout never stops).
pub fn default_policy(spec: &DeploymentPolicySpec) -> DeploymentPolicySpec {
    let mut out = spec.clone();
    default_strategy(&mut out.default.strategy);
    for compartment in &mut out.compartments {
        if let Some(strategy) = &mut compartment.strategy {
            default_strategy(strategy);
        }
    }
    out
}

fn default_strategy(strategy: &mut DeploymentStrategy) {
    fn common(initial: &mut Option<i32>, threshold: &mut Option<i32>, safety: &mut Option<i32>) {
        initial.get_or_insert(DEFAULT_INITIAL_BATCH);
        threshold.get_or_insert(DEFAULT_BATCH_THRESHOLD);
        safety.get_or_insert(DEFAULT_SAFETY_LIMIT);
    }
    if let Some(s) = &mut strategy.fixed {
        common(
            &mut s.initial_batch,
            &mut s.batch_threshold,
            &mut s.safety_limit,
        );
    }
    if let Some(s) = &mut strategy.linear {
        common(
            &mut s.initial_batch,
            &mut s.batch_threshold,
            &mut s.safety_limit,
        );
        s.delta.get_or_insert(DEFAULT_DELTA);
    }
    if let Some(s) = &mut strategy.exponential {
        common(
            &mut s.initial_batch,
            &mut s.batch_threshold,
            &mut s.safety_limit,
        );
        s.growth_factor.get_or_insert(DEFAULT_GROWTH_FACTOR);
    }
}

/// What delete protection reads of a Skyhook: its name and the DeploymentPolicy it names.
/// Callers that cannot decode a whole Skyhook (an object stored by an older version) can still
/// build one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyReference {
    /// The Skyhook's name.
    pub skyhook: String,
    /// Its `spec.deploymentPolicy`, if any.
    pub policy: Option<String>,
}

impl From<&Skyhook> for PolicyReference {
    fn from(skyhook: &Skyhook) -> Self {
        Self {
            skyhook: skyhook.metadata.name.clone().unwrap_or_default(),
            policy: skyhook.spec.policy_name().map(str::to_owned),
        }
    }
}

/// The Skyhooks (sorted names) whose `spec.deploymentPolicy` is `policy`: while any remains,
/// deleting the policy is refused.
pub fn policy_delete_blockers(policy: &str, references: &[PolicyReference]) -> Vec<String> {
    let mut names: Vec<String> = references
        .iter()
        .filter(|r| r.policy.as_deref() == Some(policy))
        .map(|r| r.skyhook.clone())
        .collect();
    names.sort();
    names
}

/// The denial message for deleting a policy that Skyhooks still use.
pub fn policy_delete_message(policy: &str, blockers: &[String]) -> String {
    format!(
        "DeploymentPolicy {policy:?} is still referenced by Skyhook(s) {}; change their spec.deploymentPolicy or delete them first",
        blockers.join(", ")
    )
}
