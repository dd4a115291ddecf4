//! Calendar window: a fixed window whose windows follow a calendar in a time zone (days,
//! weeks, months, years; `crate::calendar`). Twin of `lua/calendar_window.lua`.
//!
//! The state and the rules are the fixed window's (`fixed_window.rs`); only where a window
//! ends differs, and that takes a time zone database, which Lua does not have. So the caller
//! computes it: where the algorithms take a period, a calendar window takes the end of the
//! window that holds the time in question (now for a check and a charge, the admission's time
//! for a refund), as [`Limit::period_arg`](crate::Limit) computes it. The Lua twin is given
//! the boundaries around the client's time instead, and picks the window with Redis's.
//!
//! A changed calendar (another anchor, zone or unit) keeps the count as a changed fixed
//! window does: a stored window that has not ended counts in the current one, and the next
//! write moves it to the current window's end. That never forgets units before the stored
//! window ends; it may hold them a little past the new window's end (a later anchor) or
//! forget them when the old window ends before the new one would (an earlier one).

use super::fixed_window::{self, State};
use super::{PerKey, RateAlgorithm, Step};

/// The calendar window in the table.
pub(crate) struct CalendarWindow;

impl RateAlgorithm for CalendarWindow {
    const NAME: &'static str = "calendar";
    const CODE: &'static str = "cw";
    const LUA_FN: &'static str = "calendar_window";
    const LUA_FILE: &'static str = include_str!("../../lua/calendar_window.lua");
    type State = State;

    /// `end`: the end of the calendar window that holds `now`.
    fn check(
        state: Option<State>,
        _: &PerKey,
        count: u64,
        end: u64,
        cost: u64,
        now: u64,
    ) -> Step<State> {
        fixed_window::check_in(state, count, end.max(now + 1), cost, now)
    }

    /// `end`: the end of the calendar window that holds `now`.
    fn charge(state: Option<State>, count: u64, end: u64, cost: u64, now: u64) -> (State, u64) {
        fixed_window::charge_in(state, count, end.max(now + 1), cost, now)
    }

    /// `end`: the end of the calendar window that holds `at`.
    fn refund(state: &mut Option<State>, _: u64, end: u64, cost: u64, _at: u64, now: u64) -> bool {
        fixed_window::refund_in(state, end, cost, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_until_the_window_s_end_then_forgets() {
        let (now, end) = (1_000, 5_000);
        let step = CalendarWindow::check(None, &PerKey::default(), 2, end, 2, now);
        assert!(step.eval.allowed);
        assert_eq!(
            (step.next.end, step.ttl, step.eval.reset_after),
            (end, 4_000, 4_000)
        );
        let denied = CalendarWindow::check(Some(step.next), &PerKey::default(), 2, end, 1, 4_999);
        assert!(!denied.eval.allowed);
        assert_eq!(denied.eval.retry, 1, "retry at the window's end exactly");
        let next = CalendarWindow::check(Some(step.next), &PerKey::default(), 2, 9_000, 1, end);
        assert!(next.eval.allowed, "the next window");
        assert_eq!(next.eval.remaining_after, 1);
    }

    #[test]
    fn a_refund_needs_the_admission_s_window() {
        let mut state = Some(State {
            end: 5_000,
            count: 2,
        });
        assert!(!CalendarWindow::refund(
            &mut state, 2, 9_000, 1, 6_000, 6_000
        ));
        assert!(CalendarWindow::refund(
            &mut state, 2, 5_000, 1, 1_000, 2_000
        ));
        assert_eq!(state.unwrap().count, 1);
    }
}
