//! Overrides in Redis: one hash of every override (`PREFIX:{overrides}`, field
//! `POLICY\nKEY`, value the override's stored form) and a version (`PREFIX:{overrides}:version`)
//! bumped by every change in the same script call. Both share a hash tag, so one slot in a
//! Cluster. Each store polls the version and, when it moved, reads the hash into its local
//! table: a decision looks its override up in memory and sends Redis nothing more.
//!
//! Why a poll and not a lookup inside the check script: measured (`benches/README.md`), an
//! `HGET` of a missing field in every check costs Redis more per decision than the poll costs
//! per second, and the override changes the check's arguments (its `N` and period), which the
//! script would otherwise have to read from Redis before it could evaluate.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::builder::Deployment;
use super::error::store_error;
use super::RedisStore;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::override_table::Overrides;
use crate::store::{Override, StoreFuture};

/// How often a store reads the overrides' version by default.
pub(super) const DEFAULT_OVERRIDE_POLL: Duration = Duration::from_millis(250);

const SET: &str = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) \
                   return redis.call('INCR', KEYS[2])";
const REMOVE: &str = "local n = redis.call('HDEL', KEYS[1], ARGV[1]) \
                      if n > 0 then redis.call('INCR', KEYS[2]) end return n";

fn hash_key(prefix: &str) -> String {
    format!("{prefix}:{{overrides}}")
}

fn version_key(prefix: &str) -> String {
    format!("{prefix}:{{overrides}}:version")
}

/// The hash field of `key` under `policy` (policy names never hold a newline).
fn field(policy: &str, key: &Key) -> String {
    format!("{policy}\n{}", key.as_str())
}

impl RedisStore {
    pub(super) fn write_override(
        &self,
        policy: &Policy,
        key: &Key,
        value: Override,
    ) -> StoreFuture<()> {
        let inner = Arc::clone(&self.inner);
        let (name, key) = (policy.name().to_owned(), key.clone());
        let fits = value.limits_for(policy).map_err(StoreError::from);
        Box::pin(async move {
            fits?;
            let mut command = redis::cmd("EVAL");
            command
                .arg(SET)
                .arg(2)
                .arg(hash_key(&inner.prefix))
                .arg(version_key(&inner.prefix))
                .arg(field(&name, &key))
                .arg(value.encode());
            let _version: i64 = inner.backend.run(&command).await.map_err(store_error)?;
            // This replica applies it at once; the others at their next poll.
            inner.overrides.set(&name, &key, value);
            Ok(())
        })
    }

    pub(super) fn read_override(
        &self,
        policy: &Policy,
        key: &Key,
    ) -> StoreFuture<Option<Override>> {
        let inner = Arc::clone(&self.inner);
        let field = field(policy.name(), key);
        Box::pin(async move {
            let mut command = redis::cmd("HGET");
            command.arg(hash_key(&inner.prefix)).arg(field);
            let stored: Option<String> = inner.backend.run(&command).await.map_err(store_error)?;
            stored
                .map(|text| {
                    Override::decode(&text).ok_or_else(|| {
                        StoreError::UnexpectedReply(format!("an override stored as `{text}`"))
                    })
                })
                .transpose()
        })
    }

    pub(super) fn delete_override(&self, policy: &Policy, key: &Key) -> StoreFuture<bool> {
        let inner = Arc::clone(&self.inner);
        let (name, key) = (policy.name().to_owned(), key.clone());
        Box::pin(async move {
            let mut command = redis::cmd("EVAL");
            command
                .arg(REMOVE)
                .arg(2)
                .arg(hash_key(&inner.prefix))
                .arg(version_key(&inner.prefix))
                .arg(field(&name, &key));
            let removed: i64 = inner.backend.run(&command).await.map_err(store_error)?;
            inner.overrides.remove(&name, &key);
            Ok(removed > 0)
        })
    }

    /// Reads the overrides now, then keeps polling them from a task of the current runtime
    /// (if there is one) for as long as the store lives.
    pub(super) async fn load_overrides(&self) -> Result<(), StoreError> {
        let version = poll(&self.inner, None).await?;
        self.spawn_poller(version);
        Ok(())
    }

    /// Polls from a task of the current runtime, if any (a store made outside one applies
    /// only the overrides set through it).
    pub(super) fn spawn_poller(&self, seen: Option<i64>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("RedisStore made outside a Tokio runtime: overrides set through other replicas are not seen");
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        runtime.spawn(poller(weak, seen));
    }
}

async fn poller(deployment: Weak<Deployment>, mut seen: Option<i64>) {
    loop {
        let Some(every) = deployment.upgrade().map(|d| d.override_poll) else {
            return;
        };
        tokio::time::sleep(every).await;
        let Some(inner) = deployment.upgrade() else {
            return;
        };
        match poll(&inner, seen).await {
            Ok(version) => seen = version,
            Err(err) => tracing::debug!(error = %err, "reading the overrides failed; retrying"),
        }
    }
}

/// Reads the version (0 before any override was set) and, if it is not `seen` (`None`: never
/// read), every override into the store's table; returns the version read.
async fn poll(inner: &Deployment, seen: Option<i64>) -> Result<Option<i64>, StoreError> {
    let mut get = redis::cmd("GET");
    get.arg(version_key(&inner.prefix));
    let version: Option<i64> = inner.backend.run(&get).await.map_err(store_error)?;
    let version = Some(version.unwrap_or(0));
    if version == seen {
        return Ok(version);
    }
    let mut all = redis::cmd("HGETALL");
    all.arg(hash_key(&inner.prefix));
    let fields: HashMap<String, String> = inner.backend.run(&all).await.map_err(store_error)?;
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
    inner.overrides.replace(table);
    Ok(version)
}
