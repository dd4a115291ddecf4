//! The state every stream of one server instance shares: the streams and what each watches,
//! and per bucket the fleet's view and this instance's share of it.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, watch};
use tonic::Status;

use super::Settings;
use super::bucket_id::Bucket;
use super::fleet::{Fleet, Peer};
use super::metrics;
use super::quota::Quota;
use super::watch::Watch;
use crate::rls::config::RlsConfig;
use crate::rls::proto::envoy::service::rate_limit_quota::v3::{
    RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};

/// What a stream's responses go through.
pub(crate) type Outbox = mpsc::UnboundedSender<Result<RateLimitQuotaResponse, Status>>;

/// The buckets a report started watching.
#[derive(Debug, Default)]
pub(crate) struct Watched {
    /// Their first assignment can be made now.
    pub(crate) now: Vec<Arc<str>>,
    /// They are new to this instance: a sync with the fleet first.
    pub(crate) first_sync: Vec<Arc<str>>,
}

/// One instance's RLQS state.
#[derive(Debug)]
pub(crate) struct Hub {
    pub(crate) settings: Settings,
    pub(crate) config: ArcSwap<RlsConfig>,
    pub(crate) fleet: Fleet,
    /// This instance's name in the fleet's store.
    pub(crate) instance: String,
    pub(crate) state: Mutex<State>,
    next_stream: AtomicU64,
    ticking: AtomicBool,
    /// Set once the service is shutting down: every stream task stops reading then.
    pub(crate) closing: watch::Sender<bool>,
}

/// The streams and buckets, under one lock never held across an await.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) streams: HashMap<u64, StreamState>,
    pub(crate) buckets: HashMap<Arc<str>, HubBucket>,
    /// The most instances a sync saw live on any bucket lately: a bucket this instance has no
    /// fleet view of while Redis is down is given its limit divided by this.
    pub(crate) fleet_size: usize,
    pub(crate) closed: bool,
}

/// One stream.
#[derive(Debug)]
pub(crate) struct StreamState {
    pub(crate) outbox: Outbox,
    pub(crate) domain: Option<String>,
    pub(crate) watches: HashMap<Arc<str>, Watch>,
}

/// One bucket of this instance: who watches it here, and the fleet's view of it.
#[derive(Debug)]
pub(crate) struct HubBucket {
    pub(crate) bucket: Bucket,
    pub(crate) domain: String,
    pub(crate) quota: Quota,
    pub(crate) watchers: BTreeSet<u64>,
    /// Every live instance's demand, as the last sync that answered read it.
    pub(crate) peers: Vec<Peer>,
    /// This instance's tokens per fill, as last computed (`None` before a first).
    pub(crate) share: Option<u64>,
    /// The fleet's correction, tokens per fill: what the saturated streams are given over
    /// their shares so that what the fleet admits meets the limit ([`super::expect`]).
    pub(crate) correction: f64,
    /// Since when the fleet view has named the same instances, with a demand within
    /// [`SHIFT`](super::expect::SHIFT) of `settled_demand` (requests per second).
    pub(crate) settled: Instant,
    pub(crate) settled_demand: f64,
    /// Instances gone from the fleet view lately (their entry expired), with their last
    /// demand less what reconnected here since, until when they are counted.
    pub(crate) ghosts: Vec<(Peer, Instant)>,
    /// No stream watches it: its last sync (no demand) is due, then it is dropped.
    pub(crate) leaving: bool,
}

/// A ghost whose demand has come back here but for this fraction of the fleet's is gone.
const GHOST_REMNANT: f64 = 0.05;

impl HubBucket {
    /// A stream came here with a known demand (an Envoy reconnecting): that much of the
    /// instances gone lately has come back, and is no longer held for them.
    fn reconnected(&mut self, mut demand: f64) {
        for (ghost, _) in &mut self.ghosts {
            let back = ghost.demand.min(demand);
            ghost.demand -= back;
            demand -= back;
        }
        // What is left of one is noise (demands measured over different spans): let it go.
        let settled = self.settled_demand.max(1.0);
        self.ghosts
            .retain(|(ghost, _)| ghost.demand > GHOST_REMNANT * settled);
    }
}

impl Hub {
    pub(crate) fn new(
        settings: Settings,
        config: RlsConfig,
        fleet: Fleet,
        instance: String,
    ) -> Hub {
        Hub {
            settings,
            config: ArcSwap::from_pointee(config),
            fleet,
            instance,
            state: Mutex::new(State {
                fleet_size: 1,
                ..State::default()
            }),
            next_stream: AtomicU64::new(1),
            ticking: AtomicBool::new(false),
            closing: watch::Sender::new(false),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the rounds are to be started now (true once: at the first stream).
    pub(crate) fn start_ticking(&self) -> bool {
        !self.ticking.swap(true, Ordering::AcqRel)
    }

    /// Registers a new stream; `None` once the service is shutting down.
    pub(crate) fn join(&self, outbox: Outbox) -> Option<u64> {
        let id = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        state.streams.insert(
            id,
            StreamState {
                outbox,
                domain: None,
                watches: HashMap::new(),
            },
        );
        metrics::streams(state.streams.len());
        Some(id)
    }

    /// Forgets a stream that ended (its buckets' shares go to the others at the next sync).
    pub(crate) fn leave(&self, id: u64) {
        let mut state = self.lock();
        if let Some(stream) = state.streams.remove(&id) {
            for key in stream.watches.keys() {
                if let Some(bucket) = state.buckets.get_mut(key) {
                    bucket.watchers.remove(&id);
                }
            }
        }
        metrics::streams(state.streams.len());
    }

    /// One report of stream `id`: its domain (from the first), a watch for each bucket new to
    /// it, usage for the others. Answers the buckets newly watched: those whose first
    /// assignment can be made at once, and those that need a first sync. An error ends the
    /// stream.
    pub(crate) fn report(
        &self,
        id: u64,
        report: RateLimitQuotaUsageReports,
        now: Instant,
    ) -> Result<Watched, Status> {
        let config = self.config.load();
        let mut state = self.lock();
        let state = &mut *state;
        let Some(stream) = state.streams.get_mut(&id) else {
            return Ok(Watched::default());
        };
        let domain = match &stream.domain {
            Some(domain) => domain.clone(),
            None if report.domain.is_empty() => {
                return Err(Status::invalid_argument(
                    "the first RateLimitQuotaUsageReports of a stream names no domain",
                ));
            }
            None => {
                stream.domain = Some(report.domain.clone());
                report.domain
            }
        };
        let mut new = Vec::new();
        for usage in report.bucket_quota_usages {
            let bucket = Bucket::new(&domain, usage.bucket_id, self.settings.max_bucket_id_bytes)?;
            let (allowed, denied) = (usage.num_requests_allowed, usage.num_requests_denied);
            metrics::report(allowed, denied);
            let key = Arc::clone(&bucket.digest);
            let mut reconnected = None;
            match stream.watches.get_mut(&key) {
                Some(watch) => watch.report(allowed, denied, now),
                None => {
                    if stream.watches.len() >= self.settings.max_buckets_per_stream {
                        return Err(Status::resource_exhausted(format!(
                            "more than {} buckets on one stream (this server's limit)",
                            self.settings.max_buckets_per_stream
                        )));
                    }
                    // Whole seconds (Envoy's): a negative or absent one is a first report's 0.
                    let elapsed = usage
                        .time_elapsed
                        .map_or(0, |d| u64::try_from(d.seconds).unwrap_or(0));
                    let watch = Watch::new(allowed, denied, Duration::from_secs(elapsed), now);
                    reconnected = watch.demand;
                    stream.watches.insert(Arc::clone(&key), watch);
                    new.push(Arc::clone(&key));
                }
            }
            let hub_bucket = state
                .buckets
                .entry(Arc::clone(&key))
                .or_insert_with(|| HubBucket {
                    quota: Quota::of(&config, &domain, &bucket.pairs()),
                    bucket,
                    domain: domain.clone(),
                    watchers: BTreeSet::new(),
                    peers: Vec::new(),
                    share: None,
                    correction: 0.0,
                    settled: now,
                    settled_demand: 0.0,
                    ghosts: Vec::new(),
                    leaving: false,
                });
            hub_bucket.watchers.insert(id);
            if let Some(demand) = reconnected {
                hub_bucket.reconnected(demand);
            }
        }
        metrics::buckets(state.buckets.len());
        // First assignments: at once where the share is known (or needs no fleet).
        let mut watched = Watched::default();
        for key in new {
            let Some(bucket) = state.buckets.get(&key) else {
                continue;
            };
            if matches!(bucket.quota, Quota::Rate { .. }) && bucket.share.is_none() {
                watched.first_sync.push(key);
            } else {
                watched.now.push(key);
            }
        }
        Ok(watched)
    }

    /// The TTL of every assignment, in whole seconds (Envoy reads `.seconds` alone), at least 1.
    pub(crate) fn ttl_seconds(&self) -> i64 {
        i64::try_from(self.settings.assignment_ttl.as_secs().max(1)).unwrap_or(i64::MAX)
    }

    /// How long an instance's entry for a bucket lives in the fleet's store: two sync
    /// intervals, so one late sync does not drop it, and an instance gone leaves the split
    /// within about two.
    pub(crate) fn entry_ttl(&self) -> Duration {
        self.settings.sync_interval * 2
    }
}
