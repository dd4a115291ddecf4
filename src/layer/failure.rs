//! What the layer does when it cannot decide: the store failed, or the request has no key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use http::StatusCode;

/// What happens when the store fails or misses its deadline.
///
/// ```
/// use redlimit::OnStoreError;
/// assert_eq!(OnStoreError::default(), OnStoreError::Open);
/// assert_eq!("closed".parse::<OnStoreError>().unwrap(), OnStoreError::Closed);
/// assert_eq!("local".parse::<OnStoreError>().unwrap(), OnStoreError::local());
/// assert!("maybe".parse::<OnStoreError>().is_err());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnStoreError {
    /// Let the request through, unlimited, and log it (`warn`, at most once a second).
    /// The handler sees a [`Decision`](crate::Decision) whose source is
    /// [`DecisionSource::FailOpen`](crate::DecisionSource::FailOpen).
    #[default]
    Open,
    /// Answer `503 Service Unavailable` (never 429: the client did nothing wrong).
    Closed,
    /// Decide with an in-memory store in this instance, with the same policy, its counts
    /// divided by `instances` (rounded up), so that `instances` replicas falling back together
    /// admit about what the shared store would. The decision's source is
    /// [`DecisionSource::Local`](crate::DecisionSource::Local); headers are sent as usual.
    Local {
        /// How many instances share the limit (1: each instance enforces the whole limit).
        instances: u32,
    },
}

impl OnStoreError {
    /// Local fallback enforcing the whole limit in each instance.
    ///
    /// ```
    /// use redlimit::OnStoreError;
    /// assert_eq!(OnStoreError::local(), OnStoreError::Local { instances: 1 });
    /// ```
    pub fn local() -> Self {
        OnStoreError::Local { instances: 1 }
    }
}

impl std::str::FromStr for OnStoreError {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "open" => Ok(OnStoreError::Open),
            "closed" => Ok(OnStoreError::Closed),
            "local" => Ok(OnStoreError::local()),
            other => Err(crate::ConfigError::UnknownStoreErrorMode(other.to_owned())),
        }
    }
}

/// What happens to a request whose key extractor finds no key (e.g. no API key header).
///
/// ```
/// use http::StatusCode;
/// use redlimit::MissingKey;
/// let strict = MissingKey::Reject(StatusCode::UNAUTHORIZED);
/// assert_eq!(MissingKey::default(), MissingKey::PeerIp);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MissingKey {
    /// Count it under the socket peer's IP; if that is unknown too, let it through unlimited
    /// (and log it).
    #[default]
    PeerIp,
    /// Let it through unlimited.
    Allow,
    /// Answer with this status and a short body.
    Reject(StatusCode),
}

/// Logs a recurring failure at `warn` at most once a second, and at `debug` otherwise, so a
/// dead store at 10k requests/s does not flood the logs.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    last_warn_ms: AtomicU64,
}

impl Throttle {
    /// Whether this occurrence should be logged at `warn`.
    pub(crate) fn should_warn(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let last = self.last_warn_ms.load(Ordering::Relaxed);
        now.saturating_sub(last) >= 1000
            && self
                .last_warn_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}
