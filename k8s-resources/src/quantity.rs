//! Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`) as comparable numbers.
//!
//! Grammar: an optionally signed decimal number (`1`, `1.5`, `.5`, `5.`) followed by a binary
//! suffix (`Ki Mi Gi Ti Pi Ei`), a decimal suffix (`n u m k M G T P E`, or none), or a decimal
//! exponent (`e3`, `E-2`). Values are kept exactly in nano-units, rounded up below one nano-unit
//! as Kubernetes does.

use std::cmp::Ordering;

/// A parsed quantity, in nano-units (so `1m` is 1 000 000 and `1` is 10⁹).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct QuantityValue(i128);

impl QuantityValue {
    /// Whether the quantity is strictly positive.
    pub fn is_positive(self) -> bool {
        self.0 > 0
    }

    /// The value in thousandths of its unit (CPU in millicores), rounded up as the API server
    /// rounds requests.
    pub fn milli_ceil(self) -> i128 {
        self.0.div_euclid(1_000_000) + i128::from(self.0.rem_euclid(1_000_000) != 0)
    }

    /// The value in whole units (bytes for memory, a count for pods), rounded up.
    pub fn units_ceil(self) -> i128 {
        self.0.div_euclid(1_000_000_000) + i128::from(self.0.rem_euclid(1_000_000_000) != 0)
    }
}

/// Why a quantity did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "quantity {input:?} is invalid: {problem}; write a number with an optional suffix, e.g. 500m, 2, 64Mi or 1Gi"
)]
pub struct QuantityError {
    /// The rejected text.
    pub input: String,
    /// What is wrong.
    pub problem: &'static str,
}

/// Parses a quantity.
pub fn parse_quantity(input: &str) -> Result<QuantityValue, QuantityError> {
    parse_nanos(input)
        .map(QuantityValue)
        .map_err(|problem| QuantityError {
            input: input.to_owned(),
            problem,
        })
}

/// The quantity in nano-units, or what is wrong with it.
fn parse_nanos(input: &str) -> Result<i128, &'static str> {
    let (negative, unsigned) = split_sign(input)?;
    let (int_part, frac_part, suffix) = split_number(unsigned)?;
    let (pow10, pow2) = suffix_scale(suffix)?;
    let mantissa = mantissa(int_part, frac_part)?;
    let frac_len = i32::try_from(frac_part.len()).map_err(|_| "it has too many digits")?;
    let exponent = pow10.saturating_add(9).saturating_sub(frac_len);
    let value = scale(mantissa, pow2, exponent)?;
    Ok(if negative { -value } else { value })
}

/// Whether the text is negative, and the text without its sign.
fn split_sign(input: &str) -> Result<(bool, &str), &'static str> {
    match input.as_bytes().first() {
        Some(b'-') => Ok((true, &input[1..])),
        Some(b'+') => Ok((false, &input[1..])),
        Some(_) => Ok((false, input)),
        None => Err("it is empty"),
    }
}

/// The digits before and after the decimal point, and the suffix that follows them.
fn split_number(unsigned: &str) -> Result<(&str, &str, &str), &'static str> {
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return Err("it has no number");
    }
    if frac_part.contains('.') {
        return Err("it has more than one decimal point");
    }
    Ok((int_part, frac_part, suffix))
}

/// The power of ten and the power of two a suffix multiplies by.
fn suffix_scale(suffix: &str) -> Result<(i32, u32), &'static str> {
    Ok(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        exponent if exponent.starts_with(['e', 'E']) => {
            let digits = &exponent[1..];
            let value: i32 = digits
                .strip_prefix('+')
                .unwrap_or(digits)
                .parse()
                .ok()
                .filter(|_| !digits.is_empty() && !digits.starts_with("+-"))
                .ok_or("the exponent after 'e' is not an integer")?;
            (value, 0)
        }
        _ => {
            return Err(
                "the suffix is not one of n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent",
            );
        }
    })
}

/// All the digits, integer and fraction, as one integer.
fn mantissa(int_part: &str, frac_part: &str) -> Result<i128, &'static str> {
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err("it has too many digits");
    }
    if digits.is_empty() {
        return Ok(0);
    }
    digits.parse().map_err(|_| "it is not a number")
}

/// `mantissa × 2^pow2 × 10^pow10`, rounded up to a whole number when `pow10` is negative.
fn scale(mantissa: i128, pow2: u32, pow10: i32) -> Result<i128, &'static str> {
    let too_large = "it is too large";
    let value = mantissa.checked_mul(1i128 << pow2).ok_or(too_large)?;
    match pow10.cmp(&0) {
        Ordering::Greater => {
            let factor = 10i128.checked_pow(pow10.unsigned_abs()).ok_or(too_large)?;
            value.checked_mul(factor).ok_or(too_large)
        }
        Ordering::Less => Ok(match 10i128.checked_pow(pow10.unsigned_abs()) {
            // Round up to a whole nano-unit, as Kubernetes does.
            Some(divisor) => value / divisor + i128::from(value % divisor != 0),
            None => i128::from(value != 0),
        }),
        Ordering::Equal => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nanos(s: &str) -> i128 {
        parse_quantity(s).unwrap().0
    }

    #[test]
    fn values() {
        let cases: [(&str, i128); 22] = [
            ("1", 1_000_000_000),
            ("0", 0),
            ("500m", 500_000_000),
            ("50m", 50_000_000),
            ("0.5", 500_000_000),
            (".5", 500_000_000),
            ("5.", 5_000_000_000),
            ("+2", 2_000_000_000),
            ("-1", -1_000_000_000),
            ("1k", 1_000_000_000_000),
            ("1Ki", 1_024_000_000_000),
            ("32Mi", 32 * (1 << 20) * 1_000_000_000),
            ("1.5Gi", 3 * (1 << 29) * 1_000_000_000),
            ("10Gi", 10 * (1 << 30) * 1_000_000_000),
            ("1e3", 1_000_000_000_000),
            ("1E-3", 1_000_000),
            ("2e+1", 20_000_000_000),
            ("1n", 1),
            ("1u", 1_000),
            ("0.1n", 1),
            ("1e-40", 1),
            ("1Ei", (1i128 << 60) * 1_000_000_000),
        ];
        for (input, want) in cases {
            assert_eq!(nanos(input), want, "{input}");
        }
    }

    #[test]
    fn rounded_conversions() {
        let cases: &[(&str, i128, i128)] = &[
            // text, milli, units
            ("1", 1000, 1),
            ("100m", 100, 1),
            ("0.5", 500, 1),
            ("1.5", 1500, 2),
            ("2500m", 2500, 3),
            ("20Mi", 20 * 1024 * 1024 * 1000, 20 * 1024 * 1024),
            ("129e6", 129_000_000_000, 129_000_000),
            ("0.1m", 1, 1),
            ("-1", -1000, -1),
            ("0", 0, 0),
        ];
        for (text, milli, units) in cases {
            let value = parse_quantity(text).unwrap();
            assert_eq!(value.milli_ceil(), *milli, "{text}");
            assert_eq!(value.units_ceil(), *units, "{text}");
        }
    }

    #[test]
    fn comparisons() {
        let lt = |a: &str, b: &str| parse_quantity(a).unwrap() < parse_quantity(b).unwrap();
        assert!(lt("500m", "1"));
        assert!(lt("1000", "1Ki"));
        assert!(lt("1M", "1Mi"));
        assert!(lt("999m", "1"));
        assert_eq!(parse_quantity("1000m"), parse_quantity("1"));
        assert_eq!(parse_quantity("1Ki"), parse_quantity("1024"));
        assert!(parse_quantity("1m").unwrap().is_positive());
        assert!(!parse_quantity("0Gi").unwrap().is_positive());
        assert!(!parse_quantity("-5m").unwrap().is_positive());
    }

    #[test]
    fn rejects() {
        for input in [
            "",
            "-",
            "m",
            ".",
            "1..2",
            "1.2.3",
            "1 Gi",
            "1gi",
            "1K",
            "1KiB",
            "1e",
            "1e1.5",
            "1e+-1",
            "abc",
            "1Gi ",
            &"9".repeat(31),
        ] {
            let err = parse_quantity(input).unwrap_err();
            assert_eq!(err.input, input);
            assert!(err.to_string().contains("500m"), "{err}");
        }
        assert_eq!(
            parse_quantity("1e40").unwrap_err().problem,
            "it is too large"
        );
    }

    #[test]
    fn suffix_scales() {
        /// Suffix, powers of ten and two.
        type Case = (&'static str, Result<(i32, u32), &'static str>);
        let cases: &[Case] = &[
            ("", Ok((0, 0))),
            ("m", Ok((-3, 0))),
            ("E", Ok((18, 0))),
            ("Ki", Ok((0, 10))),
            ("Ei", Ok((0, 60))),
            ("e3", Ok((3, 0))),
            ("E-2", Ok((-2, 0))),
            ("e+4", Ok((4, 0))),
            ("e", Err("the exponent after 'e' is not an integer")),
            ("e+-1", Err("the exponent after 'e' is not an integer")),
            (
                "K",
                Err(
                    "the suffix is not one of n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent",
                ),
            ),
        ];
        for (suffix, want) in cases {
            assert_eq!(suffix_scale(suffix), *want, "{suffix:?}");
        }
    }

    #[test]
    fn scaling() {
        /// Mantissa, power of two, power of ten, nano-units.
        type Case = (i128, u32, i32, Result<i128, &'static str>);
        let cases: &[Case] = &[
            (5, 0, 0, Ok(5)),
            (5, 1, 2, Ok(1000)),
            (15, 0, -1, Ok(2)),
            (10, 0, -1, Ok(1)),
            (0, 0, -50, Ok(0)),
            (1, 0, -50, Ok(1)),
            (1, 0, 40, Err("it is too large")),
            (i128::MAX / 2, 2, 0, Err("it is too large")),
        ];
        for (mantissa, pow2, pow10, want) in cases {
            assert_eq!(
                scale(*mantissa, *pow2, *pow10),
                *want,
                "{mantissa} {pow2} {pow10}"
            );
        }
    }
}
