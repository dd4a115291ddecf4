//! A query parameter's value, such as an API key; hashed before it reaches Redis.

use http::request::Parts;

use super::{ClientPart, ClientSpec, Key, KeyExtractor};

/// At most this many bytes of a query string are read (the `http` crate caps a URI just
/// below that anyway).
const MAX_QUERY: usize = 64 * 1024;

/// At most this many parameters are looked at, from the left.
const MAX_PAIRS: usize = 256;

/// Keys on a query parameter's value (`?api_key=...`), decoded as
/// `application/x-www-form-urlencoded` (`%2B` and `+` are `+` and space). The value is hashed,
/// as with [`Header`](super::Header): secrets never appear in Redis keys, and any bytes are
/// safe (`query:api_key:#<sha-256>`).
///
/// The first parameter with that name counts. A request without it, with an empty value, or
/// with it beyond the first 256 parameters or 64 KiB of the query, has no key (the layer's
/// [`MissingKey`](crate::layer::MissingKey) setting decides). The name is matched after decoding.
///
/// ```
/// use redlimit::key::Query;
/// use redlimit::KeyExtractor;
///
/// let key = Query::new("api_key");
/// let (parts, _) = http::Request::get("/v1/items?page=2&api_key=sk_123").body(()).unwrap().into_parts();
/// let k = key.extract(&parts).unwrap();
/// assert!(k.as_str().starts_with("query:api_key:#"));
/// assert!(!k.as_str().contains("sk_123"));
/// ```
#[derive(Debug, Clone)]
pub struct Query {
    name: String,
    namespace: String,
}

impl Query {
    /// Keys on the query parameter `name`.
    ///
    /// ```
    /// let key = redlimit::key::Query::new("api_key");
    /// ```
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        Query {
            namespace: format!("query:{name}"),
            name,
        }
    }
}

impl Query {
    /// The key of a decoded value: what a request and an operator's name share.
    fn key_of(&self, value: &[u8]) -> Key {
        Key::hashed(value).namespaced(&self.namespace)
    }
}

impl KeyExtractor for Query {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        let query = parts.uri.query()?.as_bytes();
        let query = &query[..query.len().min(MAX_QUERY)];
        let value = form_urlencoded::parse(query)
            .take(MAX_PAIRS)
            .find(|(name, _)| *name == self.name)?
            .1;
        if value.is_empty() {
            return None;
        }
        Some(self.key_of(value.as_bytes()))
    }

    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        ClientPart::only(client, ClientSpec::Query(&self.name))
            .map(|part| self.key_of(part.value()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(uri: &str) -> Option<Key> {
        let (parts, _) = http::Request::get(uri).body(()).unwrap().into_parts();
        Query::new("k").extract(&parts)
    }

    #[test]
    fn decoded_first_value_counts() {
        assert_eq!(key("/?k=a+b"), key("/?k=a%20b"));
        assert_eq!(key("/?x=1&k=a&k=b"), key("/?k=a"));
        assert_eq!(key("/?%6B=a"), key("/?k=a"));
        assert_ne!(key("/?k=a"), key("/?k=b"));
    }

    #[test]
    fn absent_or_empty_is_none() {
        for uri in ["/", "/?", "/?k", "/?k=", "/?kk=1", "/?K=1"] {
            assert!(key(uri).is_none(), "{uri}");
        }
        let far = format!("/?{}k=1", "x=1&".repeat(MAX_PAIRS));
        assert!(key(&far).is_none());
    }
}
