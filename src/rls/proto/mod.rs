//! The Envoy RLS v3 messages and service, and the ADS stream (with envoyproxy/ratelimit's
//! `RateLimitConfig` resource) that redlimit-server's `CONFIG_TYPE=GRPC_XDS_SOTW` reads its
//! config from, generated from the `.proto` files vendored in `proto/` (Envoy's
//! data-plane-api, envoyproxy/ratelimit's `rls_conf.proto` and Google's `google.rpc.Status`,
//! all Apache-2.0; see `proto/README.md`) by `protox` and
//! `tonic-prost-build`, and checked in: building redlimit needs neither `protoc` nor a build
//! script. `tests/it/rls/proto_current.rs` fails when this code is stale, and regenerates it
//! with `REDLIMIT_REGENERATE_PROTO=1 cargo test --all-features --test it -- rls::proto_current`.
//! The generated code carries no comments (Envoy's are reStructuredText): the `.proto` files
//! are its documentation.
//!
//! The module tree follows the protobuf packages, as the generated code's paths expect.
//!
//! ```
//! use redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitRequest;
//! let request = RateLimitRequest { domain: "envoy".into(), ..Default::default() };
//! assert!(request.descriptors.is_empty());
//! ```
#![allow(missing_docs, unreachable_pub, missing_debug_implementations)]
#![allow(clippy::all, clippy::pedantic)]

/// Envoy's protobuf packages.
pub mod envoy {
    /// `envoy.config.*`
    pub mod config {
        /// `envoy.config.core.*`
        pub mod core {
            /// `envoy.config.core.v3`: `HeaderValue`, `ControlPlane` and `Node` (a trimmed,
            /// wire-compatible copy).
            pub mod v3 {
                include!("envoy.config.core.v3.rs");
            }
        }
    }
    /// `envoy.extensions.*`
    pub mod extensions {
        /// `envoy.extensions.common.*`
        pub mod common {
            /// `envoy.extensions.common.ratelimit.*`
            pub mod ratelimit {
                /// `envoy.extensions.common.ratelimit.v3`: the request's descriptors.
                pub mod v3 {
                    include!("envoy.extensions.common.ratelimit.v3.rs");
                }
            }
        }
    }
    /// `envoy.service.*`
    pub mod service {
        /// `envoy.service.discovery.*`
        pub mod discovery {
            /// `envoy.service.discovery.v3`: `AggregatedDiscoveryService/StreamAggregatedResources`
            /// (state of the world only; a trimmed, wire-compatible copy).
            pub mod v3 {
                include!("envoy.service.discovery.v3.rs");
            }
        }
        /// `envoy.service.ratelimit.*`
        pub mod ratelimit {
            /// `envoy.service.ratelimit.v3`: `RateLimitService/ShouldRateLimit`.
            pub mod v3 {
                include!("envoy.service.ratelimit.v3.rs");
            }
        }
    }
    /// `envoy.type.*`
    pub mod r#type {
        /// `envoy.type.v3`: `RateLimitUnit`.
        pub mod v3 {
            include!("envoy.r#type.v3.rs");
        }
    }
}

/// Google's protobuf packages (beyond the well-known types, which are `prost_types`').
pub mod google {
    /// `google.rpc`: `Status` (an xDS NACK's `error_detail`).
    pub mod rpc {
        include!("google.rpc.rs");
    }
}

/// envoyproxy/ratelimit's protobuf packages.
pub mod ratelimit {
    /// `ratelimit.config.*`
    pub mod config {
        /// `ratelimit.config.ratelimit.*`
        pub mod ratelimit {
            /// `ratelimit.config.ratelimit.v3`: `RateLimitConfig`, the xDS resource of one
            /// domain's config.
            pub mod v3 {
                include!("ratelimit.config.ratelimit.v3.rs");
            }
        }
    }
}
