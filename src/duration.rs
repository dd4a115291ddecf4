//! Durations as people write them in flags and limits: `100ms`, `3s`, `5m`, `1h`, `1d`.

use std::time::Duration;

use crate::error::ConfigError;

/// Parses `<integer><unit>` with unit `ms`, `s`, `m`, `h` or `d`.
pub(crate) fn parse(text: &str) -> Result<Duration, ConfigError> {
    let bad = || ConfigError::InvalidDuration(text.to_owned());
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .filter(|&i| i > 0)
        .ok_or_else(bad)?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(unit_ms)
        .map(Duration::from_millis)
        .ok_or_else(bad)
}

/// Formats a duration in the largest unit that divides it (`60s` is written `1m`).
pub(crate) fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 || !d.subsec_nanos().is_multiple_of(1_000_000) {
        return format!("{}us", d.as_micros());
    }
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse("3s").unwrap(), Duration::from_secs(3));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse("2d").unwrap(), Duration::from_secs(172_800));
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "s",
            "10",
            "10x",
            "-1s",
            "1.5s",
            "99999999999999999999s",
            "1 s",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse("18446744073709551615d").is_err());
    }

    #[test]
    fn formats_in_largest_unit() {
        assert_eq!(format(Duration::from_secs(60)), "1m");
        assert_eq!(format(Duration::from_secs(3)), "3s");
        assert_eq!(format(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format(Duration::from_micros(10)), "10us");
    }
}
