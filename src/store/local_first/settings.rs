//! The settings of a local-first store, checked when it is built.

use std::time::Duration;

use crate::error::ConfigError;
use crate::store::DEFAULT_MAX_KEYS;

/// The default sync interval.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(100);

/// The default admission marks, as fractions of each limit: chosen with the simulation
/// (`benches/local_first_sim.rs`, `benches/README.md`).
pub const DEFAULT_MARKS: (f64, f64) = (0.8, 1.0);

/// The default number of decisions of a key within one sync interval that make it hot on an
/// instance (decided in memory from then on; `LocalFirstStoreBuilder::local_after`).
///
/// ```
/// assert_eq!(redlimit::store::DEFAULT_LOCAL_AFTER, 8);
/// ```
pub const DEFAULT_LOCAL_AFTER: u32 = 8;

/// Validated settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Settings {
    pub(crate) interval: Duration,
    pub(crate) low: f64,
    pub(crate) high: f64,
    /// A key whose unsent units reach this share of its smallest limit syncs at once.
    pub(crate) early_share: f64,
    /// The share of an interval by which the rest of the fleet's unsynced units are credited
    /// at each sync.
    pub(crate) lag: f64,
    /// The instances assumed before the first heartbeat answers.
    pub(crate) instances: u32,
    /// The weight of the last interval in the rest of the fleet's offered rate (an EWMA).
    pub(crate) smoothing: f64,
    /// The cap on keys held (`LocalFirstStoreBuilder::max_keys`).
    pub(crate) max_keys: usize,
    /// Decisions within one interval that make a key hot (`LocalFirstStoreBuilder::local_after`).
    pub(crate) local_after: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            interval: DEFAULT_SYNC_INTERVAL,
            low: DEFAULT_MARKS.0,
            high: DEFAULT_MARKS.1,
            early_share: 0.5,
            lag: 0.5,
            instances: 1,
            smoothing: 0.5,
            max_keys: DEFAULT_MAX_KEYS,
            local_after: DEFAULT_LOCAL_AFTER,
        }
    }
}

impl Settings {
    pub(crate) fn interval_us(&self) -> u64 {
        u64::try_from(self.interval.as_micros()).unwrap_or(u64::MAX)
    }

    /// How long a key stays in the syncs after its last request: ten intervals, at least 1 s.
    pub(crate) fn warm_us(&self) -> u64 {
        (10 * self.interval_us()).max(1_000_000)
    }

    /// Refuses settings that cannot work.
    pub(crate) fn validate(self) -> Result<Self, ConfigError> {
        let bad = |what: String| Err(ConfigError::InvalidLocalFirst(what));
        if self.interval < Duration::from_millis(1) || self.interval > Duration::from_secs(60) {
            return bad(format!(
                "sync interval {:?}: use 1 ms to 60 s",
                self.interval
            ));
        }
        if !(self.low > 0.0 && self.low <= self.high && self.high <= 2.0) {
            return bad(format!(
                "admission marks {}..{}: use 0 < low <= high <= 2",
                self.low, self.high
            ));
        }
        if !(self.early_share > 0.0 && self.early_share <= 1.0) {
            return bad(format!("early-sync share {}: use (0, 1]", self.early_share));
        }
        if self.local_after == 0 {
            return bad("local-after 0: a key needs at least 1 decision to turn hot".to_owned());
        }
        if !(0.0..=4.0).contains(&self.lag) {
            return bad(format!("lag credit {}: use 0 to 4 intervals", self.lag));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_nonsense_is_refused() {
        assert!(Settings::default().validate().is_ok());
        for s in [
            Settings {
                interval: Duration::ZERO,
                ..Settings::default()
            },
            Settings {
                low: 0.0,
                ..Settings::default()
            },
            Settings {
                low: 1.0,
                high: 0.9,
                ..Settings::default()
            },
            Settings {
                high: f64::NAN,
                ..Settings::default()
            },
            Settings {
                early_share: 0.0,
                ..Settings::default()
            },
            Settings {
                local_after: 0,
                ..Settings::default()
            },
        ] {
            assert!(
                matches!(s.validate(), Err(ConfigError::InvalidLocalFirst(_))),
                "{s:?}"
            );
        }
    }
}
