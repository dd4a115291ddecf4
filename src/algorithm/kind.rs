//! The algorithms by name: the public [`Algorithm`], read from the table of the algorithms'
//! descriptors.

use std::fmt;

use super::Descriptor;
use crate::error::ConfigError;

/// The algorithm a [`Limit`](crate::Limit) uses. See the crate documentation for when to use which.
///
/// ```
/// use redlimit::Algorithm;
/// assert_eq!("gcra".parse::<Algorithm>().unwrap(), Algorithm::Gcra);
/// assert_eq!(Algorithm::SlidingLog.to_string(), "sliding-log");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// `N` per epoch-aligned window of `P`. Cheapest; admits up to `2N` across a window edge.
    FixedWindow,
    /// The previous window's count weighted by its overlap plus the current count. O(1) memory,
    /// approximate (never admits more than the fixed window would).
    SlidingWindow,
    /// An exact log of admissions: `N` in any span of `P`. Memory grows with `N`.
    SlidingLog,
    /// A bucket of `N` tokens refilled at `N` per `P`, one token every `P/N`.
    TokenBucket,
    /// The generic cell rate algorithm: burst `N`, rate `N` per `P`, one integer per key.
    Gcra,
    /// Not a rate: at most `N` requests in flight per key, each holding a lease that the layer
    /// releases when the response ends and that lapses after `P` (the lease timeout) if its
    /// replica died. See [`Limit::concurrency`](crate::Limit::concurrency).
    Concurrency,
    /// A fixed window whose windows follow a calendar in a time zone (days, weeks, months,
    /// years, from an anchor such as "the 15th at 00:00 Europe/Berlin"). Made by
    /// [`Limit::calendar`](crate::Limit::calendar), which takes its
    /// [`Calendar`](crate::calendar::Calendar).
    Calendar,
}

impl Algorithm {
    /// The rate algorithms that [`Limit::new`](crate::Limit::new) makes from a count and a
    /// period, in the order of the documentation. [`Algorithm::Calendar`] (made from a
    /// calendar, by [`Limit::calendar`](crate::Limit::calendar)) and
    /// [`Algorithm::Concurrency`] (which limits requests in flight rather than a rate) are not
    /// among them.
    ///
    /// ```
    /// assert_eq!(redlimit::Algorithm::ALL.len(), 5);
    /// ```
    pub const ALL: [Algorithm; 5] = [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
    ];

    /// Every algorithm: the rates of [`Algorithm::ALL`], the concurrency limit, then the
    /// calendar window, in the order of the algorithms' table (`crate::super::TABLE`). The
    /// scripts' signatures number algorithms by their position here.
    pub(crate) const EVERY: [Algorithm; super::TABLE.len()] = {
        let mut every = [Algorithm::FixedWindow; super::TABLE.len()];
        let mut i = 0;
        while i < every.len() {
            every[i] = super::TABLE[i].algorithm;
            i += 1;
        }
        every
    };

    /// The name used on the command line and in logs (`fixed-window`, `gcra`, ...).
    ///
    /// ```
    /// assert_eq!(redlimit::Algorithm::TokenBucket.name(), "token-bucket");
    /// ```
    pub fn name(self) -> &'static str {
        self.descriptor().name
    }

    /// The two-letter code the Lua script dispatches on; also part of the Redis key.
    #[cfg(feature = "redis")]
    pub(crate) fn code(self) -> &'static str {
        self.descriptor().code
    }

    /// This algorithm's row of the table.
    pub(crate) fn descriptor(self) -> &'static Descriptor {
        // The table is in the order of the variants (checked where it is written).
        &super::TABLE[self as usize]
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Algorithm {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algorithm::EVERY
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| ConfigError::UnknownAlgorithm(s.to_owned()))
    }
}
