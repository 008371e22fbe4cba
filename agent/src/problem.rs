//! A problem found in a package: where it is, what is wrong, and how to fix it.

use std::fmt;

use crate::mode::Mode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

/// Where in a package a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The package as a whole (a missing file, the package directory).
    Package,
    /// A top-level field of `config.json` (empty for the document itself).
    Field(String),
    /// A step, optionally one of its fields.
    Step {
        mode: Mode,
        index: usize,
        name: Option<String>,
        field: Option<String>,
    },
    /// Something in the package directory, relative to it.
    File(String),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Package => f.write_str("package"),
            Location::Field(field) if field.is_empty() => f.write_str("config.json"),
            Location::Field(field) => write!(f, "config.json {field}"),
            Location::Step {
                mode,
                index,
                name,
                field,
            } => {
                write!(f, "config.json modes.{mode}[{index}]")?;
                if let Some(name) = name {
                    write!(f, " (step \"{name}\")")?;
                }
                if let Some(field) = field {
                    write!(f, " field {field}")?;
                }
                Ok(())
            }
            Location::File(path) => f.write_str(path),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    pub location: Location,
    pub message: String,
    pub fix: String,
}

impl Problem {
    pub fn error(location: Location, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Problem {
            severity: Severity::Error,
            location,
            message: message.into(),
            fix: fix.into(),
        }
    }

    pub fn warning(location: Location, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Problem {
            severity: Severity::Warning,
            location,
            message: message.into(),
            fix: fix.into(),
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{label}: {}: {}\n  fix: {}",
            self.location, self.message, self.fix
        )
    }
}

/// Renders a list of problems, one per paragraph.
pub fn render(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(Problem::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_locations_name_mode_index_name_and_field() {
        let location = Location::Step {
            mode: Mode::ApplyCheck,
            index: 2,
            name: Some("verify".into()),
            field: Some("returncodes".into()),
        };
        assert_eq!(
            location.to_string(),
            "config.json modes.apply-check[2] (step \"verify\") field returncodes"
        );
        let problem = Problem::error(location, "must not be empty", "use [0]");
        assert_eq!(
            problem.to_string(),
            "error: config.json modes.apply-check[2] (step \"verify\") field returncodes: must not be empty\n  fix: use [0]"
        );
    }

    #[test]
    fn other_locations_render_plainly() {
        assert_eq!(Location::Field(String::new()).to_string(), "config.json");
        assert_eq!(
            Location::Field("package_version".into()).to_string(),
            "config.json package_version"
        );
        assert_eq!(
            Location::File("skyhook_dir/a.sh".into()).to_string(),
            "skyhook_dir/a.sh"
        );
        assert_eq!(Location::Package.to_string(), "package");
    }
}
