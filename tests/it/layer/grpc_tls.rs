//! tonic servers serving TLS, with a real tonic client over a real socket: the default key,
//! `PeerIp`, finds the client's IP, so a limit of N admits exactly N calls of it.
//!
//! tonic's own TLS (`Server::tls_config`) records the connection both as `TcpConnectInfo`
//! and as `TlsConnectInfo<TcpConnectInfo>`; a TLS acceptor of the application's own (a
//! `tokio_rustls` stream given to `serve_with_incoming`: hot-reloaded certificates, ALPN or
//! SNI of its own) records only the latter, which `PeerIp` reads through tonic too (before,
//! such a server had no peer address and every call went through unlimited).

use crate::support::pki::{Pki, pki};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{self, Stream};
use redlimit::layer::Handle;
use redlimit::store::MemoryStore;
use redlimit::{Key, Limit, Policy, RateLimitLayer};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity, Server, ServerTlsConfig};
use tonic::{Code, Request};
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// A layer admitting 3 calls per IP in 10 minutes, and its handle.
fn layer() -> (RateLimitLayer, Handle, Policy) {
    let limit = Limit::gcra(3, Duration::from_secs(600)).unwrap();
    let policy = Policy::new("grpc-tls", [limit]).unwrap();
    let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone());
    let handle = layer.handle();
    (layer, handle, policy)
}

/// The application's own TLS acceptor: each accepted connection's handshake, in turn.
fn own_tls(
    listener: TcpListener,
    pki: &Pki,
) -> impl Stream<Item = Result<TlsStream<TcpStream>, std::io::Error>> + use<> {
    let key = PrivatePkcs8KeyDer::from(pki.key.serialize_der());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(pki.cert.der().to_vec())],
            key.into(),
        )
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    stream::unfold((listener, acceptor), |(listener, acceptor)| async move {
        loop {
            let (tcp, _) = listener.accept().await.ok()?;
            if let Ok(tls) = acceptor.accept(tcp).await {
                return Some((Ok(tls), (listener, acceptor)));
            }
        }
    })
}

/// Serves the standard health service behind `layer` with TLS on a free port: tonic's own
/// TLS, or the application's acceptor.
async fn serve(layer: RateLimitLayer, pki: &Pki, own_acceptor: bool) -> SocketAddr {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    if own_acceptor {
        let incoming = own_tls(listener, pki);
        tokio::spawn(async move {
            // The reporter must outlive the server, or the health service reports nothing.
            let _reporter = reporter;
            Server::builder()
                .layer(layer)
                .add_service(health)
                .serve_with_incoming(incoming)
                .await
        });
    } else {
        let identity = Identity::from_pem(pki.cert.pem(), pki.key.serialize_pem());
        let tls = ServerTlsConfig::new().identity(identity);
        let server = Server::builder().tls_config(tls).expect("TLS config");
        tokio::spawn(async move {
            let _reporter = reporter;
            server
                .layer(layer)
                .add_service(health)
                .serve_with_incoming(TcpIncoming::from(listener))
                .await
        });
    }
    addr
}

/// Calls the health service over TLS until denied: the `x-ratelimit-remaining` of each
/// admitted call, and the denial's code.
async fn calls_until_denied(addr: SocketAddr, ca: &str) -> (Vec<String>, Code) {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    let channel = Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)
        .expect("client TLS config")
        .connect()
        .await
        .expect("TLS connection");
    let mut health = HealthClient::new(channel);
    let mut remaining = Vec::new();
    // More calls than the limit: an unlimited server would admit them all.
    for _ in 0..10 {
        let call = Request::new(HealthCheckRequest {
            service: String::new(),
        });
        match health.check(call).await {
            Ok(res) => {
                let left = res.metadata().get("x-ratelimit-remaining");
                remaining.push(left.map_or("none", |v| v.to_str().unwrap()).to_owned());
            }
            Err(status) => return (remaining, status.code()),
        }
    }
    (remaining, Code::Ok)
}

#[tokio::test]
async fn the_peer_of_a_tls_connection_keys_the_call() {
    // tonic's TLS takes rustls's process-wide provider; tests may compile in more than one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = pki();
    for own_acceptor in [false, true] {
        let (layer, handle, policy) = layer();
        let addr = serve(layer, &pki, own_acceptor).await;
        let (remaining, denial) = calls_until_denied(addr, &pki.ca).await;
        assert_eq!(remaining, ["2", "1", "0"], "own acceptor: {own_acceptor}");
        assert_eq!(
            denial,
            Code::ResourceExhausted,
            "own acceptor: {own_acceptor}"
        );
        // Counted under the client's IP, which the layer read from the TLS connection.
        let state = handle
            .inspect(&policy, &Key::new("ip:127.0.0.1"))
            .await
            .expect("inspect");
        assert!(
            !state.would_allow(),
            "own acceptor: {own_acceptor}: {state:?}"
        );
    }
}
