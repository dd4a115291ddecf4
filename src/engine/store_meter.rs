//! The engine's own meters: the store-latency histogram (its handle kept, so recording is an
//! atomic add) and the leases-in-flight gauge's unit, [`LeaseMeter`].

use std::time::Duration;

#[cfg(feature = "metrics")]
use std::sync::OnceLock;

#[cfg(feature = "metrics")]
use metrics::{Gauge, Histogram};

/// The store's kind (its metrics label) and its latency histogram.
pub(crate) struct StoreMeter {
    store: &'static str,
    #[cfg(feature = "metrics")]
    latency: OnceLock<Histogram>,
}

impl StoreMeter {
    /// The meter of a store of kind `store`.
    pub(crate) fn new(store: &'static str) -> Self {
        StoreMeter {
            store,
            #[cfg(feature = "metrics")]
            latency: OnceLock::new(),
        }
    }

    /// The store's kind, for labels.
    pub(crate) fn store(&self) -> &'static str {
        self.store
    }

    /// Records how long a store call that waited took to answer or fail.
    pub(crate) fn store_latency(&self, latency: Duration) {
        // Through the kept handle: a clone (and its drop) per call would be two atomic writes.
        #[cfg(feature = "metrics")]
        self.histogram().record(latency.as_secs_f64());
        #[cfg(not(feature = "metrics"))]
        let _ = latency;
    }

    #[cfg(feature = "metrics")]
    fn histogram(&self) -> &Histogram {
        self.latency.get_or_init(|| {
            crate::telemetry::describe();
            metrics::histogram!(crate::telemetry::STORE_DURATION, "store" => self.store)
        })
    }

    /// The latency histogram, for a call that outlives its request (it missed the deadline
    /// and finishes in the background): its answer, however late, is recorded too.
    pub(crate) fn latency_handle(&self) -> Latency {
        Latency {
            #[cfg(feature = "metrics")]
            histogram: self.histogram().clone(),
        }
    }
}

/// The store-latency histogram.
pub(crate) struct Latency {
    #[cfg(feature = "metrics")]
    histogram: Histogram,
}

impl Latency {
    /// Records one store call's time until it answered or failed.
    pub(crate) fn record(&self, latency: Duration) {
        #[cfg(feature = "metrics")]
        self.histogram.record(latency.as_secs_f64());
        #[cfg(not(feature = "metrics"))]
        let _ = latency;
    }
}

/// One lease in the leases-in-flight gauge, counted out when dropped (with the lease it
/// travels with).
pub(crate) struct LeaseMeter {
    #[cfg(feature = "metrics")]
    gauge: Option<Gauge>,
}

impl LeaseMeter {
    /// A lease counted in `gauge` (already incremented), if any.
    #[cfg(feature = "metrics")]
    pub(crate) fn counting(gauge: Option<Gauge>) -> Self {
        LeaseMeter { gauge }
    }

    /// A lease (no metrics to count it in).
    #[cfg(not(feature = "metrics"))]
    pub(crate) fn counting() -> Self {
        LeaseMeter {}
    }

    /// A lease no request holds (taken by a late answer, given back at once): not counted.
    pub(crate) fn uncounted() -> Self {
        LeaseMeter {
            #[cfg(feature = "metrics")]
            gauge: None,
        }
    }
}

impl Drop for LeaseMeter {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        if let Some(gauge) = &self.gauge {
            gauge.decrement(1.0);
        }
    }
}
