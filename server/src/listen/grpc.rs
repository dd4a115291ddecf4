//! The gRPC listener: `GRPC_HOST:GRPC_PORT`, or the Unix socket `GRPC_UDS` instead (as the Go
//! service: host and port are then not used), in plaintext or TLS.
//!
//! Over TLS each connection's handshake runs in a task of its own, under a deadline, so a slow
//! or silent client holds up nobody else's; tonic gets the connections that completed one.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
#[cfg(unix)]
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
#[cfg(unix)]
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::{Connected, Router, TcpIncoming};

use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer as RlsServer;
use tower_layer::{Identity, Stack};

use super::rls_fast_path::RlsFirst;
use crate::settings::GrpcAddress;
use crate::stats::grpc_methods::Metered;
use crate::trace::Traced;

/// A bound gRPC listener.
#[derive(Debug)]
pub(crate) enum GrpcListener {
    /// A TCP port.
    Tcp(TcpListener),
    /// A Unix socket, removed when served to the end.
    #[cfg(unix)]
    Unix(UnixListener, PathBuf),
}

/// Binds `address` and prints `grpc on ADDR` (`unix:PATH` for a socket). A socket file left
/// by a process that died is replaced; one another process listens on is an error.
pub(crate) async fn bind(address: &GrpcAddress) -> Result<GrpcListener, String> {
    match address {
        GrpcAddress::Tcp(addr) => super::bind::bind("grpc", *addr)
            .await
            .map(GrpcListener::Tcp),
        #[cfg(not(unix))]
        GrpcAddress::Unix(_) => Err("GRPC_UDS: Unix sockets need a Unix system".to_owned()),
        #[cfg(unix)]
        GrpcAddress::Unix(path) => {
            let cannot = |e: &dyn std::fmt::Display| {
                format!("cannot listen on {} (GRPC_UDS): {e}", path.display())
            };
            remove_stale_socket(path).await.map_err(|e| cannot(&e))?;
            let listener = UnixListener::bind(path).map_err(|e| cannot(&e))?;
            println!("grpc on unix:{}", path.display());
            Ok(GrpcListener::Unix(listener, path.clone()))
        }
    }
}

/// Removes `path` if it is a socket nobody answers on.
#[cfg(unix)]
async fn remove_stale_socket(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt as _;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => match UnixStream::connect(path).await {
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "another process listens on it",
            )),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::fs::remove_file(path),
            Err(e) => Err(e),
        },
        // Not a socket: bind says so.
        _ => Ok(()),
    }
}

/// The gRPC services, rate limit calls first (`rls_fast_path`).
pub(crate) type GrpcRouter = Router<Stack<RlsFirst<Metered<RlsServer<Traced>>>, Identity>>;

/// What serving the listener comes to.
pub(crate) type Serving = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Serves `router` on `listener` (over TLS with `tls`) until `shutdown`; a Unix socket's file
/// is removed then.
pub(crate) fn serve(
    router: GrpcRouter,
    listener: GrpcListener,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Serving {
    let done = |r: Result<(), tonic::transport::Error>| r.map_err(|e| e.to_string());
    match (listener, tls) {
        (GrpcListener::Tcp(l), None) => Box::pin(async move {
            done(
                router
                    .serve_with_incoming_shutdown(tcp_incoming(l), shutdown)
                    .await,
            )
        }),
        (GrpcListener::Tcp(l), Some(tls)) => Box::pin(async move {
            let incoming = tls_incoming(Tcp(l), tls);
            done(
                router
                    .serve_with_incoming_shutdown(incoming, shutdown)
                    .await,
            )
        }),
        #[cfg(unix)]
        (GrpcListener::Unix(l, path), tls) => Box::pin(async move {
            let served = match tls {
                None => {
                    let incoming = UnixListenerStream::new(l);
                    router
                        .serve_with_incoming_shutdown(incoming, shutdown)
                        .await
                }
                Some(tls) => {
                    let incoming = tls_incoming(l, tls);
                    router
                        .serve_with_incoming_shutdown(incoming, shutdown)
                        .await
                }
            };
            let _ = std::fs::remove_file(&path);
            done(served)
        }),
    }
}

/// The TCP listener's connections, with `TCP_NODELAY`: tonic sets it only on listeners it
/// binds itself, and without it an answer written in parts waits for the client's delayed
/// ACK (Nagle's algorithm).
pub(crate) fn tcp_incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// A listener of connections of one kind.
trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static;
    fn accept(&self) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

/// A TCP listener whose connections get `TCP_NODELAY` (see [`tcp_incoming`]).
struct Tcp(TcpListener);

impl Accept for Tcp {
    type Io = TcpStream;
    async fn accept(&self) -> io::Result<TcpStream> {
        let (stream, _) = self.0.accept().await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}

#[cfg(unix)]
impl Accept for UnixListener {
    type Io = UnixStream;
    async fn accept(&self) -> io::Result<UnixStream> {
        UnixListener::accept(self).await.map(|(stream, _)| stream)
    }
}

/// The connections whose TLS handshake completed; the accept loop ends when tonic drops the
/// stream.
fn tls_incoming<L: Accept>(
    listener: L,
    tls: TlsAcceptor,
) -> ReceiverStream<io::Result<TlsStream<L::Io>>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let io = tokio::select! {
                () = tx.closed() => return,
                io = listener.accept() => io,
            };
            let io = match io {
                Ok(io) => io,
                Err(e) => {
                    // Out of descriptors, say: give the process a moment rather than spin.
                    tracing::warn!("gRPC listener: cannot accept a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let (tx, tls) = (tx.clone(), tls.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(super::tls::HANDSHAKE_TIMEOUT, tls.accept(io)).await {
                    Ok(Ok(stream)) => {
                        let _ = tx.send(Ok(stream)).await;
                    }
                    Ok(Err(e)) => tracing::debug!("gRPC TLS handshake failed: {e}"),
                    Err(_) => tracing::debug!("gRPC TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use tokio_stream::StreamExt as _;

    use super::*;

    #[tokio::test]
    async fn grpc_connections_are_accepted_with_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        let mut incoming = tcp_incoming(listener);
        let _client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let accepted = incoming
            .next()
            .await
            .expect("a connection")
            .expect("accepted");
        assert!(accepted.nodelay().expect("TCP_NODELAY readable"));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_stale_socket_is_replaced_and_a_live_one_is_not() {
        let dir = std::env::temp_dir().join(format!("rl-uds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("grpc.sock");
        let live = UnixListener::bind(&path).unwrap();
        let address = GrpcAddress::Unix(path.clone());
        let refused = bind(&address).await.unwrap_err();
        assert!(refused.contains("another process"), "{refused}");
        drop(live); // the file stays, as after a crash
        assert!(path.exists());
        let GrpcListener::Unix(_, bound) = bind(&address).await.unwrap() else {
            panic!("a Unix listener");
        };
        assert_eq!(bound, path);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
