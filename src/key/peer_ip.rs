//! The socket peer's IP address: the default key, and the only IP a client cannot forge.

use std::net::{IpAddr, SocketAddr};

use http::request::Parts;

use super::ip_net::Grouping;
use super::{ClientPart, ClientSpec, Key, KeyExtractor};

/// Keys on the IP address of the connection's peer (`ip:203.0.113.7`); IPv6 peers are grouped
/// by their /64 (`ip:2001:db8:1:2::/64`), since whoever has one address of a /64 usually has
/// all of it and could rotate through them.
///
/// Reads axum's `ConnectInfo<SocketAddr>` (serve with
/// `into_make_service_with_connect_info::<SocketAddr>()`), tonic's `TcpConnectInfo` or
/// `TlsConnectInfo<TcpConnectInfo>` (with the `grpc` feature; tonic's server sets them, the
/// latter alone for a TLS acceptor of your own given to `serve_with_incoming`), or a plain
/// `SocketAddr` request extension (set by your own hyper accept loop). A server that records none of them (axum served without connect info, a Unix
/// socket) gives no key: see [`MissingKey`](crate::layer::MissingKey). Forwarded headers are
/// ignored: behind a proxy every client would share the proxy's address, which is safe but
/// coarse; use [`ClientIp`](super::ClientIp) to trust your proxies, or to group addresses
/// differently.
/// IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) count as the IPv4 address.
///
/// ```
/// use std::net::SocketAddr;
/// use redlimit::key::PeerIp;
/// use redlimit::KeyExtractor;
///
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert("203.0.113.7:5555".parse::<SocketAddr>().unwrap());
/// let (parts, _) = req.into_parts();
/// assert_eq!(PeerIp.extract(&parts).unwrap().as_str(), "ip:203.0.113.7");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerIp;

impl PeerIp {
    /// The peer's address, if the server recorded it.
    pub(crate) fn addr(parts: &Parts) -> Option<IpAddr> {
        #[cfg(feature = "axum")]
        if let Some(info) = parts
            .extensions
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
        {
            return Some(info.0.ip());
        }
        // What `Router::layer(MockConnectInfo(addr))` gives tests and in-process clients.
        #[cfg(feature = "axum")]
        if let Some(info) = parts
            .extensions
            .get::<axum::extract::connect_info::MockConnectInfo<SocketAddr>>()
        {
            return Some(info.0.ip());
        }
        #[cfg(feature = "grpc")]
        if let Some(addr) = parts
            .extensions
            .get::<tonic::transport::server::TcpConnectInfo>()
            .and_then(tonic::transport::server::TcpConnectInfo::remote_addr)
        {
            return Some(addr.ip());
        }
        if let Some(addr) = parts.extensions.get::<SocketAddr>() {
            return Some(addr.ip());
        }
        #[cfg(feature = "grpc")]
        if let Some(addr) = Self::tonic_tls(parts) {
            return Some(addr.ip());
        }
        None
    }

    /// The peer of a TLS connection that tonic recorded only as
    /// `TlsConnectInfo<TcpConnectInfo>` (an application's own acceptor: tonic's own TLS adds a
    /// `TcpConnectInfo`), read through tonic's `Request::remote_addr`. That type exists only
    /// when the application enables one of tonic's TLS features (`tls-ring`, `tls-aws-lc`),
    /// which also compiles the method's TLS branch; naming it here would make the `grpc`
    /// feature enable one (an internal tonic feature, and rustls in every gRPC user's build).
    /// The price is a copy of the request's extensions, paid only when nothing cheaper above
    /// found the peer.
    #[cfg(feature = "grpc")]
    fn tonic_tls(parts: &Parts) -> Option<SocketAddr> {
        if parts.extensions.is_empty() {
            return None;
        }
        let metadata = tonic::metadata::MetadataMap::new();
        tonic::Request::from_parts(metadata, parts.extensions.clone(), ()).remote_addr()
    }

    /// The key of an address: IPv4-mapped IPv6 counts as IPv4, IPv6 is grouped by /64.
    pub(crate) fn key_of(ip: IpAddr) -> Key {
        Grouping::DEFAULT.key(ip)
    }
}

impl KeyExtractor for PeerIp {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        Self::addr(parts).map(Self::key_of)
    }

    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        ClientPart::only(client, ClientSpec::Ip)?
            .ip()
            .map(Self::key_of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts_with(addr: &str) -> Parts {
        let mut req = http::Request::new(());
        req.extensions_mut()
            .insert(addr.parse::<SocketAddr>().unwrap());
        req.into_parts().0
    }

    #[test]
    fn mapped_ipv6_is_ipv4() {
        let k = PeerIp.extract(&parts_with("[::ffff:10.1.2.3]:80")).unwrap();
        assert_eq!(k.as_str(), "ip:10.1.2.3");
    }

    #[test]
    fn ipv6_is_grouped_by_64_without_braces() {
        let k = PeerIp.extract(&parts_with("[2001:db8::1]:80")).unwrap();
        assert_eq!(k.as_str(), "ip:2001:db8::/64");
        let k = PeerIp
            .extract(&parts_with("[2001:db8::ffff:1]:80"))
            .unwrap();
        assert_eq!(k.as_str(), "ip:2001:db8::/64");
        let k = PeerIp.extract(&parts_with("[2001:db8:0:1::1]:80")).unwrap();
        assert_eq!(k.as_str(), "ip:2001:db8:0:1::/64");
    }

    #[test]
    fn none_without_connection_info() {
        let (parts, _) = http::Request::new(()).into_parts();
        assert!(PeerIp.extract(&parts).is_none());
    }
}
