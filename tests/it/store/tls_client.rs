//! `rediss://` beyond the server's certificate: a client certificate for a Redis that asks
//! for one (`tls-auth-clients yes`), and `tls_skip_hostname_verification` (the chain
//! verified, not the name), against a real redis-server serving TLS.

use crate::support;

use std::time::Duration;

use redlimit::Key;
use redlimit::store::{RedisStore, RedisStoreBuilder, Store};
use support::*;

/// A store builder for `redis`, trusting `ca` for its certificate.
fn builder(redis: &TlsRedis, ca: &str) -> RedisStoreBuilder {
    RedisStore::builder(&redis.url)
        .prefix(unique_prefix("mtls"))
        .connect_timeout(Duration::from_secs(5))
        .tls_root_certificate(ca.as_bytes())
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
    let redis = TlsRedis::start(&pki.ca, (&server_cert.0, &server_cert.1), true);
    let (cert, key) = pki.leaf(&["redlimit.client.test"], true);
    let store = builder(&redis, &pki.ca)
        .tls_client_certificate(cert.as_bytes(), key.as_bytes())
        .connect()
        .await
        .expect("mutual TLS");
    limits(&store).await;

    let without = builder(&redis, &pki.ca).connect().await;
    assert!(
        without.unwrap_err().is_connection(),
        "no client certificate"
    );

    let text = format!(
        "{:?}",
        builder(&redis, &pki.ca).tls_client_certificate(cert.as_bytes(), key.as_bytes())
    );
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    assert!(
        text.contains(&format!("<{} bytes>", key.len())),
        "sizes only: {text}"
    );

    let malformed = builder(&redis, &pki.ca)
        .tls_client_certificate(cert.as_bytes(), b"not a key".to_vec())
        .connect_lazy();
    assert!(malformed.is_err(), "a malformed key fails the build");
}

#[tokio::test]
async fn skipping_the_hostname_check_still_verifies_the_chain() {
    let pki = pki();
    let elsewhere = pki.leaf(&["elsewhere.test"], false);
    let redis = TlsRedis::start(&pki.ca, (&elsewhere.0, &elsewhere.1), false);

    let strict = builder(&redis, &pki.ca).connect().await;
    assert!(strict.unwrap_err().is_connection(), "the name is checked");

    let store = builder(&redis, &pki.ca)
        .tls_skip_hostname_verification(true)
        .connect()
        .await
        .expect("the name alone is not checked");
    limits(&store).await;

    // Another authority's certificate: refused, name or not.
    let other = support::pki();
    let untrusted = builder(&redis, &other.ca)
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
