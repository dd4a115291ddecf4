//! How a connection is doing, judged by the calls made on it, and when it must be replaced.
//!
//! A call either got an answer (a decision, or an error reply such as `BUSY`: the connection
//! works), or missed (dropped by the layer before completing, timed out, failed on I/O), or
//! proved the connection broken (authentication or `SELECT` refused while connecting). A
//! connection is replaced after [`HEAL_AFTER_MISSES`] missed calls in a row spanning at least
//! [`HEAL_AFTER_SILENCE`] without an answer, or at once when broken, and never more often than
//! every [`HEAL_INTERVAL`].
//!
//! Silence is judged by time, not by the number of misses alone: a caller with a short
//! deadline (the RLS server's 15 ms, under Envoy's 20 ms timeout) misses three calls in a row
//! whenever a loaded server or a distant one leaves a 15 ms gap between answers, and replacing
//! a working connection then loses every call on it.
//!
//! A miss counts only if no call on the same bucket got an answer while it was pending: under
//! load, calls past the deadline while others succeed mean a slow server, and a new connection
//! would not make it faster. A black-holed connection answers nothing, so every miss counts.
//! Buckets are slot ranges in a Cluster (one frozen shard among healthy ones still counts its
//! misses) and a single bucket otherwise.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind};

/// Missed calls in a row (in one bucket, with no answer in between) after which the
/// connection may be replaced. One miss may be a slow moment; three at the layer's default
/// 100 ms deadline are 300 ms of silence.
pub(super) const HEAL_AFTER_MISSES: u32 = 3;

/// How long a bucket must have gone without an answer (since its last answer, or since the
/// connection was put in place) before its misses replace the connection: three of the layer's
/// default deadlines, whatever the caller's own deadline.
pub(super) const HEAL_AFTER_SILENCE: Duration = Duration::from_millis(300);

/// The least time between two replacements: a server that is down for long costs one
/// connection attempt a second, not one per request.
pub(super) const HEAL_INTERVAL: Duration = Duration::from_secs(1);

/// What one call says about its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The server answered: the connection works.
    Answered,
    /// No answer: dropped before completing, timed out, or lost on I/O.
    Missed,
    /// The connection cannot work as it is: the server refused it while connecting
    /// (authentication, `SELECT`, the handshake), and the cached connection attempt keeps
    /// failing the same way until a new one is made.
    Broken,
}

impl Outcome {
    /// What a finished call's result says about its connection.
    pub(super) fn of<T>(result: &RedisResult<T>) -> Outcome {
        match result {
            Ok(_) => Outcome::Answered,
            Err(err) if refused_connection(err) => Outcome::Broken,
            Err(err) if lost(err) => Outcome::Missed,
            Err(_) => Outcome::Answered,
        }
    }

    /// Why a connection was replaced, for the log.
    pub(super) fn reason(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Missed => "calls went unanswered",
            Outcome::Broken => {
                "the server refused the connection (authentication, SELECT or handshake)"
            }
        }
    }
}

/// Errors of a connection the server refused while it was being set up. redis-rs caches the
/// failed attempt and reconnects only after I/O errors, so these repeat until replaced.
fn refused_connection(err: &RedisError) -> bool {
    matches!(
        err.kind(),
        ErrorKind::AuthenticationFailed
            | ErrorKind::InvalidClientConfig
            | ErrorKind::RESP3NotSupported
            | ErrorKind::Client
    ) || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
        // A refused `SELECT` while connecting is an `ERR` that redis-rs writes itself: it
        // carries no server reply, unlike an `ERR` the script answered with.
        || (err.kind() == ErrorKind::Server(ServerErrorKind::ResponseError)
            && err.clone().into_server_errors().is_none())
}

/// Errors that mean the call got no answer.
fn lost(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.kind() == ErrorKind::ClusterConnectionNotFound
}

/// How stale (in microseconds) the time of the last answer may be.
const ANSWER_GRAIN: u64 = 1_000;

/// The calls on one connection: misses in a row per bucket, and when a replacement may start.
/// Times are microseconds since `anchor`.
pub(super) struct Health {
    anchor: Instant,
    buckets: Box<[Bucket]>,
    /// No replacement starts before this time.
    next_heal: AtomicU64,
    /// Replacements since a call was last answered (the first of a streak is logged louder).
    streak: AtomicU32,
}

#[derive(Default)]
struct Bucket {
    misses: AtomicU32,
    last_answer: AtomicU64,
}

impl Health {
    /// Health with `buckets` buckets (at least one).
    pub(super) fn new(buckets: usize) -> Self {
        Health {
            anchor: Instant::now(),
            buckets: (0..buckets.max(1)).map(|_| Bucket::default()).collect(),
            next_heal: AtomicU64::new(0),
            streak: AtomicU32::new(0),
        }
    }

    /// Now, in microseconds since this was made.
    pub(super) fn now(&self) -> u64 {
        self.micros(Instant::now())
    }

    /// `at`, in microseconds since this was made.
    pub(super) fn micros(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.anchor).as_micros()).unwrap_or(u64::MAX)
    }

    /// Records the outcome of a call in `bucket` that started at `started`; true if the
    /// connection must be replaced now (the caller then replaces it: this replacement's turn
    /// is taken).
    pub(super) fn record(&self, bucket: usize, started: u64, outcome: Outcome, now: u64) -> bool {
        let bucket = &self.buckets[bucket % self.buckets.len()];
        match outcome {
            Outcome::Answered => {
                // Loads first, and the time at most once a millisecond (a miss lasts at least
                // the layer's deadline): under load the common case writes nothing shared.
                if bucket.misses.load(Ordering::Relaxed) != 0 {
                    bucket.misses.store(0, Ordering::Relaxed);
                }
                if self.streak.load(Ordering::Relaxed) != 0 {
                    self.streak.store(0, Ordering::Relaxed);
                }
                if now >= bucket.last_answer.load(Ordering::Relaxed) + ANSWER_GRAIN {
                    bucket.last_answer.fetch_max(now, Ordering::Relaxed);
                }
                false
            }
            Outcome::Missed => {
                if bucket.last_answer.load(Ordering::Relaxed) > started {
                    return false;
                }
                let misses = bucket.misses.fetch_add(1, Ordering::Relaxed) + 1;
                let silent = now.saturating_sub(bucket.last_answer.load(Ordering::Relaxed));
                misses >= HEAL_AFTER_MISSES
                    && silent >= HEAL_AFTER_SILENCE.as_micros() as u64
                    && self.take_turn(now)
            }
            Outcome::Broken => self.take_turn(now),
        }
    }

    /// Forgets the misses: a new connection starts afresh, its silence counted from now.
    /// Returns how many replacements in a row (without an answered call in between) this one
    /// makes.
    pub(super) fn replaced(&self) -> u32 {
        let now = self.now();
        for bucket in self.buckets.iter() {
            bucket.misses.store(0, Ordering::Relaxed);
            bucket.last_answer.fetch_max(now, Ordering::Relaxed);
        }
        self.streak.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Whether a replacement may start now; if so, the next may start [`HEAL_INTERVAL`] later.
    fn take_turn(&self, now: u64) -> bool {
        let next = self.next_heal.load(Ordering::Acquire);
        let interval = HEAL_INTERVAL.as_micros() as u64;
        now >= next
            && self
                .next_heal
                .compare_exchange(next, now + interval, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    const MS: u64 = 1_000;

    fn server_error(reply: &[u8]) -> RedisError {
        redis::parse_redis_value(reply)
            .and_then(redis::Value::extract_error)
            .unwrap_err()
    }

    fn outcome(err: RedisError) -> Outcome {
        Outcome::of::<()>(&Err(err))
    }

    #[test]
    fn three_misses_in_a_row_replace_the_connection() {
        let health = Health::new(1);
        assert!(!health.record(0, 0, Outcome::Missed, 100 * MS));
        assert!(!health.record(0, 100 * MS, Outcome::Missed, 200 * MS));
        assert!(health.record(0, 200 * MS, Outcome::Missed, 300 * MS));
    }

    #[test]
    fn misses_replace_nothing_before_the_silence_is_long_enough() {
        // A 15 ms deadline: three misses in a 20 ms gap between answers are a slow moment.
        let health = Health::new(1);
        health.record(0, 0, Outcome::Answered, 1_000 * MS);
        for i in 0..10 {
            let start = 1_001 * MS + i * MS;
            assert!(!health.record(0, start, Outcome::Missed, start + 15 * MS));
        }
        health.record(0, 1_015 * MS, Outcome::Answered, 1_020 * MS);
        // Silence from 1 020 ms on: misses count, but replace only 300 ms after the answer.
        for i in 0..18 {
            let start = 1_021 * MS + i * 15 * MS;
            assert!(
                !health.record(0, start, Outcome::Missed, start + 15 * MS),
                "miss {i}"
            );
        }
        assert!(health.record(0, 1_310 * MS, Outcome::Missed, 1_325 * MS));
    }

    #[test]
    fn an_answer_resets_the_count() {
        let health = Health::new(1);
        health.record(0, 0, Outcome::Missed, 100 * MS);
        health.record(0, 100 * MS, Outcome::Missed, 200 * MS);
        health.record(0, 210 * MS, Outcome::Answered, 220 * MS);
        assert!(!health.record(0, 230 * MS, Outcome::Missed, 330 * MS));
        assert!(!health.record(0, 330 * MS, Outcome::Missed, 430 * MS));
        assert!(health.record(0, 430 * MS, Outcome::Missed, 530 * MS));
    }

    #[test]
    fn misses_while_others_are_answered_do_not_count() {
        // Under load: calls past the deadline while calls started later succeed.
        let health = Health::new(1);
        for i in 0..10 {
            let t = 1_000 * MS + i * 10 * MS;
            health.record(0, t + 5 * MS, Outcome::Answered, t + 8 * MS);
            assert!(!health.record(0, t, Outcome::Missed, t + 100 * MS));
        }
    }

    #[test]
    fn buckets_count_apart() {
        // One frozen shard among healthy ones: its misses count though others answer.
        let health = Health::new(4);
        let mut replaced = false;
        for i in 0..3 {
            let t = i * 100 * MS;
            health.record(0, t, Outcome::Answered, t + MS);
            replaced = health.record(1, t, Outcome::Missed, t + 100 * MS);
        }
        assert!(replaced);
    }

    #[test]
    fn replacements_are_rate_limited() {
        let health = Health::new(1);
        assert!(health.record(0, 0, Outcome::Broken, 10 * MS));
        assert!(!health.record(0, 20 * MS, Outcome::Broken, 500 * MS));
        for i in 0..5 {
            assert!(!health.record(0, 0, Outcome::Missed, 600 * MS + i));
        }
        assert!(health.record(0, 0, Outcome::Broken, 1_010 * MS));
    }

    #[test]
    fn a_replacement_forgets_the_misses() {
        let health = Health::new(1);
        health.record(0, 0, Outcome::Missed, MS);
        health.record(0, 0, Outcome::Missed, 2 * MS);
        assert_eq!(health.replaced(), 1);
        assert_eq!(health.replaced(), 2, "a streak without answers");
        assert!(!health.record(0, 0, Outcome::Missed, 3 * MS));
        health.record(0, 0, Outcome::Answered, 4 * MS);
        assert_eq!(health.replaced(), 1, "an answer ends the streak");
    }

    #[test]
    fn refusals_while_connecting_are_broken() {
        let select: RedisError = (
            ServerErrorKind::ResponseError.into(),
            "Redis server refused to switch database",
            "ERR DB index is out of range".to_owned(),
        )
            .into();
        for err in [
            RedisError::from((
                ErrorKind::AuthenticationFailed,
                "Password authentication failed",
            )),
            select,
            (ErrorKind::Client, "Missing SELECT DB response").into(),
            server_error(b"-NOAUTH Authentication required.\r\n"),
            server_error(b"-WRONGPASS invalid username-password pair\r\n"),
        ] {
            assert_eq!(outcome(err.clone()), Outcome::Broken, "{err}");
        }
    }

    #[test]
    fn lost_calls_are_missed() {
        for err in [
            RedisError::from(io::Error::from(io::ErrorKind::TimedOut)),
            io::Error::from(io::ErrorKind::ConnectionRefused).into(),
            io::Error::from(io::ErrorKind::ConnectionReset).into(),
            (ErrorKind::Io, "connection closed").into(),
            (ErrorKind::ClusterConnectionNotFound, "no node").into(),
        ] {
            assert_eq!(outcome(err.clone()), Outcome::Missed, "{err}");
        }
    }

    #[test]
    fn server_replies_are_answers() {
        assert_eq!(Outcome::of(&Ok(1)), Outcome::Answered);
        for reply in [
            &b"-ERR user_script:1: boom\r\n"[..],
            b"-BUSY Redis is busy running a script\r\n",
            b"-OOM command not allowed\r\n",
            b"-READONLY You can't write against a read only replica.\r\n",
            b"-NOPERM this user has no permissions\r\n",
            b"-CLUSTERDOWN The cluster is down\r\n",
        ] {
            let err = server_error(reply);
            assert_eq!(outcome(err.clone()), Outcome::Answered, "{err}");
        }
    }
}
