//! Node name patterns: an argument with any regex meta character is an anchored regex
//! (`^…$`), anything else is an exact node name.

use regex::Regex;

/// A pattern that is not a valid regex.
#[derive(Debug, thiserror::Error)]
#[error(
    "node pattern {pattern:?} is not a valid regular expression; quote it, or escape meta characters with a backslash"
)]
pub struct PatternError {
    /// The rejected argument.
    pub pattern: String,
    /// Why the regex did not compile.
    #[source]
    pub source: regex::Error,
}

/// One node pattern.
#[derive(Debug, Clone)]
pub enum NodePattern {
    /// Matches exactly this name.
    Exact(String),
    /// Matches names the anchored regex matches.
    Regex(Regex),
}

/// The characters that make an argument a regex (those Go's `regexp.QuoteMeta` escapes).
const META: &[char] = &[
    '\\', '.', '+', '*', '?', '(', ')', '|', '[', ']', '{', '}', '^', '$',
];

impl NodePattern {
    /// Parses one argument.
    pub fn parse(pattern: &str) -> Result<Self, PatternError> {
        if !pattern.contains(META) {
            return Ok(NodePattern::Exact(pattern.to_owned()));
        }
        Regex::new(&format!("^(?:{pattern})$"))
            .map(NodePattern::Regex)
            .map_err(|source| PatternError {
                pattern: pattern.to_owned(),
                source,
            })
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            NodePattern::Exact(exact) => exact == name,
            NodePattern::Regex(regex) => regex.is_match(name),
        }
    }
}

impl std::fmt::Display for NodePattern {
    /// The argument as the user wrote it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodePattern::Exact(exact) => f.write_str(exact),
            NodePattern::Regex(regex) => {
                let text = regex.as_str();
                let inner = (text.strip_prefix("^(?:"))
                    .and_then(|t| t.strip_suffix(")$"))
                    .unwrap_or(text);
                f.write_str(inner)
            }
        }
    }
}

/// Parses every argument.
pub fn parse_all(patterns: &[String]) -> Result<Vec<NodePattern>, PatternError> {
    patterns.iter().map(|p| NodePattern::parse(p)).collect()
}

/// Whether `name` matches any pattern; with no pattern, every name matches.
pub fn matches_any(patterns: &[NodePattern], name: &str) -> bool {
    patterns.is_empty() || patterns.iter().any(|p| p.matches(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_names_and_anchored_regexes() {
        for (pattern, name, expected) in [
            ("node-1", "node-1", true),
            ("node-1", "node-10", false),
            ("node-1", "my-node-1", false),
            ("node-.*", "node-10", true),
            ("node-.*", "my-node-10", false),
            ("node-[12]", "node-2", true),
            ("node-[12]", "node-3", false),
            ("node-[12]", "node-12", false),
            ("a|b", "a", true),
            ("a|b", "ab", false),
            ("worker.example.com", "worker.example.com", true),
            ("worker.example.com", "workerXexample.com", true),
            ("^gpu-\\d+$", "gpu-7", true),
        ] {
            let parsed = NodePattern::parse(pattern).unwrap();
            assert_eq!(parsed.matches(name), expected, "{pattern} ~ {name}");
        }
    }

    #[test]
    fn plain_names_are_exact_patterns() {
        assert!(matches!(
            NodePattern::parse("node-1").unwrap(),
            NodePattern::Exact(_)
        ));
        assert!(matches!(
            NodePattern::parse("node-*").unwrap(),
            NodePattern::Regex(_)
        ));
    }

    #[test]
    fn invalid_regexes_are_rejected_with_the_pattern() {
        let error = NodePattern::parse("node-[").unwrap_err();
        assert_eq!(error.pattern, "node-[");
        assert!(error.to_string().contains("node-["));
    }

    #[test]
    fn no_pattern_matches_everything() {
        assert!(matches_any(&[], "anything"));
        let patterns = parse_all(&["a".into(), "b.*".into()]).unwrap();
        assert!(matches_any(&patterns, "a"));
        assert!(matches_any(&patterns, "bee"));
        assert!(!matches_any(&patterns, "c"));
    }
}
