//! Package versions: the lenient semantic versioning Skyhook accepts, with a total order.
//!
//! Upstream prefixes the version with `v` and hands it to Go's `x/mod/semver`, so it accepts the
//! short forms `1` and `1.2` (read as `1.0.0` and `1.2.0`) and prerelease/build suffixes on full
//! `major.minor.patch` versions. We accept the same language plus leading zeros in numbers
//! (`2024.05.10`, used verbatim by a seed manifest), which compare numerically.
//!
//! Precedence follows semver: numeric core, then prerelease (a release outranks any prerelease of
//! the same core), build metadata ignored. Two different texts can share a precedence (`1.2` and
//! `1.2.0`, or `1.0.0+a` and `1.0.0+b`); [`Version`]'s `Ord` breaks such ties on the text so that
//! sorting is total and deterministic. Use [`Version::cmp_precedence`] for "is this an upgrade?".

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// The example shown in every version error.
const VALID_EXAMPLES: &str = "1.2.3, 1.2, 1 or 2.3.1-test";

/// A parsed package version. Equality is textual; see [`Version::same_precedence`].
#[derive(Debug, Clone)]
pub struct Version {
    text: String,
    major: Digits,
    minor: Digits,
    patch: Digits,
    prerelease: Vec<Identifier>,
}

/// A non-negative integer of any length kept as its digits without leading zeros, so that
/// `2024` and `02024` compare equal and huge numbers never overflow.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Digits(String);

impl Digits {
    fn new(raw: &str) -> Self {
        let trimmed = raw.trim_start_matches('0');
        Digits(if trimmed.is_empty() {
            "0".to_owned()
        } else {
            trimmed.to_owned()
        })
    }

    fn zero() -> Self {
        Digits("0".to_owned())
    }
}

impl Ord for Digits {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for Digits {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One dot-separated prerelease identifier.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Identifier {
    Numeric(Digits),
    Alphanumeric(String),
}

impl Ord for Identifier {
    /// Semver §11.4: numeric identifiers compare numerically and rank below alphanumeric ones,
    /// which compare in ASCII order.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Identifier::Numeric(a), Identifier::Numeric(b)) => a.cmp(b),
            (Identifier::Numeric(_), Identifier::Alphanumeric(_)) => Ordering::Less,
            (Identifier::Alphanumeric(_), Identifier::Numeric(_)) => Ordering::Greater,
            (Identifier::Alphanumeric(a), Identifier::Alphanumeric(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for Identifier {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Why a version string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version {input:?}: {problem}; a valid version looks like {VALID_EXAMPLES}")]
pub struct VersionError {
    /// The rejected text.
    pub input: String,
    /// What is wrong with it.
    pub problem: VersionProblem,
}

/// The specific defect in a rejected version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionProblem {
    /// Nothing was given.
    #[error("the version is empty")]
    Empty,
    /// `v1.2.3`: the `v` is added internally and must not be written.
    #[error("it starts with `v`; drop the `v` (write {0:?})")]
    LeadingV(String),
    /// Spaces, tabs or newlines anywhere.
    #[error("it contains whitespace; remove it")]
    Whitespace,
    /// A core component is empty or not made of digits.
    #[error("the {0} number is missing or is not made of digits")]
    NotANumber(&'static str),
    /// Something other than `.`, `-` or `+` follows a number, e.g. `2024/07/06`.
    #[error("unexpected {found:?} after the {after} number; components are separated by dots")]
    UnexpectedCharacter {
        /// The offending character.
        found: char,
        /// The component it follows.
        after: &'static str,
    },
    /// `1.2-rc1`: suffixes need all three numbers.
    #[error("a prerelease or build suffix needs all three numbers (major.minor.patch)")]
    SuffixOnShortForm,
    /// An empty identifier or a character outside `[0-9A-Za-z-]` in a suffix.
    #[error("the {0} suffix must be dot-separated non-empty identifiers of [0-9A-Za-z-]")]
    BadSuffix(&'static str),
}

impl Version {
    /// Parses a version as upstream's Go semver does after prefixing `v`, also accepting
    /// leading zeros in numbers.
    pub fn parse(input: &str) -> Result<Self, VersionError> {
        parse(input).map_err(|problem| VersionError {
            input: input.to_owned(),
            problem,
        })
    }

    /// The version exactly as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether this version carries a prerelease suffix (`2.3.1-test`).
    pub fn is_prerelease(&self) -> bool {
        !self.prerelease.is_empty()
    }

    /// Semver precedence: core numbers, then prerelease; build metadata and the textual form
    /// (`1.2` vs `1.2.0`, leading zeros) are ignored.
    pub fn cmp_precedence(&self, other: &Self) -> Ordering {
        self.major
            .cmp(&other.major)
            .then_with(|| self.minor.cmp(&other.minor))
            .then_with(|| self.patch.cmp(&other.patch))
            .then_with(|| cmp_prerelease(&self.prerelease, &other.prerelease))
    }

    /// True when neither version outranks the other, even if they are written differently.
    pub fn same_precedence(&self, other: &Self) -> bool {
        self.cmp_precedence(other) == Ordering::Equal
    }
}

fn cmp_prerelease(a: &[Identifier], b: &[Identifier]) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => Ordering::Equal,
        // A release outranks every prerelease of the same core.
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // Lexicographic by identifier; a longer list wins when one is a prefix of the other.
        (false, false) => a.cmp(b),
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Version {}

impl Ord for Version {
    /// Precedence first, then the text, so that the order is total and agrees with `Eq`.
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_precedence(other)
            .then_with(|| self.text.cmp(&other.text))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::hash::Hash for Version {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Version {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::parse(s)
    }
}

/// Compares two version strings by precedence, failing on the first one that does not parse.
pub fn compare_precedence(a: &str, b: &str) -> Result<Ordering, VersionError> {
    Ok(Version::parse(a)?.cmp_precedence(&Version::parse(b)?))
}

fn parse(input: &str) -> Result<Version, VersionProblem> {
    if input.is_empty() {
        return Err(VersionProblem::Empty);
    }
    if input.chars().any(char::is_whitespace) {
        return Err(VersionProblem::Whitespace);
    }
    if let Some(rest) = input.strip_prefix(['v', 'V'])
        && rest.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(VersionProblem::LeadingV(rest.to_owned()));
    }

    let (major, rest) = take_number(input, "major")?;
    let mut version = Version {
        text: input.to_owned(),
        major,
        minor: Digits::zero(),
        patch: Digits::zero(),
        prerelease: Vec::new(),
    };
    let Some(rest) = expect_dot(rest, "major")? else {
        return Ok(version);
    };
    let (minor, rest) = take_number(rest, "minor")?;
    version.minor = minor;
    let Some(rest) = expect_dot(rest, "minor")? else {
        return Ok(version);
    };
    let (patch, rest) = take_number(rest, "patch")?;
    version.patch = patch;

    let (before_build, build) = match rest.split_once('+') {
        Some((head, build)) => (head, Some(build)),
        None => (rest, None),
    };
    if let Some(prerelease) = before_build.strip_prefix('-') {
        version.prerelease = identifiers(prerelease, "prerelease")?
            .map(|id| {
                if id.bytes().all(|b| b.is_ascii_digit()) {
                    Identifier::Numeric(Digits::new(id))
                } else {
                    Identifier::Alphanumeric(id.to_owned())
                }
            })
            .collect();
    } else if let Some(found) = before_build.chars().next() {
        return Err(VersionProblem::UnexpectedCharacter {
            found,
            after: "patch",
        });
    }
    if let Some(build) = build {
        identifiers(build, "build")?.for_each(drop);
    }
    Ok(version)
}

/// Splits a leading run of ASCII digits off `s`.
fn take_number<'a>(
    s: &'a str,
    component: &'static str,
) -> Result<(Digits, &'a str), VersionProblem> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return Err(VersionProblem::NotANumber(component));
    }
    Ok((Digits::new(&s[..end]), &s[end..]))
}

/// After a short-form component: end of input (`Ok(None)`), a dot (`Ok(Some(rest))`), or an
/// error that distinguishes a suffix on a short form from a stray character.
fn expect_dot<'a>(rest: &'a str, after: &'static str) -> Result<Option<&'a str>, VersionProblem> {
    match rest.chars().next() {
        None => Ok(None),
        Some('.') => Ok(Some(&rest[1..])),
        Some('-' | '+') => Err(VersionProblem::SuffixOnShortForm),
        Some(found) => Err(VersionProblem::UnexpectedCharacter { found, after }),
    }
}

fn identifiers<'a>(
    suffix: &'a str,
    kind: &'static str,
) -> Result<impl Iterator<Item = &'a str>, VersionProblem> {
    let valid = suffix
        .split('.')
        .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if valid {
        Ok(suffix.split('.'))
    } else {
        Err(VersionProblem::BadSuffix(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn accepts_what_upstream_accepts_plus_leading_zeros() {
        for ok in [
            "0",
            "1",
            "1.2",
            "1.2.3",
            "3.3",
            "2.3.1-test",
            "2024.7.7-test",
            "2024.05.10",
            "2024.05.13",
            "1.0.0-alpha.1",
            "1.0.0-0.3.7",
            "1.0.0-x-y-z.--",
            "1.0.0+build.5",
            "1.0.0-rc.1+build.1-a",
            "18446744073709551616.0.0",
            "01.002.0003",
        ] {
            assert!(Version::parse(ok).is_ok(), "{ok} should parse");
        }
    }

    #[test]
    fn rejects_with_the_reason() {
        let cases: &[(&str, VersionProblem)] = &[
            ("", VersionProblem::Empty),
            ("v1.2.3", VersionProblem::LeadingV("1.2.3".into())),
            ("V2", VersionProblem::LeadingV("2".into())),
            ("1.2.3 ", VersionProblem::Whitespace),
            (" 1", VersionProblem::Whitespace),
            ("1 .2", VersionProblem::Whitespace),
            (
                "2024/07/06",
                VersionProblem::UnexpectedCharacter {
                    found: '/',
                    after: "major",
                },
            ),
            (
                "1.2/3",
                VersionProblem::UnexpectedCharacter {
                    found: '/',
                    after: "minor",
                },
            ),
            (
                "1.2.3_4",
                VersionProblem::UnexpectedCharacter {
                    found: '_',
                    after: "patch",
                },
            ),
            (
                "1.2.3.4",
                VersionProblem::UnexpectedCharacter {
                    found: '.',
                    after: "patch",
                },
            ),
            ("latest", VersionProblem::NotANumber("major")),
            ("1.", VersionProblem::NotANumber("minor")),
            ("1.2.", VersionProblem::NotANumber("patch")),
            ("1..3", VersionProblem::NotANumber("minor")),
            ("1.x", VersionProblem::NotANumber("minor")),
            ("1.2-rc1", VersionProblem::SuffixOnShortForm),
            ("1+build", VersionProblem::SuffixOnShortForm),
            ("1.2.3-", VersionProblem::BadSuffix("prerelease")),
            ("1.2.3-a..b", VersionProblem::BadSuffix("prerelease")),
            ("1.2.3-a_b", VersionProblem::BadSuffix("prerelease")),
            ("1.2.3+", VersionProblem::BadSuffix("build")),
            ("1.2.3+a+b", VersionProblem::BadSuffix("build")),
        ];
        for (input, problem) in cases {
            let err = Version::parse(input).unwrap_err();
            assert_eq!(&err.problem, problem, "input {input:?}");
            assert_eq!(err.input, *input);
        }
    }

    #[test]
    fn error_message_explains_and_gives_an_example() {
        let msg = Version::parse("v1.2.3").unwrap_err().to_string();
        assert!(msg.contains("drop the `v`"), "{msg}");
        assert!(msg.contains("1.2.3"), "{msg}");
        let msg = Version::parse("2024/07/06").unwrap_err().to_string();
        assert!(msg.contains("'/'") && msg.contains("2.3.1-test"), "{msg}");
    }

    #[test]
    fn precedence_table() {
        use Ordering::*;
        let cases = [
            ("1", "1.0.0", Equal),
            ("1.2", "1.2.0", Equal),
            ("2024.05.10", "2024.5.10", Equal),
            ("1.0.0+a", "1.0.0+b", Equal),
            ("1.2.5", "1.2.6", Less),
            ("2.0.1", "2.0.0", Greater),
            ("1.10.0", "1.9.0", Greater),
            ("10", "9.9.9", Greater),
            ("1.0.0-alpha", "1.0.0", Less),
            ("1.0.0-alpha", "1.0.0-alpha.1", Less),
            ("1.0.0-alpha.1", "1.0.0-alpha.beta", Less),
            ("1.0.0-alpha.beta", "1.0.0-beta", Less),
            ("1.0.0-beta.2", "1.0.0-beta.11", Less),
            ("1.0.0-beta.11", "1.0.0-rc.1", Less),
            ("1.0.0-rc.1", "1.0.0", Less),
            ("2024.7.7-test", "2024.7.7", Less),
            (
                "99999999999999999999999",
                "99999999999999999999998",
                Greater,
            ),
            ("3.3", "2.3.1-test", Greater),
        ];
        for (a, b, want) in cases {
            assert_eq!(v(a).cmp_precedence(&v(b)), want, "{a} vs {b}");
            assert_eq!(v(b).cmp_precedence(&v(a)), want.reverse(), "{b} vs {a}");
            assert_eq!(compare_precedence(a, b).unwrap(), want);
        }
    }

    #[test]
    fn textual_tie_break_keeps_the_order_total() {
        let (short, long) = (v("1.2"), v("1.2.0"));
        assert!(short.same_precedence(&long));
        assert_ne!(short, long);
        assert_eq!(short.cmp(&long), Ordering::Less);
        let mut sorted = [v("1.2.0"), v("1.10"), v("1.2"), v("1.2.0-rc.1"), v("01.2")];
        sorted.sort();
        let texts: Vec<_> = sorted.iter().map(Version::as_str).collect();
        assert_eq!(texts, ["1.2.0-rc.1", "01.2", "1.2", "1.2.0", "1.10"]);
    }

    #[test]
    fn display_and_from_str_round_trip_the_text() {
        let parsed: Version = "2024.05.10".parse().unwrap();
        assert_eq!(parsed.to_string(), "2024.05.10");
        assert!(v("2.3.1-test").is_prerelease());
        assert!(!v("2.3.1+test").is_prerelease());
    }
}
