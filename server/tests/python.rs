//! The black-box suite: the real `redlimit-server` binary driven by PyPI's `xds-protos` stubs
//! (the gRPC project's generated Envoy API, a client we did not write) against real
//! `redis-server` processes. `scripts/test.sh` installs `xds-protos` and `grpcio`; the
//! scenarios are in `tests/python/test_*.py` (the processes they start: `harness.py`).
//!
//! The TLS scenarios' certificates are made here (rcgen) and written to a directory named by
//! `REDLIMIT_TEST_PKI`: Python needs no crypto package for them.

use std::path::Path;
use std::process::{Command, Stdio};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair,
};

#[test]
fn the_python_suite_passes() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python"));
    let pki = std::env::temp_dir().join(format!("redlimit-server-pki-{}", std::process::id()));
    write_pki(&pki);
    // One process per file, all at once: each starts its own servers and Redis on free ports,
    // and most of their time is spent waiting on them (one after the other, 40 s on a quiet
    // machine; at once, the longest file's). `REDLIMIT_PYTHON_TESTS` picks files by pattern,
    // run in one process as `unittest` discovers them.
    let patterns = match std::env::var("REDLIMIT_PYTHON_TESTS") {
        Ok(pattern) => vec![pattern],
        Err(_) => test_files(dir),
    };
    let running: Vec<_> = patterns
        .iter()
        .map(|pattern| {
            // A file, not a pipe: a pipe nobody reads yet (another file's turn) would fill
            // and stall the servers that write to it.
            let log = pki.join(format!("{pattern}.log"));
            let out = std::fs::File::create(&log).expect("a log file");
            let child = Command::new("python3")
                .args(["-m", "unittest", "discover", "-v", "-p", pattern])
                .current_dir(dir)
                .env("REDLIMIT_SERVER_BIN", env!("CARGO_BIN_EXE_redlimit-server"))
                .env("REDLIMIT_TEST_PKI", &pki)
                .stdout(Stdio::from(out.try_clone().expect("the log file")))
                .stderr(Stdio::from(out))
                .spawn()
                .expect("python3 runs");
            (pattern, child, log)
        })
        .collect();
    let mut failed = Vec::new();
    for (pattern, mut child, log) in running {
        let status = child.wait().expect("python3 ends");
        let output = std::fs::read(&log).unwrap_or_default();
        eprintln!("== {pattern}\n{}", String::from_utf8_lossy(&output));
        if !status.success() {
            failed.push(pattern);
        }
    }
    let _ = std::fs::remove_dir_all(&pki);
    assert!(
        failed.is_empty(),
        "the Python suite failed in {failed:?} (pip install xds-protos grpcio if it could not \
         import them)"
    );
}

/// The suite's files, `test_*.py`, by name.
fn test_files(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .expect("the Python suite's directory")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("test_") && name.ends_with(".py"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no test_*.py in {}", dir.display());
    files
}

fn write_pki(dir: &Path) {
    std::fs::create_dir_all(dir).expect("the PKI directory");
    let ca = authority("redlimit test CA");
    let other = authority("another test CA");
    std::fs::write(dir.join("ca.pem"), &ca.0).expect("ca.pem");
    let leaf = |name: &str, issuer: &Issuer<'static, KeyPair>, sans: &[&str], client: bool| {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
                .expect("names");
        // rcgen names every certificate alike by default: a leaf named as its issuer looks
        // self-signed to BoringSSL (grpcio).
        params.distinguished_name = common_name(name);
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, issuer).expect("signed");
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).expect("cert");
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).expect("key");
    };
    leaf("server", &ca.1, &["localhost", "127.0.0.1"], false);
    leaf(
        "server2",
        &ca.1,
        &["localhost", "127.0.0.1", "reloaded.test"],
        false,
    );
    // Redis's certificates for the hostname check: a name other than the address dialled,
    // by the authority and by another one.
    leaf("elsewhere", &ca.1, &["elsewhere.test"], false);
    leaf("elsewhere-other-ca", &other.1, &["elsewhere.test"], false);
    leaf("client", &ca.1, &["envoy.client.test"], true);
    leaf("wrong-san", &ca.1, &["intruder.test"], true);
    leaf("other-ca", &other.1, &["envoy.client.test"], true);
}

/// A self-signed authority: its certificate's PEM, and the issuer that signs with it.
fn authority(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = common_name(name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().expect("a key");
    let cert = params.self_signed(&key).expect("self-signed");
    (cert.pem(), Issuer::new(params, key))
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}
