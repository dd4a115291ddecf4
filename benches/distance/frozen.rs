//! Part 3, a frozen Redis: an open loop of paced requests before, during and after a freeze
//! (the proxy's or `SIGSTOP`), under each failure mode.

use std::time::{Duration, Instant};

use axum::Router;
use http::HeaderValue;
use redlimit::layer::OnStoreError;
use tokio::runtime::Handle;

use crate::app::{Outcome, Seen, Tally, call, layered, start_proxy, wide_policy};
use crate::report::ms;
use crate::support::redis_server::RedisServer;
use crate::support::redis_store;
use crate::support::{Report, Table, percentile};

/// The frozen part's pace: 4 requests per second.
const TICK: Duration = Duration::from_millis(250);
/// A request slower than this counts against the frozen-Redis goal.
const SLOW: Duration = Duration::from_millis(50);
/// How long after the thaw the frozen part waits for a store decision.
const RESUME_LIMIT: Duration = Duration::from_secs(10);

/// How Redis is frozen.
#[derive(Clone, Copy)]
enum Stop {
    /// The proxy delivers nothing either way.
    Proxy,
    /// `redis-server` gets `SIGSTOP`.
    Sigstop,
}

/// Sends one request per `TICK` from `at` on, `count` of them, each in a task of its own (an
/// open loop: a slow answer delays no later request).
async fn paced(
    app: &Router,
    key: &HeaderValue,
    at: Instant,
    count: usize,
) -> Vec<(Instant, tokio::task::JoinHandle<Outcome>)> {
    let mut sent = Vec::with_capacity(count);
    for n in 0..count {
        let when = at + TICK * n as u32;
        tokio::time::sleep_until(when.into()).await;
        let (app, key) = (app.clone(), key.clone());
        sent.push((
            Instant::now(),
            tokio::spawn(async move { call(&app, key).await }),
        ));
    }
    sent
}

async fn outcomes(sent: Vec<(Instant, tokio::task::JoinHandle<Outcome>)>) -> Vec<Outcome> {
    let mut done = Vec::with_capacity(sent.len());
    for (_, task) in sent {
        done.push(task.await.expect("a request task"));
    }
    done
}

struct FrozenRow {
    frozen: Vec<Outcome>,
    /// From the thaw to the first store decision, if one came within `RESUME_LIMIT`.
    resumed: Option<Duration>,
    /// Requests after the thaw until then.
    after: Vec<Outcome>,
}

async fn frozen_run(
    proxies: &Handle,
    redis: &RedisServer,
    rtt: Duration,
    stop: Stop,
    mode: OnStoreError,
) -> FrozenRow {
    let proxy = start_proxy(proxies, redis.port(), rtt).await;
    let store = redis_store(&proxy.url(), "frozen").await;
    let app = layered(store, wide_policy(), mode);
    let key = HeaderValue::from_static("sk_frozen_client");
    // Healthy for 2 s.
    let healthy = outcomes(paced(&app, &key, Instant::now(), 8).await).await;
    if healthy.iter().any(|o| o.seen != Seen::Store) {
        eprintln!("WARNING: before the freeze, not every decision came from the store");
    }
    let frozen_at = Instant::now();
    match stop {
        Stop::Proxy => proxy.freeze(),
        Stop::Sigstop => redis.freeze(),
    }
    let frozen = outcomes(paced(&app, &key, frozen_at, 16).await).await;
    tokio::time::sleep_until((frozen_at + Duration::from_secs(4)).into()).await;
    let thawed_at = Instant::now();
    match stop {
        Stop::Proxy => proxy.thaw(),
        Stop::Sigstop => redis.thaw(),
    }
    // 4 per second until a decision comes from the store (checked as answers arrive).
    let mut flying: Vec<(Instant, tokio::task::JoinHandle<Outcome>)> = Vec::new();
    let mut after: Vec<(Instant, Outcome)> = Vec::new();
    let mut resumed = None;
    let mut n = 0u32;
    while resumed.is_none() && thawed_at.elapsed() < RESUME_LIMIT {
        tokio::time::sleep_until((thawed_at + TICK * n).into()).await;
        n += 1;
        let (app, key) = (app.clone(), key.clone());
        flying.push((
            Instant::now(),
            tokio::spawn(async move { call(&app, key).await }),
        ));
        // The answers due by the next tick.
        tokio::time::sleep_until((thawed_at + TICK * n - Duration::from_millis(1)).into()).await;
        let (done, still): (Vec<_>, Vec<_>) =
            flying.into_iter().partition(|(_, task)| task.is_finished());
        flying = still;
        for (at, task) in done {
            after.push((at, task.await.expect("a request task")));
        }
        // When the first store decision arrived, counted from the thaw.
        resumed = after
            .iter()
            .filter(|(_, outcome)| outcome.seen == Seen::Store)
            .map(|(at, outcome)| (*at + outcome.took).saturating_duration_since(thawed_at))
            .min();
    }
    for (at, task) in flying {
        after.push((at, task.await.expect("a request task")));
    }
    FrozenRow {
        frozen,
        resumed,
        after: after.into_iter().map(|(_, outcome)| outcome).collect(),
    }
}

pub(crate) async fn frozen(
    report: &mut Report,
    proxies: &Handle,
    redis: &RedisServer,
    rtt_ms: f64,
) {
    let table = Table::new(&[
        "Redis",
        "failure mode",
        "requests while frozen",
        "over 50 ms (goal ≤ 3)",
        "p50 ms",
        "max ms",
        "decisions by source",
        "store decides again after (goal ≤ 2 s)",
        "over 50 ms after the thaw",
    ])
    .left(1)
    .left(6);
    report.line(format!(
        "\n### Frozen Redis at {rtt_ms} ms: 4 requests/s, 4 s frozen, then thawed\n"
    ));
    report.line(table.header());
    let rtt = Duration::from_secs_f64(rtt_ms / 1e3);
    for (stop, stop_name) in [
        (Stop::Proxy, "proxy frozen"),
        (Stop::Sigstop, "`redis-server` SIGSTOP"),
    ] {
        for (mode, mode_name) in [
            (OnStoreError::local(), "`Local { instances: 1 }`"),
            (OnStoreError::Open, "`Open`"),
        ] {
            let row = frozen_run(proxies, redis, rtt, stop, mode).await;
            let mut took: Vec<f64> = row
                .frozen
                .iter()
                .map(|o| o.took.as_secs_f64() * 1e3)
                .collect();
            took.sort_by(f64::total_cmp);
            let slow = row.frozen.iter().filter(|o| o.took > SLOW).count();
            let slow_after = row.after.iter().filter(|o| o.took > SLOW).count();
            let mut tally = Tally::default();
            row.frozen.iter().for_each(|o| tally.add(o));
            report.line(table.row([
                stop_name.to_owned(),
                mode_name.to_owned(),
                row.frozen.len().to_string(),
                format!("{slow}{}", if slow <= 3 { "" } else { " (missed)" }),
                ms(percentile(&took, 0.5)),
                ms(percentile(&took, 1.0)),
                tally.sources(),
                match row.resumed {
                    Some(after) => format!(
                        "{} ms{}",
                        ms(after.as_secs_f64() * 1e3),
                        if after <= Duration::from_secs(2) {
                            ""
                        } else {
                            " (missed)"
                        }
                    ),
                    None => format!("not within {} s (missed)", RESUME_LIMIT.as_secs()),
                },
                format!("{slow_after} of {}", row.after.len()),
            ]));
        }
    }
}
