//! Container image references: `[registry[:port]/]path[:tag][@sha256:<64 hex>]`.
//!
//! Upstream cut a package image at its *first* `:` to drop the tag, which mangled registries
//! with a port (`host:5000/x` became `host`; nodewright #280). Here the tag is only ever looked
//! for after the last `:` of the last path segment, so `host:5000/x` has no tag.

use std::fmt;

/// The only digest algorithm accepted in package images and `containerSHA`.
const SHA256_PREFIX: &str = "sha256:";

/// A parsed image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// `host[:port]` when the first segment names a registry (contains `.` or `:`, or is
    /// `localhost`), as the container runtimes decide.
    pub registry: Option<String>,
    /// The repository path below the registry, e.g. `nvidia/skyhook-packages/shellscript`.
    pub path: String,
    /// The tag, when one is written.
    pub tag: Option<String>,
    /// The digest (`sha256:<64 lowercase hex>`), when one is written.
    pub digest: Option<String>,
}

/// Why an image reference or digest was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// Nothing was given.
    #[error("the image reference is empty")]
    Empty,
    /// A registry host or port that is not a hostname[:port].
    #[error(
        "registry {0:?} is not a valid host[:port]; use letters, digits, dots and dashes, and a numeric port"
    )]
    BadRegistry(String),
    /// A path segment with characters a registry does not accept (uppercase, empty segments…).
    #[error(
        "path segment {0:?} is invalid; segments are lowercase letters and digits, separated inside by '.', '_', '__' or dashes"
    )]
    BadPathSegment(String),
    /// A tag that is empty, too long or has invalid characters.
    #[error(
        "tag {0:?} is invalid; a tag is up to 128 of [A-Za-z0-9_.-] and does not start with '.' or '-'"
    )]
    BadTag(String),
    /// A digest that is not `sha256:` followed by 64 lowercase hex digits.
    #[error("digest {0:?} is invalid; write sha256: followed by 64 lowercase hex digits")]
    BadDigest(String),
}

impl ImageRef {
    /// Parses a reference. The registry host may contain uppercase letters (hostnames are
    /// case-insensitive); the repository path may not.
    pub fn parse(input: &str) -> Result<Self, ImageError> {
        if input.is_empty() {
            return Err(ImageError::Empty);
        }
        let (name_and_tag, digest) = match input.split_once('@') {
            Some((head, digest)) => {
                validate_digest(digest)?;
                (head, Some(digest.to_owned()))
            }
            None => (input, None),
        };
        let (name, tag) = split_tag(name_and_tag);
        if let Some(tag) = tag {
            validate_tag(tag)?;
        }
        let (registry, path) = split_registry(name);
        if let Some(registry) = registry {
            validate_registry(registry)?;
        }
        if path.is_empty() {
            return Err(ImageError::BadPathSegment(String::new()));
        }
        for segment in path.split('/') {
            validate_path_segment(segment)?;
        }
        Ok(ImageRef {
            registry: registry.map(str::to_owned),
            path: path.to_owned(),
            tag: tag.map(str::to_owned),
            digest,
        })
    }

    /// The repository without tag or digest: `registry[:port]/path`.
    pub fn repository(&self) -> String {
        match &self.registry {
            Some(registry) => format!("{registry}/{}", self.path),
            None => self.path.clone(),
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repository())?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Splits `name[:tag]`, looking for the tag only in the last path segment.
fn split_tag(name_and_tag: &str) -> (&str, Option<&str>) {
    let last_segment_start = name_and_tag.rfind('/').map_or(0, |slash| slash + 1);
    match name_and_tag[last_segment_start..].rfind(':') {
        Some(colon) => {
            let at = last_segment_start + colon;
            (&name_and_tag[..at], Some(&name_and_tag[at + 1..]))
        }
        None => (name_and_tag, None),
    }
}

/// Splits off the first segment when it names a registry (the container runtimes' rule).
fn split_registry(name: &str) -> (Option<&str>, &str) {
    match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            (Some(first), rest)
        }
        _ => (None, name),
    }
}

fn validate_registry(registry: &str) -> Result<(), ImageError> {
    let bad = || ImageError::BadRegistry(registry.to_owned());
    let (host, port) = match registry.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (registry, None),
    };
    if let Some(port) = port
        && (port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad());
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if host.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(bad())
    }
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn validate_path_segment(segment: &str) -> Result<(), ImageError> {
    let bad = || ImageError::BadPathSegment(segment.to_owned());
    let bytes = segment.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err(bad());
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &segment[start..i];
        let dashes = separator.bytes().all(|b| b == b'-');
        if !(separator == "." || separator == "_" || separator == "__" || dashes) {
            return Err(bad());
        }
    }
    Ok(())
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`
fn validate_tag(tag: &str) -> Result<(), ImageError> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && tag.bytes().next().is_some_and(word)
        && tag.bytes().all(|b| word(b) || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ImageError::BadTag(tag.to_owned()))
    }
}

/// Checks a digest or `containerSHA`: `sha256:` followed by 64 lowercase hex digits.
pub fn validate_digest(digest: &str) -> Result<(), ImageError> {
    let ok = digest.strip_prefix(SHA256_PREFIX).is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    });
    if ok {
        Ok(())
    } else {
        Err(ImageError::BadDigest(digest.to_owned()))
    }
}

/// A package image checked against its version and `containerSHA`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackageImageError {
    /// The image itself does not parse.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// `containerSHA` is malformed.
    #[error("containerSHA: {0}")]
    ContainerSha(ImageError),
    /// `image: repo:1.0` with `version: 2.0`.
    #[error(
        "the image tag {tag:?} differs from the package version {version:?}; drop the tag from the image (the version is used as the tag) or make them equal"
    )]
    TagMismatch {
        /// The tag written in the image.
        tag: String,
        /// The package version.
        version: String,
    },
    /// A digest in the image and a different `containerSHA`.
    #[error(
        "the image digest {image_digest:?} differs from containerSHA {container_sha:?}; keep only containerSHA"
    )]
    DigestMismatch {
        /// The digest written in the image.
        image_digest: String,
        /// The `containerSHA` field.
        container_sha: String,
    },
}

/// Upstream's rule: a tag written in the image must equal the package version. Also checks the
/// digest formats and that an image digest agrees with `containerSHA`.
pub fn validate_package_image(
    image: &str,
    version: &str,
    container_sha: Option<&str>,
) -> Result<ImageRef, PackageImageError> {
    let parsed = ImageRef::parse(image)?;
    if let Some(tag) = &parsed.tag
        && tag != version
    {
        return Err(PackageImageError::TagMismatch {
            tag: tag.clone(),
            version: version.to_owned(),
        });
    }
    if let Some(sha) = container_sha.filter(|sha| !sha.is_empty()) {
        validate_digest(sha).map_err(PackageImageError::ContainerSha)?;
        if let Some(digest) = &parsed.digest
            && digest != sha
        {
            return Err(PackageImageError::DigestMismatch {
                image_digest: digest.clone(),
                container_sha: sha.to_owned(),
            });
        }
    }
    Ok(parsed)
}

/// The reference the package's copy container pulls: `repo@containerSHA` when `containerSHA` is
/// set, otherwise `repo:version`, with a digest written in the image kept as a pin
/// (`repo:version@digest`). A tag written in the image is replaced by the version (they are
/// equal in any valid package). An image that does not parse is used with its text as the
/// repository, so that the failure surfaces as a pull error naming it.
pub fn pull_reference(image: &str, version: &str, container_sha: Option<&str>) -> String {
    let parsed = ImageRef::parse(image).ok();
    let repository = parsed
        .as_ref()
        .map_or_else(|| image.to_owned(), ImageRef::repository);
    match container_sha.filter(|sha| !sha.is_empty()) {
        Some(sha) => format!("{repository}@{sha}"),
        None => match parsed.and_then(|p| p.digest) {
            Some(digest) => format!("{repository}:{version}@{digest}"),
            None => format!("{repository}:{version}"),
        },
    }
}

/// The image stored in node state: the repository without tag or digest, as upstream records it.
pub fn stored_image(image: &str) -> String {
    ImageRef::parse(image).map_or_else(|_| image.to_owned(), |parsed| parsed.repository())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parse_table() {
        // input, registry, path, tag, has a digest
        type Case<'a> = (&'a str, Option<&'a str>, &'a str, Option<&'a str>, bool);
        let cases: &[Case<'_>] = &[
            ("busybox", None, "busybox", None, false),
            ("busybox:latest", None, "busybox", Some("latest"), false),
            (
                "library/busybox:1.36",
                None,
                "library/busybox",
                Some("1.36"),
                false,
            ),
            (
                "ghcr.io/nvidia/skyhook-packages/shellscript",
                Some("ghcr.io"),
                "nvidia/skyhook-packages/shellscript",
                None,
                false,
            ),
            (
                "ghcr.io/nvidia/skyhook-packages/shellscript:1.1.1",
                Some("ghcr.io"),
                "nvidia/skyhook-packages/shellscript",
                Some("1.1.1"),
                false,
            ),
            (
                "nvcr.io/nvidian/swgpu-baseos/nvssh:2024.05.10",
                Some("nvcr.io"),
                "nvidian/swgpu-baseos/nvssh",
                Some("2024.05.10"),
                false,
            ),
            ("host:5000/x", Some("host:5000"), "x", None, false),
            (
                "host:5000/x:1.2.3",
                Some("host:5000"),
                "x",
                Some("1.2.3"),
                false,
            ),
            ("localhost/pkg", Some("localhost"), "pkg", None, false),
            (
                "localhost:5000/a/b:2.3.1-test",
                Some("localhost:5000"),
                "a/b",
                Some("2.3.1-test"),
                false,
            ),
            (
                "Registry.Example.COM/pkg",
                Some("Registry.Example.COM"),
                "pkg",
                None,
                false,
            ),
            ("host:5000/x@SHA", Some("host:5000"), "x", None, true),
            (
                "host:5000/x:1.0@SHA",
                Some("host:5000"),
                "x",
                Some("1.0"),
                true,
            ),
            (
                "a/b__c/d-e/f--g/h.i_j",
                None,
                "a/b__c/d-e/f--g/h.i_j",
                None,
                false,
            ),
        ];
        for (input, registry, path, tag, has_digest) in cases {
            let input = input.replace("SHA", SHA);
            let parsed = ImageRef::parse(&input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(parsed.registry.as_deref(), *registry, "{input}");
            assert_eq!(parsed.path, *path, "{input}");
            assert_eq!(parsed.tag.as_deref(), *tag, "{input}");
            assert_eq!(parsed.digest.is_some(), *has_digest, "{input}");
            assert_eq!(parsed.to_string(), input, "display round trip");
        }
    }

    #[test]
    fn rejects_table() {
        let cases: &[(&str, ImageError)] = &[
            ("", ImageError::Empty),
            ("Busybox", ImageError::BadPathSegment("Busybox".into())),
            (
                "ghcr.io/NVIDIA/pkg",
                ImageError::BadPathSegment("NVIDIA".into()),
            ),
            ("ghcr.io//pkg", ImageError::BadPathSegment(String::new())),
            ("ghcr.io/pkg/", ImageError::BadPathSegment(String::new())),
            ("ghcr.io/", ImageError::BadPathSegment(String::new())),
            ("a/-b", ImageError::BadPathSegment("-b".into())),
            ("a/b...c", ImageError::BadPathSegment("b...c".into())),
            ("a/b___c", ImageError::BadPathSegment("b___c".into())),
            ("host:50a0/x", ImageError::BadRegistry("host:50a0".into())),
            ("host:/x", ImageError::BadRegistry("host:".into())),
            ("-bad.io/x", ImageError::BadRegistry("-bad.io".into())),
            ("busybox:", ImageError::BadTag(String::new())),
            ("busybox:.hidden", ImageError::BadTag(".hidden".into())),
            ("busybox:a/b", ImageError::BadRegistry("busybox:a".into())),
            (
                "busybox@sha256:abc",
                ImageError::BadDigest("sha256:abc".into()),
            ),
            ("busybox@md5:0123", ImageError::BadDigest("md5:0123".into())),
        ];
        for (input, want) in cases {
            assert_eq!(ImageRef::parse(input).unwrap_err(), *want, "{input}");
        }
        let long_tag = format!("busybox:{}", "a".repeat(129));
        assert!(matches!(
            ImageRef::parse(&long_tag),
            Err(ImageError::BadTag(_))
        ));
    }

    #[test]
    fn digest_format() {
        assert!(validate_digest(SHA).is_ok());
        for bad in [
            "",
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            &SHA.to_uppercase(),
            &SHA.replace("sha256", "SHA256"),
            &SHA.replace('f', "F"),
            &format!("{SHA}0"),
            &SHA[..SHA.len() - 1],
            &SHA.replace('a', "g"),
        ] {
            assert!(validate_digest(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn repository_drops_tag_and_digest() {
        let cases = [
            ("host:5000/x", "host:5000/x"),
            ("host:5000/x:1.0", "host:5000/x"),
            (
                "ghcr.io/nvidia/skyhook/agentless:bogus",
                "ghcr.io/nvidia/skyhook/agentless",
            ),
            (&format!("busybox:1@{SHA}"), "busybox"),
        ];
        for (input, want) in cases {
            assert_eq!(ImageRef::parse(input).unwrap().repository(), want);
            assert_eq!(stored_image(input), want);
        }
    }

    #[test]
    fn package_image_rules() {
        let ok = [
            ("ghcr.io/nvidia/skyhook-packages/shellscript", "1.1.0", None),
            (
                "nvcr.io/nvidian/swgpu-baseos/nvssh:2024.05.10",
                "2024.05.10",
                None,
            ),
            ("host:5000/x", "1.2.3", None),
            ("host:5000/x:1.2.3", "1.2.3", Some(SHA)),
            ("busybox", "1", Some("")),
        ];
        for (image, version, sha) in ok {
            assert!(
                validate_package_image(image, version, sha).is_ok(),
                "{image}"
            );
        }
        assert_eq!(
            validate_package_image("ghcr.io/nvidia/skyhook/agentless:bogus", "1.2.3", None),
            Err(PackageImageError::TagMismatch {
                tag: "bogus".into(),
                version: "1.2.3".into()
            })
        );
        assert!(matches!(
            validate_package_image("busybox", "1.0", Some("sha256:1234")),
            Err(PackageImageError::ContainerSha(ImageError::BadDigest(_)))
        ));
        let other = SHA.replace('0', "1");
        assert!(matches!(
            validate_package_image(&format!("busybox@{SHA}"), "1.0", Some(&other)),
            Err(PackageImageError::DigestMismatch { .. })
        ));
        assert!(matches!(
            validate_package_image("Busybox", "1.0", None),
            Err(PackageImageError::Image(ImageError::BadPathSegment(_)))
        ));
        let msg = validate_package_image("x:2.0", "1.0", None)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("\"2.0\"") && msg.contains("\"1.0\""), "{msg}");
    }

    #[test]
    fn pull_reference_table() {
        let cases = [
            (
                "ghcr.io/nvidia/skyhook-packages/shellscript",
                "1.1.0",
                None,
                "ghcr.io/nvidia/skyhook-packages/shellscript:1.1.0".to_owned(),
            ),
            ("host:5000/x", "1.2.3", None, "host:5000/x:1.2.3".to_owned()),
            (
                "host:5000/x:1.2.3",
                "1.2.3",
                None,
                "host:5000/x:1.2.3".to_owned(),
            ),
            (
                "host:5000/x",
                "1.2.3",
                Some(SHA),
                format!("host:5000/x@{SHA}"),
            ),
            ("busybox", "1", Some(""), "busybox:1".to_owned()),
            (
                &format!("busybox@{SHA}"),
                "1",
                None,
                format!("busybox:1@{SHA}"),
            ),
        ];
        for (image, version, sha, want) in cases {
            assert_eq!(pull_reference(image, version, sha), want, "{image}");
        }
    }
}
