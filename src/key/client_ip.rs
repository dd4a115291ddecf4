//! The client's IP address behind trusted proxies: a forwarded header is believed only as far
//! as the proxies that wrote it are trusted.

use std::net::IpAddr;

use http::header::{FORWARDED, HeaderName};
use http::request::Parts;

use super::forwarded;
use super::ip_net::{Grouping, IpRanges};
use super::{ClientPart, ClientSpec, Key, KeyExtractor, PeerIp};
use crate::error::ConfigError;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The header trusted proxies write the client's address into (read only when the socket peer
/// is a trusted proxy). Pick the one your proxies *write*: a header they merely pass through is
/// the client's to forge. That is also why exactly one header is read, never whichever is
/// present: behind a proxy that appends to `X-Forwarded-For`, a `Forwarded` header comes from
/// the client untouched, and preferring it (as RFC 7239 would) would let clients name
/// themselves.
///
/// ```
/// use http::header::HeaderName;
/// use redlimit::key::{ClientIp, ProxyHeader};
/// // Behind Cloudflare, whose edge addresses you list as trusted:
/// let cf = ClientIp::trusting(["173.245.48.0/20"])?
///     .header(ProxyHeader::SingleValue(HeaderName::from_static("cf-connecting-ip")));
/// assert_eq!(ProxyHeader::default(), ProxyHeader::XForwardedFor);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProxyHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`, appended to by each proxy (the default: what
    /// nginx, HAProxy, Envoy, cloud load balancers and CDNs write).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for="[2001:db8::1]:443";proto=https`: the `for=`
    /// parameter of each element.
    Forwarded,
    /// A header holding one address that the proxy *sets*, replacing any the client sent
    /// (`X-Real-IP`, `CF-Connecting-IP`, `True-Client-IP`). If there are several lines, the
    /// last one counts.
    SingleValue(HeaderName),
}

/// Keys on the client's IP address (`ip:203.0.113.7`, IPv6 as `ip:2001:db8:1:2::/64`), reading
/// forwarded headers only from trusted proxies.
///
/// * **No trust configured** ([`ClientIp::peer`]): the key is the socket peer's address, as
///   with [`PeerIp`]; forwarded headers are ignored, so rotating `X-Forwarded-For` values buys
///   a client nothing.
/// * **Peer not in a trusted range**: the peer's address, whatever the headers say.
/// * **Peer trusted**: the [`ProxyHeader`] (default `X-Forwarded-For`; all lines, in order) is
///   walked from the right, skipping trusted addresses; the first untrusted address is the
///   client. If the walk meets an element that names no address (`unknown`, an obfuscated
///   `_hidden`, `999.1.1.1`, garbage, invalid UTF-8, a `Forwarded` element without `for=`)
///   before that, it stops there and the client is the *last trusted hop* (the address just
///   right of that element, or the peer): a trusted proxy that cannot say who its client was
///   is itself the client. If every address is trusted, the leftmost is the client; if the
///   header is absent or empty, the peer is. Only the 64 rightmost elements (empty ones
///   included) are looked at: if those are all trusted, the leftmost of them is the client,
///   and thousands of hops cost nothing.
///   A [`ProxyHeader::SingleValue`] header is not walked: its address is the client, and
///   without a readable one the peer is.
/// * Ports (`1.2.3.4:80`), brackets (`[2001:db8::1]:443`), quoted `Forwarded` values and
///   whitespace are accepted. IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) count as IPv4, in
///   headers, peers and trusted ranges alike.
/// * IPv6 clients are grouped by their /64 (an attacker owns a whole /64), IPv4 clients are
///   keyed exactly; both are configurable.
/// * Without a socket peer address (serve with `into_make_service_with_connect_info`) there is
///   no key, and headers are not read at all.
///
/// ```
/// use std::net::SocketAddr;
/// use redlimit::key::ClientIp;
/// use redlimit::KeyExtractor;
///
/// let key = ClientIp::trusting(["10.0.0.0/8"])?;
/// let mut req = http::Request::get("/")
///     .header("x-forwarded-for", "6.6.6.6, 203.0.113.7, 10.0.0.2")
///     .body(())
///     .unwrap();
/// req.extensions_mut().insert("10.0.0.1:443".parse::<SocketAddr>().unwrap());
/// let (parts, _) = req.into_parts();
/// // 10.0.0.2 is our proxy; 203.0.113.7 is who connected to it; 6.6.6.6 is a client's claim.
/// assert_eq!(key.extract(&parts).unwrap().as_str(), "ip:203.0.113.7");
/// // Without trust, the header is ignored.
/// assert_eq!(ClientIp::peer().extract(&parts).unwrap().as_str(), "ip:10.0.0.1");
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientIp {
    trusted: IpRanges,
    header: ProxyHeader,
    grouping: Grouping,
}

impl Default for ClientIp {
    fn default() -> Self {
        ClientIp::peer()
    }
}

impl ClientIp {
    /// The socket peer's address, trusting no proxy: like [`PeerIp`], with configurable
    /// grouping.
    ///
    /// ```
    /// let key = redlimit::key::ClientIp::peer().ipv6_prefix(56)?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn peer() -> Self {
        ClientIp {
            trusted: IpRanges::default(),
            header: ProxyHeader::default(),
            grouping: Grouping::DEFAULT,
        }
    }

    /// Trusts the proxies in `ranges`: addresses (`10.0.0.1`, `::1`) or CIDRs (`10.0.0.0/8`,
    /// `fd00::/8`), or says which range is invalid (not an address or a CIDR, or a `/0`).
    /// List only addresses your own proxies connect from: a trusted client can name any
    /// address it likes.
    ///
    /// ```
    /// use redlimit::key::ClientIp;
    /// assert!(ClientIp::trusting(["10.0.0.0/8", "2001:db8::/32", "::1"]).is_ok());
    /// assert!(ClientIp::trusting(["10.0.0.0/8", "proxy.internal"]).is_err());
    /// assert!(ClientIp::trusting(["0.0.0.0/0"]).is_err());
    /// ```
    pub fn trusting<I>(ranges: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        Ok(ClientIp {
            trusted: IpRanges::parse(ranges)?,
            ..ClientIp::peer()
        })
    }

    /// Which header trusted proxies write the client's address into (default
    /// [`ProxyHeader::XForwardedFor`]). Only that header is read.
    ///
    /// ```
    /// use redlimit::key::{ClientIp, ProxyHeader};
    /// let key = ClientIp::trusting(["10.0.0.0/8"])?.header(ProxyHeader::Forwarded);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn header(mut self, header: ProxyHeader) -> Self {
        self.header = header;
        self
    }

    /// Groups IPv4 clients by their first `len` bits (default 32: one key per address), or
    /// says why `len` is not in `1..=32`.
    ///
    /// ```
    /// use redlimit::key::ClientIp;
    /// let key = ClientIp::peer().ipv4_prefix(24)?; // ip:203.0.113.0/24
    /// assert!(ClientIp::peer().ipv4_prefix(0).is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn ipv4_prefix(mut self, len: u8) -> Result<Self, ConfigError> {
        self.grouping.v4 = Grouping::check(4, len)?;
        Ok(self)
    }

    /// Groups IPv6 clients by their first `len` bits (default 64: whoever has one address of
    /// a /64 usually has all of it; 128 keys each address), or says why `len` is not in
    /// `1..=128`.
    ///
    /// ```
    /// use redlimit::key::ClientIp;
    /// let key = ClientIp::peer().ipv6_prefix(48)?; // ip:2001:db8:1::/48
    /// assert!(ClientIp::peer().ipv6_prefix(129).is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn ipv6_prefix(mut self, len: u8) -> Result<Self, ConfigError> {
        self.grouping.v6 = Grouping::check(6, len)?;
        Ok(self)
    }

    /// The client's address as described above (canonical, before grouping), or `None`
    /// without a peer address. Handy for logs.
    ///
    /// ```
    /// use std::net::{IpAddr, SocketAddr};
    /// use redlimit::key::ClientIp;
    /// let mut req = http::Request::get("/").header("x-forwarded-for", "unknown").body(()).unwrap();
    /// req.extensions_mut().insert("10.0.0.1:443".parse::<SocketAddr>().unwrap());
    /// let (parts, _) = req.into_parts();
    /// let client = ClientIp::trusting(["10.0.0.0/8"])?.client(&parts);
    /// assert_eq!(client, Some("10.0.0.1".parse::<IpAddr>().unwrap())); // the proxy itself
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn client(&self, parts: &Parts) -> Option<IpAddr> {
        let peer = PeerIp::addr(parts)?.to_canonical();
        if !self.trusted.contains(peer) {
            return Some(peer);
        }
        let headers = &parts.headers;
        Some(match &self.header {
            ProxyHeader::XForwardedFor => self.walk(
                peer,
                forwarded::x_forwarded_for(headers.get_all(X_FORWARDED_FOR).iter()),
            ),
            ProxyHeader::Forwarded => self.walk(
                peer,
                forwarded::forwarded(headers.get_all(FORWARDED).iter()),
            ),
            ProxyHeader::SingleValue(name) => headers
                .get_all(name)
                .iter()
                .next_back()
                .and_then(|value| forwarded::node(value.as_bytes()))
                .map_or(peer, |ip| ip.to_canonical()),
        })
    }

    /// Right to left: the first untrusted address, else the last trusted one.
    fn walk(&self, peer: IpAddr, hops: impl Iterator<Item = Option<IpAddr>>) -> IpAddr {
        let mut last_trusted = peer;
        for hop in hops {
            let Some(ip) = hop.map(|ip| ip.to_canonical()) else {
                return last_trusted;
            };
            if !self.trusted.contains(ip) {
                return ip;
            }
            last_trusted = ip;
        }
        last_trusted
    }
}

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        self.client(parts).map(|ip| self.grouping.key(ip))
    }

    /// With this extractor's grouping: `ip=2001:db8::1` is `ip:2001:db8::/64` by default.
    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        let ip = ClientPart::only(client, ClientSpec::Ip)?.ip()?;
        Some(self.grouping.key(ip.to_canonical()))
    }
}
