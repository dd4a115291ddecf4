//! Rendering a decision as response headers.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use super::header_style::HeaderStyle;
use crate::decision::Decision;

const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Whole seconds, rounded up: a client that waits this long is never early.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// What a decision's rate-limit headers say, kept (small, no allocation for the default
/// style) until the response they go on exists.
#[derive(Debug, Clone, Default)]
pub(crate) struct RateHeaders {
    /// Limit, remaining and reset (Unix seconds) of the governing limit, for `X-RateLimit-*`.
    x: Option<[u64; 3]>,
    /// Policy name, limit, window, remaining and seconds to reset, for the IETF fields.
    ietf: Option<(Arc<str>, [u64; 4])>,
    /// Seconds to wait, for `Retry-After`.
    retry_after: Option<u64>,
}

impl RateHeaders {
    pub(crate) fn of(decision: &Decision, style: HeaderStyle) -> Self {
        let mut headers = RateHeaders {
            retry_after: decision.retry_after().map(|wait| ceil_secs(wait).max(1)),
            ..RateHeaders::default()
        };
        if let Some(state) = decision.governing() {
            let (limit, remaining) = (state.limit().count(), state.remaining());
            if matches!(style, HeaderStyle::XRateLimit | HeaderStyle::Both) {
                let reset = (decision.evaluated_at() + state.reset_after())
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, ceil_secs);
                headers.x = Some([limit, remaining, reset]);
            }
            if matches!(style, HeaderStyle::Ietf | HeaderStyle::Both) {
                let window = ceil_secs(state.limit().period());
                let reset_after = ceil_secs(state.reset_after());
                headers.ietf = Some((
                    decision.policy_arc(),
                    [limit, window, remaining, reset_after],
                ));
            }
        }
        headers
    }

    /// The same headers without `Retry-After` (for a request let through in shadow mode).
    pub(crate) fn without_retry_after(mut self) -> Self {
        self.retry_after = None;
        self
    }

    /// Inserts the headers `target` does not have yet: an inner (more specific) layer's
    /// rate-limit headers win over an outer one's.
    pub(crate) fn write_missing(&self, target: &mut HeaderMap) {
        if let Some([limit, remaining, reset]) = self.x {
            target
                .entry(X_LIMIT)
                .or_insert_with(|| HeaderValue::from(limit));
            target
                .entry(X_REMAINING)
                .or_insert_with(|| HeaderValue::from(remaining));
            target
                .entry(X_RESET)
                .or_insert_with(|| HeaderValue::from(reset));
        }
        if let Some((name, [limit, window, remaining, reset_after])) = &self.ietf {
            let policy = format!("\"{name}\";q={limit};w={window}");
            let current = format!("\"{name}\";r={remaining};t={reset_after}");
            // Policy names are validated to `A-Z a-z 0-9 . _ - /`, so these always parse.
            if let (Ok(p), Ok(c)) = (
                HeaderValue::try_from(policy),
                HeaderValue::try_from(current),
            ) {
                target.entry(POLICY).or_insert(p);
                target.entry(RATELIMIT).or_insert(c);
            }
        }
        if let Some(wait) = self.retry_after {
            target
                .entry(RETRY_AFTER)
                .or_insert_with(|| HeaderValue::from(wait));
        }
    }
}

/// The headers a decision renders to.
pub(crate) fn render(decision: &Decision, style: HeaderStyle) -> HeaderMap {
    let mut headers = HeaderMap::new();
    RateHeaders::of(decision, style).write_missing(&mut headers);
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
