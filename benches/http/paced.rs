//! Paced (open-loop) rows: requests started on a schedule at a fixed rate whatever the answers,
//! as a service's traffic arrives, over a pool of keep-alive connections; each request timed
//! from its scheduled start. At the rates a service runs (a few thousand a second, one or a few
//! in flight) a limiter's fixed cost per request shows, which a saturated closed loop, where
//! batches and wake-ups are shared, hides. Reported as ratios of server CPU per request:
//! the layer on Redis against the minimal one-`EVALSHA` middleware, the memory store against
//! tower_governor (the goals: ≤ 1.10× each).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::body::Body;
use hdrhistogram::Histogram;
use http::StatusCode;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;

use crate::measure::{Sample, measure_with};
use crate::support::redis_server::RedisServer;
use crate::support::{Table, median};
use crate::variants::{Keys, Variant};

/// Keep-alive connections the paced requests are spread over, in turn.
const CONNECTIONS: usize = 16;
const KEYS: u64 = 100_000;

/// The pairs the goals compare: (variant, baseline), by name prefix, for each key count.
const PAIRS: [(&str, &str); 2] = [
    ("redlimit redis gcra", "minimal EVALSHA gcra"),
    ("redlimit memory gcra", "tower_governor"),
];

/// Whether `variant` is in a pair (the paced rows measure those alone).
pub(crate) fn paced_variant(variant: &Variant) -> bool {
    PAIRS
        .iter()
        .any(|(a, b)| variant.name.starts_with(a) || variant.name.starts_with(b))
}

/// Open-loop load: at `rate` requests a second, request `i` is started at `i / rate` s (on
/// Tokio's millisecond tick: those due by a tick start at it) on connection
/// `i mod CONNECTIONS`, queued behind that connection's previous one if it has not been
/// answered: its latency is timed from the tick that started it, its wait in the queue
/// included, for `warmup` then `duration`. Returns the
/// requests scheduled in the measured part (after `on_measure` ran), their latencies and
/// failures, and the measured time.
pub(crate) fn paced_load(
    addr: SocketAddr,
    keys: Keys,
    rate: u64,
    warmup: Duration,
    duration: Duration,
    on_measure: impl FnOnce(),
) -> (u64, Histogram<u64>, u64, Duration) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let start = Instant::now();
        let measure_from = start + warmup;
        let end = measure_from + duration;
        let mut queues = Vec::with_capacity(CONNECTIONS);
        let mut tasks = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, u64)>();
            queues.push(tx);
            tasks.push(tokio::spawn(async move {
                let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                stream.set_nodelay(true).unwrap();
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream))
                        .await
                        .unwrap();
                tokio::spawn(conn);
                let mut histogram = Histogram::<u64>::new(3).unwrap();
                let (mut done, mut errors) = (0u64, 0u64);
                while let Some((scheduled, key)) = rx.recv().await {
                    let req = hyper::Request::get("/").header("host", "bench");
                    let req = match keys {
                        Keys::Many => req.header("x-key", key),
                        Keys::Hot => req.header("x-key", "hot"),
                    };
                    let ok = match sender.send_request(req.body(Body::empty()).unwrap()).await {
                        Ok(res) => {
                            let status = res.status();
                            res.into_body().collect().await.is_ok() && status == StatusCode::OK
                        }
                        Err(_) => false,
                    };
                    if scheduled >= measure_from {
                        let us = scheduled.elapsed().as_micros() as u64;
                        histogram.record(us.max(1)).unwrap();
                        done += 1;
                        errors += u64::from(!ok);
                    }
                }
                (done, histogram, errors)
            }));
        }
        let mut on_measure = Some(on_measure);
        let mut measured_at = None;
        let mut next = 0u64;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            if measured_at.is_none() && now >= measure_from {
                (on_measure.take().expect("once"))();
                measured_at = Some(Instant::now());
            }
            let due = ((now - start).as_secs_f64() * rate as f64) as u64;
            while next < due {
                let scheduled = Instant::now();
                let key = next.wrapping_mul(7_919) % KEYS;
                let _ = queues[next as usize % CONNECTIONS].send((scheduled, key));
                next += 1;
            }
            // Tokio's timer ticks in milliseconds: each tick starts the requests due by then.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        drop(queues);
        let mut total = Histogram::<u64>::new(3).unwrap();
        let (mut requests, mut errors) = (0, 0);
        for task in tasks {
            let (done, histogram, errs) = task.await.unwrap();
            requests += done;
            errors += errs;
            total.add(histogram).unwrap();
        }
        let measured = end.saturating_duration_since(measured_at.unwrap_or(measure_from));
        (
            requests,
            total,
            errors,
            measured.max(Duration::from_millis(1)),
        )
    })
}

/// The paced rows: for each round, rate and variant in a pair (alternated), a measurement;
/// then per rate the medians, and the goals as ratios of server CPU per request.
pub(crate) fn run(
    variants: &[Variant],
    redis: &RedisServer,
    rates: &[u64],
    rounds: usize,
    secs: f64,
) {
    let paced: Vec<&Variant> = variants.iter().filter(|v| paced_variant(v)).collect();
    let mut samples = vec![vec![Vec::new(); rates.len()]; paced.len()];
    for round in 0..rounds {
        for (ri, &rate) in rates.iter().enumerate() {
            for (vi, variant) in paced.iter().enumerate() {
                let sample =
                    measure_with(variant, redis, &format!("paced {rate}/s"), |addr, on| {
                        let warmup = Duration::from_millis(500);
                        paced_load(
                            addr,
                            variant.keys,
                            rate,
                            warmup,
                            Duration::from_secs_f64(secs),
                            on,
                        )
                    });
                eprintln!(
                    "round {round} paced {rate}/s {:<32} {:>7.0} req/s  server {:>6.1} µs/req  p50 {:>6.0} µs  p99 {:>6.0} µs  errors {}",
                    variant.name,
                    sample.rps,
                    sample.server_cpu_us,
                    sample.p50_us,
                    sample.p99_us,
                    sample.errors
                );
                samples[vi][ri].push(sample);
            }
        }
    }
    let med = |s: &[Sample], f: fn(&Sample) -> f64| median(s.iter().map(f).collect());
    let table = Table::new(&[
        "variant",
        "offered req/s",
        "req/s",
        "server CPU µs/req",
        "Redis CPU µs/req",
        "Redis calls/req",
        "p50 µs",
        "p99 µs",
        "errors",
        "× baseline (server CPU)",
    ]);
    let mut goals = Vec::new();
    for (ri, &rate) in rates.iter().enumerate() {
        println!(
            "\n### paced, {rate} requests a second ({CONNECTIONS} connections, {rounds} rounds, medians)\n"
        );
        println!("{}", table.header());
        let cpu = |vi: usize| med(&samples[vi][ri], |s| s.server_cpu_us);
        for (vi, variant) in paced.iter().enumerate() {
            let s = &samples[vi][ri];
            let baseline = PAIRS.iter().find_map(|(a, b)| {
                let label = variant.name.split_once(", ").map_or("", |(_, l)| l);
                let base = format!("{b}, {label}");
                (variant.name.starts_with(a))
                    .then(|| paced.iter().position(|v| v.name == base))
                    .flatten()
                    .map(|bi| (paced[bi].name.clone(), cpu(bi)))
            });
            let ratio = baseline.as_ref().map(|(_, b)| cpu(vi) / b);
            if let (Some((base, _)), Some(r)) = (&baseline, ratio) {
                let verdict = if r <= 1.10 { "met" } else { "missed" };
                goals.push(format!(
                    "- {rate}/s: {} {:.1} µs/req against {base} {:.1}: **{r:.2}×** (≤ 1.10×: {verdict})",
                    variant.name,
                    cpu(vi),
                    baseline.as_ref().map_or(0.0, |(_, b)| *b)
                ));
            }
            let opt = |f: fn(&Sample) -> Option<f64>| {
                s[0].redis_cpu_us
                    .map(|_| median(s.iter().filter_map(f).collect()))
            };
            println!(
                "{}",
                table.row([
                    variant.name.clone(),
                    rate.to_string(),
                    format!("{:.0}", med(s, |x| x.rps)),
                    format!("{:.1}", cpu(vi)),
                    opt(|x| x.redis_cpu_us).map_or("–".into(), |c| format!("{c:.1}")),
                    opt(|x| x.commands).map_or("–".into(), |c| format!("{c:.2}")),
                    format!("{:.0}", med(s, |x| x.p50_us)),
                    format!("{:.0}", med(s, |x| x.p99_us)),
                    s.iter().map(|x| x.errors).sum::<u64>().to_string(),
                    ratio.map_or("–".into(), |r| format!("{r:.2}×")),
                ])
            );
        }
    }
    println!("\nGoals (server CPU per request, paced):\n");
    for goal in goals {
        println!("{goal}");
    }
}
