//! The mapping file's values as yaml.v2 decodes them into statsd_exporter's fields: strings,
//! booleans (YAML 1.1's `yes`, `on`...), numbers, Go durations, lists of buckets and of
//! quantiles; each error names its line.

use std::time::Duration;

use super::yaml::{Kind, Node};

pub(super) type Entries = [(String, usize, Node)];

pub(super) fn entries<'a>(node: &'a Node, what: &str) -> Result<&'a Entries, String> {
    match &node.kind {
        Kind::Map(entries) => Ok(entries),
        _ if node.is_null() => Ok(&[]),
        _ => Err(format!("line {}: {what} must be a mapping", node.line)),
    }
}

pub(super) fn string(node: &Node, line: usize) -> Result<String, String> {
    match &node.kind {
        Kind::Scalar { .. } if node.is_null() => Ok(String::new()),
        Kind::Scalar { text, .. } => Ok(text.clone()),
        _ => Err(format!("line {line}: expected a string")),
    }
}

pub(super) fn observer_type(node: &Node, line: usize) -> Result<bool, String> {
    match string(node, line)?.as_str() {
        "histogram" => Ok(true),
        "summary" | "" => Ok(false),
        other => Err(format!("line {line}: invalid observer type `{other}`")),
    }
}

/// `true` for glob.
pub(super) fn match_type(node: &Node, line: usize) -> Result<bool, String> {
    match string(node, line)?.as_str() {
        "glob" | "" => Ok(true),
        "regex" => Ok(false),
        other => Err(format!("line {line}: invalid match type `{other}`")),
    }
}

pub(super) fn boolean(node: &Node, line: usize) -> Result<bool, String> {
    match &node.kind {
        Kind::Scalar { text, plain: true } => match text.as_str() {
            "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => {
                Ok(true)
            }
            "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False"
            | "FALSE" => Ok(false),
            _ => Err(format!("line {line}: expected true or false")),
        },
        _ => Err(format!("line {line}: expected true or false")),
    }
}

pub(super) fn float(node: &Node, line: usize) -> Result<f64, String> {
    let bad = || format!("line {line}: expected a number");
    let Kind::Scalar { text, plain: true } = &node.kind else {
        return Err(bad());
    };
    match text.as_str() {
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Ok(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Ok(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => Ok(f64::NAN),
        t if t.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c)) => {
            t.replace('_', "").parse().map_err(|_| bad())
        }
        _ => Err(bad()),
    }
}

pub(super) fn whole(node: &Node, line: usize) -> Result<u32, String> {
    match float(node, line)? {
        n if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) => Ok(n as u32),
        _ => Err(format!("line {line}: expected a whole number")),
    }
}

pub(super) fn floats(node: &Node, line: usize) -> Result<Vec<f64>, String> {
    match &node.kind {
        Kind::List(items) => items.iter().map(|n| float(n, n.line)).collect(),
        _ if node.is_null() => Ok(Vec::new()),
        _ => Err(format!("line {line}: expected a list of numbers")),
    }
}

/// `- quantile: 0.5` / `error: 0.05` entries: the quantiles (the error is the estimator's, and
/// this exporter's estimator is not client_golang's).
pub(super) fn quantiles(node: &Node, line: usize) -> Result<Vec<f64>, String> {
    let items = match &node.kind {
        Kind::List(items) => items.as_slice(),
        _ if node.is_null() => &[],
        _ => return Err(format!("line {line}: expected a list of quantiles")),
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let mut quantile = 0.0;
        for (key, line, value) in entries(item, "a quantile")? {
            match key.as_str() {
                "quantile" => quantile = float(value, *line)?,
                "error" => {
                    float(value, *line)?;
                }
                other => return Err(unknown(*line, other)),
            }
        }
        if !(0.0..=1.0).contains(&quantile) {
            return Err(format!("line {}: a quantile is between 0 and 1", item.line));
        }
        out.push(quantile);
    }
    Ok(out)
}

/// A duration as yaml.v2 decodes Go's `time.Duration`: a number of nanoseconds, or Go's
/// duration syntax.
pub(super) fn duration(node: &Node, line: usize) -> Result<Duration, String> {
    match &node.kind {
        Kind::Scalar { text, plain: true } if text.bytes().all(|b| b.is_ascii_digit()) => text
            .parse()
            .map(Duration::from_nanos)
            .map_err(|_| format!("line {line}: expected a duration")),
        Kind::Scalar { text, .. } => {
            crate::settings::go_duration(text).map_err(|e| format!("line {line}: {e}"))
        }
        _ => Err(format!("line {line}: expected a duration")),
    }
}

/// A key the mapping language does not have.
pub(super) fn unknown(line: usize, key: &str) -> String {
    format!("line {line}: unknown key `{key}` (statsd_exporter's mapping has no such key)")
}
