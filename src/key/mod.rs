//! Who is the client: turning a request into the [`Key`] its quota is counted under.
//!
//! A [`KeyExtractor`] reads the request head and returns a key, or `None` when the request has
//! none (the layer's [`MissingKey`](crate::layer::MissingKey) setting decides what happens then).
//! Built in:
//!
//! | extractor | key | from |
//! |---|---|---|
//! | [`PeerIp`] (default) | `ip:203.0.113.7`, `ip:2001:db8:1:2::/64` | the socket peer; headers ignored |
//! | [`ClientIp`] | the same | `X-Forwarded-For`, `Forwarded` or `X-Real-IP`, believed only from trusted proxies |
//! | [`Header`], [`Query`] | `header:x-api-key:#<sha-256>`, `query:api_key:#<sha-256>` | an API key, hashed |
//! | [`Subject`] | `sub:user-42` | a subject your auth layer verified and put in the extensions |
//! | `Jwt` (feature `jwt`) | `sub:user-42` | a bearer token verified here (HMAC, or your own `JwtVerifier`) |
//! | [`Route`], [`Global`] | `route:/users/{id}`, `global` | the endpoint, or nothing |
//!
//! plus any closure `Fn(&http::request::Parts) -> Option<Key>`, and [`Both`] to combine two.
//!
//! A key is only as good as its source: anything a client controls (an unverified token, a
//! forwarded header from an untrusted peer) would let it pick a fresh quota per request, or
//! spend someone else's. Whatever the source, the key is safe in Redis (see [`Key`]).
//!
//! ```
//! use redlimit::key::{Both, ClientIp, Header, Key, PeerIp, Route};
//!
//! // Per route and per client.
//! let per_route_and_ip = Both::new(Route, PeerIp);
//! // Behind our own load balancers.
//! let client = ClientIp::trusting(["10.0.0.0/8"])?;
//! // Any closure over the request head.
//! let tenant = |parts: &http::request::Parts| {
//!     parts.headers.get("x-tenant").map(|v| Key::new(v.as_bytes()))
//! };
//! // An API key, hashed; anonymous clients by address.
//! let api_key = Header::new("x-api-key")?.or_else(PeerIp);
//! # use redlimit::KeyExtractor;
//! # Ok::<(), redlimit::ConfigError>(())
//! ```

mod both;
mod client;
mod client_ip;
mod encoding;
mod forwarded;
mod global;
mod header;
pub(crate) mod ip_net;
#[cfg(feature = "jwt")]
mod jwt;
mod limit_keys;
mod or_else;
mod peer_ip;
mod per_limit;
mod query;
mod route;
mod spec;
mod subject;

pub use both::Both;
pub use client::{ClientName, ClientPart, ClientSpec, MAX_VALUE};
pub use client_ip::{ClientIp, ProxyHeader};
pub use encoding::Key;
pub use global::Global;
pub use header::Header;
pub use ip_net::IpRanges;
#[cfg(feature = "jwt")]
pub use jwt::{HmacAlgorithm, HmacVerifier, Jwt, JwtError, JwtHeader, JwtVerifier};
#[cfg(feature = "jwks")]
pub use jwt::{JwksError, JwksVerifier, JwksWatch, MAX_JWKS_DOCUMENT, MAX_JWKS_KEYS};
pub use or_else::OrElse;
pub use peer_ip::PeerIp;
pub use per_limit::PerLimit;
pub use query::Query;
pub use route::Route;
pub(crate) use route::matched_route;
#[cfg(feature = "config")]
pub(crate) use spec::parse_spec_with;
pub use spec::{SpecPart, parse_spec, spec_parts};
pub use subject::{AuthenticatedSubject, Subject, VerifiedSubject};

use http::request::Parts;

/// Pulls a rate-limit [`Key`] from a request head. Pure: no I/O, no body.
///
/// Implemented for closures:
///
/// ```
/// use redlimit::{Key, KeyExtractor};
/// let by_host = |parts: &http::request::Parts| parts.uri.host().map(Key::new);
/// let (parts, _) = http::Request::get("http://example.com/").body(()).unwrap().into_parts();
/// assert_eq!(by_host.extract(&parts).unwrap().as_str(), "example.com");
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of this request, or `None` if it has none.
    fn extract(&self, parts: &Parts) -> Option<Key>;

    /// The key this extractor gives the client an operator names by its spec and raw values
    /// (`header:x-api-key=sk_live_123`, see [`ClientName`]), made by the same encoding
    /// [`extract`](Self::extract) uses; `None` if the name is not one this extractor keys on
    /// (another header, another number of parts). The layer's
    /// [`Handle::client_key`](crate::layer::Handle::client_key) and the admin API ask it.
    ///
    /// Every built-in extractor answers but [`PerLimit`] (its limit keys have no name here:
    /// give such keys by their stored text); closures and extractors of your own answer
    /// `None` unless they implement it.
    ///
    /// ```
    /// use redlimit::key::{Both, ClientName, Header, Route};
    /// use redlimit::KeyExtractor;
    /// let key = Both::new(Route, Header::new("x-api-key")?);
    /// let (parts, _) = http::Request::get("/search").header("x-api-key", "sk_123").body(()).unwrap().into_parts();
    /// let named = ClientName::parse("route=/search&header:x-api-key=sk_123")?;
    /// assert_eq!(key.client_key(named.parts()), key.extract(&parts));
    /// assert_eq!(key.client_key(ClientName::parse("ip=10.0.0.1")?.parts()), None);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        let _ = client;
        None
    }

    /// This extractor's key, or, when it has none, `fallback`'s (see [`OrElse`]).
    ///
    /// ```
    /// use redlimit::key::{Header, PeerIp};
    /// use redlimit::KeyExtractor;
    /// let key = Header::new("x-api-key")?.or_else(PeerIp);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    fn or_else<B: KeyExtractor>(self, fallback: B) -> OrElse<Self, B>
    where
        Self: Sized,
    {
        OrElse::new(self, fallback)
    }
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<Key> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Option<Key> {
        self(parts)
    }
}

/// Lets an extractor chosen at run time (`Arc<dyn KeyExtractor>`) be used as one.
impl<K: KeyExtractor + ?Sized> KeyExtractor for std::sync::Arc<K> {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        (**self).extract(parts)
    }

    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        (**self).client_key(client)
    }
}
