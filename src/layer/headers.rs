//! Rendering a decision as response headers.

use std::time::{Duration, UNIX_EPOCH};

use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use crate::decision::Decision;

const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Which rate-limit headers responses carry. `Retry-After` is sent on every 429 whatever the
/// style (except when retrying can never succeed).
///
/// - `XRateLimit` (default), GitHub's: `X-RateLimit-Limit: 10`, `X-RateLimit-Remaining: 3`,
///   `X-RateLimit-Reset: 1767225600` (Unix seconds when the governing limit is fully free).
/// - `Ietf`, the IETF draft's structured fields: `RateLimit-Policy: "api";q=10;w=1` and
///   `RateLimit: "api";r=3;t=1` (`t` in seconds from now).
///
/// ```
/// use redlimit::HeaderStyle;
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

/// Whole seconds, rounded up: a client that waits this long is never early.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// The headers a decision renders to, ready to append to a response.
pub(crate) fn render(decision: &Decision, style: HeaderStyle) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(state) = decision.governing() {
        if matches!(style, HeaderStyle::XRateLimit | HeaderStyle::Both) {
            let reset = (decision.evaluated_at() + state.reset_after())
                .duration_since(UNIX_EPOCH)
                .map_or(0, ceil_secs);
            headers.insert(X_LIMIT, HeaderValue::from(state.limit().count()));
            headers.insert(X_REMAINING, HeaderValue::from(state.remaining()));
            headers.insert(X_RESET, HeaderValue::from(reset));
        }
        if matches!(style, HeaderStyle::Ietf | HeaderStyle::Both) {
            let name = decision.policy();
            let window = ceil_secs(state.limit().period());
            let policy = format!("\"{name}\";q={};w={window}", state.limit().count());
            let current = format!(
                "\"{name}\";r={};t={}",
                state.remaining(),
                ceil_secs(state.reset_after())
            );
            // Policy names are validated to `A-Z a-z 0-9 . _ - /`, so these always parse.
            if let (Ok(p), Ok(c)) = (
                HeaderValue::try_from(policy),
                HeaderValue::try_from(current),
            ) {
                headers.insert(POLICY, p);
                headers.insert(RATELIMIT, c);
            }
        }
    }
    if let Some(wait) = decision.retry_after() {
        headers.insert(RETRY_AFTER, HeaderValue::from(ceil_secs(wait).max(1)));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up() {
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(3)), 3);
        assert_eq!(ceil_secs(Duration::from_millis(3001)), 4);
        assert_eq!(ceil_secs(Duration::ZERO), 0);
    }
}
