//! The body of the layer's own HTTP error responses: plain text or an RFC 9457 problem.

/// The body of the layer's own HTTP error responses: the 429 of a denial, the 503 of fail
/// closed, and the status of [`MissingKey::Reject`](super::MissingKey::Reject). gRPC calls
/// always get a gRPC status instead, and a custom
/// [`on_rejection`](crate::layer::RateLimitBuilder::on_rejection) response replaces the 429
/// whatever this says.
///
/// - `Text` (default): `text/plain; charset=utf-8`, `Too Many Requests`.
/// - `ProblemJson`: `application/problem+json` (RFC 9457). A 429 is the problem type
///   `https://iana.org/assignments/http-problem-types#quota-exceeded` of
///   draft-ietf-httpapi-ratelimit-headers-11 (§5), whose `violated-policies` member names
///   every quota policy the request exceeded as `RateLimit-Policy` names them (`"api"`, or
///   `"api-1"`, `"api-2"`, ... for a policy of several limits), with `retry-after` (seconds,
///   as the header says) when retrying can succeed:
///
/// ```text
/// HTTP/1.1 429 Too Many Requests
/// Content-Type: application/problem+json
///
/// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
///  "title":"Request cannot be satisfied as assigned quota has been exceeded",
///  "status":429,"detail":"rate limit exceeded; retry in 2.500s",
///  "violated-policies":["api-2"],"retry-after":3}
/// ```
///
/// The other statuses are `about:blank` problems: `{"type":"about:blank","title":"Service
/// Unavailable","status":503,"detail":"rate limiter unavailable"}`.
///
/// ```
/// use std::time::Duration;
/// use redlimit::layer::RejectBody;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
/// let policy = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
/// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
///     .reject_body(RejectBody::ProblemJson)
///     .build()?;
/// assert_eq!(RejectBody::default(), RejectBody::Text);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectBody {
    /// A line of plain text (the default).
    #[default]
    Text,
    /// An RFC 9457 problem in JSON (`application/problem+json`).
    ProblemJson,
}

impl RejectBody {
    const NAMES: [(RejectBody, &'static str); 2] = [
        (RejectBody::Text, "text"),
        (RejectBody::ProblemJson, "problem-json"),
    ];
}

/// `text` or `problem-json`, as flags and config files write it.
///
/// ```
/// use redlimit::layer::RejectBody;
/// assert_eq!("problem-json".parse::<RejectBody>()?, RejectBody::ProblemJson);
/// assert_eq!(RejectBody::Text.to_string(), "text");
/// assert!("json".parse::<RejectBody>().is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
impl std::str::FromStr for RejectBody {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RejectBody::NAMES
            .into_iter()
            .find(|(_, name)| *name == s)
            .map(|(body, _)| body)
            .ok_or_else(|| crate::ConfigError::InvalidSetting {
                setting: "reject body",
                value: s.to_owned(),
                expected: "text or problem-json",
            })
    }
}

impl std::fmt::Display for RejectBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = RejectBody::NAMES
            .into_iter()
            .find(|(body, _)| body == self)
            .map_or("text", |(_, name)| name);
        f.write_str(name)
    }
}
