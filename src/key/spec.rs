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
    let mut parts = spec.split('+').map(|part| part_of(part, ip).map_err(&bad));
    let first = parts.next().unwrap_or_else(|| Err(bad("empty".into())))?;
    parts.try_fold(first, |key, next| {
        Ok(Arc::new(Both::new(key, next?)) as Arc<dyn KeyExtractor>)
    })
}

fn part_of(part: &str, ip: &Arc<dyn KeyExtractor>) -> Result<Arc<dyn KeyExtractor>, String> {
    Ok(match part {
        "ip" => Arc::clone(ip),
        // gRPC's words for the same things: the method is the route, metadata are headers.
        "route" | "method" => Arc::new(Route),
        "global" => Arc::new(Global),
        _ => {
            if let Some(name) = part
                .strip_prefix("header:")
                .or_else(|| part.strip_prefix("metadata:"))
            {
                Arc::new(Header::new(name).map_err(|e| e.to_string())?)
            } else if let Some(name) = part.strip_prefix("query:") {
                if name.is_empty() {
                    return Err("query: needs a parameter name".into());
                }
                Arc::new(Query::new(name))
            } else {
                return Err(format!(
                    "unknown part `{part}`: expected ip, header:NAME (metadata:NAME), \
                     query:NAME, route (method) or global, or several joined with +"
                ));
            }
        }
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
