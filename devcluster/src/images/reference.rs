//! Image references as container runtimes read them: `[registry[:port]/]path[:tag][@digest]`.

use std::fmt;

/// A parsed image reference with the repository normalised the way Docker does it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry and path, e.g. `docker.io/library/busybox` or `localhost:5000/pkg`.
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

/// The reference cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image reference {reference:?}: {reason}")]
pub struct InvalidImageRef {
    pub reference: String,
    pub reason: &'static str,
}

impl ImageRef {
    pub fn parse(reference: &str) -> Result<Self, InvalidImageRef> {
        let invalid = |reason| InvalidImageRef {
            reference: reference.to_owned(),
            reason,
        };
        if reference.is_empty() {
            return Err(invalid("empty"));
        }
        if reference.chars().any(char::is_whitespace) {
            return Err(invalid("contains whitespace"));
        }
        let (name_and_tag, digest) = match reference.split_once('@') {
            Some((_, "")) => return Err(invalid("empty digest")),
            Some((name, digest)) => (name, Some(digest.to_owned())),
            None => (reference, None),
        };
        // A ':' after the last '/' starts the tag; one before it is a registry port.
        let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
            Some(i) => {
                let split = last_slash + i;
                let tag = &name_and_tag[split + 1..];
                if tag.is_empty() {
                    return Err(invalid("empty tag"));
                }
                (&name_and_tag[..split], Some(tag.to_owned()))
            }
            None => (name_and_tag, None),
        };
        if name.is_empty() || name.split('/').any(str::is_empty) {
            return Err(invalid("empty path component"));
        }
        Ok(Self {
            repository: normalise_repository(name),
            tag,
            digest,
        })
    }
}

/// `busybox` → `docker.io/library/busybox`; `foo/bar` → `docker.io/foo/bar`; a first component
/// with a `.` or `:`, or `localhost`, is a registry and is kept.
fn normalise_repository(name: &str) -> String {
    match name.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => name.to_owned(),
        Some(_) => format!("docker.io/{name}"),
        None => format!("docker.io/library/{name}"),
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_references() {
        let cases: &[(&str, &str, Option<&str>, Option<&str>)] = &[
            ("busybox", "docker.io/library/busybox", None, None),
            (
                "busybox:1.36",
                "docker.io/library/busybox",
                Some("1.36"),
                None,
            ),
            ("foo/bar:1", "docker.io/foo/bar", Some("1"), None),
            (
                "registry.k8s.io/pause:3.10",
                "registry.k8s.io/pause",
                Some("3.10"),
                None,
            ),
            ("localhost:5000/pkg", "localhost:5000/pkg", None, None),
            (
                "localhost:5000/pkg:2",
                "localhost:5000/pkg",
                Some("2"),
                None,
            ),
            ("localhost/pkg", "localhost/pkg", None, None),
            (
                "ghcr.io/example/agentless:6.2.0@sha256:abc",
                "ghcr.io/example/agentless",
                Some("6.2.0"),
                Some("sha256:abc"),
            ),
            (
                "ghcr.io/example/agent@sha256:abc",
                "ghcr.io/example/agent",
                None,
                Some("sha256:abc"),
            ),
        ];
        for (input, repository, tag, digest) in cases {
            let parsed = ImageRef::parse(input).unwrap();
            assert_eq!(parsed.repository, *repository, "{input}");
            assert_eq!(parsed.tag.as_deref(), *tag, "{input}");
            assert_eq!(parsed.digest.as_deref(), *digest, "{input}");
        }
    }

    #[test]
    fn rejects_malformed_references() {
        for input in ["", "a b", "foo:", "foo@", "/foo", "foo//bar", "foo/"] {
            assert!(
                ImageRef::parse(input).is_err(),
                "{input:?} should be rejected"
            );
        }
    }

    #[test]
    fn displays_normalised_form() {
        let parsed = ImageRef::parse("busybox:1@sha256:x").unwrap();
        assert_eq!(parsed.to_string(), "docker.io/library/busybox:1@sha256:x");
    }
}
