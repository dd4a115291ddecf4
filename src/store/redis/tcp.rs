//! The TCP settings of every connection to Redis: no Nagle delay, keepalive probes and, on
//! Linux, a user timeout, so the kernel notices a peer that vanished without a FIN or RST (a
//! host powered off, a NAT or conntrack entry flushed) instead of retransmitting for ~15
//! minutes.
//!
//! `TCP_NODELAY` (off in redis-rs by default): with Nagle's algorithm, a call written while an
//! earlier one is unacknowledged waits for that ACK, which the server sends with its reply. On
//! loopback that costs nothing; a network away it holds every pipelined call behind the one
//! in flight for a whole round trip.
//!
//! These catch a dead peer within seconds where the network drops packets. They cannot
//! catch a middlebox that keeps acknowledging and answers nothing (a proxy that lost its
//! upstream): the store's own healing (`heal`) replaces such a connection after missed calls.

use std::time::Duration;

use redis::io::tcp::{TcpSettings, socket2::TcpKeepalive};

/// Idle time before the first keepalive probe.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);

/// Time between unanswered keepalive probes.
#[cfg(any(target_os = "linux", target_os = "android"))]
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);

/// Unanswered probes before the connection is dropped.
#[cfg(any(target_os = "linux", target_os = "android"))]
const KEEPALIVE_PROBES: u32 = 3;

/// How long sent data may stay unacknowledged before the kernel drops the connection
/// (`TCP_USER_TIMEOUT`; with keepalive on, it also bounds the probing).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) const USER_TIMEOUT: Duration = Duration::from_secs(5);

/// The settings: on Linux a dead idle connection is dropped after about 15 s (idle 10 s, then
/// probes every 5 s bounded by the 5 s user timeout), a busy one 5 s after its data went
/// unacknowledged; elsewhere keepalive starts after 10 s idle with the system's probes.
pub(super) fn settings() -> TcpSettings {
    let keepalive = TcpKeepalive::new().with_time(KEEPALIVE_IDLE);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let keepalive = keepalive
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    let settings = TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let settings = settings.set_user_timeout(USER_TIMEOUT);
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodelay_keepalive_and_user_timeout_are_set() {
        let settings = settings();
        assert!(settings.nodelay());
        assert!(settings.keepalive().is_some());
        #[cfg(target_os = "linux")]
        assert_eq!(settings.user_timeout(), Some(USER_TIMEOUT));
    }
}
