//! The comparison's permits over time: `docs/bench/acquire.csv` (permits granted in each
//! 100 ms, one column per variant) and `docs/bench/acquire.svg` (the GCRA quota's variants
//! above, the fixed window's below, against the policy's rate).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// Writes the figures and the picture of `series` (a variant's name, its permits per `bin`).
pub(crate) fn write(series: &[(&'static str, Vec<u64>)], bin: Duration, rate: u32) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench");
    let csv = dir.join("acquire.csv");
    std::fs::write(&csv, figures(series, bin)).expect("write docs/bench/acquire.csv");
    let svg = dir.join("acquire.svg");
    draw(&svg, series, bin, rate);
    println!("\nwrote {} and {}", csv.display(), svg.display());
}

/// `t_s,<variant>,...`, one row per bin (its start, seconds from the run's start).
fn figures(series: &[(&'static str, Vec<u64>)], bin: Duration) -> String {
    let mut text = String::from("t_s");
    for (name, _) in series {
        text.push(',');
        text.push_str(name);
    }
    text.push('\n');
    let rows = series.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    for row in 0..rows {
        let _ = write!(text, "{:.1}", row as f64 * bin.as_secs_f64());
        for (_, values) in series {
            let _ = write!(text, ",{}", values.get(row).copied().unwrap_or(0));
        }
        text.push('\n');
    }
    text
}

fn draw(path: &Path, series: &[(&'static str, Vec<u64>)], bin: Duration, rate: u32) {
    use plotters::prelude::*;

    let root = SVGBackend::new(path, (1000, 640)).into_drawing_area();
    root.fill(&WHITE).expect("draw");
    let (top, bottom) = root.split_vertically(340);
    let colors = [
        ("limiter gcra", RGBColor(200, 60, 40)),
        ("retry gcra", RGBColor(40, 90, 170)),
        ("governor until_ready", RGBColor(60, 150, 60)),
        ("limiter fixed-window", RGBColor(200, 60, 40)),
        ("retry fixed-window", RGBColor(40, 90, 170)),
    ];
    let panels = [
        (
            &top,
            "GCRA 100/s (burst 100), 20 workers over 4 processes: permits per 100 ms",
            ["limiter gcra", "retry gcra", "governor until_ready"].as_slice(),
        ),
        (
            &bottom,
            "Fixed window 100/s, the same workers: permits per 100 ms",
            ["limiter fixed-window", "retry fixed-window"].as_slice(),
        ),
    ];
    let step = bin.as_secs_f64();
    let per_bin = f64::from(rate) * step;
    for (area, title, names) in panels {
        let chosen: Vec<_> = series.iter().filter(|(n, _)| names.contains(n)).collect();
        let seconds = chosen.iter().map(|(_, v)| v.len()).max().unwrap_or(1) as f64 * step;
        // The first bin holds the bursts (governor's four): the axis is scaled to the rest,
        // and a bin off the chart is named in the legend.
        let steady = chosen
            .iter()
            .flat_map(|(_, v)| v.iter().skip(1).copied())
            .max()
            .unwrap_or(0) as f64;
        let max = (steady.max(per_bin) * 1.3).max(1.0);
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..seconds, 0.0..max)
            .expect("draw");
        chart
            .configure_mesh()
            .x_desc("seconds from the start")
            .y_desc("permits per 100 ms")
            .draw()
            .expect("draw");
        for (name, values) in &chosen {
            let color = colors
                .iter()
                .find(|(n, _)| n == name)
                .map_or(BLACK, |(_, c)| *c);
            // Steps: each bin's count held over its 100 ms, clipped to the axis.
            let points: Vec<(f64, f64)> = values
                .iter()
                .enumerate()
                .flat_map(|(i, &n)| {
                    let y = (n as f64).min(max);
                    [(i as f64 * step, y), ((i + 1) as f64 * step, y)]
                })
                .collect();
            let first = values.first().copied().unwrap_or(0);
            let label = if first as f64 > max {
                format!("{name} (first 100 ms: {first}, off the chart)")
            } else {
                (*name).to_owned()
            };
            let width = 2;
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(width)))
                .expect("draw")
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], color.stroke_width(width))
                });
        }
        chart
            .draw_series(LineSeries::new(
                [(0.0, per_bin), (seconds, per_bin)],
                BLACK.stroke_width(1),
            ))
            .expect("draw")
            .label(format!("the policy's rate: {per_bin:.0} per 100 ms"))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.stroke_width(1)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .expect("draw");
    }
    root.present().expect("write docs/bench/acquire.svg");
}
