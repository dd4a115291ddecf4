//! `response_headers_to_add`: the draft-03 `X-RateLimit-*` headers as Envoy builds them from
//! the statuses, and the IETF draft's `RateLimit-Policy` / `RateLimit` fields (the layer's
//! rendering, one item per limit).

use super::plan::{Plan, Resolved};
use super::proto::envoy::config::core::v3::HeaderValue;
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::DescriptorStatus;
use super::run::Evaluated;
use crate::response::HeaderStyle;
use crate::response::headers::{
    IetfFields, POLICY, RATELIMIT, X_LIMIT, X_REMAINING, X_RESET, ceil_secs,
};

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
