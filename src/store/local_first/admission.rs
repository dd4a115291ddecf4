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

/// How many of `offered` one-unit requests a limit of `count` with `used` units used admits
/// in one step, each at the [`deny_probability`] of the level the step *ends* on: the `x`
/// with `x = offered · (1 − p(used + x + 1))`, an implicit (backward Euler) step, taken short
/// of the last admissible unit (the one that fills the limit to its high mark).
///
/// The view extrapolates the rest of the fleet with it. Admitting a whole step at the
/// probability of the level it *starts* from (an explicit step) overshoots whenever the step
/// offers more than the band is wide: past a few times overload the band's equilibrium lies a
/// few units below the limit, steps jumped past it, and the view stood full, denying every
/// request, until time drained it (a sixth of each interval at 50x: 0.88 of the limit). The
/// implicit step cannot jump past the level where admissions stop, and whatever its length it
/// settles where the fleet's admissions match the drain, as the continuous process does.
///
/// The last admissible unit is left to the decisions: which instance draws it the model
/// cannot know, and a view that credits it to the others as well stands full while the fleet
/// is not (0.66 of the limit at 600x in the simulation). Under a hard threshold (an empty
/// band) every unit the drain frees is such a unit: that is the see-saw the band removes.
pub(super) fn admitted_of(offered: f64, used: u64, count: u64, low: f64, high: f64) -> f64 {
    if offered.is_nan() || offered <= 0.0 {
        return 0.0;
    }
    let (low, high) = (low * count as f64, high * count as f64);
    let next = used as f64 + 1.0;
    if next + offered <= low {
        return offered;
    }
    // In the band p(v) = (v − low) / w: x = offered · (w − d − x) / w, d = next − low.
    let w = high - low + 1.0;
    let d = next - low;
    let x = offered * (w - d) / (w + offered);
    x.min(high - next).max(0.0)
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
    fn an_implicit_step_stops_where_admissions_would() {
        // Below the band, everything; at the high mark, nothing.
        assert_eq!(admitted_of(10.0, 0, 100, 0.8, 1.0), 10.0);
        assert_eq!(admitted_of(10.0, 99, 100, 0.8, 1.0), 0.0);
        assert_eq!(admitted_of(10.0, 100, 100, 0.8, 1.0), 0.0);
        // However much a step offers, it stops short of the last unit: an explicit step, at
        // the probability of the level it starts from (0), would add all it offers.
        for offered in [100.0, 10_000.0, 1e9] {
            let x = admitted_of(offered, 50, 100, 0.8, 1.0);
            assert!(x > 29.0 && 50.0 + x <= 99.0, "{offered}: {x}");
            // A fixed point: x is what the level it leaves admits of the offer.
            let p = (51.0 + x - 80.0) / 21.0;
            assert!(
                (x - offered * (1.0 - p)).abs() < 1e-9 * offered || 50.0 + x == 99.0,
                "{offered}: {x}"
            );
        }
        // 100 offered from 80 used: the line's fixed point, 1 − p = x / 100, near 96.5.
        let x = admitted_of(100.0, 80, 100, 0.8, 1.0);
        assert!((x - 100.0 * 20.0 / 121.0).abs() < 1e-9, "{x}");
        // 1 000 offered from 90 used: the line's fixed point (99.8) is past the last unit.
        assert_eq!(admitted_of(1_000.0, 90, 100, 0.8, 1.0), 9.0);
    }

    #[test]
    fn an_empty_band_is_a_hard_threshold() {
        assert_eq!(deny_probability(100, 100, 1.0, 1.0), 0.0);
        assert_eq!(deny_probability(101, 100, 1.0, 1.0), 1.0);
        // A limit of 1 keeps its unit.
        assert!(deny_probability(1, 1, 0.9, 1.0) < 0.1);
    }
}
