//! Envoy's rate limit service side by side: our `redlimit-server` against Kuadrant's Limitador,
//! both real processes on one `redis-server`, driven by the same gRPC client in the same run.
//!
//! ```text
//! cargo bench --features rls,redis --bench rls     # ~3 minutes once built; writes docs/bench/rls.md and .svg
//! REDLIMIT_BENCH_SECS=2 REDLIMIT_BENCH_ROUNDS=1 cargo bench --features rls,redis --bench rls
//! ```
//!
//! The bench builds our server (`cargo build --release -p redlimit-server`, the same target
//! directory) and runs Limitador's prebuilt `limitador-server` (`REDLIMIT_BENCH_LIMITADOR`, else
//! `../shared/peers/limitador/limitador-server` from the repository root; without it, ours
//! runs alone and the comparison is skipped with a message). Both get equivalent limits: domain
//! `bench`, one counter per value of the descriptor entry `user`, 10^9 an hour (never reached);
//! domain `small`, 3 per minute per `user` (ours in envoyproxy/ratelimit's YAML with its
//! default fixed window; Limitador's `limits.yaml` beside its binary).
//!
//! For each round trip to Redis (`REDLIMIT_BENCH_RTTS`, ms: 0 is loopback, else the tests'
//! delaying proxy, `tests/it/support/proxy.rs`, on a runtime of its own, with both servers
//! pointed at it), both servers are started afresh, then:
//!
//! 1. **Exactness**: first five calls in a row on domain `small` per server (each server's
//!    reading of the limit: `OK OK OK OVER OVER`), then for each concurrency of
//!    `REDLIMIT_BENCH_CLIENTS`, `REDLIMIT_BENCH_BURSTS` bursts of that many `ShouldRateLimit`
//!    calls at once on domain `small` for one fresh user each; exact is 3 admitted per burst. Bursts keep clear of a minute's edge, where ours'
//!    clock-aligned window would rightly admit 3 more.
//! 2. **Load**: `REDLIMIT_BENCH_ROUNDS` rounds; in each, for each concurrency, each server in
//!    turn (`FLUSHALL` first) gets that many calls in flight on domain `bench`, users cycling
//!    over `REDLIMIT_BENCH_USERS`, for 1 s of warm-up and `REDLIMIT_BENCH_SECS` measured.
//!    Reported, summed over rounds: decisions per second; the server's CPU per decision
//!    (`utime + stime` from `/proc/PID/stat`); Redis's (`INFO cpu`); decisions per CPU-second
//!    of server and Redis together; this process's own, the load generator's and the proxy's
//!    (`rls/threads.rs`: they share the two cores with the server, and in a closed loop at 256
//!    in flight what they take sets the latency); p50/p99 latency (hdrhistogram) and the share
//!    over Envoy's 20 ms default timeout; calls that failed.
//!
//! With `REDLIMIT_BENCH_RATES` (calls a second, e.g. `2000,5000`; none by default), each
//! server also gets, per rate and after the closed loops of each round, an **open loop**
//! (`rls/open_loop.rs`): calls started on a schedule whatever the answers, as Envoy's traffic
//! arrives, timed from each call's start; its rows (`open 5000/s`) join the load table and its
//! p99 against 20 ms joins the goals, beside the closed loop's (the picture keeps the closed
//! loop only). A closed loop's latency at 256 in flight is 256 ÷ its throughput, which the
//! bench's own CPU helps set on shared cores; an open loop's is the server's and Redis's at
//! that offered rate.
//!
//! With `REDLIMIT_BENCH_SYSCALLS=1`, each server's syscalls by kind (`perf trace -s`) and
//! context switches per decision in the measured windows, as counts hold on a busy machine
//! (`support/syscalls.rs`; tracing slows the server a little: read its CPU columns then as
//! rough).
//!
//! Our server's environment is cleared but for the bench's settings and
//! `REDLIMIT_BENCH_OURS_ENV` (`NAME=VALUE ...`), e.g. `TOKIO_WORKER_THREADS=1`.
//!
//! The client is ours: bare gRPC unary calls on `h2` with our generated messages
//! (`redlimit::rls::proto`, each user's request encoded once per load), four HTTP/2
//! connections per server, on a single-threaded runtime in this process; its CPU is counted
//! for neither server, but reported beside them. Everything shares the machine's cores: compare
//! CPU per decision, which holds steady, more than decisions per second, which does not.

mod support;

#[path = "rls/load.rs"]
mod load;
#[path = "rls/open_loop.rs"]
mod open_loop;
#[path = "rls/plot.rs"]
mod plot;
#[path = "rls/report.rs"]
mod report;
#[path = "rls/servers.rs"]
mod servers;
#[path = "rls/threads.rs"]
mod threads;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use load::{Clients, Tally};
use report::{goals, open_goals, write_results};
use servers::{Kind, Server};
use support::proxy::Proxy;
use support::redis_server::RedisServer;
use support::{Report, Table, command_stats, redis_cpu_secs, reset_redis_stats, syscalls};

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
    pub(crate) tally: Tally,
    pub(crate) secs: f64,
    pub(crate) server_cpu_us: f64,
    pub(crate) redis_cpu_us: f64,
    /// This process's CPU in the measured windows: the load generator's and the proxy's.
    bench_cpu: threads::Split,
    /// Scripts (`EVALSHA`, `EVAL`, `FCALL`) Redis ran in the measured windows.
    scripts: u64,
    /// Every command Redis ran in them, those inside scripts included.
    commands: u64,
    /// The exactness bursts.
    pub(crate) bursts: Vec<load::Burst>,
    /// The server's syscalls and context switches in the measured windows
    /// (`REDLIMIT_BENCH_SYSCALLS=1`).
    syscalls: Option<syscalls::Counts>,
    /// The decisions made while they were counted.
    syscall_decisions: u64,
}

impl Cell {
    fn new(kind: Kind, rtt_ms: f64, concurrency: usize, rate: Option<u64>) -> Cell {
        Cell {
            kind,
            rtt_ms,
            concurrency,
            rate,
            tally: Tally::new(),
            secs: 0.0,
            server_cpu_us: 0.0,
            redis_cpu_us: 0.0,
            bench_cpu: threads::Split::default(),
            scripts: 0,
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
fn clear_of_minute_edge() {
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
fn ping_ms(port: u16) -> f64 {
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

fn flushall(con: &mut redis::Connection) {
    redis::cmd("FLUSHALL").exec(con).expect("FLUSHALL");
}

/// One measured load: `concurrency` calls in flight on `server` for warm-up plus `secs`.
fn measure(
    runtime: &tokio::runtime::Runtime,
    con: &mut redis::Connection,
    server: &Server,
    clients: &Clients,
    cell: &mut Cell,
    users: usize,
    secs: f64,
) {
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
        }
        cell.commands += stat.calls;
    }
    cell.tally.merge(&tally);
    cell.secs += secs;
    cell.server_cpu_us += server_cpu;
    cell.redis_cpu_us += redis_cpu;
    cell.bench_cpu.add(&bench_cpu);
}

fn main() {
    if !support::bench_mode(
        "rls benchmark: run with `cargo bench --features rls,redis --bench rls`",
    ) {
        return;
    }
    let secs = support::secs_knob("REDLIMIT_BENCH_SECS", 5.0);
    let rounds = support::knob_where(
        "REDLIMIT_BENCH_ROUNDS",
        2,
        "1 to 100 rounds",
        |r: &usize| (1..=100).contains(r),
    );
    let rtts = support::list_knob(
        "REDLIMIT_BENCH_RTTS",
        &[0.0, 10.0],
        "round trips in ms (0 to 1000)",
        |ms: &f64| (0.0..=1000.0).contains(ms),
    );
    let concurrencies = support::list_knob(
        "REDLIMIT_BENCH_CLIENTS",
        &[16, 256],
        "concurrencies (1 to 4096)",
        |c: &usize| (1..=4096).contains(c),
    );
    let users = support::knob_where(
        "REDLIMIT_BENCH_USERS",
        1000,
        "at least 1 user",
        |&u: &usize| u > 0,
    );
    let rates = support::list_knob(
        "REDLIMIT_BENCH_RATES",
        &[],
        "open-loop calls a second (1 to 1 000 000)",
        |r: &u64| (1..=1_000_000).contains(r),
    );
    let bursts = support::knob_where(
        "REDLIMIT_BENCH_BURSTS",
        5,
        "1 to 1000 bursts",
        |b: &usize| (1..=1000).contains(b),
    );

    let limitador = servers::limitador_binary()
        .map_err(|reason| println!("skipping Limitador: {reason}"))
        .ok();
    let ours = servers::build_ours();
    let redis = RedisServer::start();
    let mut con = redis.connection();
    let proxies = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(threads::PROXY_THREADS)
        .enable_all()
        .build()
        .expect("the proxies' runtime");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the client runtime");
    let started = Instant::now();
    let load_table = Table::new(&[
        "server",
        "RTT ms",
        "in flight",
        "decisions/s",
        "server CPU µs/dec",
        "Redis CPU µs/dec",
        "load gen CPU µs/dec",
        "proxy CPU µs/dec",
        "Redis scripts/dec",
        "Redis commands/dec",
        "decisions per CPU-s",
        "p50 ms",
        "p99 ms",
        "> 20 ms %",
        "errors",
    ]);
    let mut report = Report::default();
    let mut cells: Vec<Cell> = Vec::new();
    // The open loops' cells (`REDLIMIT_BENCH_RATES`), kept out of the picture.
    let mut open: Vec<Cell> = Vec::new();
    for &rtt_ms in &rtts {
        let proxy = (rtt_ms > 0.0).then(|| {
            proxies.block_on(Proxy::with_rtt(
                redis.port(),
                Duration::from_secs_f64(rtt_ms / 1e3),
            ))
        });
        let port = proxy.as_ref().map_or(redis.port(), Proxy::port);
        let measured_rtt = ping_ms(port);
        let mut running = vec![servers::start_ours(&ours, port)];
        if let Some(binary) = &limitador {
            running.push(servers::start_limitador(binary, port));
        }
        let clients: Vec<Clients> = running
            .iter()
            .map(|server| {
                runtime.block_on(async {
                    let clients = Clients::connect(&server.grpc).await;
                    load::ready(&clients).await;
                    clients
                })
            })
            .collect();
        report.line(format!(
            "\n### Redis {rtt_ms} ms away (PING p50 {measured_rtt:.2} ms)\n"
        ));
        let first = cells.len();
        for &concurrency in &concurrencies {
            for server in &running {
                cells.push(Cell::new(server.kind, rtt_ms, concurrency, None));
            }
        }
        let cell_of = |c: usize, s: usize| first + c * running.len() + s;
        let first_open = open.len();
        for &rate in &rates {
            for server in &running {
                open.push(Cell::new(server.kind, rtt_ms, 0, Some(rate)));
            }
        }

        // Each server's reading of the limit, one call at a time, before any burst.
        for (si, server) in running.iter().enumerate() {
            clear_of_minute_edge();
            let user = format!("in-a-row-{}-{rtt_ms}", server.kind.name());
            let codes = runtime.block_on(load::in_a_row(&clients[si], &user));
            report.line(format!(
                "- {}: five calls in a row on `small` (3 a minute): {codes}",
                server.kind.name()
            ));
        }
        report.line("");

        for (ci, &concurrency) in concurrencies.iter().enumerate() {
            for (si, server) in running.iter().enumerate() {
                flushall(&mut con);
                let cell = &mut cells[cell_of(ci, si)];
                for b in 0..bursts {
                    clear_of_minute_edge();
                    let user = format!("burst-{}-{concurrency}-{b}", server.kind.name());
                    let burst = runtime.block_on(load::burst(&clients[si], concurrency, &user));
                    cell.bursts.push(burst);
                }
            }
        }
        for _ in 0..rounds {
            for (ci, _) in concurrencies.iter().enumerate() {
                for (si, server) in running.iter().enumerate() {
                    let cell = &mut cells[cell_of(ci, si)];
                    measure(&runtime, &mut con, server, &clients[si], cell, users, secs);
                    eprintln!(
                        "  {} rtt {rtt_ms} ms, {} in flight: {} decisions so far",
                        server.kind.name(),
                        cell.concurrency,
                        cell.tally.decisions
                    );
                }
            }
            for ri in 0..rates.len() {
                for (si, server) in running.iter().enumerate() {
                    let cell = &mut open[first_open + ri * running.len() + si];
                    measure(&runtime, &mut con, server, &clients[si], cell, users, secs);
                    eprintln!(
                        "  {} rtt {rtt_ms} ms, {}: {} decisions so far",
                        server.kind.name(),
                        cell.load_name(),
                        cell.tally.decisions
                    );
                }
            }
        }
        report.line(load_table.header());
        for cell in cells[first..].iter().chain(&open[first_open..]) {
            report.line(cell.row(&load_table));
        }
        report.line("");
        for cell in &cells[first..] {
            if let Some(counts) = &cell.syscalls {
                report.line(format!(
                    "- {} at {} in flight, per decision: {}",
                    cell.kind.name(),
                    cell.concurrency,
                    counts.per(cell.syscall_decisions)
                ));
            }
        }
        report.line("");
        let exact_table = Table::new(&[
            "server",
            "RTT ms",
            "burst",
            "admitted per burst (exact: 3)",
            "failed calls (with the follow-up)",
            "over-admitted bursts",
        ])
        .left(3);
        report.line(exact_table.header());
        for cell in &cells[first..] {
            let admitted: Vec<String> =
                cell.bursts.iter().map(|b| b.admitted.to_string()).collect();
            // A failed follow-up call counts with the burst's failed calls.
            let errors: u64 = cell
                .bursts
                .iter()
                .map(|b| b.errors + u64::from(b.then_admitted.is_none()))
                .sum();
            let over = cell.bursts.iter().filter(|b| b.over_admitted()).count();
            report.line(exact_table.row([
                cell.kind.name().to_owned(),
                format!("{rtt_ms}"),
                format!("{}", cell.concurrency),
                admitted.join(", "),
                format!("{errors}"),
                format!("{over} of {}", cell.bursts.len()),
            ]));
        }
        drop(clients);
        drop(running);
        drop(proxy);
    }
    report.line("");
    goals(&mut report, &cells);
    open_goals(&mut report, &open);
    report.line(format!(
        "\nwall time {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    write_results(&redis, &report, secs, rounds, users, bursts);
    plot::draw(&cells);
}
