//! Rendering a decision as response headers.

use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use super::HeaderStyle;
use super::header_number::{Slot, number};
use crate::decision::{Decision, LimitState};
use crate::limit::Algorithm;

pub(crate) const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub(crate) const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub(crate) const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
pub(crate) const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub(crate) const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Whole seconds, rounded up: a client that waits this long is never early.
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// What a decision's rate-limit headers say, kept (small, no allocation for the default
/// style) until the response they go on exists.
#[derive(Debug, Clone, Default)]
pub(crate) struct RateHeaders {
    /// Limit, remaining and reset (Unix seconds) of the governing limit, for `X-RateLimit-*`.
    x: Option<[u64; 3]>,
    /// The IETF fields' values, `RateLimit-Policy` then `RateLimit`: one item per limit
    /// (boxed: an opt-in style must not grow every request's state).
    ietf: Option<Box<(HeaderValue, HeaderValue)>>,
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
                let reset = decision.reset_unix_secs().unwrap_or(0);
                headers.x = Some([limit, remaining, reset]);
            }
            if matches!(style, HeaderStyle::Ietf | HeaderStyle::Both) {
                headers.ietf = ietf_fields(decision);
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
                .or_insert_with(|| number(limit, Slot::Limit));
            target
                .entry(X_REMAINING)
                .or_insert_with(|| number(remaining, Slot::Other));
            target
                .entry(X_RESET)
                .or_insert_with(|| number(reset, Slot::Reset));
        }
        if self.ietf.is_some() || self.retry_after.is_some() {
            self.write_rest(target);
        }
    }

    /// The IETF fields and `Retry-After`, where they go (out of line: the default style on an
    /// admitted request has neither).
    #[inline(never)]
    fn write_rest(&self, target: &mut HeaderMap) {
        if let Some(fields) = &self.ietf {
            let (policy, current) = &**fields;
            target.entry(POLICY).or_insert_with(|| policy.clone());
            target.entry(RATELIMIT).or_insert_with(|| current.clone());
        }
        if let Some(wait) = self.retry_after {
            target
                .entry(RETRY_AFTER)
                .or_insert_with(|| number(wait, Slot::Other));
        }
    }
}

/// The IETF draft's fields for every limit of the decision, from the same atomic evaluation:
/// `RateLimit-Policy: "api-1";q=10;w=1, "api-2";q=1000;w=3600` and
/// `RateLimit: "api-1";r=3;t=1, "api-2";r=997;t=3600`. A policy of one limit names its item
/// after the policy (`"api"`); with several, item `i` (from 1, in the policy's order) is
/// `"{policy}-{i}"`, so a client can tell which quota ran out.
fn ietf_fields(decision: &Decision) -> Option<Box<(HeaderValue, HeaderValue)>> {
    let states = decision.limits();
    let mut fields = IetfFields::default();
    for (i, state) in states.iter().enumerate() {
        let name = decision.policy();
        if states.len() == 1 {
            fields.push(name, state);
        } else {
            fields.push(&format!("{name}-{}", i + 1), state);
        }
    }
    // Policy names are validated to `A-Z a-z 0-9 . _ - /`, so these always parse.
    fields.finish().map(Box::new)
}

/// The IETF draft's two fields, `RateLimit-Policy` and `RateLimit`, one item per limit.
#[derive(Debug, Default)]
pub(crate) struct IetfFields {
    policy: String,
    current: String,
}

impl IetfFields {
    /// Adds the item of `state`'s limit, named `name` (written as a structured-field string:
    /// `"` and `\` escaped, other bytes outside printable ASCII dropped).
    pub(crate) fn push(&mut self, name: &str, state: &LimitState) {
        let separator = if self.policy.is_empty() { "" } else { ", " };
        let name: String = name
            .chars()
            .filter(|c| (' '..='~').contains(c))
            .flat_map(|c| {
                (matches!(c, '"' | '\\').then_some('\\'))
                    .into_iter()
                    .chain([c])
            })
            .collect();
        let (limit, window) = (state.limit().count(), ceil_secs(state.limit().period()));
        // draft-ietf-httpapi-ratelimit-headers-11 §6 (example B.1.4): with no quota left,
        // `t` is the wait until quota returns, as `Retry-After` says it, not the time until
        // the limit is whole again.
        let reset = match (state.remaining(), state.retry_after()) {
            (0, Some(wait)) => ceil_secs(wait).max(1),
            _ => ceil_secs(state.reset_after()),
        };
        let remaining = state.remaining();
        if state.limit().algorithm() == Algorithm::Concurrency {
            // The draft's quota unit for requests in flight; no window (a lease timeout is
            // not one), and no reset (a slot returns when a response ends).
            self.policy.push_str(&format!(
                "{separator}\"{name}\";q={limit};qu=\"concurrent-requests\""
            ));
            self.current
                .push_str(&format!("{separator}\"{name}\";r={remaining}"));
            return;
        }
        if state.limit().aligned_to().is_some() {
            // A calendar's windows differ in length (months, days of a clock change): the
            // draft's `w` is optional, and no one number would be true.
            self.policy
                .push_str(&format!("{separator}\"{name}\";q={limit}"));
        } else {
            self.policy
                .push_str(&format!("{separator}\"{name}\";q={limit};w={window}"));
        }
        self.current
            .push_str(&format!("{separator}\"{name}\";r={remaining};t={reset}"));
    }

    /// `RateLimit-Policy` and `RateLimit`; `None` if no item was added.
    pub(crate) fn finish(self) -> Option<(HeaderValue, HeaderValue)> {
        if self.policy.is_empty() {
            return None;
        }
        Some((
            HeaderValue::try_from(self.policy).ok()?,
            HeaderValue::try_from(self.current).ok()?,
        ))
    }
}

/// The headers a decision renders to (for the tests and `__private`: the layer writes them
/// into a response's own map).
#[cfg(any(test, feature = "__test-hooks"))]
pub(crate) fn render(decision: &Decision, style: HeaderStyle) -> HeaderMap {
    let mut headers = HeaderMap::new();
    RateHeaders::of(decision, style).write_missing(&mut headers);
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::{Limit, LimitState, Policy};
    use std::time::SystemTime;

    fn text(headers: &HeaderMap, name: &str) -> String {
        headers[name].to_str().unwrap().to_owned()
    }

    #[test]
    fn ietf_fields_list_every_limit_and_legacy_ones_the_tightest() {
        let per_second = Limit::gcra(10, Duration::from_secs(1)).unwrap();
        let per_hour = Limit::fixed_window(1000, Duration::from_secs(3600)).unwrap();
        let policy = Policy::new("api", [per_second, per_hour]).unwrap();
        let decision = Decision::new(
            &policy,
            SystemTime::UNIX_EPOCH + Duration::from_secs(100),
            [
                LimitState::allowed(per_second, 7, Duration::from_millis(300)),
                LimitState::allowed(per_hour, 2, Duration::from_secs(1800)),
            ],
        )
        .unwrap();
        let headers = render(&decision, HeaderStyle::Both);
        assert_eq!(
            text(&headers, "ratelimit-policy"),
            "\"api-1\";q=10;w=1, \"api-2\";q=1000;w=3600"
        );
        assert_eq!(
            text(&headers, "ratelimit"),
            "\"api-1\";r=7;t=1, \"api-2\";r=2;t=1800"
        );
        // The legacy fields keep the most restrictive limit: the hourly one, 2 left.
        assert_eq!(text(&headers, "x-ratelimit-limit"), "1000");
        assert_eq!(text(&headers, "x-ratelimit-remaining"), "2");
        assert_eq!(text(&headers, "x-ratelimit-reset"), "1900");
    }

    #[test]
    fn with_no_quota_left_t_is_the_wait_until_quota_returns() {
        // 10 an hour, spent: whole again in an hour, but one unit back in 6 minutes.
        let hourly = Limit::gcra(10, Duration::from_secs(3600)).unwrap();
        let policy = Policy::new("api", [hourly]).unwrap();
        let denied = LimitState::denied(
            hourly,
            0,
            Duration::from_secs(3600),
            Duration::from_millis(359_500),
        );
        let decision = Decision::new(&policy, SystemTime::now(), [denied]).unwrap();
        let headers = render(&decision, HeaderStyle::Ietf);
        assert_eq!(text(&headers, "ratelimit"), "\"api\";r=0;t=360");
        assert_eq!(text(&headers, "retry-after"), "360");
    }

    #[test]
    fn a_single_limit_is_named_after_its_policy() {
        let limit = Limit::gcra(5, Duration::from_secs(60)).unwrap();
        let policy = Policy::new("login", [limit]).unwrap();
        let decision = Decision::new(
            &policy,
            SystemTime::now(),
            [LimitState::allowed(limit, 4, Duration::from_secs(12))],
        )
        .unwrap();
        let headers = render(&decision, HeaderStyle::Ietf);
        assert_eq!(text(&headers, "ratelimit-policy"), "\"login\";q=5;w=60");
        assert_eq!(text(&headers, "ratelimit"), "\"login\";r=4;t=12");
        assert!(!headers.contains_key("x-ratelimit-limit"));
    }

    #[test]
    fn a_concurrency_limit_is_a_quota_of_concurrent_requests_without_a_window() {
        let in_flight = Limit::concurrency(3, Duration::from_secs(30)).unwrap();
        let per_minute = Limit::gcra(60, Duration::from_secs(60)).unwrap();
        let policy = Policy::new("up", [in_flight, per_minute]).unwrap();
        let decision = Decision::new(
            &policy,
            SystemTime::now(),
            [
                LimitState::denied(
                    in_flight,
                    0,
                    Duration::from_secs(30),
                    Duration::from_secs(1),
                ),
                LimitState::allowed(per_minute, 59, Duration::from_secs(1)),
            ],
        )
        .unwrap();
        let headers = render(&decision, HeaderStyle::Both);
        assert_eq!(
            text(&headers, "ratelimit-policy"),
            "\"up-1\";q=3;qu=\"concurrent-requests\", \"up-2\";q=60;w=60"
        );
        assert_eq!(
            text(&headers, "ratelimit"),
            "\"up-1\";r=0, \"up-2\";r=59;t=1"
        );
        assert_eq!(text(&headers, "retry-after"), "1");
        assert_eq!(text(&headers, "x-ratelimit-limit"), "3");
    }

    #[test]
    fn rounds_up() {
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(3)), 3);
        assert_eq!(ceil_secs(Duration::from_millis(3001)), 4);
        assert_eq!(ceil_secs(Duration::ZERO), 0);
    }
}
