//! Rendering a decision as response headers.

use std::cell::RefCell;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use super::settings::HeaderStyle;
use crate::decision::{Decision, LimitState};
use crate::limit::Algorithm;

pub(crate) const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub(crate) const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub(crate) const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
pub(crate) const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub(crate) const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The numbers below 1 000 written out one after the other ("0123...998999"): the value of a
/// header that says one of them is a slice of this text, shared, with no allocation.
const SMALL: [u8; 2890] = small_numbers();

const fn small_numbers() -> [u8; 2890] {
    let mut text = [0u8; 2890];
    let (mut n, mut at) = (0u16, 0);
    while n < 1000 {
        if n >= 100 {
            text[at] = b'0' + (n / 100) as u8;
            at += 1;
        }
        if n >= 10 {
            text[at] = b'0' + (n / 10 % 10) as u8;
            at += 1;
        }
        text[at] = b'0' + (n % 10) as u8;
        at += 1;
        n += 1;
    }
    text
}

/// Which header a larger number is for: each remembers the last one it rendered on this
/// thread (a policy's count never changes; the reset, a Unix second, changes once a second).
#[derive(Clone, Copy)]
enum Slot {
    Limit = 0,
    Reset = 1,
    Other,
}

/// "00", "01", … "99", one after the other.
const PAIRS: [u8; 200] = digit_pairs();

const fn digit_pairs() -> [u8; 200] {
    let mut pairs = [0u8; 200];
    let mut n = 0;
    while n < 100 {
        pairs[2 * n] = b'0' + (n / 10) as u8;
        pairs[2 * n + 1] = b'0' + (n % 10) as u8;
        n += 1;
    }
    pairs
}

/// How many bytes of digits [`written`] asks the allocator for at a time.
const CHUNK: usize = 4096;

thread_local! {
    static LAST: RefCell<[Option<(u64, HeaderValue)>; 2]> = const { RefCell::new([None, None]) };
    /// Digits of the numbers this thread wrote, each value a shared slice of it.
    static DIGITS: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// The header value of `n` (1 000 or more): its digits written into this thread's current
/// chunk, and the value a shared slice of it. The allocator is asked once per chunk (a few
/// hundred numbers), not once per number; a chunk is freed when the last value in it is.
fn written(n: u64) -> HeaderValue {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    // Two digits a division, from the table of "00" to "99".
    while rest >= 100 {
        let pair = 2 * (rest % 100) as usize;
        rest /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if rest >= 10 {
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[2 * rest as usize..2 * rest as usize + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + rest as u8;
    }
    let digits = &digits[at..];
    DIGITS.with(|chunk| {
        let mut chunk = chunk.borrow_mut();
        if chunk.capacity() - chunk.len() < digits.len() {
            *chunk = BytesMut::with_capacity(CHUNK);
        }
        chunk.extend_from_slice(digits);
        HeaderValue::from_maybe_shared(chunk.split().freeze())
            .unwrap_or_else(|_| HeaderValue::from(n))
    })
}

/// The header value of `n`, written without formatting machinery and, where it can be, without
/// an allocation: a number below 1 000 is a slice of [`SMALL`]; a larger one the same as the
/// last of its `slot` on this thread is that value again (its bytes shared, not copied); any
/// other is [`written`] into a chunk shared with the numbers before it.
fn number(n: u64, slot: Slot) -> HeaderValue {
    if let Ok(small) = u16::try_from(n) {
        let (start, len) = match small {
            0..=9 => (small as usize, 1),
            10..=99 => (10 + 2 * (small as usize - 10), 2),
            100..=999 => (190 + 3 * (small as usize - 100), 3),
            _ => (0, 0),
        };
        if len > 0
            && let Ok(value) =
                HeaderValue::from_maybe_shared(Bytes::from_static(&SMALL[start..start + len]))
        {
            return value;
        }
    }
    if matches!(slot, Slot::Other) {
        return written(n);
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        match &mut last[slot as usize] {
            Some((m, value)) if *m == n => value.clone(),
            cached => {
                let value = written(n);
                *cached = Some((n, value.clone()));
                value
            }
        }
    })
}

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
    fn numbers_read_as_their_digits_whatever_the_path() {
        for n in (0..1_100).chain([9_999, 10_000, 1_760_000_000, u64::MAX]) {
            for slot in [Slot::Limit, Slot::Reset, Slot::Other] {
                // Twice: the second may come from the thread's last value.
                for _ in 0..2 {
                    assert_eq!(number(n, slot), HeaderValue::from(n), "{n}");
                }
            }
        }
        // A slot remembers only its own number.
        assert_eq!(number(5_000, Slot::Limit), "5000");
        assert_eq!(number(7_000, Slot::Reset), "7000");
        assert_eq!(number(5_000, Slot::Limit), "5000");
        assert_eq!(number(6_000, Slot::Limit), "6000");
    }

    #[test]
    fn written_numbers_keep_their_digits_after_their_chunk_is_replaced() {
        // About forty chunks' worth, all held at once, then read.
        let values: Vec<(u64, HeaderValue)> = (0..8_000u64)
            .map(|i| u64::MAX - i * 7_919_000_001)
            .chain([1_000, 1_001, 99_999_999])
            .map(|n| (n, written(n)))
            .collect();
        for (n, value) in &values {
            assert_eq!(*value, HeaderValue::from(*n), "{n}");
        }
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
