//! `rediss://` with the `tls` feature: a Redis serving TLS with a certificate from a private CA
//! the store is told to trust.

use crate::support;

use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use redlimit::store::{RedisStore, Store};
use redlimit::Key;
use support::*;

struct Pki {
    ca: String,
    cert: String,
    key: String,
}

fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    Pki {
        ca: ca.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}

#[tokio::test]
async fn limits_over_tls_with_a_private_ca() {
    let pki = pki();
    let dir = std::env::temp_dir().join(format!("redlimit-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let (ca, cert, key) = (
        path("ca.pem", &pki.ca),
        path("cert.pem", &pki.cert),
        path("key.pem", &pki.key),
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
        "no",
    ]);
    let store = RedisStore::builder(format!("rediss://127.0.0.1:{tls_port}"))
        .prefix(unique_prefix("tls"))
        .tls_root_certificate(pki.ca.as_bytes())
        .connect()
        .await
        .expect("TLS connection with the private CA");
    let policy = gcra_policy("tls", 1, Duration::from_secs(60));
    assert!(store
        .check(&policy, &Key::new("k"), 1)
        .await
        .unwrap()
        .is_allowed());
    assert!(!store
        .check(&policy, &Key::new("k"), 1)
        .await
        .unwrap()
        .is_allowed());

    // Without the CA, the server's certificate is not trusted.
    let untrusted = RedisStore::builder(format!("rediss://127.0.0.1:{tls_port}"))
        .connect()
        .await;
    let err = untrusted.unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
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
