//! From a request and the configuration to the counters it touches: each descriptor's limits
//! (its rule's, or the request's own `limit`), each under a key of its own, with its cost.

use std::io::Write as _;
use std::time::Duration;

use smallvec::SmallVec;
use tonic::Status;

use super::HashTag;
use super::config::{RlsConfig, Unit};
use super::hash_tag::descriptor_tag;
use super::live_overrides::{LiveOverrides, descriptor_key, descriptor_text, overridden};
use super::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use super::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use super::stats::{StatsKey, StatsKeys};
use crate::key::Key;
use crate::limit::Limit;
use crate::policy::Policy;

/// How a descriptor's verdict counts in the request's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Over its limit makes the request over its limit.
    Enforce,
    /// `quota_mode`: the request is over only if every quota descriptor is.
    Quota,
    /// `shadow_mode`: counted and reported, always answered OK.
    Shadow,
}

/// What the response's `current_limit` says of a counter's limit.
#[derive(Debug, Clone)]
pub(super) struct Shown {
    pub(super) requests_per_unit: u32,
    pub(super) unit: i32,
    pub(super) name: String,
}

/// One limit of one descriptor.
#[derive(Debug)]
pub(super) struct Counter {
    pub(super) descriptor: usize,
    /// `None`: `requests_per_unit: 0`, over whatever the store holds (no store call).
    pub(super) limit: Option<Limit>,
    /// The policy of `limit` alone, when its rule made one (not under an override).
    pub(super) policy: Option<Policy>,
    /// The key its state is kept under (domain, entries, which limit).
    pub(super) own: Key,
    /// Its Redis Cluster hash tag: the domain's, or its descriptor's ([`HashTag`]). Counters
    /// of one tag are one slot: only they can share a check.
    pub(super) tag: Key,
    /// Units a request charges; 0 checks without charging.
    pub(super) cost: u64,
    pub(super) shown: Shown,
    /// Its rule's unit is `second` (an admin override does not change it): with a per-second
    /// store, the counter lives there.
    pub(super) per_second: bool,
    /// The limit's period, for a zero limit's reset.
    pub(super) period: Duration,
}

/// One descriptor of the request, resolved.
#[derive(Debug)]
pub(super) enum Resolved {
    /// No rule (or its rule was replaced): OK, no `current_limit`.
    Unmatched,
    /// `unlimited: true`: OK, `limit_remaining` `u32::MAX`, never counted.
    Unlimited,
    /// Counters `first..first + len` of the plan.
    Limited {
        mode: Mode,
        first: usize,
        len: usize,
    },
}

/// A request's descriptors' entries, `(key, value)`; most have one to a few.
type Entries<'a> = SmallVec<[(&'a str, &'a str); 4]>;

/// Every descriptor of a request, resolved, and the counters they touch.
#[derive(Debug)]
pub(super) struct Plan {
    /// The engine's rule of the request's domain (its position in the configuration).
    pub(super) rule: usize,
    pub(super) descriptors: SmallVec<[Resolved; 2]>,
    pub(super) counters: SmallVec<[Counter; 2]>,
    /// Each descriptor's stats key as envoyproxy/ratelimit names it (`domain.key_value...`),
    /// for the metrics; `None` for a descriptor without counters.
    pub(super) stats: SmallVec<[StatsKey; 2]>,
}

/// The most a request's hits may charge: past any limit's count (2^45), and exact in Lua.
const MAX_COST: u64 = 1 << 50;

/// Resolves `request` against `config`, with the admin API's overrides in force (`runtime`),
/// its counters tagged by the domain's `hash_tag`, else `hash_tag`; `Ok(None)` when its
/// domain is not configured (every descriptor is then OK, as in envoyproxy/ratelimit).
pub(super) fn plan(
    config: &RlsConfig,
    request: &RateLimitRequest,
    max_descriptors: usize,
    runtime: &LiveOverrides<'_>,
    hash_tag: HashTag,
) -> Result<Option<Plan>, Status> {
    if request.domain.is_empty() {
        return Err(Status::invalid_argument(
            "rate limit domain must not be empty",
        ));
    }
    if request.descriptors.is_empty() {
        return Err(Status::invalid_argument(
            "rate limit descriptor list must not be empty",
        ));
    }
    if request.descriptors.len() > max_descriptors {
        return Err(Status::invalid_argument(format!(
            "{} rate limit descriptors: at most {max_descriptors} per request",
            request.descriptors.len()
        )));
    }
    let Some((rule, domain)) = config.domain_at(&request.domain) else {
        return Ok(None);
    };
    let request_hits = u64::from(request.hits_addend.max(1));
    let tags = Tags {
        domain: domain.key(),
        by_descriptor: domain.hash_tag.unwrap_or(hash_tag) == HashTag::Descriptor,
    };
    let mut plan = Plan {
        rule,
        descriptors: SmallVec::with_capacity(request.descriptors.len()),
        counters: SmallVec::new(),
        stats: (0..request.descriptors.len())
            .map(|_| StatsKey::None)
            .collect(),
    };
    // Names replaced by any matched rule (envoyproxy/ratelimit's `replaces`).
    let mut replaced: SmallVec<[&str; 4]> = SmallVec::new();
    let mut matched: SmallVec<[_; 2]> = SmallVec::with_capacity(request.descriptors.len());
    for (i, descriptor) in request.descriptors.iter().enumerate() {
        let entries: Entries<'_> = descriptor
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        let cost = descriptor
            .hits_addend
            .map_or(request_hits, |hits| hits.min(MAX_COST));
        if descriptor.limit.is_some() {
            matched.push(None);
            override_counter(
                &mut plan,
                i,
                &request.domain,
                descriptor,
                &entries,
                cost,
                &tags,
            )?;
            continue;
        }
        let rule = domain.find(&entries);
        if let Some(rule) = rule {
            replaced.extend(rule.replaces().iter().map(String::as_str));
        }
        matched.push(rule.map(|r| (r, entries, cost)));
        plan.descriptors.push(Resolved::Unmatched);
    }
    for (i, matched) in matched.into_iter().enumerate() {
        let Some((rule, entries, cost)) = matched else {
            continue;
        };
        if rule.names().any(|name| replaced.contains(&name)) {
            continue;
        }
        if rule.is_unlimited() {
            plan.descriptors[i] = Resolved::Unlimited;
            continue;
        }
        // The admin API's overrides of this descriptor, if the store holds any at all.
        let set = runtime
            .active()
            .then(|| descriptor_key(domain.name(), &entries));
        let rates = set
            .as_ref()
            .and_then(|key| runtime.limits(key))
            .filter(|o| o.rates().len() == rule.limits().len());
        let mode = match set.as_ref().and_then(|key| runtime.shadow(key)) {
            Some(true) => Mode::Shadow,
            None if rule.shadow_mode() => Mode::Shadow,
            _ if rule.quota_mode() => Mode::Quota,
            _ => Mode::Enforce,
        };
        let first = plan.counters.len();
        let mut text = if rule.shares_threshold() {
            // `share_threshold`: every value its pattern matches counts on one counter (and,
            // by descriptor, one hash tag), as the Go service's cache key names the pattern.
            let counted: Entries<'_> = entries
                .iter()
                .zip(rule.counted_values(&entries))
                .map(|(&(k, _), v)| (k, v))
                .collect();
            descriptor_text(domain.name(), &counted, 24)
        } else {
            descriptor_text(domain.name(), &entries, 24)
        };
        let tag = tags.of(&text);
        for (position, limit) in rule.limits().iter().enumerate() {
            let (counted, policy, shown) = rates
                .as_ref()
                .and_then(|o| overridden(limit, o.rates()[position]))
                .map_or_else(
                    || {
                        let shown = Shown {
                            requests_per_unit: limit.requests_per_unit(),
                            unit: limit.unit().proto_number(),
                            name: limit.name().unwrap_or_default().to_owned(),
                        };
                        (limit.limit().copied(), limit.policy().cloned(), shown)
                    },
                    |(counted, requests_per_unit, unit)| {
                        let shown = Shown {
                            requests_per_unit,
                            unit: unit.proto_number(),
                            name: limit.name().unwrap_or_default().to_owned(),
                        };
                        (Some(counted), None, shown)
                    },
                );
            plan.counters.push(Counter {
                descriptor: i,
                limit: counted,
                policy,
                own: own_key(&mut text, Which::Position(position)),
                tag: tag.clone(),
                cost,
                shown,
                per_second: limit.unit() == Unit::Second,
                period: counted.map_or_else(
                    || limit.unit().duration() * limit.unit_multiplier(),
                    |l| l.period(),
                ),
            });
        }
        let len = plan.counters.len() - first;
        if cfg!(feature = "metrics") && len > 0 {
            plan.stats[i] = match rule.stats_keys() {
                Some(keys) => {
                    debug_assert_eq!(keys.text, rule.stats_key(domain.name(), &entries));
                    StatsKey::Rule(std::sync::Arc::clone(keys))
                }
                None => StatsKey::Request(Box::new(StatsKeys::new(
                    &rule.stats_key(domain.name(), &entries),
                ))),
            };
        }
        plan.descriptors[i] = if len == 0 {
            Resolved::Unmatched
        } else {
            Resolved::Limited { mode, first, len }
        };
    }
    Ok(Some(plan))
}

/// A descriptor's own `limit`: the Go service's rule (it wins over the configuration, shadow
/// mode off), on counters of its own for each limit value (unlike the Go service, whose
/// counter ignores the value), counted by the aligned fixed window.
fn override_counter(
    plan: &mut Plan,
    i: usize,
    domain_name: &str,
    descriptor: &RateLimitDescriptor,
    entries: &[(&str, &str)],
    cost: u64,
    tags: &Tags<'_>,
) -> Result<(), Status> {
    let Some(limit) = &descriptor.limit else {
        return Ok(());
    };
    let Some(unit) = Unit::from_proto_number(limit.unit).filter(|u| *u != Unit::Week) else {
        return Err(Status::invalid_argument(format!(
            "descriptor {i}: limit override with unit {} (expected SECOND, MINUTE, HOUR, DAY, MONTH or YEAR)",
            limit.unit
        )));
    };
    let rpu = limit.requests_per_unit;
    let counted = match rpu {
        0 => None,
        n => Some(
            Limit::fixed_window(u64::from(n), unit.duration())
                .map_err(|e| Status::invalid_argument(format!("descriptor {i}: {e}")))?,
        ),
    };
    let first = plan.counters.len();
    if cfg!(feature = "metrics") {
        plan.stats[i] = StatsKey::Request(Box::new(StatsKeys::new(
            &super::config::override_stats_key(domain_name, entries),
        )));
    }
    let mut text = descriptor_text(domain_name, entries, 24);
    let tag = tags.of(&text);
    plan.counters.push(Counter {
        descriptor: i,
        limit: counted,
        policy: None,
        own: own_key(
            &mut text,
            Which::Override {
                requests_per_unit: rpu,
                unit: unit.proto_number(),
            },
        ),
        tag,
        cost,
        shown: Shown {
            requests_per_unit: rpu,
            unit: unit.proto_number(),
            name: String::new(),
        },
        per_second: unit == Unit::Second,
        period: unit.duration(),
    });
    plan.descriptors.push(Resolved::Limited {
        mode: Mode::Enforce,
        first,
        len: 1,
    });
    Ok(())
}

/// Which limit of a descriptor a counter is.
#[derive(Debug, Clone, Copy)]
enum Which {
    /// Its rule's limit at this position (`#0`).
    Position(usize),
    /// The request's own `limit` (`=10/2`: requests per unit, the unit's proto number).
    Override { requests_per_unit: u32, unit: i32 },
}

/// Where a domain's counters get their hash tag.
struct Tags<'a> {
    /// The domain's key, every counter's tag under [`HashTag::Domain`].
    domain: &'a Key,
    /// [`HashTag::Descriptor`]: each descriptor's own.
    by_descriptor: bool,
}

impl Tags<'_> {
    /// The tag of the counters of the descriptor whose text ([`descriptor_text`]) is `text`.
    fn of(&self, text: &[u8]) -> Key {
        if self.by_descriptor {
            descriptor_tag(text)
        } else {
            self.domain.clone()
        }
    }
}

/// The counter's key: its descriptor's text (the domain, every entry's key and value, each
/// after a NUL byte, [`descriptor_text`]) and which limit (NUL bytes are encoded `%00`, so no
/// two requests' texts run together, and the text is no policy name: see
/// `Key::with_named_limit_keys`). `text` has room for the longest `which`: `=` 10 digits `/`
/// 11 characters; it is left as it was.
fn own_key(text: &mut SmallVec<[u8; 128]>, which: Which) -> Key {
    let base = text.len();
    match which {
        // Every request's: its digits pushed, not formatted.
        Which::Position(position) => {
            text.push(b'#');
            push_decimal(text, position);
        }
        Which::Override {
            requests_per_unit,
            unit,
        } => {
            // Writing into memory cannot fail.
            let _ = write!(text, "={requests_per_unit}/{unit}");
        }
    }
    let key = Key::new(&text[..]);
    text.truncate(base);
    key
}

/// Appends `n` in decimal, as `write!(text, "{n}")` would.
fn push_decimal(text: &mut SmallVec<[u8; 128]>, n: usize) {
    text.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_written_as_format_writes_them() {
        for n in [0, 7, 9, 10, 123, 1_000_000, usize::MAX] {
            let mut text = SmallVec::from_slice(b"d\0k");
            push_decimal(&mut text, n);
            assert_eq!(&text[..], format!("d\0k{n}").as_bytes());
        }
    }
}
