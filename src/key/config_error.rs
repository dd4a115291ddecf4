//! Mistakes in a key extractor's configuration, found when it is built, never per request.

/// Why a key extractor's configuration was rejected (a trusted range that is not a CIDR, a
/// prefix length out of range). Returned by the `try_*` constructors; their panicking twins
/// print it.
///
/// ```
/// use redlimit::{ClientIp, KeyConfigError};
/// let err = ClientIp::try_trusting(["10.0.0.0/33"]).unwrap_err();
/// assert!(matches!(err, KeyConfigError::InvalidRange { .. }));
/// assert!(err.to_string().contains("10.0.0.0/33"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyConfigError {
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
}
