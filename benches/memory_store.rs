//! One decision in `MemoryStore` per algorithm — one hot key and 100k keys, one thread and
//! four contending threads — next to governor's keyed GCRA limiter in the same run.
//!
//! `cargo bench --bench memory_store`; the numbers and ratios are in `benches/README.md`.

mod support;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use governor::{Quota, RateLimiter};
use redlimit::store::MemoryStore;
use redlimit::{Algorithm, Key, Limit, Policy};

const KEYS: usize = 100_000;
const THREADS: usize = 4;
/// A rate high enough that nearly every check is admitted: the common path.
const RATE: u32 = 1_000_000;

fn keys(n: usize) -> Arc<Vec<Key>> {
    Arc::new((0..n).map(support::client_key).collect())
}

/// Runs `iters` calls of `f(i)` split over `threads` threads; returns the wall time.
fn contended(iters: u64, threads: usize, f: impl Fn(usize) + Send + Sync + 'static) -> Duration {
    let f = Arc::new(f);
    let per = (iters as usize).div_ceil(threads);
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let f = Arc::clone(&f);
            std::thread::spawn(move || {
                for i in 0..per {
                    f(t * per + i);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let hot = keys(1);
    let many = keys(KEYS);
    for (label, keyset) in [("1 key", &hot), ("100k keys", &many)] {
        let mut group = c.benchmark_group(format!("decision/{label}"));
        for algorithm in Algorithm::ALL {
            let policy = Arc::new(
                Policy::new(
                    "bench",
                    [Limit::new(algorithm, u64::from(RATE), Duration::from_secs(1)).unwrap()],
                )
                .unwrap(),
            );
            let store = MemoryStore::builder().max_keys(2 * KEYS).build();
            let ks = Arc::clone(keyset);
            group.bench_function(BenchmarkId::new("redlimit", algorithm.name()), |b| {
                let mut i = 0;
                b.iter(|| {
                    i += 1;
                    black_box(store.check_now(&policy, &ks[i % ks.len()], 1));
                })
            });
            let (store, ks, policy) = (store.clone(), Arc::clone(keyset), Arc::clone(&policy));
            group.bench_function(
                BenchmarkId::new(format!("redlimit x{THREADS} threads"), algorithm.name()),
                move |b| {
                    let (store, ks, policy) = (store.clone(), Arc::clone(&ks), Arc::clone(&policy));
                    b.iter_custom(move |iters| {
                        let (store, ks, policy) =
                            (store.clone(), Arc::clone(&ks), Arc::clone(&policy));
                        contended(iters, THREADS, move |i| {
                            black_box(store.check_now(&policy, &ks[i % ks.len()], 1));
                        })
                    })
                },
            );
        }
        let limiter = Arc::new(RateLimiter::<String, _, _>::dashmap(Quota::per_second(
            NonZeroU32::new(RATE).unwrap(),
        )));
        let names: Arc<Vec<String>> =
            Arc::new(keyset.iter().map(|k| k.as_str().to_owned()).collect());
        group.bench_function(BenchmarkId::new("governor", "gcra"), |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                black_box(limiter.check_key(&names[i % names.len()]).is_ok());
            })
        });
        group.bench_function(
            BenchmarkId::new(format!("governor x{THREADS} threads"), "gcra"),
            |b| {
                b.iter_custom(|iters| {
                    let (limiter, names) = (Arc::clone(&limiter), Arc::clone(&names));
                    contended(iters, THREADS, move |i| {
                        black_box(limiter.check_key(&names[i % names.len()]).is_ok());
                    })
                })
            },
        );
        group.finish();
    }
}

/// A policy of three GCRA limits, 100k clients: every limit under the client's key, against
/// per client, per tenant (100 tenants) and global (each level its own entry).
fn hierarchical(c: &mut Criterion) {
    let limit = Limit::gcra(u64::from(RATE), Duration::from_secs(1)).unwrap();
    let policy = Policy::new("bench", [limit, limit, limit]).unwrap();
    let flat = keys(KEYS);
    let levels: Vec<Key> = flat
        .iter()
        .enumerate()
        .map(|(i, k)| {
            k.clone()
                .with_limit_key(1, Key::new(format!("tenant:{}", i % 100)))
                .with_limit_key(2, Key::new("global"))
        })
        .collect();
    let mut group = c.benchmark_group("decision/3 limits, 100k keys");
    for (name, keyset) in [
        ("one key", flat.to_vec()),
        ("client, tenant, global", levels),
    ] {
        let store = MemoryStore::builder().max_keys(4 * KEYS).build();
        group.bench_function(name, |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                black_box(store.check_now(&policy, &keyset[i % keyset.len()], 1));
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench, hierarchical
}
criterion_main!(benches);
