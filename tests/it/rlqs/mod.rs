//! The Rate Limit Quota Service (`redlimit::rlqs`) served by tonic on loopback ports, driven
//! by raw protocol clients of the generated stubs (streams that report as Envoy's filter
//! does), alone and as two instances on one real redis-server.

mod fleet;
mod stream;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redlimit::rlqs::{RlqsService, RlqsServiceBuilder};
use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::r#type::v3::RateLimitStrategy;
use redlimit::rls::proto::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use redlimit::rls::proto::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction as Action;
use redlimit::rls::proto::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use redlimit::rls::proto::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use redlimit::rls::proto::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use tokio::sync::mpsc;
use tonic::transport::{Channel, Server};

/// The rules every test serves: `tenant` 1000/s (1000 tokens a second), `slow` 10/s (1000
/// tokens per 100 s), `banned` denied, anything else allowed.
pub(super) const CONFIG: &str = "
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 1000}
  - key: slow
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: banned
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: free
    rate_limit: {unlimited: true}
";

/// A builder with the test rules and short intervals.
pub(super) fn builder() -> RlqsServiceBuilder {
    RlqsService::builder()
        .config(RlsConfig::parse([("edge.yaml", CONFIG)], false).expect("test config"))
        .sync_interval(Duration::from_millis(100))
}

/// `service` served on a free loopback port; a channel to it.
pub(super) async fn serve(service: RlqsService) -> Channel {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(
        Server::builder()
            .add_service(service.into_server())
            .serve_with_incoming(incoming),
    );
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect to the service")
}

/// A bucket id of one entry.
pub(super) fn bucket(key: &str, value: &str) -> BucketId {
    BucketId {
        bucket: HashMap::from([(key.to_owned(), value.to_owned())]),
    }
}

/// One usage entry.
pub(super) fn usage(id: &BucketId, allowed: u64, denied: u64) -> BucketQuotaUsage {
    BucketQuotaUsage {
        bucket_id: Some(id.clone()),
        time_elapsed: Some(prost_types::Duration {
            seconds: 0,
            nanos: 0,
        }),
        num_requests_allowed: allowed,
        num_requests_denied: denied,
    }
}

/// A task reporting a stream's demand; stops when dropped.
pub(super) struct Reporter(tokio::task::JoinHandle<()>);

impl Drop for Reporter {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One stream, as an RLQS client sees it: reports go out, actions come in.
pub(super) struct Stream {
    reports: mpsc::UnboundedSender<RateLimitQuotaUsageReports>,
    responses: tonic::Streaming<RateLimitQuotaResponse>,
    /// The last assignment of each bucket (by its single entry's value).
    pub(super) latest: HashMap<String, Assigned>,
}

/// What the client holds for a bucket.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Assigned {
    Blanket(BlanketRule),
    /// tokens_per_fill, fill seconds, max_tokens, TTL seconds.
    Tokens {
        per_fill: u32,
        fill_seconds: i64,
        max: u32,
        ttl: i64,
    },
    Abandoned,
}

impl Stream {
    /// Opens a stream on `channel`.
    pub(super) async fn open(channel: &Channel) -> Stream {
        Stream::try_open(channel).await.expect("the stream opens")
    }

    /// Opens a stream on `channel`, or the status the server refused it with.
    pub(super) async fn try_open(channel: &Channel) -> Result<Stream, tonic::Status> {
        let (reports, receiver) = mpsc::unbounded_channel();
        let outbound = futures_util::stream::unfold(receiver, |mut r| async move {
            r.recv().await.map(|report| (report, r))
        });
        let responses = RateLimitQuotaServiceClient::new(channel.clone())
            .stream_rate_limit_quotas(outbound)
            .await?
            .into_inner();
        Ok(Stream {
            reports,
            responses,
            latest: HashMap::new(),
        })
    }

    /// Reads the responses that come within `span`.
    pub(super) async fn pump(&mut self, span: Duration) {
        self.until(span, |_| false).await;
    }

    /// Sends one report of `usages` under `domain`.
    pub(super) fn send(&self, domain: &str, usages: Vec<BucketQuotaUsage>) {
        let _ = self.reports.send(RateLimitQuotaUsageReports {
            domain: domain.to_owned(),
            bucket_quota_usages: usages,
        });
    }

    /// The next response (within `deadline`): `Ok(None)` when the stream ended, `Err` with its
    /// status when it failed.
    pub(super) async fn next(
        &mut self,
        deadline: Duration,
    ) -> Result<Option<RateLimitQuotaResponse>, tonic::Status> {
        match tokio::time::timeout(deadline, self.responses.message()).await {
            Ok(outcome) => {
                let response = outcome?;
                if let Some(response) = &response {
                    self.take(response);
                }
                Ok(response)
            }
            Err(_) => panic!("no response within {deadline:?}"),
        }
    }

    fn take(&mut self, response: &RateLimitQuotaResponse) {
        for action in &response.bucket_action {
            let id = action
                .bucket_id
                .as_ref()
                .expect("every action names its bucket");
            let name = id.bucket.values().next().cloned().unwrap_or_default();
            let assigned = match action.bucket_action.as_ref().expect("an action") {
                Action::AbandonAction(_) => Assigned::Abandoned,
                Action::QuotaAssignmentAction(a) => {
                    let ttl = a.assignment_time_to_live.expect("a TTL").seconds;
                    match a.rate_limit_strategy.expect("a strategy") {
                        RateLimitStrategy {
                            strategy: Some(Strategy::BlanketRule(rule)),
                        } => Assigned::Blanket(BlanketRule::try_from(rule).expect("a rule")),
                        RateLimitStrategy {
                            strategy: Some(Strategy::TokenBucket(b)),
                        } => Assigned::Tokens {
                            per_fill: b.tokens_per_fill.expect("tokens_per_fill"),
                            fill_seconds: b.fill_interval.expect("fill_interval").seconds,
                            max: b.max_tokens,
                            ttl,
                        },
                        other => panic!("never assigned: {other:?}"),
                    }
                }
            };
            self.latest.insert(name, assigned);
        }
    }

    /// Reads responses until `condition` holds on the latest assignments; false if it does
    /// not within `deadline`.
    pub(super) async fn until(
        &mut self,
        deadline: Duration,
        condition: impl Fn(&HashMap<String, Assigned>) -> bool,
    ) -> bool {
        let end = Instant::now() + deadline;
        loop {
            if condition(&self.latest) {
                return true;
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let step = left.min(Duration::from_millis(300));
            if let Ok(outcome) = tokio::time::timeout(step, self.responses.message()).await {
                match outcome {
                    Ok(Some(response)) => self.take(&response),
                    _ => return condition(&self.latest),
                }
            }
        }
    }

    /// Reports `rate` requests a second (all allowed) for bucket `id` every 100 ms, from the time really elapsed, until the
    /// handle is dropped: the demand the server measures on its clock.
    pub(super) fn demand(&self, domain: &str, id: &BucketId, rate: f64) -> Reporter {
        let reports = self.reports.clone();
        let (domain, id) = (domain.to_owned(), id.clone());
        Reporter(tokio::spawn(async move {
            let mut last = Instant::now();
            let mut carry = 0.0;
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let now = Instant::now();
                carry += rate * (now - last).as_secs_f64();
                last = now;
                let whole = carry.floor();
                carry -= whole;
                let report = RateLimitQuotaUsageReports {
                    domain: domain.clone(),
                    bucket_quota_usages: vec![usage(&id, whole as u64, 0)],
                };
                if reports.send(report).is_err() {
                    return;
                }
            }
        }))
    }

    /// The tokens per fill last assigned to bucket `name`, if a token bucket.
    pub(super) fn tokens(&self, name: &str) -> Option<u32> {
        match self.latest.get(name) {
            Some(Assigned::Tokens { per_fill, .. }) => Some(*per_fill),
            _ => None,
        }
    }
}
