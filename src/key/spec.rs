//! Key specs: a key extractor written as text, as a command line or a config file gives it.

use std::sync::Arc;

use super::{Both, Global, Header, KeyExtractor, PeerIp, Query, Route};
use crate::error::ConfigError;

/// The key extractor that `spec` names: `ip` ([`PeerIp`]), `header:NAME` or `metadata:NAME`
/// ([`Header`]), `query:NAME` ([`Query`]), `route` or `method` ([`Route`]), `global`
/// ([`Global`]), or several joined with `+` ([`Both`], e.g. `route+ip`).
///
/// ```
/// use redlimit::key::parse_spec;
/// let key = parse_spec("route+header:x-api-key")?;
/// assert!(parse_spec("cookie:session").is_err());
/// assert!(parse_spec("ip+").is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
pub fn parse_spec(spec: &str) -> Result<Arc<dyn KeyExtractor>, ConfigError> {
    parse_spec_with(spec, &(Arc::new(PeerIp) as Arc<dyn KeyExtractor>))
}

/// One part of a key spec, as [`spec_parts`] reads it. A tool that keys on more than the
/// library's extractors (a verified token, say) reads its own words from
/// [`SpecPart::Other`] and builds the extractors itself; the grammar stays the library's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecPart<'a> {
    /// `ip`: the client's address.
    Ip,
    /// `header:NAME` or `metadata:NAME` (a valid header name).
    Header(&'a str),
    /// `query:NAME` (a non-empty parameter name).
    Query(&'a str),
    /// `route` or `method`.
    Route,
    /// `global`.
    Global,
    /// Any other word without `:` (`jwt`), for the caller to accept or refuse.
    Other(&'a str),
}

/// The parts of `spec` (`route+header:x-api-key`), in order: the grammar of every key spec,
/// checked (header names valid, parameter names present, no empty part).
///
/// ```
/// use redlimit::key::{spec_parts, SpecPart};
/// assert_eq!(
///     spec_parts("jwt+route")?,
///     [SpecPart::Other("jwt"), SpecPart::Route]
/// );
/// assert!(spec_parts("header:bad name").is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
pub fn spec_parts(spec: &str) -> Result<Vec<SpecPart<'_>>, ConfigError> {
    let bad = |reason: String| ConfigError::InvalidKeySpec {
        spec: spec.to_owned(),
        reason,
    };
    spec.split('+')
        .map(|part| part_of(part).map_err(&bad))
        .collect()
}

fn part_of(part: &str) -> Result<SpecPart<'_>, String> {
    Ok(match part {
        "ip" => SpecPart::Ip,
        // gRPC's words for the same things: the method is the route, metadata are headers.
        "route" | "method" => SpecPart::Route,
        "global" => SpecPart::Global,
        _ => {
            if let Some(name) = part
                .strip_prefix("header:")
                .or_else(|| part.strip_prefix("metadata:"))
            {
                Header::new(name).map_err(|e| e.to_string())?;
                SpecPart::Header(name)
            } else if let Some(name) = part.strip_prefix("query:") {
                if name.is_empty() {
                    return Err("query: needs a parameter name".into());
                }
                SpecPart::Query(name)
            } else if !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            {
                SpecPart::Other(part)
            } else {
                return Err(unknown(part));
            }
        }
    })
}

fn unknown(part: &str) -> String {
    format!(
        "unknown part `{part}`: expected ip, header:NAME (metadata:NAME), query:NAME, route \
         (method) or global, or several joined with +"
    )
}

/// [`parse_spec`], with `ip` meaning the extractor `ip` (a [`ClientIp`](super::ClientIp)
/// trusting a config file's proxies).
pub(crate) fn parse_spec_with(
    spec: &str,
    ip: &Arc<dyn KeyExtractor>,
) -> Result<Arc<dyn KeyExtractor>, ConfigError> {
    let bad = |reason: String| ConfigError::InvalidKeySpec {
        spec: spec.to_owned(),
        reason,
    };
    let mut parts = spec_parts(spec)?.into_iter().map(|part| {
        Ok(match part {
            SpecPart::Ip => Arc::clone(ip),
            SpecPart::Header(name) => Arc::new(Header::new(name).map_err(|e| bad(e.to_string()))?)
                as Arc<dyn KeyExtractor>,
            SpecPart::Query(name) => Arc::new(Query::new(name)),
            SpecPart::Route => Arc::new(Route),
            SpecPart::Global => Arc::new(Global),
            SpecPart::Other(word) => return Err(bad(unknown(word))),
        })
    });
    let first = parts.next().unwrap_or_else(|| Err(bad("empty".into())))?;
    parts.try_fold(first, |key, next| {
        Ok(Arc::new(Both::new(key, next?)) as Arc<dyn KeyExtractor>)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_and_combination() {
        for spec in [
            "ip",
            "route",
            "method",
            "global",
            "header:x-k",
            "metadata:x-k",
        ] {
            assert!(parse_spec(spec).is_ok(), "{spec}");
        }
        assert!(parse_spec("query:k+route+ip").is_ok());
    }

    #[test]
    fn bad_specs_are_errors() {
        for spec in [
            "",
            "+",
            "ip+",
            "query:",
            "header:",
            "header:a b",
            "jwt",
            "IP",
        ] {
            let err = parse_spec(spec).err().unwrap();
            assert!(matches!(err, ConfigError::InvalidKeySpec { .. }), "{spec}");
        }
    }
}
