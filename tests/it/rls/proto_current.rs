//! The generated RLS code in `src/rls/proto/` is what `proto/` compiles to today: this test
//! regenerates it with the pure-Rust compiler (protox) and tonic-prost-build into a temporary
//! directory and fails on any difference. `REDLIMIT_REGENERATE_PROTO=1` writes it instead:
//!
//! ```text
//! REDLIMIT_REGENERATE_PROTO=1 cargo test --all-features --test it -- rls::proto_current
//! ```
//!
//! redlimit-server's xDS code is checked the same way by its own test
//! (`server/tests/proto_current.rs`).

use std::path::PathBuf;

use crate::support::generated_proto::Generated;

#[test]
fn checked_in_code_is_current() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    Generated {
        roots: &[
            "envoy/service/ratelimit/v3/rls.proto",
            "envoy/service/rate_limit_quota/v3/rlqs.proto",
        ],
        includes: &[root.join("proto")],
        extern_paths: &[],
        servers: true,
        files: &[
            "envoy.config.core.v3.rs",
            "envoy.extensions.common.ratelimit.v3.rs",
            "envoy.service.ratelimit.v3.rs",
            "envoy.service.rate_limit_quota.v3.rs",
            "envoy.r#type.v3.rs",
        ],
        elsewhere: &[],
        checked_in: root.join("src/rls/proto"),
        regenerate: "REDLIMIT_REGENERATE_PROTO=1 cargo test --all-features --test it -- \
                     rls::proto_current",
    }
    .check();
}
