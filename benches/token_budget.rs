//! Token budgets on Redis: estimate and reconcile beside the same load without it.
//!
//! ```text
//! cargo bench --bench token_budget                 # 2 whole minutes, ~3 min in all
//! REDLIMIT_BENCH_PERIOD_SECS=10 cargo bench --bench token_budget   # a quick look
//! ```
//!
//! One policy, 10 000 tokens a minute (a fixed window: "a minute" is one window, aligned to
//! the Unix epoch as the store aligns it), one API key per variant. 64 paced clients per
//! variant send requests through the layer (a `tower` service, no sockets) to a fake upstream
//! that takes 0.5–1.5 s and reports the tokens used, uniform 50–500, in a header. Clients are
//! paced: one admitted sends its next request when the answer comes; one refused asks again
//! 200–300 ms later (the `Retry-After` of a fixed window is its end, which would leave every
//! token given back during the window unused: the budget's use is what is measured). The
//! three variants run at once, each on its own key and `RedisStore`, on one `redis-server`:
//!
//! - **reconcile**: admitted at an estimate of 500, settled to the real cost
//!   (`settle_with`): a refund of the difference, a charge of any excess;
//! - **estimate only**: admitted at 500, never settled (the budget counts estimates);
//! - **charge after**: admitted at 1 token, the real cost charged afterwards
//!   (`settle_with` from an estimate of 1): the admission check knows nothing of the cost.
//!
//! Per whole window (the partial first one is warm-up): the real tokens of the requests
//! admitted in it (by the store's time of the admission), their overshoot past the limit, the budget used (real
//! tokens ÷ limit), requests admitted and refused, and the store calls made per admitted
//! request (its check and its settle) and per request sent (refusals included; the deny cache
//! answers most of those). Knobs: `REDLIMIT_BENCH_PERIOD_SECS` (60), `REDLIMIT_BENCH_WINDOWS`
//! (2), `REDLIMIT_BENCH_CLIENTS` (64).

mod support;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::{Request, Response, StatusCode};
use redlimit::store::{Check, RedisStore, Refund, Refunds, Store, StoreFuture};
use redlimit::{Decision, Key, Limit, Policy, RateLimitLayer};
use support::redis_server::RedisServer;
use support::{Table, knob_where, machine_line, today};
use tower::{Service, ServiceBuilder, ServiceExt};

const LIMIT: u64 = 10_000;
const ESTIMATE: u64 = 500;

#[derive(Clone, Copy)]
enum Variant {
    Reconcile,
    EstimateOnly,
    ChargeAfter,
}

impl Variant {
    const ALL: [Variant; 3] = [
        Variant::Reconcile,
        Variant::EstimateOnly,
        Variant::ChargeAfter,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::Reconcile => "reconcile (estimate 500, settle)",
            Variant::EstimateOnly => "estimate only (500, no settle)",
            Variant::ChargeAfter => "charge after (admit at 1, charge the cost)",
        }
    }
}

/// The store calls a variant made: checks that admitted, checks that refused, settles.
#[derive(Default)]
struct Calls {
    allowed: AtomicU64,
    denied: AtomicU64,
    settles: AtomicU64,
}

/// A store that counts the calls made to the one it wraps.
struct Counting {
    inner: RedisStore,
    calls: Arc<Calls>,
}

impl Store for Counting {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        let (check, calls) = (self.inner.check(policy, key, cost), Arc::clone(&self.calls));
        Check::pending(async move {
            let decision = check.await?;
            let counter = match decision.is_allowed() {
                true => &calls.allowed,
                false => &calls.denied,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            Ok(decision)
        })
    }
    fn charge(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        self.calls.settles.fetch_add(1, Ordering::Relaxed);
        self.inner.charge(policy, key, cost)
    }
    fn refunds(&self) -> Option<&dyn Refunds> {
        Some(self)
    }
    fn failure_domain(&self, policy: &Policy, key: &Key) -> u16 {
        self.inner.failure_domain(policy, key)
    }
    fn kind(&self) -> &'static str {
        "redis"
    }
    fn prepare(&self, policy: &Policy) {
        self.inner.prepare(policy);
    }
}

impl Refunds for Counting {
    fn refund(&self, policy: &Policy, key: &Key, refund: Refund) -> StoreFuture<bool> {
        self.calls.settles.fetch_add(1, Ordering::Relaxed);
        self.inner
            .refunds()
            .expect("redis refunds")
            .refund(policy, key, refund)
    }
}

/// What one variant's clients saw: per window (its index since the epoch), the real tokens
/// and the requests admitted in it; the requests refused.
#[derive(Default)]
struct Seen {
    windows: Mutex<BTreeMap<u64, (u64, u64)>>,
    refused: Mutex<BTreeMap<u64, u64>>,
}

/// xorshift64*: the clients' costs, latencies and jitter, the same every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The fake upstream: takes 0.5–1.5 s (`x-latency-ms`), reports `x-real` tokens used, and
/// when the store admitted the request (`x-admitted-ms`, on the store's clock: the window
/// it was counted in).
async fn upstream(request: Request<String>) -> Result<Response<String>, Infallible> {
    let header = |name| -> u64 { request.headers()[name].to_str().unwrap().parse().unwrap() };
    let decision = request
        .extensions()
        .get::<Decision>()
        .expect("the layer's decision");
    let admitted = decision
        .evaluated_at()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    tokio::time::sleep(Duration::from_millis(header("x-latency-ms"))).await;
    let response = Response::builder()
        .header("x-tokens-used", header("x-real"))
        .header("x-admitted-ms", admitted as u64);
    Ok(response.body(String::new()).unwrap())
}

async fn run(
    variant: Variant,
    store: Counting,
    period: Duration,
    end_ms: u64,
    clients: u64,
) -> Arc<Seen> {
    let policy = Policy::new("tokens", [Limit::fixed_window(LIMIT, period).unwrap()]).unwrap();
    let estimate = match variant {
        Variant::ChargeAfter => 1,
        _ => ESTIMATE,
    };
    let mut builder = RateLimitLayer::builder(store, policy)
        .key(|_: &http::request::Parts| Some(Key::new("api-key")))
        .cost(move |_: &http::request::Parts| estimate)
        // A late store would hand decisions to the local fallback: not what is measured.
        .store_deadline(Duration::from_secs(2));
    if !matches!(variant, Variant::EstimateOnly) {
        builder = builder.settle_with(|r: &http::response::Parts| {
            r.headers.get("x-tokens-used")?.to_str().ok()?.parse().ok()
        });
    }
    let service = ServiceBuilder::new()
        .layer(builder.build().unwrap())
        .service_fn(upstream);
    let seen = Arc::new(Seen::default());
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let (mut service, seen) = (service.clone(), Arc::clone(&seen));
            tokio::spawn(async move {
                let mut rng =
                    Rng(0x9e37_79b9_7f4a_7c15 ^ (client + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9));
                while unix_ms() < end_ms {
                    let real = 50 + rng.below(451);
                    let request = Request::builder()
                        .header("x-real", real)
                        .header("x-latency-ms", 500 + rng.below(1001))
                        .body(String::new())
                        .unwrap();
                    let period_ms = period.as_millis() as u64;
                    let asked = unix_ms() / period_ms;
                    let response = service.ready().await.unwrap().call(request).await.unwrap();
                    if response.status() == StatusCode::TOO_MANY_REQUESTS {
                        *seen.refused.lock().unwrap().entry(asked).or_default() += 1;
                        let wait = Duration::from_millis(200 + rng.below(101));
                        let left = Duration::from_millis(end_ms.saturating_sub(unix_ms()));
                        tokio::time::sleep(wait.min(left)).await;
                        continue;
                    }
                    let admitted: u64 = response.headers()["x-admitted-ms"]
                        .to_str()
                        .unwrap()
                        .parse()
                        .unwrap();
                    let window = admitted / period_ms;
                    let mut windows = seen.windows.lock().unwrap();
                    let (tokens, admitted) = windows.entry(window).or_default();
                    (*tokens, *admitted) = (*tokens + real, *admitted + 1);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    seen
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !support::bench_mode("token_budget: run with `cargo bench --bench token_budget`") {
        return;
    }
    let period_secs: u64 = knob_where("REDLIMIT_BENCH_PERIOD_SECS", 60, "at least 2", |s| *s >= 2);
    let windows: u64 = knob_where("REDLIMIT_BENCH_WINDOWS", 2, "at least 1", |w| *w >= 1);
    let clients: u64 = knob_where("REDLIMIT_BENCH_CLIENTS", 64, "at least 1", |c| *c >= 1);
    let period = Duration::from_secs(period_secs);
    let server = RedisServer::start();
    let period_ms = period_secs * 1000;
    let first = unix_ms() / period_ms + 1;
    let end_ms = (first + windows) * period_ms;
    println!(
        "{} clients a variant, {LIMIT} tokens per {period_secs} s; measuring windows {first}..{} (ends in {:.0} s)",
        clients,
        first + windows,
        (end_ms - unix_ms()) as f64 / 1000.0
    );
    let started = Instant::now();
    let mut runs = Vec::new();
    for variant in Variant::ALL {
        let inner = RedisStore::builder(server.url())
            .prefix(format!("bench-{}", variant as u8))
            .connect()
            .await
            .expect("connect");
        let calls = Arc::new(Calls::default());
        let store = Counting {
            inner,
            calls: Arc::clone(&calls),
        };
        runs.push((
            variant,
            calls,
            tokio::spawn(run(variant, store, period, end_ms, clients)),
        ));
    }
    let table = Table::new(&[
        "variant",
        "window",
        "admitted",
        "refused",
        "tokens admitted",
        "overshoot",
        "budget used",
        "store calls / admitted",
        "store calls / request",
    ]);
    let bound = LIMIT + clients * ESTIMATE;
    let (mut rows, mut verdicts) = (Vec::new(), Vec::new());
    for (variant, calls, run) in runs {
        let seen = run.await.unwrap();
        let windows_seen = seen.windows.lock().unwrap();
        let refused_seen = seen.refused.lock().unwrap();
        let (allowed, denied, settles) = (
            calls.allowed.load(Ordering::Relaxed),
            calls.denied.load(Ordering::Relaxed),
            calls.settles.load(Ordering::Relaxed),
        );
        let admitted_all: u64 = windows_seen.values().map(|w| w.1).sum();
        let refused_all: u64 = refused_seen.values().sum();
        let per_admitted = (allowed + settles) as f64 / admitted_all.max(1) as f64;
        let per_request =
            (allowed + denied + settles) as f64 / (admitted_all + refused_all).max(1) as f64;
        for w in first..first + windows {
            let (tokens, admitted) = windows_seen.get(&w).copied().unwrap_or_default();
            let refused = refused_seen.get(&w).copied().unwrap_or_default();
            let used = tokens as f64 / LIMIT as f64 * 100.0;
            rows.push(table.row([
                variant.name().to_owned(),
                (w - first + 1).to_string(),
                admitted.to_string(),
                refused.to_string(),
                tokens.to_string(),
                tokens.saturating_sub(LIMIT).to_string(),
                format!("{used:.1} %"),
                format!("{per_admitted:.2}"),
                format!("{per_request:.2}"),
            ]));
            if matches!(variant, Variant::Reconcile) {
                verdicts.push(format!(
                    "window {}: tokens {tokens} ≤ {bound}: {}; used {used:.1} % ≥ 90 %: {}; calls/admitted {per_admitted:.2} ≤ 2: {}",
                    w - first + 1,
                    tokens <= bound,
                    used >= 90.0,
                    per_admitted <= 2.0
                ));
            }
        }
    }
    println!(
        "\n{} ({}; {:.0} s)\n",
        today(),
        machine_line(),
        started.elapsed().as_secs_f64()
    );
    println!("{}", table.header());
    for row in rows {
        println!("{row}");
    }
    println!("\nreconcile against its bounds (limit + one estimate per client = {bound}):");
    for verdict in verdicts {
        println!("  {verdict}");
    }
}
