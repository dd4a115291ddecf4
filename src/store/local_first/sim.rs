//! The local-first store without I/O, for the simulation (`benches/local_first_sim.rs`,
//! through `redlimit::__private::local_first`) and the unit tests: an instance is the store's
//! own decision and sync code on a manual clock, and the fleet's Redis is the sync script's
//! Rust twin. Compiled for those only (`__test-hooks`, `cfg(test)`), never into the library.

use std::time::Duration;

use super::core::{Core, SyncItem};
use super::entry::FleetReply;
use super::merge::Keyspace;
use super::settings::Settings;
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::ManualClock;

/// One instance of a local-first store, driven by hand.
#[derive(Debug)]
pub struct Instance {
    core: Core,
}

/// The keys one sync of an instance sends.
#[derive(Debug)]
pub struct Batch(Vec<SyncItem>);

/// The fleet's answer to a [`Batch`].
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    now: u64,
    replies: Vec<FleetReply>,
}

impl Instance {
    /// An instance syncing every `interval`, with admission marks `marks`, assuming
    /// `instances` instances, on `clock`; `seed` drives its admission draws.
    pub fn new(
        interval: Duration,
        marks: (f64, f64),
        instances: u32,
        clock: ManualClock,
        id: &str,
        seed: u64,
    ) -> Result<Self, ConfigError> {
        Instance::tuned(interval, marks, instances, clock, id, seed, &[])
    }

    /// [`Instance::new`] with settings changed by name (`smoothing`, `lag`, `local_after`),
    /// for tuning.
    pub fn tuned(
        interval: Duration,
        marks: (f64, f64),
        instances: u32,
        clock: ManualClock,
        id: &str,
        seed: u64,
        tuning: &[(&str, f64)],
    ) -> Result<Self, ConfigError> {
        let mut settings = Settings {
            interval,
            low: marks.0,
            high: marks.1,
            instances,
            ..Settings::default()
        };
        for (name, value) in tuning {
            match *name {
                "smoothing" => settings.smoothing = *value,
                "lag" => settings.lag = *value,
                "local_after" => settings.local_after = *value as u32,
                _ => {
                    return Err(ConfigError::InvalidLocalFirst(format!(
                        "no setting `{name}`"
                    )));
                }
            }
        }
        let settings = settings.validate()?;
        Ok(Instance {
            core: Core::new(settings, Box::new(clock), id.to_owned(), seed),
        })
    }

    /// Decides as the store does: in memory if the key is hot here, else exactly, by
    /// `fleet` (the shared Redis) at this instance's time.
    pub fn check(&self, fleet: &mut Fleet, policy: &Policy, key: &Key, cost: u64) -> Decision {
        self.local_check(policy, key, cost).unwrap_or_else(|| {
            fleet
                .keyspace
                .check("sim", policy, key, cost, self.core.local_now())
        })
    }

    /// Decides in memory if the key is hot here; `None`: the store would ask Redis (the
    /// caller decides it exactly, as [`Instance::check`] does).
    pub fn local_check(&self, policy: &Policy, key: &Key, cost: u64) -> Option<Decision> {
        self.core.check(policy, key, cost)
    }

    /// What the next sync sends.
    pub fn begin_sync(&self) -> Batch {
        Batch(self.core.begin_sync())
    }

    /// Takes the fleet's answer (`None`: the sync failed), sent and received at these times
    /// of the instance's clock.
    pub fn finish_sync(&self, batch: Batch, reply: Option<Reply>, sent_at: u64, received_at: u64) {
        let outcome = reply.map(|r| (r.now, r.replies)).ok_or(());
        self.core
            .finish_sync(batch.0, outcome, sent_at, received_at);
    }

    /// Whether a key's unsent units asked for an early sync since the last call.
    pub fn wants_early_sync(&self) -> bool {
        use std::future::Future;
        let waker = std::task::Waker::noop();
        let notified = self.core.wake.notified();
        let mut notified = std::pin::pin!(notified);
        notified
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker))
            .is_ready()
    }

    /// Sets the number of live instances (what the heartbeat would say).
    pub fn set_instances(&self, instances: u32) {
        self.core.set_instances(instances);
    }
}

impl Batch {
    /// The `EVAL` of the real sync script (`lua/local_first_sync.lua`) for this batch, keys
    /// under `prefix` (`redlimit::__private` wraps it as a `ScriptCall`).
    #[cfg(feature = "__test-hooks")]
    pub(crate) fn sync_command(&self, prefix: &str) -> redis::Cmd {
        super::task::sync_command("EVAL", super::task::sync_source(), prefix, &self.0, 2_000)
    }

    /// The script's reply to [`Batch::command`], decoded as the store decodes it.
    pub fn decode(&self, flat: &[i64]) -> Option<Reply> {
        super::task::decode(&self.0, flat).map(|(now, replies)| Reply { now, replies })
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The fleet's Redis: the sync script's twin over an in-process keyspace.
#[derive(Debug, Default)]
pub struct Fleet {
    keyspace: Keyspace,
}

impl Reply {
    /// Redis time (Unix µs) when the fleet answered.
    pub fn now(&self) -> u64 {
        self.now
    }
}

impl Fleet {
    /// One exact check at Redis time `now` (Unix µs), as the exact script decides it, on the
    /// state the syncs count into.
    pub fn check(&mut self, policy: &Policy, key: &Key, cost: u64, now: u64) -> Decision {
        self.keyspace.check("sim", policy, key, cost, now)
    }

    /// Runs one sync call at Redis time `now` (Unix µs).
    pub fn sync(&mut self, batch: &Batch, now: u64) -> Reply {
        let replies = batch
            .0
            .iter()
            .map(|item| self.keyspace.sync("sim", item, now, 2_000))
            .collect();
        Reply { now, replies }
    }
}
