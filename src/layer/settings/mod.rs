//! The layer's settings: one type per file, re-exported by [`layer`](crate::layer).

pub(super) mod circuit_breaker;
mod grpc_status;
mod header_style;
mod missing_key;
mod on_store_error;
mod shadow;

pub use circuit_breaker::CircuitBreaker;
pub use grpc_status::GrpcStatus;
pub use header_style::HeaderStyle;
pub use missing_key::MissingKey;
pub use on_store_error::OnStoreError;
pub use shadow::Shadow;
