//! Reservations in Redis (`lua/reserve.lua`) and in memory (`algorithm/reserve.rs`) must
//! agree: random traces of reservations (with and without room to wait), charges and give
//! backs, over one or two GCRA and token bucket limits with costs per limit, run through
//! both with time driven explicitly (the script's test-only time). Every answer must be
//! equal. `PROPTEST_CASES=N` runs N traces (default 200).

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redlimit::store::{ManualClock, MemoryStore, RedisStore, Reserved};
use redlimit::{Algorithm, Key, Limit, Policy};

use crate::support::{RedisServer, unique_prefix};

const T0: u64 = 1_700_000_123_456_789;

#[derive(Debug, Clone)]
enum Op {
    Reserve(Duration),
    Charge,
    GiveBack,
}

#[derive(Debug, Clone)]
struct Step {
    advance_us: u64,
    costs: Vec<u64>,
    op: Op,
}

fn limit() -> impl Strategy<Value = Limit> {
    (
        prop::sample::select(vec![Algorithm::Gcra, Algorithm::TokenBucket]),
        1u64..=8,
        prop_oneof![1u64..=50, 51u64..=5_000],
    )
        .prop_map(|(a, n, ms)| Limit::new(a, n, Duration::from_millis(ms)).unwrap())
}

fn trace() -> impl Strategy<Value = (Vec<Limit>, Vec<Step>)> {
    prop::collection::vec(limit(), 1..=2).prop_flat_map(|limits| {
        let k = limits.len();
        let step = (
            prop_oneof![3 => Just(0u64), 3 => 0u64..=500_000, 1 => 0u64..=8_000_000],
            prop::collection::vec(prop_oneof![4 => Just(1u64), 2 => 0u64..=10], k),
            prop_oneof![
                3 => Just(Op::Reserve(Duration::ZERO)),
                6 => (0u64..=10_000).prop_map(|ms| Op::Reserve(Duration::from_millis(ms))),
                1 => Just(Op::Charge),
                2 => Just(Op::GiveBack),
            ],
        )
            .prop_map(|(advance_us, costs, op)| Step {
                advance_us,
                costs,
                op,
            });
        (Just(limits), prop::collection::vec(step, 1..30))
    })
}

/// An answer without its time of the store's own making.
fn outcome(answer: Reserved) -> String {
    match answer {
        Reserved::Slot(r) => format!("slot after {:?} for {:?}", r.wait(), r.costs()),
        other => format!("{other:?}"),
    }
}

async fn run(
    redis: &RedisStore,
    case: u64,
    limits: Vec<Limit>,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    let policy = Policy::new(format!("r{case}"), limits).unwrap();
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::with_clock(clock.clone());
    let key = Key::new("k");
    let mut now = T0;
    for (i, step) in steps.iter().enumerate() {
        now += step.advance_us;
        clock.set(now);
        let costs = &step.costs[..];
        let (max_wait, give_back) = match step.op {
            Op::Reserve(max) => (Some(max), false),
            Op::Charge => (None, false),
            Op::GiveBack => (None, true),
        };
        let from_redis =
            redlimit::__private::reserve_at(redis, &policy, &key, costs, max_wait, give_back, now)
                .await
                .map_err(|e| TestCaseError::fail(format!("redis: {e}")))?;
        let from_memory = match step.op {
            Op::Reserve(max) => memory.reserve_now(&policy, &key, costs, max),
            Op::Charge => memory
                .charge_costs_now(&policy, &key, costs)
                .map(|()| Reserved::Slot(redlimit::__private::reservation(costs, now, 0))),
            Op::GiveBack => memory
                .give_back_now(&policy, &key, costs)
                .map(|()| Reserved::Slot(redlimit::__private::reservation(costs, now, 0))),
        }
        .map_err(|e| TestCaseError::fail(format!("memory: {e}")))?;
        prop_assert_eq!(
            outcome(from_redis),
            outcome(from_memory),
            "step {} ({:?}) at t0+{}µs",
            i,
            step,
            now - T0
        );
    }
    Ok(())
}

#[test]
fn redis_and_memory_reserve_alike() {
    let server = RedisServer::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let redis = runtime
        .block_on(
            RedisStore::builder(server.url())
                .prefix(unique_prefix("reserve-diff"))
                .connect(),
        )
        .expect("connect");
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let case = std::sync::atomic::AtomicU64::new(0);
    let result = runner.run(&trace(), |(limits, steps)| {
        let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        runtime.block_on(run(&redis, n, limits, steps))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
