//! The recorder layer that exports the Go service's statistics under the mapping's names: each
//! series' key is mapped the first time it is registered (a statsd name built, matched and
//! formatted once) and the outcome kept, so a call site that registers on every call costs a
//! map look-up, and one that keeps its handle costs nothing more. redlimit's own metrics pass
//! through as they are.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Label, Metadata, Recorder, SharedString,
    Unit,
};

use super::{Mapper, MetricType, Outcome};
use crate::settings::ExtraTags;
use crate::stats::statsd::names;

/// `inner` with the Go service's statistics renamed by `mapper`.
///
/// ```ignore
/// let mapper = Arc::new(Mapper::load(path, &[])?.expect("the file is read"));
/// metrics::set_global_recorder(Mapped::new(prometheus, mapper, ExtraTags::default()))?;
/// ```
#[derive(Debug)]
pub(crate) struct Mapped<R> {
    inner: R,
    mapper: Arc<Mapper>,
    tags: ExtraTags,
    seen: RwLock<HashMap<Key, Target>>,
}

/// Where a statistic's series goes.
#[derive(Debug, Clone)]
enum Target {
    Drop,
    /// The mapped key (and its scale for a timer).
    Key(Key, Option<f64>),
}

impl<R> Mapped<R> {
    pub(crate) fn new(inner: R, mapper: Arc<Mapper>, tags: ExtraTags) -> Self {
        Mapped {
            inner,
            mapper,
            tags,
            seen: RwLock::default(),
        }
    }
}

impl<R: Recorder> Mapped<R> {
    /// The key's target, mapped on its first registration.
    fn target(&self, key: &Key, ty: MetricType) -> Target {
        if let Some(target) = self.seen.read().unwrap_or_else(|e| e.into_inner()).get(key) {
            return target.clone();
        }
        let target = match names::go_name(key, &self.tags) {
            None => Target::Drop,
            Some(statsd) => match self.mapper.map(&statsd, ty) {
                Outcome::Drop => Target::Drop,
                Outcome::Metric(metric) => {
                    if let Some(help) = metric.help {
                        let name = KeyName::from(metric.name.clone());
                        match ty {
                            MetricType::Observer => {
                                self.inner.describe_histogram(name, None, help.into());
                            }
                            _ => self.inner.describe_counter(name, None, help.into()),
                        }
                    }
                    let labels = metric
                        .labels
                        .into_iter()
                        .map(|(k, v)| Label::new(k, v))
                        .collect::<Vec<_>>();
                    Target::Key(Key::from_parts(metric.name, labels), metric.scale)
                }
            },
        };
        let mut seen = self.seen.write().unwrap_or_else(|e| e.into_inner());
        seen.entry(key.clone()).or_insert(target).clone()
    }
}

/// The Go service's timer value: whole milliseconds (`time.Since(start).Milliseconds()`),
/// then the mapping's scale, from the seconds this process records.
struct GoTimer {
    inner: Histogram,
    scale: f64,
}

impl HistogramFn for GoTimer {
    fn record(&self, seconds: f64) {
        self.inner.record((seconds * 1000.0).floor() * self.scale);
    }
}

impl<R: Recorder> Recorder for Mapped<R> {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        if !names::is_go_counter(key.name()) {
            return self.inner.register_counter(key, metadata);
        }
        match self.target(key, MetricType::Counter) {
            Target::Drop => Counter::noop(),
            // A counter's rule has no scale (refused at load).
            Target::Key(mapped, _) => self.inner.register_counter(&mapped, metadata),
        }
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        self.inner.register_gauge(key, metadata)
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        if !names::is_go_timer(key.name()) {
            return self.inner.register_histogram(key, metadata);
        }
        match self.target(key, MetricType::Observer) {
            Target::Drop => Histogram::noop(),
            Target::Key(mapped, scale) => {
                let inner = self.inner.register_histogram(&mapped, metadata);
                let scale = scale.unwrap_or(1.0);
                Histogram::from_arc(Arc::new(GoTimer { inner, scale }))
            }
        }
    }
}
