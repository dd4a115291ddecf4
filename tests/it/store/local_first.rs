//! Local-first mode against a real `redis-server`: four instances of the layer share one
//! fleet-wide limit at three times its rate, Redis costs a few commands per second whatever
//! the load, and when Redis dies each instance keeps its share and resumes without counting
//! twice. Cold keys are decided exactly (per-key limits hold to the unit across instances),
//! and a key turning hot and cooling again neither gains nor loses units.

use crate::support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Router;
use http::StatusCode;
use redlimit::key::Global;
use redlimit::store::{LocalFirstStore, RedisStore};
use redlimit::{DecisionSource, Limit, Policy, RateLimitLayer};
use support::{RedisServer, app, eventually, request, send, source_app, unique_prefix};

/// 200/s with a burst of 200: GCRA 200 per second. (1000 per second before, offered 3000
/// requests a second: a shared 2-core machine with CPU hogs and a build beside them offered
/// 1000 through the layers in a debug build, no more than the limit.)
const RATE: f64 = 200.0;
const BURST: f64 = 200.0;
/// Requests per second offered to each of the four instances: three times the limit in all.
const OFFERED: u64 = 150;
/// The load tests' sync interval.
const INTERVAL: Duration = Duration::from_millis(100);

/// The load tests run one after the other (the RLS's too, `rls/local_first.rs`): each needs
/// the machine's cores to offer its load.
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The algorithms local-first mode decides in memory once a key is hot.
const LOCAL_ALGORITHMS: [redlimit::Algorithm; 4] = [
    redlimit::Algorithm::Gcra,
    redlimit::Algorithm::TokenBucket,
    redlimit::Algorithm::FixedWindow,
    redlimit::Algorithm::SlidingWindow,
];

fn policy() -> Policy {
    Policy::new(
        "fleet",
        [Limit::gcra(RATE as u64, Duration::from_secs(1)).unwrap()],
    )
    .unwrap()
}

async fn instances(server: &RedisServer, prefix: &str) -> Vec<LocalFirstStore> {
    let mut stores = Vec::new();
    for _ in 0..4 {
        // Override polls are the exact store's (one GET per poll); slowed so the count below
        // is the local-first syncs' and heartbeats'.
        let redis = RedisStore::builder(server.url())
            .prefix(prefix)
            .override_poll(Duration::from_secs(5))
            .connect()
            .await
            .expect("connect to the test redis");
        stores.push(redis.local_first(INTERVAL).unwrap());
    }
    // Every instance has heard every other's heartbeat.
    let all = eventually(Duration::from_secs(10), async || {
        stores.iter().all(|s| s.instances() == 4)
    })
    .await;
    assert!(
        all,
        "instances counted: {:?}",
        stores
            .iter()
            .map(LocalFirstStore::instances)
            .collect::<Vec<_>>()
    );
    stores
}

/// One request of a load: when it was asked, whether it was admitted, and whether Redis
/// decided it (the key cold or joining on that instance) rather than memory.
#[derive(Debug, Clone, Copy)]
struct Seen {
    asked: Instant,
    admitted: bool,
    exact: bool,
}

/// What a load saw, per instance, and how long it ran.
struct Run {
    seen: Vec<Vec<Seen>>,
    elapsed: Duration,
}

impl Run {
    fn all(&self) -> impl Iterator<Item = &Seen> {
        self.seen.iter().flatten()
    }

    fn offered(&self) -> u64 {
        self.all().count() as u64
    }

    /// Requests Redis decided (each one at most one `EVALSHA`: a batch holds several).
    fn exact(&self) -> u64 {
        self.all().filter(|s| s.exact).count() as u64
    }

    /// Times an instance went from memory back to Redis (the key cooled there): each costs
    /// Redis a join, the exact decisions until its first sync, and one early sync round.
    fn cooled(&self) -> u64 {
        self.seen
            .iter()
            .map(|one| one.windows(2).filter(|w| !w[0].exact && w[1].exact).count() as u64)
            .sum()
    }

    /// What exact mode admits of the same requests and those made `before` (which used
    /// units of the burst), and the longest pause between two of them (see
    /// [`exact_admits`]); and what the limiter admitted of them all.
    fn exact_mode(&self, before: &[Seen]) -> (f64, Duration, u64) {
        let all = || self.all().chain(before);
        let checks: Checks = all().map(|s| (s.asked, Some(s.admitted))).collect();
        let (exact, pause) = exact_admits(&checks, RATE, BURST);
        (exact, pause, all().filter(|s| s.admitted).count() as u64)
    }
}

/// Offers `per_instance` requests per second to each app (a [`source_apps`] app) for `span`.
async fn load(apps: &[Router], per_instance: u64, span: Duration) -> Run {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for app in apps {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            // Three requests every tick, ticks spaced for the rate asked. A load held up (the
            // machine busy) resumes at its rate: a catch-up flood would meet each instance's
            // view before the next sync, and each admit the burst its view has refilled (see
            // `offer`). Exact mode is reckoned over the requests actually made.
            let mut ticks = tokio::time::interval(Duration::from_micros(3_000_000 / per_instance));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut seen = Vec::new();
            while started.elapsed() < span {
                ticks.tick().await;
                for _ in 0..3 {
                    let asked = Instant::now();
                    let res = send(&app, request("/", "10.0.0.1", &[])).await;
                    let (admitted, source) = match res.status() {
                        StatusCode::OK => (true, support::body_text(res).await),
                        StatusCode::TOO_MANY_REQUESTS => {
                            let decision = res.extensions().get::<redlimit::Decision>();
                            let source = decision.expect("a rejection carries its decision");
                            (false, format!("{:?}", source.source()))
                        }
                        other => panic!("unexpected status {other}"),
                    };
                    let exact = source == format!("{:?}", DecisionSource::Store);
                    seen.push(Seen {
                        asked,
                        admitted,
                        exact,
                    });
                }
            }
            seen
        }));
    }
    let mut seen = Vec::new();
    for task in tasks {
        seen.push(task.await.unwrap());
    }
    Run {
        seen,
        elapsed: started.elapsed(),
    }
}

/// Commands the server ran, by name (`INFO commandstats`).
pub(crate) fn commands(server: &RedisServer) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, stats) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats
                .split(',')
                .find_map(|f| f.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// Commands sent by clients between two snapshots: every command but those only the scripts
/// run (`INFO` is this test's own).
pub(crate) fn client_commands(
    before: &HashMap<String, u64>,
    after: &HashMap<String, u64>,
) -> (u64, u64) {
    const IN_SCRIPTS: [&str; 10] = [
        "get",
        "set",
        "hmget",
        "hset",
        "pexpire",
        "time",
        "zadd",
        "zremrangebyscore",
        "zcard",
        "info",
    ];
    let delta = |name: &String| after[name] - before.get(name).copied().unwrap_or(0);
    let all: u64 = after
        .keys()
        .filter(|n| n.as_str() != "info")
        .map(delta)
        .sum();
    let clients: u64 = after
        .keys()
        .filter(|n| !IN_SCRIPTS.contains(&n.as_str()))
        .map(delta)
        .sum();
    (clients, all)
}

/// Sends requests through each app until it decides in memory: the key is hot on every
/// instance (hot after a few decisions within one sync interval, local from its first sync).
/// Answers the requests made: their units count against the load that follows.
async fn hot_everywhere(apps: &[Router]) -> Vec<Seen> {
    let local = format!("{:?}", DecisionSource::LocalFirst);
    let mut seen = Vec::new();
    for (i, app) in apps.iter().enumerate() {
        // Back to back, not polled: a key turns hot on decisions close together.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut answer = String::new();
        while answer != local && Instant::now() < deadline {
            let asked = Instant::now();
            let res = send(app, request("/", "10.0.0.1", &[])).await;
            let admitted = res.status() == StatusCode::OK;
            answer = support::body_text(res).await;
            let exact = answer == format!("{:?}", DecisionSource::Store);
            seen.push(Seen {
                asked,
                admitted,
                exact,
            });
        }
        assert_eq!(answer, local, "the key turned hot on instance {i}");
    }
    seen
}

/// One app per store, answering with its decision's source.
fn source_apps(stores: &[LocalFirstStore]) -> Vec<Router> {
    stores
        .iter()
        .map(|s| {
            source_app(
                RateLimitLayer::builder(s.clone(), policy())
                    .key(Global)
                    .build()
                    .expect("valid layer"),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_instances_hold_a_fleet_limit_at_three_times_its_rate() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let server = RedisServer::start();
    let stores = instances(&server, &unique_prefix("lf")).await;
    let apps = source_apps(&stores);
    // Decisions say where they came from: exactly, by Redis, while the key is cold on an
    // instance; in memory once it is hot there.
    for source in &apps {
        let answer = support::body_text(send(source, request("/", "10.0.0.1", &[])).await).await;
        assert_eq!(answer, format!("{:?}", DecisionSource::Store));
    }
    let warm = hot_everywhere(&apps).await;

    let before = commands(&server);
    let rounds_before: Vec<u64> = stores.iter().map(LocalFirstStore::syncs).collect();
    let run = load(&apps, OFFERED, Duration::from_secs(10)).await;
    let after = commands(&server);
    let rounds: u64 = stores
        .iter()
        .zip(rounds_before)
        .map(|(s, before)| s.syncs() - before)
        .sum();
    let (offered, elapsed) = (run.offered(), run.elapsed);
    let (expected, pause, admitted) = run.exact_mode(&warm);
    let ratio = admitted as f64 / expected;
    let (clients, all) = client_commands(&before, &after);
    let (exact, cooled) = (run.exact(), run.cooled());
    let n = stores.len() as u64;
    let intervals = elapsed.as_secs_f64() / INTERVAL.as_secs_f64();
    eprintln!(
        "offered {offered} in {elapsed:?} (longest pause {pause:?}); admitted {admitted}, \
         exact mode {expected:.0}: {ratio:.3}; Redis commands from clients {clients} \
         ({:.4}/request; {:.2}/instance/interval), with those the scripts ran {all}; \
         {rounds} sync calls ({:.2}/instance/interval), {exact} decided by Redis, \
         the key cooled {cooled} times",
        clients as f64 / offered as f64,
        clients as f64 / n as f64 / intervals,
        rounds as f64 / n as f64 / intervals,
    );
    // Measured against exact mode over the requests actually made: a busy machine that
    // offers less (or pauses) is held to what exact mode would have admitted of it. Half as
    // much again as exact mode admits, so that admitting everything fails the ratio's 1.1
    // (twice, before: a shared 2-core machine with two CPU hogs offered 1.85 of it).
    assert!(
        offered as f64 >= 1.5 * expected,
        "the load must be well over the limit: {offered} offered, exact mode admits {expected:.0}"
    );
    assert!(
        (0.9..=1.1).contains(&ratio),
        "admitted {admitted} against {expected:.0}"
    );
    // Redis's cost is per interval, not per request. Each instance syncs its one hot key
    // once an interval; a wake (the key joining again after it cooled) adds a round; early
    // syncs need half the limit unsent (100 units; an instance counts ~5 an interval). A
    // quarter more, and a round in flight at each end: syncing twice an interval, or early
    // at every round (four an interval), fails.
    let rounds_bound = (n as f64 * (1.25 * intervals + 2.0)) as u64 + cooled;
    assert!(
        rounds <= rounds_bound,
        "{rounds} sync calls in {intervals:.0} intervals of {n} instances (bound {rounds_bound})"
    );
    // Nothing else costs Redis per request: the commands are the syncs, a heartbeat a
    // second per instance, and the decisions Redis made (each at most one EVALSHA).
    let heartbeats = n * (elapsed.as_secs() + 2);
    assert!(
        clients <= rounds + heartbeats + exact + 2 * n,
        "{clients} commands: {rounds} syncs, {exact} exact decisions, {heartbeats} heartbeats"
    );
    // The key stays hot. It cools on an instance only after a quiet interval there (a
    // machine that held the load up), and turns hot again within a few intervals: a key
    // that never turns hot again, or cools under a steady load, fails.
    for (i, one) in run.seen.iter().enumerate() {
        for (at, gap, decided) in exact_runs(one) {
            assert!(
                gap >= INTERVAL / 2,
                "instance {i}: the key cooled at request {at} after a pause of only {gap:?}"
            );
            assert!(
                decided <= 10 * OFFERED * INTERVAL.as_millis() as u64 / 1000,
                "instance {i}: {decided} decisions by Redis from request {at} on"
            );
        }
    }
}

/// The runs of decisions Redis made on one instance: where each began, the longest pause of
/// the load in the three intervals before it (`MAX` near the load's start, after the pause
/// before it), and how many decisions it lasted.
fn exact_runs(seen: &[Seen]) -> Vec<(usize, Duration, u64)> {
    let mut runs = Vec::new();
    let mut k = 0;
    while k < seen.len() {
        if !seen[k].exact {
            k += 1;
            continue;
        }
        let start = k;
        while k < seen.len() && seen[k].exact {
            k += 1;
        }
        // Within three intervals of the load's start the pause before it counts: the key
        // was idle on this instance while the others turned hot.
        let gap = if seen[start].asked < seen[0].asked + 3 * INTERVAL {
            Duration::MAX
        } else {
            let from = seen[..start]
                .iter()
                .rposition(|s| s.asked + 3 * INTERVAL < seen[start].asked)
                .unwrap_or(0);
            seen[from..=start]
                .windows(2)
                .map(|w| w[1].asked - w[0].asked)
                .max()
                .unwrap_or_default()
        };
        runs.push((start, gap, (k - start) as u64));
    }
    runs
}

/// Runs a load of three times the limit for `span`; answers admitted ÷ what exact mode would
/// admit of the requests actually made (from a full burst).
async fn phase(apps: &[Router], span: Duration, before: &[Seen]) -> f64 {
    let run = load(apps, OFFERED, span).await;
    let (expected, _, admitted) = run.exact_mode(before);
    eprintln!(
        "phase: offered {} in {:?}, admitted {admitted}, exact mode {expected:.0}",
        run.offered(),
        run.elapsed,
    );
    // Over the limit by more than the ratio's tolerance (1.15): admitting everything fails.
    // (1.5 before: a shared 2-core machine with two CPU hogs offered 1.49 of it.)
    assert!(
        run.offered() as f64 >= 1.3 * expected,
        "offered {}: the load must be over the limit (exact mode admits {expected:.0})",
        run.offered()
    );
    admitted as f64 / expected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_keep_their_share_while_redis_is_dead_and_count_nothing_twice_after() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let mut server = RedisServer::start();
    let stores = instances(&server, &unique_prefix("lf-dead")).await;
    let apps = source_apps(&stores);
    let span = Duration::from_secs(3);
    // Hot first, as in `four_instances_hold_a_fleet_limit_at_three_times_its_rate`: a busy
    // machine deciding a cold key through Redis offered less than the limit (1176/s).
    let warm = hot_everywhere(&apps).await;
    let connected = phase(&apps, span, &warm).await;

    // Hot everywhere again (a busy machine may have cooled the key on an instance near the
    // phase's end).
    hot_everywhere(&apps).await;
    // Redis dies with every unit acknowledged (as after any quiet spell of the load), and no
    // load until every instance is isolated: a key that cooled then (seen: 1.6 and 2.26 of
    // the limit alone), or one cold when Redis died, would be decided exactly, by a Redis
    // that is gone, and the layer's fallback would add a budget of its own to the share.
    let synced: Vec<u64> = stores.iter().map(LocalFirstStore::syncs).collect();
    let settled = within(Duration::from_secs(10), async || {
        stores.iter().zip(&synced).all(|(s, &n)| s.syncs() >= n + 2)
    })
    .await;
    assert!(settled, "every instance synced what it counted");
    server.kill();
    let isolated = within(Duration::from_secs(10), async || {
        stores.iter().all(LocalFirstStore::is_isolated)
    })
    .await;
    assert!(isolated, "every instance noticed");
    // Alone, each takes a quarter: a burst of 50, then 50/s.
    let alone = phase(&apps, span, &[]).await;

    server.restart();
    let back = within(Duration::from_secs(10), async || {
        stores.iter().all(|s| !s.is_isolated())
    })
    .await;
    assert!(back, "every instance synced again");
    // What was admitted alone is not replayed: the fleet admits its rate at once (the
    // restarted Redis is empty: a fresh burst), not after a backlog of seconds.
    let resumed = phase(&apps, span, &[]).await;
    eprintln!("admitted ÷ exact: connected {connected:.3}, alone {alone:.3}, resumed {resumed:.3}");
    for (name, ratio) in [
        ("connected", connected),
        ("alone", alone),
        ("resumed", resumed),
    ] {
        assert!((0.85..=1.15).contains(&ratio), "{name}: {ratio:.3}");
    }
}

#[tokio::test]
async fn a_sliding_log_is_decided_exactly_by_redis() {
    let server = RedisServer::start();
    let redis = RedisStore::builder(server.url())
        .prefix(unique_prefix("lf-log"))
        .connect()
        .await
        .unwrap();
    let store = LocalFirstStore::builder(redis)
        .interval(Duration::from_millis(100))
        .local_after(1)
        .build()
        .unwrap();
    let login = Policy::new(
        "login",
        [Limit::sliding_log(2, Duration::from_secs(60)).unwrap()],
    )
    .unwrap();
    assert!(!LocalFirstStore::supports(&login));
    let app = source_app(
        RateLimitLayer::builder(store, login)
            .key(Global)
            .build()
            .expect("valid layer"),
    );
    for _ in 0..2 {
        let body = support::body_text(send(&app, request("/", "10.0.0.1", &[])).await).await;
        assert_eq!(body, format!("{:?}", DecisionSource::Store));
    }
    assert_eq!(
        send(&app, request("/", "10.0.0.1", &[])).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[test]
fn the_server_example_refuses_sync_ms_where_it_cannot_apply() {
    let server = support::example_binary("server");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&server)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let redis = ["--redis", "redis://127.0.0.1:1", "--bind", "127.0.0.1:0"];
    let (code, stderr) = run(&[
        &redis[..],
        &["--sync-ms", "50", "--algorithm", "sliding-log"],
    ]
    .concat());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: --sync-ms: local-first mode does not approximate sliding-log"),
        "{stderr}"
    );
    let (code, stderr) = run(&["--sync-ms", "50"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--sync-ms needs a Redis store"), "{stderr}");
    let (code, stderr) = run(&[&redis[..], &["--sync-ms", "0"]].concat());
    assert_eq!(code, Some(2), "{stderr}");
}

/// The sync script and its Rust twin (the simulation's Redis) give the same answers to the
/// same calls: counts merged once (replies lost and sent again included), windows rolled,
/// GCRA backlogs floored at when their units were counted.
#[test]
fn the_sync_script_and_its_rust_twin_agree() {
    use redlimit::__private::local_first::{Fleet, Instance};
    use redlimit::store::{Clock, ManualClock, SystemClock};

    let server = RedisServer::start();
    let mut con = server.connection();
    let clock = ManualClock::new(SystemClock.now_us());
    let policy = Policy::new(
        "twin",
        [
            Limit::gcra(50, Duration::from_secs(1)).unwrap(),
            Limit::fixed_window(100, Duration::from_millis(1500)).unwrap(),
            Limit::sliding_window(80, Duration::from_millis(700)).unwrap(),
            Limit::token_bucket(60, Duration::from_millis(1200)).unwrap(),
        ],
    )
    .unwrap();
    let keys = [redlimit::Key::new("a"), redlimit::Key::new("b")];
    // Each key turns hot at its first decision on an instance, so both paths run: exact
    // checks (the exact script, and its Rust twin) and syncs, on the same state.
    let instances: Vec<Instance> = ["x", "y"]
        .iter()
        .map(|id| {
            Instance::tuned(
                Duration::from_millis(100),
                (0.8, 1.0),
                2,
                clock.clone(),
                id,
                9,
                &[("local_after", 1.0)],
            )
            .unwrap()
        })
        .collect();
    let mut twin = Fleet::default();
    // The twin names state keys under this prefix.
    let prefix = "sim";
    redis::cmd("FLUSHALL").exec(&mut con).unwrap();
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(RedisStore::script_source_for(&policy))
        .exec(&mut con)
        .unwrap();
    let mut exact = 0;
    for round in 0..40u64 {
        for (i, instance) in instances.iter().enumerate() {
            for n in 0..(round * 7 + i as u64 * 3) % 13 {
                let (key, cost) = (&keys[(n % 2) as usize], 1 + n % 3);
                if instance.local_check(&policy, key, cost).is_some() {
                    continue;
                }
                exact += 1;
                let flat = redlimit::__private::script_call(prefix, &policy, key, cost)
                    .run(&mut con)
                    .unwrap();
                let real = redlimit::__private::decode_reply(&policy, &flat).unwrap();
                let expected = twin.check(&policy, key, cost, flat[0] as u64);
                assert_eq!(
                    (real.is_allowed(), real.remaining(), real.retry_after()),
                    (
                        expected.is_allowed(),
                        expected.remaining(),
                        expected.retry_after()
                    ),
                    "round {round}, instance {i}, an exact check"
                );
            }
            let batch = instance.begin_sync();
            let flat = batch.command(prefix).run(&mut con).unwrap();
            let real = batch.decode(&flat).expect("a well-formed reply");
            let expected = twin.sync(&batch, real.now());
            assert_eq!(real, expected, "round {round}, instance {i}");
            // Every fifth reply is lost: the next sync sends the same counts again.
            let now = clock.now_us();
            let reply = (round % 5 != 4).then_some(real);
            instance.finish_sync(batch, reply, now, now);
        }
        // Redis time moves on; the instances' clocks do not, so their units were counted
        // before Redis's now (the GCRA floor at SINCE is exercised), and the windows roll.
        // Whatever the pause, both sides answer for the same Redis time.
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(exact > 0, "exact checks ran");
}

/// In a Cluster, each sync call holds the keys of one slot: keys all over the slot space reach
/// every instance's view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syncs_group_keys_by_cluster_slot() {
    use redlimit::store::Store;

    let cluster = support::RedisCluster::start();
    let prefix = unique_prefix("lf-cluster");
    let mut stores = Vec::new();
    for _ in 0..2 {
        let redis = RedisStore::cluster(cluster.urls())
            .prefix(prefix.as_str())
            .connect()
            .await
            .unwrap();
        // A key cools on an instance after an interval without a decision there: a sweep of
        // the 40 keys must take less. At 50 ms a busy machine took longer, and the keys were
        // decided exactly again at every sweep.
        stores.push(
            LocalFirstStore::builder(redis)
                .interval(Duration::from_millis(500))
                .local_after(1)
                .build()
                .unwrap(),
        );
    }
    // A limit generous enough to be decided locally once a key is hot (its first decision).
    let policy = Policy::new(
        "slots",
        [Limit::fixed_window(1_000_000, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap();
    let keys: Vec<redlimit::Key> = (0..40)
        .map(|i| redlimit::Key::new(format!("tenant-{i}")))
        .collect();
    for key in &keys {
        let decision = stores[0].check(&policy, key, 10).await.unwrap();
        assert!(decision.is_allowed());
    }
    let seen = eventually(Duration::from_secs(10), async || {
        let mut all = true;
        for key in &keys {
            // A check of cost 0 reads the view (and keeps the key in the syncs); the first
            // reads Redis, exactly, and turns the key hot.
            let decision = stores[1].check(&policy, key, 0).await.unwrap();
            all &= decision.source() == DecisionSource::LocalFirst
                && decision.remaining() == Some(999_990);
        }
        all
    })
    .await;
    assert!(seen, "every key's count reached the other instance");
    assert!(stores.iter().all(|s| !s.is_isolated() && s.syncs() > 0));
}

/// Two local-first instances on one Redis, syncing every `interval`.
async fn pair(server: &RedisServer, prefix: &str, interval: Duration) -> [LocalFirstStore; 2] {
    let store = async || {
        let redis = RedisStore::builder(server.url())
            .prefix(prefix)
            .connect()
            .await
            .expect("connect to the test redis");
        redis.local_first(interval).unwrap()
    };
    [store().await, store().await]
}

/// Checks `key` on `store` until 200 of its decisions were made in memory (the key is hot
/// there); answers how many units were admitted on the way.
async fn turn_hot(store: &LocalFirstStore, policy: &Policy, key: &redlimit::Key) -> u64 {
    use redlimit::store::Store;
    let (mut local, mut admitted) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(10);
    while local < 200 && Instant::now() < deadline {
        let d = store.check(policy, key, 1).await.unwrap();
        admitted += u64::from(d.is_allowed());
        local += u64::from(d.source() == DecisionSource::LocalFirst);
    }
    assert_eq!(local, 200, "the key turned hot");
    admitted
}

/// Keeps `key` hot on `store` (a look of cost 0 every 5 ms, using no units) until dropped: a
/// test that waits on other work must not see the key cool meanwhile.
fn keep_hot(store: &LocalFirstStore, policy: &Policy, key: &redlimit::Key) -> KeepHot {
    use redlimit::store::Store;
    let (store, policy, key) = (store.clone(), policy.clone(), key.clone());
    KeepHot(tokio::spawn(async move {
        loop {
            let _ = store.check(&policy, &key, 0).await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }))
}

/// [`keep_hot`]'s task, aborted when dropped.
struct KeepHot(tokio::task::JoinHandle<()>);

impl Drop for KeepHot {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A per-key limit of 5 an hour (keyed by `x-api-key`) on each store.
fn per_key_apps(stores: &[LocalFirstStore], policy: &Policy) -> Vec<Router> {
    stores
        .iter()
        .map(|s| {
            app(RateLimitLayer::builder(s.clone(), policy.clone())
                .key(support::api_key())
                // Exactness is tested, not speed: a busy machine may take longer than the
                // default 100 ms, and a request past its deadline is decided in memory.
                .store_deadline(Duration::from_secs(2))
                .build()
                .expect("valid layer"))
        })
        .collect()
}

/// A per-key limit decided exactly while the key is cold: a concurrent burst spread over two
/// instances admits the limit, no more (before keys were decided exactly, each instance
/// guessed its share: 8 of 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_one_key_over_two_instances_admits_exactly_its_limit() {
    let server = RedisServer::start();
    let stores = pair(
        &server,
        &unique_prefix("lf-burst"),
        Duration::from_millis(100),
    )
    .await;
    for algorithm in LOCAL_ALGORITHMS {
        let policy = Policy::new(
            format!("per-key-{}", algorithm.name()),
            [Limit::new(algorithm, 5, Duration::from_secs(3600)).unwrap()],
        )
        .unwrap();
        let apps = per_key_apps(&stores, &policy);
        for round in 0..3 {
            let api_key = format!("key-{round}");
            let burst: Vec<_> = (0..20)
                .map(|i| {
                    let (app, api_key) = (apps[i % 2].clone(), api_key.clone());
                    tokio::spawn(async move {
                        let req = request("/", "10.0.0.1", &[("x-api-key", &api_key)]);
                        send(&app, req).await.status()
                    })
                })
                .collect();
            let mut admitted = 0;
            for call in burst {
                match call.await.unwrap() {
                    StatusCode::OK => admitted += 1,
                    StatusCode::TOO_MANY_REQUESTS => {}
                    other => panic!("unexpected status {other}"),
                }
            }
            assert_eq!(admitted, 5, "{algorithm:?}, round {round}");
        }
    }
}

/// A client of one instance of an idle pair gets its whole limit (before, each instance
/// guessed its share of a cold key: 2 of 5).
#[tokio::test]
async fn a_client_of_one_instance_of_an_idle_pair_gets_its_whole_limit() {
    let server = RedisServer::start();
    let stores = pair(
        &server,
        &unique_prefix("lf-idle"),
        Duration::from_millis(50),
    )
    .await;
    let policy = Policy::new(
        "per-key",
        [Limit::gcra(5, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap();
    let apps = per_key_apps(&stores, &policy);
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let req = request("/", "10.0.0.1", &[("x-api-key", "alone")]);
        statuses.push(send(&apps[0], req).await.status());
    }
    let admitted = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert_eq!(admitted, 5, "{statuses:?}");
    assert!(
        statuses[5..]
            .iter()
            .all(|s| *s == StatusCode::TOO_MANY_REQUESTS)
    );
    // The other instance, cold too, sees the same: nothing left.
    let req = request("/", "10.0.0.1", &[("x-api-key", "alone")]);
    assert_eq!(
        send(&apps[1], req).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// A key turns hot on one instance (decided in memory, synced into the exact state) while
/// another decides it exactly, then cools: the exact state in Redis holds every unit either
/// admitted, and the exact decisions after see them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_key_switches_to_local_and_back_without_gaining_or_losing_units() {
    use redlimit::store::Store;

    let server = RedisServer::start();
    let prefix = unique_prefix("lf-switch");
    let [a, b] = pair(&server, &prefix, Duration::from_millis(50)).await;
    // A fixed window: its state is a plain count (no drain to reckon with). 10^10 per 400
    // days admits 14 units per 50 ms interval at its rate: enough to be decided locally.
    let limit = Limit::fixed_window(10_000_000_000, Duration::from_secs(400 * 86_400)).unwrap();
    let policy = Policy::new("switch", [limit]).unwrap();
    let key = redlimit::Key::new("tenant");
    let state_key = format!("{prefix}:switch:{{tenant}}:fw0");
    let mut con = server.connection();
    let stored = |con: &mut redis::Connection| -> (u64, u64) {
        let text: String = redis::cmd("GET").arg(&state_key).query(con).unwrap();
        let (end, count) = text.split_once(' ').unwrap();
        (end.parse().unwrap(), count.parse().unwrap())
    };
    let mut admitted = 0u64;
    let mut check = async |store: &LocalFirstStore| {
        let d = store.check(&policy, &key, 1).await.unwrap();
        assert!(d.is_allowed());
        admitted += 1;
        d.source()
    };
    // Cold on both: exact.
    assert_eq!(check(&b).await, DecisionSource::Store);
    assert_eq!(check(&a).await, DecisionSource::Store);
    let (window, _) = stored(&mut con);
    // Hot on `a`: exact until its first sync, then in memory.
    let mut local = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while local < 300 && Instant::now() < deadline {
        if check(&a).await == DecisionSource::LocalFirst {
            local += 1;
        }
        if local % 50 == 25 {
            // `b` stays cold, decided exactly, meanwhile.
            assert_eq!(check(&b).await, DecisionSource::Store);
        }
    }
    assert_eq!(local, 300, "the key turned hot on `a`");
    // Quiet (a look now and then, of cost 0), `a`'s units reach Redis, and the key cools
    // there: exact again.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut cooled = false;
    while !cooled && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let d = a.check(&policy, &key, 0).await.unwrap();
        cooled = d.source() == DecisionSource::Store;
    }
    assert!(cooled, "the key cooled on `a`");
    let (end, count) = stored(&mut con);
    assert_eq!(end, window, "one window throughout");
    assert_eq!(count, admitted, "every unit admitted is in Redis, once");
    // Exact decisions on either instance see every unit.
    for store in [&a, &b] {
        let d = store.check(&policy, &key, 1).await.unwrap();
        assert_eq!(d.source(), DecisionSource::Store);
        admitted += 1;
        assert_eq!(d.remaining(), Some(limit.count() - admitted));
    }
}

/// Inspect and reset act on the state every decision counts into: a key hot on one instance
/// reads the same through the other, and a reset through the cold one reaches the hot one
/// at its next sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_reset_see_a_hot_key_from_either_instance() {
    use redlimit::store::{Admin, Store};

    let server = RedisServer::start();
    let [a, b] = pair(
        &server,
        &unique_prefix("lf-admin"),
        Duration::from_millis(50),
    )
    .await;
    let limit = Limit::fixed_window(10_000_000_000, Duration::from_secs(400 * 86_400)).unwrap();
    let policy = Policy::new("admin", [limit]).unwrap();
    let key = redlimit::Key::new("tenant");
    let admitted = turn_hot(&a, &policy, &key).await;
    // Once `a` synced its units, both read them all.
    let used = |state: redlimit::store::KeyState| limit.count() - state.limits()[0].remaining();
    let seen = eventually(Duration::from_secs(10), async || {
        used(b.inspect(&policy, &key).await.unwrap()) == admitted
    })
    .await;
    assert!(seen, "`b` sees `a`'s {admitted} units");
    assert_eq!(used(a.inspect(&policy, &key).await.unwrap()), admitted);
    // A reset through `b` reaches `a`'s view at its next sync.
    b.reset(&policy, &key).await.unwrap();
    assert_eq!(used(b.inspect(&policy, &key).await.unwrap()), 0);
    let reset = eventually(Duration::from_secs(10), async || {
        let d = a.check(&policy, &key, 0).await.unwrap();
        d.remaining() == Some(limit.count())
    })
    .await;
    assert!(reset, "`a` sees the reset");
    let d = b.check(&policy, &key, 1).await.unwrap();
    assert_eq!(d.remaining(), Some(limit.count() - 1));
}

/// A decision Redis made for a cold key is refunded from either instance, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_key_s_decision_is_refunded_from_either_instance() {
    use redlimit::store::{Admin, Refund, Refunds, Store};

    let server = RedisServer::start();
    let [a, b] = pair(
        &server,
        &unique_prefix("lf-refund"),
        Duration::from_millis(50),
    )
    .await;
    for algorithm in LOCAL_ALGORITHMS {
        let policy = Policy::new(
            format!("refund-{}", algorithm.name()),
            [Limit::new(algorithm, 5, Duration::from_secs(3600)).unwrap()],
        )
        .unwrap();
        let key = redlimit::Key::new("client");
        let decision = a.check(&policy, &key, 2).await.unwrap();
        assert_eq!(decision.source(), DecisionSource::Store);
        assert_eq!(decision.remaining(), Some(3));
        let refund = Refund::of(&decision, 2).expect("an admission by Redis");
        assert!(
            b.refund(&policy, &key, refund).await.unwrap(),
            "{algorithm:?}"
        );
        let again = Refund::of(&decision, 2).unwrap();
        assert!(!a.refund(&policy, &key, again).await.unwrap(), "once");
        let state = a.inspect(&policy, &key).await.unwrap();
        assert_eq!(state.limits()[0].remaining(), 5, "{algorithm:?}");
    }
}

/// An override set through one instance reaches a key hot on the other (decided in memory)
/// within an override poll, keeping the units it used; removing it restores the policy's limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_reaches_a_hot_key_on_every_instance_keeping_its_units() {
    use redlimit::store::{Override, Overrides, Store};

    let server = RedisServer::start();
    let [a, b] = pair(
        &server,
        &unique_prefix("lf-override"),
        Duration::from_millis(50),
    )
    .await;
    // Room for far more than `local_after` decisions per interval: the key turns hot.
    let limit = Limit::fixed_window(1_000_000, Duration::from_secs(3600)).unwrap();
    let policy = Policy::new("override", [limit]).unwrap();
    let key = redlimit::Key::new("tenant");
    let admitted = turn_hot(&a, &policy, &key).await;
    let _hot = keep_hot(&a, &policy, &key);

    let raised = Override::parse(&policy, "3000000/1h").unwrap();
    b.set_override(&policy, &key, raised.clone()).await.unwrap();
    assert_eq!(a.get_override(&policy, &key).await.unwrap(), Some(raised));
    let started = Instant::now();
    // `a` decides the hot key in memory, under the override, with the units it used.
    let peek = async || a.check(&policy, &key, 0).await.unwrap();
    let applied = eventually(Duration::from_secs(10), async || {
        let d = peek().await;
        d.source() == DecisionSource::LocalFirst && d.remaining() == Some(3_000_000 - admitted)
    })
    .await;
    assert!(
        applied,
        "`a` applies the override to its hot key, keeping {admitted} units"
    );
    eprintln!(
        "override applied on the other instance after {:?}",
        started.elapsed()
    );
    // `b`, where the key is cold, gets it from Redis, with every unit `a` synced.
    let synced = eventually(Duration::from_secs(10), async || {
        b.check(&policy, &key, 0).await.unwrap().remaining() == Some(3_000_000 - admitted)
    })
    .await;
    assert!(synced, "`b` decides under the override with `a`'s units");

    assert!(a.remove_override(&policy, &key).await.unwrap());
    let restored = eventually(Duration::from_secs(10), async || {
        let d = peek().await;
        d.source() == DecisionSource::LocalFirst && d.remaining() == Some(1_000_000 - admitted)
    })
    .await;
    assert!(
        restored,
        "`a` is back on the policy's limit, its units kept"
    );
}

/// Units used of `policy`'s only limit for `key`, as Redis holds them.
async fn used_in_redis(store: &LocalFirstStore, policy: &Policy, key: &redlimit::Key) -> u64 {
    use redlimit::store::Admin;
    let state = store.inspect(policy, key).await.unwrap();
    policy.limits()[0].count() - state.limits()[0].remaining()
}

/// Units used of `policy`'s only limit for `key`, as `store` decides it (a look of cost 0:
/// in memory where the key is hot).
async fn used_in_view(store: &LocalFirstStore, policy: &Policy, key: &redlimit::Key) -> u64 {
    use redlimit::store::Store;
    let d = store.check(policy, key, 0).await.unwrap();
    assert_eq!(
        d.source(),
        DecisionSource::LocalFirst,
        "the key is hot here"
    );
    policy.limits()[0].count() - d.remaining().unwrap()
}

/// A hot key's decision in memory is refunded, once, from either instance: Redis gives the
/// units back to the state both count into, the deciding instance's view at once, the other's
/// at its next sync. A GCRA or token bucket drains meanwhile: its difference is the refund
/// plus at most what drained in the time measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_key_s_local_decisions_are_refunded_and_both_instances_see_it() {
    use redlimit::store::{Refund, Refunds, Store};

    const COST: u64 = 20_000;
    /// What the views may add beyond Redis's state: the other instance's rate, extrapolated
    /// (a quarter of the refund: a GCRA would take a minute to drain the rest).
    const SLACK: u64 = 5_000;
    let server = RedisServer::start();
    let [a, b] = pair(
        &server,
        &unique_prefix("lf-hot-refund"),
        Duration::from_millis(50),
    )
    .await;
    for algorithm in LOCAL_ALGORITHMS {
        // 1M an hour: hot after a few decisions per 50 ms interval; a GCRA unit drains in
        // 3.6 ms, so the refund (72 s of units) is not mistaken for a drain.
        let limit = Limit::new(algorithm, 1_000_000, Duration::from_secs(3600)).unwrap();
        let policy = Policy::new(format!("hot-refund-{}", algorithm.name()), [limit]).unwrap();
        let key = redlimit::Key::new("client");
        turn_hot(&a, &policy, &key).await;
        let _hot_a = keep_hot(&a, &policy, &key);
        turn_hot(&b, &policy, &key).await;
        let _hot_b = keep_hot(&b, &policy, &key);
        let decision = a.check(&policy, &key, COST).await.unwrap();
        assert!(decision.is_allowed(), "{algorithm:?}");
        assert_eq!(decision.source(), DecisionSource::LocalFirst);
        let refund = Refund::of(&decision, COST).expect("an admission in memory is refundable");
        // The decision's units reach Redis and `b`'s view with `a`'s next sync.
        let counted = eventually(Duration::from_secs(10), async || {
            used_in_redis(&b, &policy, &key).await >= COST
                && used_in_view(&b, &policy, &key).await >= COST
        })
        .await;
        assert!(counted, "{algorithm:?}: `b` sees the {COST} units");
        // From before the first read is sent: a busy machine may deliver its answer late, and
        // the drain runs on Redis's clock from when it read.
        let measured = Instant::now();
        let before = used_in_redis(&b, &policy, &key).await;
        assert!(
            a.refund(&policy, &key, refund).await.unwrap(),
            "{algorithm:?}"
        );
        let after = used_in_redis(&b, &policy, &key).await;
        let drained = match algorithm {
            redlimit::Algorithm::FixedWindow | redlimit::Algorithm::SlidingWindow => 0,
            _ => measured.elapsed().as_micros() as u64 / 3_600 + 1,
        };
        let given = before - after;
        assert!(
            (COST..=COST + drained).contains(&given),
            "{algorithm:?}: Redis gave back {given} of {COST} (drained up to {drained})"
        );
        // `a`'s view at once; `b`'s at its next sync.
        let here = used_in_view(&a, &policy, &key).await;
        assert!(
            here <= after + SLACK,
            "{algorithm:?}: `a` uses {here}, Redis {after}"
        );
        let there = eventually(Duration::from_secs(10), async || {
            used_in_view(&b, &policy, &key).await <= after + SLACK
        })
        .await;
        assert!(there, "{algorithm:?}: `b` sees the refund");
        // Once: a second refund of the decision, through the other instance, gives nothing.
        let again = Refund::of(&decision, COST).unwrap();
        assert!(
            !b.refund(&policy, &key, again).await.unwrap(),
            "{algorithm:?}"
        );
        assert!(used_in_redis(&b, &policy, &key).await <= after);
    }
}

/// A policy with a penalty box is decided exactly whatever its traffic, so the box holds on
/// every instance at once: a key boxed by denials on `a` is denied on `b` for the box's
/// duration, past the end of the window that denied it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_boxed_on_one_instance_is_denied_on_the_other_for_the_box_s_duration() {
    use redlimit::store::Store;

    let server = RedisServer::start();
    let interval = Duration::from_millis(50);
    let [a, b] = pair(&server, &unique_prefix("lf-box"), interval).await;
    // 100 per 500 ms admits 10 per interval at its rate: without the box, hot within one.
    let window = Duration::from_millis(500);
    let penalty = Duration::from_secs(30);
    let policy = Policy::new("boxed", [Limit::fixed_window(100, window).unwrap()])
        .unwrap()
        .penalty(penalty)
        .unwrap();
    let key = redlimit::Key::new("flooder");
    // Looks for three intervals: without the box, enough decisions to turn the key hot.
    let started = Instant::now();
    while started.elapsed() < 3 * interval {
        let d = a.check(&policy, &key, 0).await.unwrap();
        assert_eq!(d.source(), DecisionSource::Store, "decided exactly");
    }
    // Then 5 units a check: 21 checks within one window deny (at 1 a check it took 101,
    // more round trips to Redis than a busy machine makes in 500 ms).
    let (mut admitted, mut denied) = (0, 0);
    while denied == 0 && started.elapsed() < Duration::from_secs(10) {
        let d = a.check(&policy, &key, 5).await.unwrap();
        assert_eq!(d.source(), DecisionSource::Store, "decided exactly");
        if d.is_allowed() {
            admitted += 1;
        } else {
            denied += 1;
        }
    }
    let boxed_at = Instant::now();
    assert_eq!(denied, 1, "the limit denied");
    assert!(admitted >= 20, "{admitted} admitted");
    // Past the window that denied: only the box denies now, on either instance.
    tokio::time::sleep_until((boxed_at + window + Duration::from_millis(100)).into()).await;
    for store in [&b, &a, &b] {
        let d = store.check(&policy, &key, 1).await.unwrap();
        assert!(!d.is_allowed(), "boxed");
        assert_eq!(d.source(), DecisionSource::Store);
        let retry = d.retry_after().expect("a wait");
        assert!(
            retry + boxed_at.elapsed() + Duration::from_secs(1) >= penalty,
            "waits out the box: {retry:?}"
        );
    }
    // Another key of the same policy is untouched.
    let other = redlimit::Key::new("quiet");
    assert!(b.check(&policy, &other, 1).await.unwrap().is_allowed());
}

/// A hierarchical policy (a limit per client, one per tenant, under keys of their own) is
/// decided exactly: across two instances each client gets its 3 and the tenant its 5, to the
/// unit, however the requests are spread and however hot the keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hierarchical_policy_holds_across_two_instances() {
    use redlimit::store::Store;

    let server = RedisServer::start();
    let [a, b] = pair(
        &server,
        &unique_prefix("lf-tiers"),
        Duration::from_millis(50),
    )
    .await;
    let hour = Duration::from_secs(3600);
    let policy = Policy::new(
        "tiers",
        [
            Limit::gcra(3, hour).unwrap(),
            Limit::fixed_window(5, hour).unwrap(),
        ],
    )
    .unwrap();
    let key = |client: &str| {
        redlimit::Key::new(client).with_limit_key(1, redlimit::Key::new("tenant:acme"))
    };
    let stores = [&a, &b];
    let mut admitted = HashMap::<&str, u64>::new();
    // Many more requests than any limit admits, alternating instances, concurrently.
    let checks: Vec<_> = (0..60)
        .map(|i| {
            let client = ["c1", "c2", "c3"][i % 3];
            let (store, policy, key) = (stores[i % 2].clone(), policy.clone(), key(client));
            tokio::spawn(async move {
                let d = store.check(&policy, &key, 1).await.unwrap();
                assert_eq!(d.source(), DecisionSource::Store, "decided exactly");
                (client, d.is_allowed())
            })
        })
        .collect();
    for check in checks {
        let (client, allowed) = check.await.unwrap();
        *admitted.entry(client).or_default() += u64::from(allowed);
    }
    assert_eq!(
        admitted.values().sum::<u64>(),
        5,
        "the tenant's 5: {admitted:?}"
    );
    assert!(
        admitted.values().all(|n| *n <= 3),
        "a client's 3: {admitted:?}"
    );
    // Both instances read the same: the tenant spent, a new client of it denied by it.
    for store in stores {
        let d = store.check(&policy, &key("c4"), 1).await.unwrap();
        assert_eq!(d.denied_by(), Some(1), "the tenant's limit denies");
    }
}

/// What one instance's load saw: when each check was asked, and whether it was admitted
/// (`None`: no decision, the check failed or was given up).
pub(crate) type Checks = Vec<(Instant, Option<bool>)>;

/// Offers `policy`'s `key` `per_second` requests a second on `store` until `stop`; answers
/// every check made.
fn offer(
    store: LocalFirstStore,
    policy: Policy,
    key: redlimit::Key,
    per_second: u64,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<Checks> {
    use redlimit::store::Store;
    tokio::spawn(async move {
        // Three requests every tick, ticks spaced for the rate asked. A load held up (the
        // machine busy) resumes at its rate: a catch-up flood would meet each instance's view
        // before the next sync, and each admit the burst its view has refilled (the bound
        // the docs state: one interval of the others' admissions).
        let mut ticks = tokio::time::interval(Duration::from_micros(3_000_000 / per_second));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut checks = Checks::new();
        while !stop.load(Ordering::Relaxed) {
            ticks.tick().await;
            for _ in 0..3 {
                // Decided exactly while cold; a key still cold once Redis is cut off fails or
                // waits, as in exact mode: neither is admitted here (a layer's deadline, 250 ms).
                let asked = Instant::now();
                let check = store.check(&policy, &key, 1);
                let decided = match tokio::time::timeout(Duration::from_millis(250), check).await {
                    Ok(Ok(d)) => Some(d.is_allowed()),
                    _ => None,
                };
                checks.push((asked, decided));
            }
        }
        checks
    })
}

/// What exact mode admits of the decisions made (`checks` of every instance): a GCRA of
/// `rate` and `burst` run over the times they were asked. It counts what the load actually
/// offered: a machine busy enough to hold up every load (seen: 7 s and more on a shared
/// 2-core runner) or to slow it below the rate offers less, and no limiter admits more.
/// Answers the units admitted and the longest pause between two decisions.
pub(crate) fn exact_admits(checks: &Checks, rate: f64, burst: f64) -> (f64, Duration) {
    let mut asked: Vec<Instant> = checks
        .iter()
        .filter(|c| c.1.is_some())
        .map(|c| c.0)
        .collect();
    asked.sort();
    let Some(&first) = asked.first() else {
        return (0.0, Duration::ZERO);
    };
    let (t, tolerance) = (1.0 / rate, (burst - 1.0) / rate);
    let mut tat = 0.0_f64;
    let mut admitted = 0.0;
    for at in &asked {
        let now = at.duration_since(first).as_secs_f64();
        if tat - now <= tolerance {
            tat = tat.max(now) + t;
            admitted += 1.0;
        }
    }
    let pause = asked.windows(2).map(|w| w[1] - w[0]).max();
    (admitted, pause.unwrap_or_default())
}

/// Waits until `condition` holds, for at most `deadline` of the time this process runs (a
/// pause of the whole process counts for little), and checks once more at the end.
pub(crate) async fn within(deadline: Duration, mut condition: impl AsyncFnMut() -> bool) -> bool {
    let step = Duration::from_millis(20);
    let mut ran = Duration::ZERO;
    while ran < deadline {
        if condition().await {
            return true;
        }
        let at = Instant::now();
        tokio::time::sleep(step).await;
        ran += at.elapsed().min(5 * step);
    }
    condition().await
}

/// Sleeps `duration` of the time this process runs: a pause of the whole process (the
/// machine busy) counts for little, so what follows is measured after as much offered load.
async fn run_for(duration: Duration) {
    let step = Duration::from_millis(50);
    let mut ran = Duration::ZERO;
    while ran < duration {
        let at = Instant::now();
        tokio::time::sleep(step).await;
        ran += at.elapsed().min(2 * step);
    }
}

/// Two instances hold a hot key at three times its rate; the link to Redis is cut (a
/// partition: Redis keeps its state) for 3 s, each instance admits its share alone, then the
/// link heals. What each admitted alone reaches the fleet on the return, merged from when it
/// was counted: over the whole span the fleet admits what the limit allows (the burst, then
/// the rate), not a second burst on the return (which made 1.25 of it). The same on a manual
/// clock, to the percent: `a_healed_partition_grants_the_fleet_no_second_burst` (`src/`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_healed_grants_no_second_budget() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let server = RedisServer::start();
    let proxy = support::Proxy::start(server.port()).await;
    let prefix = unique_prefix("lf-partition");
    let mut stores = Vec::new();
    for _ in 0..2 {
        let redis = RedisStore::builder(proxy.url())
            .prefix(prefix.as_str())
            .connect()
            .await
            .expect("connect through the proxy");
        // Hot at its first decision, cold again only after an interval without one: a
        // loaded machine that stalls the load for a moment does not send the key to Redis.
        let store = LocalFirstStore::builder(redis)
            .interval(Duration::from_millis(100))
            .local_after(1)
            .build()
            .unwrap();
        stores.push(store);
    }
    let heard = within(Duration::from_secs(10), async || {
        stores.iter().all(|s| s.instances() == 2)
    })
    .await;
    assert!(heard, "each instance heard the other's heartbeat");
    // A burst of 200, then 200/s; each instance offered 300/s.
    let (rate, burst) = (200.0, 200.0);
    let policy = Policy::new(
        "partition",
        [Limit::gcra(200, Duration::from_secs(1)).unwrap()],
    )
    .unwrap();
    let key = redlimit::Key::new("hot");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loads: Vec<_> = stores
        .iter()
        .map(|s| {
            offer(
                s.clone(),
                policy.clone(),
                key.clone(),
                300,
                Arc::clone(&stop),
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let hot = within(Duration::from_secs(10), async || {
        use redlimit::store::Store;
        let mut all = true;
        for store in &stores {
            let d = store.check(&policy, &key, 0).await.unwrap();
            all &= d.source() == DecisionSource::LocalFirst;
        }
        all
    })
    .await;
    assert!(hot, "the key is hot on both instances when the link is cut");

    proxy.freeze();
    let cut = Instant::now();
    let isolated = within(Duration::from_secs(10), async || {
        stores.iter().all(LocalFirstStore::is_isolated)
    })
    .await;
    assert!(isolated, "every instance noticed");
    tokio::time::sleep_until((cut + Duration::from_secs(3)).into()).await;
    proxy.thaw();
    let back = within(Duration::from_secs(10), async || {
        stores.iter().all(|s| !s.is_isolated())
    })
    .await;
    assert!(back, "every instance synced again");
    // Long enough after the return for a debt of a burst to be paid back.
    run_for(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    let mut checks = Checks::new();
    for load in loads {
        checks.extend(load.await.unwrap());
    }
    let admitted = checks.iter().filter(|c| c.1 == Some(true)).count() as f64;
    let decided = checks.iter().filter(|c| c.1.is_some()).count();
    let (exact, pause) = exact_admits(&checks, rate, burst);
    let ratio = admitted / exact;
    eprintln!(
        "admitted {admitted} of {decided} decisions ({} checks), exact mode {exact}: {ratio:.3} \
         (longest pause {pause:?})",
        checks.len()
    );
    // No second budget on the return: the old code's made 1.25 of the ideal. A pause of the
    // whole machine past a refill while the fleet pays back what its shares took alone
    // forgives what is left of it (the backlog a sync leaves is capped at another burst or
    // 1 s, `lua/local_first_sync.lua`); without one (the usual run) nothing is forgiven.
    let refill = Duration::from_secs_f64(burst / rate);
    let forgiven = if pause > refill {
        rate * (burst / rate).max(1.0)
    } else {
        0.0
    };
    assert!(
        admitted <= 1.1 * exact + forgiven,
        "admitted {admitted} against {exact} (+ {forgiven} forgiven)"
    );
    assert!(
        admitted >= 0.9 * exact,
        "admitted {admitted} against {exact}"
    );
}
