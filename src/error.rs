//! Typed errors: configuration mistakes found at build time, and store failures at run time.

use std::time::Duration;

/// A configuration that cannot be enforced. Returned by the `validate` and `try_*` methods
/// before any request is served.
///
/// ```
/// use redlimit::{ConfigError, Policy};
/// let err = Policy::new("p").validate().unwrap_err();
/// assert!(matches!(err, ConfigError::NoLimits(_)));
/// assert_eq!(err.to_string(), "policy `p` has no limits");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A limit whose numbers cannot be enforced exactly.
    #[error("invalid limit `{limit}`: {reason}")]
    InvalidLimit {
        /// The limit, as displayed.
        limit: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A policy without limits.
    #[error("policy `{0}` has no limits")]
    NoLimits(String),
    /// A policy with more than [`MAX_LIMITS`](crate::MAX_LIMITS) limits.
    #[error("policy `{0}` has more than {max} limits", max = crate::MAX_LIMITS)]
    TooManyLimits(String),
    /// A policy name that is empty, longer than 64 bytes, or not made of `A-Z a-z 0-9 . _ - /`.
    #[error("invalid policy name `{0}`: use 1 to 64 of A-Z a-z 0-9 . _ - /")]
    InvalidPolicyName(String),
    /// A key prefix that is empty, longer than 64 bytes, or not made of `A-Z a-z 0-9 . _ - : /`.
    #[error("invalid key prefix `{0}`: use 1 to 64 of A-Z a-z 0-9 . _ - : /")]
    InvalidPrefix(String),
    /// An algorithm name that is not one of `fixed-window`, `sliding-window`, `sliding-log`,
    /// `token-bucket`, `gcra`.
    #[error("unknown algorithm `{0}`: expected fixed-window, sliding-window, sliding-log, token-bucket or gcra")]
    UnknownAlgorithm(String),
    /// A duration not of the form `<integer><ms|s|m|h|d>`.
    #[error("invalid duration `{0}`: expected an integer followed by ms, s, m, h or d")]
    InvalidDuration(String),
    /// A rate not of the form `N/DURATION`.
    #[error("invalid rate `{0}`: expected N/DURATION, e.g. 5/3s or 1000/1h")]
    InvalidRate(String),
    /// A store-error mode other than `open` or `closed`.
    #[error("unknown store-error mode `{0}`: expected open, closed or local")]
    UnknownStoreErrorMode(String),
    /// A trusted proxy range that is not an address or a CIDR, or that would trust every
    /// address (`/0`).
    #[error("invalid trusted proxy range `{range}`: {reason}")]
    InvalidRange {
        /// The range, as given.
        range: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A grouping prefix length outside `1..=32` (IPv4) or `1..=128` (IPv6).
    #[error("invalid IPv{version} prefix length {len}: expected 1 to {max}", max = if *version == 4 { 32 } else { 128 })]
    InvalidPrefixLength {
        /// 4 or 6.
        version: u8,
        /// The length given.
        len: u8,
    },
    /// A route pattern that is not `[METHOD] /path` or `[METHOD] /prefix*`.
    #[error("invalid route `{route}`: {reason}")]
    InvalidRoute {
        /// The pattern, as given.
        route: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A Redis URL or connection setting the client rejected.
    #[error("invalid Redis configuration: {0}")]
    Redis(String),
}

/// Why a store could not decide. The layer turns every one of these into its failure policy
/// (fail open by default); it never reaches the client as a 5xx from the layer itself.
///
/// ```
/// use std::time::Duration;
/// use redlimit::StoreError;
/// let err = StoreError::Timeout(Duration::from_millis(100));
/// assert_eq!(err.to_string(), "the store did not answer within 100ms");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The circuit breaker is open after repeated failures: the store was not called.
    #[error("the store is failing; circuit open, not called")]
    CircuitOpen,
    /// No answer within the deadline. The call is never replayed: it may have run.
    #[error("the store did not answer within {0:?}")]
    Timeout(Duration),
    /// The connection failed or the server answered with an error.
    #[error("store connection or command failed: {0}")]
    Backend(String),
    /// The server answered something the scripts never return.
    #[error("unexpected reply from the store: {0}")]
    UnexpectedReply(String),
    /// The store was configured wrongly (a bad URL or prefix).
    #[error(transparent)]
    Config(#[from] ConfigError),
}

#[cfg(feature = "redis")]
impl From<redis::RedisError> for StoreError {
    fn from(err: redis::RedisError) -> Self {
        StoreError::Backend(err.to_string())
    }
}
