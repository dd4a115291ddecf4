//! The one place a config is put in force, whichever source read it (`files`, `xds`): the
//! service's config replaced, then health told.
//!
//! And the decisions before the first config: with `CONFIG_TYPE=GRPC_XDS_SOTW` the listeners
//! open at once (a liveness probe must not wait on the xDS server), and until the first config
//! is in force `ShouldRateLimit` answers as envoyproxy/ratelimit answers with no config loaded:
//! a request with no domain or no descriptor is refused as always, any other gets `UNKNOWN` "no
//! rate limit configuration loaded" (counted as a `service_error`), which Envoy's
//! `failure_mode_deny` then decides. `/json` answers it 400, as the Go service does.
//!
//! A config read from files is in force before the listeners open: calls are served from the
//! start, unless the files did not load and `FORCE_START_WITHOUT_INITIAL_CONFIG` started the
//! server all the same; they are then from the first config that loads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redlimit::rlqs::RlqsService;
use redlimit::rls::RateLimitService;
use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::Status;

use crate::health::Health;

/// The Go service's error for a call before any config (`constructLimitsToCheck`).
pub(crate) const NO_CONFIG: &str = "no rate limit configuration loaded";

/// The service, the config in force in it (or none yet), and the health that reports it.
#[derive(Clone)]
pub(crate) struct InForce {
    service: RateLimitService,
    /// The Rate Limit Quota Service, which reads its quotas from the same config.
    rlqs: Option<RlqsService>,
    health: Health,
    configured: Arc<AtomicBool>,
}

impl InForce {
    /// A service whose config is in force already (read from files).
    pub(crate) fn open(service: RateLimitService, health: Health) -> Self {
        Self::new(service, health, true)
    }

    /// A service that waits for its first config (from the xDS server).
    pub(crate) fn awaiting_config(service: RateLimitService, health: Health) -> Self {
        Self::new(service, health, false)
    }

    fn new(service: RateLimitService, health: Health, configured: bool) -> Self {
        InForce {
            service,
            rlqs: None,
            health,
            configured: Arc::new(AtomicBool::new(configured)),
        }
    }

    /// Puts every config from now on in force in `rlqs` too.
    pub(crate) fn with_rlqs(mut self, rlqs: RlqsService) -> Self {
        self.rlqs = Some(rlqs);
        self
    }

    /// Puts `config` in force (a file reload's and an xDS update's path alike), tells health,
    /// then serves decisions: a call that sees them served sees the config.
    pub(crate) fn put_in_force(&self, config: RlsConfig) {
        let has_domain = config.domains().next().is_some();
        if let Some(rlqs) = &self.rlqs {
            rlqs.reload(config.clone());
        }
        self.service.reload(config);
        self.health.config_applied(has_domain);
        if !self.configured.swap(true, Ordering::AcqRel) {
            tracing::info!("the first config is in force: serving decisions");
        }
    }

    /// `ShouldRateLimit`: the service's answer once a config is in force, and before, the
    /// Go service's checks in its order (domain, descriptors, then the config).
    pub(crate) async fn should_rate_limit(
        &self,
        request: RateLimitRequest,
    ) -> Result<RateLimitResponse, Status> {
        // An invalid request is refused by the service, as it is after the first config.
        if !self.configured.load(Ordering::Acquire)
            && !request.domain.is_empty()
            && !request.descriptors.is_empty()
        {
            metrics::counter!(
                "ratelimit_service_should_rate_limit_error",
                "err_type" => "service_error"
            )
            .increment(1);
            return Err(Status::unknown(NO_CONFIG));
        }
        self.service.should_rate_limit(request).await
    }
}

#[cfg(test)]
mod tests {
    use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
    use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
    use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
    use redlimit::store::MemoryStore;

    use super::*;

    fn request(domain: &str, descriptors: usize) -> RateLimitRequest {
        let descriptor = RateLimitDescriptor {
            entries: vec![Entry {
                key: "k".into(),
                value: "v".into(),
            }],
            ..Default::default()
        };
        RateLimitRequest {
            domain: domain.into(),
            descriptors: vec![descriptor; descriptors],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn before_the_first_config_calls_answer_as_the_go_service() {
        let (reporter, _) = tonic_health::server::health_reporter();
        let health = Health::new(reporter, false, false, true).await;
        let service = RateLimitService::builder(MemoryStore::new()).build();
        let in_force = InForce::awaiting_config(service, health);
        let status = in_force
            .should_rate_limit(request("d", 1))
            .await
            .unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (tonic::Code::Unknown, NO_CONFIG)
        );
        // Its checks come first, as in the Go service; refused as the service refuses them.
        let status = in_force
            .should_rate_limit(request("", 1))
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        let status = in_force
            .should_rate_limit(request("d", 0))
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);

        let config = RlsConfig::parse(
            [(
                "d.yaml",
                "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n",
            )],
            false,
        )
        .expect("a config");
        in_force.put_in_force(config);
        let codes = [
            in_force.should_rate_limit(request("d", 1)).await,
            in_force.should_rate_limit(request("d", 1)).await,
        ]
        .map(|answer| answer.expect("an answer").overall_code);
        assert_eq!(codes, [Code::Ok as i32, Code::OverLimit as i32]);
    }

    #[tokio::test]
    async fn with_a_config_in_force_calls_are_the_services() {
        let (reporter, _) = tonic_health::server::health_reporter();
        let health = Health::new(reporter, false, false, true).await;
        let in_force = InForce::open(
            RateLimitService::builder(MemoryStore::new()).build(),
            health,
        );
        let answer = in_force.should_rate_limit(request("d", 1)).await;
        assert_eq!(answer.expect("an answer").overall_code, Code::Ok as i32);
    }
}
