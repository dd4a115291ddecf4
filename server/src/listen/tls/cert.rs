//! The server's certificate, reloaded when its files change: envoyproxy/ratelimit's
//! `CertProvider` watches the certificate's directory and loads the pair again on any change,
//! keeping the one in force when the new pair does not load. Here both files are read every
//! second and compared with what was last seen, which sees every way a file is replaced (a
//! Kubernetes Secret's `..data` swap, cert-manager, a `cp`) without a watcher.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How often the files are read.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// The certificate every handshake gets: the last pair that loaded.
#[derive(Debug)]
pub(crate) struct ReloadingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

/// The two files' contents.
#[derive(PartialEq, Eq)]
struct Files {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl ReloadingCert {
    /// Loads the pair; an error names the file and what is wrong.
    pub(crate) fn load(
        cert_path: PathBuf,
        key_path: PathBuf,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, String> {
        let files = read(&cert_path, &key_path)?;
        let key = certified(&files, &provider)
            .map_err(|e| format!("GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY: {e}"))?;
        Ok(ReloadingCert {
            cert_path,
            key_path,
            provider,
            current: RwLock::new(Arc::new(key)),
        })
    }

    /// The certificate in force.
    pub(crate) fn current(&self) -> Arc<CertifiedKey> {
        match self.current.read() {
            Ok(current) => Arc::clone(&current),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Reads the files every second for ever, and puts a pair that changed and loads in force;
    /// one that does not load is logged once and leaves the one in force.
    pub(crate) fn watch(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut seen = read(&self.cert_path, &self.key_path).ok();
            let mut every = tokio::time::interval(POLL_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let this = Arc::clone(&self);
                let Ok(now) =
                    tokio::task::spawn_blocking(move || read(&this.cert_path, &this.key_path))
                        .await
                else {
                    continue;
                };
                let now = match now {
                    Ok(files) => files,
                    Err(e) => {
                        if seen.take().is_some() {
                            tracing::error!(
                                "TLS certificate not reloaded, the one in force stays: {e}"
                            );
                        }
                        continue;
                    }
                };
                if seen.as_ref() == Some(&now) {
                    continue;
                }
                match certified(&now, &self.provider) {
                    Ok(key) => {
                        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(key);
                        tracing::info!(
                            "TLS certificate reloaded from {}",
                            self.cert_path.display()
                        );
                    }
                    // A pair half written (the certificate before its key) loads at the next
                    // change.
                    Err(e) => tracing::error!(
                        "TLS certificate from {} not reloaded, the one in force stays: {e}",
                        self.cert_path.display()
                    ),
                }
                seen = Some(now);
            }
        })
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn read(cert_path: &Path, key_path: &Path) -> Result<Files, String> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    Ok(Files {
        cert: read(cert_path)?,
        key: read(key_path)?,
    })
}

/// The chain and its key, checked to belong together.
fn certified(files: &Files, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&files.cert)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the certificate file: {e}"))?;
    if chain.is_empty() {
        return Err("no certificate in the certificate file".to_owned());
    }
    let key =
        PrivateKeyDer::from_pem_slice(&files.key).map_err(|e| format!("the key file: {e}"))?;
    CertifiedKey::from_der(chain, key, provider)
        .map_err(|e| format!("the key and certificate: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_mismatched_pair_is_refused_with_its_reason() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let dir = std::env::temp_dir().join(format!("rl-cert-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = ReloadingCert::load(dir.join("no.pem"), dir.join("no.key"), provider.clone());
        assert!(missing.unwrap_err().contains("cannot read"));
        std::fs::write(dir.join("junk.pem"), "not a certificate").unwrap();
        let junk = ReloadingCert::load(dir.join("junk.pem"), dir.join("junk.pem"), provider);
        assert!(junk.unwrap_err().contains("no certificate"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Envoy Gateway's certificates (`internal/crypto/certgen.go`) have RSA keys written as
    /// PKCS #1 (`BEGIN RSA PRIVATE KEY`), which its Deployment passes as `GRPC_SERVER_TLS_KEY`
    /// (made by `openssl req -x509 -newkey rsa:2048` and `openssl rsa -traditional`).
    #[test]
    fn an_rsa_key_in_pkcs1_as_envoy_gateway_writes_it_is_served() {
        let provider = rustls::crypto::ring::default_provider();
        let files = Files {
            cert: include_bytes!("testdata/envoy-gateway-rsa.crt").to_vec(),
            key: include_bytes!("testdata/envoy-gateway-rsa.key").to_vec(),
        };
        assert!(files.key.starts_with(b"-----BEGIN RSA PRIVATE KEY-----"));
        let key = certified(&files, &provider).expect("the pair loads");
        assert_eq!(key.cert.len(), 1);
    }
}
