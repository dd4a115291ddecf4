//! Two extractors combined: the request's key is both keys joined.

use http::request::Parts;

use super::{ClientPart, Key, KeyExtractor};

/// Keys on two extractors at once (`route:/login+ip:203.0.113.7`). If either has no key, the
/// request has none.
///
/// ```
/// use std::net::SocketAddr;
/// use redlimit::key::{Both, PeerIp, Route};
/// use redlimit::KeyExtractor;
///
/// let mut req = http::Request::get("/login").body(()).unwrap();
/// req.extensions_mut().insert("10.0.0.1:1".parse::<SocketAddr>().unwrap());
/// let (parts, _) = req.into_parts();
/// let k = Both::new(Route, PeerIp).extract(&parts).unwrap();
/// assert_eq!(k.as_str(), "route:/login+ip:10.0.0.1");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Both<A, B> {
    first: A,
    second: B,
}

impl<A, B> Both<A, B> {
    /// Combines `first` and `second`.
    pub fn new(first: A, second: B) -> Self {
        Both { first, second }
    }
}

impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for Both<A, B> {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        Some(
            self.first
                .extract(parts)?
                .join(&self.second.extract(parts)?),
        )
    }

    /// Every split of the parts between the two, first that both take.
    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        (1..client.len()).find_map(|at| {
            let (first, second) = client.split_at(at);
            Some(
                self.first
                    .client_key(first)?
                    .join(&self.second.client_key(second)?),
            )
        })
    }
}
