//! What an admin path names: a policy, and a key given by its stored text
//! (`ip%3A203.0.113.7`) or as the operator knows the client (`header:x-api-key=sk_live_123`).

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, Uri};
use serde::Serialize;

use super::error::AdminError;
use crate::key::{ClientName, Key};
use crate::layer::Handle;
use crate::policy::Policy;

/// The policy and key of `/keys/{policy}/{key}` or `/overrides/{policy}/{key}`.
pub(super) struct Target {
    pub(super) policy: Policy,
    pub(super) key: Key,
    /// Whether the key was named as the operator knows the client (`SPEC=VALUE`), not by its
    /// stored text: the answer then tells the stored text.
    named: bool,
}

/// An answer naming the stored key, for requests that named the client by `SPEC=VALUE`.
#[derive(Serialize)]
struct Named {
    policy: String,
    key: String,
}

impl Target {
    /// The target of the path of `uri`, whose last two segments are `{policy}` and `{key}`
    /// (the route matched them). Read from the raw path, not axum's decoded captures: in
    /// `SPEC=VALUE&SPEC=VALUE` an encoded `%26` is part of a value, a raw `&` joins parts,
    /// and a value may hold bytes that are no UTF-8.
    pub(super) fn of(handle: &Handle, uri: &Uri) -> Result<Target, AdminError> {
        let mut segments = uri.path().rsplit('/');
        let (Some(key), Some(policy)) = (segments.next(), segments.next()) else {
            return Err(AdminError::NotFound);
        };
        let not_utf8 = |what: &str| {
            let why = format!("bad path: the {what} is not UTF-8 once percent-decoded");
            AdminError::BadRequest(StatusCode::BAD_REQUEST, why)
        };
        let policy = decode_utf8(policy).ok_or_else(|| not_utf8("policy"))?;
        let policy = handle
            .policy_named(&policy)
            .ok_or(AdminError::NoSuchPolicy(policy))?;
        let text = decode_utf8(key);
        if let Some(stored) = text.as_deref().and_then(Key::from_encoded) {
            return Ok(Target {
                policy,
                key: stored,
                named: false,
            });
        }
        // A stored key never holds `=` before its first `;`: a name does.
        let named = key.split(';').next().is_some_and(|head| head.contains('='));
        if !named {
            return Err(match text {
                Some(_) => AdminError::BadKey,
                None => not_utf8("key"),
            });
        }
        let client = ClientName::parse(key).map_err(|e| AdminError::BadClient(e.to_string()))?;
        let key = handle
            .client_key(&policy, &client)
            .map_err(|e| AdminError::BadClient(e.to_string()))?;
        Ok(Target {
            policy,
            key,
            named: true,
        })
    }

    /// A change done: `204` for a key given by its stored text (as before names existed),
    /// `200` with `{"policy", "key"}` for a named client, so the operator learns its key.
    pub(super) fn done(&self) -> Response {
        if !self.named {
            return StatusCode::NO_CONTENT.into_response();
        }
        Json(Named {
            policy: self.policy.name().to_owned(),
            key: self.key.to_string(),
        })
        .into_response()
    }
}

/// A path segment percent-decoded as axum decodes its captures (a `%` that starts no escape
/// stays as it is), if the result is UTF-8.
pub(crate) fn decode_utf8(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .filter(|hex| hex.iter().all(u8::is_ascii_hexdigit))
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match escape {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_decode_or_say_no() {
        assert_eq!(decode_utf8("ip%3A1.2.3.4").as_deref(), Some("ip:1.2.3.4"));
        assert_eq!(decode_utf8("a+b").as_deref(), Some("a+b"));
        for kept in ["%", "%4", "%G0", "%+1"] {
            assert_eq!(decode_utf8(kept).as_deref(), Some(kept));
        }
        for bad in ["%FF", "%E2%82", "a%FFb"] {
            assert_eq!(decode_utf8(bad), None, "{bad}");
        }
    }
}
