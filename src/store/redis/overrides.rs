//! Overrides in Redis: one hash of every override (`PREFIX:{overrides}`, field
//! `POLICY\nKEY`, value the override's stored form) and a version (`PREFIX:{overrides}:version`)
//! bumped by every change in the same script call. Both share a hash tag, so one slot in a
//! Cluster. Each store polls the version and, when it moved, reads the hash into its local
//! table (`poll.rs`): a decision looks its override up in memory and sends Redis nothing
//! more.
//!
//! Why a poll and not a lookup inside the check script: measured (`benches/README.md`), an
//! `HGET` of a missing field in every check costs Redis more per decision than the poll costs
//! per second, and the override changes the check's arguments (its `N` and period), which the
//! script would otherwise have to read from Redis before it could evaluate.

use std::sync::Arc;
use std::time::Duration;

use super::RedisStore;
use super::error::store_error;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Override, StoreFuture};

/// How often a store reads the overrides' version by default.
pub(super) const DEFAULT_OVERRIDE_POLL: Duration = Duration::from_millis(250);

const SET: &str = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) \
                   return redis.call('INCR', KEYS[2])";
const REMOVE: &str = "local n = redis.call('HDEL', KEYS[1], ARGV[1]) \
                      if n > 0 then redis.call('INCR', KEYS[2]) end return n";

pub(super) fn hash_key(prefix: &str) -> String {
    format!("{prefix}:{{overrides}}")
}

pub(super) fn version_key(prefix: &str) -> String {
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
}
