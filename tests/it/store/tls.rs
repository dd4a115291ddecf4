//! `rediss://` with the `tls` feature: a Redis serving TLS with a certificate from a private CA
//! the store is told to trust; and the rustls crypto provider, in a build where both of
//! rustls's providers are compiled in (`tls-ring`, and `aws-lc-rs` through a dev-dependency, as
//! an application's graph enables it).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use redlimit::Key;
use redlimit::store::{RedisStore, Store};
use rustls::crypto::CryptoProvider;
use support::*;

/// A redis-server serving TLS only, with a certificate of its own private CA.
struct TlsRedis {
    _server: support::TlsRedis,
    url: String,
    ca: String,
}

impl TlsRedis {
    fn start() -> Self {
        let pki = pki();
        let redis =
            support::TlsRedis::start(&pki.ca, (&pki.cert.pem(), &pki.key.serialize_pem()), false);
        TlsRedis {
            url: redis.url.clone(),
            _server: redis,
            ca: pki.ca,
        }
    }

    /// A store trusting the server's CA, connected (or why not).
    async fn store(&self) -> Result<RedisStore, redlimit::StoreError> {
        RedisStore::builder(&self.url)
            .prefix(unique_prefix("tls"))
            .tls_root_certificate(self.ca.as_bytes())
            .connect()
            .await
    }
}

/// One allowed, then one denied: the store decides over its TLS connection.
async fn limits(store: &RedisStore) {
    let policy = gcra_policy("tls", 1, Duration::from_secs(60));
    let check = || store.check(&policy, &Key::new("k"), 1);
    assert!(check().await.unwrap().is_allowed());
    assert!(!check().await.unwrap().is_allowed());
}

#[tokio::test]
async fn limits_over_tls_with_a_private_ca() {
    let redis = TlsRedis::start();
    let store = redis
        .store()
        .await
        .expect("TLS connection with the private CA");
    limits(&store).await;

    // Without the CA, the server's certificate is not trusted.
    let untrusted = RedisStore::builder(&redis.url).connect().await;
    let err = untrusted.unwrap_err();
    assert!(err.is_connection(), "{err:?}");
}

#[test]
fn a_root_certificate_shows_as_its_size_only() {
    let pki = pki();
    let builder = RedisStore::builder("rediss://alice:hunter2@127.0.0.1:6380")
        .tls_root_certificate(pki.ca.as_bytes());
    let text = format!("{builder:?}");
    let body = pki.ca.lines().nth(1).expect("a PEM body line");
    for secret in ["alice", "hunter2", "BEGIN CERTIFICATE", body] {
        assert!(!text.contains(secret), "`{secret}` shown in: {text}");
    }
    assert!(
        text.contains(&format!("Some(<{} bytes>)", pki.ca.len())),
        "{text}"
    );
    assert!(text.contains("rediss://127.0.0.1:6380"), "{text}");
}

/// Whether `provider` is rustls's `ring` provider (its random source says so).
fn is_ring(provider: &CryptoProvider) -> bool {
    format!("{:?}", provider.secure_random) == "Ring"
}

/// The panic this guards against: with both providers compiled in and no default, rustls's own
/// `ClientConfig::builder()` (which redis-rs calls) panics. The store installs `ring` instead
/// and connects.
#[test]
fn both_providers_compiled_in_and_no_default_installed() {
    if !alone(
        module_path!(),
        "both_providers_compiled_in_and_no_default_installed",
    ) {
        return;
    }
    // Both providers are in this build: each module exists only with its rustls feature.
    let _ = (
        rustls::crypto::ring::default_provider,
        rustls::crypto::aws_lc_rs::default_provider,
    );
    assert!(CryptoProvider::get_default().is_none());
    let ambiguous = std::panic::catch_unwind(rustls::ClientConfig::builder);
    assert!(ambiguous.is_err(), "rustls chose a provider by itself");
    assert!(CryptoProvider::get_default().is_none());

    let redis = TlsRedis::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = redis.store().await.expect("connects over TLS");
        limits(&store).await;
    });
    let installed = CryptoProvider::get_default().expect("a default is installed");
    assert!(is_ring(installed), "{:?}", installed.secure_random);
}

/// An application's own default (here aws-lc-rs, rustls's default) is used and kept.
#[test]
fn an_installed_default_provider_is_kept() {
    if !alone(module_path!(), "an_installed_default_provider_is_kept") {
        return;
    }
    rustls::crypto::aws_lc_rs::default_provider()
        .install_default()
        .unwrap();
    let before = Arc::clone(CryptoProvider::get_default().unwrap());

    let redis = TlsRedis::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = redis.store().await.expect("connects over TLS");
        limits(&store).await;
    });
    let after = CryptoProvider::get_default().unwrap();
    assert!(Arc::ptr_eq(&before, after));
    assert!(!is_ring(after));
}

/// Plain `redis://` leaves rustls's process state alone: no provider is installed for it.
#[test]
fn plain_urls_install_no_provider() {
    if !alone(module_path!(), "plain_urls_install_no_provider") {
        return;
    }
    let redis = RedisServer::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = RedisStore::builder(redis.url())
            .prefix(unique_prefix("plain"))
            .connect()
            .await
            .unwrap();
        limits(&store).await;
    });
    assert!(CryptoProvider::get_default().is_none());
}
