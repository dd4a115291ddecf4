//! envoyproxy/ratelimit's statistics, under the names its default Prometheus mapping gives
//! them, so dashboards and alerts built on the Go service keep working:
//! `ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,within_limit,shadow_mode}`
//! labelled `domain`, `key1` and, for a deeper rule, `key2` (the rule's stats key split at its
//! first two dots, `key2` holding the rest), and
//! `ratelimit_service_should_rate_limit_error{err_type}`. The Go service's three counters its
//! default mapping leaves out are named after the same pattern:
//! `ratelimit_service_rate_limit_over_limit_with_local_cache{domain,key1,key2}`,
//! `ratelimit_service_rate_limit_domain_not_found{domain}` and
//! `ratelimit_service_global_shadow_mode`.
//!
//! Counters count hits (the units a request asks for), not calls, as the Go service's do. The
//! labels are the rule's stats key: values appear only where the rule names one, or where the
//! rule asks for them (`detailed_metric`, `value_to_metric`), or for a request's own `limit`
//! (as in the Go service): those are the rules to keep label sets bounded.

// Without `metrics` only the recording functions' empty twins are used.
#![cfg_attr(not(feature = "metrics"), allow(dead_code))]

/// Hits of every limited descriptor.
pub(super) const TOTAL_HITS: &str = "ratelimit_service_rate_limit_total_hits";
/// Hits past the limit.
pub(super) const OVER_LIMIT: &str = "ratelimit_service_rate_limit_over_limit";
/// Hits past the near-limit share of the limit, but within it.
pub(super) const NEAR_LIMIT: &str = "ratelimit_service_rate_limit_near_limit";
/// Hits within the limit.
pub(super) const WITHIN_LIMIT: &str = "ratelimit_service_rate_limit_within_limit";
/// Hits over the limit of a shadow-mode rule (answered OK).
pub(super) const SHADOW_MODE: &str = "ratelimit_service_rate_limit_shadow_mode";
/// Hits over the limit answered from the deny cache, without a store call (the Go service's
/// local cache of over-limit keys); counted in `over_limit` too, as there.
pub(super) const OVER_LIMIT_WITH_LOCAL_CACHE: &str =
    "ratelimit_service_rate_limit_over_limit_with_local_cache";
/// Descriptors of requests whose domain is not configured, by `domain`.
pub(super) const DOMAIN_NOT_FOUND: &str = "ratelimit_service_rate_limit_domain_not_found";
/// Requests over the limit answered OK by the global shadow mode (`SHADOW_MODE`, or a domain's
/// shadow mode set through the admin API).
pub(super) const GLOBAL_SHADOW_MODE: &str = "ratelimit_service_global_shadow_mode";
/// Calls that failed: `err_type` `redis_error` (the store) or `service_error` (the request).
pub(super) const SHOULD_RATE_LIMIT_ERROR: &str = "ratelimit_service_should_rate_limit_error";

/// How one descriptor of one request came out.
#[derive(Debug, Clone, Copy)]
pub(super) struct Outcome {
    /// The hits it asked for.
    pub(super) hits: u64,
    /// Its limit's count (`requests_per_unit` × `unit_multiplier` is not it: the count).
    pub(super) limit: u64,
    /// The units used before this request.
    pub(super) used_before: u64,
    /// Over the limit.
    pub(super) over: bool,
    /// A shadow-mode rule.
    pub(super) shadow: bool,
    /// Its verdict came from the deny cache.
    pub(super) cached: bool,
}

impl Outcome {
    /// The Go service's split of the hits (`base_limiter.go`): over the limit, the hits past
    /// it are over and those between the near-limit mark and the limit are near; within it,
    /// the hits past the mark are near, and all of them within.
    fn split(self, near_ratio: f64) -> Split {
        let near_mark = (self.limit as f64 * near_ratio).floor() as u64;
        let after = self.used_before.saturating_add(self.hits);
        if self.over {
            // Refused within the limit (a local-first store's denial between its marks): every
            // hit was refused, all over.
            let over = if self.used_before >= self.limit || after <= self.limit {
                self.hits
            } else {
                after - self.limit
            };
            Split {
                over,
                near: self.limit.saturating_sub(near_mark.max(self.used_before)),
                within: 0,
            }
        } else {
            let near = if after <= near_mark {
                0
            } else if self.used_before >= near_mark {
                self.hits
            } else {
                after - near_mark
            };
            Split {
                over: 0,
                near,
                within: self.hits,
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Split {
    over: u64,
    near: u64,
    within: u64,
}

/// A descriptor's metric keys, one per counter, made once from its stats key: a rule whose
/// stats key holds no request value keeps them (`RlsRule`), so its calls format nothing; and
/// each counter's handle, taken from the recorder at its first hit, so later calls look
/// nothing up (a counter not hit yet is not registered, as before).
#[derive(Debug, Clone)]
pub(crate) struct StatsKeys {
    /// The stats key they were made from (`domain.key...`).
    pub(crate) text: String,
    #[cfg(feature = "metrics")]
    by_counter: [metrics::Key; 6],
    #[cfg(feature = "metrics")]
    handles: [std::sync::OnceLock<metrics::Counter>; 6],
}

impl PartialEq for StatsKeys {
    /// The keys alone: the handles are what the recorder gave for them.
    fn eq(&self, other: &Self) -> bool {
        #[cfg(feature = "metrics")]
        let same_keys = self.by_counter == other.by_counter;
        #[cfg(not(feature = "metrics"))]
        let same_keys = true;
        self.text == other.text && same_keys
    }
}

impl StatsKeys {
    pub(crate) fn new(stats_key: &str) -> Self {
        StatsKeys {
            text: stats_key.to_owned(),
            #[cfg(feature = "metrics")]
            by_counter: {
                let (domain, rest) = stats_key.split_once('.').unwrap_or((stats_key, ""));
                let (key1, key2) = rest.split_once('.').unwrap_or((rest, ""));
                let mut labels = vec![
                    metrics::Label::new("domain", domain.to_owned()),
                    metrics::Label::new("key1", key1.to_owned()),
                ];
                if !key2.is_empty() {
                    labels.push(metrics::Label::new("key2", key2.to_owned()));
                }
                [
                    TOTAL_HITS,
                    OVER_LIMIT,
                    NEAR_LIMIT,
                    WITHIN_LIMIT,
                    SHADOW_MODE,
                    OVER_LIMIT_WITH_LOCAL_CACHE,
                ]
                .map(|name| metrics::Key::from_parts(name, labels.clone()))
            },
            #[cfg(feature = "metrics")]
            handles: Default::default(),
        }
    }
}

/// Where a descriptor's statistics go.
#[derive(Debug, Clone, Default)]
pub(super) enum StatsKey {
    /// Nowhere (no counters, or no `metrics` feature).
    #[default]
    None,
    /// Its rule's keys, made when the configuration was.
    Rule(std::sync::Arc<StatsKeys>),
    /// Keys of its own: its stats key holds request values.
    Request(Box<StatsKeys>),
}

impl StatsKey {
    fn keys(&self) -> Option<&StatsKeys> {
        match self {
            StatsKey::None => None,
            StatsKey::Rule(keys) => Some(keys),
            StatsKey::Request(keys) => Some(keys),
        }
    }
}

/// The counters' places in [`StatsKeys`]' arrays.
#[cfg(feature = "metrics")]
const TOTAL: usize = 0;
#[cfg(feature = "metrics")]
const OVER: usize = 1;
#[cfg(feature = "metrics")]
const NEAR: usize = 2;
#[cfg(feature = "metrics")]
const WITHIN: usize = 3;
#[cfg(feature = "metrics")]
const SHADOW: usize = 4;
#[cfg(feature = "metrics")]
const CACHED: usize = 5;

/// The macros' metadata, for the keys made ahead.
#[cfg(feature = "metrics")]
static METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

/// Records one descriptor's outcome under its stats key.
#[cfg(feature = "metrics")]
pub(super) fn record(key: &StatsKey, outcome: Outcome, near_ratio: f64) {
    let Some(keys) = key.keys() else {
        return;
    };
    let counter = |i: usize| {
        keys.handles[i].get_or_init(|| {
            metrics::with_recorder(|r| r.register_counter(&keys.by_counter[i], &METADATA))
        })
    };
    let add = |i: usize, value: u64| {
        if value > 0 {
            counter(i).increment(value);
        }
    };
    let split = outcome.split(near_ratio);
    // Registered even at 0, as the Go service's counter is.
    counter(TOTAL).increment(outcome.hits);
    add(OVER, split.over);
    add(NEAR, split.near);
    add(WITHIN, split.within);
    if outcome.shadow && outcome.over {
        add(SHADOW, outcome.hits);
    }
    if outcome.cached && outcome.over {
        add(CACHED, outcome.hits);
    }
}

#[cfg(not(feature = "metrics"))]
pub(super) fn record(_key: &StatsKey, _outcome: Outcome, _near_ratio: f64) {}

/// Counts a failed call, by kind.
pub(super) fn error(err_type: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(SHOULD_RATE_LIMIT_ERROR, "err_type" => err_type).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = err_type;
}

/// The most unknown domains counted under their own name: a client that makes up domains must
/// not grow the metrics without bound. Past them, and for a domain longer than
/// [`MAX_DOMAIN_LABEL`] bytes, the label is [`OTHER_DOMAINS`].
const MAX_UNKNOWN_DOMAINS: usize = 1000;
const MAX_DOMAIN_LABEL: usize = 256;
/// The label of the unknown domains past the bound.
pub(crate) const OTHER_DOMAINS: &str = "_other_domains";

/// Counts a request of `descriptors` whose domain is not configured, as the Go service does
/// (once per descriptor: it looks each one up).
pub(super) fn domain_not_found(domain: &str, descriptors: usize) {
    #[cfg(feature = "metrics")]
    {
        use std::collections::HashSet;
        use std::sync::{Mutex, OnceLock};
        static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
        let seen = SEEN.get_or_init(Mutex::default);
        let label = match seen.lock() {
            Ok(mut seen) => domain_label(&mut seen, domain),
            Err(_) => OTHER_DOMAINS,
        }
        .to_owned();
        metrics::counter!(DOMAIN_NOT_FOUND, "domain" => label).increment(descriptors as u64);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (domain, descriptors);
}

/// The `domain` label of an unknown domain: its name while at most [`MAX_UNKNOWN_DOMAINS`]
/// names are in use (`seen`) and it is short enough, else [`OTHER_DOMAINS`].
fn domain_label<'a>(seen: &mut std::collections::HashSet<String>, domain: &'a str) -> &'a str {
    if domain.len() > MAX_DOMAIN_LABEL {
        return OTHER_DOMAINS;
    }
    if !seen.contains(domain) {
        if seen.len() >= MAX_UNKNOWN_DOMAINS {
            return OTHER_DOMAINS;
        }
        seen.insert(domain.to_owned());
    }
    domain
}

/// Counts a request over the limit that the global shadow mode answered OK.
pub(super) fn global_shadow_mode() {
    #[cfg(feature = "metrics")]
    metrics::counter!(GLOBAL_SHADOW_MODE).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(hits: u64, used_before: u64, over: bool) -> Split {
        Outcome {
            hits,
            limit: 10,
            used_before,
            over,
            shadow: false,
            cached: false,
        }
        .split(0.8)
    }

    #[cfg(feature = "metrics")]
    #[test]
    fn a_rules_counters_count_every_call_through_the_handles_they_keep() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let value = |name: &str| {
            let series = format!("{name}{{domain=\"d\",key1=\"user\"}} ");
            handle
                .render()
                .lines()
                .find_map(|l| l.strip_prefix(&series).map(str::to_owned))
        };
        let key = StatsKey::Rule(std::sync::Arc::new(StatsKeys::new("d.user")));
        let outcome = |used_before, over| Outcome {
            hits: 1,
            limit: 10,
            used_before,
            over,
            shadow: false,
            cached: false,
        };
        metrics::with_local_recorder(&recorder, || {
            record(&key, outcome(0, false), 0.8);
            record(&key, outcome(1, false), 0.8);
            assert_eq!(value(TOTAL_HITS).as_deref(), Some("2"));
            assert_eq!(value(WITHIN_LIMIT).as_deref(), Some("2"));
            // Not hit yet: no series, as before the handles were kept.
            assert_eq!(value(OVER_LIMIT), None);
            record(&key, outcome(10, true), 0.8);
            assert_eq!(value(TOTAL_HITS).as_deref(), Some("3"));
            assert_eq!(value(OVER_LIMIT).as_deref(), Some("1"));
            assert_eq!(value(WITHIN_LIMIT).as_deref(), Some("2"));
        });
    }

    #[test]
    fn unknown_domains_are_named_up_to_a_bound() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..MAX_UNKNOWN_DOMAINS {
            let name = format!("d{i}");
            assert_eq!(domain_label(&mut seen, &name), name);
        }
        assert_eq!(domain_label(&mut seen, "one-more"), OTHER_DOMAINS);
        // Those already named keep their name.
        assert_eq!(domain_label(&mut seen, "d7"), "d7");
        let long = "x".repeat(MAX_DOMAIN_LABEL + 1);
        assert_eq!(domain_label(&mut Default::default(), &long), OTHER_DOMAINS);
    }

    #[test]
    fn hits_split_as_the_go_service_splits_them() {
        let s = |over, near, within| Split { over, near, within };
        // Within, below the mark (8 of 10).
        assert_eq!(split(2, 3, false), s(0, 0, 2));
        // Crossing the mark: the hits past it are near.
        assert_eq!(split(3, 6, false), s(0, 1, 3));
        // Already past it.
        assert_eq!(split(1, 8, false), s(0, 1, 1));
        // Over, from within: past the limit over, from the mark to the limit near.
        assert_eq!(split(5, 7, true), s(2, 2, 0));
        // Over, from past the limit: all over, none near.
        assert_eq!(split(3, 10, true), s(3, 0, 0));
        // Refused within the limit (local-first's probabilistic denial): all over.
        assert_eq!(split(1, 8, true), s(1, 2, 0));
    }
}
