//! The resets a store knows of, newest last: made through it, or (a Redis store) through
//! another replica and read by its poller. A layer stamps each denial it caches with the
//! log's version and, once the version moved, asks whether the denial's key was among the
//! resets since, so a reset anywhere drops the matching denials everywhere and no other.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::key::Key;

/// Resets kept: a layer whose denial is older than the oldest asks the store again.
const KEPT: usize = 1024;

/// What one reset touched.
#[derive(Debug, Clone)]
enum Target {
    /// One key (with its limit keys, if any) under one policy.
    Key(Arc<str>, Key),
    /// Unknown resets (the replica missed some): any key may have been reset.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    Any,
}

/// A bounded log of resets, each numbered by the version it moved the log to.
#[derive(Debug, Default)]
pub(crate) struct ResetLog {
    version: AtomicU64,
    recent: Mutex<VecDeque<(u64, Target)>>,
}

impl ResetLog {
    /// The number of resets recorded, ever: it moves with each.
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Records a reset of `key` under the policy named `policy`.
    pub(crate) fn record(&self, policy: &str, key: &Key) {
        self.push(Target::Key(Arc::from(policy), key.clone()));
    }

    /// Records that resets were missed: every key counts as reset.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn record_any(&self) {
        self.push(Target::Any);
    }

    fn push(&self, target: Target) {
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        let version = self.version.load(Ordering::Acquire) + 1;
        recent.push_back((version, target));
        if recent.len() > KEPT {
            recent.pop_front();
        }
        // Published after the entry: whoever reads this version finds the entry.
        self.version.store(version, Ordering::Release);
    }

    /// Whether `key` under `policy` may have been reset after the log was at `since`: a reset
    /// of a key sharing a state key with it (the same key, or one of its limit keys), a
    /// missed reset, or one older than the log keeps.
    pub(crate) fn reset_since(&self, since: u64, policy: &str, key: &Key) -> bool {
        if self.version() == since {
            return false;
        }
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(&(oldest, _)) = recent.front() else {
            return true;
        };
        if oldest > since + 1 {
            return true;
        }
        recent
            .iter()
            .rev()
            .take_while(|(version, _)| *version > since)
            .any(|(_, target)| match target {
                Target::Any => true,
                Target::Key(p, k) => **p == *policy && shares_state(k, key),
            })
    }

    /// Each key reset after the log was at `since`, with its policy; `None` if that is not
    /// known (resets missed, or older than the log keeps).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn resets_after(&self, since: u64) -> Option<Vec<(Arc<str>, Key)>> {
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        let version = self.version();
        if version == since {
            return Some(Vec::new());
        }
        let &(oldest, _) = recent.front()?;
        if oldest > since + 1 || version < since {
            return None;
        }
        recent
            .iter()
            .filter(|(version, _)| *version > since)
            .map(|(_, target)| match target {
                Target::Any => None,
                Target::Key(p, k) => Some((Arc::clone(p), k.clone())),
            })
            .collect()
    }
}

/// Whether resetting `a` deletes some state `b` counts in (under the same policy): a state key
/// names one key text, so the two share a text among their keys and limit keys.
fn shares_state(a: &Key, b: &Key) -> bool {
    fn texts(k: &Key) -> impl Iterator<Item = &str> {
        std::iter::once(k.as_str()).chain(k.limit_keys().map(|(_, l)| l.as_str()))
    }
    texts(a).any(|t| texts(b).any(|u| u == t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_matches_its_key_and_keys_sharing_a_state_only() {
        let log = ResetLog::default();
        let before = log.version();
        assert!(!log.reset_since(before, "p", &Key::new("a")));
        log.record("p", &Key::new("a"));
        assert!(log.reset_since(before, "p", &Key::new("a")));
        assert!(!log.reset_since(before, "p", &Key::new("b")));
        assert!(!log.reset_since(before, "q", &Key::new("a")));
        assert!(!log.reset_since(log.version(), "p", &Key::new("a")));
        // A client of a reset tenant, and a reset tenant's client.
        let client = Key::new("c").with_limit_key(1, Key::new("tenant"));
        assert!(log.reset_since(before, "p", &Key::new("a").with_limit_key(1, Key::new("t"))));
        let at = log.version();
        log.record("p", &Key::new("tenant"));
        assert!(log.reset_since(at, "p", &client));
        let at = log.version();
        log.record("p", &Key::new("d").with_limit_key(1, Key::new("tenant")));
        assert!(log.reset_since(at, "p", &client));
        assert!(!log.reset_since(at, "p", &Key::new("e")));
        assert_eq!(
            log.resets_after(before).map(|r| r.len()),
            Some(3),
            "every reset since"
        );
        assert_eq!(log.resets_after(log.version()).map(|r| r.len()), Some(0));
    }

    #[test]
    fn missed_and_forgotten_resets_match_every_key() {
        let log = ResetLog::default();
        let before = log.version();
        log.record_any();
        assert!(log.reset_since(before, "p", &Key::new("x")));
        assert!(log.resets_after(before).is_none());
        let at = log.version();
        for i in 0..=KEPT {
            log.record("p", &Key::new(format!("k{i}")));
        }
        assert!(log.reset_since(at, "p", &Key::new("x")), "older than kept");
        assert!(log.resets_after(at).is_none());
        let recent = log.version() - 1;
        assert!(!log.reset_since(recent, "p", &Key::new("x")));
        assert_eq!(log.resets_after(recent).map(|r| r.len()), Some(1));
    }
}
