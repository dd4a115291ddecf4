//! The decision counters and the store-latency histogram of one layer, with their handles
//! kept: after the first request of each kind, recording one is an atomic add, with no label
//! built or looked up per request.
//!
//! Handles are taken on first use, from the recorder installed then: install the recorder
//! (e.g. a Prometheus exporter) before serving requests.

use crate::decision::Decision;
#[cfg(feature = "metrics")]
use crate::decision::DecisionSource;

#[cfg(feature = "metrics")]
use std::sync::{Arc, OnceLock};

#[cfg(feature = "metrics")]
use metrics::{Counter, Gauge, SharedString};

#[cfg(feature = "metrics")]
use crate::telemetry::{DECISIONS, LEASES_IN_FLIGHT, REQUESTS_UNDECIDED};

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

/// The meters of a layer's rules (indexed by rule id); the store's are the engine's
/// ([`StoreMeter`](crate::engine::StoreMeter)).
pub(crate) struct Meters {
    #[cfg(feature = "metrics")]
    rules: Box<[RuleMeters]>,
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
    /// Meters for rules with these policies (in rule order).
    pub(crate) fn new<'a>(policies: impl Iterator<Item = &'a crate::Policy>) -> Self {
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
            #[cfg(feature = "metrics")]
            rules,
        }
    }

    /// Counts a decision of rule `rule`; `shadow`: a denial that was let through.
    #[inline]
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
}

impl Meters {
    /// Counts a concurrency lease of rule `rule` taken, until the returned meter is dropped.
    pub(crate) fn lease(&self, rule: usize) -> crate::engine::LeaseMeter {
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
            crate::engine::LeaseMeter::counting(gauge)
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = rule;
            crate::engine::LeaseMeter::counting()
        }
    }
}
