//! What the benchmark harnesses share: the `--bench` guard, environment knobs, order
//! statistics, Redis `INFO` readers, CPU-time readers and a markdown table writer. One copy
//! here, so every harness parses, measures and reports the same way.
//!
//! Each bench target is a crate of its own and compiles this module separately (`mod support;`),
//! using only part of it: the rest would be dead code in that target.
#![allow(dead_code)]

#[cfg(feature = "redis")]
use std::collections::HashMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use redlimit::Key;

/// The `redis-server` the Redis harnesses start (a free loopback port, killed on drop): the
/// tests' copy, so benches and tests never disagree on how a server is started.
#[cfg(feature = "redis")]
#[path = "../../tests/it/support/redis_server.rs"]
pub(crate) mod redis_server;
/// At the path the tests' own helpers name it (`crate::support::RedisServer`), for the test
/// helpers a harness includes (`benches/acquire.rs`: `tests/it/limiter/run.rs`).
#[cfg(feature = "redis")]
#[allow(unused_imports)]
pub(crate) use redis_server::RedisServer;

/// The minimal one-`EVALSHA` middleware the layer on Redis is measured against
/// (`benches/http.rs`, `benches/layer_service.rs`).
#[cfg(feature = "redis")]
pub(crate) mod minimal;

/// The TCP proxy that puts Redis a network away (per-direction delay and jitter, freeze, black
/// hole): the tests' copy, so benches and tests measure the same distance.
#[cfg(feature = "redis")]
#[path = "../../tests/it/support/proxy.rs"]
pub(crate) mod proxy;

/// Syscalls and context switches per request over a window (`REDLIMIT_BENCH_SYSCALLS=1`).
pub(crate) mod syscalls;

/// `cargo`, to build a release binary a harness runs (`examples/server`, `redlimit-server`).
pub(crate) mod cargo;

/// Whether the target runs as a benchmark. `cargo test --all-targets` (and `--benches`) runs
/// every bench target once, without `--bench`, even those marked `test = false`; a load harness
/// must then stay quick, so it prints `note` (how to run it for real) and the caller returns.
pub(crate) fn bench_mode(note: &str) -> bool {
    let bench = std::env::args().any(|a| a == "--bench");
    if !bench {
        println!("{note}");
    }
    bench
}

/// The environment knob `name` parsed as `T`, or `default` when unset. A value that does not
/// parse stops the run with a message naming the knob: silently measuring with the default
/// would publish numbers for a configuration nobody asked for.
pub(crate) fn knob<T>(name: &str, default: T) -> T
where
    T: FromStr,
    T::Err: Display,
{
    optional_knob(name).unwrap_or(default)
}

/// [`knob`] with a range: a value outside it (`valid` says no) stops the run like one that does
/// not parse, before it can fail deep in a measurement (a zero-round median, a negative
/// `Duration`).
pub(crate) fn knob_where<T>(name: &str, default: T, expected: &str, valid: impl Fn(&T) -> bool) -> T
where
    T: FromStr + Display,
    T::Err: Display,
{
    let value = knob(name, default);
    if !valid(&value) {
        bad_knob(name, &value.to_string(), expected);
    }
    value
}

/// A duration knob in seconds (fractions allowed): positive and small enough for a `Duration`.
pub(crate) fn secs_knob(name: &str, default: f64) -> f64 {
    knob_where(name, default, "a positive number of seconds", |&secs| {
        secs > 0.0 && std::time::Duration::try_from_secs_f64(secs).is_ok()
    })
}

/// The environment knob `name` parsed as `T`, `None` when unset: for knobs whose absence means
/// something (all variants, the full report) rather than a default value.
pub(crate) fn optional_knob<T>(name: &str) -> Option<T>
where
    T: FromStr,
    T::Err: Display,
{
    match std::env::var(name) {
        Ok(text) => match text.parse() {
            Ok(value) => Some(value),
            Err(error) => bad_knob(
                name,
                &text,
                &format!("a {} ({error})", std::any::type_name::<T>()),
            ),
        },
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(text)) => {
            bad_knob(name, &text.to_string_lossy(), "UTF-8 text")
        }
    }
}

/// A comma-separated list knob (`1,10,30`), or `default` when unset; an empty list or an item
/// that does not parse (or that `valid` refuses) stops the run like any bad knob.
pub(crate) fn list_knob<T>(
    name: &str,
    default: &[T],
    expected: &str,
    valid: impl Fn(&T) -> bool,
) -> Vec<T>
where
    T: FromStr + Clone,
{
    let Some(text) = optional_knob::<String>(name) else {
        return default.to_vec();
    };
    let items: Option<Vec<T>> = text
        .split(',')
        .map(|item| item.trim().parse().ok().filter(&valid))
        .collect();
    match items {
        Some(items) if !items.is_empty() => items,
        _ => bad_knob(
            name,
            &text,
            &format!("a comma-separated list of {expected}"),
        ),
    }
}

/// `REDLIMIT_BENCH_RTTS`: the round trips to Redis to measure at, ms (0 to 1000), or
/// `default`.
pub(crate) fn rtts_knob(default: &[f64]) -> Vec<f64> {
    list_knob(
        "REDLIMIT_BENCH_RTTS",
        default,
        "round trips in ms (0 to 1000)",
        |ms: &f64| (0.0..=1000.0).contains(ms),
    )
}

/// `REDLIMIT_BENCH_CLIENTS`: the numbers of clients (calls in flight) to measure at, 1 to
/// 4096, or `default`.
pub(crate) fn clients_knob(default: &[usize]) -> Vec<usize> {
    list_knob(
        "REDLIMIT_BENCH_CLIENTS",
        default,
        "client counts (1 to 4096)",
        |c: &usize| (1..=4096).contains(c),
    )
}

/// `REDLIMIT_BENCH_ROUNDS`: how many rounds to take the median over (at least 1), or
/// `default`.
pub(crate) fn rounds_knob(default: usize) -> usize {
    knob_where("REDLIMIT_BENCH_ROUNDS", default, "at least 1 round", |&n| {
        n > 0
    })
}

/// `measure` for each of `variants` in turn, `rounds` times over (variants alternated, so a
/// slow spell of a shared machine spoils one round of each, not every round of one): each
/// variant's samples, in the variants' order.
pub(crate) fn by_rounds<V: Copy, S>(
    rounds: usize,
    variants: &[V],
    mut measure: impl FnMut(usize, V) -> S,
) -> Vec<Vec<S>> {
    let mut samples: Vec<Vec<S>> = variants.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for (i, &variant) in variants.iter().enumerate() {
            samples[i].push(measure(round, variant));
        }
    }
    samples
}

/// Stops the run over a bad knob: a one-line message and exit status 2, not a panic, whose
/// backtrace would bury the one thing to fix.
fn bad_knob(name: &str, value: &str, expected: &str) -> ! {
    eprintln!("error: environment variable {name}={value:?}: expected {expected}");
    std::process::exit(2)
}

/// The median of unsorted values, the upper one of an even count (what the published reports
/// used): robust to the one round a noisy shared machine spoils.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    percentile(&values, 0.5)
}

/// The value at quantile `q` (0 to 1) of `sorted` (ascending), by nearest rank on
/// `(len - 1) * q`, no interpolation: every reported latency is one that was measured.
pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of no values");
    debug_assert!(
        sorted.is_sorted_by(|a, b| a <= b),
        "percentile of unsorted values"
    );
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Today's date, `YYYY-MM-DD` (UTC), for the dated results files.
pub(crate) fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The machine a result was measured on, one line: cores, CPU model, load average now.
pub(crate) fn machine_line() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = cpu_model().unwrap_or_else(|| "unknown CPU".into());
    let load = load_average().unwrap_or_else(|| "unknown".into());
    format!("machine: nproc {cpus}, {model}; load average {load}")
}

/// The CPU's model name (`/proc/cpuinfo`), `None` where it cannot be read (not Linux).
pub(crate) fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
        .map(|(_, m)| m.trim().to_owned())
}

/// The load averages over 1, 5 and 15 minutes (`/proc/loadavg`), `None` where it cannot be
/// read.
pub(crate) fn load_average() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .ok()
}

/// Client key `i` of a synthetic population, `ip:10.x.y.z`: the shape (and so the key length,
/// which is most of a small Redis state) of a `PeerIp` key, identical across harnesses so their
/// numbers compare.
pub(crate) fn client_key(i: usize) -> Key {
    Key::new(format!("ip:10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255))
}

/// A `RedisStore` on `url` under `prefix`, as the layer's harnesses build it: the store's
/// defaults but for `REDLIMIT_BENCH_LINGER_MS` (the batcher's linger; 0 turns it off).
#[cfg(feature = "redis")]
pub(crate) async fn redis_store(url: &str, prefix: &str) -> redlimit::store::RedisStore {
    let builder = redlimit::store::RedisStore::builder(url).prefix(prefix);
    let builder = match optional_knob::<u64>("REDLIMIT_BENCH_LINGER_MS") {
        Some(ms) => builder.batch_linger(std::time::Duration::from_millis(ms)),
        None => builder,
    };
    builder.connect().await.expect("connect to the bench redis")
}

/// `INFO section` as `field -> value`: Redis's own account of its CPU, memory and commands,
/// independent of the client that drives it.
#[cfg(feature = "redis")]
pub(crate) fn redis_info(con: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

/// Redis's CPU time, user + system over all its threads, in seconds (`INFO cpu`): the cost of a
/// workload to Redis, steadier than throughput on a shared machine.
#[cfg(feature = "redis")]
pub(crate) fn redis_cpu_secs(con: &mut redis::Connection) -> f64 {
    let cpu = redis_info(con, "cpu");
    let field = |name: &str| -> f64 {
        cpu.get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("INFO cpu has no {name}"))
    };
    field("used_cpu_user") + field("used_cpu_sys")
}

/// Zeroes Redis's command statistics (`CONFIG RESETSTAT`), so [`command_stats`] counts one
/// measurement only.
#[cfg(feature = "redis")]
pub(crate) fn reset_redis_stats(con: &mut redis::Connection) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(con)
        .expect("CONFIG RESETSTAT");
}

/// One command's line of `INFO commandstats`.
#[cfg(feature = "redis")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct CommandStat {
    /// Times it ran; for commands a script runs, counted per `redis.call`.
    pub(crate) calls: u64,
    /// Server-side execution time, µs, summed over the calls.
    pub(crate) usec: u64,
}

/// `INFO commandstats` since the last reset, by lower-case command name (`evalsha`,
/// `script|load`), without the harness's own bookkeeping (`INFO`, `CONFIG`): what the workload
/// made Redis run, including the commands inside its scripts.
#[cfg(feature = "redis")]
pub(crate) fn command_stats(con: &mut redis::Connection) -> HashMap<String, CommandStat> {
    redis_info(con, "commandstats")
        .into_iter()
        .filter_map(|(name, stats)| {
            let name = name.strip_prefix("cmdstat_")?.to_owned();
            if name.starts_with("info") || name.starts_with("config") {
                return None;
            }
            let field = |f: &str| {
                stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(f)?.strip_prefix('='))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            let stat = CommandStat {
                calls: field("calls")?,
                usec: field("usec")?,
            };
            Some((name, stat))
        })
        .collect()
}

/// The `/proc` directory of the calling thread (`/proc/<pid>/task/<tid>`), for [`cpu_us`] from
/// another thread: the server's thread is the one whose cost a variant adds, while the load
/// generator shares the process. (`/proc/self` is the whole process.)
pub(crate) fn current_thread_proc() -> PathBuf {
    let task = std::fs::read_link("/proc/thread-self").unwrap_or_default();
    Path::new("/proc").join(task)
}

/// CPU time (user + system) used so far by the process or thread whose `/proc` directory is
/// `proc`, in µs; 0 where `/proc` is missing (not Linux). The kernel counts in clock ticks,
/// 10 ms at the usual 100 Hz: coarse, but plenty over seconds of load.
pub(crate) fn cpu_us(proc: &Path) -> f64 {
    let (user, system) = cpu_split_us(proc);
    user + system
}

/// [`cpu_us`] as user and system time apart: a server's system share is its syscalls
/// (reads, writes, wake-ups), which instruction counts do not see.
pub(crate) fn cpu_split_us(proc: &Path) -> (f64, f64) {
    let stat = std::fs::read_to_string(proc.join("stat")).unwrap_or_default();
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // After the command name: state is field 3, utime 14 and stime 15.
    let ticks = |i: usize| {
        fields
            .get(i - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(14) * 10_000.0, ticks(15) * 10_000.0)
}

/// Prints and keeps what a run reports: each line on stdout as it comes, and the whole for the
/// results file a full run appends to.
#[derive(Default)]
pub(crate) struct Report(pub(crate) String);

impl Report {
    /// Prints `text` and keeps it, a line.
    pub(crate) fn line(&mut self, text: impl AsRef<str>) {
        println!("{}", text.as_ref());
        self.0.push_str(text.as_ref());
        self.0.push('\n');
    }
}

/// A markdown table, written header first and then row by row (a harness prints each row as it
/// is measured, so a run cut short still shows what it got). Checks every row against the
/// header: a missing cell would shift every column after it without a word.
pub(crate) struct Table {
    header: Vec<&'static str>,
    /// Left-aligned columns (text); the others are right-aligned (numbers).
    left: Vec<bool>,
}

impl Table {
    /// A table with these column titles, the first left-aligned (it names the row), the others
    /// right-aligned (numbers).
    pub(crate) fn new(header: &[&'static str]) -> Self {
        let left = (0..header.len()).map(|i| i == 0).collect();
        Table {
            header: header.to_vec(),
            left,
        }
    }

    /// Left-aligns column `column` too (a text column among the numbers).
    pub(crate) fn left(mut self, column: usize) -> Self {
        self.left[column] = true;
        self
    }

    /// The title line and the alignment line, without a final newline.
    pub(crate) fn header(&self) -> String {
        let align: Vec<&str> = self
            .left
            .iter()
            .map(|&left| if left { "---" } else { "---:" })
            .collect();
        format!("| {} |\n|{}|", self.header.join(" | "), align.join("|"))
    }

    /// One row, without a final newline.
    pub(crate) fn row<I>(&self, cells: I) -> String
    where
        I: IntoIterator,
        I::Item: Display,
    {
        let cells: Vec<String> = cells.into_iter().map(|c| c.to_string()).collect();
        assert_eq!(
            cells.len(),
            self.header.len(),
            "a row of {} cells in a table of {} columns: {cells:?}",
            cells.len(),
            self.header.len()
        );
        format!("| {} |", cells.join(" | "))
    }
}
