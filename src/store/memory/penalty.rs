//! The penalty box in memory: a key that a limit denied stays denied until `blocked_until`,
//! kept in its entry (as Redis keeps it in a key beside the state), nothing consumed.

use std::time::Duration;

use super::entry::Entry;
use crate::algorithm::span;
use crate::decision::{LimitState, LimitStates};
use crate::policy::Policy;

/// What [`Entry::check`] answers for `costs` (one per limit, or one for all), pushed onto
/// `states`, under the policy's penalty box if it has one: whether the key is (now) in the box.
// Inlined into the check and the mirror, its two callers.
#[inline]
pub(super) fn check(
    entry: &mut Entry,
    policy: &Policy,
    costs: &[u64],
    now: u64,
    states: &mut LimitStates,
) -> bool {
    let penalty = policy.penalty_us();
    if penalty > 0 && entry.blocked_until > now {
        *states = blocked(policy, entry.blocked_until - now);
        return true;
    }
    entry.check_into(policy, costs, now, states);
    // A cost no limit could ever admit is refused without boxing the key.
    if penalty == 0
        || states.iter().all(LimitState::is_allowed)
        || states.iter().any(LimitState::exceeds_capacity)
    {
        return false;
    }
    entry.blocked_until = now.saturating_add(penalty);
    entry.expires_at = entry.expires_at.max(entry.blocked_until);
    for state in states.iter_mut() {
        state.boxed(Duration::from_micros(penalty));
    }
    true
}

/// Every limit of `policy` denied for `left` µs more: the key is in the box.
pub(super) fn blocked(policy: &Policy, left: u64) -> LimitStates {
    policy
        .limits()
        .iter()
        .map(|limit| LimitState::from_raw(*limit, false, 0, left, span(left)))
        .collect()
}
