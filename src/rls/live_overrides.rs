//! What the admin API (`rls::admin`, feature `admin`) changes while the service runs, kept
//! in the store's overrides ([`Overrides`]): on Redis in the overrides hash, so every replica
//! reads it at its next poll and a restart keeps it.
//!
//! - a descriptor's limits: an [`Override`] of one rate per limit of its rule, under the
//!   policy name [`LIMITS`] and the descriptor's key ([`descriptor_key`]);
//! - shadow mode, for a domain ([`domain_key`]) or one descriptor: under [`SHADOW`], an
//!   override of one rate whose count says on (1) or off (2).
//!
//! Both names hold `#`, which no public policy name holds: no check of the store's ever
//! applies them itself; the plan does (`plan.rs`), looking them up in memory
//! ([`Overrides::override_in_force`]), and only once the store has seen an override at all.

use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;

use super::config::{RlsLimit, RlsRule, Unit};
use crate::error::{ConfigError, StoreError};
use crate::key::Key;
use crate::limit::Limit;
use crate::policy::Policy;
use crate::store::{Override, Overrides, Store};

/// The policy name a descriptor's limits are overridden under.
pub(crate) const LIMITS: &str = "rls#limits";

/// The policy name shadow mode is set under.
pub(crate) const SHADOW: &str = "rls#shadow";

/// The counts of the shadow override: on, off.
const ON: u64 = 1;
const OFF: u64 = 2;

/// The overrides in force, as one request's plan reads them.
#[derive(Clone, Copy)]
pub(super) struct LiveOverrides<'a> {
    /// `None` while the store knows of no override at all (most services, always): the plan
    /// then builds no key to look one up.
    overrides: Option<&'a dyn Overrides>,
}

impl<'a> LiveOverrides<'a> {
    /// The overrides `store` applies now.
    pub(super) fn of(store: &'a dyn Store) -> Self {
        LiveOverrides {
            overrides: store.overrides().filter(|o| o.overrides_version() != 0),
        }
    }

    /// Whether some override may stand.
    pub(super) fn active(&self) -> bool {
        self.overrides.is_some()
    }

    /// The rates the descriptor keyed `key` ([`descriptor_key`]) is counted under instead of
    /// its rule's.
    pub(super) fn limits(&self, key: &Key) -> Option<Override> {
        self.overrides?.override_in_force(LIMITS, key)
    }

    /// Shadow mode as set for `key` (a [`domain_key`] or a [`descriptor_key`]): `None` when
    /// the configuration decides.
    pub(super) fn shadow(&self, key: &Key) -> Option<bool> {
        shadow_of(&self.overrides?.override_in_force(SHADOW, key)?)
    }
}

/// Waits for `store`'s first read of its overrides if it has not made one yet (a Redis store
/// made with `connect_lazy`, just started): a plan made before would apply the rules' limits
/// where a stored override says otherwise. True if it waited: plan again.
pub(super) async fn read_first(store: &dyn Store) -> Result<bool, StoreError> {
    match store.overrides().and_then(Overrides::read_overrides) {
        Some(read) => read.await.map(|()| true),
        None => Ok(false),
    }
}

/// What a stored shadow override says: on, off, or nothing it knows.
pub(crate) fn shadow_of(value: &Override) -> Option<bool> {
    match value.rates() {
        [(ON, _)] => Some(true),
        [(OFF, _)] => Some(false),
        _ => None,
    }
}

/// The key a descriptor's overrides are stored under: the domain, then each entry's key and
/// value, NUL-separated and NUL-ended (so it is never a [`domain_key`]).
pub(crate) fn descriptor_key(domain: &str, entries: &[(&str, &str)]) -> Key {
    Key::new(&descriptor_text(domain, entries, 0)[..])
}

/// The domain and every entry's key and value, each after a NUL byte, and a closing NUL: the
/// text an override's key is and a counter's key starts with (`extra` bytes to spare for
/// what follows).
pub(super) fn descriptor_text(
    domain: &str,
    entries: &[(&str, &str)],
    extra: usize,
) -> SmallVec<[u8; 128]> {
    let mut text = SmallVec::with_capacity(
        domain.len()
            + entries
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>()
            + 1
            + extra,
    );
    text.extend_from_slice(domain.as_bytes());
    for (key, value) in entries {
        text.push(0);
        text.extend_from_slice(key.as_bytes());
        text.push(0);
        text.extend_from_slice(value.as_bytes());
    }
    text.push(0);
    text
}

/// The key a domain's shadow mode is stored under: its name.
pub(crate) fn domain_key(domain: &str) -> Key {
    Key::new(domain)
}

/// A policy named `name` (its one limit a placeholder): for reading and removing overrides,
/// which go by the policy's name alone, and for checking a shadow override (its numbers a
/// flag).
#[cfg_attr(not(feature = "admin"), allow(dead_code))] // Only the admin API sets them.
pub(crate) fn flag_policy(name: &'static str) -> Result<Policy, ConfigError> {
    let flag = Limit::fixed_window(OFF, Duration::from_secs(1))?;
    Ok(Policy::part(Arc::from(name), Arc::from([flag])))
}

/// The stored form of shadow mode `on`.
#[cfg_attr(not(feature = "admin"), allow(dead_code))] // Only the admin API sets them.
pub(crate) fn shadow_value(on: bool) -> Result<Override, ConfigError> {
    let count = if on { ON } else { OFF };
    Override::new(&flag_policy(SHADOW)?, [(count, Duration::from_secs(1))])
}

/// The policy a rule's limits override is checked against: its limits, or why it has none to
/// override (a `requests_per_unit: 0` limit bans, and has no rate to replace).
#[cfg_attr(not(feature = "admin"), allow(dead_code))] // Only the admin API sets them.
pub(crate) fn limits_policy(rule: &RlsRule) -> Result<Policy, String> {
    let limits = rule
        .limits()
        .iter()
        .map(|l| {
            l.limit().copied().ok_or_else(|| {
                "a rule with a `requests_per_unit: 0` limit cannot be overridden".to_owned()
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if limits.is_empty() {
        return Err("the rule has no limit to override (unlimited)".to_owned());
    }
    Ok(Policy::part(Arc::from(LIMITS), Arc::from(limits)))
}

/// `limit` counted at `rate` instead (its algorithm kept), and what `current_limit` then says:
/// `N` (`requests_per_unit`) per the longest unit the period is a whole number of. `None` if
/// the rate does not fit the algorithm (the rule changed since the override was set): the
/// rule's limit stands.
pub(super) fn overridden(
    limit: &RlsLimit,
    (count, period): (u64, Duration),
) -> Option<(Limit, u32, Unit)> {
    limit.limit()?;
    let counted = Limit::new(limit.algorithm(), count, period).ok()?;
    let unit = Unit::ALL
        .iter()
        .rev()
        .find(|u| period.subsec_nanos() == 0 && period.as_secs() % u.seconds() == 0)
        .copied()
        .unwrap_or(Unit::Second);
    Some((counted, u32::try_from(count).unwrap_or(u32::MAX), unit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rls::config::RlsConfig;

    #[test]
    fn keys_of_a_domain_and_its_descriptors_differ() {
        assert_ne!(descriptor_key("d", &[]), domain_key("d"));
        assert_ne!(
            descriptor_key("d", &[("a", "b")]),
            descriptor_key("d", &[("a\0b", "")])
        );
        assert_eq!(shadow_of(&shadow_value(true).unwrap()), Some(true));
        assert_eq!(shadow_of(&shadow_value(false).unwrap()), Some(false));
    }

    #[test]
    fn an_override_keeps_the_algorithm_and_shows_a_whole_unit() {
        let config = RlsConfig::parse(
            [(
                "d.yaml",
                "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 5, algorithm: gcra, name: n}}\n  - {key: z, rate_limit: {unit: second, requests_per_unit: 0}}\n",
            )],
            false,
        )
        .unwrap();
        let domain = config.domain("d").unwrap();
        let rule = domain.find(&[("k", "v")]).unwrap();
        let (limit, requests_per_unit, unit) =
            overridden(&rule.limits()[0], (50, Duration::from_secs(120))).unwrap();
        assert_eq!(limit, Limit::gcra(50, Duration::from_secs(120)).unwrap());
        assert_eq!((requests_per_unit, unit), (50, Unit::Minute));
        assert!(limits_policy(rule).is_ok());
        assert!(limits_policy(domain.find(&[("z", "v")]).unwrap()).is_err());
    }
}
