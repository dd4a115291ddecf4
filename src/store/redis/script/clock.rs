//! [`Clock`]: the time a script decides at. Redis's own (`TIME`, read by the script), except on
//! a store the crate's tests set to a time of their own (`redlimit::__private`, feature
//! `__test-hooks`), so that they drive time without sleeping. A client's clock never decides
//! in production: one that lagged would rewind the limits.

use std::time::{SystemTime, UNIX_EPOCH};

use redis::Cmd;

/// The TTL slack of state written at a set time (`ttl_slack_ms` in `lua/prelude.lua`), so that
/// real time passing during a test does not expire simulated state.
const SET_TIME_TTL_SLACK_MS: u64 = 60_000;

/// What a script takes for now: Redis `TIME` (the default), or a time set by a test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Clock {
    /// Unix µs, when set.
    set_us: Option<u64>,
}

impl Clock {
    /// A clock stopped at `unix_us` (Unix µs): the scripts use it instead of Redis `TIME`.
    #[cfg(any(test, feature = "__test-hooks"))]
    pub(crate) fn at(unix_us: u64) -> Self {
        Clock {
            set_us: Some(unix_us),
        }
    }

    /// Writes the script's time argument: the set time, or empty for Redis `TIME`.
    pub(crate) fn push(self, command: &mut Cmd) {
        match self.set_us {
            Some(now) => command.arg(now),
            None => command.arg(""),
        };
    }

    /// The client's time, which a calendar window's boundaries are computed around: the set
    /// time, else this machine's wall clock (the script then picks the window that holds
    /// Redis's time).
    pub(crate) fn client_time_us(self) -> u64 {
        self.set_us.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        })
    }

    /// What a sliding log's TTL gets on top of its span: a minute at a set time, else nothing.
    pub(crate) fn ttl_slack_ms(self) -> u64 {
        if self.set_us.is_some() {
            SET_TIME_TTL_SLACK_MS
        } else {
            0
        }
    }
}
