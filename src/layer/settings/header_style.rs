//! Which rate-limit headers responses carry.

/// Which rate-limit headers responses carry. `Retry-After` is sent on every 429 whatever the
/// style (except when retrying can never succeed).
///
/// - `XRateLimit` (default), GitHub's: `X-RateLimit-Limit: 10`, `X-RateLimit-Remaining: 3`,
///   `X-RateLimit-Reset: 1767225600` (Unix seconds when the governing limit is fully free).
/// - `Ietf`, the IETF draft's structured fields: `RateLimit-Policy: "api";q=10;w=1` and
///   `RateLimit: "api";r=3;t=1` (`t` in seconds from now), one item per limit of the policy
///   (`"api-1"`, `"api-2"`, ... when it has several), from the same decision.
///
/// ```
/// use redlimit::layer::HeaderStyle;
/// assert_eq!(HeaderStyle::default(), HeaderStyle::XRateLimit);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeaderStyle {
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    #[default]
    XRateLimit,
    /// `RateLimit-Policy` and `RateLimit` (IETF draft).
    Ietf,
    /// Both of the above.
    Both,
    /// No rate-limit headers (only `Retry-After` on 429).
    None,
}
