//! One stream's watch of one bucket: its demand measured on this server's clock, when it was
//! last active, and what was last pushed to it (and the rule deciding whether to push again).

use std::time::{Duration, Instant};

use crate::rls::proto::envoy::r#type::v3::RateLimitStrategy;

use super::quota::tokens_per_fill;

/// The shortest span a demand is measured over: reports closer together (Envoy reports a
/// bucket at once when it is new, then every 5 s) add up until this much time has passed.
pub(crate) const MIN_WINDOW: Duration = Duration::from_millis(500);

/// A share that moved by less than this fraction of what was pushed (or by less than
/// [`MIN_STEP`] tokens) is not pushed again: Envoy replaces a bucket's limiter on every change
/// (losing a fractional token, carrying its fill ratio), so changes are kept to material ones.
pub(crate) const MATERIAL: f64 = 0.03;

/// The fewest tokens per fill a pushed share must move by to be pushed again.
pub(crate) const MIN_STEP: u64 = 2;

/// A client reports every bucket it holds each interval, idle ones too (Envoy: every 5 s):
/// one that has sent nothing for this many of its own intervals is gone (a host that died
/// without closing its connection), and its demand counts as none.
pub(crate) const SILENT_INTERVALS: u32 = 3;

/// A demand is the count of a client's requests over its last windows, each earlier one
/// weighed this much less (about four windows' memory): a Poisson count over one window is
/// rough (60/s over 1 s: ±13 %), and a share cut to the rest of a stream's lull is overshot when
/// it ends, at once, since that stream is given all it asks.
pub(crate) const DEMAND_MEMORY: f64 = 0.75;

/// A window whose count is this many standard deviations (of a Poisson count at the demand)
/// from the demand is a shift, not noise: the demand is that window's alone, at once.
pub(crate) const SHIFT_SIGMAS: f64 = 3.0;

/// How often Envoy reports (hard-coded in its filter, whatever its `reporting_interval`).
pub(crate) const ENVOY_REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// A stream's watch of a bucket.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    window_start: Instant,
    window_usage: u64,
    window_allowed: u64,
    last_report: Instant,
    /// The time between its last two reports.
    gap: Option<Duration>,
    /// Requests per second (admitted and denied), over the last full window; `None` until one
    /// window has passed since the watch, unless its first report said over how long.
    pub(crate) demand: Option<f64>,
    /// How long [`demand`](Self::demand) was measured over (its precision: a count of Poisson
    /// arrivals over a short window is a rough rate), its earlier windows weighed less.
    pub(crate) window: Duration,
    /// The requests counted in [`window`](Self::window) (weighed as it is).
    counted: f64,
    /// Requests per second admitted, over the last full window on this server's clock that
    /// began with the demand known (so under a share made from it); `None` until then (a
    /// first report's admissions may be a fallback's, a first window's a guess's).
    pub(crate) admitted: Option<f64>,
    /// The last report with any usage (the watch's own, at first).
    pub(crate) last_active: Instant,
    /// The strategy last pushed, and when (pushed again unchanged to extend its TTL).
    pub(crate) pushed: Option<(RateLimitStrategy, Instant)>,
}

/// What to send a watch now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Push {
    /// Nothing.
    Nothing,
    /// The new strategy (a material change, or the first).
    Change(RateLimitStrategy),
    /// The strategy pushed last, again: the same parameters only extend its TTL in Envoy.
    Refresh(RateLimitStrategy),
}

impl Watch {
    /// A watch started by a report of `allowed` and `denied` requests at `now`, over the
    /// `elapsed` whole seconds the client says the report covers. A bucket's very first report
    /// (Envoy: usage 1, `time_elapsed` 0) says nothing of its rate, and its demand is measured
    /// from the next; but a client that reconnects (to this instance, after another stopped)
    /// reports every bucket it holds with the usage since its last report and `time_elapsed` of
    /// 1 s or more: that is its demand at once, rather than one report interval later.
    pub(crate) fn new(allowed: u64, denied: u64, elapsed: Duration, now: Instant) -> Watch {
        let usage = allowed.saturating_add(denied);
        // Whole seconds, rounded down; Envoy reports on a fixed tick, so a reconnecting
        // Envoy's span is its tick (5 s) to within milliseconds.
        let known = elapsed >= Duration::from_secs(1);
        Watch {
            window_start: now,
            window_usage: if known { 0 } else { usage },
            window_allowed: if known { 0 } else { allowed },
            last_report: now,
            gap: None,
            demand: known.then(|| usage as f64 / elapsed.as_secs_f64()),
            window: if known { elapsed } else { Duration::ZERO },
            counted: if known { usage as f64 } else { 0.0 },
            admitted: None,
            last_active: now,
            pushed: None,
        }
    }

    /// A later report of `allowed` and `denied` requests at `now`.
    pub(crate) fn report(&mut self, allowed: u64, denied: u64, now: Instant) {
        let usage = allowed.saturating_add(denied);
        if usage > 0 {
            self.last_active = now;
        }
        self.gap = Some(now.saturating_duration_since(self.last_report));
        self.last_report = now;
        self.window_usage = self.window_usage.saturating_add(usage);
        self.window_allowed = self.window_allowed.saturating_add(allowed);
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= MIN_WINDOW {
            if self.demand.is_some() {
                self.admitted = Some(self.window_allowed as f64 / elapsed.as_secs_f64());
            }
            self.measure(self.window_usage as f64, elapsed.as_secs_f64());
            self.window_start = now;
            self.window_usage = 0;
            self.window_allowed = 0;
        }
    }

    /// Takes `count` requests over the window of `seconds` just ended into the demand: with
    /// the earlier windows (weighed by [`DEMAND_MEMORY`]) while it is within
    /// [`SHIFT_SIGMAS`] of it, alone otherwise (or first).
    fn measure(&mut self, count: f64, seconds: f64) {
        let span = self.window.as_secs_f64();
        let noise = self.demand.filter(|_| span > 0.0).is_some_and(|demand| {
            let expected = demand * seconds;
            (count - expected).abs() <= SHIFT_SIGMAS * expected.max(1.0).sqrt()
        });
        let (counted, span) = if noise {
            (
                self.counted * DEMAND_MEMORY + count,
                span * DEMAND_MEMORY + seconds,
            )
        } else {
            (count, seconds)
        };
        self.counted = counted;
        self.window = Duration::from_secs_f64(span);
        self.demand = Some(counted / span);
    }

    /// Whether the client is silent for [`SILENT_INTERVALS`] of its report intervals (each
    /// at least `least`; Envoy's 5 s before a second report shows it): gone.
    fn silent(&self, now: Instant, least: Duration) -> bool {
        let gap = self.gap.map_or(ENVOY_REPORT_INTERVAL, |gap| gap.max(least));
        now.saturating_duration_since(self.last_report) > gap * SILENT_INTERVALS
    }

    /// The demand at `now`: none from a client silent for [`SILENT_INTERVALS`] of its report
    /// intervals (each at least `least`; Envoy's 5 s before a second report shows it).
    pub(crate) fn demand_at(&self, now: Instant, least: Duration) -> Option<f64> {
        if self.silent(now, least) {
            return Some(0.0);
        }
        self.demand
    }

    /// The admitted rate at `now`, as [`demand_at`](Self::demand_at) the demand.
    pub(crate) fn admitted_at(&self, now: Instant, least: Duration) -> Option<f64> {
        if self.silent(now, least) {
            return Some(0.0);
        }
        self.admitted
    }

    /// Whether no usage was reported for `idle` (and so the bucket is to be abandoned).
    pub(crate) fn idle(&self, idle: Duration, now: Instant) -> bool {
        now.saturating_duration_since(self.last_active) >= idle
    }

    /// What to push for the strategy `new` at `now`, under assignments living `ttl`: a first
    /// or different kind of strategy at once, a token bucket when its rate moved materially,
    /// else the last pushed again once half its TTL has run.
    pub(crate) fn decide(&self, new: &RateLimitStrategy, ttl: Duration, now: Instant) -> Push {
        let Some((old, at)) = &self.pushed else {
            return Push::Change(*new);
        };
        if changed(old, new) {
            return Push::Change(*new);
        }
        if now.saturating_duration_since(*at) >= ttl / 2 {
            return Push::Refresh(*old);
        }
        Push::Nothing
    }
}

/// Whether `new` differs materially from `old`.
fn changed(old: &RateLimitStrategy, new: &RateLimitStrategy) -> bool {
    use crate::rls::proto::envoy::r#type::v3::rate_limit_strategy::Strategy;
    match (&old.strategy, &new.strategy) {
        (Some(Strategy::TokenBucket(a)), Some(Strategy::TokenBucket(b))) => {
            if a.fill_interval != b.fill_interval {
                return true;
            }
            // A bucket twice as deep or half as deep (a first, shallow one deepened once the
            // stream's demand is measured).
            let (low, high) = (
                a.max_tokens.min(b.max_tokens),
                a.max_tokens.max(b.max_tokens),
            );
            if u64::from(low) * 2 <= u64::from(high) {
                return true;
            }
            let (Some(a), Some(b)) = (tokens_per_fill(old), tokens_per_fill(new)) else {
                return true;
            };
            let step = a.abs_diff(b);
            step >= MIN_STEP && step as f64 > MATERIAL * a as f64
        }
        (a, b) => a != b,
    }
}

#[cfg(test)]
mod tests {
    use super::super::quota::{blanket, token_bucket};
    use super::*;
    use crate::rls::proto::envoy::r#type::v3::rate_limit_strategy::BlanketRule;

    #[test]
    fn demand_is_measured_on_our_clock_over_half_a_second_at_least() {
        let t0 = Instant::now();
        let mut watch = Watch::new(1, 0, Duration::ZERO, t0);
        watch.report(50, 0, t0 + Duration::from_millis(100));
        assert_eq!(watch.demand, None, "too soon to measure");
        watch.report(29, 20, t0 + Duration::from_secs(5));
        assert_eq!(watch.demand, Some(20.0), "100 requests over 5 s");
        assert_eq!(watch.admitted, None, "admitted before its demand was known");
        watch.report(0, 0, t0 + Duration::from_secs(10));
        assert_eq!(watch.demand, Some(0.0));
        assert_eq!(watch.admitted, Some(0.0), "measured under a known demand");
        assert!(!watch.idle(Duration::from_secs(6), t0 + Duration::from_secs(10)));
        assert!(watch.idle(Duration::from_secs(5), t0 + Duration::from_secs(10)));
        // Reporting every 5 s: silent for over 15 s, it is gone.
        watch.report(10, 0, t0 + Duration::from_secs(15));
        let least = Duration::from_secs(1);
        assert_eq!(
            watch.demand_at(t0 + Duration::from_secs(29), least),
            Some(2.0)
        );
        assert_eq!(
            watch.demand_at(t0 + Duration::from_secs(31), least),
            Some(0.0)
        );
        assert_eq!(
            watch.admitted_at(t0 + Duration::from_secs(31), least),
            Some(0.0)
        );
    }

    #[test]
    fn a_reconnecting_clients_first_report_is_its_demand_at_once() {
        let t0 = Instant::now();
        // Usage since its last report (to another instance), 5 whole seconds ago.
        let mut watch = Watch::new(40, 60, Duration::from_secs(5), t0);
        assert_eq!(watch.demand, Some(20.0));
        assert_eq!(watch.window, Duration::from_secs(5));
        assert_eq!(watch.admitted, None, "what it admitted may be a fallback's");
        watch.report(50, 50, t0 + Duration::from_secs(5));
        assert_eq!(
            watch.admitted,
            Some(10.0),
            "under a share made from its demand"
        );
        // A bucket's very first report says nothing of its rate.
        let mut first = Watch::new(1, 0, Duration::ZERO, t0);
        assert_eq!(first.demand, None);
        first.report(9, 0, t0 + Duration::from_secs(2));
        assert_eq!(first.demand, Some(5.0));
    }

    #[test]
    fn demand_keeps_earlier_windows_through_noise_and_follows_a_shift_at_once() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let mut watch = Watch::new(1, 0, Duration::ZERO, t0);
        watch.report(59, 0, t0 + second);
        assert_eq!(watch.demand, Some(60.0), "the first window alone");
        // 50 against 60 expected: noise (3 sigma is 23); 60 * 0.75 + 50 over 1.75 s.
        watch.report(50, 0, t0 + 2 * second);
        let demand = watch.demand.unwrap();
        assert!((demand - 95.0 / 1.75).abs() < 1e-9, "{demand}");
        assert_eq!(watch.window, Duration::from_secs_f64(1.75));
        // 200: a shift, taken alone.
        watch.report(200, 0, t0 + 3 * second);
        assert_eq!(watch.demand, Some(200.0));
        assert_eq!(watch.window, second);
    }

    #[test]
    fn pushes_only_material_changes_and_refreshes_at_half_the_ttl() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(10);
        let mut watch = Watch::new(1, 0, Duration::ZERO, t0);
        let first = token_bucket(100, 1, 1.0, 0);
        assert_eq!(watch.decide(&first, ttl, t0), Push::Change(first));
        watch.pushed = Some((first, t0));
        let near = token_bucket(102, 1, 1.0, 0);
        assert_eq!(
            watch.decide(&near, ttl, t0),
            Push::Nothing,
            "2 % is not material"
        );
        let far = token_bucket(110, 1, 1.0, 0);
        assert_eq!(watch.decide(&far, ttl, t0), Push::Change(far));
        assert_eq!(
            watch.decide(&near, ttl, t0 + Duration::from_secs(5)),
            Push::Refresh(first),
            "the pushed one again: no reset in Envoy"
        );
        let deny = blanket(BlanketRule::DenyAll);
        assert_eq!(watch.decide(&deny, ttl, t0), Push::Change(deny));
        // A small share moves by whole tokens: one token is not material.
        watch.pushed = Some((token_bucket(5, 1, 1.0, 0), t0));
        assert_eq!(
            watch.decide(&token_bucket(6, 1, 1.0, 0), ttl, t0),
            Push::Nothing
        );
        assert!(matches!(
            watch.decide(&token_bucket(7, 1, 1.0, 0), ttl, t0),
            Push::Change(_)
        ));
        // The same rate in a bucket twice as deep (a first, shallow one once measured).
        watch.pushed = Some((token_bucket(100, 1, 0.1, 0), t0));
        let deeper = token_bucket(100, 1, 0.5, 0);
        assert_eq!(watch.decide(&deeper, ttl, t0), Push::Change(deeper));
        assert_eq!(
            watch.decide(&token_bucket(100, 1, 0.15, 0), ttl, t0),
            Push::Nothing
        );
    }
}
