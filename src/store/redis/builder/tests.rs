use super::*;

const SECRETS: [&str; 2] = ["hunter2", "alice"];

fn assert_redacted(text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}

#[test]
fn debug_shows_no_credentials() {
    let standalone = RedisStoreBuilder::new(Topology::Standalone(
        "redis://alice:hunter2@10.0.0.5:6379/3".into(),
    ));
    let text = format!("{standalone:?}");
    assert_redacted(&text);
    assert!(text.contains("\"redis://10.0.0.5:6379\""), "{text}");

    let cluster = RedisStoreBuilder::new(Topology::Cluster(vec![
        "redis://:hunter2@10.0.0.1:6379".into(),
        "redis://alice:hunter2@10.0.0.2:6379".into(),
    ]));
    let text = format!("{cluster:?}");
    assert_redacted(&text);
    assert!(text.contains("[\"redis://10.0.0.1:6379\", \"redis://10.0.0.2:6379\"]"));

    let sentinel = RedisStoreBuilder::new(Topology::Sentinel {
        sentinels: vec![
            "redis://:hunter2@10.0.0.1:26379".into(),
            "garbage hunter2".into(),
        ],
        master: "mymaster".into(),
    });
    let text = format!("{sentinel:#?}");
    assert_redacted(&text);
    assert!(
        text.contains("<invalid url>") && text.contains("mymaster"),
        "{text}"
    );
}

#[cfg(feature = "tls")]
#[test]
fn a_root_certificate_shows_as_its_size() {
    let builder = RedisStoreBuilder::new(Topology::Standalone("rediss://h:1".into()))
        .tls_root_certificate(b"-----BEGIN CERTIFICATE-----hunter2".to_vec());
    let text = format!("{builder:?}");
    assert_redacted(&text);
    assert!(text.contains("Some(<34 bytes>)"), "{text}");
}

#[test]
fn config_errors_show_no_credentials() {
    for url in [
        "redis://alice:hunter2@host:6379/notadb",
        "redis://:hunter2@0.0.0.0:6379",
        "alice:hunter2",
        "ftp://alice:hunter2@host",
    ] {
        let Err(err) = RedisStoreBuilder::new(Topology::Standalone(url.into())).build() else {
            panic!("{url} accepted");
        };
        assert!(matches!(err, ConfigError::Redis(_)), "{err:?}");
        assert_redacted(&err.to_string());
        assert_redacted(&format!("{err:?}"));
    }
}
