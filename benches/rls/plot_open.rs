//! `docs/bench/rls_open.svg`: the open loops, one panel per round trip: at each offered rate,
//! each server's decisions per CPU-second (server and Redis together) over Limitador's at the
//! same rate and users, with the goal (2×) and Limitador (1×) marked.

use crate::measure::Cell;
use crate::servers::Kind;

pub(crate) fn draw(cells: &[Cell]) {
    use plotters::prelude::*;

    let mut rtts: Vec<f64> = Vec::new();
    let mut rates: Vec<u64> = Vec::new();
    let mut users: Vec<usize> = Vec::new();
    for cell in cells {
        if !rtts.contains(&cell.rtt_ms) {
            rtts.push(cell.rtt_ms);
        }
        if let Some(rate) = cell.rate()
            && !rates.contains(&rate)
        {
            rates.push(rate);
        }
        if !users.contains(&cell.users) {
            users.push(cell.users);
        }
    }
    rates.sort_unstable();
    if rtts.is_empty() || rates.is_empty() {
        return;
    }
    let ratio = |cell: &Cell| {
        let peer = cells.iter().find(|p| {
            p.kind == Kind::Limitador
                && p.rtt_ms == cell.rtt_ms
                && p.rate() == cell.rate()
                && p.users == cell.users
        })?;
        let r = cell.per_cpu_sec() / peer.per_cpu_sec();
        r.is_finite().then_some(r)
    };
    let max = cells.iter().filter_map(ratio).fold(2.0, f64::max) * 1.1;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench/rls_open.svg");
    let root = SVGBackend::new(&path, (560 * rtts.len() as u32, 460)).into_drawing_area();
    root.fill(&WHITE).expect("draw");
    // Each server, and each user count in a lighter shade.
    let kinds = [
        (Kind::Ours, [RGBColor(200, 60, 40), RGBColor(240, 150, 120)]),
        (
            Kind::FloorEvalsha,
            [RGBColor(40, 140, 60), RGBColor(130, 200, 140)],
        ),
        (
            Kind::FloorOk,
            [RGBColor(90, 90, 90), RGBColor(170, 170, 170)],
        ),
    ];
    let x = |rate: u64| rates.iter().position(|&r| r == rate).unwrap_or(0) as f64;
    for (area, &rtt) in root.split_evenly((1, rtts.len())).iter().zip(&rtts) {
        let title = if rtt > 0.0 {
            format!("Redis {rtt} ms away: × Limitador's decisions per CPU-second")
        } else {
            "Redis on loopback: × Limitador's decisions per CPU-second".to_owned()
        };
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 14))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(40)
            .build_cartesian_2d(-0.3..(rates.len() as f64 - 0.7), 0.0..max)
            .expect("draw");
        chart
            .configure_mesh()
            .x_labels(rates.len())
            .x_label_formatter(&|v| {
                let i = v.round().max(0.0) as usize;
                rates.get(i).map_or(String::new(), |r| format!("{r}/s"))
            })
            .x_desc("offered calls a second (open loop)")
            .y_label_formatter(&|v| format!("{v:.1}×"))
            .draw()
            .expect("draw");
        for (mark, color) in [(2.0, BLACK), (1.0, RGBColor(40, 90, 170))] {
            chart
                .draw_series(LineSeries::new(
                    [(-0.3, mark), (rates.len() as f64 - 0.7, mark)],
                    color.stroke_width(1),
                ))
                .expect("draw");
        }
        for &(kind, shades) in &kinds {
            for (ui, &u) in users.iter().enumerate() {
                let color = shades[ui.min(1)];
                let points: Vec<(f64, f64)> = cells
                    .iter()
                    .filter(|c| c.kind == kind && c.rtt_ms == rtt && c.users == u)
                    .filter_map(|c| Some((x(c.rate()?), ratio(c)?)))
                    .collect();
                if points.is_empty() {
                    continue;
                }
                let label = format!("{}, {u} users", kind.name());
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                    .expect("draw")
                    .label(label)
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(
                        points
                            .into_iter()
                            .map(|p| Circle::new(p, 3, color.filled())),
                    )
                    .expect("draw");
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE)
            .label_font(("sans-serif", 11))
            .draw()
            .expect("draw");
    }
    root.present().expect("write docs/bench/rls_open.svg");
    println!("wrote {}", path.display());
}
