//! Decimal byte sizes as storage people write them: `256MB`, `100PB`, `1EB`.
//! Hand-written because the common crates either lack exabytes or default to
//! binary units, and capacities in this field are decimal.

use thiserror::Error;

const UNITS: [(&str, u64); 7] = [
    ("EB", 1_000_000_000_000_000_000),
    ("PB", 1_000_000_000_000_000),
    ("TB", 1_000_000_000_000),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
    ("B", 1),
];

#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid size `{input}`: {reason} (examples: 4096, 256MB, 1.5TB, 100PB, 1EB)")]
pub struct ByteSizeError {
    input: String,
    reason: &'static str,
}

/// Parses a decimal size such as `100PB`, `1.5 TB` or `4096` (bytes).
pub fn parse_bytes(input: &str) -> Result<u64, ByteSizeError> {
    let err = |reason| ByteSizeError { input: input.to_string(), reason };
    let s = input.trim();
    let upper = s.to_ascii_uppercase();
    let (number, scale) = UNITS
        .iter()
        .find_map(|(unit, scale)| upper.strip_suffix(unit).map(|n| (n.trim(), *scale)))
        .unwrap_or((upper.as_str(), 1));
    if number.is_empty() {
        return Err(err("missing number"));
    }
    let value: f64 = number.parse().map_err(|_| err("not a number"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(err("must be a non-negative number"));
    }
    let bytes = value * scale as f64;
    if bytes > u64::MAX as f64 {
        return Err(err("too large"));
    }
    Ok(bytes.round() as u64)
}

/// Formats bytes with the largest decimal unit that keeps the number ≥ 1.
pub fn format_bytes(bytes: u64) -> String {
    let (unit, scale) = UNITS.iter().find(|(_, scale)| bytes >= *scale).copied().unwrap_or(("B", 1));
    if scale == 1 { format!("{bytes} B") } else { format!("{:.2} {unit}", bytes as f64 / scale as f64) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimal_units() {
        assert_eq!(parse_bytes("1EB"), Ok(1_000_000_000_000_000_000));
        assert_eq!(parse_bytes("100PB"), Ok(100_000_000_000_000_000));
        assert_eq!(parse_bytes("256mb"), Ok(256_000_000));
        assert_eq!(parse_bytes("1.5 TB"), Ok(1_500_000_000_000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
    }

    #[test]
    fn rejects_garbage_with_a_helpful_message() {
        let e = parse_bytes("lots").unwrap_err().to_string();
        assert!(e.contains("invalid size `lots`") && e.contains("100PB"), "{e}");
        assert!(parse_bytes("-3GB").is_err());
        assert!(parse_bytes("GB").is_err());
        assert!(parse_bytes("100000EB").is_err());
    }

    #[test]
    fn formats_with_the_largest_unit() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(256_000_000), "256.00 MB");
        assert_eq!(format_bytes(1_000_000_000_000_000_000), "1.00 EB");
    }
}
