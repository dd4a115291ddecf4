//! `docs/benchmarks.svg`, the picture of a full run.

use crate::CONNECTIONS;
use crate::measure::Sample;
use crate::variants::Variant;

/// `docs/benchmarks.svg`: throughput, server CPU per request and p99 latency per variant, at
/// both connection counts. CPU per request sits beside throughput because on a shared 2-core
/// machine it is the steadier of the two.
pub(crate) fn plot(variants: &[Variant], summary: &[Vec<Sample>]) {
    use plotters::prelude::*;

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks.svg");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let n = variants.len();
    let root = SVGBackend::new(&path, (1360, 34 * n as u32 + 110)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let (names, charts) = root.split_horizontally(270);
    let (left, rest) = charts.split_horizontally(365);
    let (middle, right) = rest.split_horizontally(360);
    let colors = [RGBColor(70, 130, 180), RGBColor(230, 140, 40)];
    // Variant i occupies the band [n-1-i, n-i) from the top; one bar per connection count.
    let band = |vi: usize, ci: usize| {
        let top = (n - vi) as f64 - 0.12 - 0.38 * ci as f64;
        (top - 0.36, top)
    };
    let mut label_rows = Vec::new();
    for (area, title, value) in [
        (
            &left,
            "requests/s (more is better)",
            &(|s: &Sample| s.rps) as &dyn Fn(&Sample) -> f64,
        ),
        (
            &middle,
            "server CPU µs/request (less is better)",
            &|s: &Sample| s.server_cpu_us,
        ),
        (&right, "p99 latency µs (less is better)", &|s: &Sample| {
            s.p99_us
        }),
    ] {
        let max = summary.iter().flatten().map(value).fold(0.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .build_cartesian_2d(0.0..max, 0.0..n as f64)
            .unwrap();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .x_labels(4)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .unwrap();
        for (ci, color) in colors.iter().enumerate() {
            chart
                .draw_series(summary.iter().enumerate().map(|(vi, s)| {
                    let (y0, y1) = band(vi, ci);
                    Rectangle::new([(0.0, y0), (value(&s[ci]), y1)], color.filled())
                }))
                .unwrap()
                .label(format!("{} connections", CONNECTIONS[ci]))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .unwrap();
        if label_rows.is_empty() {
            label_rows = (0..n)
                .map(|vi| chart.backend_coord(&(0.0, (n - vi) as f64 - 0.5)).1)
                .collect();
        }
    }
    for (variant, y) in variants.iter().zip(label_rows) {
        names
            .draw(&Text::new(
                variant.name.clone(),
                (8, y - 7),
                ("sans-serif", 14).into_font(),
            ))
            .unwrap();
    }
    root.present().unwrap();
    println!("\nwrote {}", path.display());
}
