//! Local-first mode on real instances: three `examples/server` processes (release build) on
//! one `redis-server`, loaded by `wrk`, each figure measured beside exact mode (the same
//! servers without `--sync-ms`) in the same run.
//!
//! ```text
//! cargo bench --bench local_first_fleet            # ~3 minutes once built; needs wrk
//! REDLIMIT_BENCH_SECS=3 REDLIMIT_BENCH_OVERLOADS=3,3300 REDLIMIT_BENCH_KEYS=1000 \
//!   REDLIMIT_BENCH_SPARSE_KEYS=10000 cargo bench --bench local_first_fleet
//! ```
//!
//! The bench builds the server itself (`cargo build --release --features admin --example
//! server`), starts `redis-server` on a free port, and for every measurement starts three
//! servers afresh (`FLUSHALL` and a new `--prefix` first, so no state carries over) and one
//! `wrk` per server, all at once. Answers are counted by status in wrk's Lua `response`
//! callback. Three parts:
//!
//! 1. **A hot global key** (`--key global`, GCRA `N/1s`: a burst of `N`, `N` per second). A
//!    calibration round per mode (`REDLIMIT_BENCH_CALIBRATE_SECS`, default 4 s, a limit never
//!    reached) measures the rate the three servers answer at with 8 connections each; each
//!    overload `X` of `REDLIMIT_BENCH_OVERLOADS` (default `0.8,1,3,34,330,3300`) then sets
//!    `N` = that rate ÷ `X` and runs `REDLIMIT_BENCH_SECS` (default 10 s). From 1× up the
//!    load is that flood (the overload is then what the machine offers); below 1× it is paced
//!    at `X × N` at most (connections that wait 10 ms after each answer; the machine falls
//!    short of that rate, never over it): "no false denial" means something only when the
//!    offered rate really is under the limit, and a flood's rate swings by a third between
//!    runs on this shared machine. Reported: the overload actually
//!    offered (answers per second ÷ `N`: a denial is cheaper than an admission, so a flood
//!    offers more than `X` at high overloads), admitted ÷ the ideal
//!    (`min(answers, N + N × elapsed)`, elapsed being the wall time from the first wrk's start
//!    to the last one's exit), the denials, and the cost columns below.
//! 2. **A per-key limit** (`--key header:x-api-key`, 5/1h) over `REDLIMIT_BENCH_KEYS` (default
//!    10 000) keys: each server's wrk (8 connections) walks every key in the same order, 4
//!    requests per key in a row, so each key gets 12 requests from three instances at about
//!    the same time. Reported: how many keys were admitted 4, 5, 6 times and otherwise.
//! 3. **Sparse keys** (`--key header:x-api-key`, 10/1s, never reached) over
//!    `REDLIMIT_BENCH_SPARSE_KEYS` (default 100 000) keys: each server's wrk walks every key
//!    once, starting a third of the key space apart, so each key is seen three times, once by
//!    each instance, seconds apart.
//!
//! The cost columns: answers per second; the servers' CPU per request (`utime + stime` delta
//! of the three processes ÷ answers); Redis's (`used_cpu_user + used_cpu_sys` delta ÷
//! answers); the scripts (`EVALSHA`, `EVAL`) Redis ran per answer, and every command it ran
//! per answer, those inside scripts included (`INFO commandstats`). `REDLIMIT_BENCH_SYNC_MS`
//! (default 100) is local-first mode's sync interval; `REDLIMIT_BENCH_ONLY=hot,per-key,sparse`
//! runs a subset of the parts.

mod support;

#[path = "local_first_fleet/fleet.rs"]
mod fleet;
#[path = "local_first_fleet/wrk.rs"]
mod wrk;

use std::path::PathBuf;

use fleet::Fleet;
use support::redis_server::RedisServer;
use support::{Table, command_stats, redis_cpu_secs, reset_redis_stats};
use wrk::{Answers, Load};

const INSTANCES: usize = 3;
const CONNECTIONS: usize = 8;
/// The per-key limit of part 2, `PER_KEY_LIMIT` per hour.
const PER_KEY_LIMIT: u64 = 5;
/// Requests per key from each instance in part 2.
const PER_KEY_REPEAT: u64 = 4;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Exact,
    LocalFirst,
}

impl Mode {
    const BOTH: [Mode; 2] = [Mode::Exact, Mode::LocalFirst];

    fn name(self) -> &'static str {
        match self {
            Mode::Exact => "exact",
            Mode::LocalFirst => "local-first",
        }
    }
}

/// One load on a fresh fleet: its answers and what they cost.
struct Measured {
    answers: Answers,
    elapsed: f64,
    server_cpu_us: f64,
    redis_cpu_us: f64,
    scripts: u64,
    commands: u64,
}

impl Measured {
    /// The cost columns: answers per second, server and Redis CPU µs per answer, scripts and
    /// commands per answer.
    fn cost_cells(&self) -> [String; 5] {
        let n = self.answers.total().max(1) as f64;
        [
            format!("{:.0}", n / self.elapsed),
            format!("{:.2}", self.server_cpu_us / n),
            format!("{:.3}", self.redis_cpu_us / n),
            format!("{:.4}", self.scripts as f64 / n),
            format!("{:.4}", self.commands as f64 / n),
        ]
    }
}

const COST_HEADER: [&str; 5] = [
    "answers/s",
    "server CPU µs/req",
    "Redis CPU µs/req",
    "Redis scripts/req",
    "Redis commands/req",
];

struct Bench {
    binary: PathBuf,
    redis: RedisServer,
    con: redis::Connection,
    sync_ms: u64,
    runs: usize,
}

impl Bench {
    /// Starts a fresh fleet in `mode` with `policy` flags, runs `load` on it, and measures.
    fn measure(&mut self, mode: Mode, policy: &[&str], load: &Load) -> Measured {
        redis::cmd("FLUSHALL")
            .exec(&mut self.con)
            .expect("FLUSHALL");
        self.runs += 1;
        let mut args: Vec<String> = vec![
            "--redis".into(),
            self.redis.url(),
            "--prefix".into(),
            format!("fleet{}", self.runs),
            "--algorithm".into(),
            "gcra".into(),
        ];
        args.extend(policy.iter().map(|&a| a.to_owned()));
        if mode == Mode::LocalFirst {
            args.extend(["--sync-ms".to_owned(), self.sync_ms.to_string()]);
        }
        let fleet = Fleet::start(&self.binary, INSTANCES, &args);
        reset_redis_stats(&mut self.con);
        let redis_before = redis_cpu_secs(&mut self.con);
        let cpu_before = fleet.cpu_us();
        let (answers, elapsed) = wrk::run(&fleet.addrs, load);
        let server_cpu_us = fleet.cpu_us() - cpu_before;
        let redis_cpu_us = (redis_cpu_secs(&mut self.con) - redis_before) * 1e6;
        let stats = command_stats(&mut self.con);
        drop(fleet);
        let calls = |names: &[&str]| -> u64 {
            names
                .iter()
                .filter_map(|n| stats.get(*n))
                .map(|s| s.calls)
                .sum()
        };
        assert_eq!(
            answers.server_errors + answers.other,
            0,
            "{}: answers other than 200 and 429",
            mode.name()
        );
        Measured {
            scripts: calls(&["evalsha", "eval", "evalsha_ro", "eval_ro"]),
            commands: stats.values().map(|s| s.calls).sum(),
            answers,
            elapsed,
            server_cpu_us,
            redis_cpu_us,
        }
    }

    /// Part 1: the hot global key at each overload.
    fn hot_key(&mut self, secs: u64, calibrate_secs: u64, overloads: &[f64]) {
        let flood = |secs| Load::Flood {
            secs,
            connections: CONNECTIONS,
        };
        let mut rates = Vec::new();
        for mode in Mode::BOTH {
            let m = self.measure(
                mode,
                &["--limit", "1000000/1s", "--key", "global"],
                &flood(calibrate_secs),
            );
            let rate = m.answers.total() as f64 / m.elapsed;
            eprintln!("calibration, {}: {rate:.0} answers/s", mode.name());
            rates.push(rate);
        }
        println!(
            "\n### A hot global key\n\nCalibration ({calibrate_secs} s, everything admitted): \
             exact {:.0} answers/s, local-first {:.0} answers/s.\n",
            rates[0], rates[1]
        );
        let mut header = vec![
            "overload",
            "mode",
            "limit N/1s",
            "offered ÷ N",
            "admitted",
            "ideal",
            "admitted ÷ ideal",
            "denied",
        ];
        header.extend(COST_HEADER);
        let table = Table::new(&header).left(1);
        println!("{}", table.header());
        for &overload in overloads {
            for (mode, rate) in Mode::BOTH.into_iter().zip(&rates) {
                let n = (rate / overload).round().max(1.0) as u64;
                let limit = format!("{n}/1s");
                let load = if overload < 1.0 {
                    Load::Paced {
                        secs,
                        per_server: n as f64 * overload / INSTANCES as f64,
                    }
                } else {
                    flood(secs)
                };
                let m = self.measure(mode, &["--limit", &limit, "--key", "global"], &load);
                let answers = m.answers.total() as f64;
                let ideal = answers.min(n as f64 * (1.0 + m.elapsed));
                let mut cells = vec![
                    format!("{overload}×{}", if overload < 1.0 { " paced" } else { "" }),
                    mode.name().to_owned(),
                    n.to_string(),
                    format!("{:.2}", answers / m.elapsed / n as f64),
                    m.answers.ok.to_string(),
                    format!("{ideal:.0}"),
                    format!("{:.3}", m.answers.ok as f64 / ideal),
                    m.answers.limited.to_string(),
                ];
                cells.extend(m.cost_cells());
                println!("{}", table.row(cells));
            }
        }
    }

    /// Part 2: a per-key limit over many keys, each key's requests spread over the fleet.
    fn per_key(&mut self, keys: u64) {
        println!(
            "\n### A per-key limit over {keys} keys\n\nGCRA {PER_KEY_LIMIT}/1h by `x-api-key`; \
             each key gets {PER_KEY_REPEAT} requests in a row from each of the {INSTANCES} \
             instances at about the same time.\n"
        );
        let mut header = vec![
            "mode",
            "answers",
            "keys admitted 4",
            "5",
            "6",
            "other",
            "fewest",
            "most",
        ];
        header.extend(COST_HEADER);
        let table = Table::new(&header);
        println!("{}", table.header());
        let limit = format!("{PER_KEY_LIMIT}/1h");
        let load = Load::Sweep {
            keys,
            repeat: PER_KEY_REPEAT,
            threads: CONNECTIONS,
            staggered: false,
        };
        for mode in Mode::BOTH {
            let m = self.measure(
                mode,
                &["--limit", &limit, "--key", "header:x-api-key"],
                &load,
            );
            let mut by_count = [0u64; 4];
            let (mut fewest, mut most) = (u64::MAX, 0);
            for key in 0..keys {
                let admitted = m.answers.admitted.get(&key).copied().unwrap_or(0);
                fewest = fewest.min(admitted);
                most = most.max(admitted);
                let slot = match admitted {
                    a if a + 1 == PER_KEY_LIMIT => 0,
                    a if a == PER_KEY_LIMIT => 1,
                    a if a == PER_KEY_LIMIT + 1 => 2,
                    _ => 3,
                };
                by_count[slot] += 1;
            }
            let mut cells = vec![mode.name().to_owned(), m.answers.total().to_string()];
            cells.extend(by_count.iter().map(u64::to_string));
            cells.extend([fewest.to_string(), most.to_string()]);
            cells.extend(m.cost_cells());
            println!("{}", table.row(cells));
        }
    }

    /// Part 3: sparse keys, each seen once by each instance.
    fn sparse(&mut self, keys: u64) {
        println!(
            "\n### Sparse keys: {keys} keys, each seen once by each of the {INSTANCES} \
             instances\n\nGCRA 10/1s by `x-api-key` (never reached).\n"
        );
        let mut header = vec!["mode", "answers", "denied"];
        header.extend(COST_HEADER);
        let table = Table::new(&header);
        println!("{}", table.header());
        let load = Load::Sweep {
            keys,
            repeat: 1,
            threads: CONNECTIONS,
            staggered: true,
        };
        for mode in Mode::BOTH {
            let m = self.measure(
                mode,
                &["--limit", "10/1s", "--key", "header:x-api-key"],
                &load,
            );
            let mut cells = vec![
                mode.name().to_owned(),
                m.answers.total().to_string(),
                m.answers.limited.to_string(),
            ];
            cells.extend(m.cost_cells());
            println!("{}", table.row(cells));
        }
    }
}

fn main() {
    if !support::bench_mode(
        "local-first fleet benchmark: run with `cargo bench --bench local_first_fleet`",
    ) {
        return;
    }
    let secs: u64 = support::knob_where("REDLIMIT_BENCH_SECS", 10, "at least 1 s", |&s| s > 0);
    let calibrate_secs: u64 =
        support::knob_where("REDLIMIT_BENCH_CALIBRATE_SECS", 4, "at least 1 s", |&s| {
            s > 0
        });
    let overloads = support::list_knob(
        "REDLIMIT_BENCH_OVERLOADS",
        &[0.8, 1.0, 3.0, 34.0, 330.0, 3300.0],
        "positive overloads",
        |&x: &f64| x > 0.0 && x.is_finite(),
    );
    let keys: u64 = support::knob_where(
        "REDLIMIT_BENCH_KEYS",
        10_000,
        "at least as many keys as connections",
        |&k| k >= CONNECTIONS as u64,
    );
    let sparse_keys: u64 = support::knob_where(
        "REDLIMIT_BENCH_SPARSE_KEYS",
        100_000,
        "at least as many keys as connections",
        |&k| k >= CONNECTIONS as u64,
    );
    let sync_ms: u64 =
        support::knob_where("REDLIMIT_BENCH_SYNC_MS", 100, "at least 1 ms", |&ms| ms > 0);
    let parts = ["hot", "per-key", "sparse"].map(String::from);
    let only = support::list_knob("REDLIMIT_BENCH_ONLY", &parts, "hot, per-key, sparse", |p| {
        parts.contains(p)
    });
    let binary = fleet::server_binary();
    let redis = RedisServer::start();
    let con = redis.connection();
    let mut bench = Bench {
        binary,
        redis,
        con,
        sync_ms,
        runs: 0,
    };
    println!(
        "{} UTC; {}; {INSTANCES} servers, wrk {CONNECTIONS} connections each, local-first \
         syncing every {sync_ms} ms",
        support::today(),
        support::machine_line()
    );
    if only.iter().any(|p| p == "hot") {
        bench.hot_key(secs, calibrate_secs, &overloads);
    }
    if only.iter().any(|p| p == "per-key") {
        bench.per_key(keys);
    }
    if only.iter().any(|p| p == "sparse") {
        bench.sparse(sparse_keys);
    }
    println!("\nat the end: {}", support::machine_line());
}
