//! The decision counters and the store-latency histogram of one layer, with their handles
//! kept: after the first request of each kind, recording one is an atomic add, with no label
//! built or looked up per request.
//!
//! Handles are taken on first use, from the recorder installed then: install the recorder
//! (e.g. a Prometheus exporter) before serving requests.

use std::time::Duration;

use crate::decision::Decision;
#[cfg(feature = "metrics")]
use crate::decision::DecisionSource;

#[cfg(feature = "metrics")]
use std::sync::{Arc, OnceLock};

#[cfg(feature = "metrics")]
use metrics::{Counter, Gauge, Histogram, SharedString};

#[cfg(feature = "metrics")]
use crate::telemetry::{DECISIONS, LEASES_IN_FLIGHT, REQUESTS_UNDECIDED, STORE_DURATION};

#[cfg(feature = "metrics")]
const OUTCOMES: [&str; 3] = ["allowed", "denied", "shadow_denied"];
#[cfg(feature = "metrics")]
const SOURCES: [&str; 6] = [
    "store",
    "deny_cache",
    "local",
    "fail_open",
    "fail_closed",
    "local_first",
];

/// Why a request went on (or was answered 500) without the limiter's verdict enforced: the
/// `reason` of `redlimit_requests_undecided_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Undecided {
    /// The request had no key (answered 500, or let through by choice or in shadow mode).
    NoKey,
    /// The store failed and the failure mode let the request through.
    StoreUnavailable,
    /// Shadow mode let through a request the limit denied.
    Shadow,
}

impl Undecided {
    #[cfg(feature = "metrics")]
    const REASONS: [&'static str; 3] = ["no_key", "store_unavailable", "shadow"];
}

/// The meters of a layer's rules (indexed by rule id) and of its store.
pub(crate) struct Meters {
    store: &'static str,
    #[cfg(feature = "metrics")]
    rules: Box<[RuleMeters]>,
    #[cfg(feature = "metrics")]
    latency: OnceLock<Histogram>,
}

/// The decision counters of one rule: one per outcome, source and denying limit (or none).
#[cfg(feature = "metrics")]
struct RuleMeters {
    policy: Arc<str>,
    /// Each limit's name, for the `limit` label; the first, empty, for no denying limit.
    limits: Box<[Arc<str>]>,
    counters: Box<[OnceLock<Counter>]>,
    leases: OnceLock<Gauge>,
    /// The undecided requests, one counter per [`Undecided`] reason.
    undecided: [OnceLock<Counter>; 3],
}

impl Meters {
    /// Meters for rules with these policies (in rule order), on a store of kind `store`.
    pub(crate) fn new<'a>(
        store: &'static str,
        policies: impl Iterator<Item = &'a crate::Policy>,
    ) -> Self {
        #[cfg(feature = "metrics")]
        let rules = policies
            .map(|policy| {
                let limits: Box<[Arc<str>]> = std::iter::once(Arc::from(""))
                    .chain(policy.limits().iter().map(|l| Arc::from(l.to_string())))
                    .collect();
                let counters = (0..OUTCOMES.len() * SOURCES.len() * limits.len())
                    .map(|_| OnceLock::new())
                    .collect();
                RuleMeters {
                    policy: policy.name_arc(),
                    limits,
                    counters,
                    leases: OnceLock::new(),
                    undecided: Default::default(),
                }
            })
            .collect();
        #[cfg(not(feature = "metrics"))]
        let _ = policies;
        Meters {
            store,
            #[cfg(feature = "metrics")]
            rules,
            #[cfg(feature = "metrics")]
            latency: OnceLock::new(),
        }
    }

    /// The store's kind, for labels.
    pub(crate) fn store(&self) -> &'static str {
        self.store
    }

    /// Counts a decision of rule `rule`; `shadow`: a denial that was let through.
    pub(crate) fn decision(&self, rule: usize, decision: &Decision, shadow: bool) {
        #[cfg(feature = "metrics")]
        {
            let Some(meters) = self.rules.get(rule) else {
                return;
            };
            let outcome = match (decision.is_allowed(), shadow) {
                (true, _) => 0,
                (false, false) => 1,
                (false, true) => 2,
            };
            let source = match decision.source() {
                DecisionSource::Store => 0,
                DecisionSource::DenyCache => 1,
                DecisionSource::Local => 2,
                DecisionSource::FailOpen => 3,
                DecisionSource::FailClosed => 4,
                DecisionSource::LocalFirst => 5,
            };
            let limit = decision
                .denied_by()
                .map_or(0, |i| i + 1)
                .min(meters.limits.len() - 1);
            let index = (outcome * SOURCES.len() + source) * meters.limits.len() + limit;
            let Some(cell) = meters.counters.get(index) else {
                return;
            };
            cell.get_or_init(|| {
                crate::telemetry::describe();
                metrics::counter!(
                    DECISIONS,
                    "policy" => SharedString::from(Arc::clone(&meters.policy)),
                    "outcome" => OUTCOMES[outcome],
                    "source" => SOURCES[source],
                    "limit" => SharedString::from(Arc::clone(&meters.limits[limit])),
                )
            })
            .increment(1);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (rule, decision, shadow);
    }

    /// Counts a request of rule `rule` that went on (or was answered 500) without the
    /// limiter's verdict enforced, for `reason`.
    pub(crate) fn undecided(&self, rule: usize, reason: Undecided) {
        #[cfg(feature = "metrics")]
        if let Some(meters) = self.rules.get(rule) {
            let index = reason as usize;
            meters.undecided[index]
                .get_or_init(|| {
                    crate::telemetry::describe();
                    metrics::counter!(
                        REQUESTS_UNDECIDED,
                        "policy" => SharedString::from(Arc::clone(&meters.policy)),
                        "reason" => Undecided::REASONS[index],
                    )
                })
                .increment(1);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (rule, reason);
    }

    /// Records how long a store call that waited took to answer or fail.
    pub(crate) fn store_latency(&self, latency: Duration) {
        self.latency_handle().record(latency);
    }

    /// The latency histogram, for a call that outlives its request (it missed the deadline
    /// and finishes in the background): its answer, however late, is recorded too.
    pub(crate) fn latency_handle(&self) -> Latency {
        Latency {
            #[cfg(feature = "metrics")]
            histogram: self
                .latency
                .get_or_init(|| {
                    crate::telemetry::describe();
                    metrics::histogram!(STORE_DURATION, "store" => self.store)
                })
                .clone(),
        }
    }
}

impl Meters {
    /// Counts a concurrency lease of rule `rule` taken, until the returned meter is dropped.
    pub(crate) fn lease(&self, rule: usize) -> LeaseMeter {
        #[cfg(feature = "metrics")]
        {
            let gauge = self.rules.get(rule).map(|meters| {
                let gauge = meters.leases.get_or_init(|| {
                    crate::telemetry::describe();
                    metrics::gauge!(
                        LEASES_IN_FLIGHT,
                        "policy" => SharedString::from(Arc::clone(&meters.policy)),
                    )
                });
                gauge.increment(1.0);
                gauge.clone()
            });
            LeaseMeter { gauge }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = rule;
            LeaseMeter {}
        }
    }
}

/// One lease in the leases-in-flight gauge, counted out when dropped (with the lease it
/// travels with).
pub(crate) struct LeaseMeter {
    #[cfg(feature = "metrics")]
    gauge: Option<Gauge>,
}

impl LeaseMeter {
    /// A lease no request holds (taken by a late answer, given back at once): not counted.
    pub(crate) fn uncounted() -> Self {
        LeaseMeter {
            #[cfg(feature = "metrics")]
            gauge: None,
        }
    }
}

impl Drop for LeaseMeter {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        if let Some(gauge) = &self.gauge {
            gauge.decrement(1.0);
        }
    }
}

/// The store-latency histogram of one layer.
pub(crate) struct Latency {
    #[cfg(feature = "metrics")]
    histogram: Histogram,
}

impl Latency {
    /// Records one store call's time until it answered or failed.
    pub(crate) fn record(&self, latency: Duration) {
        #[cfg(feature = "metrics")]
        self.histogram.record(latency.as_secs_f64());
        #[cfg(not(feature = "metrics"))]
        let _ = latency;
    }
}
