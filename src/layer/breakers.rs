//! One circuit breaker per failure domain of the store, so that one sick shard of a Redis
//! Cluster does not switch limiting off for the healthy ones.

use std::time::{Duration, Instant};

use super::breaker::{Admission, Breaker, Change, Outcome};
use super::settings::CircuitBreaker;

/// How many breakers a layer keeps: a store's failure domains are folded onto these (a Redis
/// Cluster's 16 384 slots in ranges of 128, so a shard's slots share few breakers with
/// another's).
pub(crate) const DOMAINS: usize = 128;

/// The breakers of a layer, shared by its clones, and the clock they count in.
#[derive(Debug)]
pub(crate) struct Breakers {
    config: CircuitBreaker,
    epoch: Instant,
    domains: Box<[Breaker]>,
}

impl Breakers {
    pub(crate) fn new(config: CircuitBreaker) -> Self {
        Breakers {
            config,
            epoch: Instant::now(),
            domains: (0..DOMAINS).map(|_| Breaker::default()).collect(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn breaker(&self, domain: u16) -> &Breaker {
        &self.domains[usize::from(domain) % DOMAINS]
    }

    /// Whether a request for `domain` may call the store.
    pub(crate) fn admit(&self, domain: u16, deadline: Duration) -> Admission {
        let breaker = self.breaker(domain);
        if self.config.is_disabled() || breaker.is_closed() {
            return Admission::Call;
        }
        breaker.admit(self.now_ms(), deadline)
    }

    /// The probe `admission` granted was not sent after all.
    pub(crate) fn abandon(&self, domain: u16, admission: Admission) {
        if admission == Admission::Probe {
            self.breaker(domain).abandon_probe();
        }
    }

    /// Records how a store call for `domain` ended (a disabled breaker counts too, never
    /// opening), and logs the breaker's transitions.
    pub(crate) fn record(&self, domain: u16, admission: Admission, outcome: Outcome) {
        let breaker = self.breaker(domain);
        // One clock read for both: the window counts in ms, silence is judged in µs.
        let elapsed = self.epoch.elapsed();
        if admission != Admission::Skip && outcome != Outcome::Timeout {
            breaker.note_answer(elapsed.as_micros() as u64 + 1);
        }
        let now_ms = elapsed.as_millis() as u64 + 1;
        let change = breaker.record(&self.config, now_ms, admission, outcome);
        self.report(domain, change);
    }

    /// The breakers' clock in µs (at least 1) at `instant`.
    fn us_at(&self, instant: Instant) -> u64 {
        instant.saturating_duration_since(self.epoch).as_micros() as u64 + 1
    }

    /// Whether a call of `domain` asked at `asked` missed its deadline in silence: nothing in
    /// the domain answered since. If so, and no confirmation is under way, one starts: the
    /// caller probes the store and reports with [`Breakers::confirmed`].
    pub(crate) fn start_confirming(&self, domain: u16, asked: Instant) -> bool {
        let breaker = self.breaker(domain);
        !self.config.is_disabled()
            && !breaker.answered_since(self.us_at(asked))
            && breaker.start_confirming()
    }

    /// The end of a confirmation started for a call asked at `asked`: `gone` (the probe got no
    /// answer) opens the domain's breaker at once, unless something answered meanwhile.
    pub(crate) fn confirmed(&self, domain: u16, asked: Instant, gone: bool) {
        let breaker = self.breaker(domain);
        let change = breaker.confirmed(&self.config, self.now_ms(), self.us_at(asked), gone);
        self.report(domain, change);
    }

    fn report(&self, domain: u16, change: Option<Change>) {
        match change {
            Some(Change::Opened {
                calls,
                failures,
                timeouts,
            }) => {
                crate::telemetry::breaker_transition("open");
                tracing::warn!(
                    domain,
                    calls,
                    failures,
                    timeouts,
                    cool_down = ?self.config.cool_down_value(),
                    "rate-limit store keeps failing; circuit open, deciding without it"
                )
            }
            Some(Change::Silent) => {
                crate::telemetry::breaker_transition("open");
                tracing::warn!(
                    domain,
                    cool_down = ?self.config.cool_down_value(),
                    "rate-limit store stopped answering (a call passed its deadline, and a probe, \
                     with no reply); circuit open, deciding without it"
                )
            }
            Some(Change::Closed) => {
                crate::telemetry::breaker_transition("closed");
                tracing::info!(domain, "rate-limit store answers again; circuit closed")
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_millis(100);

    #[test]
    fn domains_fail_independently() {
        let b = Breakers::new(CircuitBreaker::new().min_calls(3));
        for _ in 0..3 {
            assert_eq!(b.admit(7, DEADLINE), Admission::Call);
            b.record(7, Admission::Call, Outcome::Failure);
        }
        assert_eq!(b.admit(7, DEADLINE), Admission::Skip);
        assert_eq!(
            b.admit(7 + DOMAINS as u16, DEADLINE),
            Admission::Skip,
            "folded"
        );
        assert_eq!(b.admit(8, DEADLINE), Admission::Call, "another shard");
    }

    #[test]
    fn disabled_never_opens() {
        let b = Breakers::new(CircuitBreaker::disabled());
        for _ in 0..1000 {
            b.record(0, Admission::Call, Outcome::Failure);
        }
        assert_eq!(b.admit(0, DEADLINE), Admission::Call);
    }
}
