//! Durations as people write them in flags, limits and config files: `250us`, `100ms`, `3s`,
//! `5m`, `1h`, `1d`. One grammar for the whole crate and its tools: [`parse`] reads it,
//! [`format()`] writes it back in the largest unit that divides the duration.
//!
//! ```
//! use std::time::Duration;
//! use redlimit::duration;
//! assert_eq!(duration::parse("15m")?, Duration::from_secs(900));
//! assert_eq!(duration::format(Duration::from_secs(900)), "15m");
//! assert!(duration::parse("15 minutes").is_err());
//! # Ok::<(), redlimit::ConfigError>(())
//! ```

use std::time::Duration;

use crate::error::ConfigError;

/// Parses `<integer><unit>` with unit `us`, `ms`, `s`, `m`, `h` or `d`; anything else
/// (spaces, signs, fractions, an overflow) is [`ConfigError::InvalidDuration`].
///
/// ```
/// use std::time::Duration;
/// assert_eq!(redlimit::duration::parse("100ms")?, Duration::from_millis(100));
/// assert!(redlimit::duration::parse("1.5s").is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
pub fn parse(text: &str) -> Result<Duration, ConfigError> {
    let bad = || ConfigError::InvalidDuration(text.to_owned());
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .filter(|&i| i > 0)
        .ok_or_else(bad)?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let unit_us: u64 = match unit {
        "us" => 1,
        "ms" => 1_000,
        "s" => 1_000_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        _ => return Err(bad()),
    };
    n.checked_mul(unit_us)
        .map(Duration::from_micros)
        .ok_or_else(bad)
}

/// Writes `d` in the largest unit that divides it (`60s` is written `1m`), in whole
/// microseconds at the finest: [`parse`] reads it back (below a microsecond, the nanoseconds
/// are dropped).
///
/// ```
/// use std::time::Duration;
/// use redlimit::duration::{format, parse};
/// assert_eq!(format(Duration::from_millis(1500)), "1500ms");
/// assert_eq!(format(Duration::from_secs(7200)), "2h");
/// assert_eq!(parse(&format(Duration::from_micros(250)))?, Duration::from_micros(250));
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
pub fn format(d: Duration) -> String {
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
