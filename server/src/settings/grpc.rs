//! The gRPC listener's settings: a TCP address or a Unix socket, and TLS (with client
//! certificates: mTLS), as envoyproxy/ratelimit's `GRPC_*` variables give them.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

use super::parse::go_bool;

/// Where the gRPC listener listens, and how it secures its connections.
#[derive(Debug, Clone, Args)]
pub(crate) struct GrpcSettings {
    /// Address of the gRPC listener (`ShouldRateLimit`, `grpc.health.v1.Health`).
    #[arg(long, env = "GRPC_HOST", default_value = "0.0.0.0")]
    pub(crate) grpc_host: IpAddr,
    /// Port of the gRPC listener.
    #[arg(long, env = "GRPC_PORT", default_value_t = 8081)]
    pub(crate) grpc_port: u16,
    /// A Unix socket's path to serve gRPC on instead of GRPC_HOST:GRPC_PORT.
    #[arg(long, env = "GRPC_UDS", default_value = "")]
    pub(crate) grpc_uds: String,
    /// Serve gRPC over TLS, with GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY (reloaded when
    /// they change).
    #[arg(long, env = "GRPC_SERVER_USE_TLS", default_value = "false", value_parser = go_bool)]
    pub(crate) grpc_server_use_tls: bool,
    /// A PEM file of the server's certificate chain.
    #[arg(long, env = "GRPC_SERVER_TLS_CERT", default_value = "")]
    pub(crate) grpc_server_tls_cert: String,
    /// A PEM file of the server's private key.
    #[arg(long, env = "GRPC_SERVER_TLS_KEY", default_value = "")]
    pub(crate) grpc_server_tls_key: String,
    /// mTLS: a PEM file of the certificate authorities a client's certificate must chain to;
    /// set, every client must present one.
    #[arg(long, env = "GRPC_CLIENT_TLS_CACERT", default_value = "")]
    pub(crate) grpc_client_tls_cacert: String,
    /// mTLS: the name (DNS, or an IP address) a client's certificate must be valid for.
    #[arg(long, env = "GRPC_CLIENT_TLS_SAN", default_value = "")]
    pub(crate) grpc_client_tls_san: String,
}

/// Where gRPC is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GrpcAddress {
    /// `GRPC_HOST:GRPC_PORT`.
    Tcp(std::net::SocketAddr),
    /// `GRPC_UDS`: GRPC_HOST and GRPC_PORT are not used then, as in the Go service.
    Unix(PathBuf),
}

impl GrpcSettings {
    /// Where gRPC is served: the Unix socket when `GRPC_UDS` is set.
    pub(crate) fn address(&self) -> GrpcAddress {
        if self.grpc_uds.is_empty() {
            GrpcAddress::Tcp(std::net::SocketAddr::new(self.grpc_host, self.grpc_port))
        } else {
            GrpcAddress::Unix(PathBuf::from(&self.grpc_uds))
        }
    }

    /// A path setting: `None` when empty (the Go service's "unset").
    pub(crate) fn path(value: &str) -> Option<PathBuf> {
        (!value.is_empty()).then(|| PathBuf::from(value))
    }
}
