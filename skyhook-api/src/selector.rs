//! Label selectors: validation with Kubernetes' rules, and matching against a label map.
//!
//! A `LabelSelector` is `matchLabels` (each an equality) AND `matchExpressions` (`In`, `NotIn`,
//! `Exists`, `DoesNotExist`). An empty selector matches every label set.

use std::collections::{BTreeMap, BTreeSet};

use crate::string_map::StringMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// One problem in a selector, relative to the selector's own path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorProblem {
    /// Path below the selector, e.g. `matchExpressions[0].values`.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &dyn StringMap) -> bool {
        match self {
            Requirement::In(key, values) => labels.value(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => {
                labels.value(key).is_none_or(|v| !values.contains(v))
            }
            Requirement::Exists(key) => labels.has(key),
            Requirement::DoesNotExist(key) => !labels.has(key),
        }
    }
}

/// A validated selector, ready to match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
    matches_nothing: bool,
}

impl Selector {
    /// Matches every label set (the empty selector).
    pub fn everything() -> Self {
        Selector {
            requirements: Vec::new(),
            matches_nothing: false,
        }
    }

    /// Matches no label set; stands in for a selector that does not parse, so that a broken
    /// selector never widens what it selects.
    pub fn nothing() -> Self {
        Selector {
            requirements: Vec::new(),
            matches_nothing: true,
        }
    }

    /// Validates `selector` and compiles it. Every problem is returned.
    pub fn parse(selector: &LabelSelector) -> Result<Self, Vec<SelectorProblem>> {
        let mut problems = Vec::new();
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            let path = format!("matchLabels[{key}]");
            check_key(key, &path, &mut problems);
            check_value(value, &path, &mut problems);
            requirements.push(Requirement::In(
                key.clone(),
                BTreeSet::from([value.clone()]),
            ));
        }
        for (i, expression) in selector.match_expressions.iter().flatten().enumerate() {
            let path = format!("matchExpressions[{i}]");
            let key = &expression.key;
            check_key(key, &format!("{path}.key"), &mut problems);
            let values: BTreeSet<String> = expression.values.iter().flatten().cloned().collect();
            for value in &values {
                check_value(value, &format!("{path}.values"), &mut problems);
            }
            let operator = expression.operator.as_str();
            let needs_values = matches!(operator, "In" | "NotIn");
            if needs_values && values.is_empty() {
                problems.push(SelectorProblem {
                    path: format!("{path}.values"),
                    message: format!("operator {operator} needs at least one value"),
                    hint: "list the values, or use Exists/DoesNotExist".to_owned(),
                });
            }
            if matches!(operator, "Exists" | "DoesNotExist") && !values.is_empty() {
                problems.push(SelectorProblem {
                    path: format!("{path}.values"),
                    message: format!("operator {operator} takes no values"),
                    hint: "remove the values, or use In/NotIn".to_owned(),
                });
            }
            let requirement = match operator {
                "In" => Requirement::In(key.clone(), values),
                "NotIn" => Requirement::NotIn(key.clone(), values),
                "Exists" => Requirement::Exists(key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(key.clone()),
                other => {
                    problems.push(SelectorProblem {
                        path: format!("{path}.operator"),
                        message: format!("unknown operator {other:?}"),
                        hint: "use In, NotIn, Exists or DoesNotExist".to_owned(),
                    });
                    continue;
                }
            };
            requirements.push(requirement);
        }
        if problems.is_empty() {
            Ok(Selector {
                requirements,
                matches_nothing: false,
            })
        } else {
            Err(problems)
        }
    }

    /// Compiles `selector`, or [`Selector::nothing`] when it does not parse.
    pub fn parse_or_nothing(selector: &LabelSelector) -> Self {
        Selector::parse(selector).unwrap_or_else(|_| Selector::nothing())
    }

    /// Whether `labels` satisfies every requirement.
    pub fn matches(&self, labels: &dyn StringMap) -> bool {
        !self.matches_nothing && self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// Whether a selector has no requirement at all (and therefore, as a node selector, selects
/// every node).
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

fn check_key(key: &str, path: &str, problems: &mut Vec<SelectorProblem>) {
    if let Err(message) = validate_label_key(key) {
        problems.push(SelectorProblem {
            path: path.to_owned(),
            message: format!("label key {key:?} is invalid: {message}"),
            hint: "use an optional DNS-subdomain prefix and '/', then up to 63 of [A-Za-z0-9-_.] starting and ending alphanumeric, e.g. example.com/tier".to_owned(),
        });
    }
}

fn check_value(value: &str, path: &str, problems: &mut Vec<SelectorProblem>) {
    if let Err(message) = validate_label_value(value) {
        problems.push(SelectorProblem {
            path: path.to_owned(),
            message: format!("label value {value:?} is invalid: {message}"),
            hint:
                "use up to 63 of [A-Za-z0-9-_.] starting and ending alphanumeric, or an empty value"
                    .to_owned(),
        });
    }
}

/// Kubernetes qualified name: `[prefix/]name`, the prefix a DNS-1123 subdomain of at most 253
/// characters, the name at most 63 of `[A-Za-z0-9-_.]` starting and ending alphanumeric.
pub fn validate_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("the prefix before '/' is empty".to_owned());
        }
        validate_dns_subdomain(prefix).map_err(|e| format!("prefix {prefix:?}: {e}"))?;
    }
    if name.is_empty() {
        return Err("the name part is empty".to_owned());
    }
    validate_label_value(name)
}

/// Kubernetes label value: empty, or at most 63 of `[A-Za-z0-9-_.]` starting and ending
/// alphanumeric.
pub fn validate_label_value(value: &str) -> Result<(), String> {
    if value.len() > 63 {
        return Err(format!("{} characters, at most 63 allowed", value.len()));
    }
    let bytes = value.as_bytes();
    let edges_ok = bytes.first().is_none_or(u8::is_ascii_alphanumeric)
        && bytes.last().is_none_or(u8::is_ascii_alphanumeric);
    let chars_ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if edges_ok && chars_ok {
        Ok(())
    } else {
        Err("only [A-Za-z0-9-_.] allowed, starting and ending alphanumeric".to_owned())
    }
}

/// DNS-1123 subdomain: at most 253 characters, dot-separated labels of lowercase alphanumerics
/// and '-', each starting and ending alphanumeric.
pub fn validate_dns_subdomain(value: &str) -> Result<(), String> {
    if value.len() > 253 {
        return Err(format!("{} characters, at most 253 allowed", value.len()));
    }
    if value.split('.').all(is_dns_label_shape) {
        Ok(())
    } else {
        Err("must be lowercase letters, digits, '-' and '.', each part starting and ending with a letter or digit".to_owned())
    }
}

/// DNS-1123 label: at most 63 lowercase alphanumerics and '-', starting and ending alphanumeric.
pub fn validate_dns_label(value: &str) -> Result<(), String> {
    if value.len() > 63 {
        return Err(format!("{} characters, at most 63 allowed", value.len()));
    }
    if is_dns_label_shape(value) {
        Ok(())
    } else {
        Err(
            "must be lowercase letters, digits and '-', starting and ending with a letter or digit"
                .to_owned(),
        )
    }
}

fn is_dns_label_shape(label: &str) -> bool {
    let bytes = label.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;
    use crate::test_support::labels;

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| (*v).into()).collect()),
        }
    }

    fn selector(
        match_labels: &[(&str, &str)],
        exprs: Vec<LabelSelectorRequirement>,
    ) -> LabelSelector {
        LabelSelector {
            match_labels: Some(labels(match_labels)).filter(|m| !m.is_empty()),
            match_expressions: Some(exprs).filter(|e| !e.is_empty()),
        }
    }

    #[test]
    fn matching_table() {
        let node = labels(&[("tier", "production"), ("region", "us-west")]);
        let cases = [
            (selector(&[], vec![]), true),
            (selector(&[("tier", "production")], vec![]), true),
            (
                selector(&[("tier", "production"), ("region", "eu")], vec![]),
                false,
            ),
            (
                selector(&[], vec![expr("tier", "In", &["production", "staging"])]),
                true,
            ),
            (selector(&[], vec![expr("tier", "In", &["staging"])]), false),
            (
                selector(&[], vec![expr("tier", "NotIn", &["staging"])]),
                true,
            ),
            (selector(&[], vec![expr("missing", "NotIn", &["x"])]), true),
            (
                selector(&[], vec![expr("tier", "NotIn", &["production"])]),
                false,
            ),
            (selector(&[], vec![expr("region", "Exists", &[])]), true),
            (selector(&[], vec![expr("gpu", "Exists", &[])]), false),
            (selector(&[], vec![expr("gpu", "DoesNotExist", &[])]), true),
            (
                selector(&[], vec![expr("tier", "DoesNotExist", &[])]),
                false,
            ),
            (
                selector(
                    &[("tier", "production")],
                    vec![expr("region", "In", &["us-west"])],
                ),
                true,
            ),
        ];
        for (i, (sel, want)) in cases.iter().enumerate() {
            assert_eq!(
                Selector::parse(sel).unwrap().matches(&node),
                *want,
                "case {i}"
            );
        }
        assert!(!Selector::nothing().matches(&node));
        assert!(Selector::everything().matches(&BTreeMap::new()));
        assert!(is_empty(&LabelSelector::default()));
        assert!(!is_empty(&selector(&[("a", "b")], vec![])));
    }

    #[test]
    fn rejects_table() {
        let cases = [
            (
                selector(&[("bad key", "x")], vec![]),
                "matchLabels[bad key]",
            ),
            (selector(&[("tier", "-x")], vec![]), "matchLabels[tier]"),
            (
                selector(&[("Example.com/tier", "x")], vec![]),
                "matchLabels[Example.com/tier]",
            ),
            (selector(&[("/tier", "x")], vec![]), "matchLabels[/tier]"),
            (
                selector(&[("example.com/", "x")], vec![]),
                "matchLabels[example.com/]",
            ),
            (
                selector(&[], vec![expr("tier", "In", &[])]),
                "matchExpressions[0].values",
            ),
            (
                selector(&[], vec![expr("tier", "NotIn", &[])]),
                "matchExpressions[0].values",
            ),
            (
                selector(&[], vec![expr("tier", "Exists", &["x"])]),
                "matchExpressions[0].values",
            ),
            (
                selector(&[], vec![expr("tier", "Equals", &["x"])]),
                "matchExpressions[0].operator",
            ),
            (
                selector(&[], vec![expr("", "Exists", &[])]),
                "matchExpressions[0].key",
            ),
            (
                selector(&[], vec![expr("tier", "In", &["a b"])]),
                "matchExpressions[0].values",
            ),
        ];
        for (sel, path) in cases {
            let problems = Selector::parse(&sel).unwrap_err();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].path, path);
            assert!(!problems[0].hint.is_empty());
            assert!(!Selector::parse_or_nothing(&sel).matches(&BTreeMap::new()));
        }
        // Every problem is reported, not just the first.
        let sel = selector(
            &[("bad key", "x")],
            vec![expr("t", "In", &[]), expr("u", "Nope", &[])],
        );
        assert_eq!(Selector::parse(&sel).unwrap_err().len(), 3);
    }

    #[test]
    fn name_rules() {
        assert!(validate_label_key("skyhook.nvidia.com/test-node").is_ok());
        assert!(validate_label_key("tier").is_ok());
        assert!(validate_label_key(&"a".repeat(63)).is_ok());
        assert!(validate_label_key(&"a".repeat(64)).is_err());
        assert!(validate_label_key(&format!("{}/a", "b".repeat(254))).is_err());
        assert!(validate_label_value("").is_ok());
        assert!(validate_label_value("a_b.c-d").is_ok());
        assert!(validate_label_value("a_").is_err());
        assert!(validate_dns_label("simple-skyhook").is_ok());
        assert!(validate_dns_label("Simple").is_err());
        assert!(validate_dns_label("a.b").is_err());
        assert!(validate_dns_label("").is_err());
        assert!(validate_dns_subdomain("a.b-c.d").is_ok());
        assert!(validate_dns_subdomain("a..b").is_err());
    }
}
