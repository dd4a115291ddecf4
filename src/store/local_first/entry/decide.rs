//! One key's decisions on this instance: admitted from its view of the fleet, with the rest of
//! the fleet's demand extrapolated up to now.

use std::sync::Arc;

use smallvec::SmallVec;

use super::{Context, Entry, fresh_views};
use crate::algorithm::{Eval, State};
use crate::decision::{LimitState, LimitStates};
use crate::limit::Limit;
use crate::store::local_first::admission::{admits, admitted_of, deny_probability};
use crate::store::local_first::view::View;

/// A decision evaluated on one entry, before the draw: each limit's verdict (what its view
/// says, its next state if admitted, its deny probability and the count it was held to).
pub(crate) struct Evaluation {
    verdicts: SmallVec<[(Eval, State, f64, u64); 2]>,
    /// The highest deny probability of the entry's limits.
    pub(crate) worst: f64,
}

impl Entry {
    /// Decides `cost` at `now`; commits it to the view if admitted. Returns each limit's state
    /// and whether the request was admitted.
    pub(crate) fn decide(&mut self, cost: u64, now: u64, ctx: &Context) -> (LimitStates, bool) {
        let evaluation = self.evaluate(cost, now, ctx);
        let worst = evaluation.worst;
        let admitted = admits(worst, ctx.draw);
        (
            self.settle(evaluation, admitted, worst, cost, now, ctx),
            admitted,
        )
    }

    /// Evaluates `cost` at `now` without committing it: the view brought up to `now`, and each
    /// limit's verdict. [`settle`](Self::settle) commits it, or not.
    pub(crate) fn evaluate(&mut self, cost: u64, now: u64, ctx: &Context) -> Evaluation {
        self.last_used = now;
        let alone = ctx.isolated || !self.synced;
        if !alone {
            self.extrapolate(now, ctx);
        }
        if !ctx.isolated {
            self.offered += cost;
        }
        let limits = Arc::clone(&self.limits);
        let instances = u64::from(ctx.instances.max(1));
        let views = if alone {
            self.share.get_or_insert_with(|| fresh_views(&limits))
        } else {
            &mut self.views
        };
        let mut verdicts: SmallVec<[(Eval, State, f64, u64); 2]> = SmallVec::new();
        for (limit, view) in limits.iter().zip(views.iter()) {
            let count = if alone {
                limit.count().div_ceil(instances).max(1)
            } else {
                limit.count()
            };
            let (eval, next) = view.eval(count, limit.period_us(), cost, now);
            let used = count.saturating_sub(eval.remaining_before) + cost;
            let p = if cost > count {
                1.0
            } else {
                deny_probability(used, count, ctx.low, ctx.high)
            };
            verdicts.push((eval, next, p, count));
        }
        let worst = verdicts.iter().map(|v| v.2).fold(0.0, f64::max);
        Evaluation { verdicts, worst }
    }

    /// Commits `evaluation` if `admitted` (the draw passed `worst`, the highest deny
    /// probability of every entry decided together), and answers each limit's state: a limit
    /// at `worst` denies a request not admitted.
    pub(crate) fn settle(
        &mut self,
        evaluation: Evaluation,
        admitted: bool,
        worst: f64,
        cost: u64,
        now: u64,
        ctx: &Context,
    ) -> LimitStates {
        let Evaluation { verdicts, .. } = evaluation;
        let limits = Arc::clone(&self.limits);
        let alone = ctx.isolated || !self.synced;
        let views = if alone {
            self.share.get_or_insert_with(|| fresh_views(&limits))
        } else {
            &mut self.views
        };
        if admitted {
            for (view, verdict) in views.iter_mut().zip(&verdicts) {
                *view = verdict.1;
            }
            // Alone too: what an isolated instance admits reaches the fleet with its first
            // sync after, merged from when it was counted (units long past drop out), so the
            // fleet does not take a second budget on Redis's return (unless Redis forgot the
            // key meanwhile: `SyncItem::acked`).
            if cost > 0 {
                self.counted += cost;
                if ctx.isolated {
                    self.alone += cost;
                }
                self.since_sent.get_or_insert(now);
                self.since_unacked.get_or_insert(now);
            }
        }
        limits
            .iter()
            .zip(&verdicts)
            .map(|(limit, (eval, view, p, count))| {
                if admitted {
                    let (remaining, reset) = if eval.allowed {
                        (eval.remaining_after, eval.reset_after)
                    } else {
                        (0, eval.reset_before)
                    };
                    LimitState::from_raw(*limit, true, remaining.min(limit.count()), reset, 0)
                } else if cost > limit.count() {
                    LimitState::from_raw(
                        *limit,
                        false,
                        eval.remaining_before,
                        eval.reset_before,
                        -1,
                    )
                } else if *p > 0.0 && *p >= worst {
                    let retry = if eval.retry > 0 {
                        eval.retry.unsigned_abs()
                    } else {
                        let used = count.saturating_sub(eval.remaining_before) + cost;
                        let over = used.saturating_sub((ctx.low * *count as f64).floor() as u64);
                        view.wait_for(*count, limit.period_us(), over, eval)
                    };
                    LimitState::from_raw(
                        *limit,
                        false,
                        eval.remaining_before.min(limit.count()),
                        eval.reset_before,
                        crate::algorithm::span(retry.max(1)),
                    )
                } else {
                    LimitState::from_raw(
                        *limit,
                        true,
                        eval.remaining_before.min(limit.count()),
                        eval.reset_before,
                        0,
                    )
                }
            })
            .collect()
    }

    /// Charges `cost` at `now` whatever `evaluation` said (`Commit::Always`, a request the
    /// draw did not admit): the views take the units past the limit as the fleet's state
    /// does ([`View::add`], a GCRA capped as in Redis), counted toward the fleet as an
    /// admission is. Each limit is reported refused, nothing left, with its retry once the
    /// units are paid (at least 1 µs).
    pub(crate) fn charge_refused(
        &mut self,
        evaluation: Evaluation,
        cost: u64,
        now: u64,
        ctx: &Context,
    ) -> LimitStates {
        let Evaluation { verdicts, .. } = evaluation;
        let limits = Arc::clone(&self.limits);
        let alone = ctx.isolated || !self.synced;
        let views = if alone {
            self.share.get_or_insert_with(|| fresh_views(&limits))
        } else {
            &mut self.views
        };
        let mut states = LimitStates::new();
        for ((limit, view), (_, _, _, count)) in limits.iter().zip(views.iter_mut()).zip(&verdicts)
        {
            view.add(*count, limit.period_us(), cost, now);
            let (after, _) = view.eval(*count, limit.period_us(), 0, now);
            let retry = if after.retry > 0 { after.retry } else { 1 };
            states.push(LimitState::from_raw(
                *limit,
                false,
                0,
                after.reset_before,
                retry,
            ));
        }
        if cost > 0 {
            self.counted += cost;
            if ctx.isolated {
                self.alone += cost;
            }
            self.since_sent.get_or_insert(now);
            self.since_unacked.get_or_insert(now);
        }
        states
    }

    /// Adds the rest of the fleet's units up to `now` (at most up to the horizon the last
    /// sync set: past it the demand is unknown): its offered rate, admitted as this view
    /// admits.
    fn extrapolate(&mut self, now: u64, ctx: &Context) {
        let until = now.min(self.extrapolate_until);
        if until <= self.extrapolated_to || self.rate <= 0.0 {
            self.extrapolated_to = self.extrapolated_to.max(until);
            return;
        }
        // In steps offering at most a quarter of the admission band, each admitted at the
        // probability of the level it ends on (an implicit step, which never jumps past where
        // admissions stop), with the drain of its own span.
        let smallest = self.limits.iter().map(Limit::count).min().unwrap_or(1) as f64;
        let step_units = ((ctx.high - ctx.low) * smallest / 4.0).max(1.0);
        let span = until - self.extrapolated_to;
        let steps = (self.rate * span as f64 / step_units)
            .ceil()
            .clamp(1.0, 64.0) as u64;
        for k in 1..=steps {
            let at = self.extrapolated_to + span * k / steps;
            let previous = self.extrapolated_to + span * (k - 1) / steps;
            let x = self.admitted_of(self.rate * (at - previous) as f64, at, ctx) + self.fraction;
            let units = x.floor();
            self.fraction = x - units;
            if units >= 1.0 {
                let units = units as u64;
                for (limit, view) in self.limits.iter().zip(self.views.iter_mut()) {
                    view.add(limit.count(), limit.period_us(), units, at);
                }
            }
        }
        self.extrapolated_to = until;
    }

    /// How many of `offered` one-unit requests this view admits at `now`, each at the
    /// probability of the level it leaves ([`admitted_of`]; the tightest limit decides).
    fn admitted_of(&self, offered: f64, now: u64, ctx: &Context) -> f64 {
        self.limits
            .iter()
            .zip(&self.views)
            .map(|(limit, view)| {
                let count = limit.count();
                let (eval, _) = view.eval(count, limit.period_us(), 1, now);
                let used = count.saturating_sub(eval.remaining_before);
                admitted_of(offered, used, count, ctx.low, ctx.high)
            })
            .fold(offered, f64::min)
    }
}
