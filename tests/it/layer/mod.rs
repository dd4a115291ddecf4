//! The layer through HTTP and gRPC: headers, keys, routes, shadow mode, tracing, the deny
//! cache, config files, the health metrics, requests left undecided, estimates settled to
//! the real cost, and the public API's compile-time guarantees.

#[cfg(all(feature = "admin", feature = "redis"))]
mod admin_api;
#[cfg(all(feature = "admin", feature = "redis"))]
mod admin_clients;
mod api;
#[cfg(all(feature = "axum", feature = "redis"))]
mod compose;
#[cfg(all(feature = "axum", feature = "config", feature = "redis"))]
mod config_empty;
#[cfg(all(feature = "axum", feature = "config", feature = "redis"))]
mod config_file;
#[cfg(all(feature = "axum", feature = "redis"))]
mod deny_cache;
#[cfg(all(feature = "axum", feature = "grpc", feature = "redis"))]
mod grpc;
#[cfg(feature = "grpc")]
mod grpc_tls;
#[cfg(all(feature = "axum", feature = "grpc", feature = "redis"))]
mod grpc_web;
#[cfg(all(
    feature = "axum",
    feature = "config",
    feature = "metrics",
    feature = "redis"
))]
mod health_metrics;
#[cfg(all(feature = "axum", feature = "redis"))]
mod http;
#[cfg(feature = "jwks")]
mod jwks;
#[cfg(all(feature = "axum", feature = "jwt", feature = "redis"))]
mod keys;
#[cfg(all(feature = "axum", feature = "redis"))]
mod problem_json;
#[cfg(all(feature = "axum", feature = "metrics", feature = "redis"))]
mod prometheus_buckets;
#[cfg(all(feature = "axum", feature = "metrics", feature = "redis"))]
mod reconcile;
#[cfg(all(feature = "axum", feature = "redis"))]
mod routes;
#[cfg(all(feature = "axum", feature = "metrics", feature = "redis"))]
mod shadow;
#[cfg(all(feature = "axum", feature = "redis"))]
mod tracing;
#[cfg(all(feature = "axum", feature = "metrics", feature = "redis"))]
mod undecided;
