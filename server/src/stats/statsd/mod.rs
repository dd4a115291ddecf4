//! statsd, envoyproxy/ratelimit's default sink (`USE_STATSD`, on there unless turned off):
//! its counters and timer under its names (see `names`), flushed every `STATS_FLUSH_INTERVAL`
//! as gostats flushes them: one `name:delta|c` line per counter that moved, and one
//! `name:MS|ms` line per call timed (whole milliseconds, as the Go service measures them), over
//! TCP (gostats' default) or UDP (`STATSD_PROTOCOL=udp`) to `STATSD_HOST:STATSD_PORT`.
//!
//! Why not `metrics-exporter-statsd` (on `cadence`): the Go service's lines are gostats',
//! which those crates cannot write. gostats sends over TCP by default (cadence has UDP and Unix
//! sinks only), sums each counter over the flush interval (cadence sends a line per
//! increment: three lines per descriptor per request at Envoy's rates, where gostats sends one
//! per counter per interval) and carries tags in the name (`.__key=value`, where cadence
//! writes DogStatsD's `|#key:value`). The counters are kept in `metrics-util`'s registry (the
//! one the Prometheus exporter keeps its own in); what is written here is the line format and
//! the socket.
//!
//! DogStatsD (`USE_DOG_STATSD`, see `dog`) is the same counters and timer, flushed the same
//! way, written as the Go service's DogStatsD sink writes them (`name:delta|c|#tags`), over
//! UDP as its client sends them.

mod dog;
pub(crate) mod names;
mod sink;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_util::registry::{AtomicStorage, Registry};
use tokio::sync::oneshot;

use crate::settings::{ExtraTags, StatsSettings, StatsdProtocol};

pub(crate) use dog::Dog;

/// The process's statsd recorder: the Go service's counters, counted in memory until flushed.
#[derive(Clone)]
pub(crate) struct StatsdRecorder {
    registry: Arc<Registry<Key, AtomicStorage>>,
}

impl std::fmt::Debug for StatsdRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsdRecorder").finish_non_exhaustive()
    }
}

impl StatsdRecorder {
    /// A recorder whose statistics are flushed to the settings' statsd every interval, by a
    /// task spawned on the current runtime, and once more by [`LastFlush::run`]; as DogStatsD
    /// lines with `dog`.
    pub(crate) fn start(stats: &StatsSettings, dog: Option<Dog>) -> (Self, LastFlush) {
        let recorder = StatsdRecorder {
            registry: Arc::new(Registry::atomic()),
        };
        let protocol = match dog {
            Some(_) => StatsdProtocol::Udp,
            None => stats.statsd_protocol,
        };
        let flusher = Flusher {
            registry: Arc::clone(&recorder.registry),
            sink: sink::Sink::new(protocol, stats.statsd_host.clone(), stats.statsd_port),
            tags: stats.extra_tags.clone(),
            dog,
            sent: HashMap::new(),
        };
        let (last, asked) = oneshot::channel();
        let done = tokio::spawn(flusher.run(stats.stats_flush_interval, asked));
        (recorder, LastFlush { last, done })
    }
}

/// The flush at exit: what was counted since the last interval's flush, after the listeners
/// drained (the Go service drops it).
#[derive(Debug)]
pub(crate) struct LastFlush {
    last: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

impl LastFlush {
    /// Flushes once more and waits for it, a few seconds at most (a statsd that does not
    /// answer must not hold the exit).
    pub(crate) async fn run(self) {
        let _ = self.last.send(());
        let _ = tokio::time::timeout(LAST_FLUSH_TIMEOUT, self.done).await;
    }
}

/// gostats' dial and write deadlines, with room.
const LAST_FLUSH_TIMEOUT: Duration = Duration::from_secs(3);

impl Recorder for StatsdRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if names::is_go_counter(key.name()) {
            self.registry
                .get_or_create_counter(key, |counter| Counter::from_arc(Arc::clone(counter)))
        } else {
            Counter::noop()
        }
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        if names::is_go_timer(key.name()) {
            self.registry
                .get_or_create_histogram(key, |bucket| Histogram::from_arc(Arc::clone(bucket)))
        } else {
            Histogram::noop()
        }
    }
}

/// A counter's statsd name, what its lines end with (DogStatsD's tags), and the count last
/// sent.
struct Sent {
    name: String,
    tags: String,
    count: u64,
}

/// Sends the statistics: the counters that moved since the last flush that reached statsd (so
/// a flush that fails is sent with the next: nothing counted is lost while statsd is away),
/// and the timers' values.
struct Flusher {
    registry: Arc<Registry<Key, AtomicStorage>>,
    sink: sink::Sink,
    tags: ExtraTags,
    dog: Option<Dog>,
    sent: HashMap<Key, Sent>,
}

impl Flusher {
    /// Flushes every `interval`, and a last time when `last` is sent (or dropped).
    async fn run(mut self, interval: Duration, mut last: oneshot::Receiver<()>) {
        let mut every = tokio::time::interval(interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            tokio::select! {
                _ = every.tick() => self.flush().await,
                _ = &mut last => return self.flush().await,
            }
        }
    }

    async fn flush(&mut self) {
        let mut lines = String::new();
        let mut moved = Vec::new();
        let (sent, tags, dog) = (&mut self.sent, &self.tags, &self.dog);
        let name = |key: &Key| {
            let go = names::go_name(key, tags)?;
            Some(match dog {
                Some(dog) => dog.split(&go),
                None => (go, String::new()),
            })
        };
        self.registry.visit_counters(|key, counter| {
            let count = counter.load(Ordering::Relaxed);
            let entry = sent.entry(key.clone()).or_insert_with(|| {
                let (name, tags) = name(key).unwrap_or_default();
                Sent {
                    name,
                    tags,
                    count: 0,
                }
            });
            if count > entry.count && !entry.name.is_empty() {
                let delta = count - entry.count;
                let _ = writeln!(lines, "{}:{delta}|c{}", entry.name, entry.tags);
                moved.push((key.clone(), count));
            }
        });
        // Timers are sent once, as gostats sends them (one lost is not sent again).
        self.registry.visit_histograms(|key, bucket| {
            let Some((name, tags)) = name(key) else {
                return;
            };
            bucket.clear_with(|seconds| {
                for s in seconds {
                    // Into the lines themselves: one per call timed, no string of its own,
                    // pushed in parts, not formatted (`writeln!`: some 150 instructions a call).
                    lines.push_str(&name);
                    lines.push(':');
                    push_decimal(&mut lines, (s * 1000.0) as u64);
                    lines.push_str("|ms");
                    lines.push_str(&tags);
                    lines.push('\n');
                }
            });
        });
        if lines.is_empty() || self.sink.send(lines.as_bytes()).await.is_err() {
            return;
        }
        for (key, count) in moved {
            if let Some(entry) = self.sent.get_mut(&key) {
                entry.count = count;
            }
        }
    }
}

/// Appends `n` in decimal, as `write!(text, "{n}")` would.
fn push_decimal(text: &mut String, n: u64) {
    text.push_str(itoa::Buffer::new().format(n));
}

#[cfg(test)]
mod tests {
    use super::push_decimal;

    #[test]
    fn milliseconds_are_written_as_format_writes_them() {
        for n in [0, 7, 9, 10, 123, 1_000_000, u64::MAX] {
            let mut text = String::from("t:");
            push_decimal(&mut text, n);
            assert_eq!(text, format!("t:{n}"));
        }
    }
}
