//! Probabilistic admission: between a low and a high mark the deny probability rises linearly
//! from 0 to 1, so a fleet that sees its usage a sync interval late eases into the limit
//! instead of swinging between admitting everything and denying everything (YARL's
//! lowBurst/highBurst; a nonlinear curve brought them nothing).

/// The probability of denying a request that would leave `used` units of a limit of `count`
/// used: 0 up to `low · count`, 1 beyond `high · count`, rising linearly in between, to just
/// below 1 at the high mark itself (so the last unit of a limit can still be had).
pub(super) fn deny_probability(used: u64, count: u64, low: f64, high: f64) -> f64 {
    let (used, count) = (used as f64, count as f64);
    let (low, high) = (low * count, high * count);
    if used <= low {
        0.0
    } else if used > high {
        1.0
    } else {
        (used - low) / (high - low + 1.0)
    }
}

/// Whether a request with deny probability `p` passes, given a uniform `draw` in `[0, 1)`.
pub(super) fn admits(p: f64, draw: f64) -> bool {
    p <= 0.0 || (p < 1.0 && draw >= p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_all_below_low_and_none_above_high() {
        assert_eq!(deny_probability(50, 100, 0.9, 1.0), 0.0);
        assert_eq!(deny_probability(90, 100, 0.9, 1.0), 0.0);
        assert_eq!(deny_probability(101, 100, 0.9, 1.0), 1.0);
        assert!(!admits(1.0, 0.999_999));
        assert!(admits(0.0, 0.0));
    }

    #[test]
    fn rises_linearly_in_between() {
        // 10 units of band, 11 steps: the last unit is still admitted one time in eleven.
        for (used, p) in [(91, 1.0 / 11.0), (95, 5.0 / 11.0), (100, 10.0 / 11.0)] {
            assert!(
                (deny_probability(used, 100, 0.9, 1.0) - p).abs() < 1e-9,
                "{used}"
            );
        }
        // Over many uniform draws, the admitted share is 1 - p.
        let admitted = (0..1000)
            .filter(|i| admits(0.25, f64::from(*i) / 1000.0))
            .count();
        assert_eq!(admitted, 750);
    }

    #[test]
    fn an_empty_band_is_a_hard_threshold() {
        assert_eq!(deny_probability(100, 100, 1.0, 1.0), 0.0);
        assert_eq!(deny_probability(101, 100, 1.0, 1.0), 1.0);
        // A limit of 1 keeps its unit.
        assert!(deny_probability(1, 1, 0.9, 1.0) < 0.1);
    }
}
