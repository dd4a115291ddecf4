//! The gRPC status of a call past its limit.

/// The gRPC status a call past its limit gets.
///
/// ```
/// use redlimit::layer::GrpcStatus;
/// assert_eq!(GrpcStatus::default(), GrpcStatus::ResourceExhausted);
/// assert_eq!(GrpcStatus::Unavailable.code(), 14);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrpcStatus {
    /// `RESOURCE_EXHAUSTED` (8): the standard code for a rate limit.
    #[default]
    ResourceExhausted,
    /// `UNAVAILABLE` (14): for proxies and clients that retry only on it.
    Unavailable,
}

impl GrpcStatus {
    /// The numeric code.
    pub fn code(self) -> i32 {
        match self {
            GrpcStatus::ResourceExhausted => 8,
            GrpcStatus::Unavailable => 14,
        }
    }
}
