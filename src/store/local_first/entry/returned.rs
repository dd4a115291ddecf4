//! Refunds given back to an entry's views, kept for the syncs in flight: a sync that went out
//! before a refund's call answers with the state Redis read before giving the refund back.

use super::{Entry, Mode};

/// A refund given back to the views, kept until a sync that went out after its call brings
/// the fleet's state with it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Returned {
    cost: u64,
    /// When the refunded units were admitted (Redis time, µs).
    at: u64,
    /// When the refund's call went out (local clock, µs).
    sent: u64,
}

/// The refunds an entry keeps for syncs in flight: more than this many within one round trip
/// are given back once, without their replay (the views then hold the oldest of them until
/// the next sync: fewer admissions, never more).
const RETURNED_KEPT: usize = 16;

impl Entry {
    /// Gives back `cost` units admitted at `at` to the view (a refund Redis applied to the
    /// fleet's state, its call sent at local time `sent`), as the algorithm refunds them: see
    /// `Refund`.
    pub(crate) fn give_back(&mut self, cost: u64, at: u64, sent: u64, now: u64) {
        // Kept while joining too: the sync that joins may have gone out before the refund.
        if self.mode != Mode::Exact {
            if self.returned.len() == RETURNED_KEPT {
                self.returned.remove(0);
            }
            self.returned.push(Returned { cost, at, sent });
        }
        if !self.synced {
            return;
        }
        for (limit, view) in self.limits.iter().zip(self.views.iter_mut()) {
            view.refund(limit.count(), limit.period_us(), cost, at, now);
        }
    }

    /// Gives back again, to the views a sync's reply just made, every refund whose call went
    /// out after the sync's (at local time `sent_at`), and forgets the others: the reply
    /// includes them.
    pub(super) fn replay_returned(&mut self, sent_at: u64, now: u64) {
        self.returned.retain(|r| r.sent > sent_at);
        for r in &self.returned {
            for (limit, view) in self.limits.iter().zip(self.views.iter_mut()) {
                view.refund(limit.count(), limit.period_us(), r.cost, r.at, now);
            }
        }
    }
}
