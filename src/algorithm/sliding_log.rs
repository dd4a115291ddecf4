//! Sliding-window log: an exact log of admissions, `N` in any span of `P`. All sliding-log
//! limits of a policy share one log per key (one sorted set in Redis), each counting its own
//! span. Twin of `lua/sliding_log.lua`.

use std::collections::VecDeque;

use super::{span, Eval};

/// Admission times in µs, oldest first, each with the units admitted at that instant (Redis
/// keeps one sorted-set member per unit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Log {
    entries: VecDeque<(u64, u64)>,
}

impl Log {
    /// Drops entries no span of `max_period_us` can count: those at or before `now − max`.
    pub(crate) fn trim(&mut self, now: u64, max_period_us: u64) {
        while self
            .entries
            .front()
            .is_some_and(|&(t, _)| t + max_period_us <= now)
        {
            self.entries.pop_front();
        }
    }

    /// Records `cost` units at `now`.
    pub(crate) fn record(&mut self, now: u64, cost: u64) {
        if cost == 0 {
            return;
        }
        let at = self.entries.partition_point(|&(t, _)| t <= now);
        match at.checked_sub(1).map(|i| &mut self.entries[i]) {
            Some((t, units)) if *t == now => *units += cost,
            _ => self.entries.insert(at, (now, cost)),
        }
    }

    /// The units in the log, as Redis would count sorted-set members.
    #[cfg(test)]
    pub(crate) fn units(&self) -> u64 {
        self.entries.iter().map(|&(_, n)| n).sum()
    }

    /// Evaluates `cost` against `count` in the span `(now − period, ∞)`.
    pub(crate) fn check(&self, count: u64, period_us: u64, cost: u64, now: u64) -> Eval {
        let in_span = || {
            self.entries
                .iter()
                .filter(move |&&(t, _)| t + period_us > now)
        };
        let used: u64 = in_span().map(|&(_, n)| n).sum();
        let newest = in_span().map(|&(t, _)| t).max();
        let reset_before = newest.map_or(0, |t| (t + period_us).saturating_sub(now));
        let remaining = count.saturating_sub(used);
        if cost > count {
            return Eval::never(remaining, reset_before);
        }
        let allowed = used + cost <= count;
        let retry = if allowed {
            0
        } else {
            // The k-th oldest unit in the span must leave it for `cost` more to fit.
            let mut k = used + cost - count;
            let mut at = now;
            for &(t, n) in in_span() {
                at = t;
                if n >= k {
                    break;
                }
                k -= n;
            }
            span((at + period_us).saturating_sub(now))
        };
        Eval {
            allowed,
            remaining_before: remaining,
            remaining_after: if allowed { remaining - cost } else { remaining },
            reset_before,
            reset_after: if allowed && cost > 0 {
                period_us
            } else {
                reset_before
            },
            retry,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_in_any_span() {
        let p = 3_000_000;
        let mut log = Log::default();
        for i in 0..5 {
            let now = 10_000_000 + i * 100_000;
            assert!(log.check(5, p, 1, now).allowed);
            log.record(now, 1);
        }
        let e = log.check(5, p, 1, 10_500_000);
        assert!(!e.allowed);
        // The oldest unit (at 10.0 s) leaves the span at 13.0 s.
        assert_eq!(e.retry, 2_500_000);
        assert!(!log.check(5, p, 1, 12_999_999).allowed);
        assert!(
            log.check(5, p, 1, 13_000_000).allowed,
            "span is (now − P, now]"
        );
        // Two units need the one at 10.1 s gone too.
        assert_eq!(log.check(5, p, 2, 13_000_000).retry, 100_000);
    }

    #[test]
    fn trim_keeps_what_the_longest_span_needs() {
        let mut log = Log::default();
        log.record(1, 2);
        log.record(5, 1);
        log.record(5, 1);
        assert_eq!(log.units(), 4);
        log.trim(11, 10);
        assert_eq!(log.units(), 2);
        log.trim(15, 10);
        assert_eq!(log.units(), 0);
    }
}
