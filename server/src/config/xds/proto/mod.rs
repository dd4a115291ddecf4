//! The xDS client's protobuf code: the ADS stream (`envoy.service.discovery.v3`, the client of
//! `StreamAggregatedResources` alone), its NACK's `google.rpc.Status`, and envoyproxy/ratelimit's
//! `RateLimitConfig` resource (`ratelimit.config.ratelimit.v3`). Generated from the `.proto`
//! files vendored in `server/proto/` (see its README) by `protox` and `tonic-prost-build`, and
//! checked in: `server/tests/proto_current.rs` fails when this code is stale, and regenerates it
//! with `REDLIMIT_REGENERATE_PROTO=1 cargo test -p redlimit-server --test proto_current`.
//!
//! `envoy.config.core.v3` (the `Node` a request names) is the library's
//! (`redlimit::rls::proto`), where the RLS's `HeaderValue` is generated from the same file.
//! The module tree follows the protobuf packages, as the generated code's paths expect.
#![allow(
    dead_code,
    unreachable_pub,
    missing_docs,
    missing_debug_implementations
)]
#![allow(clippy::all, clippy::pedantic)]

/// Envoy's protobuf packages.
pub(crate) mod envoy {
    /// `envoy.service.*`
    pub(crate) mod service {
        /// `envoy.service.discovery.*`
        pub(crate) mod discovery {
            /// `envoy.service.discovery.v3`: `AggregatedDiscoveryService/StreamAggregatedResources`
            /// (state of the world only; a trimmed, wire-compatible copy).
            pub(crate) mod v3 {
                include!("envoy.service.discovery.v3.rs");
            }
        }
    }
}

/// Google's protobuf packages (beyond the well-known types, which are `prost_types`').
pub(crate) mod google {
    /// `google.rpc`: `Status` (an xDS NACK's `error_detail`).
    pub(crate) mod rpc {
        include!("google.rpc.rs");
    }
}

/// envoyproxy/ratelimit's protobuf packages.
pub(crate) mod ratelimit {
    /// `ratelimit.config.*`
    pub(crate) mod config {
        /// `ratelimit.config.ratelimit.*`
        pub(crate) mod ratelimit {
            /// `ratelimit.config.ratelimit.v3`: `RateLimitConfig`, the xDS resource of one
            /// domain's config.
            pub(crate) mod v3 {
                include!("ratelimit.config.ratelimit.v3.rs");
            }
        }
    }
}
