//! Sliding-window log: an exact log of admissions, `N` in any span of `P`. All sliding-log
//! limits of a policy share one log per key (one sorted set in Redis), each counting its own
//! span. Twin of `lua/sliding_log.lua`.
//!
//! A log entry later than `now` cannot exist on a monotonic clock (the clock stepped back):
//! the log then reads "now" as its newest entry's time, so entries stay in time order and no
//! wait asked for exceeds the period.

use std::collections::VecDeque;

use super::{Eval, PerKey, RateAlgorithm, Step, span};

/// The sliding log in the table: a per-key algorithm, its state the key's [`Log`].
pub(crate) struct SlidingLog;

impl RateAlgorithm for SlidingLog {
    const NAME: &'static str = "sliding-log";
    const CODE: &'static str = "sl";
    const LUA_FN: &'static str = "sliding_log";
    const LUA_FILE: &'static str = include_str!("../../lua/sliding_log.lua");
    const PER_KEY: bool = true;
    type State = ();

    /// Counts the span of `period_us` in the key's log (trimmed to the longest log span
    /// first); the log matters for the longest log period, the largest of these TTLs.
    fn check(
        _: Option<()>,
        key: &PerKey,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> Step<()> {
        Step {
            eval: key.log.check(count, period_us, cost, now),
            next: (),
            ttl: period_us,
        }
    }

    /// Nothing per limit: the log is the key's, given back once by [`PerKey::refund`].
    /// The log is the key's: [`Log::charge`] records the units, once for all its limits.
    fn charge(_: Option<()>, _: u64, period_us: u64, _: u64, _: u64) -> ((), u64) {
        ((), period_us)
    }

    fn refund(_: &mut Option<()>, _: u64, _: u64, _: u64, _: u64, _: u64) -> bool {
        false
    }
}

/// Admission times in µs, oldest first, each with the running total of units admitted up to
/// and including it (Redis keeps one sorted-set member per admission, named by that total).
/// Running totals make every count a subtraction and every search a binary search: O(log n)
/// per check whatever the cost, as in Redis.
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

    /// The time the log reads as now: `now`, or its newest entry's if that is later.
    fn clamp(&self, now: u64) -> u64 {
        self.entries.back().map_or(now, |&(t, _)| t.max(now))
    }

    /// Drops entries no span of `max_period_us` can count: those at or before `now − max`.
    pub(crate) fn trim(&mut self, now: u64, max_period_us: u64) {
        let now = self.clamp(now);
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
        let now = self.clamp(now);
        let total = self.total() + cost;
        match self.entries.back_mut() {
            Some((t, last)) if *t == now => *last = total,
            _ => self.entries.push_back((now, total)),
        }
    }

    /// The units in the log, as Redis would count sorted-set members.
    /// Records a charge of `cost` units at `now` for the log limits `limits` (count, period):
    /// whatever the spans hold, up to the units that take the fullest span to twice its
    /// count ([`debt_cap`](super::debt_cap)), so a client that keeps charging while refused
    /// adds no entries once every span is that full. Answers the units recorded.
    pub(crate) fn charge(
        &mut self,
        limits: impl Iterator<Item = (u64, u64)>,
        cost: u64,
        now: u64,
    ) -> u64 {
        let room = limits
            .map(|(count, period_us)| {
                super::debt_cap(count).saturating_sub(self.used(period_us, now))
            })
            .max()
            .unwrap_or(0);
        let units = cost.min(room);
        self.record(now, units);
        units
    }

    /// The units in the span `(now − period, ∞)`.
    fn used(&self, period_us: u64, now: u64) -> u64 {
        let now = self.clamp(now);
        let first = self.entries.partition_point(|&(t, _)| t + period_us <= now);
        self.total() - self.total_before(first)
    }

    /// Gives back up to `cost` units of the entry recorded at `at` (a refund): later entries
    /// keep their own units. Nothing once the entry left every span (of `max_period_us`) or
    /// holds nothing. Answers whether anything was given back.
    pub(crate) fn refund(&mut self, at: u64, cost: u64, now: u64, max_period_us: u64) -> bool {
        if at.saturating_add(max_period_us) <= now {
            return false;
        }
        let Some(i) = self.entries.iter().position(|&(t, _)| t == at) else {
            return false;
        };
        let units = self.entries[i].1 - self.total_before(i);
        let back = units.min(cost);
        if back == 0 {
            return false;
        }
        for entry in self.entries.iter_mut().skip(i) {
            entry.1 -= back;
        }
        if back == units {
            self.entries.remove(i);
        }
        true
    }

    #[cfg(test)]
    pub(crate) fn units(&self) -> u64 {
        self.total() - self.base
    }

    /// Evaluates `cost` against `count` in the span `(now − period, ∞)`.
    pub(crate) fn check(&self, count: u64, period_us: u64, cost: u64, now: u64) -> Eval {
        let now = self.clamp(now);
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
    fn a_clock_step_back_reads_now_as_the_newest_entry() {
        let mut log = Log::default();
        log.record(10, 1);
        log.record(30, 2);
        // The clock stepped back to 20: the log reads 30, and records there.
        log.record(20, 4);
        assert_eq!(log.units(), 7);
        assert_eq!(log.entries.back(), Some(&(30, 7)));
        // 7 units in any span of 100: 3 more fit at 10 of 10.
        assert_eq!(log.check(10, 100, 0, 20).remaining_before, 3);
        // Waiting for room is never longer than the period from the newest entry.
        assert!(log.check(7, 100, 1, 0).retry <= 100);
    }

    #[test]
    fn a_charge_is_recorded_past_the_limit_up_to_twice_it() {
        let p = 1_000_000;
        let mut log = Log::default();
        assert_eq!(log.charge([(3, p)].into_iter(), 5, 10), 5);
        let e = log.check(3, p, 1, 10);
        assert!(!e.allowed);
        assert_eq!((e.remaining_before, e.retry), (0, p as i64));
        assert_eq!(
            log.charge([(3, p)].into_iter(), 5, 20),
            1,
            "up to 6 in the span"
        );
        assert_eq!(log.charge([(3, p)].into_iter(), 5, 30), 0);
        // The most room among the limits: a longer limit's span counts the same units.
        assert_eq!(log.charge([(3, p), (10, 10 * p)].into_iter(), 100, 40), 14);
        assert_eq!(log.units(), 20);
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
