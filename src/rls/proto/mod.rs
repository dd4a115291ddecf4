//! The Envoy RLS v3 and RLQS v3 messages and services, generated from the `.proto` files vendored in
//! `proto/` (Envoy's data-plane-api, Apache-2.0; see `proto/README.md`) by `protox` and
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
            /// `envoy.config.core.v3`: `HeaderValue`, and `ControlPlane` and `Node`, which
            /// redlimit-server's xDS client uses (a trimmed, wire-compatible copy).
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
        /// `envoy.service.ratelimit.*`
        pub mod ratelimit {
            /// `envoy.service.ratelimit.v3`: `RateLimitService/ShouldRateLimit`.
            pub mod v3 {
                include!("envoy.service.ratelimit.v3.rs");
            }
        }
        /// `envoy.service.rate_limit_quota.*`
        pub mod rate_limit_quota {
            /// `envoy.service.rate_limit_quota.v3`: `RateLimitQuotaService/StreamRateLimitQuotas`
            /// (RLQS), served by `redlimit::rlqs` (feature `rlqs`).
            pub mod v3 {
                include!("envoy.service.rate_limit_quota.v3.rs");
            }
        }
    }
    /// `envoy.type.*`
    pub mod r#type {
        /// `envoy.type.v3`: `RateLimitUnit`, and RLQS's `RateLimitStrategy` and `TokenBucket`.
        pub mod v3 {
            include!("envoy.r#type.v3.rs");
        }
    }
}
