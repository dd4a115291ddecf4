//! Our `calendar` extension of a limit: `calendar: {time_zone, anchor}`.

use super::error::RlsConfigError;
use super::read::{Ctx, get};
use super::unit::Unit;
use super::validate::join;
use super::yaml::Node;
use crate::Algorithm;
use crate::calendar::{Calendar, Unit as CalendarUnit};

/// A limit's `calendar: {time_zone, anchor}` (our extension): its windows follow the calendar
/// of its `unit` (day, week, month or year) in the time zone (IANA; UTC when absent) from the
/// anchor (`Calendar::parse`), instead of the Go service's epoch-aligned spans (a month of 30
/// days). Only on a fixed window of one unit.
pub(super) fn read_calendar(
    ctx: &Ctx<'_>,
    fields: &[(Node, Node)],
    path: &str,
    unit: Unit,
    algorithm: Algorithm,
    unit_multiplier: u32,
) -> Result<Option<Calendar>, RlsConfigError> {
    let Some(node) = get(fields, "calendar") else {
        return Ok(None);
    };
    let here = join(path, "calendar");
    let calendar_unit = match unit {
        Unit::Day => CalendarUnit::Day,
        Unit::Week => CalendarUnit::Week,
        Unit::Month => CalendarUnit::Month,
        Unit::Year => CalendarUnit::Year,
        Unit::Second | Unit::Minute | Unit::Hour => {
            return Err(ctx.extension(
                node,
                &here,
                format!(
                    "a calendar's unit is day, week, month or year, not {}",
                    unit.name()
                ),
            ));
        }
    };
    if algorithm != Algorithm::FixedWindow {
        return Err(ctx.extension(
            node,
            &here,
            format!(
                "only fixed windows follow a calendar, not {algorithm}: a sliding window, log, token bucket or GCRA limits any span of its period, wherever it starts"
            ),
        ));
    }
    if unit_multiplier != 1 {
        return Err(ctx.extension(
            node,
            &here,
            "a calendar window is one unit long: no unit_multiplier",
        ));
    }
    let pairs = ctx.map(Some(node), &here)?.unwrap_or(&[]);
    let zone = ctx.string(get(pairs, "time_zone"), &join(&here, "time_zone"))?;
    let anchor = ctx.string(get(pairs, "anchor"), &join(&here, "anchor"))?;
    let zone = if zone.is_empty() {
        "UTC"
    } else {
        zone.as_str()
    };
    let anchor = (!anchor.is_empty()).then_some(anchor.as_str());
    Calendar::parse(calendar_unit, anchor, zone)
        .map(Some)
        .map_err(|e| ctx.extension(node, &here, e.to_string()))
}
