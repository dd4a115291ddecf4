//! One circuit breaker per failure domain of the store, so that one sick shard of a Redis
//! Cluster does not switch limiting off for the healthy ones.

use std::time::{Duration, Instant};

use super::breaker::{Admission, Breaker, Change, Outcome, Probed};
use super::breaker_meters::{BreakerMeters, State};
use crate::failure::circuit_breaker::{CircuitBreaker, DOMAINS};

/// The breakers of a layer, shared by its clones, the clock they count in, and their metrics.
#[derive(Debug)]
pub(crate) struct Breakers {
    config: CircuitBreaker,
    epoch: Instant,
    domains: Box<[Breaker]>,
    meters: BreakerMeters,
}

impl Breakers {
    /// Breakers for a store of kind `store` (its metrics label).
    pub(crate) fn new(config: CircuitBreaker, store: &'static str) -> Self {
        Breakers {
            config,
            epoch: Instant::now(),
            domains: (0..DOMAINS).map(|_| Breaker::default()).collect(),
            meters: BreakerMeters::new(store),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// The breaker of `domain`: its index among the layer's.
    fn index(domain: u16) -> usize {
        usize::from(domain) % DOMAINS
    }

    fn breaker(&self, domain: u16) -> &Breaker {
        &self.domains[Self::index(domain)]
    }

    /// Whether a request for `domain` may call the store.
    // Inlined: a closed breaker (or none) is a load or two on every request.
    #[inline]
    pub(crate) fn admit(&self, domain: u16, deadline: Duration) -> Admission {
        let breaker = self.breaker(domain);
        if self.config.is_disabled() || breaker.is_closed() {
            return Admission::Call;
        }
        self.admit_tripped(domain, deadline)
    }

    /// [`Breakers::admit`] for a breaker open or half open.
    #[inline(never)]
    fn admit_tripped(&self, domain: u16, deadline: Duration) -> Admission {
        let breaker = self.breaker(domain);
        let admission = breaker.admit(self.now_ms(), deadline);
        if admission == Admission::Probe {
            self.meters
                .entered(Self::index(domain), State::HalfOpen, false);
        }
        admission
    }

    /// The probe `admission` granted was not sent after all.
    pub(crate) fn abandon(&self, domain: u16, admission: Admission) {
        if admission == Admission::Probe {
            self.breaker(domain).abandon_probe();
            self.meters.entered(Self::index(domain), State::Open, false);
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

    /// The end of a confirmation started for a call asked at `asked`: a probe that got no
    /// answer, or an error, opens the domain's breaker at once, unless something answered
    /// meanwhile.
    pub(crate) fn confirmed(&self, domain: u16, asked: Instant, probed: Probed) {
        let breaker = self.breaker(domain);
        let change = breaker.confirmed(&self.config, self.now_ms(), self.us_at(asked), probed);
        self.report(domain, change);
    }

    /// Whether `domain`'s breaker is open because the store went silent (no answer: gone, or
    /// starved of CPU, which look alike) rather than because it refused (errors).
    pub(crate) fn silent(&self, domain: u16) -> bool {
        let breaker = self.breaker(domain);
        !breaker.is_closed() && breaker.is_silent()
    }

    fn report(&self, domain: u16, change: Option<Change>) {
        let index = Self::index(domain);
        match change {
            Some(Change::Opened {
                calls,
                failures,
                timeouts,
            }) => {
                self.meters.entered(index, State::Open, true);
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
                self.meters.entered(index, State::Open, true);
                tracing::warn!(
                    domain,
                    cool_down = ?self.config.cool_down_value(),
                    "rate-limit store stopped answering (a call passed its deadline, and a probe, \
                     with no reply); circuit open, deciding without it"
                )
            }
            Some(Change::Refused) => {
                self.meters.entered(index, State::Open, true);
                tracing::warn!(
                    domain,
                    cool_down = ?self.config.cool_down_value(),
                    "rate-limit store refuses (a call passed its deadline, and a probe failed); \
                     circuit open, deciding without it"
                )
            }
            Some(Change::Closed) => {
                self.meters.entered(index, State::Closed, true);
                tracing::info!(domain, "rate-limit store answers again; circuit closed")
            }
            Some(Change::Reopened) => self.meters.entered(index, State::Open, false),
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
        let b = Breakers::new(CircuitBreaker::new().min_calls(3), "memory");
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
        let b = Breakers::new(CircuitBreaker::disabled(), "memory");
        for _ in 0..1000 {
            b.record(0, Admission::Call, Outcome::Failure);
        }
        assert_eq!(b.admit(0, DEADLINE), Admission::Call);
    }
}
