//! What a bucket's rule asks for, and the token bucket a share of it is assigned as.

use prost_types::Duration as ProtoDuration;

use crate::rls::config::{RlsConfig, RlsRule};
use crate::rls::proto::envoy::r#type::v3::{
    RateLimitStrategy, TokenBucket, rate_limit_strategy::BlanketRule, rate_limit_strategy::Strategy,
};

/// The fewest tokens a fleet-wide quota is split into, per fill interval: the fill interval
/// of a small limit is lengthened (whole seconds) until its limit is at least this many
/// tokens, so shares are assigned to 0.1 % of the limit.
pub(crate) const MIN_TOKENS: u64 = 1000;

/// The least `max_tokens` of an assignment: a bucket of 1 or 2 loses much of a small share to
/// Envoy's refill above the cap, and a token per change.
pub(crate) const MIN_MAX_TOKENS: u64 = 3;

/// A bucket's quota, from its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quota {
    /// No rule, `unlimited`, or shadow mode: `ALLOW_ALL`.
    AllowAll,
    /// `requests_per_unit: 0`: `DENY_ALL`.
    DenyAll,
    /// A fleet-wide rate: `tokens` per `fill_seconds` (whole seconds), split among the fleet.
    Rate { tokens: u64, fill_seconds: u64 },
}

impl Quota {
    /// The quota of the bucket `entries` of `domain` under `config`: the rule
    /// [`RlsDomain::find_unordered`](crate::rls::config::RlsDomain::find_unordered) finds, and
    /// of several limits (`rate_limits`) the lowest rate.
    pub(crate) fn of(config: &RlsConfig, domain: &str, entries: &[(&str, &str)]) -> Quota {
        match config
            .domain(domain)
            .and_then(|d| d.find_unordered(entries))
        {
            Some(rule) => Quota::of_rule(rule),
            None => Quota::AllowAll,
        }
    }

    fn of_rule(rule: &RlsRule) -> Quota {
        if rule.is_unlimited() || rule.shadow_mode() {
            return Quota::AllowAll;
        }
        let mut lowest: Option<(u64, u64)> = None;
        for limit in rule.limits() {
            let count = u64::from(limit.requests_per_unit());
            let period = limit
                .unit()
                .seconds()
                .saturating_mul(u64::from(limit.unit_multiplier().max(1)));
            if count == 0 {
                return Quota::DenyAll;
            }
            // count/period < c/p  <=>  count*p < c*period (in u128: no overflow).
            if lowest.is_none_or(|(c, p)| {
                u128::from(count) * u128::from(p) < u128::from(c) * u128::from(period)
            }) {
                lowest = Some((count, period));
            }
        }
        let Some((count, period)) = lowest else {
            return Quota::AllowAll;
        };
        let times = MIN_TOKENS.div_ceil(count).max(1);
        let tokens = count.saturating_mul(times);
        // tokens_per_fill is a u32: a limit over it is assigned per second instead.
        if tokens > u64::from(u32::MAX) {
            return Quota::Rate {
                tokens: (count / period.max(1)).clamp(1, u64::from(u32::MAX)),
                fill_seconds: 1,
            };
        }
        Quota::Rate {
            tokens,
            fill_seconds: period.max(1).saturating_mul(times),
        }
    }
}

/// A blanket rule.
pub(crate) fn blanket(rule: BlanketRule) -> RateLimitStrategy {
    RateLimitStrategy {
        strategy: Some(Strategy::BlanketRule(rule as i32)),
    }
}

/// The token bucket of a share of `tokens` per `fill_seconds`: `max_tokens` (the burst) is
/// about `burst_seconds` of the share's rate, at least `least` and [`MIN_MAX_TOKENS`];
/// `tokens_per_fill` at least 1 (Envoy reads 0 as no refill).
pub(crate) fn token_bucket(
    tokens: u64,
    fill_seconds: u64,
    burst_seconds: f64,
    least: u64,
) -> RateLimitStrategy {
    let per_fill = tokens.clamp(1, u64::from(u32::MAX));
    let rate = per_fill as f64 / fill_seconds.max(1) as f64;
    let max_tokens = ((rate * burst_seconds).ceil() as u64)
        .max(least)
        .clamp(MIN_MAX_TOKENS, u64::from(u32::MAX));
    RateLimitStrategy {
        strategy: Some(Strategy::TokenBucket(TokenBucket {
            max_tokens: max_tokens as u32,
            tokens_per_fill: Some(per_fill as u32),
            fill_interval: Some(ProtoDuration {
                seconds: i64::try_from(fill_seconds.max(1)).unwrap_or(i64::MAX),
                nanos: 0,
            }),
        })),
    }
}

/// The `tokens_per_fill` of a token-bucket strategy, if it is one.
pub(crate) fn tokens_per_fill(strategy: &RateLimitStrategy) -> Option<u64> {
    match &strategy.strategy {
        Some(Strategy::TokenBucket(bucket)) => Some(u64::from(bucket.tokens_per_fill.unwrap_or(0))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(yaml: &str, entries: &[(&str, &str)]) -> Quota {
        let config = RlsConfig::parse([("t.yaml", yaml)], false).unwrap();
        Quota::of(&config, "d", entries)
    }

    #[test]
    fn rules_become_blankets_or_rates() {
        let yaml = "
domain: d
descriptors:
  - {key: a, rate_limit: {unit: second, requests_per_unit: 100}}
  - {key: b, rate_limit: {unit: minute, requests_per_unit: 0}}
  - {key: c, rate_limit: {unlimited: true}}
  - {key: s, shadow_mode: true, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: big, rate_limit: {unit: second, requests_per_unit: 5000}}
  - key: two
    rate_limits:
      - {unit: second, requests_per_unit: 10}
      - {unit: minute, requests_per_unit: 60}
";
        // 100/s in 1000 tokens per 10 s.
        assert_eq!(
            quota(yaml, &[("a", "x")]),
            Quota::Rate {
                tokens: 1000,
                fill_seconds: 10
            }
        );
        assert_eq!(quota(yaml, &[("b", "x")]), Quota::DenyAll);
        assert_eq!(quota(yaml, &[("c", "x")]), Quota::AllowAll);
        assert_eq!(quota(yaml, &[("s", "x")]), Quota::AllowAll);
        assert_eq!(quota(yaml, &[("nothing", "x")]), Quota::AllowAll);
        assert_eq!(
            quota(yaml, &[("big", "x")]),
            Quota::Rate {
                tokens: 5000,
                fill_seconds: 1
            }
        );
        // The lower rate: 60 a minute (1/s) under 10/s; 1020 tokens per 1020 s.
        assert_eq!(
            quota(yaml, &[("two", "x")]),
            Quota::Rate {
                tokens: 1020,
                fill_seconds: 1020
            }
        );
        assert_eq!(quota("domain: other\n", &[("a", "x")]), Quota::AllowAll);
    }

    #[test]
    fn the_guides_example_matches_as_it_says() {
        // docs/guide/rlqs.md
        let yaml = "
domain: d
descriptors:
  - key: route
    value: /admin
    descriptors:
      - key: tenant
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: tenant
    value: free-*
    rate_limit: {unit: minute, requests_per_unit: 600}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 1000}
  - key: banned
    rate_limit: {unit: second, requests_per_unit: 0}
";
        assert_eq!(
            quota(yaml, &[("tenant", "x"), ("route", "/admin")]),
            Quota::Rate {
                tokens: 1000,
                fill_seconds: 100
            }
        );
        assert_eq!(
            quota(yaml, &[("tenant", "free-1")]),
            Quota::Rate {
                tokens: 1200,
                fill_seconds: 120
            }
        );
        assert_eq!(
            quota(yaml, &[("tenant", "x")]),
            Quota::Rate {
                tokens: 1000,
                fill_seconds: 1
            }
        );
        assert_eq!(quota(yaml, &[("banned", "x")]), Quota::DenyAll);
    }

    #[test]
    fn token_buckets_keep_envoy_safe_values() {
        let Some(Strategy::TokenBucket(b)) = token_bucket(0, 10, 1.0, 0).strategy else {
            panic!("a token bucket")
        };
        assert_eq!(b.tokens_per_fill, Some(1));
        assert_eq!(b.max_tokens, 3);
        assert_eq!(b.fill_interval.unwrap().seconds, 10);
        let Some(Strategy::TokenBucket(b)) = token_bucket(800, 10, 1.0, 0).strategy else {
            panic!("a token bucket")
        };
        assert_eq!((b.max_tokens, b.tokens_per_fill), (80, Some(800)));
        let Some(Strategy::TokenBucket(b)) = token_bucket(6, 1, 0.5, 10).strategy else {
            panic!("a token bucket")
        };
        assert_eq!(b.max_tokens, 10, "a deeper bucket where asked");
    }
}
