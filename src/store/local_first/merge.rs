//! The fleet's side of a sync in Rust: twin of `lua/local_first_sync.lua`, the same merge on
//! the same integers. The simulation runs it as its Redis, and the tests hold the counting to
//! idempotency with it (and `tests/it/store/local_first.rs` holds the Lua to the same answers).

use std::collections::HashMap;

use smallvec::SmallVec;

use super::core::SyncItem;
use super::entry::FleetReply;
use super::view::{self, Fleet};
use crate::algorithm::{emission_interval, window_end, State};

/// One key's state hash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Record {
    fields: HashMap<String, u64>,
    total: u64,
    offered: u64,
    limits: SmallVec<[Fleet; 2]>,
    /// Unix µs; the record is gone from then on.
    expires_at: u64,
}

/// A keyspace of state hashes, as Redis holds them.
#[derive(Debug, Default)]
pub(crate) struct Keyspace {
    records: HashMap<String, Record>,
}

impl Keyspace {
    /// Merges `item` at `now` (Redis time, µs), as one key of the script does.
    pub(crate) fn merge(
        &mut self,
        name: &str,
        item: &SyncItem,
        now: u64,
        min_ttl_ms: u64,
    ) -> FleetReply {
        let live = self.records.get(name).filter(|r| r.expires_at > now);
        let (reply, write) = merge(live, item, now, min_ttl_ms);
        if let Some(record) = write {
            self.records.insert(name.to_owned(), record);
        }
        reply
    }
}

/// The reply for `item` given the hash `record`, and the hash to write if anything was added.
pub(crate) fn merge(
    record: Option<&Record>,
    item: &SyncItem,
    now: u64,
    min_ttl_ms: u64,
) -> (FleetReply, Option<Record>) {
    let last = record
        .and_then(|r| r.fields.get(&item.field).copied())
        .unwrap_or(item.acked);
    let delta = item.counted.saturating_sub(last);
    let total = record.map_or(0, |r| r.total) + delta;
    let offered_field = format!("{}:o", item.field);
    let offered_last = record.and_then(|r| r.fields.get(&offered_field).copied());
    let offered_delta = item
        .offered
        .saturating_sub(offered_last.unwrap_or(item.offered));
    let offered = record.map_or(0, |r| r.offered) + offered_delta;
    let mut life = 0;
    let mut limits = SmallVec::new();
    for (i, limit) in item.limits.iter().enumerate() {
        let (n, p) = (limit.count(), limit.period_us());
        let (mut x, mut y, mut z) = record
            .and_then(|r| r.limits.get(i).copied())
            .unwrap_or((0, 0, 0));
        match view::fresh(limit) {
            State::Gcra(_) => {
                let t = emission_interval(n, p);
                if delta > 0 {
                    x = (x.max(item.since.min(now)) + delta * t).min(now + view::max_backlog(n, t));
                }
                (y, z) = (0, 0);
                life = life.max(x.saturating_sub(now));
            }
            window => {
                let end = window_end(now, p);
                if let State::FixedWindow(_) = window {
                    if x != end {
                        y = 0;
                    }
                    z = 0;
                    life = life.max(end - now);
                } else {
                    if x + p == end {
                        (z, y) = (y, 0);
                    } else if x != end {
                        (y, z) = (0, 0);
                    }
                    life = life.max(end + p - now);
                }
                (x, y) = (end, y + delta);
            }
        }
        limits.push((x, y, z));
    }
    let reply = FleetReply {
        total,
        offered,
        limits,
    };
    if delta == 0 && offered_delta == 0 && offered_last.is_some() {
        return (reply, None);
    }
    if record.is_none() && delta == 0 {
        return (reply, None);
    }
    let mut fields = record.map(|r| r.fields.clone()).unwrap_or_default();
    fields.insert(item.field.clone(), item.counted);
    fields.insert(offered_field, item.offered);
    let ttl_ms = life.div_ceil(1000).max(min_ttl_ms);
    let record = Record {
        fields,
        total,
        offered,
        limits: reply.limits.clone(),
        expires_at: now + ttl_ms * 1000,
    };
    (reply, Some(record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Key;
    use crate::limit::Limit;
    use std::sync::Arc;
    use std::time::Duration;

    fn item(field: &str, counted: u64, acked: u64, limit: Limit) -> SyncItem {
        SyncItem {
            policy: Arc::from("p"),
            key: Key::new("k"),
            field: field.to_owned(),
            generation: 0,
            since: u64::MAX,
            counted,
            acked,
            offered: counted,
            limits: Arc::from([limit]),
        }
    }

    #[test]
    fn a_repeated_or_lost_sync_never_counts_twice() {
        let l = Limit::fixed_window(100, Duration::from_secs(1)).unwrap();
        let mut redis = Keyspace::default();
        let now = 10_000_000;
        assert_eq!(
            redis.merge("k", &item("a.0", 5, 0, l), now, 1000).limits[0],
            (11_000_000, 5, 0)
        );
        // The same sync again (its reply was lost): nothing added.
        assert_eq!(
            redis.merge("k", &item("a.0", 5, 0, l), now, 1000).limits[0].1,
            5
        );
        // A lost sync of 8, then one of 12: 12 in all.
        let r = redis.merge("k", &item("a.0", 12, 5, l), now + 1, 1000);
        assert_eq!((r.total, r.limits[0].1), (12, 12));
        // Another instance adds its own.
        let r = redis.merge("k", &item("b.0", 3, 0, l), now + 2, 1000);
        assert_eq!((r.total, r.limits[0].1), (15, 15));
    }

    #[test]
    fn an_expired_hash_takes_only_the_unacknowledged_units() {
        let l = Limit::gcra(10, Duration::from_secs(1)).unwrap();
        let mut redis = Keyspace::default();
        redis.merge("k", &item("a.0", 4, 0, l), 0, 1000);
        // Long after: the hash expired; 4 were acknowledged, 6 counted since.
        let r = redis.merge("k", &item("a.0", 10, 4, l), 60_000_000, 1000);
        assert_eq!(r.total, 6);
        assert_eq!(r.limits[0], (60_000_000 + 600_000, 0, 0));
    }

    #[test]
    fn windows_roll_and_gcra_backlogs_drain() {
        let sw = Limit::sliding_window(10, Duration::from_secs(1)).unwrap();
        let mut redis = Keyspace::default();
        redis.merge("s", &item("a.0", 7, 0, sw), 1_500_000, 5000);
        let r = redis.merge("s", &item("a.0", 9, 7, sw), 2_100_000, 5000);
        assert_eq!(r.limits[0], (3_000_000, 2, 7));
        let r = redis.merge("s", &item("a.0", 9, 9, sw), 4_000_001, 5000);
        assert_eq!(r.limits[0], (5_000_000, 0, 0));
        let g = Limit::gcra(10, Duration::from_secs(1)).unwrap();
        let r = redis.merge("g", &item("a.0", 3, 0, g), 1_000_000, 1000);
        assert_eq!(r.limits[0].0, 1_300_000);
        let r = redis.merge("g", &item("a.0", 4, 3, g), 2_000_000, 1000);
        assert_eq!(r.limits[0].0, 2_100_000, "drained, then one unit");
    }
}
