//! Instances gone from a bucket's fleet view (their entry expired: stopped or crashed) are
//! counted a while longer, since their Envoys still hold what they were given until they
//! reconnect to another instance.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::demand::{instance_demand, my_part, watcher_claims};
use super::fleet::Peer;
use super::hub::{Hub, State};
use super::quota::Quota;

/// How long an instance gone from the fleet view (its entry expired: it stopped, or
/// crashed) is still counted with its last demand: its Envoys keep the shares it gave them
/// (after a crash, until their TTL) or their fallback (after TTL 0) until they reconnect, to
/// another instance, at their next report, one report interval at most (Envoy: 5 s). Giving
/// its part to the others at once made the fleet admit 1.5 times the limit for two seconds
/// after a crash; what reconnects here comes off it.
pub(crate) const GHOST: Duration = Duration::from_secs(5);

/// The ghosts of `before`'s instances missing from `after` (not this `instance`), kept
/// until [`GHOST`] has passed or they are back.
pub(crate) fn haunt(
    ghosts: &mut Vec<(Peer, Instant)>,
    before: &[Peer],
    after: &[Peer],
    instance: &str,
    now: Instant,
) {
    ghosts.retain(|(ghost, until)| {
        *until > now && ghost.demand > 0.0 && !after.iter().any(|p| p.instance == ghost.instance)
    });
    for gone in before {
        let missing = gone.instance != instance
            && !after.iter().any(|p| p.instance == gone.instance)
            && !ghosts.iter().any(|(g, _)| g.instance == gone.instance);
        if missing && gone.demand > 0.0 {
            ghosts.push((gone.clone(), now + GHOST));
        }
    }
}

/// While the fleet counts instances gone lately, this instance's part again at once when a
/// stream comes (an Envoy reconnecting: its demand took some of a ghost's), from the last
/// view with this instance's demand now: the Envoys coming back get their shares of it now,
/// not of what this instance held before them.
pub(crate) fn reshare(hub: &Hub, state: &mut State, key: &Arc<str>, now: Instant) {
    let Some(bucket) = state.buckets.get(key) else {
        return;
    };
    let Quota::Rate {
        tokens,
        fill_seconds,
    } = bucket.quota
    else {
        return;
    };
    if bucket.ghosts.is_empty() || bucket.share.is_none() {
        return;
    }
    let demand = instance_demand(&watcher_claims(hub, state, bucket, key, now));
    let mut split = bucket.peers.clone();
    let Some(mine) = split.iter_mut().find(|p| p.instance == hub.instance) else {
        return;
    };
    mine.demand = demand;
    let share = my_part(
        hub,
        tokens,
        fill_seconds,
        &with_ghosts(split, &bucket.ghosts),
    );
    if let (Some(share), Some(bucket)) = (share, state.buckets.get_mut(key)) {
        bucket.share = Some(share);
    }
}

/// Whether two fleet views name the same instances.
pub(crate) fn same_instances(a: &[Peer], b: &[Peer]) -> bool {
    a.len() == b.len() && a.iter().all(|p| b.iter().any(|q| q.instance == p.instance))
}

/// `peers` and the instances gone whose part is still held: the split the shares come from.
pub(crate) fn with_ghosts(mut peers: Vec<Peer>, ghosts: &[(Peer, Instant)]) -> Vec<Peer> {
    peers.extend(ghosts.iter().map(|(ghost, _)| ghost.clone()));
    peers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(instance: &str, demand: f64) -> Peer {
        Peer {
            instance: instance.into(),
            demand,
            admitted: 0.0,
        }
    }

    #[test]
    fn an_instance_gone_is_counted_for_one_report_interval_unless_back() {
        let t0 = Instant::now();
        let mut ghosts = Vec::new();
        let before = [peer("me", 100.0), peer("b", 300.0), peer("c", 0.0)];
        // b and c expire: b is held (with its demand), c asked nothing; never this instance.
        haunt(&mut ghosts, &before, &[peer("me", 100.0)], "me", t0);
        assert_eq!(ghosts.len(), 1);
        assert_eq!(ghosts[0].0, peer("b", 300.0));
        // Counted once, not again at the next sync.
        haunt(
            &mut ghosts,
            &[peer("me", 100.0)],
            &[peer("me", 100.0)],
            "me",
            t0,
        );
        assert_eq!(ghosts.len(), 1);
        // Gone after GHOST.
        haunt(&mut ghosts, &[], &[peer("me", 1.0)], "me", t0 + GHOST);
        assert!(ghosts.is_empty());
        // Or as soon as it is back.
        haunt(&mut ghosts, &before, &[peer("me", 100.0)], "me", t0);
        haunt(&mut ghosts, &[], &[peer("b", 1.0)], "me", t0);
        assert!(ghosts.is_empty());
        // Or once all its demand reconnected elsewhere (HubBucket::reconnected lowers it).
        haunt(&mut ghosts, &before, &[peer("me", 100.0)], "me", t0);
        ghosts[0].0.demand = 0.0;
        haunt(&mut ghosts, &[], &[peer("me", 1.0)], "me", t0);
        assert!(ghosts.is_empty());
    }
}
