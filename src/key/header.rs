//! A request header's value, such as an API key; hashed before it reaches Redis.

use http::header::HeaderName;
use http::request::Parts;

use super::{Key, KeyExtractor};

/// Keys on a header's value (e.g. `x-api-key`). The value is hashed: secrets never appear in
/// Redis keys, and any bytes are safe. A request without the header (or with an empty value)
/// has no key.
///
/// ```
/// use redlimit::{Header, KeyExtractor};
///
/// let key = Header::new("x-api-key");
/// let (parts, _) = http::Request::get("/").header("x-api-key", "sk_123").body(()).unwrap().into_parts();
/// let k = key.extract(&parts).unwrap();
/// assert!(k.as_str().starts_with("header:x-api-key:#"));
/// ```
#[derive(Debug, Clone)]
pub struct Header {
    name: HeaderName,
}

impl Header {
    /// Keys on the header `name` (any case: header names are case-insensitive).
    ///
    /// # Panics
    ///
    /// If `name` is not a valid header name (e.g. it has a space); use [`Header::try_new`] for
    /// names from configuration.
    ///
    /// ```
    /// let h = redlimit::Header::new("X-Api-Key");
    /// ```
    pub fn new(name: &str) -> Self {
        match Header::try_new(name) {
            Some(header) => header,
            None => panic!("invalid header name {name:?}"),
        }
    }

    /// Keys on the header `name`, or `None` if it is not a valid header name.
    ///
    /// ```
    /// assert!(redlimit::Header::try_new("x-api-key").is_some());
    /// assert!(redlimit::Header::try_new("bad header").is_none());
    /// ```
    pub fn try_new(name: &str) -> Option<Self> {
        HeaderName::try_from(name).ok().map(|name| Header { name })
    }
}

impl KeyExtractor for Header {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        let value = parts.headers.get(&self.name)?;
        if value.is_empty() {
            return None;
        }
        Some(Key::hashed(value.as_bytes()).namespaced(&format!("header:{}", self.name)))
    }
}
