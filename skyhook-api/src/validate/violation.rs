//! A validation problem, and the set of them returned at once.

use std::fmt;

/// One problem in an object: where, what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    /// Path of the offending field, e.g. `spec.packages.foo.version`.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

impl Violation {
    /// A violation of `field`.
    pub fn new(
        field: impl Into<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Violation {
            field: field.into(),
            message: message.into(),
            hint: hint.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)?;
        if !self.hint.is_empty() {
            write!(f, " (fix: {})", self.hint)?;
        }
        Ok(())
    }
}

/// Every problem found in an object, sorted by field then message, without duplicates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Violations(Vec<Violation>);

impl Violations {
    /// Sorts and deduplicates; `Ok(())` when there is nothing to report.
    pub fn check(mut violations: Vec<Violation>) -> Result<(), Violations> {
        if violations.is_empty() {
            return Ok(());
        }
        violations.sort();
        violations.dedup();
        Err(Violations(violations))
    }

    /// The violations, sorted.
    pub fn as_slice(&self) -> &[Violation] {
        &self.0
    }

    /// Whether some violation concerns `field` exactly.
    pub fn has_field(&self, field: &str) -> bool {
        self.0.iter().any(|v| v.field == field)
    }
}

impl fmt::Display for Violations {
    /// One readable message: a count, then one `field: problem (fix: ...)` line per violation.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.0.len();
        write!(
            f,
            "{count} problem{} found:",
            if count == 1 { "" } else { "s" }
        )?;
        for violation in &self.0 {
            write!(f, "\n- {violation}")?;
        }
        Ok(())
    }
}

impl IntoIterator for Violations {
    type Item = Violation;
    type IntoIter = std::vec::IntoIter<Violation>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_deduplicated_and_rendered() {
        let err = Violations::check(vec![
            Violation::new("spec.packages.b.version", "bad", "fix it"),
            Violation::new("spec.deploymentPolicy", "not found", ""),
            Violation::new("spec.packages.b.version", "bad", "fix it"),
        ])
        .unwrap_err();
        assert_eq!(err.as_slice().len(), 2);
        assert!(err.has_field("spec.deploymentPolicy"));
        assert_eq!(
            err.to_string(),
            "2 problems found:\n- spec.deploymentPolicy: not found\n- spec.packages.b.version: bad (fix: fix it)"
        );
        assert!(Violations::check(vec![]).is_ok());
        let one = Violations::check(vec![Violation::new("a", "b", "c")]).unwrap_err();
        assert!(one.to_string().starts_with("1 problem found:"));
        assert_eq!(one.into_iter().count(), 1);
    }
}
