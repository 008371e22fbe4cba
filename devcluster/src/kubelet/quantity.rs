//! Resource quantities (`100m`, `1.5`, `20Mi`, `1e3`) as integers: CPU in millicores, everything
//! else in base units, rounded up as the API server rounds requests. Parsing is k8s-resources'
//! (one grammar for the whole project); this module only picks the unit the kubelet counts in.

use k8s_resources::{QuantityValue, parse_quantity};

/// The quantity cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {0:?}")]
pub struct InvalidQuantity(pub String);

/// CPU in millicores.
pub fn cpu_millis(text: &str) -> Result<i128, InvalidQuantity> {
    parse(text).map(|value| value.milli_ceil())
}

/// Memory (or any non-CPU resource) in base units.
pub fn units(text: &str) -> Result<i128, InvalidQuantity> {
    parse(text).map(|value| value.units_ceil())
}

fn parse(text: &str) -> Result<QuantityValue, InvalidQuantity> {
    parse_quantity(text.trim()).map_err(|_| InvalidQuantity(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_cpu_in_millicores_and_the_rest_in_units() {
        let cases: &[(&str, i128, i128)] = &[
            // text, millicores, units
            ("1", 1000, 1),
            ("100m", 100, 1),
            ("1.5", 1500, 2),
            ("20Mi", 20 * 1024 * 1024 * 1000, 20 * 1024 * 1024),
            ("1Gi", 1024 * 1024 * 1024 * 1000, 1024 * 1024 * 1024),
            ("123M", 123_000_000_000, 123_000_000),
            (" 2 ", 2000, 2),
        ];
        for (text, milli, units_expected) in cases {
            assert_eq!(cpu_millis(text).unwrap(), *milli, "{text}");
            assert_eq!(units(text).unwrap(), *units_expected, "{text}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for text in ["", "m", "1x", "1..2", "abc", "1Qi", "--1"] {
            assert_eq!(
                cpu_millis(text),
                Err(InvalidQuantity(text.to_owned())),
                "{text:?}"
            );
        }
    }
}
