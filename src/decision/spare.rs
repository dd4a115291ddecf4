//! Where a decision is made: in its `Arc`'s allocation, never on the stack and copied in, and
//! in the allocation of the last one dropped on the thread if nothing else held it. A
//! request's decision is made, read, put in its extensions and dropped with them: an
//! allocation and a free per request become a reference count's increment and decrement.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use super::{Decision, DecisionSource, Inner, LimitStates};
use crate::identity::DecisionId;

thread_local! {
    /// The last decision dropped on this thread that nothing else held.
    static SPARE: Cell<Option<Arc<Inner>>> = const { Cell::new(None) };
}

impl Drop for Decision {
    fn drop(&mut self) {
        // Its last holder: kept for the next decision instead of freed (a thread being torn
        // down keeps nothing).
        if Arc::strong_count(&self.0) == 1 {
            // A denied key is a client's identity (an address, a token's subject): not kept
            // past its decision on a thread that may make no other.
            if self.0.denied_key.is_some()
                && let Some(inner) = Arc::get_mut(&mut self.0)
            {
                inner.denied_key = None;
            }
            let _ = SPARE.try_with(|spare| spare.set(Some(Arc::clone(&self.0))));
        }
    }
}

/// What `Inner::new(policy, now_us, LimitStates::new())` makes, in this thread's spare
/// allocation if it has one, and what `fill` makes of it before it is shared.
pub(super) fn filled<T>(
    policy: Arc<str>,
    now_us: u64,
    fill: impl FnOnce(&mut Inner) -> T,
) -> (Arc<Inner>, T) {
    let (mut shared, reset) = match SPARE.try_with(Cell::take).ok().flatten() {
        Some(spare) => (spare, Some(policy)),
        None => {
            let fresh = in_place(|| Inner::new(policy, now_us, LimitStates::new()));
            (fresh, None)
        }
    };
    // Unique either way (nothing clones the spare): no copy.
    let inner = Arc::make_mut(&mut shared);
    if let Some(policy) = reset {
        inner.reset(policy, now_us);
    }
    let out = fill(inner);
    (shared, out)
}

/// The `Arc` of what `make` makes, made where the `Arc` keeps it. `Arc::new` takes its value
/// made before the allocation, on the stack, and copies it in (the 336 bytes of an `Inner`,
/// a `memcpy` per decision); `new_cyclic` allocates first and then calls `make`, which,
/// inlined, writes the fields into the allocation.
#[inline(always)]
fn in_place(make: impl FnOnce() -> Inner) -> Arc<Inner> {
    Arc::new_cyclic(|_| make())
}

impl Inner {
    /// `limits` evaluated at `now_us`, not yet [combined](Inner::combine).
    // Inlined: built where the `Arc` keeps it (`in_place`), not on the stack and copied there.
    #[inline(always)]
    pub(super) fn new(policy: Arc<str>, now_us: u64, limits: LimitStates) -> Self {
        Inner {
            policy,
            allowed: true,
            unix: Duration::from_micros(now_us),
            before_epoch: None,
            limits,
            governing: None,
            source: DecisionSource::Store,
            denied_key: None,
            penalized: false,
            id: DecisionId::next(),
            lease: None,
        }
    }

    /// Makes this what [`Inner::new`] makes with no limit states, in place (the states'
    /// allocation, if they spilled, kept).
    #[inline(always)]
    fn reset(&mut self, policy: Arc<str>, now_us: u64) {
        let Inner {
            policy: name,
            allowed,
            unix,
            before_epoch,
            limits,
            governing,
            source,
            denied_key,
            penalized,
            id,
            lease,
        } = self;
        *name = policy;
        *allowed = true;
        *unix = Duration::from_micros(now_us);
        *before_epoch = None;
        limits.clear();
        *governing = None;
        *source = DecisionSource::Store;
        *denied_key = None;
        *penalized = false;
        *id = DecisionId::next();
        *lease = None;
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::key::Key;
    use crate::lease::Lease;
    use crate::{Limit, LimitState, Policy};

    #[test]
    fn a_reused_decision_carries_nothing_of_the_last() {
        let limit = Limit::gcra(5, Duration::from_secs(1)).expect("a limit");
        let policy = Policy::new("b", [limit]).expect("a policy");
        // Denied, penalized, naming its key, holding a lease, decided in memory before the
        // epoch: every field off its fresh value.
        let denied = LimitState::from_raw(limit, false, 0, 10, 10);
        let named_a = Policy::new("a", [limit]).expect("a policy");
        let first = Decision::new(&named_a, UNIX_EPOCH - Duration::from_secs(3), [denied]);
        let mut first = first
            .expect("a decision")
            .with_source(DecisionSource::Local)
            .penalized()
            .with_lease(Lease::new(9));
        first.name_denied_key(&Key::new("k"));
        assert!(first.evaluated_at() < UNIX_EPOCH && !first.is_allowed());
        let (at, id) = (Arc::as_ptr(&first.0), first.id().0);
        drop(first);
        let parked = SPARE.with(|spare| {
            let parked = spare.take();
            let named = parked.as_ref().map(|inner| inner.denied_key.is_some());
            spare.set(parked);
            named
        });
        assert_eq!(parked, Some(false), "parked, without the client's key");

        let (second, ()) = Decision::filled(Arc::from("b"), 7_000_000, |states| {
            states.push(LimitState::allowed(limit, 4, Duration::from_millis(200)));
        });
        assert_eq!(Arc::as_ptr(&second.0), at, "the allocation is reused");
        let state = LimitState::allowed(limit, 4, Duration::from_millis(200));
        let fresh = Decision::new(&policy, UNIX_EPOCH + Duration::from_secs(7), [state]);
        assert_eq!(second, fresh.expect("a decision"));
        assert!(!second.is_penalized() && second.lease().is_none());
        assert_eq!(second.source(), DecisionSource::Store);
        assert_eq!(second.evaluated_at(), UNIX_EPOCH + Duration::from_secs(7));
        assert!(second.is_allowed() && second.governing().is_some());
        assert!(second.denied_key().is_none() && second.denied_by().is_none());
        assert_ne!(second.id().0, id, "a new identity");
    }
}
