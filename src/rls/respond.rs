//! The response: one status per descriptor in request order, the overall code (as
//! envoyproxy/ratelimit decides it), and the optional rate-limit headers
//! (`response_headers_to_add`: the draft-03 `X-RateLimit-*` headers as Envoy builds them from
//! the statuses, and the IETF draft's `RateLimit-Policy` / `RateLimit` fields, the layer's
//! rendering, one item per limit).

use std::time::Duration;

use super::plan::{Counter, Mode, Plan, Resolved};
use super::proto::envoy::config::core::v3::HeaderValue;
use super::proto::envoy::service::ratelimit::v3::RateLimitResponse;
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use super::run::{Evaluated, is_over};
use super::stats;
use crate::algorithm::{PerKey, State};
use crate::limit::Limit;
use crate::response::HeaderStyle;
use crate::response::headers::{
    IetfFields, POLICY, RATELIMIT, X_LIMIT, X_REMAINING, X_RESET, ceil_secs,
};

/// The answer for a request whose domain is not configured: every descriptor OK, no
/// `current_limit` (envoyproxy/ratelimit's answer).
pub(super) fn unknown_domain(descriptors: usize) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: Code::Ok.into(),
        statuses: (0..descriptors).map(|_| ok_without_limit(0)).collect(),
        ..Default::default()
    }
}

fn ok_without_limit(remaining: u32) -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok.into(),
        limit_remaining: remaining,
        ..Default::default()
    }
}

/// The counter that speaks for a descriptor: the over one with the longest wait, else the one
/// with the fewest units left.
fn governing(
    plan: &Plan,
    results: &[Option<Evaluated>],
    first: usize,
    len: usize,
) -> (usize, bool) {
    if let Some(c) = (first..first + len)
        .filter(|&c| is_over(&plan.counters[c], results[c].as_ref()))
        .max_by_key(|&c| wait(&plan.counters[c], results[c].as_ref(), true))
    {
        return (c, true);
    }
    let fewest = (first..first + len)
        .min_by_key(|&c| {
            results[c]
                .as_ref()
                .map_or(u64::MAX, |e| e.state.remaining())
        })
        .unwrap_or(first);
    (fewest, false)
}

/// `duration_until_reset`: over its limit, the wait until this request's cost would pass (the
/// algorithm's retry time; for a check of nothing, until the limit is whole again, an upper
/// bound; where every hit lands, until the counter's debt is paid); within it, until the limit is whole again; and a limit whole already (a counter
/// nothing has charged yet, or whose charges have all lapsed) until it would be whole again
/// if one unit were charged now: for the aligned fixed window, the end of the current window,
/// as the Go service answers every status.
fn wait(counter: &Counter, evaluated: Option<&Evaluated>, over: bool) -> Duration {
    let Some(e) = evaluated else {
        // A zero limit: until its aligned window ends, as the Go service says.
        return window_left(counter.period);
    };
    match (over, e.state.retry_after()) {
        (true, Some(retry)) => retry,
        _ if e.state.reset_after().is_zero() => whole_after_one(e.state.limit()),
        _ => e.state.reset_after(),
    }
}

/// How long `limit`, whole now, would take to be whole again after one unit charged now (its
/// algorithm's reset after that charge: the window's end for a fixed window, the period for a
/// sliding log, one emission interval for GCRA and the token bucket), on this server's clock
/// (as the Go service computes every reset).
fn whole_after_one(limit: &Limit) -> Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let step = State::fresh(limit.algorithm()).check(
        &PerKey::default(),
        limit.count(),
        limit.period_arg(now),
        1,
        now,
    );
    Duration::from_micros(step.eval.reset_after)
}

fn window_left(period: Duration) -> Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let period_us = period.as_micros().max(1);
    let into = now.as_micros() % period_us;
    Duration::from_micros(u64::try_from(period_us - into).unwrap_or(u64::MAX))
}

/// The service's own modes: `SHADOW_MODE` and `QUOTA_MODE`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Global {
    pub(super) shadow: bool,
    /// Every descriptor in quota mode (the plan's enforced ones were made quota ones).
    pub(super) quota: bool,
}

/// The response for `plan`, from the store's `results`.
pub(super) fn respond(
    plan: &Plan,
    results: &[Option<Evaluated>],
    global: Global,
    headers: HeaderStyle,
    near_ratio: f64,
) -> RateLimitResponse {
    let mut statuses = Vec::with_capacity(plan.descriptors.len());
    let (mut enforced_over, mut quota, mut quota_over) = (false, 0usize, 0usize);
    for (d, resolved) in plan.descriptors.iter().enumerate() {
        let (mode, first, len) = match *resolved {
            Resolved::Unmatched => {
                // Global quota mode: a quota descriptor that is never over (the Go service
                // counts every descriptor but the unlimited ones).
                quota += usize::from(global.quota);
                statuses.push(ok_without_limit(0));
                continue;
            }
            Resolved::Unlimited => {
                statuses.push(ok_without_limit(u32::MAX));
                continue;
            }
            Resolved::Limited { mode, first, len } => (mode, first, len),
        };
        let (c, over) = governing(plan, results, first, len);
        let counter = &plan.counters[c];
        match mode {
            Mode::Enforce => enforced_over |= over,
            Mode::Quota => {
                quota += 1;
                quota_over += usize::from(over);
            }
            // Answered OK whatever it is: in global quota mode, a quota descriptor not over.
            Mode::Shadow => quota += usize::from(global.quota),
        }
        let evaluated = results[c].as_ref();
        let remaining = evaluated.map_or(0, |e| e.state.remaining());
        // Over its limit, none left for this request (the Go service answers 0 over the
        // limit, and Envoy makes it `x-ratelimit-remaining`), whatever a smaller one could
        // still have.
        let shown_remaining = if over { 0 } else { remaining };
        let wait = wait(counter, evaluated, over);
        let count = counter.limit.map_or(0, |l| l.count());
        // Admitted, `remaining` is after this request's hits; refused, nothing was charged.
        let used_after = count.saturating_sub(remaining);
        stats::record(
            &plan.stats[d],
            stats::Outcome {
                hits: counter.cost,
                limit: count,
                used_before: if over {
                    used_after
                } else {
                    used_after.saturating_sub(counter.cost)
                },
                over,
                shadow: mode == Mode::Shadow,
                cached: evaluated.is_some_and(|e| e.cached),
            },
            near_ratio,
        );
        statuses.push(DescriptorStatus {
            code: if over && mode != Mode::Shadow {
                Code::OverLimit
            } else {
                Code::Ok
            }
            .into(),
            current_limit: Some(RateLimit {
                name: counter.shown.name.clone(),
                requests_per_unit: counter.shown.requests_per_unit,
                unit: counter.shown.unit,
            }),
            limit_remaining: u32::try_from(shown_remaining).unwrap_or(u32::MAX),
            duration_until_reset: Some(prost_types::Duration {
                seconds: i64::try_from(wait.as_secs()).unwrap_or(i64::MAX),
                nanos: i32::try_from(wait.subsec_nanos()).unwrap_or(0),
            }),
            quota: None,
        });
    }
    let over = enforced_over || (quota > 0 && quota == quota_over);
    if over && global.shadow {
        stats::global_shadow_mode();
    }
    let response_headers_to_add = render(plan, results, &statuses, headers);
    RateLimitResponse {
        overall_code: if over && !global.shadow {
            Code::OverLimit
        } else {
            Code::Ok
        }
        .into(),
        statuses,
        response_headers_to_add,
        ..Default::default()
    }
}

fn header(name: &http::HeaderName, value: String) -> HeaderValue {
    HeaderValue {
        key: name.as_str().to_owned(),
        value,
        raw_value: Vec::new(),
    }
}

/// The headers `style` asks for (none for [`HeaderStyle::None`], the default).
pub(super) fn render(
    plan: &Plan,
    results: &[Option<Evaluated>],
    statuses: &[DescriptorStatus],
    style: HeaderStyle,
) -> Vec<HeaderValue> {
    let mut headers = Vec::new();
    if matches!(style, HeaderStyle::XRateLimit | HeaderStyle::Both) {
        headers.extend(draft_03(plan, statuses).into_iter().flatten());
    }
    if matches!(style, HeaderStyle::Ietf | HeaderStyle::Both) {
        let mut fields = IetfFields::default();
        for (d, resolved) in plan.descriptors.iter().enumerate() {
            let Resolved::Limited { first, len, .. } = *resolved else {
                continue;
            };
            let counters = plan.counters[first..first + len].iter();
            for (i, (counter, evaluated)) in counters.zip(&results[first..first + len]).enumerate()
            {
                let Some(evaluated) = evaluated else {
                    continue;
                };
                let name = match (&*counter.shown.name, len) {
                    ("", 1) => format!("{}", d + 1),
                    ("", _) => format!("{}-{}", d + 1, i + 1),
                    (name, _) => name.to_owned(),
                };
                fields.push(&name, &evaluated.state);
            }
        }
        if let Some((policy, current)) = fields.finish() {
            let text = |v: http::HeaderValue| v.to_str().map(str::to_owned).unwrap_or_default();
            headers.push(header(&POLICY, text(policy)));
            headers.push(header(&RATELIMIT, text(current)));
        }
    }
    headers
}

/// Envoy's `DRAFT_VERSION_03`: the status with the fewest units left (the first on a tie)
/// gives `X-RateLimit-Remaining` and `-Reset` (whole seconds, rounded up); `X-RateLimit-Limit`
/// is its count then one quota-policy item per status with a limit (`N;w=<window s>`, and
/// `;name="..."` when the limit has one). The window is the limit's real period (with a
/// `unit_multiplier`, N units).
fn draft_03(plan: &Plan, statuses: &[DescriptorStatus]) -> Option<[HeaderValue; 3]> {
    let (tightest, limit) = statuses
        .iter()
        .filter_map(|s| Some((s, s.current_limit.as_ref()?)))
        .min_by_key(|(s, _)| s.limit_remaining)?;
    let mut value = limit.requests_per_unit.to_string();
    for (d, status) in statuses.iter().enumerate() {
        let Some(limit) = &status.current_limit else {
            continue;
        };
        let period = match plan.descriptors[d] {
            Resolved::Limited { first, .. } => plan
                .counters
                .iter()
                .skip(first)
                .find(|c| {
                    c.shown.requests_per_unit == limit.requests_per_unit
                        && c.shown.name == limit.name
                })
                .map_or(0, |c| ceil_secs(c.period)),
            _ => 0,
        };
        value.push_str(&format!(", {};w={period}", limit.requests_per_unit));
        let name: String = limit
            .name
            .chars()
            .filter(|c| (' '..='~').contains(c) && !matches!(c, '"' | '\\'))
            .collect();
        if !name.is_empty() {
            value.push_str(&format!(";name=\"{name}\""));
        }
    }
    let reset = tightest.duration_until_reset.as_ref().map_or(0, |d| {
        let whole = u64::try_from(d.seconds).unwrap_or(0);
        whole + u64::from(d.nanos > 0)
    });
    Some([
        header(&X_LIMIT, value),
        header(&X_REMAINING, tightest.limit_remaining.to_string()),
        header(&X_RESET, reset.to_string()),
    ])
}
