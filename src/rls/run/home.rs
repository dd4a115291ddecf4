//! Where a counter lives: the service's store, or the per-second store (envoyproxy/ratelimit's
//! `REDIS_PERSECOND`) for the limits whose unit is `second`. The rule is by unit, as there: a
//! limit of unit `second` goes to the per-second store whatever its `unit_multiplier` or
//! `algorithm`, and stays there under an admin override of another period.

use super::super::plan::Counter;
use super::{Runner, Via};
use crate::engine::Engine;

/// The store a counter lives in: envoyproxy/ratelimit's `REDIS_PERSECOND` rule, by unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::rls) enum Home {
    /// The service's store.
    Main,
    /// The per-second store: limits whose unit is `second`, whatever their multiplier or
    /// algorithm.
    PerSecond,
}

/// Where a request's counters live: all in the main store, or split by unit.
#[derive(Debug, Clone, Copy)]
pub(in crate::rls) struct Homes {
    /// A per-second store is in use.
    pub(in crate::rls) split: bool,
}

impl Homes {
    /// `counter`'s store: the per-second one for a limit of unit `second` (its rule's, before
    /// any admin override: a counter stays where it is; or the descriptor's own `limit`),
    /// when there is one.
    pub(in crate::rls) fn of(self, counter: &Counter) -> Home {
        if self.split && counter.per_second {
            Home::PerSecond
        } else {
            Home::Main
        }
    }
}

impl Runner<'_> {
    /// Where the counters live: split by unit over two stores, or all in one (the local
    /// fallback keeps every counter in its memory).
    pub(in crate::rls) fn homes(&self) -> Homes {
        Homes {
            split: matches!(
                self.via,
                Via::Engine {
                    per_second: Some(_),
                    ..
                }
            ),
        }
    }

    /// The engine of `home`'s store (`None` for the local fallback).
    pub(in crate::rls) fn engine(&self, home: Home) -> Option<&Engine> {
        match self.via {
            Via::Engine {
                engine, per_second, ..
            } => Some(pick(engine, per_second, home)),
            Via::Local(..) => None,
        }
    }
}

/// The engine of `home`: the per-second store's when there is one, else the main one's.
pub(super) fn pick<'e>(
    engine: &'e Engine,
    per_second: Option<&'e Engine>,
    home: Home,
) -> &'e Engine {
    match (home, per_second) {
        (Home::PerSecond, Some(per_second)) => per_second,
        _ => engine,
    }
}
