//! `rediss://` beyond the server's certificate: a client certificate for a Redis that asks
//! for one (`tls-auth-clients yes`), and `tls_skip_hostname_verification` (the chain
//! verified, not the name), against a real redis-server serving TLS.

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use redlimit::Key;
use redlimit::store::{RedisStore, RedisStoreBuilder, Store};
use support::*;

/// A redis-server serving TLS with certificate `cert` (PEM, key PEM), trusting `ca` for
/// clients; asking them for a certificate when `auth_clients`.
struct TlsRedis {
    url: String,
    dir: PathBuf,
    _server: RedisServer,
}

impl TlsRedis {
    fn start(ca: &str, cert: &(String, String), auth_clients: bool) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "redlimit-mtls-{}-{}",
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
            path("cert.pem", &cert.0),
            path("key.pem", &cert.1),
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

    fn builder(&self, ca: &str) -> RedisStoreBuilder {
        RedisStore::builder(&self.url)
            .prefix(unique_prefix("mtls"))
            .connect_timeout(Duration::from_secs(5))
            .tls_root_certificate(ca.as_bytes())
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One allowed, then one denied: the store decides over its TLS connection.
async fn limits(store: &RedisStore) {
    let policy = gcra_policy("mtls", 1, Duration::from_secs(60));
    let check = || store.check(&policy, &Key::new("k"), 1);
    assert!(check().await.unwrap().is_allowed());
    assert!(!check().await.unwrap().is_allowed());
}

#[tokio::test]
async fn a_redis_asking_for_a_client_certificate_gets_ours() {
    let pki = pki();
    let server_cert = pki.leaf(&["127.0.0.1", "localhost"], false);
    let redis = TlsRedis::start(&pki.ca, &server_cert, true);
    let (cert, key) = pki.leaf(&["redlimit.client.test"], true);
    let store = redis
        .builder(&pki.ca)
        .tls_client_certificate(cert.as_bytes(), key.as_bytes())
        .connect()
        .await
        .expect("mutual TLS");
    limits(&store).await;

    let without = redis.builder(&pki.ca).connect().await;
    assert!(
        without.unwrap_err().is_connection(),
        "no client certificate"
    );

    let text = format!(
        "{:?}",
        redis
            .builder(&pki.ca)
            .tls_client_certificate(cert.as_bytes(), key.as_bytes())
    );
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    assert!(
        text.contains(&format!("<{} bytes>", key.len())),
        "sizes only: {text}"
    );

    let malformed = redis
        .builder(&pki.ca)
        .tls_client_certificate(cert.as_bytes(), b"not a key".to_vec())
        .connect_lazy();
    assert!(malformed.is_err(), "a malformed key fails the build");
}

#[tokio::test]
async fn skipping_the_hostname_check_still_verifies_the_chain() {
    let pki = pki();
    let elsewhere = pki.leaf(&["elsewhere.test"], false);
    let redis = TlsRedis::start(&pki.ca, &elsewhere, false);

    let strict = redis.builder(&pki.ca).connect().await;
    assert!(strict.unwrap_err().is_connection(), "the name is checked");

    let store = redis
        .builder(&pki.ca)
        .tls_skip_hostname_verification(true)
        .connect()
        .await
        .expect("the name alone is not checked");
    limits(&store).await;

    // Another authority's certificate: refused, name or not.
    let other = support::pki();
    let untrusted = redis
        .builder(&other.ca)
        .tls_skip_hostname_verification(true)
        .connect()
        .await;
    assert!(
        untrusted.unwrap_err().is_connection(),
        "the chain is checked"
    );
}

#[test]
fn an_insecure_url_is_refused() {
    let Err(err) = RedisStore::builder("rediss://127.0.0.1:6380/#insecure").connect_lazy() else {
        panic!("no verification at all is refused");
    };
    assert!(err.to_string().contains("#insecure"), "{err}");
}
