//! TLS on the gRPC listener, as envoyproxy/ratelimit sets it up: `GRPC_SERVER_USE_TLS` with
//! the certificate chain `GRPC_SERVER_TLS_CERT` and key `GRPC_SERVER_TLS_KEY` (reloaded when
//! the files change, as the Go service's cert provider does); with `GRPC_CLIENT_TLS_CACERT`,
//! every client must present a certificate chaining to those authorities (mTLS), valid for
//! `GRPC_CLIENT_TLS_SAN` when that is set.
//!
//! rustls with its `ring` provider (the one the Redis TLS of this server already compiles
//! in), ALPN `h2` (gRPC clients such as grpc-core insist on it).

mod cert;
mod client;

use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::TlsAcceptor;

use crate::settings::GrpcSettings;

pub(crate) use cert::ReloadingCert;

/// How long a client may take to finish its handshake before its connection is dropped.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The gRPC listener's TLS: the acceptor, and the certificate it reloads.
pub(crate) struct GrpcTls {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) cert: Arc<ReloadingCert>,
}

impl std::fmt::Debug for GrpcTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcTls")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

/// The TLS the settings ask for: `None` without `GRPC_SERVER_USE_TLS`; an error names the
/// variable and the file.
pub(crate) fn from_settings(grpc: &GrpcSettings) -> Result<Option<GrpcTls>, String> {
    if !grpc.grpc_server_use_tls {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (Some(cert_path), Some(key_path)) = (
        GrpcSettings::path(&grpc.grpc_server_tls_cert),
        GrpcSettings::path(&grpc.grpc_server_tls_key),
    ) else {
        return Err(
            "GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"
                .to_owned(),
        );
    };
    let cert = Arc::new(ReloadingCert::load(
        cert_path,
        key_path,
        Arc::clone(&provider),
    )?);
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("GRPC_SERVER_USE_TLS: {e}"))?;
    let builder = match GrpcSettings::path(&grpc.grpc_client_tls_cacert) {
        None => {
            if !grpc.grpc_client_tls_san.is_empty() {
                tracing::warn!(
                    "GRPC_CLIENT_TLS_SAN is set without GRPC_CLIENT_TLS_CACERT: no client certificate is asked for, so no name is checked"
                );
            }
            builder.with_no_client_auth()
        }
        Some(ca_path) => {
            let roots = client_roots(&ca_path)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| format!("GRPC_CLIENT_TLS_CACERT: {e}"))?;
            match grpc.grpc_client_tls_san.as_str() {
                "" => builder.with_client_cert_verifier(verifier),
                san => {
                    let name = ServerName::try_from(san.to_owned()).map_err(|_| {
                        format!(
                            "GRPC_CLIENT_TLS_SAN: `{san}` is neither a DNS name nor an IP address"
                        )
                    })?;
                    builder.with_client_cert_verifier(Arc::new(client::NamedClient::new(
                        verifier, name,
                    )))
                }
            }
        }
    };
    let mut config = builder.with_cert_resolver(Arc::clone(&cert) as _);
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(GrpcTls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        cert,
    }))
}

/// The certificate authorities of `GRPC_CLIENT_TLS_CACERT`: every certificate in the file.
fn client_roots(path: &std::path::Path) -> Result<Arc<rustls::RootCertStore>, String> {
    let bad =
        |e: &dyn std::fmt::Display| format!("GRPC_CLIENT_TLS_CACERT: {}: {e}", path.display());
    let pem = std::fs::read(path).map_err(|e| bad(&e))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| bad(&e))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(bad(&"no certificate authority in the file"));
    }
    Ok(Arc::new(roots))
}
