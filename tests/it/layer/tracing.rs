//! The decision span: at debug level, with policy, outcome, source and store latency, and the
//! key only as a short hash.

use crate::support;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlimit::store::MemoryStore;
use redlimit::{Limit, Policy, RateLimitLayer};
use support::{alone, app, request, send};

/// Log lines, collected.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Alone in a process: tracing caches each callsite's interest process-wide, and a callsite
/// first hit by a test on another thread, without a subscriber, can race this test's
/// subscriber into seeing no span at all (seen on a busy machine).
#[test]
fn each_decision_has_a_debug_span_without_the_key() {
    if !alone(
        module_path!(),
        "each_decision_has_a_debug_span_without_the_key",
    ) {
        return;
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let policy = Policy::new(
        "traced",
        [Limit::sliding_log(1, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap();
    let app = app(RateLimitLayer::new(MemoryStore::new(), policy));
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            assert_eq!(
                send(&app, request("/", "203.0.113.7", &[])).await.status(),
                200
            );
            assert_eq!(
                send(&app, request("/", "203.0.113.7", &[])).await.status(),
                429
            );
        });
    });
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    let spans: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("redlimit.decision{"))
        .collect();
    assert_eq!(spans.len(), 2, "{text}");
    assert!(
        spans[0].contains("policy=\"traced\" outcome=\"allowed\" source=Store"),
        "{text}"
    );
    assert!(spans[1].contains("outcome=\"denied\""), "{text}");
    assert!(spans[1].contains("denied_by=sliding-log 1/1h"), "{text}");
    assert!(
        spans
            .iter()
            .all(|l| l.contains(" key=") && !l.contains("203.0.113.7")),
        "{text}"
    );
}
