//! `/rls/{domain}/counters?ENTRIES`: a descriptor's counters, one per limit of its rule (or of
//! its override), read without consuming anything (`GET`) or reset (`DELETE`).

use std::time::{Duration, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use super::super::RateLimitService;
use super::super::config::Unit;
use super::super::live_overrides::{LiveOverrides, read_first};
use super::super::plan::{Counter, Mode, Plan, Resolved, plan};
use super::super::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use super::super::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor;
use super::super::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use super::super::run::POLICY;
use super::super::run::{Home, Homes};
use super::target::{Entry, Target};
use crate::admin::AdminError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::Admin;

/// `GET`'s answer.
#[derive(Serialize)]
pub(super) struct CountersBody {
    domain: String,
    descriptor: Vec<Entry>,
    /// The rule's full key (`domain.key_value...`).
    rule: String,
    /// `enforce`, `quota` or `shadow`: how the descriptor counts in a request's verdict.
    mode: &'static str,
    /// The descriptor is counted under an override set through this API.
    overridden: bool,
    limits: Vec<CounterBody>,
}

/// One counter.
#[derive(Serialize)]
struct CounterBody {
    /// The key the store keeps the counter under.
    key: String,
    name: String,
    requests_per_unit: u32,
    unit: String,
    /// Units per period, as counted (0: `requests_per_unit: 0`, always over).
    limit: u64,
    remaining: u64,
    /// Unix seconds.
    reset: u64,
    /// Seconds; 0 when one more hit would pass now.
    retry_after: u64,
}

/// `DELETE`'s answer: the counters' keys, gone from the store.
#[derive(Serialize)]
pub(super) struct ResetBody {
    domain: String,
    descriptor: Vec<Entry>,
    keys: Vec<String>,
}

/// The descriptor's plan under the configuration and overrides in force: its counters.
async fn resolve(service: &RateLimitService, target: &Target) -> Result<(Plan, Mode), AdminError> {
    target.rule()?;
    // The overrides in force, read first by a store just started (`connect_lazy`).
    read_first(&**service.inner.shared.store()).await?;
    let request = RateLimitRequest {
        domain: target.domain.clone(),
        descriptors: vec![RateLimitDescriptor {
            entries: target
                .entries
                .iter()
                .map(|(key, value)| rate_limit_descriptor::Entry {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect(),
            ..Default::default()
        }],
        hits_addend: 0,
    };
    let runtime = LiveOverrides::of(&**service.inner.shared.store());
    let planned = plan(
        target.config(),
        &request,
        usize::MAX,
        &runtime,
        service.inner.hash_tag,
    )
    .map_err(|status| AdminError::BadDescriptor(status.message().to_owned()))?
    .ok_or_else(|| AdminError::NoSuchDomain(target.domain.clone()))?;
    let mode = match planned.descriptors.first() {
        Some(Resolved::Limited { mode, .. }) => *mode,
        // A rule `replaces` named, or one without limits: nothing is counted.
        _ => {
            return Err(AdminError::NoRule(
                "the descriptor's rule counts nothing (unlimited)".into(),
            ));
        }
    };
    Ok((planned, mode))
}

/// The check that holds `counter` alone: its limit under its own key.
fn check_of(counter: &Counter) -> Option<Result<(Policy, Key), AdminError>> {
    let limit = counter.limit?;
    let key = counter
        .tag
        .clone()
        .with_named_limit_keys([counter.own.clone()]);
    Some(
        Policy::new(POLICY, [limit])
            .map(|policy| (policy, key))
            .map_err(|e| AdminError::Store(e.to_string())),
    )
}

/// The store that keeps `counter`: the per-second one for a limit in seconds, when there is
/// one; else the main one.
fn home(service: &RateLimitService, counter: &Counter) -> Home {
    let split = service.inner.per_second.is_some();
    Homes { split }.of(counter)
}

fn admin<'a>(
    service: &'a RateLimitService,
    counter: &Counter,
    power: &'static str,
) -> Result<&'a dyn Admin, AdminError> {
    let inner = &service.inner;
    let shared = match (home(service, counter), &inner.per_second) {
        (Home::PerSecond, Some(per_second)) => per_second,
        _ => &inner.shared,
    };
    shared.store().admin().ok_or(AdminError::Unsupported(power))
}

pub(super) async fn inspect(
    State(service): State<RateLimitService>,
    uri: http::Uri,
) -> Result<Json<CountersBody>, AdminError> {
    let target = Target::of(&service, &uri)?;
    let rule = target.rule()?.full_key().to_owned();
    let (plan, mode) = resolve(&service, &target).await?;
    let overridden = plan
        .counters
        .iter()
        .zip(target.rule()?.limits())
        .any(|(c, l)| c.limit.as_ref() != l.limit());
    let mut limits = Vec::with_capacity(plan.counters.len());
    for counter in &plan.counters {
        let unit =
            Unit::from_proto_number(counter.shown.unit).map_or_else(String::new, |u| u.to_string());
        let mut body = CounterBody {
            key: counter.own.to_string(),
            name: counter.shown.name.clone(),
            requests_per_unit: counter.shown.requests_per_unit,
            unit,
            limit: 0,
            remaining: 0,
            reset: 0,
            retry_after: 0,
        };
        if let Some(check) = check_of(counter) {
            let (policy, key) = check?;
            let admin = admin(&service, counter, "inspect")?;
            let state = admin.inspect(&policy, &key).await?;
            if let Some(limit) = state.limits().first() {
                body.limit = limit.limit().count();
                body.remaining = limit.remaining();
                body.reset = (state.evaluated_at() + limit.reset_after())
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, ceil_secs);
                body.retry_after = limit.retry_after().map_or(0, |wait| ceil_secs(wait).max(1));
            }
        }
        limits.push(body);
    }
    Ok(Json(CountersBody {
        domain: target.domain.clone(),
        descriptor: target.descriptor(),
        rule,
        mode: match mode {
            Mode::Enforce => "enforce",
            Mode::Quota => "quota",
            Mode::Shadow => "shadow",
        },
        overridden,
        limits,
    }))
}

pub(super) async fn reset(
    State(service): State<RateLimitService>,
    uri: http::Uri,
) -> Result<Json<ResetBody>, AdminError> {
    let target = Target::of(&service, &uri)?;
    let (plan, _) = resolve(&service, &target).await?;
    let mut keys = Vec::with_capacity(plan.counters.len());
    for counter in &plan.counters {
        keys.push(counter.own.to_string());
        let Some(check) = check_of(counter) else {
            continue;
        };
        let (policy, key) = check?;
        let admin = admin(&service, counter, "reset")?;
        let generation = &target.generation;
        let engine = match (home(&service, counter), &generation.per_second) {
            (Home::PerSecond, Some(per_second)) => per_second,
            _ => &generation.engine,
        };
        engine.forget_denial(plan.rule, &counter.own);
        // Tells every replica (a Redis store): their deny caches drop their denials at once.
        admin.reset(&policy, &key).await?;
        // Again after the store's reset (a denial cached while it was under way), and this
        // server's share in memory, where the domain's failure mode keeps one.
        engine.forget_counter(plan.rule, &policy, &key);
    }
    Ok(Json(ResetBody {
        domain: target.domain.clone(),
        descriptor: target.descriptor(),
        keys,
    }))
}

/// Whole seconds, rounded up, as the headers count them.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}
