//! A request header's value, such as an API key; hashed before it reaches Redis.

use http::header::HeaderName;
use http::request::Parts;

use super::{ClientPart, ClientSpec, Key, KeyExtractor};
use crate::error::ConfigError;

/// Keys on a header's value (e.g. `x-api-key`). The value is hashed: secrets never appear in
/// Redis keys, and any bytes are safe. A request without the header (or with an empty value)
/// has no key.
///
/// ```
/// use redlimit::key::Header;
/// use redlimit::KeyExtractor;
///
/// let key = Header::new("x-api-key")?;
/// let (parts, _) = http::Request::get("/").header("x-api-key", "sk_123").body(()).unwrap().into_parts();
/// let k = key.extract(&parts).unwrap();
/// assert!(k.as_str().starts_with("header:x-api-key:#"));
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Header {
    name: HeaderName,
}

impl Header {
    /// Keys on the header `name` (any case: header names are case-insensitive), or
    /// [`ConfigError::InvalidHeaderName`] if `name` is not a valid header name.
    ///
    /// ```
    /// use redlimit::key::Header;
    /// assert!(Header::new("X-Api-Key").is_ok());
    /// assert!(Header::new("bad header").is_err());
    /// ```
    pub fn new(name: &str) -> Result<Self, ConfigError> {
        HeaderName::try_from(name)
            .map(|name| Header { name })
            .map_err(|_| ConfigError::InvalidHeaderName(name.to_owned()))
    }
}

impl Header {
    /// The key of a header value: what a request and an operator's name share.
    fn key_of(&self, value: &[u8]) -> Key {
        Key::hashed(value).namespaced(&format!("header:{}", self.name))
    }
}

impl KeyExtractor for Header {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        let value = parts.headers.get(&self.name)?;
        if value.is_empty() {
            return None;
        }
        Some(self.key_of(value.as_bytes()))
    }

    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        ClientPart::only(client, ClientSpec::Header(self.name.as_str()))
            .map(|part| self.key_of(part.value()))
    }
}
