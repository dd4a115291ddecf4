//! What a run reports beyond its tables: the goals judged per cell, and the run appended to
//! `docs/bench/rls.md`.

use std::fmt::Write as _;
use std::path::Path;

use crate::load;
use crate::measure::Cell;
use crate::servers::Kind;
use crate::support::redis_server::RedisServer;
use crate::support::{self, Report, Table};

/// The goals, judged per cell: ≥ 2× Limitador's decisions per CPU-second; p99 under Envoy's
/// 20 ms with Redis 10 ms away; exactly 3 admitted per burst.
pub(crate) fn goals(report: &mut Report, cells: &[Cell]) {
    let ours = cells.iter().filter(|c| c.kind == Kind::Ours);
    for cell in ours {
        let peer = cells.iter().find(|p| {
            p.kind == Kind::Limitador
                && p.rtt_ms == cell.rtt_ms
                && p.concurrency == cell.concurrency
        });
        let mut line = format!("- RTT {} ms, {} in flight:", cell.rtt_ms, cell.concurrency);
        if let Some(peer) = peer {
            let ratio = cell.per_cpu_sec() / peer.per_cpu_sec();
            let verdict = if ratio >= 2.0 { "met" } else { "missed" };
            let _ = write!(
                line,
                " {ratio:.2}× Limitador's decisions per CPU-second ({verdict});"
            );
        }
        if cell.rtt_ms >= 10.0 {
            let p99 = cell.p_ms(0.99);
            let verdict = if p99 < 20.0 { "met" } else { "missed" };
            let _ = write!(line, " p99 {p99:.2} ms < 20 ms ({verdict});");
        }
        let exact = cell.bursts.iter().all(load::Burst::exact);
        let _ = write!(line, " exact counts: {}", if exact { "yes" } else { "NO" });
        let failed: u64 = cell
            .bursts
            .iter()
            .map(|b| b.errors + u64::from(b.then_admitted.is_none()))
            .sum();
        if failed > 0 {
            let _ = write!(line, ", {failed} calls of the bursts failed");
        }
        if let Some(peer) = peer {
            let over = peer.bursts.iter().filter(|b| b.over_admitted()).count();
            let _ = write!(
                line,
                " (Limitador over-admitted in {over} of {} bursts)",
                peer.bursts.len()
            );
        }
        report.line(line);
    }
}

/// The open loops of one round trip: a row per server, rate and users, each against
/// Limitador's cell of the same rate and users; then what ours costs beyond the floors.
pub(crate) fn open_table(report: &mut Report, cells: &[Cell]) {
    if cells.is_empty() {
        return;
    }
    let table = Table::new(&[
        "server",
        "RTT ms",
        "load",
        "users",
        "decisions/s",
        "server CPU µs/dec",
        "Redis CPU µs/dec",
        "server + Redis µs/dec",
        "× Limitador per CPU-s",
        "Redis scripts/dec",
        "Redis µs/script (commandstats)",
        "Redis script µs/dec",
        "voluntary switches/dec",
        "involuntary switches/dec",
        "Redis wake-ups/dec",
        "p50 ms",
        "p99 ms",
        "errors",
    ]);
    report.line(table.header());
    for cell in cells {
        report.line(cell.open_row(&table, peer(cells, cell, Kind::Limitador)));
    }
    report.line("");
    for cell in cells.iter().filter(|c| c.kind.is_ours()) {
        let (server, redis) = cell.cpu_per_decision();
        let mut line = format!(
            "- {}, {} users: {} {server:.1} + {redis:.1} µs/dec",
            cell.load_name(),
            cell.users,
            cell.kind.name()
        );
        for kind in [Kind::Limitador, Kind::FloorOk, Kind::FloorEvalsha] {
            if let Some(other) = peer(cells, cell, kind) {
                let (s, r) = other.cpu_per_decision();
                let _ = write!(
                    line,
                    "; {} {s:.1} + {r:.1} (ours' server CPU − its: {:+.1})",
                    kind.name(),
                    server - s
                );
            }
        }
        if let Some(l) = peer(cells, cell, Kind::Limitador) {
            let ratio = cell.per_cpu_sec() / l.per_cpu_sec();
            let (_, lr) = l.cpu_per_decision();
            let _ = write!(
                line,
                "; × Limitador per CPU-s {ratio:.2} (≥ 2: {}), Redis CPU ≤ Limitador's: {}",
                if ratio >= 2.0 { "met" } else { "missed" },
                if redis <= lr { "met" } else { "missed" }
            );
        }
        report.line(line);
    }
    report.line("");
}

/// `kind`'s cell at `cell`'s round trip, rate and users.
fn peer<'a>(cells: &'a [Cell], cell: &Cell, kind: Kind) -> Option<&'a Cell> {
    cells.iter().find(|p| {
        p.kind == kind
            && p.rtt_ms == cell.rtt_ms
            && p.load_name() == cell.load_name()
            && p.users == cell.users
    })
}

/// The latency goal at each open loop's offered rate, beside the closed loop's: p99 under
/// Envoy's 20 ms with Redis 10 ms away.
pub(crate) fn open_goals(report: &mut Report, cells: &[Cell]) {
    let real = |c: &&Cell| !c.kind.is_floor();
    for cell in cells.iter().filter(real).filter(|c| c.rtt_ms >= 10.0) {
        let p99 = cell.p_ms(0.99);
        let verdict = if p99 < 20.0 { "met" } else { "missed" };
        report.line(format!(
            "- {} RTT {} ms, {} offered (open loop), {} users: {:.0} decisions/s, p99 {p99:.2} ms \
             < 20 ms ({verdict}), {} calls failed",
            cell.kind.name(),
            cell.rtt_ms,
            cell.load_name(),
            cell.users,
            cell.tally.decisions as f64 / cell.secs.max(f64::EPSILON),
            cell.tally.errors,
        ));
    }
}

/// Appends this run to `docs/bench/rls.md`; `knobs` is the command's settings
/// (`REDLIMIT_BENCH_SECS=5 ...`).
pub(crate) fn write_results(redis: &RedisServer, report: &Report, knobs: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench/rls.md");
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|_| "# RLS servers\n".into());
    let server = support::redis_info(&mut redis.connection(), "server");
    let _ = write!(
        text,
        "\n## {} (run)\n\n```sh\n{knobs} cargo bench --features rls,redis --bench rls\n```\n\n{}; \
         redis {}\n{}",
        support::today(),
        support::machine_line(),
        server.get("redis_version").map_or("?", String::as_str),
        report.0,
    );
    std::fs::write(&path, text).expect("write docs/bench/rls.md");
    println!("\nwrote {}", path.display());
}
