//! Shell-style patterns with Go's `path/filepath.Match` semantics, used by `configInterrupts`.
//!
//! `*` matches any run of characters except `/`, `?` one character except `/`, `[...]` a
//! character class (`[^...]` negated, `a-z` ranges, `\` escapes), and `\c` the character `c`.
//! A malformed pattern is an error whatever the input, so validation can report it.

use std::fmt;

/// Why a pattern is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct GlobError {
    /// The pattern.
    pub pattern: String,
    /// What is wrong.
    pub problem: &'static str,
}

impl fmt::Display for GlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pattern {:?} is malformed: {}",
            self.pattern, self.problem
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    AnyChar,
    AnyRun,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A parsed pattern: chunks of single-character tokens, each optionally preceded by `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    chunks: Vec<(bool, Vec<Token>)>,
}

const SEPARATOR: char = '/';

impl Pattern {
    /// Parses `pattern`.
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        let bad = |problem| GlobError {
            pattern: pattern.to_owned(),
            problem,
        };
        let mut chars = pattern.chars().peekable();
        let mut tokens = Vec::new();
        while let Some(c) = chars.next() {
            let token = match c {
                '*' => Token::AnyRun,
                '?' => Token::AnyChar,
                '\\' => Token::Literal(
                    chars
                        .next()
                        .ok_or_else(|| bad("it ends with a lone '\\'"))?,
                ),
                '[' => {
                    let negated = chars.next_if_eq(&'^').is_some();
                    let mut ranges = Vec::new();
                    loop {
                        if !ranges.is_empty() && chars.next_if_eq(&']').is_some() {
                            break;
                        }
                        let lo = class_char(&mut chars).map_err(bad)?;
                        let hi = if chars.next_if_eq(&'-').is_some() {
                            class_char(&mut chars).map_err(bad)?
                        } else {
                            lo
                        };
                        ranges.push((lo, hi));
                    }
                    Token::Class { negated, ranges }
                }
                other => Token::Literal(other),
            };
            tokens.push(token);
        }
        let mut chunks: Vec<(bool, Vec<Token>)> = Vec::new();
        for token in tokens {
            match (token, chunks.last_mut()) {
                // Consecutive stars are one star.
                (Token::AnyRun, Some((true, chunk))) if chunk.is_empty() => {}
                (Token::AnyRun, _) => chunks.push((true, Vec::new())),
                (single, Some((_, chunk))) => chunk.push(single),
                (single, None) => chunks.push((false, vec![single])),
            }
        }
        Ok(Pattern { chunks })
    }

    /// Whether `name` matches the whole pattern. Like Go, each chunk after a `*` takes its
    /// leftmost match (only the last chunk must end the name), and `*` never spans a `/`.
    pub fn matches(&self, name: &str) -> bool {
        let chars: Vec<char> = name.chars().collect();
        let mut rest: &[char] = &chars;
        for (i, (star, chunk)) in self.chunks.iter().enumerate() {
            let last = i + 1 == self.chunks.len();
            if *star && chunk.is_empty() {
                return !rest.contains(&SEPARATOR);
            }
            if let Some(after) = match_chunk(chunk, rest)
                && (after.is_empty() || !last)
            {
                rest = after;
                continue;
            }
            let skipped = if *star {
                (0..rest.len())
                    .take_while(|&skip| rest[skip] != SEPARATOR)
                    .filter_map(|skip| match_chunk(chunk, &rest[skip + 1..]))
                    .find(|after| !last || after.is_empty())
            } else {
                None
            };
            match skipped {
                Some(after) => rest = after,
                None => return false,
            }
        }
        rest.is_empty()
    }
}

/// Matches the single-character tokens of `chunk` at the start of `name`, returning the rest.
fn match_chunk<'n>(chunk: &[Token], name: &'n [char]) -> Option<&'n [char]> {
    if chunk.len() > name.len() {
        return None;
    }
    let (head, tail) = name.split_at(chunk.len());
    chunk
        .iter()
        .zip(head)
        .all(|(token, c)| matches_one(token, *c))
        .then_some(tail)
}

fn class_char(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<char, &'static str> {
    match chars.next() {
        None => Err("a character class is not closed with ']'"),
        Some('-' | ']') => Err("a character class has an empty range or an unescaped '-' or ']'"),
        Some('\\') => chars.next().ok_or("it ends with a lone '\\'"),
        Some(c) => Ok(c),
    }
}

fn matches_one(token: &Token, c: char) -> bool {
    match token {
        Token::Literal(l) => *l == c,
        Token::AnyChar => c != SEPARATOR,
        Token::Class { negated, ranges } => {
            ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated
        }
        Token::AnyRun => false,
    }
}

/// Whether `pattern` matches `name`; a malformed pattern is an error.
pub fn glob_match(pattern: &str, name: &str) -> Result<bool, GlobError> {
    Ok(Pattern::new(pattern)?.matches(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_table() {
        let cases = [
            ("game.properties", "game.properties", true),
            ("game.properties", "ui.properties", false),
            ("*.properties", "game.properties", true),
            ("*.properties", "game.properties.bak", false),
            ("*", "anything", true),
            ("*", "", true),
            ("*", "a/b", false),
            ("a*/b", "abc/b", true),
            ("a*/b", "a/c/b", false),
            ("*.sh", "apply.sh", true),
            ("apply*.sh", "apply_check.sh", true),
            ("?.conf", "a.conf", true),
            ("?.conf", "ab.conf", false),
            ("?", "/", false),
            ("[abc].txt", "b.txt", true),
            ("[abc].txt", "d.txt", false),
            ("[^abc].txt", "d.txt", true),
            ("[^abc].txt", "a.txt", false),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("[\\]]", "]", true),
            ("[\\-]", "-", true),
            ("\\*", "*", true),
            ("\\*", "a", false),
            ("a]b", "a]b", true),
            ("*x*y*", "axbycy", true),
            ("*x*y*", "ayxb", false),
            ("sysctl.conf", "sysctl.conf", true),
            ("service_*.conf", "service_containerd.conf", true),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(glob_match(pattern, name), Ok(want), "{pattern} vs {name}");
        }
    }

    #[test]
    fn malformed_patterns() {
        for pattern in [
            "[", "[]", "[a", "[a-]", "[-a]", "[]a]", "\\", "a\\", "[a-\\",
        ] {
            let err = glob_match(pattern, "anything").unwrap_err();
            assert_eq!(err.pattern, pattern);
            assert!(err.to_string().contains("malformed"), "{err}");
        }
    }

    #[test]
    fn many_stars_stay_fast_enough_to_finish() {
        let pattern = "*a*a*a*a*a*a*b";
        let name = "a".repeat(30);
        assert_eq!(glob_match(pattern, &name), Ok(false));
    }
}
