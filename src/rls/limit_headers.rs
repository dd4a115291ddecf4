//! [`LimitHeaders`]: envoyproxy/ratelimit's own rate-limit headers
//! (`LIMIT_RESPONSE_HEADERS_ENABLED`), with the names its `LIMIT_*_HEADER` settings give them.

use http::HeaderName;

use super::proto::envoy::config::core::v3::HeaderValue;
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::DescriptorStatus;

/// The three headers envoyproxy/ratelimit adds when `LIMIT_RESPONSE_HEADERS_ENABLED` is set,
/// taken from the status with the fewest units left (the first on a tie): the limit's
/// `requests_per_unit`, its `limit_remaining`, and the seconds until it resets
/// (`duration_until_reset`, rounded up). By default named `RateLimit-Limit`,
/// `RateLimit-Remaining` and `RateLimit-Reset`, as there.
///
/// ```
/// use redlimit::rls::LimitHeaders;
/// let headers = LimitHeaders::new("X-Limit", "X-Left", "X-Reset").unwrap();
/// assert!(LimitHeaders::new("bad name", "b", "c").is_err());
/// # let _ = headers;
/// ```
#[derive(Debug, Clone)]
pub struct LimitHeaders {
    limit: HeaderName,
    remaining: HeaderName,
    reset: HeaderName,
}

impl Default for LimitHeaders {
    fn default() -> Self {
        LimitHeaders {
            limit: HeaderName::from_static("ratelimit-limit"),
            remaining: HeaderName::from_static("ratelimit-remaining"),
            reset: HeaderName::from_static("ratelimit-reset"),
        }
    }
}

impl LimitHeaders {
    /// The headers under these names; an invalid header name is an error naming it.
    ///
    /// ```
    /// let headers = redlimit::rls::LimitHeaders::new("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset");
    /// assert!(headers.is_ok());
    /// ```
    pub fn new(limit: &str, remaining: &str, reset: &str) -> Result<Self, String> {
        let name = |text: &str| {
            HeaderName::try_from(text).map_err(|_| format!("`{text}` is not a header name"))
        };
        Ok(LimitHeaders {
            limit: name(limit)?,
            remaining: name(remaining)?,
            reset: name(reset)?,
        })
    }

    /// The headers for `statuses`; none when no status has a limit.
    pub(super) fn render(&self, statuses: &[DescriptorStatus]) -> Vec<HeaderValue> {
        let Some((tightest, limit)) = statuses
            .iter()
            .filter_map(|s| Some((s, s.current_limit.as_ref()?)))
            .min_by_key(|(s, _)| s.limit_remaining)
        else {
            return Vec::new();
        };
        let reset = tightest.duration_until_reset.as_ref().map_or(0, |d| {
            u64::try_from(d.seconds).unwrap_or(0) + u64::from(d.nanos > 0)
        });
        [
            (&self.limit, limit.requests_per_unit.to_string()),
            (&self.remaining, tightest.limit_remaining.to_string()),
            (&self.reset, reset.to_string()),
        ]
        .into_iter()
        .map(|(name, value)| HeaderValue {
            key: name.as_str().to_owned(),
            value,
            raw_value: Vec::new(),
        })
        .collect()
    }
}
