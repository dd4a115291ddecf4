//! Draws `docs/algorithms.svg`: one bursty traffic trace run through each of the five
//! algorithms with the same limit (10 per 5 s), allowed and denied requests over time.
//!
//! The trace is 30 s of simulated time on a [`ManualClock`] (nothing sleeps), the same on every
//! run: a trickle, a burst of 40 within 200 ms, a steady stream a quarter above the limit, 20
//! requests straddling a fixed-window edge, and random arrivals under the limit. Each panel
//! marks every request (allowed above, denied below), the running count of admitted requests,
//! and the nominal rate `N/P * t`. Regenerate the picture with
//!
//! ```sh
//! cargo run --example algorithms_plot
//! ```

use std::{error::Error, path::Path, time::Duration};

use plotters::{element::DashedPathElement, prelude::*};
use redlimit::store::{ManualClock, MemoryStore};
use redlimit::{Algorithm, Key, Limit, Policy};

const N: u64 = 10;
const PERIOD_S: f64 = 5.0;
const SPAN_S: f64 = 30.0;
/// Simulated start, a multiple of the period: fixed windows begin at 0 s, 5 s, 10 s, ...
const T0_US: u64 = 1_700_000_000_000_000;

const ALLOWED: RGBColor = RGBColor(26, 150, 65);
const DENIED: RGBColor = RGBColor(215, 48, 39);
const ADMITTED: RGBColor = RGBColor(33, 102, 172);
const ROW_ALLOWED: f64 = -7.0;
const ROW_DENIED: f64 = -14.0;
/// The two bursts, as (first request in s, requests, spacing in s): 40 within 200 ms, and 20
/// straddling the fixed-window edge at 20 s (10 before it, 10 after).
const BURSTS: [(f64, u32, f64); 2] = [(1.5, 40, 0.005), (19.6, 20, 0.04)];

/// The request times in seconds, sorted.
fn trace() -> Vec<f64> {
    // A tiny xorshift generator: uniform in [0, 1), the same sequence on every run.
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1_u64 << 53) as f64
    };
    let mut times = vec![0.3, 0.8]; // a trickle
    times.extend((0..25).map(|i| 5.0 + f64::from(i) * 0.4 + 0.3 * uniform())); // 2.5/s for 10 s
    for (start, n, gap) in BURSTS {
        times.extend((0..n).map(|i| start + f64::from(i) * gap));
    }
    let mut t = 22.0; // then random arrivals at about 1.5/s
    loop {
        t += -(1.0 - uniform()).ln() / 1.5;
        if t >= SPAN_S {
            break;
        }
        times.push(t);
    }
    times.sort_by(f64::total_cmp);
    times
}

/// Runs the trace through a fresh memory store: whether each request was allowed.
fn run(limit: Limit, times: &[f64]) -> Vec<bool> {
    let clock = ManualClock::new(T0_US);
    let store = MemoryStore::with_clock(clock.clone());
    let policy = Policy::new("plot", [limit]).expect("valid policy");
    let key = Key::new("client");
    times
        .iter()
        .map(|&t| {
            clock.set(T0_US + (t * 1e6).round() as u64);
            store.check_now(&policy, &key, 1).is_allowed()
        })
        .collect()
}

/// A short vertical tick at `(t, row)`.
fn tick(t: f64, row: f64, color: RGBColor) -> PathElement<(f64, f64)> {
    PathElement::new(vec![(t, row - 3.0), (t, row + 3.0)], color.stroke_width(1))
}

fn main() -> Result<(), Box<dyn Error>> {
    let times = trace();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/algorithms.svg");
    std::fs::create_dir_all(path.parent().expect("docs/ has a parent"))?;
    let root = SVGBackend::new(&path, (900, 1040)).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(70);

    let title = format!(
        "One trace of {} requests, five algorithms, the same limit: {N} per {PERIOD_S} s",
        times.len()
    );
    header.draw_text(&title, &("sans-serif", 20).into_font().into(), (20, 10))?;
    let legend = ("sans-serif", 14).into_font();
    let y = 48;
    let mut x = 20;
    for (label, style, mark) in [
        ("allowed", ALLOWED.stroke_width(2), '|'),
        ("denied", DENIED.stroke_width(2), '|'),
        ("admitted so far", ADMITTED.stroke_width(2), '-'),
        ("nominal rate N/P * t", BLACK.stroke_width(1), '.'),
    ] {
        match mark {
            '|' => header.draw(&PathElement::new([(x + 14, y - 6), (x + 14, y + 6)], style))?,
            '-' => header.draw(&PathElement::new([(x, y), (x + 28, y)], style))?,
            _ => header.draw(&DashedPathElement::new([(x, y), (x + 28, y)], 4, 3, style))?,
        }
        header.draw_text(label, &legend.clone().into(), (x + 36, y - 8))?;
        x += 36 + 7 * label.len() as i32 + 30;
    }
    header.draw_text(
        "grid lines: fixed-window edges",
        &legend.color(&RGBColor(120, 120, 120)),
        (x, y - 8),
    )?;

    let panels = body.split_evenly((Algorithm::ALL.len(), 1));
    for (i, (panel, algorithm)) in panels.iter().zip(Algorithm::ALL).enumerate() {
        let limit =
            Limit::new(algorithm, N, Duration::from_secs_f64(PERIOD_S)).expect("valid limit");
        let allowed = run(limit, &times);
        let admitted: Vec<f64> = times
            .iter()
            .zip(&allowed)
            .filter(|&(_, &ok)| ok)
            .map(|(&t, _)| t)
            .collect();
        let last = i + 1 == Algorithm::ALL.len();

        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{limit}: admitted {} of {}", admitted.len(), times.len()),
                ("sans-serif", 16),
            )
            .margin_left(10)
            .margin_right(20)
            .x_label_area_size(if last { 40 } else { 0 })
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..SPAN_S, -19.0..72.0)?;
        let mut mesh = chart.configure_mesh();
        mesh.disable_y_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(200, 200, 200))
            .x_labels(7)
            .x_label_formatter(&|t| format!("{t} s"))
            .y_labels(5)
            .y_label_formatter(&|n| format!("{n}"))
            .label_style(("sans-serif", 13));
        if last {
            mesh.x_desc("simulated time");
        }
        mesh.draw()?;

        let small = ("sans-serif", 12).into_font();
        for (label, row, color) in [
            ("allowed", ROW_ALLOWED, ALLOWED),
            ("denied", ROW_DENIED, DENIED),
        ] {
            let (px, py) = chart.backend_coord(&(0.0, row));
            root.draw_text(label, &small.color(&color), (px - 55, py - 6))?;
        }
        chart.draw_series(times.iter().zip(&allowed).map(|(&t, &ok)| {
            if ok {
                tick(t, ROW_ALLOWED, ALLOWED)
            } else {
                tick(t, ROW_DENIED, DENIED)
            }
        }))?;

        // The running count of admissions, as a staircase.
        let mut steps = vec![(0.0, 0.0)];
        for (k, &t) in admitted.iter().enumerate() {
            steps.extend([(t, k as f64), (t, k as f64 + 1.0)]);
        }
        steps.push((SPAN_S, admitted.len() as f64));
        chart.draw_series(LineSeries::new(steps, ADMITTED.stroke_width(2)))?;
        for (start, n, gap) in BURSTS {
            let end = start + f64::from(n) * gap;
            let got = admitted
                .iter()
                .filter(|t| (start..end).contains(*t))
                .count();
            let text = format!("{got} of {n} in {:.1} s", end - start);
            chart.draw_series([Text::new(text, (start, 68.0), small.clone())])?;
        }
        let rate = N as f64 / PERIOD_S;
        chart.draw_series(DashedLineSeries::new(
            [(0.0, 0.0), (SPAN_S, rate * SPAN_S)],
            5,
            4,
            BLACK.stroke_width(1),
        ))?;
    }
    root.present()?;
    println!("wrote {}", path.display());
    Ok(())
}
