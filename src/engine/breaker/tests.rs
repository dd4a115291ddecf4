use super::*;

const DEADLINE: Duration = Duration::from_millis(100);

fn config(min_calls: u32) -> CircuitBreaker {
    CircuitBreaker::new()
        .min_calls(min_calls)
        .cool_down(Duration::from_millis(1000))
}

/// Records `n` calls with this outcome at `now` (ms).
fn record(b: &Breaker, c: &CircuitBreaker, now: u64, n: u32, outcome: Outcome) -> bool {
    (0..n).any(|_| {
        matches!(
            b.record(c, now, Admission::Call, outcome),
            Some(Change::Opened { .. })
        )
    })
}

#[test]
fn opens_on_a_failure_rate_only_after_the_minimum_of_calls() {
    let (b, c) = (Breaker::default(), config(20));
    assert!(!record(&b, &c, 1, 19, Outcome::Failure), "19 calls < 20");
    assert_eq!(b.admit(1, DEADLINE), Admission::Call);
    assert!(record(&b, &c, 1, 1, Outcome::Failure));
    assert_eq!(b.admit(2, DEADLINE), Admission::Skip);
}

#[test]
fn a_failure_rate_under_the_threshold_keeps_it_closed() {
    let (b, c) = (Breaker::default(), config(20));
    for _ in 0..100 {
        assert!(!record(&b, &c, 5, 2, Outcome::Success));
        assert!(!record(&b, &c, 5, 1, Outcome::Failure), "a third failing");
    }
    assert_eq!(b.admit(5, DEADLINE), Admission::Call);
}

#[test]
fn timeouts_among_successes_do_not_open_it() {
    // A flood: most calls miss the deadline, some are answered in time.
    let (b, c) = (Breaker::default(), config(20));
    assert!(!record(&b, &c, 1, 1, Outcome::Success));
    assert!(!record(&b, &c, 1, 10_000, Outcome::Timeout));
    assert_eq!(b.admit(1, DEADLINE), Admission::Call);
}

#[test]
fn timeouts_alone_open_it() {
    // A silent store: nothing answers.
    let (b, c) = (Breaker::default(), config(20));
    assert!(record(&b, &c, 1, 20, Outcome::Timeout));
    assert_eq!(b.admit(2, DEADLINE), Admission::Skip);
}

#[test]
fn old_calls_leave_the_window() {
    let (b, c) = (Breaker::default(), config(20));
    // 10 s window: a success at t=0 no longer excuses timeouts at t=20 s.
    assert!(!record(&b, &c, 1, 1, Outcome::Success));
    assert!(record(&b, &c, 20_000, 20, Outcome::Timeout));
    // Failures spread thinner than the window never add up to the minimum.
    let (b, c) = (Breaker::default(), config(20));
    for second in 0..100 {
        assert!(!record(&b, &c, 1 + second * 1000, 1, Outcome::Failure));
    }
}

#[test]
fn probes_once_after_the_cool_down_and_closes_on_success() {
    let (b, c) = (Breaker::default(), config(1));
    assert!(record(&b, &c, 1, 1, Outcome::Failure));
    assert_eq!(b.admit(999, DEADLINE), Admission::Skip);
    assert_eq!(b.admit(1001, DEADLINE), Admission::Probe);
    assert_eq!(
        b.admit(1001, DEADLINE),
        Admission::Skip,
        "one probe at a time"
    );
    assert_eq!(
        b.record(&c, 1002, Admission::Probe, Outcome::Success),
        Some(Change::Closed)
    );
    assert_eq!(b.admit(1003, DEADLINE), Admission::Call);
}

#[test]
fn a_failed_probe_reopens_and_a_lost_one_is_replaced() {
    let (b, c) = (Breaker::default(), config(1));
    assert!(record(&b, &c, 1, 1, Outcome::Failure));
    assert_eq!(b.admit(1001, DEADLINE), Admission::Probe);
    assert_eq!(
        b.record(&c, 1001, Admission::Probe, Outcome::Timeout),
        Some(Change::Reopened)
    );
    assert_eq!(b.admit(1500, DEADLINE), Admission::Skip, "open again");
    assert_eq!(b.admit(2002, DEADLINE), Admission::Probe);
    // This probe never reports (its request was dropped): after 2 × the deadline, another.
    assert_eq!(b.admit(2100, DEADLINE), Admission::Skip);
    assert_eq!(b.admit(2203, DEADLINE), Admission::Probe);
}

#[test]
fn silence_confirmed_opens_it_at_once_and_an_answer_since_keeps_it_closed() {
    let (b, c) = (Breaker::default(), config(20));
    b.note_answer(5);
    assert!(b.answered_since(5));
    assert!(!b.answered_since(6), "nothing answered after 5");
    assert!(b.start_confirming());
    assert!(!b.start_confirming(), "one confirmation at a time");
    // A call asked at 6 missed its deadline; the probe found nothing: open, one call in.
    assert_eq!(
        b.confirmed(&c, 300, 6, Probed::Silent),
        Some(Change::Silent)
    );
    assert_eq!(b.admit(301, DEADLINE), Admission::Skip);
    assert!(!b.start_confirming(), "open already");

    // Silent when asked, but a late answer came before the probe failed: load.
    let b = Breaker::default();
    assert!(b.start_confirming());
    b.note_answer(150);
    assert_eq!(b.confirmed(&c, 300, 100, Probed::Silent), None);
    assert_eq!(b.admit(301, DEADLINE), Admission::Call);
    // The probe answered: slow, not gone.
    assert!(b.start_confirming());
    assert_eq!(b.confirmed(&c, 400, 350, Probed::Alive), None);
    assert_eq!(b.admit(401, DEADLINE), Admission::Call);
    // A disabled breaker never opens.
    let off = CircuitBreaker::disabled();
    assert!(b.start_confirming());
    assert_eq!(b.confirmed(&off, 500, 450, Probed::Silent), None);
}

#[test]
fn an_open_breaker_knows_whether_the_store_refused_or_went_silent() {
    let c = config(20);
    let (refusing, silent) = (Breaker::default(), Breaker::default());
    assert!(record(&refusing, &c, 1, 20, Outcome::Failure));
    assert!(!refusing.is_silent());
    assert!(record(&silent, &c, 1, 20, Outcome::Timeout));
    assert!(silent.is_silent());
    // Errors and timeouts together: silent unless the errors alone would have opened it.
    let (mixed, mostly_errors) = (Breaker::default(), Breaker::default());
    assert!(!record(&mixed, &c, 1, 9, Outcome::Failure));
    assert!(record(&mixed, &c, 1, 11, Outcome::Timeout));
    assert!(
        mixed.is_silent(),
        "9 of 20 calls refused: under the 50 % rate"
    );
    assert!(!record(&mostly_errors, &c, 1, 5, Outcome::Timeout));
    assert!(record(&mostly_errors, &c, 1, 15, Outcome::Failure));
    assert!(!mostly_errors.is_silent());
    // A probe says why it stays open.
    assert_eq!(refusing.admit(1001, DEADLINE), Admission::Probe);
    refusing.record(&c, 1001, Admission::Probe, Outcome::Timeout);
    assert!(refusing.is_silent(), "a refusing store went silent");
    assert_eq!(refusing.admit(2002, DEADLINE), Admission::Probe);
    refusing.record(&c, 2002, Admission::Probe, Outcome::Failure);
    assert!(!refusing.is_silent(), "and refuses again");
    // A confirmation too.
    for (probed, change, silent) in [
        (Probed::Silent, Change::Silent, true),
        (Probed::Refused, Change::Refused, false),
    ] {
        let b = Breaker::default();
        assert!(b.start_confirming());
        assert_eq!(b.confirmed(&c, 300, 6, probed), Some(change));
        assert_eq!(b.is_silent(), silent);
    }
}

#[test]
fn closing_forgets_the_failures_before() {
    let (b, c) = (Breaker::default(), config(20));
    assert!(record(&b, &c, 1, 20, Outcome::Failure));
    assert_eq!(b.admit(1001, DEADLINE), Admission::Probe);
    b.record(&c, 1001, Admission::Probe, Outcome::Success);
    assert!(!record(&b, &c, 1002, 19, Outcome::Failure));
}

#[test]
fn settings_are_clamped() {
    let c = CircuitBreaker::new()
        .min_calls(0)
        .failure_rate(7.0)
        .window(Duration::ZERO);
    assert_eq!(c.min_calls, 1);
    assert_eq!(c.failure_permille, 1000);
    assert_eq!(c.window, Duration::from_millis(10));
    assert_eq!(
        CircuitBreaker::new()
            .failure_rate(f64::NAN)
            .failure_permille,
        500
    );
    assert_eq!(CircuitBreaker::new().failure_rate(-1.0).failure_permille, 1);
}
