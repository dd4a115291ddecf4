//! One key's local-first state under one policy: the fleet's view of each limit, what this
//! instance counted toward the fleet and what Redis acknowledged of it, and the rest of the
//! fleet's demand for extrapolation.
//!
//! Extrapolation models the rest of the fleet rather than replaying its past: the others'
//! *offered* rate (every unit asked for, admitted or not, as the syncs report it) is admitted
//! at the probability this instance's own view gives. Extrapolating the others' *admitted*
//! rate of the last interval would feed a delayed copy of the fleet's own reaction back into
//! every view, and the fleet would see-saw with a period of a few intervals; modelled this
//! way, every view moves as the fleet does and the fleet settles where its admissions match
//! the limit.
//!
//! Counting is idempotent by construction: an instance sends the *cumulative* units it counted
//! for the key (`counted`), never a delta; Redis keeps, per instance and entry, the last
//! cumulative it merged and adds only the difference. A lost sync is covered by the next one;
//! a repeated one adds nothing.

use std::sync::Arc;

use smallvec::SmallVec;

use super::view::{self, Fleet, View};
use crate::algorithm::State;
use crate::limit::Limit;
use crate::store::shard::Reclaim;

mod decide;
mod returned;

use returned::Returned;

/// How long an entry stays after its last request once Redis acknowledged all it counted:
/// then it is moot (a key that comes back starts afresh from the fleet's state).
const IDLE_US: u64 = 60_000_000;

/// How this instance decides a key: exactly, through Redis, while the key is cold here; in
/// memory once it is hot (see `LocalFirstStore`'s docs for the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Each decision is the exact store's.
    Exact,
    /// Hot: decided exactly until the first sync brings the fleet's state.
    Joining,
    /// Decided in memory from the view, synced in the background.
    Local,
}

/// Where one decision goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// To the exact store; `join`: the key just turned hot, sync it soon.
    Exact { join: bool },
    /// Decided here.
    Local,
}

/// The switching rule's numbers, from the store's settings and the policy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SwitchRule {
    /// Decisions of the key within one sync interval that make it hot.
    pub(crate) local_after: u64,
    /// Whether the policy's every limit admits at least `local_after` units per interval at
    /// its rate (if not, the key is decided exactly whatever its traffic).
    pub(crate) fits: bool,
    /// Syncs are failing (isolated, or within the grace before): a hot key stays hot. An
    /// exact decision would fail, and the layer's fallback decide on a budget of its own
    /// beside this instance's share.
    pub(crate) failing: bool,
    /// Isolated: every key is decided here, a cold one too, on this instance's share (the
    /// layer's fallback would decide it on a budget of its own).
    pub(crate) isolated: bool,
}

/// What a decision needs from the store besides the entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context {
    /// Syncs are failing: decide on this instance's share (the units still count toward the
    /// fleet, sent once Redis answers again).
    pub(crate) isolated: bool,
    /// The live instances (heartbeats), for the share.
    pub(crate) instances: u32,
    pub(crate) low: f64,
    pub(crate) high: f64,
    /// A uniform draw in `[0, 1)` for the admission.
    pub(crate) draw: f64,
}

/// What a sync sent for one key: this instance's cumulative counts, and when it went out
/// (local clock, µs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent {
    pub(crate) counted: u64,
    pub(crate) offered: u64,
    pub(crate) at: u64,
}

/// What the fleet answered for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FleetReply {
    /// Every unit the fleet ever counted for the key (while it lived in Redis).
    pub(crate) total: u64,
    /// Every unit the fleet was asked for, admitted or not.
    pub(crate) offered: u64,
    /// Each limit's fleet state.
    pub(crate) limits: SmallVec<[Fleet; 2]>,
}

pub(crate) struct Entry {
    pub(crate) limits: Arc<[Limit]>,
    /// Which entry of this instance this is (a dropped and recreated entry counts afresh).
    pub(crate) generation: u64,
    /// Units counted toward the fleet, ever; sent as is.
    pub(crate) counted: u64,
    /// Units asked for, admitted or not, ever (while syncing).
    pub(crate) offered: u64,
    /// The largest `counted` Redis acknowledged.
    pub(crate) acked: u64,
    /// Units counted while isolated, ever, and those of them Redis acknowledged.
    pub(crate) alone: u64,
    pub(crate) alone_acked: u64,
    /// `counted` when the sync in progress was built (early syncs count from it).
    pub(crate) sent: u64,
    /// Refunds given back to the views that a sync in flight may not include.
    returned: Vec<Returned>,
    views: SmallVec<[State; 2]>,
    /// This instance's share, decided alone: while isolated, or before the first sync.
    share: Option<SmallVec<[State; 2]>>,
    synced: bool,
    /// The fleet's total and Redis time at the last sync, and `counted` it included.
    fleet_offered: u64,
    /// This instance's `offered` that `fleet_offered` included.
    fleet_offered_own: u64,
    fleet_at: u64,
    /// The rest of the fleet's offered rate (units per µs), extrapolated up to
    /// `extrapolate_until`.
    rate: f64,
    fraction: f64,
    extrapolated_to: u64,
    extrapolate_until: u64,
    /// When the first unit counted since the last sync went out, and since the last
    /// acknowledgement (Redis time): GCRA units are merged from then on, not from the time
    /// they reach Redis, or the bucket's floor would forgive the units still in flight.
    pub(crate) since_sent: Option<u64>,
    pub(crate) since_unacked: Option<u64>,
    pub(crate) touched: bool,
    pub(crate) early: bool,
    pub(crate) last_used: u64,
    pub(crate) mode: Mode,
    /// The sync interval (µs): the span decisions are counted over for the rule.
    window_us: u64,
    /// When the current count of decisions began, the decisions since, and those of the span
    /// before it (0 if it was longer ago than one span).
    window_at: u64,
    window_count: u64,
    previous_count: u64,
    /// When the key last turned hot, and `offered` then: until the first measurement of the
    /// rest of the fleet, it is assumed to see what this instance saw since.
    joined_at: u64,
    joined_offered: u64,
}

/// The map's cap drops an entry only once Redis acknowledged every unit it counted: dropped
/// before, those units would never reach the fleet, which would admit them again. An entry
/// evicted so (or swept once idle) leaves nothing behind but the key's fleet state in Redis; a
/// key that comes back is a cold key again (see `LocalFirstStoreBuilder::max_keys`).
impl Reclaim for Entry {
    /// Moot once settled, out of the syncs, and idle for [`IDLE_US`]; a key decided exactly
    /// holds nothing but its count of decisions, moot once the span after it is over (the
    /// rule that turns a key hot reads the span before).
    fn expires_at(&self) -> u64 {
        if self.touched || !self.settled() {
            u64::MAX
        } else if self.mode == Mode::Exact {
            self.window_at.saturating_add(2 * self.window_us)
        } else {
            self.last_used.saturating_add(IDLE_US)
        }
    }

    fn evictable(&self) -> bool {
        self.settled()
    }
}

impl Entry {
    pub(crate) fn new(limits: Arc<[Limit]>, generation: u64, window_us: u64) -> Self {
        let views = fresh_views(&limits);
        Entry {
            limits,
            generation,
            counted: 0,
            offered: 0,
            acked: 0,
            alone: 0,
            alone_acked: 0,
            sent: 0,
            returned: Vec::new(),
            views,
            share: None,
            synced: false,
            fleet_offered: 0,
            fleet_offered_own: 0,
            fleet_at: 0,
            rate: 0.0,
            fraction: 0.0,
            extrapolated_to: 0,
            extrapolate_until: 0,
            since_sent: None,
            since_unacked: None,
            touched: false,
            early: false,
            last_used: 0,
            mode: Mode::Exact,
            window_us: window_us.max(1),
            window_at: 0,
            window_count: 0,
            previous_count: 0,
            joined_at: 0,
            joined_offered: 0,
        }
    }

    /// Takes a policy's changed limits: views of unchanged algorithms at the same position
    /// are kept (each algorithm reads state written under another `N` or period), others
    /// start fresh. The same limits in another policy (an RLS check, made per request) change
    /// nothing.
    pub(crate) fn adopt(&mut self, limits: &[Limit]) {
        if std::ptr::eq(&*self.limits, limits) || *self.limits == *limits {
            return;
        }
        self.views = State::adopt(&self.views, fresh_views(limits));
        self.share = None;
        self.limits = Arc::from(limits);
    }

    /// Counts a decision of `cost` at `now` and says where it goes, switching the key's mode
    /// by `rule`: exact to hot after `local_after` decisions within one span that follows a
    /// span of at least a quarter of that (a lone burst stays exact); local back to
    /// exact when a whole span saw fewer than a quarter of that (or the policy no longer
    /// fits), once every unit counted here was acknowledged (none is left for Redis to learn).
    pub(crate) fn route(&mut self, cost: u64, now: u64, rule: &SwitchRule) -> Route {
        self.last_used = now;
        let rolled = now >= self.window_at.saturating_add(self.window_us);
        if rolled {
            self.previous_count = if now < self.window_at.saturating_add(2 * self.window_us) {
                self.window_count
            } else {
                0
            };
            self.window_at = now;
            self.window_count = 0;
        }
        self.window_count += 1;
        if rule.isolated && self.mode != Mode::Local {
            // Alone on its share, synced (its units merged once) when Redis answers again.
            self.mode = Mode::Local;
            self.synced = false;
            self.share = None;
            return Route::Local;
        }
        match self.mode {
            // Warm in the span before too: one burst (a page load's calls, a retry storm of
            // one client) is over before local decisions could pay for the sync that joins.
            Mode::Exact
                if rule.fits
                    && self.window_count >= rule.local_after
                    && self.previous_count >= rule.local_after / 4 =>
            {
                self.mode = Mode::Joining;
                self.synced = false;
                self.joined_at = now;
                self.joined_offered = self.offered;
                self.offered += cost;
                Route::Exact { join: true }
            }
            Mode::Exact => Route::Exact { join: false },
            Mode::Joining => {
                self.offered += cost;
                Route::Exact { join: false }
            }
            Mode::Local => {
                let cooled = rolled && self.previous_count < (rule.local_after / 4).max(1);
                if (cooled || !rule.fits) && self.settled() && !rule.failing {
                    self.demote();
                    return Route::Exact { join: false };
                }
                Route::Local
            }
        }
    }

    /// Back to exact decisions: the view is dropped (a key that turns hot again takes the
    /// fleet's state afresh). Only once settled: the state in Redis then holds every unit.
    pub(crate) fn demote(&mut self) {
        self.mode = Mode::Exact;
        self.synced = false;
        self.share = None;
        self.rate = 0.0;
        self.returned = Vec::new();
    }

    /// The key's state was reset in Redis through another instance: a hot key is decided
    /// exactly again until a sync brings the fresh state (it keeps what it counted).
    pub(crate) fn rejoin(&mut self, now: u64) {
        if self.mode == Mode::Local {
            self.mode = Mode::Joining;
            self.synced = false;
            self.share = None;
            self.joined_at = now;
            self.joined_offered = self.offered;
        }
    }

    /// Takes the fleet's answer to a sync that sent `sent`,
    /// answered at Redis time `fleet_at`, received at `now` (this instance's estimate of Redis
    /// time). `lag_us` credits the rest of the fleet with the units it has not synced yet (on
    /// average half an interval's); `horizon_us` bounds the extrapolation.
    ///
    /// A refund whose call went out after the sync's is given back again to the views the
    /// reply makes: Redis read the state the reply holds before it gave the refund back (calls
    /// on one connection run in the order they are sent), and the views had it at once.
    #[allow(clippy::too_many_arguments)] // one caller, each a distinct quantity
    pub(crate) fn apply(
        &mut self,
        sent: Sent,
        reply: &FleetReply,
        fleet_at: u64,
        now: u64,
        lag_us: u64,
        horizon_us: u64,
        smoothing: f64,
        instances: u32,
    ) {
        let Sent {
            counted: sent,
            offered,
            at: sent_at,
        } = sent;
        self.acked = self.acked.max(sent);
        self.since_unacked = self.since_sent;
        let span = fleet_at.saturating_sub(self.fleet_at);
        let measured = (self.synced
            && reply.offered >= self.fleet_offered
            && span > 0
            && span <= 4 * horizon_us)
            .then(|| {
                let own = offered.saturating_sub(self.fleet_offered_own);
                let others = (reply.offered - self.fleet_offered).saturating_sub(own);
                others as f64 / span as f64
            });
        // Without a measurement (the first sync after the key turned hot, or the first after
        // Redis was away), the others are assumed to see what this instance saw since it
        // turned hot (a load balancer spreads the load): extrapolating nothing would let
        // every instance take the whole rest of the limit in the first interval.
        // Over an interval at least: a key turns hot within one, and a rate taken over the few
        // milliseconds until its first sync would be mostly noise.
        let alike = || {
            let elapsed = now.saturating_sub(self.joined_at).max(horizon_us / 2);
            let seen = offered.saturating_sub(self.joined_offered);
            (self.joined_at > 0 && elapsed > 0)
                .then(|| seen as f64 / elapsed as f64 * f64::from(instances.saturating_sub(1)))
        };
        self.rate = match measured {
            Some(rate) if self.rate > 0.0 => smoothing * rate + (1.0 - smoothing) * self.rate,
            Some(rate) => rate,
            None => alike().unwrap_or(0.0),
        };
        self.fleet_offered = reply.offered;
        self.fleet_offered_own = offered;
        self.fleet_at = fleet_at;
        let fresh = fresh_views(&self.limits);
        let mine = self.counted.saturating_sub(sent);
        for (i, (limit, view)) in self.limits.iter().zip(self.views.iter_mut()).enumerate() {
            let fleet = reply.limits.get(i).copied().unwrap_or((0, 0, 0));
            *view = fresh[i].with_fleet(limit.count(), limit.period_us(), fleet);
            view.add(limit.count(), limit.period_us(), mine, now);
        }
        self.replay_returned(sent_at, now);
        self.fraction = 0.0;
        self.extrapolated_to = now.saturating_sub(lag_us);
        self.extrapolate_until = now.saturating_add(horizon_us);
        self.synced = true;
        self.share = None;
        if self.mode == Mode::Joining {
            self.mode = Mode::Local;
        }
    }

    /// Whether every unit counted was acknowledged.
    pub(crate) fn settled(&self) -> bool {
        self.acked >= self.counted
    }

    /// The units counted since the last sync went out.
    pub(crate) fn unsent(&self) -> u64 {
        self.counted.saturating_sub(self.sent)
    }
}

fn fresh_views(limits: &[Limit]) -> SmallVec<[State; 2]> {
    limits.iter().map(view::fresh).collect()
}
