//! Calendars kept for the life of the process, so that a [`Limit`](crate::Limit) (a `Copy`
//! value) can hold one by reference. A process has a handful of calendars: each distinct one
//! is kept once, however often policies are built or reloaded with it.

use std::sync::Mutex;

use super::Calendar;

static CALENDARS: Mutex<Vec<&'static Calendar>> = Mutex::new(Vec::new());

/// The process's copy of `calendar`.
pub(crate) fn intern(calendar: Calendar) -> &'static Calendar {
    let mut kept = CALENDARS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(same) = kept.iter().find(|c| ***c == calendar) {
        return same;
    }
    let leaked: &'static Calendar = Box::leak(Box::new(calendar));
    kept.push(leaked);
    leaked
}
