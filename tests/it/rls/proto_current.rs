//! The generated RLS code in `src/rls/proto/` is what `proto/` compiles to today: this test
//! regenerates it with the pure-Rust compiler (protox) and tonic-prost-build into a temporary
//! directory and fails on any difference. `REDLIMIT_REGENERATE_PROTO=1` writes it instead:
//!
//! ```text
//! REDLIMIT_REGENERATE_PROTO=1 cargo test --all-features --test it -- rls::proto_current
//! ```

use std::path::{Path, PathBuf};

/// The files the generator writes, one per protobuf package.
const GENERATED: [&str; 7] = [
    "envoy.config.core.v3.rs",
    "envoy.extensions.common.ratelimit.v3.rs",
    "envoy.service.discovery.v3.rs",
    "envoy.service.ratelimit.v3.rs",
    "envoy.r#type.v3.rs",
    "google.rpc.rs",
    "ratelimit.config.ratelimit.v3.rs",
];

/// The files compiled: the RLS service, and the ADS stream with envoyproxy/ratelimit's config
/// resource (redlimit-server's `CONFIG_TYPE=GRPC_XDS_SOTW`).
const ROOTS: [&str; 3] = [
    "envoy/service/ratelimit/v3/rls.proto",
    "envoy/service/discovery/v3/ads.proto",
    "ratelimit/config/ratelimit/v3/rls_conf.proto",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generate(out: &Path) {
    let protos = root().join("proto");
    let descriptors = protox::compile(ROOTS, [&protos]).expect("proto/ compiles");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        .out_dir(out)
        .compile_fds(descriptors)
        .expect("tonic-prost-build generates");
    // Envoy's comments are reStructuredText: as rustdoc they would be broken links and
    // indented "code" run as doctests. The .proto files are the documentation.
    for entry in std::fs::read_dir(out).expect("generated files") {
        let path = entry.expect("generated file").path();
        let text = std::fs::read_to_string(&path).expect("generated file");
        let kept: String = text
            .lines()
            .filter(|line| !line.trim_start().starts_with("///"))
            .flat_map(|line| [line, "\n"])
            .collect();
        std::fs::write(&path, kept).expect("generated file");
    }
}

#[test]
fn checked_in_code_is_current() {
    let scratch = std::env::temp_dir().join(format!("redlimit-rls-proto-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("temp dir");
    generate(&scratch);
    let checked_in = root().join("src/rls/proto");
    let regenerate = std::env::var_os("REDLIMIT_REGENERATE_PROTO").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for name in GENERATED {
        let fresh = std::fs::read_to_string(scratch.join(name)).expect("generated file");
        let path = checked_in.join(name);
        if regenerate {
            std::fs::write(&path, &fresh).expect("write generated file");
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(fresh.as_str()) {
            stale.push(name);
        }
    }
    let extra: Vec<_> = std::fs::read_dir(&scratch)
        .expect("temp dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !GENERATED.contains(&n.as_str()))
        .collect();
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        extra.is_empty(),
        "the generator wrote files not in GENERATED: {extra:?}"
    );
    assert!(
        stale.is_empty(),
        "src/rls/proto/ is stale for {stale:?}: run \
         REDLIMIT_REGENERATE_PROTO=1 cargo test --all-features --test it -- rls::proto_current"
    );
}
