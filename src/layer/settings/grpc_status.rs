//! The gRPC status of a call past its limit.

/// The gRPC status a call past its limit gets.
///
/// ```
/// use redlimit::layer::GrpcStatus;
/// assert_eq!(GrpcStatus::default(), GrpcStatus::ResourceExhausted);
/// assert_eq!(GrpcStatus::Unavailable.code(), 14);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
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

/// `resource-exhausted` or `unavailable`, as flags and config files write it.
///
/// ```
/// use redlimit::layer::GrpcStatus;
/// assert_eq!("unavailable".parse::<GrpcStatus>()?, GrpcStatus::Unavailable);
/// assert_eq!(GrpcStatus::ResourceExhausted.to_string(), "resource-exhausted");
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
impl std::str::FromStr for GrpcStatus {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "resource-exhausted" => Ok(GrpcStatus::ResourceExhausted),
            "unavailable" => Ok(GrpcStatus::Unavailable),
            _ => Err(crate::ConfigError::InvalidSetting {
                setting: "gRPC status",
                value: s.to_owned(),
                expected: "resource-exhausted or unavailable",
            }),
        }
    }
}

impl std::fmt::Display for GrpcStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GrpcStatus::ResourceExhausted => "resource-exhausted",
            GrpcStatus::Unavailable => "unavailable",
        })
    }
}
