//! The xDS client's generated code in `server/src/config/xds/proto/` is what `server/proto/`
//! compiles to today (with the library's `envoy.config.core.v3`, from the root `proto/`): this
//! test regenerates it as the library's `tests/it/rls/proto_current.rs` does its own, and fails
//! on any difference. `REDLIMIT_REGENERATE_PROTO=1` writes it instead:
//!
//! ```text
//! REDLIMIT_REGENERATE_PROTO=1 cargo test -p redlimit-server --test proto_current
//! ```

#[path = "../../tests/it/support/generated_proto.rs"]
mod generated_proto;

use std::path::PathBuf;

use generated_proto::Generated;

#[test]
fn checked_in_code_is_current() {
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let library = server.parent().expect("the workspace").to_path_buf();
    Generated {
        roots: &[
            "envoy/service/discovery/v3/ads.proto",
            "ratelimit/config/ratelimit/v3/rls_conf.proto",
        ],
        includes: &[server.join("proto"), library.join("proto")],
        extern_paths: &[(
            ".envoy.config.core.v3",
            "::redlimit::rls::proto::envoy::config::core::v3",
        )],
        // The client alone: the server reads its config from an xDS server.
        servers: false,
        files: &[
            "envoy.service.discovery.v3.rs",
            "google.rpc.rs",
            "ratelimit.config.ratelimit.v3.rs",
        ],
        elsewhere: &["envoy.config.core.v3.rs"],
        checked_in: server.join("src/config/xds/proto"),
        regenerate: "REDLIMIT_REGENERATE_PROTO=1 cargo test -p redlimit-server --test \
                     proto_current",
    }
    .check();
}
