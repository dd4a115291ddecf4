//! The metrics of a layer's circuit breakers: per failure domain, the state set
//! (`redlimit_breaker_state`, 1 for the state a breaker is in) and the trips and heals.
//!
//! The state gauges move by one from the state last reported to the new one, never `set`:
//! several layers over one store kind share the series, which then count their breakers in
//! each state. A domain is reported from its first transition on (its handles are taken then,
//! from the recorder installed by that time); a breaker that never tripped adds nothing.

#[cfg(feature = "metrics")]
use std::sync::OnceLock;
#[cfg(feature = "metrics")]
use std::sync::atomic::{AtomicU8, Ordering};

#[cfg(feature = "metrics")]
use metrics::{Counter, Gauge};

#[cfg(feature = "metrics")]
use crate::failure::circuit_breaker::DOMAINS;
#[cfg(feature = "metrics")]
use crate::telemetry::{BREAKER_STATE, BREAKER_TRANSITIONS};

/// A breaker's state, as the metrics show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Closed = 0,
    /// A probe is finding out whether the store is back.
    HalfOpen = 1,
    Open = 2,
}

#[cfg(feature = "metrics")]
const STATES: [&str; 3] = ["closed", "half_open", "open"];
/// No state reported yet for the domain.
#[cfg(feature = "metrics")]
const UNSEEN: u8 = u8::MAX;

/// The breaker metrics of one layer over a store of kind `store`.
#[derive(Debug)]
pub(crate) struct BreakerMeters {
    #[cfg(feature = "metrics")]
    store: &'static str,
    #[cfg(feature = "metrics")]
    domains: Box<[Domain]>,
}

#[cfg(feature = "metrics")]
#[derive(Debug)]
struct Domain {
    /// The [`State`] last reported, or [`UNSEEN`].
    reported: AtomicU8,
    handles: OnceLock<Handles>,
}

#[cfg(feature = "metrics")]
#[derive(Debug)]
struct Handles {
    states: [Gauge; 3],
    opened: Counter,
    closed: Counter,
}

impl BreakerMeters {
    pub(crate) fn new(store: &'static str) -> Self {
        #[cfg(not(feature = "metrics"))]
        let _ = store;
        BreakerMeters {
            #[cfg(feature = "metrics")]
            store,
            #[cfg(feature = "metrics")]
            domains: (0..DOMAINS)
                .map(|_| Domain {
                    reported: AtomicU8::new(UNSEEN),
                    handles: OnceLock::new(),
                })
                .collect(),
        }
    }

    /// The breaker of `domain` (an index below [`DOMAINS`](crate::failure::circuit_breaker::DOMAINS)) entered
    /// `state`. `transition`: count it as a trip (`open`) or a heal (`closed`).
    pub(crate) fn entered(&self, domain: usize, state: State, transition: bool) {
        #[cfg(feature = "metrics")]
        {
            let Some(meters) = self.domains.get(domain) else {
                return;
            };
            let handles = meters.handles.get_or_init(|| {
                crate::telemetry::describe();
                let label = domain.to_string();
                let state = |s: &'static str| {
                    let gauge = metrics::gauge!(
                        BREAKER_STATE,
                        "store" => self.store,
                        "domain" => label.clone(),
                        "state" => s,
                    );
                    // Every state shows from the first report on, at 0 if no breaker is in it.
                    gauge.increment(0.0);
                    gauge
                };
                let transitions = |s: &'static str| {
                    metrics::counter!(
                        BREAKER_TRANSITIONS,
                        "store" => self.store,
                        "domain" => label.clone(),
                        "state" => s,
                    )
                };
                Handles {
                    states: STATES.map(state),
                    opened: transitions("open"),
                    closed: transitions("closed"),
                }
            });
            let before = meters.reported.swap(state as u8, Ordering::AcqRel);
            if before != state as u8 {
                if let Some(gauge) = handles.states.get(usize::from(before)) {
                    gauge.decrement(1.0);
                }
                handles.states[state as usize].increment(1.0);
            }
            if transition {
                match state {
                    State::Open => handles.opened.increment(1),
                    State::Closed => handles.closed.increment(1),
                    State::HalfOpen => {}
                }
            }
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (domain, state, transition);
    }
}

impl Drop for BreakerMeters {
    /// The layer's breakers are gone: they leave the state they were last reported in.
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        for meters in self.domains.iter() {
            let reported = usize::from(meters.reported.load(Ordering::Acquire));
            if let Some(gauge) = meters.handles.get().and_then(|h| h.states.get(reported)) {
                gauge.decrement(1.0);
            }
        }
    }
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use super::*;

    use metrics_exporter_prometheus::PrometheusBuilder;

    #[test]
    fn the_state_set_follows_each_domain_and_layers_add_up() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            let a = BreakerMeters::new("redis");
            let b = BreakerMeters::new("redis");
            a.entered(3, State::Open, true);
            let text = handle.render();
            let line = |state: &str| {
                format!(r#"redlimit_breaker_state{{store="redis",domain="3",state="{state}"}}"#)
            };
            assert!(text.contains(&format!("{} 1\n", line("open"))), "{text}");
            assert!(text.contains(&format!("{} 0\n", line("closed"))), "{text}");
            assert!(
                text.contains(&format!("{} 0\n", line("half_open"))),
                "{text}"
            );
            assert!(!text.contains(r#"domain="0""#), "never tripped: {text}");

            a.entered(3, State::HalfOpen, false);
            a.entered(3, State::Open, false);
            a.entered(3, State::Open, false);
            b.entered(3, State::Open, true);
            let text = handle.render();
            assert!(text.contains(&format!("{} 2\n", line("open"))), "{text}");
            a.entered(3, State::Closed, true);
            let text = handle.render();
            assert!(text.contains(&format!("{} 1\n", line("open"))), "{text}");
            assert!(text.contains(&format!("{} 1\n", line("closed"))), "{text}");
            let trips =
                r#"redlimit_breaker_transitions_total{store="redis",domain="3",state="open"} 2"#;
            assert!(text.contains(trips), "{text}");

            drop(b);
            let text = handle.render();
            assert!(text.contains(&format!("{} 0\n", line("open"))), "{text}");
            assert!(text.contains(&format!("{} 1\n", line("closed"))), "{text}");
        });
    }
}
