//! How a run reports: milliseconds as the tables print them, the run appended to
//! `docs/bench/distance.md`, and `docs/bench/distance.svg`.

use std::fmt::Write as _;
use std::path::Path;

use crate::latency::{Cell, Row};
use crate::support::redis_server::RedisServer;
use crate::support::{self, Report};

pub(crate) fn ms(value: f64) -> String {
    if value.is_nan() {
        "–".into()
    } else if value.abs() < 1.0 {
        format!("{value:.3}")
    } else if value.abs() < 10.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.1}")
    }
}

/// `added` in round trips as measured (`ping_ms`), none when the nominal `rtt_ms` is 0.
pub(crate) fn in_rtts(added: f64, rtt_ms: f64, ping_ms: f64) -> String {
    if rtt_ms > 0.0 {
        format!("{:.2}", added / ping_ms)
    } else {
        "–".into()
    }
}

/// Appends this run to `docs/bench/distance.md` (made with its heading if missing).
pub(crate) fn write_results(report: &Report, redis: &RedisServer, secs: f64, keys: usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench/distance.md");
    std::fs::create_dir_all(path.parent().expect("a parent directory")).expect("docs/bench/");
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        concat!(
            "<!-- Dated results of benches/distance.rs; how to run it: benches/README.md. ",
            "Newest runs are added at the end. -->\n\n",
            "# Redis a network away (`benches/distance.rs`)\n\n",
            "Redis behind the tests' delaying proxy (`tests/it/support/proxy.rs`), requests driven in\n",
            "process (`tower::ServiceExt::oneshot` on the axum router, no HTTP). Added latency against\n",
            "the round trip, beside a memory-store baseline and a raw one-`EVALSHA` floor measured in\n",
            "the same run; the exactness of concurrent bursts on two freshly connected instances; a\n",
            "frozen Redis at 4 requests/s. Latencies in ms; \"RTTs\" divides the added latency by the\n",
            "round trip as measured (the `PING` p50 through the proxy, in parentheses beside the\n",
            "nominal one). The module docs of `benches/distance.rs` say exactly what each part does.\n",
        )
        .to_owned()
    });
    let server = support::redis_info(&mut redis.connection(), "server");
    let _ = write!(
        text,
        "\n## {}\n\n`cargo bench --all-features --bench distance` (REDLIMIT_BENCH_SECS={secs}, \
         REDLIMIT_BENCH_KEYS={keys})\n\n{}; redis {}, on the same machine, through the proxy\n{}",
        support::today(),
        support::machine_line(),
        server.get("redis_version").map_or("?", String::as_str),
        report.0,
    );
    std::fs::write(&path, text).expect("write docs/bench/distance.md");
    println!("\nwrote {}", path.display());
}

/// `docs/bench/distance.svg`: added p50 and p99 (against the memory store) against the round
/// trip, for redlimit's Redis store and the raw `EVALSHA` floor at each client count.
pub(crate) fn plot(rows: &[Row]) {
    use plotters::prelude::*;

    if rows.is_empty() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench/distance.svg");
    let root = SVGBackend::new(&path, (1100, 460)).into_drawing_area();
    root.fill(&WHITE).expect("draw");
    let (left, right) = root.split_horizontally(550);
    let max_rtt = rows.iter().map(|r| r.rtt_ms).fold(1.0, f64::max);
    let mut clients: Vec<usize> = rows.iter().map(|r| r.clients).collect();
    clients.sort_unstable();
    clients.dedup();
    let palette = [
        RGBColor(200, 60, 40),
        RGBColor(240, 150, 60),
        RGBColor(40, 90, 170),
        RGBColor(110, 170, 220),
    ];
    for (area, q, title) in [
        (&left, 0.5, "added p50 latency, ms"),
        (&right, 0.99, "added p99 latency, ms"),
    ] {
        let added = |cell: &Cell, row: &Row| cell.p(q) - row.memory.p(q);
        let max = rows
            .iter()
            .flat_map(|r| [added(&r.redis, r), added(&r.raw, r)])
            .filter(|v| v.is_finite())
            .fold(max_rtt, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..max_rtt * 1.02, 0.0..max)
            .expect("draw");
        chart
            .configure_mesh()
            .x_desc("round trip to Redis, ms")
            .y_desc("ms over the memory store")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .expect("draw");
        chart
            .draw_series(LineSeries::new(
                [(0.0, 0.0), (max_rtt, max_rtt)],
                RGBColor(160, 160, 160),
            ))
            .expect("draw")
            .label("one round trip")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], RGBColor(160, 160, 160)));
        let mut color = palette.iter().cycle();
        for (name, redis) in [("redlimit redis", true), ("raw EVALSHA", false)] {
            for &c in &clients {
                let style = color.next().copied().unwrap_or(BLACK).stroke_width(2);
                let points: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| r.clients == c)
                    .map(|r| {
                        let cell = if redis { &r.redis } else { &r.raw };
                        (r.rtt_ms, added(cell, r))
                    })
                    .collect();
                chart
                    .draw_series(LineSeries::new(points.clone(), style))
                    .expect("draw")
                    .label(format!("{name}, {c} clients"))
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], style));
                chart
                    .draw_series(
                        points
                            .into_iter()
                            .map(|p| Circle::new(p, 3, style.filled())),
                    )
                    .expect("draw");
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .expect("draw");
    }
    root.present().expect("write docs/bench/distance.svg");
    println!("wrote {}", path.display());
}
