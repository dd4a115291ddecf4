//! What other replicas changed, polled: the overrides (`overrides.rs`) and the resets
//! (`resets.rs`), both read by one script call per poll (`lua/overrides_poll.lua`, by hash:
//! `script/poll.rs`). The poller reads at once, then every [`override_poll`](super::RedisStoreBuilder::override_poll).
//!
//! Until one read has succeeded, a check (or an inspection) waits for it, one read at a time
//! for the whole store, so a store made with `connect_lazy` decides its first request under
//! the overrides in Redis, as one made with `connect` does. While Redis cannot be read, those
//! checks fail as any check would, and the layer's failure mode applies: never a decision
//! under the policy's own limits when an override may stand.

use std::collections::HashMap;
use std::sync::Weak;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::RedisStore;
use super::builder::Deployment;
use super::error::store_error;
use super::overrides::{hash_key, version_key};
use super::resets::{counter_key, log_key, parse_entry};
use super::script::{poll_command, poll_script, unknown_command};
use crate::error::StoreError;
use crate::store::Override;
use crate::store::override_table::Overrides;

/// The poll's state, shared by the poller and the checks waiting for the first read.
#[derive(Debug, Default)]
pub(super) struct PollState {
    seen: tokio::sync::Mutex<Seen>,
    /// A read succeeded: checks no longer wait.
    loaded: AtomicBool,
    /// Reads done, whatever their outcome: checks that waited while one failed fail with it
    /// rather than each trying again.
    reads: AtomicU64,
    /// Redis knows no `EVALSHA_RO` (before Redis 7): polls by `EVALSHA`.
    plain: AtomicBool,
    /// The poll's script was loaded: loaded before the first poll, so that no call finds it
    /// missing (later, after a restart of Redis, `EVALSHA` reloads it on `NOSCRIPT`).
    script_loaded: AtomicBool,
}

/// What the last read found, and how the reads went.
#[derive(Debug, Default)]
struct Seen {
    /// The overrides version and the resets counter (`None`: never read).
    version: Option<i64>,
    counter: Option<i64>,
    /// Why the last read failed.
    failure: Option<String>,
}

impl PollState {
    pub(super) fn loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }
}

impl RedisStore {
    /// Reads now, then keeps polling from a task of the current runtime (if there is one) for
    /// as long as the store lives.
    pub(super) async fn load_overrides(&self) -> Result<(), StoreError> {
        let read = first_read(&self.inner).await;
        self.spawn_poller(read.is_err());
        read
    }

    /// Polls from a task of the current runtime, if any, reading first if `now`. A store
    /// made outside one reads once, before its first check, and then applies only the
    /// overrides set and the resets made through it.
    pub(super) fn spawn_poller(&self, now: bool) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                "RedisStore made outside a Tokio runtime: overrides set and resets made through other replicas are not seen"
            );
            return;
        };
        let weak = std::sync::Arc::downgrade(&self.inner);
        runtime.spawn(poller(weak, now));
    }

    /// Whether the overrides were read once: until then, checks wait for a read.
    pub(crate) fn overrides_loaded(&self) -> bool {
        self.inner.poll.loaded()
    }
}

/// Waits until one read has succeeded, reading if no read is under way. A read that fails
/// while this waits fails this too.
pub(super) async fn first_read(inner: &Deployment) -> Result<(), StoreError> {
    if inner.poll.loaded() {
        return Ok(());
    }
    let reads = inner.poll.reads.load(Ordering::Acquire);
    let mut seen = inner.poll.seen.lock().await;
    if inner.poll.loaded() {
        return Ok(());
    }
    if inner.poll.reads.load(Ordering::Acquire) != reads {
        let why = seen.failure.clone().unwrap_or_default();
        return Err(StoreError::connection(std::io::Error::other(format!(
            "the overrides could not be read: {why}"
        ))));
    }
    poll(inner, &mut seen).await
}

async fn poller(deployment: Weak<Deployment>, mut now: bool) {
    loop {
        if !now {
            let Some(every) = deployment.upgrade().map(|d| d.override_poll) else {
                return;
            };
            tokio::time::sleep(every).await;
        }
        now = false;
        let Some(inner) = deployment.upgrade() else {
            return;
        };
        let mut seen = inner.poll.seen.lock().await;
        if let Err(err) = poll(&inner, &mut seen).await {
            tracing::debug!(error = %err, "reading the overrides and resets failed; retrying");
        }
    }
}

/// One read: the overrides version and resets counter; every override if the version moved;
/// the resets made since the counter last read, recorded in the store's log.
async fn poll(inner: &Deployment, seen: &mut Seen) -> Result<(), StoreError> {
    let read = read(inner, seen).await;
    seen.failure = read.as_ref().err().map(ToString::to_string);
    inner.poll.reads.fetch_add(1, Ordering::AcqRel);
    let (version, counter, log, overrides) = read?;
    if let Some(all) = overrides {
        inner.overrides.replace(all);
    }
    if let Some(before) = seen.counter {
        let told = log
            .iter()
            .filter_map(|member| parse_entry(member))
            .collect::<Vec<_>>();
        // A counter that went back (Redis lost it) or entries gone (trimmed, expired): resets
        // were missed.
        if counter < before || told.len() as i64 != counter - before {
            inner.resets.record_any();
        }
        for (origin, policy, key) in told {
            if origin != inner.origin {
                inner.resets.record(policy, &key);
            }
        }
    }
    seen.version = Some(version);
    seen.counter = Some(counter);
    inner.poll.loaded.store(true, Ordering::Release);
    Ok(())
}

type Read = (i64, i64, Vec<String>, Option<Overrides>);

async fn read(inner: &Deployment, seen: &Seen) -> Result<Read, StoreError> {
    let prefix = &inner.prefix;
    // By hash, loaded on `NOSCRIPT` (`script::evalsha`): the script's text is not sent every
    // poll. `EVALSHA_RO` until Redis says it knows no such command (before Redis 7).
    let command = |plain| {
        let mut command = poll_command(plain, 4);
        command
            .arg(version_key(prefix))
            .arg(hash_key(prefix))
            .arg(counter_key(prefix))
            .arg(log_key(prefix))
            .arg(seen.version.unwrap_or(-1))
            .arg(seen.counter.unwrap_or(-1));
        command
    };
    if !inner.poll.script_loaded.load(Ordering::Relaxed) {
        inner
            .backend
            .load(&[poll_script()])
            .await
            .map_err(store_error)?;
        inner.poll.script_loaded.store(true, Ordering::Relaxed);
    }
    let plain = inner.poll.plain.load(Ordering::Relaxed);
    let reply: Vec<redis::Value> = match inner.backend.run(&command(plain)).await {
        Err(err) if !plain && unknown_command(&err) => {
            inner.poll.plain.store(true, Ordering::Relaxed);
            inner.backend.run(&command(true)).await
        }
        reply => reply,
    }
    .map_err(store_error)?;
    let unexpected = |e: &dyn std::fmt::Display| StoreError::UnexpectedReply(e.to_string());
    let mut parts = reply.into_iter();
    let mut next = || {
        parts
            .next()
            .ok_or_else(|| StoreError::UnexpectedReply("a short poll reply".to_owned()))
    };
    let version: i64 = redis::from_redis_value(next()?).map_err(|e| unexpected(&e))?;
    let counter: i64 = redis::from_redis_value(next()?).map_err(|e| unexpected(&e))?;
    let log: Vec<String> = redis::from_redis_value(next()?).map_err(|e| unexpected(&e))?;
    let overrides = match next() {
        Ok(value) => {
            let fields: HashMap<String, String> =
                redis::from_redis_value(value).map_err(|e| unexpected(&e))?;
            Some(table(fields))
        }
        Err(_) => None,
    };
    Ok((version, counter, log, overrides))
}

/// The overrides table of the hash's fields.
fn table(fields: HashMap<String, String>) -> Overrides {
    let mut table = Overrides::new();
    for (field, text) in fields {
        let (Some((policy, key)), Some(value)) = (field.split_once('\n'), Override::decode(&text))
        else {
            tracing::warn!(field, "an override in Redis that is not one: ignored");
            continue;
        };
        table
            .entry(policy.to_owned())
            .or_default()
            .insert(key.to_owned(), value);
    }
    table
}
