//! Go duration strings (`10m`, `1h30m`, `1.5s`, `300ms`), as upstream reads `DEFAULT_INTERVAL`
//! and a package's `gracefulShutdown` with Go's `time.ParseDuration`.
//!
//! Contract: [`parse`] accepts exactly the language of `time.ParseDuration` except negative
//! values, which have no meaning for an interval, a timeout or a grace period. Values are
//! truncated to whole nanoseconds as Go does.

use std::time::Duration;

/// Why a duration string was rejected. The caller adds which setting or field it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a Go duration at all.
    #[error(
        "{input:?} is not a duration; write a number with a unit, e.g. 30s, 10m, 1h30m or 1.5h (units: ns, us, ms, s, m, h)"
    )]
    Syntax {
        /// The rejected text.
        input: String,
    },
    /// A unit other than ns, us/µs, ms, s, m, h.
    #[error("{input:?} uses the unknown unit {unit:?}; use one of ns, us, ms, s, m, h")]
    UnknownUnit {
        /// The rejected text.
        input: String,
        /// The unit that was not understood.
        unit: String,
    },
    /// A negative duration.
    #[error("{input:?} is negative; a duration here must be zero or more")]
    Negative {
        /// The rejected text.
        input: String,
    },
    /// More than `u64::MAX` nanoseconds (Go's limit is about 290 years; ours is larger).
    #[error("{input:?} is too large")]
    Overflow {
        /// The rejected text.
        input: String,
    },
}

/// Parses a Go duration string. See the module documentation.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let syntax = || DurationError::Syntax {
        input: input.to_owned(),
    };
    let overflow = || DurationError::Overflow {
        input: input.to_owned(),
    };
    let (negative, mut rest) = match input.as_bytes().first() {
        Some(b'-') => (true, &input[1..]),
        Some(b'+') => (false, &input[1..]),
        _ => (false, input),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(syntax());
    }
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let integer_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let integer = &rest[..integer_len];
        rest = &rest[integer_len..];
        let mut fraction = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let fraction_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            fraction = &after_dot[..fraction_len];
            rest = &after_dot[fraction_len..];
        }
        if integer.is_empty() && fraction.is_empty() {
            return Err(syntax());
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(at, _)| at);
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        if unit.is_empty() {
            return Err(syntax());
        }
        let unit_nanos = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            input: input.to_owned(),
            unit: unit.to_owned(),
        })?;
        let whole: u128 = if integer.is_empty() {
            0
        } else {
            integer.parse().map_err(|_| overflow())?
        };
        let nanos = whole.checked_mul(unit_nanos).ok_or_else(overflow)?
            + fraction_nanos(fraction, unit_nanos);
        total_nanos = total_nanos.checked_add(nanos).ok_or_else(overflow)?;
    }
    if negative && total_nanos > 0 {
        return Err(DurationError::Negative {
            input: input.to_owned(),
        });
    }
    let nanos = u64::try_from(total_nanos).map_err(|_| overflow())?;
    Ok(Duration::from_nanos(nanos))
}

/// Nanoseconds in one `unit`, if Go knows the unit.
fn unit_nanos(unit: &str) -> Option<u128> {
    match unit {
        "ns" => Some(1),
        "us" | "µs" | "μs" => Some(1_000),
        "ms" => Some(1_000_000),
        "s" => Some(1_000_000_000),
        "m" => Some(60 * 1_000_000_000),
        "h" => Some(3_600 * 1_000_000_000),
        _ => None,
    }
}

/// What the decimal `fraction` digits of a unit of `unit_nanos` contribute: fraction × unit,
/// truncated to whole nanoseconds. Digits past the nanosecond resolution of the unit cannot
/// change the result.
fn fraction_nanos(fraction: &str, unit_nanos: u128) -> u128 {
    let mut nanos = 0;
    let mut scale = unit_nanos;
    for digit in fraction.bytes() {
        if scale < 10 {
            break;
        }
        scale /= 10;
        nanos += u128::from(digit - b'0') * scale;
    }
    nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_go_durations() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("+0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("1m", Duration::from_secs(60)),
            ("10m", Duration::from_secs(600)),
            ("1h30m", Duration::from_secs(5400)),
            ("1h30m15s", Duration::from_secs(5415)),
            ("1.5h", Duration::from_secs(5400)),
            (".5s", Duration::from_millis(500)),
            ("5.s", Duration::from_secs(5)),
            ("300ms", Duration::from_millis(300)),
            ("1us", Duration::from_micros(1)),
            ("1µs", Duration::from_micros(1)),
            ("1μs", Duration::from_micros(1)),
            ("7ns", Duration::from_nanos(7)),
            ("1.0000000001s", Duration::from_secs(1)),
            ("0.999999999999s", Duration::from_nanos(999_999_999)),
            ("2h45m30.5s", Duration::from_millis(9_930_500)),
            ("1s1s", Duration::from_secs(2)),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn rejects_non_durations() {
        let syntax = |s: &str| DurationError::Syntax { input: s.into() };
        let cases = [
            ("", syntax("")),
            ("10", syntax("10")),
            ("m", syntax("m")),
            (".s", syntax(".s")),
            (
                "1h 30m",
                DurationError::UnknownUnit {
                    input: "1h 30m".into(),
                    unit: "h ".into(),
                },
            ),
            ("-", syntax("-")),
            (
                "10x",
                DurationError::UnknownUnit {
                    input: "10x".into(),
                    unit: "x".into(),
                },
            ),
            (
                "1d",
                DurationError::UnknownUnit {
                    input: "1d".into(),
                    unit: "d".into(),
                },
            ),
            (
                "-5s",
                DurationError::Negative {
                    input: "-5s".into(),
                },
            ),
            (
                "99999999999999999999999h",
                DurationError::Overflow {
                    input: "99999999999999999999999h".into(),
                },
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), Err(want), "{input:?}");
        }
    }

    #[test]
    fn error_names_the_fix() {
        let message = parse("ten minutes").unwrap_err().to_string();
        assert!(message.contains("10m"), "{message}");
    }
}
