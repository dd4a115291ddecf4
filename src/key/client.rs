//! A client as an operator names it: the key spec and the raw value (`header:x-api-key=sk_123`),
//! for the admin API and the layer's handle to turn into the key the extractor makes.

use std::net::IpAddr;

use http::header::HeaderName;

use super::spec::{SpecPart, spec_parts};
use crate::error::ConfigError;

/// At most this many parts (`route=..&ip=..`) in one name.
const MAX_PARTS: usize = 16;

/// A value longer than this (decoded) names no client: no header, parameter or claim the
/// layer reads is that long.
///
/// ```
/// use redlimit::key::{ClientName, MAX_VALUE};
/// assert!(ClientName::new("header:x-api-key", vec![b'k'; MAX_VALUE + 1]).is_err());
/// ```
pub const MAX_VALUE: usize = 16 * 1024;

/// A client named as an operator knows it: one `SPEC=VALUE` per part of the rule's key spec,
/// in the spec's order, joined with `&` (`route=/search&header:x-api-key=sk_live_123`). The
/// layer's [`Handle::client_key`](crate::layer::Handle::client_key) (and the admin API) turns
/// it into the stored [`Key`](super::Key) with the extractor's own encoding: hashed, grouped,
/// namespaced exactly as a request would be.
///
/// | spec | value | key |
/// |---|---|---|
/// | `ip` | an address (`203.0.113.7`, `2001:db8::1`) | `ip:203.0.113.7`, `ip:2001:db8::/64` (the extractor's grouping) |
/// | `header:NAME`, `metadata:NAME` | the header's value | `header:NAME:#<sha-256>` |
/// | `query:NAME` | the parameter's decoded value | `query:NAME:#<sha-256>` |
/// | `route`, `method` | the route as matched (`/users/{id}`, `/pkg.Svc/Method`) | `route:/users/{id}` |
/// | `global` | none (`global`, `global=`), or anything: ignored | `global` |
/// | `sub`, `jwt`, `jwt:sub` | the subject | `sub:user-42` |
/// | `jwt:CLAIM` | the claim's value (a number as its JSON text) | `claim:CLAIM:VALUE` |
///
/// In the text form ([`parse`](Self::parse), the admin API's path) values are
/// percent-decoded (`%26` is `&`, `%25` is `%`, `%FF` the byte 0xFF; `+` stays `+`), so any
/// bytes can be named; [`new`](Self::new) and [`and`](Self::and) take them as they are.
///
/// ```
/// use redlimit::key::ClientName;
/// let client = ClientName::parse("header:X-Api-Key=sk_live_123")?;
/// assert_eq!(client.to_string(), "header:x-api-key=…");
/// let both = ClientName::new("route", "/search")?.and("ip", "203.0.113.7")?;
/// assert_eq!(both, ClientName::parse("route=%2Fsearch&ip=203.0.113.7")?);
/// assert!(ClientName::parse("cookie:session=abc").is_err());
/// assert!(ClientName::parse("ip=").is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ClientName {
    parts: Vec<ClientPart>,
}

/// One part of a [`ClientName`]: what the extractor keys on, and the raw value. Extractors
/// read it in [`KeyExtractor::client_key`](super::KeyExtractor::client_key).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientPart {
    /// The spec, canonical (`header:x-api-key`, `route`, `sub`, `jwt:tenant`).
    spec: String,
    value: Vec<u8>,
}

/// What a [`ClientPart`] names, as [`ClientPart::spec`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientSpec<'a> {
    /// `ip`.
    Ip,
    /// `header:NAME` or `metadata:NAME`: the name, lower case.
    Header(&'a str),
    /// `query:NAME`.
    Query(&'a str),
    /// `route` or `method`.
    Route,
    /// `global`.
    Global,
    /// `sub`, `jwt` (`sub`) or `jwt:CLAIM`: a verified claim's name.
    Claim(&'a str),
}

impl ClientName {
    /// The text form: `SPEC=VALUE`, parts joined with `&`, values percent-decoded (see the
    /// [type](Self)). A [`ConfigError::InvalidKeySpec`] says what is wrong: an unknown spec,
    /// an empty or over-long value ([`MAX_VALUE`] bytes), a bad `%` escape, more than 16
    /// parts.
    ///
    /// ```
    /// use redlimit::key::ClientName;
    /// let name = ClientName::parse("jwt:tenant=acme&ip=203.0.113.7")?;
    /// assert_eq!(name.parts().len(), 2);
    /// assert!(ClientName::parse("ip=1.2.3.4&").is_err());
    /// assert!(ClientName::parse("header:x-k=%ZZ").is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        // Errors name the spec, never a value: values may be secrets.
        let bad = |spec: &str, reason: String| ConfigError::InvalidKeySpec {
            spec: clip(spec),
            reason,
        };
        let pieces: Vec<&str> = text.split('&').collect();
        if pieces.len() > MAX_PARTS {
            return Err(bad("", format!("more than {MAX_PARTS} parts")));
        }
        let mut parts = Vec::with_capacity(pieces.len());
        for piece in pieces {
            // `global` names everyone: it needs no value.
            let (spec, value) = match piece.split_once('=') {
                Some(pair) => pair,
                None if piece == "global" => (piece, ""),
                None => {
                    let reason = "expected SPEC=VALUE, parts joined with &".into();
                    return Err(bad(piece, reason));
                }
            };
            let decoded = decode(spec).map_err(|reason| bad(spec, reason))?;
            let decoded = String::from_utf8(decoded).map_err(|_| bad(spec, "not text".into()))?;
            let value = decode(value).map_err(|reason| bad(&decoded, reason))?;
            parts.push(ClientPart::new(&decoded, value)?);
        }
        Ok(ClientName { parts })
    }

    /// A name of one part: `spec` (as in the [table](Self)) and the raw `value`.
    ///
    /// ```
    /// use redlimit::key::ClientName;
    /// let name = ClientName::new("header:x-api-key", b"sk_\xff")?;
    /// assert!(ClientName::new("header:bad name", "x").is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(spec: &str, value: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        Ok(ClientName {
            parts: vec![ClientPart::new(spec, value.as_ref().to_vec())?],
        })
    }

    /// This name with one more part, for a key spec of several (`route+ip`).
    ///
    /// ```
    /// use redlimit::key::ClientName;
    /// let name = ClientName::new("route", "/login")?.and("ip", "203.0.113.7")?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn and(mut self, spec: &str, value: impl AsRef<[u8]>) -> Result<Self, ConfigError> {
        if self.parts.len() >= MAX_PARTS {
            return Err(ConfigError::InvalidKeySpec {
                spec: spec.to_owned(),
                reason: format!("more than {MAX_PARTS} parts"),
            });
        }
        self.parts
            .push(ClientPart::new(spec, value.as_ref().to_vec())?);
        Ok(self)
    }

    /// The parts, in order.
    ///
    /// ```
    /// use redlimit::key::{ClientName, ClientSpec};
    /// let name = ClientName::parse("ip=203.0.113.7")?;
    /// assert_eq!(name.parts()[0].spec(), ClientSpec::Ip);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn parts(&self) -> &[ClientPart] {
        &self.parts
    }

    /// The specs, joined with `+` as in a key spec (`route+header:x-api-key`).
    ///
    /// ```
    /// let name = redlimit::key::ClientName::parse("route=/x&metadata:X-K=1")?;
    /// assert_eq!(name.spec(), "route+header:x-k");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn spec(&self) -> String {
        let specs: Vec<&str> = self.parts.iter().map(|p| p.spec.as_str()).collect();
        specs.join("+")
    }
}

impl ClientPart {
    fn new(spec: &str, value: Vec<u8>) -> Result<Self, ConfigError> {
        let bad = |reason: String| ConfigError::InvalidKeySpec {
            spec: clip(spec),
            reason,
        };
        let canonical = canonical_spec(spec).map_err(&bad)?;
        if value.is_empty() && canonical != "global" {
            return Err(bad("an empty value names no client".into()));
        }
        if value.len() > MAX_VALUE {
            return Err(bad(format!("a value over {MAX_VALUE} bytes")));
        }
        let part = ClientPart {
            spec: canonical,
            value,
        };
        if part.spec() == ClientSpec::Ip && part.ip().is_none() {
            return Err(bad("not an IP address (203.0.113.7, 2001:db8::1)".into()));
        }
        Ok(part)
    }

    /// What this part names.
    ///
    /// ```
    /// use redlimit::key::{ClientName, ClientSpec};
    /// let name = ClientName::parse("jwt=user-42&query:k=v")?;
    /// assert_eq!(name.parts()[0].spec(), ClientSpec::Claim("sub"));
    /// assert_eq!(name.parts()[1].spec(), ClientSpec::Query("k"));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn spec(&self) -> ClientSpec<'_> {
        let spec = self.spec.as_str();
        match spec {
            "ip" => ClientSpec::Ip,
            "route" => ClientSpec::Route,
            "global" => ClientSpec::Global,
            "sub" => ClientSpec::Claim("sub"),
            _ => {
                if let Some(name) = spec.strip_prefix("header:") {
                    ClientSpec::Header(name)
                } else if let Some(name) = spec.strip_prefix("query:") {
                    ClientSpec::Query(name)
                } else {
                    ClientSpec::Claim(spec.strip_prefix("jwt:").unwrap_or(spec))
                }
            }
        }
    }

    /// The raw value, decoded.
    ///
    /// ```
    /// let name = redlimit::key::ClientName::parse("header:x-k=a%26b")?;
    /// assert_eq!(name.parts()[0].value(), b"a&b");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The value as an IP address, if it is one (`203.0.113.7`, `2001:db8::1`, `[::1]`).
    ///
    /// ```
    /// let name = redlimit::key::ClientName::parse("ip=203.0.113.7")?;
    /// assert_eq!(name.parts()[0].ip(), "203.0.113.7".parse().ok());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn ip(&self) -> Option<IpAddr> {
        let text = std::str::from_utf8(&self.value).ok()?.trim();
        let text = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        text.parse().ok()
    }

    /// Whether this is the one part of `parts` and names `spec`.
    pub(crate) fn only<'a>(parts: &'a [ClientPart], spec: ClientSpec<'_>) -> Option<&'a Self> {
        match parts {
            [part] if part.spec() == spec => Some(part),
            _ => None,
        }
    }
}

/// `spec` in the form [`ClientPart::spec`] reads: the key-spec grammar's words
/// ([`spec_parts`]), plus `sub`, `jwt` and `jwt:CLAIM` for verified claims.
fn canonical_spec(spec: &str) -> Result<String, String> {
    if let Some(claim) = spec.strip_prefix("jwt:") {
        let valid = !claim.is_empty()
            && claim.len() <= 256
            && claim.bytes().all(|b| b.is_ascii_graphic() && b != b'+');
        return if !valid {
            Err("jwt: needs a claim name (jwt:sub, jwt:tenant)".into())
        } else if claim == "sub" {
            Ok("sub".into())
        } else {
            Ok(format!("jwt:{claim}"))
        };
    }
    let unknown = || {
        format!(
            "unknown spec `{}`: expected ip, header:NAME (metadata:NAME), query:NAME, route \
             (method), global, sub, jwt or jwt:CLAIM, then =VALUE",
            clip(spec)
        )
    };
    let parts = spec_parts(spec).map_err(|_| unknown())?;
    let [part] = parts.as_slice() else {
        return Err("one spec per part: join parts with &, as in route=/x&ip=203.0.113.7".into());
    };
    Ok(match *part {
        SpecPart::Ip => "ip".into(),
        SpecPart::Route => "route".into(),
        SpecPart::Global => "global".into(),
        SpecPart::Header(name) => {
            let name = HeaderName::try_from(name).map_err(|_| unknown())?;
            format!("header:{name}")
        }
        SpecPart::Query(name) => format!("query:{name}"),
        SpecPart::Other("sub" | "jwt") => "sub".into(),
        _ => return Err(unknown()),
    })
}

/// Percent-decodes `text` to bytes; a `%` not followed by two hex digits is an error.
fn decode(text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len().min(MAX_VALUE + 1));
    let mut i = 0;
    while i < bytes.len() {
        if out.len() > MAX_VALUE {
            return Err(format!("a value over {MAX_VALUE} bytes"));
        }
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
            let byte = hex.ok_or("a % not followed by two hex digits (write %25 for %)")?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// A text echoed in an error, cut short.
fn clip(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The specs, never the values: a value may be a secret (an API key).
impl std::fmt::Display for ClientName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str("&")?;
            }
            write!(f, "{part:?}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for ClientName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientName({self})")
    }
}

/// The spec, and `…` for the value (a secret, perhaps).
impl std::fmt::Debug for ClientPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}=…", self.spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_errors_not_panics() {
        let huge = format!("header:x-k={}", "a".repeat(MAX_VALUE + 1));
        let huge_encoded = format!("header:x-k={}", "%41".repeat(MAX_VALUE + 1));
        let many = vec!["ip=1.2.3.4"; MAX_PARTS + 1].join("&");
        for text in [
            "",
            "=",
            "ip",
            "ip=",
            "=1.2.3.4",
            "IP=1.2.3.4",
            "cookie=1",
            "header:=x",
            "header:a b=x",
            "query:=x",
            "jwt:=x",
            "route+ip=x",
            "ip=1&",
            "ip=%",
            "ip=%4",
            "ip=%G1",
            "header:x-k=%+1",
            "%FF=1",
            "ip=%E2%82",
            "ip=example.com",
            "ip=10.0.0.0/8",
            &huge,
            &huge_encoded,
            &many,
        ] {
            let err = ClientName::parse(text).unwrap_err();
            assert!(
                matches!(err, ConfigError::InvalidKeySpec { .. }),
                "{text:.40}"
            );
            assert!(err.to_string().len() < 300, "{err}");
        }
        // Bytes that are no text are still a value.
        let name = ClientName::parse("header:x-k=%FF%00%0A").unwrap();
        assert_eq!(name.parts()[0].value(), b"\xff\x00\n");
    }

    #[test]
    fn display_and_debug_never_show_values() {
        let name = ClientName::parse("header:x-api-key=sk_live_123&jwt=alice").unwrap();
        for text in [name.to_string(), format!("{name:?}")] {
            assert!(
                !text.contains("sk_live") && !text.contains("alice"),
                "{text}"
            );
        }
        for bad in ["header:x-k=sk_live_1%", "header:x-k=", "cookie=sk_live_1"] {
            let err = ClientName::parse(bad).unwrap_err().to_string();
            assert!(!err.contains("sk_live"), "{err}");
        }
        assert_eq!(name.to_string(), "header:x-api-key=…&sub=…");
    }
}
