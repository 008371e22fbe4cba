//! Resource quantities (`100m`, `1.5`, `20Mi`, `1e3`) as integers: CPU in millicores, everything
//! else in base units. Values are rounded up, as the API server rounds requests.

/// The quantity cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {0:?}")]
pub struct InvalidQuantity(pub String);

/// Parses a quantity into thousandths of its unit (`1` → 1000, `100m` → 100, `1Ki` → 1_024_000).
pub fn parse_milli(text: &str) -> Result<i128, InvalidQuantity> {
    let invalid = || InvalidQuantity(text.to_owned());
    let text = text.trim();
    let (number, suffix) = split_suffix(text);
    if number.is_empty() {
        return Err(invalid());
    }
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole
            .chars()
            .chain(fraction.chars())
            .all(|c| c.is_ascii_digit())
    {
        return Err(invalid());
    }
    // value = digits / 10^fraction_len * 10^exp10 * 2^exp2, computed in thousandths, rounded up.
    let mantissa: i128 = format!("{whole}{fraction}")
        .parse()
        .map_err(|_| invalid())?;
    let (exp10, exp2) = suffix_exponents(suffix).ok_or_else(invalid)?;
    let fraction_len = i32::try_from(fraction.len()).map_err(|_| invalid())?;
    let scale10 = exp10 + 3 - fraction_len;
    let mut value = mantissa.checked_mul(1i128 << exp2).ok_or_else(invalid)?;
    if scale10 >= 0 {
        value = value
            .checked_mul(
                10i128
                    .checked_pow(scale10.unsigned_abs())
                    .ok_or_else(invalid)?,
            )
            .ok_or_else(invalid)?;
    } else {
        let divisor = 10i128
            .checked_pow(scale10.unsigned_abs())
            .ok_or_else(invalid)?;
        value = (value + divisor - 1) / divisor;
    }
    Ok(if negative { -value } else { value })
}

/// CPU in millicores.
pub fn cpu_millis(text: &str) -> Result<i128, InvalidQuantity> {
    parse_milli(text)
}

/// Memory (or any non-CPU resource) in base units, rounded up.
pub fn units(text: &str) -> Result<i128, InvalidQuantity> {
    Ok((parse_milli(text)? + 999).div_euclid(1000))
}

fn split_suffix(text: &str) -> (&str, &str) {
    // A decimal exponent (`1e3`, `2E-1`) is a suffix too.
    if let Some(i) = text.find(['e', 'E'])
        && text[i + 1..]
            .trim_start_matches(['+', '-'])
            .chars()
            .all(|c| c.is_ascii_digit())
        && !text[i + 1..].trim_start_matches(['+', '-']).is_empty()
    {
        return (&text[..i], &text[i..]);
    }
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    (&text[..split], &text[split..])
}

fn suffix_exponents(suffix: &str) -> Option<(i32, u32)> {
    Some(match suffix {
        "" => (0, 0),
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
        exp => {
            let digits = exp.strip_prefix(['e', 'E'])?;
            (digits.parse().ok()?, 0)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quantities() {
        let cases: &[(&str, i128, i128)] = &[
            // text, milli, units
            ("1", 1000, 1),
            ("100m", 100, 1),
            ("0.5", 500, 1),
            ("1.5", 1500, 2),
            ("2500m", 2500, 3),
            ("20Mi", 20 * 1024 * 1024 * 1000, 20 * 1024 * 1024),
            ("1Gi", 1024 * 1024 * 1024 * 1000, 1024 * 1024 * 1024),
            ("128974848", 128_974_848_000, 128_974_848),
            ("129e6", 129_000_000_000, 129_000_000),
            ("123M", 123_000_000_000, 123_000_000),
            ("1k", 1_000_000, 1000),
            ("0.1m", 1, 1),
            ("-1", -1000, -1),
            ("+2", 2000, 2),
            (".5", 500, 1),
        ];
        for (text, milli, units_expected) in cases {
            assert_eq!(parse_milli(text).unwrap(), *milli, "{text}");
            assert_eq!(units(text).unwrap(), *units_expected, "{text}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for text in ["", "m", "1x", "1..2", "abc", "1Qi", "--1"] {
            assert!(parse_milli(text).is_err(), "{text:?}");
        }
    }
}
