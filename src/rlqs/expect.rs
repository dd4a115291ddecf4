//! From shares to what the fleet is expected to admit: a stream that asks for less than its
//! fair part is given headroom over its demand (a Poisson cushion), and the saturated streams
//! a correction closed on what the fleet really admitted, so that the fleet's *expected*
//! admission meets the limit; the shares then sum to more than the limit, at most
//! [`OVERCOMMIT`] times it.
//!
//! Why: a client whose arrivals are random (Poisson) at rate λ, through a token bucket
//! refilled at λ with a few tokens of room, finds it empty often enough to lose 10–20 % of
//! its requests (3 tokens: 18 %); what it leaves of its share is lost to the fleet, since the
//! others are held to theirs. Refilled at 1.25 λ with 10 tokens of room it loses under 1 %.
//! A demand is also measured from a few seconds of arrivals (5 s at 5/s: ±20 %), hence the
//! cushion's term in √(λ/window). What is left (the loss of the streams held to their share,
//! a demand misjudged) is closed by the correction, slowly, since the clients report every
//! 5 s.

use std::time::Duration;

use super::fleet::Peer;
use super::share::water_fill;

/// The most the shares of a bucket add up to, as a multiple of its limit (per instance, of
/// its part): the cushions and the correction together never give more. If every stream below
/// its fair part surged to its share at once, the fleet would admit at most this much over the
/// limit until their next reports (one report interval, 5 s with Envoy).
pub(crate) const OVERCOMMIT: f64 = 1.25;

/// The cushion of a stream below its fair part: its demand times this, over it ...
pub(crate) const HEADROOM: f64 = 0.1;

/// ... and this many standard deviations of its measured rate (a Poisson count over the
/// window it was measured over: √(λ / window)).
pub(crate) const POISSON_Z: f64 = 2.0;

/// The least `max_tokens` of a stream below its fair part: with the cushion, a bucket this
/// deep loses well under 1 % of Poisson arrivals, where the least of all (3) loses 10 %.
pub(crate) const UNSATURATED_MAX_TOKENS: u64 = 10;

/// The part of the burst given to a stream whose demand is not measured yet (its first
/// assignment): Envoy fills a new bucket at once, and a stream asking a little more than its
/// share spends those tokens only at its excess (a fifth over: half a second's burst lasts
/// 2.5 s), over the limit after its first report interval. A measured stream's deeper bucket
/// starts at the fill ratio of this one, which a saturated stream keeps near empty.
pub(crate) const UNMEASURED_BURST: f64 = 0.2;

/// How much of the fleet's shortfall (limit less admitted) the correction takes up per second:
/// the admissions are known from reports 5 s apart, measured over 5 s, so they lag a change
/// of shares by up to 10 s; a loop as fast as that winds up on every transient (measured: a
/// tenth per second overshot by 5 % after a start or an Envoy's death). This one takes about
/// 30 s to close a step: it mends a steady bias, and a transient moves it little.
pub(crate) const GAIN_PER_SECOND: f64 = 0.03;

/// The correction's bounds, as fractions of the limit: it mends what the cushions leave (a few
/// per cent), and a view misread in a transient can cost no more than this.
pub(crate) const CORRECTION_BOUNDS: (f64, f64) = (-0.03, 0.03);

/// How long a bucket's fleet view must have named the same instances with about the same
/// demand ([`SHIFT`]), and this instance's streams all been measured under a known demand,
/// before the correction moves: in a transient (a start, an instance or an Envoy gone or
/// come, a stream reconnected) what was admitted follows the shares a report interval late,
/// and integrating that gap would wind the correction up.
pub(crate) const SETTLE: Duration = Duration::from_secs(10);

/// A fleet demand that moved by more than this fraction since the hold began restarts it
/// (the noise of a demand measured over 5 s is about 1 %; an Envoy of ten gone, 5 %).
pub(crate) const SHIFT: f64 = 0.03;

/// A fleet asking for more than this times its limit is saturated: it should admit the limit,
/// and the correction works; below it, the correction fades (halves every sync).
pub(crate) const SATURATED: f64 = 1.05;

/// One stream's claim on an instance's part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Claim {
    /// Requests per second, admitted and denied.
    pub(crate) demand: f64,
    /// Seconds the demand was measured over; 0 for an estimate (a stream not measured yet).
    pub(crate) window: f64,
}

/// One stream's allotment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allot {
    /// Tokens per fill.
    pub(crate) tokens: u64,
    /// Measured and given all it asks for (below its fair part): its bucket is made deeper.
    pub(crate) unsaturated: bool,
}

/// Splits an instance's `part` (tokens per `fill_seconds`) among its streams' `claims`: the
/// split of [`water_fill`] (the same as the shares that sum to the part), then a cushion for
/// each stream given all it asks for, and this instance's `correction` (tokens per fill; may
/// be negative) spread over the others in proportion to their shares. The cushions and a
/// positive correction are scaled down together to keep the sum within [`OVERCOMMIT`] times
/// the part.
pub(crate) fn allot(part: u64, fill_seconds: u64, claims: &[Claim], correction: f64) -> Vec<Allot> {
    let fill = fill_seconds.max(1) as f64;
    let demands: Vec<f64> = claims.iter().map(|c| c.demand * fill).collect();
    let exact = water_fill(part as f64, &demands);
    let base = super::share::split_tokens(part, &demands);
    let uncut: Vec<bool> = exact
        .iter()
        .zip(&demands)
        .map(|(share, demand)| *share + 1e-9 * (part as f64).max(1.0) >= *demand)
        .collect();
    let cushions: Vec<f64> = claims
        .iter()
        .zip(&exact)
        .zip(&uncut)
        .map(|((claim, share), uncut)| {
            if !uncut || claim.window <= 0.0 || !claim.demand.is_finite() || claim.demand <= 0.0 {
                return 0.0;
            }
            let rate =
                claim.demand * (1.0 + HEADROOM) + POISSON_Z * (claim.demand / claim.window).sqrt();
            (rate * fill - share).max(0.0)
        })
        .collect();
    let cut_total: f64 = exact
        .iter()
        .zip(&uncut)
        .filter(|(_, uncut)| !**uncut)
        .map(|(share, _)| share)
        .sum();
    let correction = if correction.is_finite() {
        correction
    } else {
        0.0
    };
    let corrections: Vec<f64> = exact
        .iter()
        .zip(&uncut)
        .map(|(share, uncut)| {
            if *uncut || cut_total <= 0.0 {
                0.0
            } else {
                // A negative correction takes at most half of a share.
                (correction * share / cut_total).max(-share / 2.0)
            }
        })
        .collect();
    let over: f64 =
        cushions.iter().sum::<f64>() + corrections.iter().map(|c| c.max(0.0)).sum::<f64>();
    let room = (OVERCOMMIT - 1.0) * part as f64;
    let scale = if over > room { room / over } else { 1.0 };
    base.iter()
        .zip(cushions.iter().zip(&corrections))
        .zip(uncut.iter().zip(claims))
        .map(|((&tokens, (cushion, correction)), (&uncut, claim))| {
            let correction = if *correction > 0.0 {
                correction * scale
            } else {
                *correction
            };
            let extra = cushion * scale + correction;
            let tokens = (tokens as f64 + extra).floor().max(0.0) as u64;
            Allot {
                tokens,
                unsaturated: uncut && claim.window > 0.0,
            }
        })
        .collect()
}

/// The fleet's correction after a sync, from `before` (tokens per fill): when the fleet asks
/// for more than its `limit` (tokens per `fill_seconds`; [`SATURATED`]), moved by
/// [`GAIN_PER_SECOND`] of the shortfall per second of `interval` (what it admitted, by every
/// live instance's report in `peers`, against the limit), within [`CORRECTION_BOUNDS`];
/// otherwise halved towards none.
pub(crate) fn correct(
    before: f64,
    limit: u64,
    fill_seconds: u64,
    peers: &[Peer],
    interval: f64,
) -> f64 {
    let limit = limit as f64;
    let fill = fill_seconds.max(1) as f64;
    let before = if before.is_finite() { before } else { 0.0 };
    let demand: f64 = peers.iter().map(|p| p.demand).sum::<f64>() * fill;
    if demand < SATURATED * limit {
        return before / 2.0;
    }
    let admitted: f64 = peers.iter().map(|p| p.admitted).sum::<f64>() * fill;
    let gain = (GAIN_PER_SECOND * interval).min(0.5);
    let (low, high) = CORRECTION_BOUNDS;
    (before + gain * (limit - admitted)).clamp(low * limit, high * limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(demands: &[(f64, f64)]) -> Vec<Claim> {
        demands
            .iter()
            .map(|&(demand, window)| Claim { demand, window })
            .collect()
    }

    #[test]
    fn streams_below_their_fair_part_get_a_cushion_the_others_their_share() {
        // 1000/s among a hot stream (2400/s), a warm one (150) and a cold one (25), each
        // measured over 5 s: the warm and cold get their demand and a cushion, the hot the rest.
        let a = allot(
            1000,
            1,
            &claims(&[(2400.0, 5.0), (150.0, 5.0), (25.0, 5.0)]),
            0.0,
        );
        assert_eq!(
            a[0],
            Allot {
                tokens: 825,
                unsaturated: false
            }
        );
        // 150 * 1.1 + 2 * sqrt(30) = 175.95; 25 * 1.1 + 2 * sqrt(5) = 31.97.
        assert_eq!(
            a[1],
            Allot {
                tokens: 175,
                unsaturated: true
            }
        );
        assert_eq!(
            a[2],
            Allot {
                tokens: 31,
                unsaturated: true
            }
        );
        // An estimate (no window) gets no cushion.
        let a = allot(1000, 1, &claims(&[(2400.0, 5.0), (150.0, 0.0)]), 0.0);
        assert_eq!(a[1].tokens, 150);
    }

    #[test]
    fn the_correction_goes_to_the_saturated_and_everything_stays_within_the_bound() {
        let c = claims(&[(2400.0, 5.0), (1200.0, 5.0), (25.0, 5.0)]);
        let plain = allot(1000, 1, &c, 0.0);
        let more = allot(1000, 1, &c, 30.0);
        assert_eq!(more[2], plain[2], "the unsaturated keep theirs");
        let gained: u64 = more.iter().map(|a| a.tokens).sum::<u64>()
            - plain.iter().map(|a| a.tokens).sum::<u64>();
        assert!((29..=30).contains(&gained), "{gained}");
        let less = allot(1000, 1, &c, -40.0);
        assert!(less[0].tokens < plain[0].tokens && less[1].tokens < plain[1].tokens);
        // Many small streams and a big correction: at most 1.25 times the part.
        let c: Vec<Claim> = (0..100)
            .map(|i| Claim {
                demand: if i == 0 { 5000.0 } else { 5.0 },
                window: 1.0,
            })
            .collect();
        let sum: u64 = allot(1000, 1, &c, 250.0).iter().map(|a| a.tokens).sum();
        assert!((1000..=1250).contains(&sum), "{sum}");
    }

    #[test]
    fn a_long_fill_interval_compares_demand_in_its_tokens() {
        // 10/s as 1000 tokens per 100 s; demands 20/s and 1/s: the first is cut, not both
        // scaled as if 21 tokens wanted fitted in 1000.
        let a = allot(1000, 100, &claims(&[(20.0, 5.0), (1.0, 5.0)]), 0.0);
        assert!(!a[0].unsaturated && a[1].unsaturated, "{a:?}");
        assert_eq!(a[0].tokens, 900);
    }

    #[test]
    fn the_correction_closes_the_shortfall_of_a_saturated_fleet_only() {
        let peer = |demand: f64, admitted: f64| Peer {
            instance: "a".into(),
            demand,
            admitted,
        };
        // 3000/s wanted, 960 admitted of 1000: 3 % of the 40 missing per second.
        let up = correct(
            0.0,
            1000,
            1,
            &[peer(2000.0, 500.0), peer(1000.0, 460.0)],
            1.0,
        );
        assert!((up - 1.2).abs() < 1e-9, "{up}");
        assert_eq!(
            correct(20.0, 1000, 1, &[peer(3000.0, 0.0)], 1.0),
            30.0,
            "bounded"
        );
        assert_eq!(correct(-20.0, 1000, 1, &[peer(3000.0, 5000.0)], 1.0), -30.0);
        // Not saturated: it fades.
        assert_eq!(correct(40.0, 1000, 1, &[peer(900.0, 900.0)], 1.0), 20.0);
        assert_eq!(correct(f64::NAN, 1000, 1, &[peer(900.0, 900.0)], 1.0), 0.0);
    }
}
