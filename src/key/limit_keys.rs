//! Keys of their own for some limits of a policy: hierarchical quotas (per API key *and* per
//! tenant *and* global) checked in one atomic call.

use std::sync::Arc;

use super::Key;
use crate::policy::MAX_LIMITS;

/// The keys of a key's limits: this key without them, and each limit's own by position
/// (`None`: the primary).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct LimitKeys {
    primary: Key,
    by_position: Box<[Option<Key>]>,
    /// Each limit's own key names its state alone ([`Key::with_named_limit_keys`]).
    named: bool,
}

impl Key {
    /// This key, with the limit at `position` of the policy counted under `key` instead: the
    /// store checks and charges every limit in one atomic call, each under its own key. Limits
    /// without one count under this key. `key`'s own limit keys are dropped; a `position` past
    /// [`MAX_LIMITS`] is ignored.
    ///
    /// In a Redis Cluster all keys of one check share one hash slot: the slot of the
    /// [`hash_tag`](Self::hash_tag), the key of the highest position given. Give limits from
    /// the narrowest (the client) to the widest (its tenant), so that a tenant's limit is one
    /// key whichever client counts against it.
    ///
    /// ```
    /// use redlimit::Key;
    /// let key = Key::new("api-key-1")
    ///     .with_limit_key(1, Key::new("tenant:acme"))
    ///     .with_limit_key(2, Key::new("global"));
    /// assert_eq!(key.limit_key(0).as_str(), "api-key-1");
    /// assert_eq!(key.limit_key(1).as_str(), "tenant:acme");
    /// assert_eq!(key.hash_tag(), "global");
    /// assert_eq!(key.to_string(), "api-key-1;1=tenant:acme;2=global");
    /// ```
    #[must_use]
    pub fn with_limit_key(self, position: usize, key: Key) -> Key {
        self.with_limit_keys([(position, key)])
    }

    /// [`with_limit_key`](Self::with_limit_key) for several limits at once (one allocation).
    pub(crate) fn with_limit_keys(mut self, keys: impl IntoIterator<Item = (usize, Key)>) -> Key {
        let mut by_position: Vec<Option<Key>> = self
            .limits
            .as_deref()
            .map(|l| l.by_position.to_vec())
            .unwrap_or_default();
        for (position, key) in keys {
            if position >= MAX_LIMITS {
                continue;
            }
            if by_position.len() <= position {
                by_position.resize(position + 1, None);
            }
            by_position[position] = Some(Key::from_text(key.text));
        }
        if by_position.iter().all(Option::is_none) {
            return self;
        }
        self.limits = Some(Arc::new(LimitKeys {
            primary: self.primary(),
            by_position: by_position.into_boxed_slice(),
            named: false,
        }));
        self
    }

    /// This key with a key of its own for every limit of a policy (`keys[i]` for the limit at
    /// position `i`, at most [`MAX_LIMITS`]), each naming its limit's state alone: the store
    /// keeps that state under the limit key and the limit's algorithm, not under the policy's
    /// name or the limit's position, so one counter is the same state whichever check it is
    /// part of and at whatever position (Envoy RLS: the descriptors of one request, each in
    /// any number of requests). This key is the check's [`hash_tag`](Self::hash_tag).
    ///
    /// The caller keeps each check to distinct limit keys and at most one limit of a per-key
    /// algorithm (a sliding log, a concurrency limit): such limits of one policy share one
    /// state.
    #[cfg_attr(not(feature = "rls"), allow(dead_code))]
    pub(crate) fn with_named_limit_keys(mut self, keys: impl IntoIterator<Item = Key>) -> Key {
        let by_position: Box<[Option<Key>]> = keys
            .into_iter()
            .take(MAX_LIMITS)
            .map(|key| Some(Key::from_text(key.text)))
            .collect();
        self.limits = Some(Arc::new(LimitKeys {
            primary: self.primary(),
            by_position,
            named: true,
        }));
        self
    }

    /// Whether each limit key names its limit's state alone ([`Key::with_named_limit_keys`]).
    pub(crate) fn names_limit_states(&self) -> bool {
        self.limits.as_deref().is_some_and(|l| l.named)
    }

    /// The text a store's map files this key's entry under: for a key with one limit key that
    /// names its state (one RLS counter: [`Key::with_named_limit_keys`] of one key), that
    /// limit key's, which tells the counters of one hash tag apart; else this key's own.
    pub(crate) fn entry_text(&self) -> &str {
        match self.limits.as_deref() {
            Some(LimitKeys {
                named: true,
                by_position,
                ..
            }) if by_position.len() == 1 => {
                by_position[0].as_ref().map_or(self.as_str(), Key::as_str)
            }
            _ => self.as_str(),
        }
    }

    /// The key the limit at `position` counts under: its own, or this key without its limit
    /// keys.
    ///
    /// ```
    /// use redlimit::Key;
    /// let key = Key::new("a").with_limit_key(1, Key::new("t"));
    /// assert_eq!(key.limit_key(0), &Key::new("a"));
    /// assert_eq!(key.limit_key(1), &Key::new("t"));
    /// assert_eq!(key.limit_key(7), &Key::new("a"));
    /// ```
    pub fn limit_key(&self, position: usize) -> &Key {
        let Some(limits) = self.limits.as_deref() else {
            return self;
        };
        match limits.by_position.get(position) {
            Some(Some(own)) => own,
            _ => &limits.primary,
        }
    }

    /// Whether some limit counts under a key of its own.
    ///
    /// ```
    /// use redlimit::Key;
    /// assert!(!Key::new("a").has_limit_keys());
    /// assert!(Key::new("a").with_limit_key(0, Key::new("b")).has_limit_keys());
    /// ```
    pub fn has_limit_keys(&self) -> bool {
        self.limits.is_some()
    }

    /// The limits with a key of their own, by position.
    ///
    /// ```
    /// use redlimit::Key;
    /// let key = Key::new("a").with_limit_key(2, Key::new("g"));
    /// let own: Vec<_> = key.limit_keys().map(|(p, k)| (p, k.as_str())).collect();
    /// assert_eq!(own, [(2, "g")]);
    /// ```
    pub fn limit_keys(&self) -> impl Iterator<Item = (usize, &Key)> {
        self.limits
            .as_deref()
            .map_or(&[][..], |l| &l.by_position[..])
            .iter()
            .enumerate()
            .filter_map(|(position, key)| Some((position, key.as_ref()?)))
    }

    /// The text every store key of a check shares as its Redis Cluster hash tag (so one check
    /// is one slot): the key of the highest-positioned limit with a key of its own, else this
    /// key's. A global limit given last therefore puts every check of its policy on one slot.
    /// (Limit keys that name their states, as the `rls` service gives them, leave the tag to
    /// this key.)
    ///
    /// ```
    /// use redlimit::Key;
    /// assert_eq!(Key::new("a").hash_tag(), "a");
    /// let key = Key::new("a").with_limit_key(1, Key::new("tenant:t"));
    /// assert_eq!(key.hash_tag(), "tenant:t");
    /// ```
    pub fn hash_tag(&self) -> &str {
        if self.names_limit_states() {
            return self.as_str();
        }
        self.limit_keys()
            .last()
            .map_or(self.as_str(), |(_, key)| key.as_str())
    }

    /// This key without its limit keys.
    ///
    /// ```
    /// use redlimit::Key;
    /// let key = Key::new("a").with_limit_key(1, Key::new("t"));
    /// assert_eq!(key.primary(), Key::new("a"));
    /// ```
    #[must_use]
    pub fn primary(&self) -> Key {
        Key::from_text(Arc::clone(&self.text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_keys_are_part_of_identity() {
        let a = Key::new("a");
        let at = Key::new("a").with_limit_key(1, Key::new("t"));
        assert_ne!(a, at);
        assert_eq!(at.primary(), a);
        assert_eq!(at.as_str(), "a");
    }

    #[test]
    fn nested_limit_keys_are_dropped_and_positions_bounded() {
        let inner = Key::new("t").with_limit_key(0, Key::new("x"));
        let key = Key::new("a").with_limit_key(1, inner);
        assert!(!key.limit_key(1).has_limit_keys());
        assert_eq!(
            Key::new("a").with_limit_key(MAX_LIMITS, Key::new("x")),
            Key::new("a")
        );
    }

    #[test]
    fn display_round_trips() {
        for key in [
            Key::new("a"),
            Key::new("a b").with_limit_key(0, Key::new("{x}")),
            Key::new("a")
                .with_limit_key(3, Key::new("g"))
                .with_limit_key(1, Key::new("t")),
        ] {
            assert_eq!(
                Key::from_encoded(&key.to_string()),
                Some(key.clone()),
                "{key}"
            );
        }
        for bad in ["a;", "a;1", "a;x=t", "a;2=t;1=u", "a;16=t", "a;1=t{"] {
            assert_eq!(Key::from_encoded(bad), None, "{bad}");
        }
    }
}
