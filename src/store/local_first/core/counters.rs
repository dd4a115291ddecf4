//! Local-first decisions of a check whose limit keys name their states (the RLS's counters:
//! [`Key::with_named_limit_keys`]). Each counter is an entry of its own, under its own key
//! (the check's hash tag and that one limit key), hot or cold on this instance by its own
//! traffic as a plain key is, and synced into the very state the exact script keeps for it,
//! whatever check it comes in.
//!
//! A check is decided in memory only when every one of its counters is local here: under the
//! locks of all their shards, each counter's view is evaluated, one draw is held to the
//! highest deny probability of them all, and the cost is committed to every counter or to
//! none. One counter cold (or joining, or evicted meanwhile) sends the whole check to Redis,
//! as one atomic script call: all-or-none either way, and a refused request charges nothing.
//! Under [`Commit::Always`] each counter is decided on its own (the one draw held to its own
//! deny probability) and charged its cost whatever it decides: a refused counter's views take
//! the units past the limit, and they are counted toward the fleet as admitted ones are.

use std::sync::Arc;

use smallvec::SmallVec;

use super::Core;
use crate::decision::{Decision, DecisionSource, LimitStates};
use crate::key::Key;
use crate::policy::{MAX_LIMITS, Policy};
use crate::store::local_first::admission::admits;
use crate::store::local_first::entry::Route;
use crate::store::shard::Lookup;
use crate::store::{Commit, cost_at};

/// The keys `key`'s entries are filed under: one per limit key for a key whose limit keys
/// name their states (each counter on its own), else `key` itself.
pub(crate) fn counter_keys(key: &Key) -> SmallVec<[Key; 4]> {
    if !key.names_limit_states() || key.limit_keys().count() == 1 {
        return SmallVec::from_elem(key.clone(), 1);
    }
    let tag = key.primary();
    key.limit_keys()
        .map(|(_, own)| tag.clone().with_named_limit_keys([own.clone()]))
        .collect()
}

/// The key of the counter `own` of a check tagged `tag` (see [`counter_keys`]).
fn counter_key(tag: &Key, own: &Key) -> Key {
    tag.primary().with_named_limit_keys([own.clone()])
}

impl Core {
    /// [`Core::check`] of a key whose limit keys name their states, one per limit of
    /// `policy`, each charged its cost among `costs` (one per limit, or one for all:
    /// `store::cost_at`): decided in memory if every counter is local here, all charged or
    /// none (or each on its own, every cost landing, under [`Commit::Always`]); `None`:
    /// decide the whole check exactly.
    pub(crate) fn check_counters(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        commit: Commit,
    ) -> Option<Decision> {
        let limits = policy.limits();
        let owns: SmallVec<[&Key; 4]> = key.limit_keys().map(|(_, own)| own).collect();
        // The RLS gives one distinct key per limit; anything else is Redis's to decide.
        let distinct = (1..owns.len()).all(|i| owns[..i].iter().all(|o| o != &owns[i]));
        if owns.len() != limits.len() || owns.len() > MAX_LIMITS || !distinct {
            return None;
        }
        let now = self.now();
        let isolated = self.is_isolated();
        let name = policy.name();
        let places: SmallVec<[Lookup<'_>; 4]> = owns
            .iter()
            .map(|own| self.entries.lookup_text(name, own.as_str(), true))
            .collect();
        let mut shards = self.entries.lock(places.iter().map(|p| p.hash));
        let mut local = true;
        let mut wake = false;
        // Each counter counts the decision and says where it goes. A counter local here
        // stays in the syncs even when a cold one sends the check to Redis: its view stays
        // fresh for the check that is decided here.
        for (i, place) in places.iter().enumerate() {
            let one = std::slice::from_ref(&limits[i]);
            let rule = self.rule(one, isolated);
            let shard = shards.shard(place.hash)?;
            let ((here, touched, join), _) = shard.with_entry(
                *place,
                now,
                || self.entry(Arc::from(one)),
                || (policy.name_arc(), counter_key(key, owns[i])),
                |entry| {
                    entry.adopt(one);
                    let (here, join) = match entry.route(cost_at(costs, i), now, &rule) {
                        Route::Local => (true, false),
                        Route::Exact { join } => (false, join),
                    };
                    let touch = (here || join) && !std::mem::replace(&mut entry.touched, true);
                    (here, touch.then_some(entry.generation), join)
                },
            );
            if let Some(generation) = touched {
                let counter = counter_key(key, owns[i]);
                shard
                    .side
                    .touched
                    .push((policy.name_arc(), counter, generation));
            }
            local &= here;
            wake |= join;
        }
        let decided = if local {
            self.decide_counters(policy, &places, &mut shards, (costs, commit), now, isolated)
        } else {
            None
        };
        drop(shards);
        if wake || decided.as_ref().is_some_and(|d| d.1) {
            self.wake.notify_one();
        }
        let (states, _) = decided?;
        Some(
            Decision::from_states(policy.name_arc(), now, states)
                .with_source(DecisionSource::LocalFirst),
        )
    }

    /// Decides `costs` at `now` on every counter's entry (each local here, each its own cost),
    /// all committed or none: each limit's state, and whether an early sync is due. `None` if
    /// an entry went (evicted by a sibling's insert): decide exactly.
    fn decide_counters(
        &self,
        policy: &Policy,
        places: &[Lookup<'_>],
        shards: &mut crate::store::shard::Locked<'_, super::Entry, super::Side>,
        (costs, commit): (&[u64], Commit),
        now: u64,
        isolated: bool,
    ) -> Option<(LimitStates, bool)> {
        let first = shards.shard(places.first()?.hash)?;
        let ctx = self.context(&mut first.side.rng, isolated);
        for place in places {
            shards.shard(place.hash)?.get_mut(*place)?;
        }
        let mut evaluations = SmallVec::<[_; 4]>::with_capacity(places.len());
        for (i, place) in places.iter().enumerate() {
            let entry = shards.shard(place.hash)?.get_mut(*place)?;
            evaluations.push(entry.evaluate(cost_at(costs, i), now, &ctx));
        }
        let worst = evaluations.iter().map(|e| e.worst).fold(0.0, f64::max);
        let admitted = admits(worst, ctx.draw);
        let mut states = LimitStates::new();
        let mut early = false;
        for (i, ((place, evaluation), limit)) in places
            .iter()
            .zip(evaluations)
            .zip(policy.limits())
            .enumerate()
        {
            let entry = shards.shard(place.hash)?.get_mut(*place)?;
            let cost = cost_at(costs, i);
            match commit {
                Commit::Always if !admits(evaluation.worst, ctx.draw) => {
                    states.extend(entry.charge_refused(evaluation, cost, now, &ctx));
                }
                Commit::Always => {
                    let own = evaluation.worst;
                    states.extend(entry.settle(evaluation, true, own, cost, now, &ctx));
                }
                _ => states.extend(entry.settle(evaluation, admitted, worst, cost, now, &ctx)),
            }
            let due = self.early(std::slice::from_ref(limit));
            if !entry.early && entry.unsent() >= due {
                entry.early = true;
                early = true;
            }
        }
        Some((states, early))
    }
}
