//! Black-box tests of the examples (`examples/server`, `examples/grpc`, `examples/outbound`,
//! `examples/outbound_grpc`, `examples/llm_gateway`) as separate processes.

#[cfg(all(feature = "grpc", feature = "redis"))]
mod grpc_example;
#[cfg(all(feature = "axum", feature = "redis"))]
mod llm_gateway_example;
#[cfg(all(feature = "axum", feature = "redis"))]
mod outbound_example;
#[cfg(all(feature = "axum", feature = "redis"))]
mod outbound_grpc_example;
#[cfg(all(
    unix,
    feature = "admin",
    feature = "config",
    feature = "metrics",
    feature = "redis"
))]
mod production_example;
#[cfg(all(feature = "admin", feature = "redis"))]
mod server_admin_names;
#[cfg(all(feature = "axum", feature = "jwt", feature = "redis"))]
mod server_example;
#[cfg(all(feature = "axum", feature = "metrics", feature = "redis"))]
mod server_ops;
#[cfg(feature = "redis")]
mod server_penalty_refund;
