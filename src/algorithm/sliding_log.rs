//! Sliding-window log: an exact log of admissions, `N` in any span of `P`. All sliding-log
//! limits of a policy share one log per key (one sorted set in Redis), each counting its own
//! span. Twin of `lua/sliding_log.lua`.

use std::collections::VecDeque;

use super::{span, Eval};

/// Admission times in µs, oldest first, each with the running total of units admitted up to
/// and including it (Redis keeps one sorted-set member per unit). Running totals make every
/// count a subtraction and every search a binary search: O(log n) per check, as `ZCOUNT`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Log {
    entries: VecDeque<(u64, u64)>,
    /// The running total before the oldest entry (what trimming removed).
    base: u64,
}

impl Log {
    /// The running total before entry `i`.
    fn total_before(&self, i: usize) -> u64 {
        match i.checked_sub(1) {
            Some(prev) => self.entries[prev].1,
            None => self.base,
        }
    }

    fn total(&self) -> u64 {
        self.entries.back().map_or(self.base, |&(_, total)| total)
    }

    /// Drops entries no span of `max_period_us` can count: those at or before `now − max`.
    pub(crate) fn trim(&mut self, now: u64, max_period_us: u64) {
        while self
            .entries
            .front()
            .is_some_and(|&(t, _)| t + max_period_us <= now)
        {
            if let Some((_, total)) = self.entries.pop_front() {
                self.base = total;
            }
        }
    }

    /// Records `cost` units at `now`.
    pub(crate) fn record(&mut self, now: u64, cost: u64) {
        if cost == 0 {
            return;
        }
        let at = self.entries.partition_point(|&(t, _)| t <= now);
        if at == self.entries.len() {
            match self.entries.back_mut() {
                Some((t, total)) if *t == now => *total += cost,
                _ => {
                    let total = self.total() + cost;
                    self.entries.push_back((now, total));
                }
            }
            return;
        }
        // A time before the newest entry (the clock went back): rare, so linear is fine.
        let later = if at > 0 && self.entries[at - 1].0 == now {
            self.entries[at - 1].1 += cost;
            at
        } else {
            let total = self.total_before(at) + cost;
            self.entries.insert(at, (now, total));
            at + 1
        };
        for entry in self.entries.iter_mut().skip(later) {
            entry.1 += cost;
        }
    }

    /// The units in the log, as Redis would count sorted-set members.
    #[cfg(test)]
    pub(crate) fn units(&self) -> u64 {
        self.total() - self.base
    }

    /// Evaluates `cost` against `count` in the span `(now − period, ∞)`.
    pub(crate) fn check(&self, count: u64, period_us: u64, cost: u64, now: u64) -> Eval {
        let first = self.entries.partition_point(|&(t, _)| t + period_us <= now);
        let before = self.total_before(first);
        let used = self.total() - before;
        // The newest entry is in the span whenever the span holds anything.
        let reset_before = match self.entries.back() {
            Some(&(t, _)) if used > 0 => (t + period_us).saturating_sub(now),
            _ => 0,
        };
        let remaining = count.saturating_sub(used);
        if cost > count {
            return Eval::never(remaining, reset_before);
        }
        let allowed = used + cost <= count;
        let retry = if allowed {
            0
        } else {
            // The k-th oldest unit in the span must leave it for `cost` more to fit.
            let target = before + (used + cost - count);
            let kth = self.entries.partition_point(|&(_, total)| total < target);
            let at = self.entries.get(kth).map_or(now, |&(t, _)| t);
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
    fn out_of_order_times_keep_running_totals() {
        let mut log = Log::default();
        log.record(10, 1);
        log.record(30, 2);
        log.record(20, 4); // the clock went back
        log.record(20, 1);
        assert_eq!(log.units(), 8);
        // Span (15, ∞) holds 20 and 30: 5 + 2 units.
        assert_eq!(log.check(100, 85, 0, 100).remaining_before, 93);
        // The 3rd unit in that span sits at 20: it leaves at 20 + 85.
        assert_eq!(log.check(7, 85, 3, 100).retry, 5);
        log.trim(111, 100);
        assert_eq!(log.units(), 7);
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
