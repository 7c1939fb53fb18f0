//! Durations as operators write them on command lines: `90s`, `30m`, `2h`,
//! `1d` or plain seconds, and shown back as `1h 02m`. Hand-written because
//! the kept parsers (humantime) reject plain seconds, which the command
//! line has always accepted.

use std::time::Duration;

/// Parses `90s`, `30m`, `2h`, `1d` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("invalid duration `{s}`; expected e.g. 90s, 30m, 2h"))?;
    let unit_secs = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(format!("invalid duration unit in `{s}`; use s, m, h or d")),
    };
    let secs = n.checked_mul(unit_secs).ok_or_else(|| format!("duration `{s}` is too long"))?;
    Ok(Duration::from_secs(secs))
}

/// `1h 02m`, `3m 05s`, `42s`: the two largest units, whole seconds.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_unit_and_plain_seconds() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86400)));
        assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("3w").is_err());
    }

    // Regression: the multiplication overflowed (a panic in debug builds).
    #[test]
    fn a_duration_too_long_for_u64_is_an_error() {
        assert!(parse_duration("18446744073709551615d").unwrap_err().contains("too long"));
    }

    #[test]
    fn formats_the_two_largest_units() {
        assert_eq!(format_duration(Duration::from_secs(42)), "42s");
        assert_eq!(format_duration(Duration::from_secs(185)), "3m 05s");
        assert_eq!(format_duration(Duration::from_secs(3720)), "1h 02m");
    }
}
