//! What one permit holds in a limit: a reserved slot (in the store or in memory), or an
//! admission by a check (policies that do not reserve), and how to give it back.

use std::time::Duration;

use crate::store::{Refund, Reservation};

/// Where a booking was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Store,
    Local,
}

#[derive(Debug)]
pub(super) enum Booking {
    /// A slot reserved in the store or in memory, of the permit's cost.
    Reserved(Place, u64, Reservation),
    /// Admitted by a check: its cost, and the store's time and token of the decision (for a
    /// refund), if it can be refunded.
    Checked(Place, u64, Option<(u64, u64)>),
    /// Nothing (a cost of 0).
    Nothing,
}

/// How to give back part of a booking.
pub(super) enum Undo {
    /// A reservation's give back, of these costs (one per limit, or one for all).
    Reserved(Place, Box<[u64]>),
    /// A refund of a check's admission.
    Refund(Place, Refund),
}

impl Booking {
    /// How long to wait, from the answer, before the slot.
    pub(super) fn wait(&self) -> Duration {
        match self {
            Booking::Reserved(_, _, r) => r.wait(),
            _ => Duration::ZERO,
        }
    }

    /// The permit's cost.
    pub(super) fn cost(&self) -> u64 {
        match self {
            Booking::Reserved(_, cost, _) | Booking::Checked(_, cost, _) => *cost,
            Booking::Nothing => 0,
        }
    }

    /// Where it was decided.
    pub(super) fn place(&self) -> Option<Place> {
        match self {
            Booking::Reserved(place, ..) | Booking::Checked(place, ..) => Some(*place),
            Booking::Nothing => None,
        }
    }

    /// How to give back `cost` of the permit's units (all of them for `None`; part of a
    /// reservation as `unit_costs` spreads units over the limits); `None` if there is nothing
    /// to give back.
    pub(super) fn undo(
        &self,
        unit_costs: impl FnOnce(u64) -> Box<[u64]>,
        cost: Option<u64>,
    ) -> Option<Undo> {
        let all = self.cost();
        let cost = cost.unwrap_or(all).min(all);
        match self {
            _ if cost == 0 => None,
            Booking::Reserved(place, _, r) if cost == all => {
                Some(Undo::Reserved(*place, r.costs().into()))
            }
            Booking::Reserved(place, ..) => Some(Undo::Reserved(*place, unit_costs(cost))),
            Booking::Checked(place, _, Some((at_us, token))) => {
                Some(Undo::Refund(*place, Refund::new(cost, *at_us, *token)))
            }
            _ => None,
        }
    }
}
