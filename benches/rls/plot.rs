//! `docs/bench/rls.svg`: per round trip and concurrency, each server's decisions per CPU-second
//! (server and Redis together), its p99 latency against Envoy's 20 ms timeout, and the most it
//! admitted in one exactness burst against the limit of 3.

use crate::measure::Cell;
use crate::servers::Kind;

pub(crate) fn draw(cells: &[Cell]) {
    use plotters::prelude::*;

    // The rows: each (round trip, concurrency) once, in run order.
    let mut rows: Vec<(f64, usize)> = Vec::new();
    for cell in cells {
        if !rows.contains(&(cell.rtt_ms, cell.concurrency)) {
            rows.push((cell.rtt_ms, cell.concurrency));
        }
    }
    if rows.is_empty() {
        return;
    }
    let n = rows.len();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench/rls.svg");
    let root = SVGBackend::new(&path, (1360, 60 * n as u32 + 110)).into_drawing_area();
    root.fill(&WHITE).expect("draw");
    let (names, charts) = root.split_horizontally(190);
    let (left, rest) = charts.split_horizontally(400);
    let (middle, right) = rest.split_horizontally(390);
    let kinds = [
        (Kind::Ours, RGBColor(200, 60, 40)),
        (Kind::Limitador, RGBColor(40, 90, 170)),
    ];
    // Row i occupies the band [n-1-i, n-i) from the top; one bar per server.
    let band = |ri: usize, ki: usize| {
        let top = (n - ri) as f64 - 0.12 - 0.38 * ki as f64;
        (top - 0.36, top)
    };
    let cell = |ri: usize, kind: Kind| {
        cells
            .iter()
            .find(|c| (c.rtt_ms, c.concurrency) == rows[ri] && c.kind == kind)
    };
    type Value = dyn Fn(&Cell) -> f64;
    let panels: [(&_, &str, &Value, Option<f64>); 3] = [
        (
            &left,
            "decisions per CPU-second, server + Redis (more is better)",
            &|c: &Cell| c.per_cpu_sec(),
            None,
        ),
        (
            &middle,
            "p99 latency, ms (Envoy's timeout: 20 ms)",
            &|c: &Cell| c.p_ms(0.99),
            Some(20.0),
        ),
        (
            &right,
            "most admitted in one burst (the limit: 3)",
            &|c: &Cell| c.bursts.iter().map(|b| b.admitted).max().unwrap_or(0) as f64,
            Some(3.0),
        ),
    ];
    let mut label_rows = Vec::new();
    for (area, title, value, mark) in panels {
        let max = cells
            .iter()
            .map(value)
            .filter(|v| v.is_finite())
            .fold(mark.unwrap_or(0.0), f64::max)
            * 1.15;
        let max = if max > 0.0 { max } else { 1.0 };
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(28)
            .build_cartesian_2d(0.0..max, 0.0..n as f64)
            .expect("draw");
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .x_labels(5)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .expect("draw");
        for (ki, &(kind, color)) in kinds.iter().enumerate() {
            let bars: Vec<_> = (0..n)
                .filter_map(|ri| {
                    let c = cell(ri, kind)?;
                    let (y0, y1) = band(ri, ki);
                    Some(Rectangle::new([(0.0, y0), (value(c), y1)], color.filled()))
                })
                .collect();
            if bars.is_empty() {
                continue;
            }
            chart
                .draw_series(bars)
                .expect("draw")
                .label(kind.name())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        if let Some(mark) = mark {
            chart
                .draw_series(LineSeries::new(
                    [(mark, 0.0), (mark, n as f64)],
                    BLACK.stroke_width(1),
                ))
                .expect("draw");
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .expect("draw");
        if label_rows.is_empty() {
            label_rows = (0..n)
                .map(|ri| chart.backend_coord(&(0.0, (n - ri) as f64 - 0.5)).1)
                .collect();
        }
    }
    for (&(rtt, concurrency), y) in rows.iter().zip(label_rows) {
        let place = if rtt > 0.0 {
            format!("Redis {rtt} ms away")
        } else {
            "Redis on loopback".to_owned()
        };
        for (i, text) in [place, format!("{concurrency} calls in flight")]
            .into_iter()
            .enumerate()
        {
            names
                .draw(&Text::new(
                    text,
                    (8, y - 16 + 18 * i as i32),
                    ("sans-serif", 14).into_font(),
                ))
                .expect("draw");
        }
    }
    root.present().expect("write docs/bench/rls.svg");
    println!("wrote {}", path.display());
}
