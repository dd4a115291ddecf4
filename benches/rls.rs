//! Envoy's rate limit service side by side: our `redlimit-server` against Kuadrant's Limitador,
//! both real processes on one `redis-server`, driven by the same gRPC client in the same run.
//!
//! ```text
//! cargo bench --features rls,redis --bench rls     # ~12 minutes once built; writes docs/bench/rls.md and .svg
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
//! 3. **Open loops** (`rls/open_loop.rs`), after the closed loops of each round: calls started
//!    on a schedule whatever the answers, as Envoy's traffic arrives, timed from each call's
//!    start, at each rate of `REDLIMIT_BENCH_RATES` (calls a second; `500,1000,2000,5000` by
//!    default) and each user count of `REDLIMIT_BENCH_OPEN_USERS` (`1,10000`: one hot key, or
//!    keys mostly met once an hour). A gateway's rate limit pod serves a steady few hundred to a
//!    few thousand calls a second with one or a few in flight, where a batcher has little to
//!    merge: these rows, not the saturated closed loops, are its cost. Their own table: server
//!    and Redis CPU per decision, their sum, decisions per CPU-second against Limitador's at
//!    the same rate and users, Redis scripts per decision and Redis's own time per script and
//!    per decision (`INFO commandstats`), the server's context switches per decision (all its
//!    threads, `/proc/PID/task/*/status`: a voluntary one is a wake-up) and Redis's voluntary
//!    ones (its wake-ups), p50/p99, errors; then,
//!    per rate, ours against Limitador and the floors, and the goals (≥ 2× Limitador's
//!    decisions per CPU-second, Redis CPU ≤ Limitador's). Their p99 against 20 ms joins the
//!    goals. Their picture: `docs/bench/rls_open.svg` (`rls/plot_open.rs`).
//! 4. **Floors** (`rls/floor.rs`; `REDLIMIT_BENCH_FLOORS=0` leaves them out): beside the two
//!    servers, in every closed and open loop, a tonic server answering `OK` without a store,
//!    and one sending one `EVALSHA` per call (a minimal fixed window): the protocol's floor and
//!    a hand-written RLS's, so that what ours costs per call beyond them is read in the same
//!    run. They have no rules: no exactness bursts.
//!
//! With `REDLIMIT_BENCH_SYSCALLS=1`, each server's syscalls by kind (`perf trace -s`) and
//! context switches per decision in the measured windows, as counts hold on a busy machine
//! (`support/syscalls.rs`; tracing slows the server a little: read its CPU columns then as
//! rough).
//!
//! Our server's environment is cleared but for the bench's settings and
//! `REDLIMIT_BENCH_OURS_ENV` (`NAME=VALUE ...`), e.g. `TOKIO_WORKER_THREADS=1`.
//! `REDLIMIT_BENCH_OURS_VARIANTS` (`label:NAME=VALUE,...;label:...`) runs more of ours beside
//! it, each with its variables (e.g. `window 1ms:REDIS_PIPELINE_WINDOW=1ms`), in every loop;
//! `REDLIMIT_BENCH_OURS_BIN` runs that binary instead of building one.
//!
//! The client is ours: bare gRPC unary calls on `h2` with our generated messages
//! (`redlimit::rls::proto`, each user's request encoded once per load), four HTTP/2
//! connections per server, on a single-threaded runtime in this process; its CPU is counted
//! for neither server, but reported beside them. Everything shares the machine's cores: compare
//! CPU per decision, which holds steady, more than decisions per second, which does not.

mod support;

#[path = "rls/floor.rs"]
mod floor;
#[path = "rls/load.rs"]
mod load;
#[path = "rls/measure.rs"]
mod measure;
#[path = "rls/open_loop.rs"]
mod open_loop;
#[path = "rls/plot.rs"]
mod plot;
#[path = "rls/plot_open.rs"]
mod plot_open;
#[path = "rls/report.rs"]
mod report;
#[path = "rls/servers.rs"]
mod servers;
#[path = "rls/threads.rs"]
mod threads;

use std::time::{Duration, Instant};

use load::Clients;
use measure::{Cell, clear_of_minute_edge, flushall, measure, ping_ms};
use report::{goals, open_goals, open_table, write_results};
use support::proxy::Proxy;
use support::redis_server::RedisServer;
use support::{Report, Table};

fn main() {
    // Run again by itself as a floor server (`rls/floor.rs`): serves, never returns.
    floor::serve_if_asked();
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
    let rtts = support::rtts_knob(&[0.0, 10.0]);
    let concurrencies = support::clients_knob(&[16, 256]);
    let users = support::knob_where(
        "REDLIMIT_BENCH_USERS",
        1000,
        "at least 1 user",
        |&u: &usize| u > 0,
    );
    let rates = support::list_knob(
        "REDLIMIT_BENCH_RATES",
        &[500, 1000, 2000, 5000],
        "open-loop calls a second (1 to 1 000 000)",
        |r: &u64| (1..=1_000_000).contains(r),
    );
    let open_users = support::list_knob(
        "REDLIMIT_BENCH_OPEN_USERS",
        &[1, 10_000],
        "users of the open loops (1 to 10 000 000)",
        |u: &usize| (1..=10_000_000).contains(u),
    );
    let floors = support::knob_where("REDLIMIT_BENCH_FLOORS", 1u8, "0 or 1", |f| *f <= 1) == 1;
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
    let variants = servers::ours_variants();
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
        for (kind, vars) in &variants {
            running.push(servers::start_ours_as(*kind, vars, &ours, port));
        }
        if let Some(binary) = &limitador {
            running.push(servers::start_limitador(binary, port));
        }
        if floors {
            running.push(floor::start(servers::Kind::FloorOk, port));
            running.push(floor::start(servers::Kind::FloorEvalsha, port));
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
                cells.push(Cell::new(server.kind, rtt_ms, concurrency, None, users));
            }
        }
        let cell_of = |c: usize, s: usize| first + c * running.len() + s;
        let first_open = open.len();
        for &rate in &rates {
            for &u in &open_users {
                for server in &running {
                    open.push(Cell::new(server.kind, rtt_ms, 0, Some(rate), u));
                }
            }
        }

        // Each server's reading of the limit, one call at a time, before any burst.
        for (si, server) in running.iter().enumerate() {
            if server.kind.is_floor() {
                continue;
            }
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
                if server.kind.is_floor() {
                    continue;
                }
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
                    measure(&runtime, &mut con, server, &clients[si], cell, secs);
                    eprintln!(
                        "  {} rtt {rtt_ms} ms, {} in flight: {} decisions so far",
                        server.kind.name(),
                        cell.concurrency,
                        cell.tally.decisions
                    );
                }
            }
            for oi in 0..rates.len() * open_users.len() {
                for (si, server) in running.iter().enumerate() {
                    let cell = &mut open[first_open + oi * running.len() + si];
                    measure(&runtime, &mut con, server, &clients[si], cell, secs);
                    eprintln!(
                        "  {} rtt {rtt_ms} ms, {}, {} users: {} decisions so far",
                        server.kind.name(),
                        cell.load_name(),
                        cell.users,
                        cell.tally.decisions
                    );
                }
            }
        }
        report.line(load_table.header());
        for cell in &cells[first..] {
            report.line(cell.row(&load_table));
        }
        report.line("");
        open_table(&mut report, &open[first_open..]);
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
        for cell in cells[first..].iter().filter(|c| !c.kind.is_floor()) {
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
    let list = |v: Vec<String>| v.join(",");
    let knobs = format!(
        "REDLIMIT_BENCH_SECS={secs} REDLIMIT_BENCH_ROUNDS={rounds} REDLIMIT_BENCH_USERS={users} \
         REDLIMIT_BENCH_BURSTS={bursts} REDLIMIT_BENCH_RATES={} REDLIMIT_BENCH_OPEN_USERS={}",
        list(rates.iter().map(u64::to_string).collect()),
        list(open_users.iter().map(usize::to_string).collect()),
    );
    write_results(&redis, &report, &knobs);
    plot::draw(&cells);
    plot_open::draw(&open);
}
