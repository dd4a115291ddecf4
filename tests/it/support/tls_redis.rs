//! A redis-server serving TLS only, on a free loopback port, with the certificates a test
//! gives it (PEM text, written to a directory of its own and removed with it).

use std::path::PathBuf;

use super::{RedisServer, unique_prefix};

/// A redis-server serving TLS with a certificate and key, trusting a CA for its clients and
/// asking them for a certificate when told to (`tls-auth-clients`).
pub(crate) struct TlsRedis {
    /// `rediss://127.0.0.1:PORT`.
    pub(crate) url: String,
    dir: PathBuf,
    _server: RedisServer,
}

impl TlsRedis {
    /// Starts one serving `cert` (certificate PEM, key PEM), trusting `ca` for client
    /// certificates, which it asks for when `auth_clients`.
    pub(crate) fn start(ca: &str, cert: (&str, &str), auth_clients: bool) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "redlimit-tls-{}-{}",
            std::process::id(),
            unique_prefix("d")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p.to_str().unwrap().to_owned()
        };
        let (ca, cert, key) = (
            path("ca.pem", ca),
            path("cert.pem", cert.0),
            path("key.pem", cert.1),
        );
        let tls_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
            .to_string();
        let server = RedisServer::start_with(&[
            "--tls-port",
            &tls_port,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            if auth_clients { "yes" } else { "no" },
        ]);
        TlsRedis {
            url: format!("rediss://127.0.0.1:{tls_port}"),
            dir,
            _server: server,
        }
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
