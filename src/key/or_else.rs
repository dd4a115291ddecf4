//! A fallback key: the first extractor's key, or else the second's.

use http::request::Parts;

use super::{ClientPart, Key, KeyExtractor};

/// The key of `primary`, or, when it has none, the key of `fallback`. Made by
/// [`KeyExtractor::or_else`].
///
/// The usual use: a verified identity when there is one, the client's address otherwise.
/// Behind a load balancer, fall back to a [`ClientIp`](super::ClientIp) that trusts it, not to
/// the socket peer: every anonymous request would share the balancer's one address (and one
/// client with garbage tokens would spend everybody's quota).
///
/// ```
/// use std::net::SocketAddr;
/// use redlimit::key::{ClientIp, Header};
/// use redlimit::KeyExtractor;
///
/// let key = Header::new("x-api-key")?.or_else(ClientIp::trusting(["10.0.0.0/8"])?);
/// let mut req = http::Request::get("/").header("x-forwarded-for", "203.0.113.7").body(()).unwrap();
/// req.extensions_mut().insert("10.0.0.1:443".parse::<SocketAddr>().unwrap());
/// let (parts, _) = req.into_parts();
/// assert_eq!(key.extract(&parts).unwrap().as_str(), "ip:203.0.113.7");
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct OrElse<A, B> {
    primary: A,
    fallback: B,
}

impl<A, B> OrElse<A, B> {
    /// `primary`'s key, or else `fallback`'s.
    pub fn new(primary: A, fallback: B) -> Self {
        OrElse { primary, fallback }
    }
}

impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for OrElse<A, B> {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        self.primary
            .extract(parts)
            .or_else(|| self.fallback.extract(parts))
    }

    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        self.primary
            .client_key(client)
            .or_else(|| self.fallback.client_key(client))
    }
}
