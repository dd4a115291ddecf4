//! The share arithmetic, pure: one capacity split among claimants by their demand (max-min
//! fairness, "water-filling", with a minimum share), and the same split in whole tokens
//! (largest remainder), so the parts always sum to the whole.
//!
//! Used twice per bucket: the fleet's tokens among the server instances (their demands read
//! back from Redis), then an instance's tokens among its own streams.

/// The part of a capacity every claimant gets at least (so a newcomer, whose demand is not
/// measured yet, or a quiet client can start): 0.5 % of it, and never more, all floors
/// together, than half of it.
pub(crate) const MIN_SHARE: f64 = 0.005;

/// Splits `capacity` among claimants by `demands` (any unit, the same as `capacity`): each
/// claimant wants `max(demand, floor)` (floor: [`MIN_SHARE`] of the capacity, at most half of
/// it over all claimants); when the wants fit, each gets its want plus the spare in proportion
/// to its want (so a growing claimant has room); when they do not, each gets
/// `min(want, level)` with the one level that makes the shares sum to the capacity. The
/// shares are never negative, sum to `capacity` (up to float rounding), and a claimant's share
/// never falls when its own demand rises. A demand that is not a finite number counts as 0.
pub(crate) fn water_fill(capacity: f64, demands: &[f64]) -> Vec<f64> {
    let n = demands.len();
    if n == 0 {
        return Vec::new();
    }
    let capacity = if capacity.is_finite() {
        capacity.max(0.0)
    } else {
        0.0
    };
    let floor = (capacity * MIN_SHARE).min(capacity / (2.0 * n as f64));
    let wants: Vec<f64> = demands
        .iter()
        .map(|&d| if d.is_finite() { d.max(0.0) } else { 0.0 }.max(floor))
        .collect();
    let total: f64 = wants.iter().sum();
    if total <= 0.0 {
        return vec![capacity / n as f64; n];
    }
    if total <= capacity {
        let scale = capacity / total;
        return wants.iter().map(|w| w * scale).collect();
    }
    // The level: the wants sorted; below the level a claimant gets its want, above it the level.
    let mut sorted = wants.clone();
    sorted.sort_by(f64::total_cmp);
    let mut left = capacity;
    let mut level = 0.0;
    for (i, &w) in sorted.iter().enumerate() {
        let rest = (n - i) as f64;
        if w * rest >= left {
            level = left / rest;
            break;
        }
        left -= w;
        level = w;
    }
    wants.iter().map(|&w| w.min(level)).collect()
}

/// [`water_fill`] in whole tokens: the real shares of `total`, rounded down, and the tokens
/// left over given one each to the largest remainders (ties to the earlier claimant), so the
/// parts sum to `total` exactly and each is within one token of its real share.
pub(crate) fn split_tokens(total: u64, demands: &[f64]) -> Vec<u64> {
    let exact = water_fill(total as f64, demands);
    let mut parts: Vec<u64> = exact.iter().map(|x| x.floor() as u64).collect();
    let given: u64 = parts.iter().sum();
    // Float rounding may leave the floors a token over the total: take it from the largest.
    let mut over = given.saturating_sub(total);
    while over > 0 {
        let Some(i) = (0..parts.len()).max_by_key(|&i| parts[i]) else {
            break;
        };
        let take = parts[i].min(over);
        parts[i] -= take;
        over -= take;
    }
    let left = total.saturating_sub(parts.iter().sum());
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by(|&a, &b| {
        let ra = exact[a] - exact[a].floor();
        let rb = exact[b] - exact[b].floor();
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &i in order.iter().cycle().take(left as usize) {
        parts[i] += 1;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn wants_that_fit_share_the_spare_in_proportion() {
        assert!(close(&water_fill(100.0, &[40.0, 10.0]), &[80.0, 20.0]));
        assert!(close(&water_fill(100.0, &[0.0, 0.0]), &[50.0, 50.0]));
        assert!(close(&water_fill(100.0, &[]), &[]));
    }

    #[test]
    fn wants_over_the_capacity_fill_to_one_level() {
        // 160 + 30 + 10 wanted of 100: the small ones get theirs, the big one the rest.
        assert!(close(
            &water_fill(100.0, &[160.0, 30.0, 10.0]),
            &[60.0, 30.0, 10.0]
        ));
        assert!(close(&water_fill(100.0, &[80.0, 80.0]), &[50.0, 50.0]));
        // An idle claimant keeps its floor (0.5 % of the capacity) so it can start.
        let shares = water_fill(1000.0, &[5000.0, 0.0]);
        assert!(close(&shares, &[995.0, 5.0]), "{shares:?}");
    }

    #[test]
    fn bad_numbers_are_no_demand() {
        let shares = water_fill(10.0, &[f64::NAN, f64::INFINITY, -3.0, 5.0]);
        assert!((shares.iter().sum::<f64>() - 10.0).abs() < 1e-9);
        assert!(shares.iter().all(|s| *s >= 0.0));
        assert!(water_fill(f64::NAN, &[1.0]).iter().all(|s| *s == 0.0));
    }

    #[test]
    fn tokens_round_by_largest_remainder() {
        assert_eq!(split_tokens(10, &[1.0, 1.0, 1.0]), [4, 3, 3]);
        assert_eq!(split_tokens(1000, &[80.0, 20.0]), [800, 200]);
        assert_eq!(split_tokens(0, &[1.0, 2.0]), [0, 0]);
        assert_eq!(split_tokens(7, &[]), Vec::<u64>::new());
    }

    proptest! {
        #[test]
        fn shares_sum_to_the_capacity_never_negative(
            capacity in 0u64..2_000_000,
            demands in proptest::collection::vec(0.0f64..1e7, 1..40),
        ) {
            let shares = water_fill(capacity as f64, &demands);
            prop_assert!(shares.iter().all(|s| *s >= 0.0));
            let sum: f64 = shares.iter().sum();
            prop_assert!((sum - capacity as f64).abs() <= 1e-6 * (capacity as f64).max(1.0));
            let tokens = split_tokens(capacity, &demands);
            prop_assert_eq!(tokens.iter().sum::<u64>(), capacity);
            for (t, s) in tokens.iter().zip(&shares) {
                prop_assert!((*t as f64 - s).abs() <= 1.0 + 1e-6, "{} against {}", t, s);
            }
        }

        #[test]
        fn a_share_never_falls_when_its_demand_rises(
            capacity in 1u64..1_000_000,
            demands in proptest::collection::vec(0.0f64..1e6, 1..20),
            which in any::<prop::sample::Index>(),
            more in 0.0f64..1e6,
        ) {
            let i = which.index(demands.len());
            let before = water_fill(capacity as f64, &demands);
            let mut raised = demands.clone();
            raised[i] += more;
            let after = water_fill(capacity as f64, &raised);
            prop_assert!(after[i] + 1e-6 * capacity as f64 >= before[i], "{} < {}", after[i], before[i]);
            // And no other claimant gains from it.
            for j in (0..demands.len()).filter(|&j| j != i) {
                prop_assert!(after[j] <= before[j] + 1e-6 * capacity as f64);
            }
        }
    }
}
