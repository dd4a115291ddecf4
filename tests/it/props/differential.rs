//! The memory store and the Lua scripts must decide identically. Random traces — several
//! limits of mixed algorithms, costs from 0 to above the limit, time steps from 0 to several
//! periods, bursts of concurrent identical requests — run through `MemoryStore` and through
//! `RedisStore` on a real Redis, with time driven explicitly (the scripts' test-only time
//! argument). Every decision must be equal. Half the traces count their last limit under a
//! tenant's key shared by two of the three clients (a hierarchical quota). Some steps are
//! charges (`Store::charge`: costs up to three times a limit, landing past it as debt) rather
//! than checks: the two stores must charge alike and answer alike after. A third of the
//! traces give each limit a cost of its own in their checks (`LimitCosts`: the sliding logs
//! one between them), through the scripts' per-limit costs; half of those checks charge every
//! cost whatever it meets (`Commit::Always`, the RLS's default: each limit committed where it
//! fits, charged past its limit where not), unless the policy has a concurrency limit. A
//! quarter of the traces have calendar windows (days, weeks, months in Berlin, New York and
//! UTC, some anchored) and start just before a month's end or a daylight-saving change, with
//! steps of up to days or months.
//!
//! `PROPTEST_CASES=N` runs N traces (default 2000). Shrunk failures are kept in
//! `tests/differential.proptest-regressions` and replayed first.

use crate::support;

use std::future::IntoFuture;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use redlimit::calendar::Calendar;
use redlimit::store::{Commit, ManualClock, MemoryStore, RedisStore};
use redlimit::{Algorithm, Decision, Key, Limit, Policy};
use support::{RedisServer, unique_prefix};

/// Near 2023-11, off any round boundary so windows fall anywhere.
const T0: u64 = 1_700_000_123_456_789;

#[derive(Debug, Clone)]
struct Step {
    advance_us: u64,
    key: u8,
    cost: u64,
    /// With [`Trace::each`], each limit's cost (the sliding logs share the first log's).
    costs: Vec<u64>,
    burst: usize,
    /// A charge rather than a check.
    charge: bool,
    /// With [`Trace::each`], a check whose every cost lands (`Commit::Always`).
    always: bool,
}

#[derive(Debug, Clone)]
struct Trace {
    /// The time of the first step.
    t0: u64,
    limits: Vec<Limit>,
    /// Whether the last limit counts under a tenant's key (keys 0 and 2 share one) rather
    /// than the request's: a hierarchical quota.
    tenants: bool,
    /// Whether each limit is charged its own cost (`Step::costs`).
    each: bool,
    steps: Vec<Step>,
}

fn limit() -> impl Strategy<Value = Limit> {
    (
        prop::sample::select(Algorithm::ALL.to_vec()),
        1u64..=12,
        // Periods from 1 ms to 10 s, in ms, so ratios like P/N are rarely whole.
        prop_oneof![1u64..=50, 51u64..=10_000],
    )
        .prop_map(|(a, n, ms)| Limit::new(a, n, Duration::from_millis(ms)).unwrap())
}

/// A calendar window: a day, week or month in one of three zones, some anchored.
fn calendar_limit() -> impl Strategy<Value = Limit> {
    (
        prop::sample::select(vec!["Europe/Berlin", "America/New_York", "UTC"]),
        0usize..6,
        1u64..=12,
    )
        .prop_map(|(zone, shape, n)| {
            let calendar = match shape {
                0 => Calendar::day(),
                1 => Calendar::day().at(2, 30),
                2 => Calendar::week(),
                3 => Calendar::month(),
                4 => Calendar::month().on_day(31).at(23, 0),
                _ => Calendar::month().on_day(15),
            };
            Limit::calendar(n, calendar.in_zone(zone).unwrap()).unwrap()
        })
}

/// The first step's time of a trace with calendar windows: just before a month's end or a
/// daylight-saving change in one of the zones.
fn calendar_t0() -> impl Strategy<Value = u64> {
    const H: u64 = 3_600_000_000;
    (
        prop::sample::select(vec![
            1_706_742_000_000_000, // 2024-01-31T23:00Z: February in Berlin
            1_709_251_200_000_000, // 2024-03-01T00:00Z: after a leap day
            1_710_054_000_000_000, // 2024-03-10T07:00Z: New York springs forward
            1_711_846_800_000_000, // 2024-03-31T01:00Z: Berlin springs forward
            1_729_990_800_000_000, // 2024-10-27T01:00Z: Berlin falls back
            1_730_613_600_000_000, // 2024-11-03T06:00Z: New York falls back
        ]),
        0..=4 * H,
    )
        .prop_map(|(change, before)| change - before)
}

fn trace() -> impl Strategy<Value = Trace> {
    prop_oneof![
        3 => (prop::collection::vec(limit(), 1..=3), Just(T0)),
        1 => (
            prop::collection::vec(prop_oneof![limit(), calendar_limit()], 1..=3)
                .prop_filter("a calendar window", |l| {
                    l.iter().any(|l| l.algorithm() == Algorithm::Calendar)
                }),
            calendar_t0(),
        ),
    ]
    .prop_flat_map(|(limits, t0)| {
        let longest = limits
            .iter()
            .map(|l| l.period().as_micros() as u64)
            .max()
            .unwrap();
        let most = limits.iter().map(Limit::count).max().unwrap();
        let step = (
            prop_oneof![
                3 => Just(0u64),
                4 => 0..=longest / 4,
                2 => 0..=longest * 3,
            ],
            0u8..3,
            prop_oneof![6 => Just(1u64), 3 => 0..=most + 2, 1 => 0..=3 * most],
            prop::collection::vec(
                prop_oneof![4 => Just(1u64), 2 => Just(0u64), 3 => 0..=most + 2],
                limits.len(),
            ),
            prop_oneof![4 => Just(1usize), 1 => 2usize..=5],
            prop_oneof![4 => Just(false), 1 => Just(true)],
            prop::bool::ANY,
        )
            .prop_map({
                let limits = limits.clone();
                move |(advance_us, key, cost, mut costs, burst, charge, always)| {
                    let is_log = |i: usize| limits[i].algorithm() == Algorithm::SlidingLog;
                    if let Some(first) = (0..limits.len()).find(|&i| is_log(i)) {
                        for i in (0..limits.len()).filter(|&i| is_log(i)) {
                            costs[i] = costs[first];
                        }
                    }
                    Step {
                        advance_us,
                        key,
                        cost,
                        costs,
                        burst,
                        charge,
                        always: always
                            && !limits
                                .iter()
                                .any(|l| l.algorithm() == Algorithm::Concurrency),
                    }
                }
            });
        (
            prop::collection::vec(step, 1..40),
            prop::bool::ANY,
            prop::bool::weighted(1.0 / 3.0),
        )
            .prop_map(move |(steps, tenants, each)| Trace {
                t0,
                limits: limits.clone(),
                tenants,
                each,
                steps,
            })
    })
}

/// Decisions of a burst of identical requests, in a canonical order: which request of the
/// burst Redis served first is not deterministic, the multiset of answers is.
fn canonical(mut decisions: Vec<Decision>) -> Vec<String> {
    let mut out: Vec<String> = decisions.drain(..).map(|d| format!("{d:?}")).collect();
    out.sort();
    out
}

async fn run(redis: &RedisStore, case: u64, trace: Trace) -> Result<(), TestCaseError> {
    let policy = Policy::new(format!("c{case}"), trace.limits.iter().copied())
        .map_err(|e| TestCaseError::fail(format!("policy: {e}")))?;
    let clock = ManualClock::new(trace.t0);
    let memory = MemoryStore::with_clock(clock.clone());
    let mut now = trace.t0;
    for (i, step) in trace.steps.iter().enumerate() {
        now += step.advance_us;
        clock.set(now);
        let mut key = Key::new(format!("k{}", step.key));
        if trace.tenants {
            let tenant = Key::new(format!("t{}", step.key % 2));
            key = key.with_limit_key(trace.limits.len() - 1, tenant);
        }
        let commit = if step.always {
            Commit::Always
        } else {
            Commit::AllOrNone
        };
        let from_redis = join_all((0..step.burst).map(|_| {
            if step.charge {
                redlimit::__private::charge_at(redis, &policy, &key, step.cost, now)
            } else if trace.each {
                redlimit::__private::check_costs_at(redis, &policy, &key, &step.costs, commit, now)
            } else {
                redlimit::__private::check_at(redis, &policy, &key, step.cost, now)
            }
            .into_future()
        }))
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TestCaseError::fail(format!("redis: {e}")))?;
        let from_memory: Vec<Decision> = (0..step.burst)
            .map(|_| {
                if step.charge {
                    Ok(memory.charge_now(&policy, &key, step.cost))
                } else if trace.each {
                    memory
                        .check_costs_now(&policy, &key, &step.costs, commit)
                        .map_err(|e| TestCaseError::fail(format!("memory: {e}")))
                } else {
                    Ok(memory.check_now(&policy, &key, step.cost))
                }
            })
            .collect::<Result<_, _>>()?;
        prop_assert_eq!(
            canonical(from_redis),
            canonical(from_memory),
            "step {} at t0+{}µs",
            i,
            now - trace.t0
        );
    }
    Ok(())
}

/// Runs the traces against `server`; `default_cases` unless `PROPTEST_CASES` says otherwise.
fn differential(server: &RedisServer, default_cases: u32) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let redis = runtime
        .block_on(
            RedisStore::builder(server.url())
                .prefix(unique_prefix("diff"))
                .connect(),
        )
        .expect("connect");
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    let mut runner = TestRunner::new(Config {
        cases,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        ..Config::default()
    });
    let case = AtomicU64::new(0);
    let result = runner.run(&trace(), |trace| {
        let n = case.fetch_add(1, Ordering::Relaxed);
        runtime.block_on(run(&redis, n, trace))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn memory_and_redis_decide_identically() {
    differential(&RedisServer::start(), 2000);
}

#[test]
fn memory_and_valkey_decide_identically() {
    if let Some(server) = support::valkey("memory_and_valkey_decide_identically") {
        differential(&server, 300);
    }
}
