//! Local-first mode in a deterministic simulation: the store's own decision and sync code
//! (`redlimit::__private::local_first`) on a simulated clock, the sync script's Rust twin as
//! Redis, a simulated network delay, seeded Poisson arrivals; beside it, exact mode (every
//! request decided by one shared store, as Redis does it).
//!
//! ```text
//! cargo bench --bench local_first_sim      # ~1 minute; writes docs/local-first.svg
//! ```
//!
//! Scenarios (GCRA, burst = one second of the rate, 100 ms syncs, 1 ms one-way delay):
//! (a) 3x the limit spread evenly over 100 instances; (b) YARL's sparse case: 100 req/s over
//! 300 instances against 50/s; (c) 0.5x, then 3x, then 0.5x the limit; (d) 3x the limit, one
//! instance taking 90 % of it; (e) 3x, one instance taking 80 % of it, 20 instances joining
//! at 5 s and 20 leaving at 15 s. Reports admitted ÷ what exact mode admits in steady state, the
//! overshoot in the first interval after the step up, and the time local-first takes to
//! converge on exact mode, for several admission marks; the defaults come from this table.
//! There every instance decides the key in memory from its first sync (`local_after` 1), so
//! the table measures local decisions themselves: with the default rule, instances that see
//! 3 requests an interval, as in (a), would decide them exactly.
//!
//! A second table holds a hot global key on 3 instances to the ideal (burst + rate × time)
//! over a whole 10 s run, from 0.8x to 3 300x its limit at the same offered load (66 000/s),
//! the limit shrinking (20 overloads, so an error confined to some of them shows): with the
//! default rule a key is decided in memory only where its limit admits at least 8 units per
//! sync interval (80/s at 100 ms: up to 825x here; 66/s and 20/s are decided exactly).

mod support;

use std::time::Duration;

use redlimit::__private::local_first::{Batch, Fleet, Instance, Reply};
use redlimit::store::{ManualClock, MemoryStore};
use redlimit::{Key, Limit, Policy};
use support::Table;

const T0: u64 = 1_700_000_000_000_000;
const INTERVAL_MS: u64 = 100;
const DELAY_MS: u64 = 1;

/// Demand over time: the total offered rate (req/s) at a given ms, and how it is spread.
struct Scenario {
    name: &'static str,
    instances: usize,
    limit: u64,
    seconds: u64,
    /// The total offered rate at `ms`.
    offered: fn(u64, f64) -> f64,
    /// Instance 0's share of the demand (the rest spread evenly).
    skew: Option<f64>,
    /// The steady window (s) where admitted ÷ exact is measured.
    steady: (u64, u64),
    /// Instances 80 to 99 join at 5 s, instances 1 to 20 leave at 15 s.
    churn: bool,
}

/// Whether instance `i` is up at `ms` (takes requests and syncs).
fn present(s: &Scenario, i: usize, ms: u64) -> bool {
    !s.churn || !((80..100).contains(&i) && ms < 5_000 || (1..=20).contains(&i) && ms >= 15_000)
}

fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "(a) 3x, even, 100 instances",
            instances: 100,
            limit: 1000,
            seconds: 30,
            offered: |_, l| 3.0 * l,
            skew: None,
            steady: (5, 30),
            churn: false,
        },
        Scenario {
            name: "(b) 100/s over 300 instances, limit 50/s",
            instances: 300,
            limit: 50,
            seconds: 60,
            offered: |_, _| 100.0,
            skew: None,
            steady: (10, 60),
            churn: false,
        },
        Scenario {
            name: "(c) 0.5x → 3x → 0.5x",
            instances: 100,
            limit: 1000,
            seconds: 30,
            offered: step,
            skew: None,
            steady: (15, 20),
            churn: false,
        },
        Scenario {
            name: "(d) 3x, 90 % on one instance",
            instances: 100,
            limit: 1000,
            seconds: 30,
            offered: |_, l| 3.0 * l,
            skew: Some(0.9),
            steady: (5, 30),
            churn: false,
        },
        Scenario {
            name: "(e) 3x, 80 % on one instance, 20 join at 5 s, 20 leave at 15 s",
            instances: 100,
            limit: 1000,
            seconds: 30,
            offered: |_, l| 3.0 * l,
            skew: Some(0.8),
            steady: (5, 30),
            churn: true,
        },
    ]
}

/// Scenario (c)'s demand: 0.5x for 10 s, 3x for 10 s, 0.5x again.
fn step(ms: u64, limit: f64) -> f64 {
    if (10_000..20_000).contains(&ms) {
        3.0 * limit
    } else {
        0.5 * limit
    }
}

/// A xorshift generator: the same arrivals on every run.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A Poisson draw of mean `mean` (Knuth's method; means here are small).
    fn poisson(&mut self, mean: f64) -> u32 {
        let limit = (-mean).exp();
        let (mut k, mut p) = (0, self.uniform());
        while p > limit {
            k += 1;
            p *= self.uniform();
        }
        k
    }
}

/// Admitted per 100 ms, local-first and exact.
struct Run {
    local: Vec<u64>,
    exact: Vec<u64>,
}

/// Runs `s`; an instance turns the key hot after `local_after` decisions within an interval
/// (1: at once, so the table measures the local decisions themselves).
fn simulate(s: &Scenario, marks: (f64, f64), local_after: u32, seed: u64) -> Run {
    let clock = ManualClock::new(T0);
    let policy = Policy::new(
        "sim",
        [Limit::gcra(s.limit, Duration::from_secs(1)).unwrap()],
    )
    .unwrap();
    let key = Key::new("global");
    let instances: Vec<Instance> = (0..s.instances)
        .map(|i| {
            let instance = Instance::tuned(
                Duration::from_millis(INTERVAL_MS),
                marks,
                s.instances as u32,
                clock.clone(),
                &format!("i{i}"),
                seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                &[("local_after", f64::from(local_after))],
            )
            .unwrap();
            instance.set_instances(s.instances as u32);
            instance
        })
        .collect();
    let exact = MemoryStore::with_clock(clock.clone());
    let mut fleet = Fleet::default();
    let mut rng = Rng(seed | 1);
    // Each instance syncs at its own phase of the interval.
    let mut next_sync: Vec<u64> = (0..s.instances)
        .map(|_| (rng.uniform() * INTERVAL_MS as f64) as u64)
        .collect();
    let mut last_sync = vec![0u64; s.instances];
    let mut in_flight: Vec<Option<(u64, Batch, Reply, u64)>> =
        (0..s.instances).map(|_| None).collect();
    let slots = (s.seconds * 1000 / INTERVAL_MS) as usize;
    let mut run = Run {
        local: vec![0; slots],
        exact: vec![0; slots],
    };
    let limit = s.limit as f64;
    for ms in 0..s.seconds * 1000 {
        clock.set(T0 + ms * 1000);
        let now = T0 + ms * 1000;
        let slot = (ms / INTERVAL_MS) as usize;
        let total = (s.offered)(ms, limit) / 1000.0;
        let others = (1..s.instances)
            .filter(|&i| present(s, i, ms))
            .count()
            .max(1);
        for (i, instance) in instances.iter().enumerate() {
            if let Some((due, ..)) = &in_flight[i]
                && *due <= ms
            {
                let (_, batch, reply, sent_at) = in_flight[i].take().unwrap();
                instance.finish_sync(batch, Some(reply), sent_at, now);
            }
            if !present(s, i, ms) {
                continue;
            }
            let share = match s.skew {
                Some(top) if i == 0 => top,
                Some(top) => (1.0 - top) / others as f64,
                None => 1.0 / s.instances as f64,
            };
            for _ in 0..rng.poisson(total * share) {
                if instance.check(&mut fleet, &policy, &key, 1).is_allowed() {
                    run.local[slot] += 1;
                }
                if exact.check_now(&policy, &key, 1).is_allowed() {
                    run.exact[slot] += 1;
                }
            }
            let early = instance.wants_early_sync() && ms >= last_sync[i] + INTERVAL_MS / 4;
            if in_flight[i].is_none() && (ms >= next_sync[i] || early) {
                let batch = instance.begin_sync();
                // Merged when it reaches Redis, answered one delay later.
                let reply = fleet.sync(&batch, now + DELAY_MS * 1000);
                in_flight[i] = Some((ms + 2 * DELAY_MS, batch, reply, now));
                last_sync[i] = ms;
                next_sync[i] = ms + INTERVAL_MS;
            }
        }
    }
    run
}

/// The standard deviation of admissions per 100 ms over seconds `from..to`, in % of the
/// limit's 100 ms.
fn noise(run: &Run, (from, to): (u64, u64), limit: u64) -> f64 {
    let slots = &run.local[(from * 10) as usize..(to * 10) as usize];
    let per_slot = limit as f64 * INTERVAL_MS as f64 / 1000.0;
    let variance = slots
        .iter()
        .map(|&n| (n as f64 - per_slot).powi(2))
        .sum::<f64>()
        / slots.len() as f64;
    100.0 * variance.sqrt() / per_slot
}

/// Admitted ÷ exact over seconds `from..to`.
fn ratio(run: &Run, (from, to): (u64, u64)) -> f64 {
    let range = (from * 10) as usize..(to * 10) as usize;
    let local: u64 = run.local[range.clone()].iter().sum();
    let exact: u64 = run.exact[range].iter().sum();
    local as f64 / exact as f64
}

/// After the step up at 10 s: the overshoot of the first interval over exact mode's (in % of
/// one interval of the limit), and how long until every 1 s window admits within 10 % of
/// exact (100 ms slots carry Poisson noise of their own: a tighter bound measures the noise).
fn step_response(run: &Run, limit: u64) -> (f64, f64) {
    let first = run.local[100] as f64 - run.exact[100] as f64;
    let per_interval = limit as f64 * INTERVAL_MS as f64 / 1000.0;
    let window = |v: &[u64], at: usize| v[at..at + 10].iter().sum::<u64>() as f64;
    let settled = (100..190)
        .find(|&start| {
            (start..190).all(|at| {
                let exact = window(&run.exact, at);
                (window(&run.local, at) - exact).abs() <= 0.10 * exact
            })
        })
        .unwrap_or(190);
    (
        100.0 * first / per_interval,
        (settled - 100) as f64 * INTERVAL_MS as f64 / 1000.0,
    )
}

fn main() {
    if !support::bench_mode(
        "local-first simulation: run with `cargo bench --bench local_first_sim`",
    ) {
        return;
    }
    let marks = [(0.5, 1.0), (0.8, 1.0), (0.9, 1.0), (0.95, 1.0), (1.0, 1.0)];
    let table = Table::new(&[
        "marks (low, high)",
        "(a) steady",
        "(a) sd per 100 ms",
        "(b) sparse",
        "(c) steady at 3x",
        "(c) overshoot, 1st interval",
        "(c) within 10 % after",
        "(d) skewed",
        "(e) skewed, churn",
    ]);
    println!(
        "admitted ÷ exact mode's admitted (1.000 = the same), GCRA with a burst of 1 s, 100 ms \
         syncs, 1 ms delay, seed 42; every instance decides the key in memory from its first \
         sync (local_after 1: with the default rule, an instance seeing 3 requests per \
         interval, as in (a), decides them exactly)\n"
    );
    println!("{}", table.header());
    let mut plotted = None;
    for m in marks {
        let mut cells = vec![format!("{:.2}, {:.2}", m.0, m.1)];
        let mut step_cells = Vec::new();
        for s in scenarios() {
            let run = simulate(&s, m, 1, 42);
            cells.push(format!("{:.3}", ratio(&run, s.steady)));
            if s.name.starts_with("(a)") {
                cells.push(format!("{:.0} %", noise(&run, s.steady, s.limit)));
            }
            if s.name.starts_with("(c)") {
                let (overshoot, settled) = step_response(&run, s.limit);
                step_cells = vec![format!("{overshoot:+.0} %"), format!("{settled:.1} s")];
                if m == redlimit::store::DEFAULT_MARKS {
                    plotted = Some((run, s.limit));
                }
            }
        }
        cells.splice(5..5, step_cells);
        println!("{}", table.row(cells));
    }
    if let Some((run, limit)) = plotted {
        plot(&run, limit);
    }
    overloads();
}

/// The second table: a hot global key on 3 instances at a fixed offered load, its limit
/// shrinking; admitted ÷ the ideal over the whole run, local-first and exact.
fn overloads() {
    const OFFERED: f64 = 66_000.0;
    const SECONDS: u64 = 10;
    println!(
        "\nhot global key, 3 instances, {OFFERED} req/s offered for {SECONDS} s, GCRA (burst = \
         1 s of the rate), default marks: admitted ÷ ideal (burst + rate × time, or all \
         offered below the limit)\n"
    );
    let table = Table::new(&[
        "overload",
        "limit/s",
        "local-first",
        "exact",
        "denied below",
    ]);
    println!("{}", table.header());
    // A sweep, not a few points: the band's equilibrium moves with the overload (1 − p =
    // limit ÷ offered), and an error in the view shows at some overloads only.
    for overload in [
        0.8, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 34.0, 50.0, 70.0, 100.0, 150.0, 200.0, 330.0,
        400.0, 600.0, 825.0, 1000.0, 3300.0,
    ] {
        let limit = (OFFERED / overload).round() as u64;
        let s = Scenario {
            name: "overload",
            instances: 3,
            limit,
            seconds: SECONDS,
            offered: |_, _| OFFERED,
            skew: None,
            steady: (0, SECONDS),
            churn: false,
        };
        let run = simulate(
            &s,
            redlimit::store::DEFAULT_MARKS,
            redlimit::store::DEFAULT_LOCAL_AFTER,
            42,
        );
        let offered = OFFERED * SECONDS as f64;
        let ideal = (limit as f64 * (SECONDS as f64 + 1.0)).min(offered);
        let local: u64 = run.local.iter().sum();
        let exact: u64 = run.exact.iter().sum();
        // Under the limit, every denial is a false one.
        let false_denials = if overload < 1.0 {
            format!("{:.2} %", 100.0 * (1.0 - local as f64 / exact as f64))
        } else {
            "-".to_owned()
        };
        println!(
            "{}",
            table.row(vec![
                format!("{overload}x"),
                limit.to_string(),
                format!("{:.3}", local as f64 / ideal),
                format!("{:.3}", exact as f64 / ideal),
                false_denials,
            ])
        );
    }
}

/// `docs/local-first.svg`: scenario (c), admitted per second (in 100 ms slots) for exact and
/// local-first mode, against the limit.
fn plot(run: &Run, limit: u64) {
    use plotters::prelude::*;

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/local-first.svg");
    let root = SVGBackend::new(&path, (960, 420)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let per_s = |v: u64| v as f64 * 1000.0 / INTERVAL_MS as f64;
    let max = run
        .local
        .iter()
        .chain(&run.exact)
        .map(|&v| per_s(v))
        .fold(0.0, f64::max)
        * 1.1;
    let seconds = run.local.len() as f64 * INTERVAL_MS as f64 / 1000.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Scenario (c): 0.5x → 3x → 0.5x the limit, 100 instances, 100 ms syncs",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..seconds, 0.0..max)
        .unwrap();
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("admitted per second")
        .draw()
        .unwrap();
    let series = |v: &[u64]| {
        v.iter()
            .enumerate()
            .map(|(i, &n)| (i as f64 * INTERVAL_MS as f64 / 1000.0, per_s(n)))
            .collect::<Vec<_>>()
    };
    let exact = RGBColor(70, 130, 180);
    let local = RGBColor(230, 140, 40);
    chart
        .draw_series(LineSeries::new(series(&run.exact), exact.stroke_width(2)))
        .unwrap()
        .label("exact (Redis per request)")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], exact.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(series(&run.local), local.stroke_width(2)))
        .unwrap()
        .label("local-first")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], local.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(
            [(0.0, limit as f64), (seconds, limit as f64)],
            BLACK.stroke_width(1),
        ))
        .unwrap()
        .label("the limit")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.stroke_width(1)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .unwrap();
    root.present().unwrap();
    println!("\nwrote {}", path.display());
}
