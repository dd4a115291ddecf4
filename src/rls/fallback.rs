//! A request whose store calls failed, missed the deadline, found the circuit open or too
//! many calls in flight: the engine's failure path decides by the domain's rule
//! ([`FailureMode`](super::FailureMode)); here its outcome becomes the RLS's answer.

use tonic::Status;

use super::plan::Plan;
use super::run::{Evaluated, Runner, Via};
use crate::decision::LimitState;
use crate::engine::{Engine, Failure};
use crate::error::StoreError;
use crate::store::Commit;

/// The counters' states the engine's failure path has for `plan` after `error`, or the
/// status to answer with.
pub(super) async fn failed(
    engine: &Engine,
    plan: &Plan,
    commit: Commit,
    error: &StoreError,
) -> Result<Vec<Option<Evaluated>>, Status> {
    match engine.failure(plan.rule, error) {
        Failure::Unavailable => Err(Status::unavailable(format!("rate limit store: {error}"))),
        // Nothing known: every counter within its limit (a zero limit is over regardless).
        Failure::Open => Ok(vec![None; plan.counters.len()]),
        Failure::Closed => Ok(plan
            .counters
            .iter()
            .map(|counter| {
                let limit = counter.limit?;
                Some(Evaluated {
                    state: LimitState::denied(limit, 0, counter.period, counter.period),
                    asked: counter.cost.max(1),
                    cached: false,
                    always: false,
                    at_us: 0,
                })
            })
            .collect()),
        // The same plan, run on this server's share of each limit in memory.
        Failure::Local(share) => (Runner {
            via: Via::Local(share),
            commit,
        })
        .run(plan)
        .await
        .map_err(|error| Status::unavailable(format!("rate limit local fallback: {error}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::RlsConfig;
    use super::super::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
    use super::super::testing::{Flaky, request};
    use super::super::{FailureMode, RateLimitService};

    /// Four a day per `ip` in each domain (`open` and `local` name a mode in their file).
    const CONFIG: &str = "
domain: error
descriptors: [{key: ip, rate_limit: {unit: day, requests_per_unit: 4}}]
";

    fn service(store: Flaky) -> RateLimitService {
        let file = |domain: &str, extra: &str| {
            format!(
                "domain: {domain}\n{extra}descriptors: [{{key: ip, rate_limit: {{unit: day, requests_per_unit: 4}}}}]\n"
            )
        };
        let config = RlsConfig::parse(
            [
                ("error.yaml", CONFIG.to_owned()),
                ("open.yaml", file("open", "on_store_error: open\n")),
                ("closed.yaml", file("closed", "")),
                ("local.yaml", file("local", "on_store_error: closed\n")),
            ],
            false,
        )
        .unwrap();
        RateLimitService::builder(store)
            .config(config)
            .domain_on_store_error("closed", FailureMode::Closed)
            // The builder's mode for a domain wins over its file's.
            .domain_on_store_error("local", FailureMode::Local { instances: 2 })
            .build()
    }

    #[tokio::test]
    async fn a_failing_store_gets_each_domains_failure_mode() {
        let store = Flaky::default();
        store.fail(true);
        let service = service(store);
        let ask = |domain: &'static str| {
            let service = service.clone();
            async move {
                service
                    .should_rate_limit(request(domain, &[&[("ip", "1")], &[("other", "x")]]))
                    .await
            }
        };
        let status = ask("error").await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable);

        let open = ask("open").await.unwrap();
        assert_eq!(open.overall_code(), Code::Ok);
        assert_eq!(open.statuses[0].code(), Code::Ok);

        let closed = ask("closed").await.unwrap();
        assert_eq!(closed.overall_code(), Code::OverLimit);
        assert_eq!(closed.statuses[0].code(), Code::OverLimit);
        // A descriptor without a rule is not limited, whatever the store does.
        assert_eq!(closed.statuses[1].code(), Code::Ok);

        // This server's share: 4 a day over 2 servers.
        for remaining in [1, 0] {
            let local = ask("local").await.unwrap();
            assert_eq!(local.overall_code(), Code::Ok);
            assert_eq!(local.statuses[0].limit_remaining, remaining);
        }
        let local = ask("local").await.unwrap();
        assert_eq!(local.overall_code(), Code::OverLimit);
    }

    #[tokio::test]
    async fn the_local_fallback_is_charged_with_what_the_store_admitted() {
        let store = Flaky::default();
        let service = service(store.clone());
        let ask = || service.should_rate_limit(request("local", &[&[("ip", "1")]]));
        assert_eq!(ask().await.unwrap().statuses[0].limit_remaining, 3);
        store.fail(true);
        // One of this server's two already admitted through the store: one more here.
        assert_eq!(ask().await.unwrap().overall_code(), Code::Ok);
        assert_eq!(ask().await.unwrap().overall_code(), Code::OverLimit);
    }

    #[test]
    fn a_files_failure_mode_is_read_beside_the_domain_only() {
        let parse = |text: &str| RlsConfig::parse([("f.yaml", text)], false);
        let config = parse("domain: d\non_store_error: local:3\n").unwrap();
        let mode = config.domain("d").unwrap().on_store_error;
        assert_eq!(mode, Some(FailureMode::Local { instances: 3 }));
        let error = parse("domain: d\non_store_error: maybe\n").unwrap_err();
        assert!(error.to_string().contains("maybe"), "{error}");
        let nested = "domain: d\ndescriptors: [{key: k, on_store_error: open}]\n";
        assert!(parse(nested).is_err(), "a descriptor has no failure mode");
    }
}

#[cfg(test)]
mod budget {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::super::config::RlsConfig;
    use super::super::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
    use super::super::testing::request;
    use super::super::{FailureMode, RateLimitService, RateLimitServiceBuilder};
    use crate::key::Key;
    use crate::policy::Policy;
    use crate::store::{Check, Commit, LimitCosts, MemoryStore, Store};

    /// A memory store whose calls wait for a permit of `gate` (one per call), counting them.
    #[derive(Clone)]
    struct Gated {
        memory: MemoryStore,
        gate: Arc<Semaphore>,
        calls: Arc<AtomicUsize>,
    }

    impl Gated {
        fn pending(&self, answer: impl FnOnce() -> Check + Send + 'static) -> Check {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let gate = Arc::clone(&self.gate);
            Check::pending(async move {
                gate.acquire().await.expect("open").forget();
                answer().await
            })
        }
    }

    impl Store for Gated {
        fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
            let (memory, policy, key) = (self.memory.clone(), policy.clone(), key.clone());
            self.pending(move || Check::ready(Ok(memory.check_now(&policy, &key, cost))))
        }

        fn limit_costs(&self) -> Option<&dyn LimitCosts> {
            Some(self)
        }
    }

    impl LimitCosts for Gated {
        fn check_costs(&self, policy: &Policy, key: &Key, costs: &[u64], commit: Commit) -> Check {
            let (memory, policy, key) = (self.memory.clone(), policy.clone(), key.clone());
            let costs = costs.to_vec();
            self.pending(move || {
                Check::ready(memory.check_costs_now(&policy, &key, &costs, commit))
            })
        }
    }

    fn service(
        store: Gated,
        build: impl Fn(RateLimitServiceBuilder) -> RateLimitServiceBuilder,
    ) -> RateLimitService {
        let config = RlsConfig::parse(
            [("d.yaml", "domain: d\ndescriptors: [{key: ip, rate_limit: {unit: day, requests_per_unit: 9}}]\n")],
            false,
        )
        .unwrap();
        let builder = RateLimitService::builder(store)
            .config(config)
            .store_deadline(Duration::from_secs(30));
        build(builder).build()
    }

    /// Waits (with a deadline) until `store` has been called `n` times.
    async fn called(store: &Gated, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while store.calls.load(Ordering::SeqCst) < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the store was not called"
            );
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn past_its_call_budget_a_request_gets_its_failure_mode_without_a_store_call() {
        let store = Gated {
            memory: MemoryStore::new(),
            gate: Arc::new(Semaphore::new(0)),
            calls: Arc::default(),
        };
        let service = service(store.clone(), |b| {
            b.max_store_calls(1)
                .domain_on_store_error("d", FailureMode::Closed)
        });
        let held = tokio::spawn({
            let service = service.clone();
            async move {
                service
                    .should_rate_limit(request("d", &[&[("ip", "1")]]))
                    .await
            }
        });
        called(&store, 1).await;
        // The one place is taken: answered by the domain's mode (closed), the store not asked.
        let over = service
            .should_rate_limit(request("d", &[&[("ip", "2")]]))
            .await
            .unwrap();
        assert_eq!(over.overall_code(), Code::OverLimit);
        assert_eq!(store.calls.load(Ordering::SeqCst), 1);
        store.gate.add_permits(1);
        assert_eq!(held.await.unwrap().unwrap().overall_code(), Code::Ok);
        // The place is free again.
        store.gate.add_permits(1);
        let ok = service.should_rate_limit(request("d", &[&[("ip", "2")]]));
        assert_eq!(ok.await.unwrap().overall_code(), Code::Ok);
    }

    #[tokio::test]
    async fn by_default_no_call_waits_for_a_place() {
        let store = Gated {
            memory: MemoryStore::new(),
            gate: Arc::new(Semaphore::new(0)),
            calls: Arc::default(),
        };
        let service = service(store.clone(), |b| b);
        let calls = 300;
        let waiting: Vec<_> = (0..calls)
            .map(|i| {
                let service = service.clone();
                tokio::spawn(async move {
                    let ip = i.to_string();
                    service
                        .should_rate_limit(request("d", &[&[("ip", &ip)]]))
                        .await
                })
            })
            .collect();
        // More calls in flight at once than the layer's default bound (256), all made.
        called(&store, calls).await;
        store.gate.add_permits(calls);
        for answer in waiting {
            assert_eq!(answer.await.unwrap().unwrap().overall_code(), Code::Ok);
        }
    }
}
