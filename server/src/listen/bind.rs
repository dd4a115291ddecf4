//! Binding a TCP listener as the Go service binds its own: Go's `net.Listen("tcp", …)` (through
//! go-reuseport) listens on a wildcard address, `0.0.0.0` as much as `::`, with one IPv6
//! socket that takes IPv4 clients too (`IPV6_V6ONLY` off: Go's `favoriteAddrFamily`,
//! `src/net/ipsock_posix.go`), and on IPv4 alone where the host has no IPv6. So the default
//! `HOST=0.0.0.0` answers a kubelet probing a pod's IPv6 address, and Istio's `HOST="::"`
//! answers IPv4 clients, whatever the host's `net.ipv6.bindv6only` says.

use std::io;
use std::net::{Ipv6Addr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;

/// Pending connections the kernel queues for a listener (tokio's `TcpListener::bind`'s).
const BACKLOG: i32 = 1024;

/// Binds `addr` and prints `<name> on ADDR` with the address and port bound.
pub(crate) async fn bind(name: &str, addr: SocketAddr) -> Result<TcpListener, String> {
    let listener = listen(addr)
        .and_then(TcpListener::from_std)
        .map_err(|e| format!("cannot listen on {addr} ({name}): {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("{name} listener: {e}"))?;
    println!("{name} on {bound}");
    Ok(listener)
}

/// A listening socket on `addr`; a wildcard one is `[::]` for both families when it can be.
fn listen(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    if addr.ip().is_unspecified() {
        let any = SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), addr.port());
        match listen_on(any) {
            Ok(listener) => return Ok(listener),
            // A port taken is taken for IPv4 too; anything else is a host without IPv6, where
            // `0.0.0.0` still listens (Go's fallback), but `::` was asked for by name.
            Err(e) if addr.is_ipv6() || e.kind() == io::ErrorKind::AddrInUse => return Err(e),
            Err(_) => {}
        }
    }
    listen_on(addr)
}

fn listen_on(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        // Explicitly: Linux's default follows `net.ipv6.bindv6only`, and other systems differ.
        socket.set_only_v6(false)?;
    }
    // As tokio's `TcpListener::bind` (and Go) on Unix: a restarted server rebinds its port
    // while the last one's connections are in TIME_WAIT.
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, TcpStream};

    use super::*;

    fn connects(ip: impl Into<std::net::IpAddr>, port: u16) -> bool {
        TcpStream::connect(SocketAddr::new(ip.into(), port)).is_ok()
    }

    #[tokio::test]
    async fn a_wildcard_takes_both_families_and_a_named_address_its_own() {
        for wildcard in ["0.0.0.0:0", "[::]:0"] {
            let listener = bind("test", wildcard.parse().unwrap()).await.unwrap();
            let bound = listener.local_addr().unwrap();
            assert_eq!(bound.ip(), Ipv6Addr::UNSPECIFIED, "{wildcard}");
            assert!(connects(Ipv4Addr::LOCALHOST, bound.port()), "{wildcard}");
            assert!(connects(Ipv6Addr::LOCALHOST, bound.port()), "{wildcard}");
        }
        let v4 = bind("test", "127.0.0.1:0".parse().unwrap()).await.unwrap();
        let port = v4.local_addr().unwrap().port();
        assert!(connects(Ipv4Addr::LOCALHOST, port));
        assert!(!connects(Ipv6Addr::LOCALHOST, port));
    }

    #[tokio::test]
    async fn a_port_in_use_is_refused_for_either_family() {
        let taken = bind("test", "[::]:0".parse().unwrap()).await.unwrap();
        let port = taken.local_addr().unwrap().port();
        let error = bind("test", SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port))
            .await
            .unwrap_err();
        assert!(error.contains("(test)"), "{error}");
    }
}
