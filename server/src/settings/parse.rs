//! The Go service's value syntaxes: `strconv.ParseBool`, `time.ParseDuration`, `host:port`
//! listen addresses, logrus's level names, envconfig's `k1:v1,k2:v2` maps.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Go's `strconv.ParseBool`.
pub(super) fn go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean (true or false)")),
    }
}

/// Go's `time.ParseDuration` for non-negative durations: a sequence of numbers, each with a
/// unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), such as `1h30m` or `1.5s`; `0` alone too.
pub(crate) fn go_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration (such as 10s, 500ms or 1h30m)");
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += number * seconds;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// Go's `host:port` listen address, where an empty host means every address.
pub(super) fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_owned(),
    };
    full.parse()
        .map_err(|_| format!("`{text}` is not an address such as :9090 or 127.0.0.1:9090"))
}

pub(super) fn ratio(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("`{text}` is not a ratio between 0 and 1")),
    }
}

/// logrus's level names, case-insensitive.
pub(super) fn log_level(text: &str) -> Result<tracing::Level, String> {
    match text.to_ascii_lowercase().as_str() {
        "trace" => Ok(tracing::Level::TRACE),
        "debug" => Ok(tracing::Level::DEBUG),
        "info" => Ok(tracing::Level::INFO),
        "warn" | "warning" => Ok(tracing::Level::WARN),
        "error" | "fatal" | "panic" => Ok(tracing::Level::ERROR),
        _ => Err(format!(
            "`{text}` is not a log level (debug, info, warn, error)"
        )),
    }
}

/// envconfig's map syntax, `k1:v1,k2:v2`: each item exactly one key and one value (either may
/// be empty); blank text is no pair.
pub(crate) fn key_values(text: &str) -> Result<Vec<(&str, &str)>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|item| {
            let mut parts = item.split(':');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(key), Some(value), None) => Ok((key, value)),
                _ => Err(format!("`{item}` is not a key:value pair")),
            }
        })
        .collect()
}

/// envconfig's map syntax for `EXTRA_TAGS`, `k1:v1,k2:v2`, as gostats keeps it: pairs with an
/// empty key or value dropped, `.`, `:` and `|` in a value made `_`, sorted by key.
pub(super) fn extra_tags(text: &str) -> Result<ExtraTags, String> {
    let pairs = key_values(text).map_err(|e| format!("{e} (EXTRA_TAGS=k1:v1,k2:v2)"))?;
    let tags: BTreeMap<_, _> = pairs
        .into_iter()
        .filter(|(key, value)| !key.is_empty() && !value.is_empty())
        .map(|(key, value)| (key.to_owned(), value.replace(['.', '|'], "_")))
        .collect();
    Ok(ExtraTags(tags.into_iter().collect()))
}

/// `EXTRA_TAGS`: the tags of every statsd name, sorted by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ExtraTags(pub(crate) Vec<(String, String)>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        assert_eq!(go_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(go_duration("15ms"), Ok(Duration::from_millis(15)));
        assert_eq!(go_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(go_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "10", "s", "10x", "-1s", "1..5s"] {
            assert!(go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn go_booleans_and_addresses() {
        assert_eq!(go_bool("True"), Ok(true));
        assert_eq!(go_bool("0"), Ok(false));
        assert!(go_bool("yes").is_err());
        assert_eq!(listen_addr(":9090"), Ok("0.0.0.0:9090".parse().unwrap()));
        assert_eq!(
            listen_addr("127.0.0.1:1"),
            Ok("127.0.0.1:1".parse().unwrap())
        );
        assert!(listen_addr("nowhere").is_err());
    }

    #[test]
    fn extra_tags_parse_as_envconfig_and_gostats_keep_them() {
        let tags = |t: &[(&str, &str)]| {
            ExtraTags(
                t.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            )
        };
        assert_eq!(extra_tags(""), Ok(tags(&[])));
        assert_eq!(
            extra_tags("version:1.2|x,app:rl,empty:"),
            Ok(tags(&[("app", "rl"), ("version", "1_2_x")]))
        );
        assert!(extra_tags("a:b:c").is_err());
        assert!(extra_tags("novalue").is_err());
    }
}
