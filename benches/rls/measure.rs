//! One cell of the comparison (a server at a round trip and a load, over all rounds) and one
//! measured load into it: the decisions and latencies, and the CPU the server, Redis, the load
//! generator and the proxy spent on them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::load::{self, Clients, Tally};
use crate::servers::{Kind, Server};
use crate::support::{self, Table, command_stats, redis_cpu_secs, reset_redis_stats, syscalls};
use crate::{open_loop, threads};

const WARM_UP: Duration = Duration::from_secs(1);
/// Envoy's default RLS timeout.
const ENVOY_TIMEOUT_US: u64 = 20_000;

/// One server at one round trip and concurrency, over all rounds.
pub(crate) struct Cell {
    pub(crate) kind: Kind,
    pub(crate) rtt_ms: f64,
    pub(crate) concurrency: usize,
    /// An open loop's calls started a second (`REDLIMIT_BENCH_RATES`), instead of a closed
    /// loop of `concurrency` calls in flight; kept apart from the closed loop's table, goals
    /// and picture.
    rate: Option<u64>,
    /// Users the calls cycle over.
    pub(crate) users: usize,
    pub(crate) tally: Tally,
    pub(crate) secs: f64,
    pub(crate) server_cpu_us: f64,
    pub(crate) redis_cpu_us: f64,
    /// This process's CPU in the measured windows: the load generator's and the proxy's.
    bench_cpu: threads::Split,
    /// Scripts (`EVALSHA`, `EVAL`, `FCALL`) Redis ran in the measured windows.
    scripts: u64,
    /// Redis's time in them (`usec` of `INFO commandstats`).
    script_usec: u64,
    /// The server's context switches in the measured windows (all its threads): voluntary
    /// (a thread went to sleep: a wake-up later) and not.
    switches: (u64, u64),
    /// Redis's voluntary context switches in them (its wake-ups).
    redis_switches: u64,
    /// Every command Redis ran in them, those inside scripts included.
    commands: u64,
    /// The exactness bursts.
    pub(crate) bursts: Vec<load::Burst>,
    /// The server's syscalls and context switches in the measured windows
    /// (`REDLIMIT_BENCH_SYSCALLS=1`).
    pub(crate) syscalls: Option<syscalls::Counts>,
    /// The decisions made while they were counted.
    pub(crate) syscall_decisions: u64,
}

impl Cell {
    pub(crate) fn new(
        kind: Kind,
        rtt_ms: f64,
        concurrency: usize,
        rate: Option<u64>,
        users: usize,
    ) -> Cell {
        Cell {
            kind,
            rtt_ms,
            concurrency,
            rate,
            users,
            tally: Tally::new(),
            secs: 0.0,
            server_cpu_us: 0.0,
            redis_cpu_us: 0.0,
            bench_cpu: threads::Split::default(),
            scripts: 0,
            script_usec: 0,
            switches: (0, 0),
            redis_switches: 0,
            commands: 0,
            bursts: Vec::new(),
            syscalls: None,
            syscall_decisions: 0,
        }
    }

    pub(crate) fn per_cpu_sec(&self) -> f64 {
        self.tally.decisions as f64 / ((self.server_cpu_us + self.redis_cpu_us) / 1e6)
    }

    pub(crate) fn p_ms(&self, q: f64) -> f64 {
        self.tally.latency.value_at_quantile(q) as f64 / 1e3
    }

    /// `256` (calls in flight), or `open 5000/s`.
    pub(crate) fn load_name(&self) -> String {
        match self.rate {
            Some(rate) => format!("open {rate}/s"),
            None => self.concurrency.to_string(),
        }
    }

    /// An open loop's offered calls a second.
    pub(crate) fn rate(&self) -> Option<u64> {
        self.rate
    }

    /// Server and Redis CPU per decision, µs.
    pub(crate) fn cpu_per_decision(&self) -> (f64, f64) {
        let n = self.tally.decisions.max(1) as f64;
        (self.server_cpu_us / n, self.redis_cpu_us / n)
    }

    /// An open loop's row of the per-rate table, against `peer` (Limitador's cell at the same
    /// round trip, rate and users) when there is one.
    pub(crate) fn open_row(&self, table: &Table, peer: Option<&Cell>) -> String {
        let n = self.tally.decisions.max(1) as f64;
        let (server, redis) = self.cpu_per_decision();
        let ratio = peer.map_or("–".into(), |p| {
            format!("{:.2}×", self.per_cpu_sec() / p.per_cpu_sec())
        });
        let script_us = if self.scripts == 0 {
            "–".into()
        } else {
            format!("{:.1}", self.script_usec as f64 / self.scripts as f64)
        };
        table.row([
            self.kind.name().to_owned(),
            format!("{}", self.rtt_ms),
            self.load_name(),
            format!("{}", self.users),
            format!("{:.0}", self.tally.decisions as f64 / self.secs),
            format!("{server:.1}"),
            format!("{redis:.1}"),
            format!("{:.1}", server + redis),
            ratio,
            format!("{:.2}", self.scripts as f64 / n),
            script_us,
            format!("{:.2}", self.script_usec as f64 / n),
            format!("{:.2}", self.switches.0 as f64 / n),
            format!("{:.2}", self.switches.1 as f64 / n),
            format!("{:.2}", self.redis_switches as f64 / n),
            format!("{:.2}", self.p_ms(0.5)),
            format!("{:.2}", self.p_ms(0.99)),
            format!("{}", self.tally.errors),
        ])
    }

    pub(crate) fn row(&self, table: &Table) -> String {
        let n = self.tally.decisions.max(1) as f64;
        let late = self.tally.decisions - self.tally.latency.count_between(0, ENVOY_TIMEOUT_US);
        table.row([
            self.kind.name().to_owned(),
            format!("{}", self.rtt_ms),
            self.load_name(),
            format!("{:.0}", self.tally.decisions as f64 / self.secs),
            format!("{:.1}", self.server_cpu_us / n),
            format!("{:.1}", self.redis_cpu_us / n),
            format!("{:.1}", self.bench_cpu.client_us / n),
            format!(
                "{:.1}",
                (self.bench_cpu.proxy_us + self.bench_cpu.other_us()) / n
            ),
            format!("{:.2}", self.scripts as f64 / n),
            format!("{:.2}", self.commands as f64 / n),
            format!("{:.0}", self.per_cpu_sec()),
            format!("{:.2}", self.p_ms(0.5)),
            format!("{:.2}", self.p_ms(0.99)),
            format!("{:.2}", 100.0 * late as f64 / n),
            format!("{}", self.tally.errors),
        ])
    }
}

/// Sleeps past a minute's edge when one is under 3 s away: a clock-aligned window restarting
/// mid-burst admits a second allowance, rightly.
pub(crate) fn clear_of_minute_edge() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let into = now % 60.0;
    if into > 57.0 {
        std::thread::sleep(Duration::from_secs_f64(60.5 - into));
    }
}

/// The p50 of sequential `PING`s through `port`, ms: the round trip the proxy really gives.
pub(crate) fn ping_ms(port: u16) -> f64 {
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .and_then(|c| c.get_connection())
        .expect("connect through the proxy");
    let took = (0..11)
        .map(|_| {
            let started = Instant::now();
            let _: String = redis::cmd("PING").query(&mut con).expect("PING");
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    support::median(took)
}

pub(crate) fn flushall(con: &mut redis::Connection) {
    redis::cmd("FLUSHALL").exec(con).expect("FLUSHALL");
}

/// One measured load: `concurrency` calls in flight on `server` for warm-up plus `secs`.
pub(crate) fn measure(
    runtime: &tokio::runtime::Runtime,
    con: &mut redis::Connection,
    server: &Server,
    clients: &Clients,
    cell: &mut Cell,
    secs: f64,
) {
    let users = cell.users;
    flushall(con);
    let measure_from = Instant::now() + WARM_UP;
    let end = measure_from + Duration::from_secs_f64(secs);
    let decided = Arc::new(AtomicU64::new(0));
    let (tally, server_cpu, redis_cpu, bench_cpu, stats) = runtime.block_on(async {
        let load = {
            let clients = clients.clone();
            let (concurrency, rate) = (cell.concurrency, cell.rate);
            let decided = Arc::clone(&decided);
            tokio::spawn(async move {
                match rate {
                    Some(rate) => {
                        open_loop::run(&clients, rate, users, measure_from, end, &decided).await
                    }
                    None => {
                        load::run(&clients, concurrency, users, measure_from, end, &decided).await
                    }
                }
            })
        };
        tokio::time::sleep_until(measure_from.into()).await;
        reset_redis_stats(con);
        let (cpu0, redis0) = (server.cpu_split_us(), redis_cpu_secs(con));
        let switches0 = server.context_switches();
        let redis_pid: u32 = support::redis_info(con, "server")
            .get("process_id")
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let redis_switches0 = crate::servers::context_switches(redis_pid).0;
        let bench0 = threads::Split::now();
        // Counted apart from the CPU time, over the part of the window perf attached for
        // (blocking work off the client's thread, which keeps the load going).
        let window = if syscalls::wanted() {
            let pid = server.pid();
            let window = tokio::task::spawn_blocking(move || syscalls::Window::start(pid, None));
            Some((
                window.await.expect("perf attached"),
                decided.load(Ordering::Relaxed),
            ))
        } else {
            None
        };
        tokio::time::sleep_until(end.into()).await;
        let counted = match window {
            Some((window, decided0)) => {
                let decisions = decided.load(Ordering::Relaxed) - decided0;
                let counts = tokio::task::spawn_blocking(move || window.stop());
                Some((counts.await.expect("perf stopped"), decisions))
            }
            None => None,
        };
        let (cpu1, redis1) = (server.cpu_split_us(), redis_cpu_secs(con));
        let switches1 = server.context_switches();
        cell.redis_switches += crate::servers::context_switches(redis_pid)
            .0
            .saturating_sub(redis_switches0);
        cell.switches.0 += switches1.0.saturating_sub(switches0.0);
        cell.switches.1 += switches1.1.saturating_sub(switches0.1);
        let bench_cpu = threads::Split::now().since(&bench0);
        let stats = command_stats(con);
        let tally = load.await.expect("the load");
        if let Some((counts, decisions)) = counted {
            eprintln!(
                "  {} per decision: {}",
                cell.kind.name(),
                counts.per(decisions)
            );
            cell.syscalls
                .get_or_insert_with(syscalls::Counts::default)
                .merge(&counts);
            cell.syscall_decisions += decisions;
        }
        let (user, system) = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
        eprintln!(
            "  {} server CPU: {:.0} % system",
            cell.kind.name(),
            100.0 * system / (user + system).max(1.0)
        );
        let n = tally.decisions.max(1) as f64;
        eprintln!(
            "  CPU µs per decision: server {:.1}, Redis {:.1}, load generator {:.1}, proxy {:.1}, \
             rest of the bench {:.1}",
            (user + system) / n,
            (redis1 - redis0) * 1e6 / n,
            bench_cpu.client_us / n,
            bench_cpu.proxy_us / n,
            bench_cpu.other_us() / n,
        );
        (
            tally,
            user + system,
            (redis1 - redis0) * 1e6,
            bench_cpu,
            stats,
        )
    });
    let mut top: Vec<_> = stats.iter().map(|(n, s)| (s.calls, n.as_str())).collect();
    top.sort_unstable_by(|a, b| b.cmp(a));
    top.truncate(6);
    eprintln!("  Redis commands: {top:?}");
    for (name, stat) in stats {
        if [
            "evalsha",
            "eval",
            "fcall",
            "evalsha_ro",
            "eval_ro",
            "fcall_ro",
        ]
        .contains(&name.as_str())
        {
            cell.scripts += stat.calls;
            cell.script_usec += stat.usec;
        }
        cell.commands += stat.calls;
    }
    cell.tally.merge(&tally);
    cell.secs += secs;
    cell.server_cpu_us += server_cpu;
    cell.redis_cpu_us += redis_cpu;
    cell.bench_cpu.add(&bench_cpu);
}
