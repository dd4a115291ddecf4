//! How long the xDS client waits before connecting again: after an open stream ends, the Go
//! service's `XDS_CLIENT_BACKOFF_*` (jpillora/backoff: `initial × factor^attempt` within
//! `[initial, max]`, with jitter picked between `initial` and that); after a connection or a
//! stream that could not be opened, `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL` ±50%
//! (gRPC-Go's linear backoff with jitter 0.5).

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use crate::settings::XdsSettings;

/// The waits of one client; `attempt` counts the ends since the last accepted response.
#[derive(Debug)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    factor: f64,
    jitter: bool,
    connect_retry: Duration,
    attempt: i32,
}

impl Backoff {
    pub(crate) fn new(s: &XdsSettings) -> Backoff {
        Backoff {
            initial: s.xds_client_backoff_initial_interval,
            max: s
                .xds_client_backoff_max_interval
                .max(s.xds_client_backoff_initial_interval),
            // jpillora/backoff: a factor of 0 or less means 2.
            factor: if s.xds_client_backoff_random_factor > 0.0 {
                s.xds_client_backoff_random_factor
            } else {
                2.0
            },
            jitter: s.xds_client_backoff_jitter,
            connect_retry: s.config_grpc_xds_server_connect_retry_interval,
            attempt: 0,
        }
    }

    /// The wait after an open stream ended.
    pub(crate) fn after_stream(&mut self) -> Duration {
        let initial = self.initial.as_secs_f64();
        let computed = initial * self.factor.powi(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        let picked = if self.jitter && computed > initial {
            initial + random_unit() * (computed - initial)
        } else {
            computed
        };
        Duration::try_from_secs_f64(picked)
            .unwrap_or(self.max)
            .clamp(self.initial, self.max)
    }

    /// The wait after a connection or a stream could not be opened.
    pub(crate) fn after_connect_failure(&self) -> Duration {
        self.connect_retry.mul_f64(0.5 + random_unit())
    }

    /// A response was accepted: the next end starts from the initial wait again.
    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// A number in `[0, 1)`, from the standard library's per-process random hash keys.
fn random_unit() -> f64 {
    let bits = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Only {
        #[command(flatten)]
        xds: XdsSettings,
    }

    /// (initial, max, factor, jitter, connect retry), in seconds.
    fn backoff(initial: u64, max: u64, factor: f64, jitter: bool, retry: u64) -> Backoff {
        let mut s = Only::try_parse_from(["t"]).expect("parses").xds;
        s.xds_client_backoff_initial_interval = Duration::from_secs(initial);
        s.xds_client_backoff_max_interval = Duration::from_secs(max);
        s.xds_client_backoff_random_factor = factor;
        s.xds_client_backoff_jitter = jitter;
        s.config_grpc_xds_server_connect_retry_interval = Duration::from_secs(retry);
        Backoff::new(&s)
    }

    #[test]
    fn waits_grow_by_the_factor_within_the_bounds() {
        let mut b = backoff(1, 5, 2.0, false, 3);
        let waits: Vec<u64> = (0..5).map(|_| b.after_stream().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        b.reset();
        assert_eq!(b.after_stream(), Duration::from_secs(1));
    }

    #[test]
    fn go_defaults_wait_the_initial_interval() {
        // Factor 0.5 shrinks the computed wait below the initial one: jpillora/backoff then
        // waits the initial interval, every time.
        let mut b = backoff(10, 60, 0.5, true, 3);
        for _ in 0..4 {
            assert_eq!(b.after_stream(), Duration::from_secs(10));
        }
    }

    #[test]
    fn jitter_stays_within_the_bounds() {
        let mut b = backoff(1, 60, 4.0, true, 2);
        for attempt in 0..4 {
            let wait = b.after_stream();
            let top = Duration::from_secs(4u64.pow(attempt)).min(Duration::from_secs(60));
            assert!(wait >= Duration::from_secs(1) && wait <= top, "{wait:?}");
            let retry = b.after_connect_failure();
            assert!(
                retry >= Duration::from_secs(1) && retry < Duration::from_secs(3),
                "{retry:?}"
            );
        }
    }
}
