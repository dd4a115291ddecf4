//! The black-box suite: the real `redlimit-server` binary driven by PyPI's `xds-protos` stubs
//! (the gRPC project's generated Envoy API, a client we did not write) against real
//! `redis-server` processes. `scripts/test.sh` installs `xds-protos`, `grpcio`,
//! `grpcio-health-checking` and `opentelemetry-proto` (the tracing tests' OTLP collectors); the
//! scenarios are in `tests/python/test_*.py` (the processes they start: `harness.py`).
//!
//! The TLS scenarios' certificates are made here (rcgen) and written to a directory named by
//! `REDLIMIT_TEST_PKI`: Python needs no crypto package for them.

use std::path::Path;
use std::process::Command;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair,
};

#[test]
fn the_python_suite_passes() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python");
    let pki = std::env::temp_dir().join(format!("redlimit-server-pki-{}", std::process::id()));
    write_pki(&pki);
    // `REDLIMIT_PYTHON_TESTS=test_gateway.py`: one file's scenarios alone.
    let pattern = std::env::var("REDLIMIT_PYTHON_TESTS").unwrap_or_else(|_| "test_*.py".into());
    // `REDLIMIT_SERVER_BIN=path`: another build of the binary (a copy, say, while other builds
    // share the target directory and replace the one cargo built for this test).
    let binary = std::env::var("REDLIMIT_SERVER_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_redlimit-server").to_owned());
    let output = Command::new("python3")
        .args(["-m", "unittest", "discover", "-v", "-p", &pattern])
        .current_dir(dir)
        .env("REDLIMIT_SERVER_BIN", binary)
        .env("REDLIMIT_TEST_PKI", &pki)
        .output()
        .expect("python3 runs");
    let _ = std::fs::remove_dir_all(&pki);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "the Python suite failed (pip install xds-protos grpcio grpcio-health-checking opentelemetry-proto if it could not import them)"
    );
}

/// Two certificate authorities, and the PEM files the TLS scenarios read from `dir`:
/// `ca.pem`; `server.pem`/`.key` (for `localhost` and `127.0.0.1`) and `server2.pem`/`.key`
/// (for `reloaded.test` too: a reload is seen by the name the client asks for);
/// `elsewhere.pem`/`.key` and `elsewhere-other-ca.pem`/`.key` (server certificates for
/// `elsewhere.test` alone, by each authority: Redis's, for the hostname check); client
/// certificates `client.pem`/`.key` (`envoy.client.test`), `wrong-san.pem`/`.key`
/// (`intruder.test`) and `other-ca.pem`/`.key` (`envoy.client.test`, by the other authority);
/// `envoy-rate-limit.pem`/`.key`, shaped as the one Envoy Gateway makes for its rate limit
/// pod (its `internal/crypto/certgen.go`): with no extended key usage, so that one certificate
/// serves gRPC and is the xDS client's; named for the service's address (Envoy Gateway's is
/// for `*.envoy-gateway-system`, a name its Envoy does not check, where grpcio does).
fn write_pki(dir: &Path) {
    std::fs::create_dir_all(dir).expect("the PKI directory");
    let ca = authority("redlimit test CA");
    let other = authority("another test CA");
    std::fs::write(dir.join("ca.pem"), &ca.0).expect("ca.pem");
    let leaf = |name: &str, issuer: &Issuer<'static, KeyPair>, sans: &[&str], usage: Usage| {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
                .expect("names");
        // rcgen names every certificate alike by default: a leaf named as its issuer looks
        // self-signed to BoringSSL (grpcio).
        params.distinguished_name = common_name(name);
        params.extended_key_usages = match usage {
            Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
            Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Usage::Any => Vec::new(),
        };
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, issuer).expect("signed");
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).expect("cert");
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).expect("key");
    };
    leaf("server", &ca.1, &["localhost", "127.0.0.1"], Usage::Server);
    leaf(
        "server2",
        &ca.1,
        &["localhost", "127.0.0.1", "reloaded.test"],
        Usage::Server,
    );
    // Redis's certificates for the hostname check: a name other than the address dialled,
    // by the authority and by another one.
    leaf("elsewhere", &ca.1, &["elsewhere.test"], Usage::Server);
    leaf(
        "elsewhere-other-ca",
        &other.1,
        &["elsewhere.test"],
        Usage::Server,
    );
    leaf("client", &ca.1, &["envoy.client.test"], Usage::Client);
    leaf("wrong-san", &ca.1, &["intruder.test"], Usage::Client);
    leaf("other-ca", &other.1, &["envoy.client.test"], Usage::Client);
    leaf(
        "envoy-rate-limit",
        &ca.1,
        &["envoy-ratelimit.envoy-gateway-system.svc.cluster.local"],
        Usage::Any,
    );
}

/// A leaf's extended key usage.
#[derive(Clone, Copy)]
enum Usage {
    Server,
    Client,
    /// None named: any.
    Any,
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
